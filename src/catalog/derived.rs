//! Answers that layers above the catalog derive from one snapshot and keep
//! with it, made once each, whichever session asks first.
//!
//! The catalog does not know their types (an MCP `tools/list` is rmcp's),
//! so they are kept as `Any` under keys their makers choose.

use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

/// What was derived from one snapshot, by key.
#[derive(Default)]
pub struct Derived(Mutex<HashMap<String, Arc<dyn Any + Send + Sync>>>);

impl Derived {
    /// The value kept under `key`, made by `make` the first time (under the
    /// lock: a second asker waits rather than making it again). An error is
    /// not kept, so the next asker tries again.
    pub fn get_or_try_make<T, E>(&self, key: &str, make: impl FnOnce() -> Result<T, E>) -> Result<Arc<T>, E>
    where
        T: Any + Send + Sync,
    {
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(found) = kept.get(key).and_then(|v| v.clone().downcast::<T>().ok()) {
            return Ok(found);
        }
        let made = Arc::new(make()?);
        kept.insert(key.to_owned(), made.clone());
        Ok(made)
    }
}

impl fmt::Debug for Derived {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_set().entries(kept.keys()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_once_and_errors_not_kept() {
        let derived = Derived::default();
        let mut made = 0;
        let failed: Result<Arc<u32>, &str> = derived.get_or_try_make("k", || Err("not yet"));
        assert_eq!(failed, Err("not yet"));
        for _ in 0..3 {
            let got = derived.get_or_try_make::<u32, ()>("k", || {
                made += 1;
                Ok(7)
            });
            assert_eq!(got.map(|v| *v), Ok(7));
        }
        assert_eq!(made, 1);
        // Another type under the same key is made anew, not mistaken.
        let other = derived.get_or_try_make::<String, ()>("k", || Ok("x".to_owned()));
        assert_eq!(other.map(|v| v.to_string()), Ok("x".to_owned()));
    }
}
