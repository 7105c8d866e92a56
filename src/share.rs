//! Fair shares of a bounded pool (event streams, MCP sessions): at most
//! `total` held at once, and at most `per_holder` by any one holder, so
//! that one caller cannot take them all and lock everyone else out.
//!
//! A holder is a token's name; a caller without a token is known only by
//! its address, so all of them on one address (every local caller of an
//! open server) share one share. See [`holder`].

use crate::setting::SettingError;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};

/// One holder's share of a whole of `total`, as configured: `given`
/// (the setting `key`), which may not be more than the whole (the
/// setting `of`), else `default` cut to the whole; at least 1.
pub fn configured(
    key: &'static str,
    given: Option<usize>,
    default: usize,
    of: &str,
    total: usize,
) -> Result<usize, SettingError> {
    match given {
        Some(share) if share > total => Err(SettingError::new(
            key,
            format!("{key} ({share}) is more than {of} ({total})"),
        )),
        given => Ok(given.unwrap_or(default).clamp(1, total.max(1))),
    }
}

/// A pool of `total` places, `per_holder` of them at most to one holder.
#[derive(Debug)]
pub struct Pool {
    total: usize,
    per_holder: usize,
    held: Mutex<Held>,
}

#[derive(Debug, Default)]
struct Held {
    all: usize,
    by: HashMap<String, usize>,
}

/// Why no place was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Every place is taken (whoever holds them).
    Full { total: usize },
    /// The holder already has its share.
    OverShare { per_holder: usize },
}

/// A place in a [`Pool`], given back when dropped.
#[derive(Debug)]
pub struct Share {
    pool: Arc<Pool>,
    holder: String,
}

/// Who holds a share: the token's name, else the caller's address, else
/// (no address known: a request not from a socket) every such caller.
pub fn holder(token_name: Option<&str>, peer: Option<IpAddr>) -> String {
    match (token_name, peer) {
        (Some(name), _) => format!("token {name}"),
        (None, Some(ip)) => format!("address {ip}"),
        (None, None) => "anonymous".to_owned(),
    }
}

impl Pool {
    /// `per_holder` is at most `total`, and both at least 1.
    pub fn new(total: usize, per_holder: usize) -> Arc<Self> {
        let total = total.max(1);
        Arc::new(Self {
            total,
            per_holder: per_holder.clamp(1, total),
            held: Mutex::default(),
        })
    }

    /// A place for `holder`: refused when the pool is full, else when the
    /// holder has its share already.
    pub fn take(self: &Arc<Self>, holder: &str) -> Result<Share, Refused> {
        let mut held = self.lock();
        if held.all >= self.total {
            return Err(Refused::Full { total: self.total });
        }
        let mine = held.by.entry(holder.to_owned()).or_default();
        if *mine >= self.per_holder {
            return Err(Refused::OverShare {
                per_holder: self.per_holder,
            });
        }
        *mine += 1;
        held.all += 1;
        Ok(Share {
            pool: self.clone(),
            holder: holder.to_owned(),
        })
    }

    /// Places taken now, by everyone.
    pub fn taken(&self) -> usize {
        self.lock().all
    }

    fn lock(&self) -> MutexGuard<'_, Held> {
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        let mut held = self.pool.lock();
        held.all = held.all.saturating_sub(1);
        if let Some(mine) = held.by.get_mut(&self.holder) {
            *mine = mine.saturating_sub(1);
            if *mine == 0 {
                held.by.remove(&self.holder);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_gets_its_share_and_the_rest_stays_for_others() {
        let pool = Pool::new(3, 2);
        let a1 = pool.take("a").unwrap();
        let _a2 = pool.take("a").unwrap();
        assert_eq!(pool.take("a").unwrap_err(), Refused::OverShare { per_holder: 2 });
        let _b = pool.take("b").unwrap();
        assert_eq!(pool.take("c").unwrap_err(), Refused::Full { total: 3 });
        drop(a1);
        assert_eq!(pool.taken(), 2);
        assert!(pool.take("a").is_ok());
    }

    #[test]
    fn a_share_is_never_above_the_total() {
        let pool = Pool::new(2, 10);
        let _a = pool.take("a").unwrap();
        let _b = pool.take("a").unwrap();
        assert_eq!(pool.take("a").unwrap_err(), Refused::Full { total: 2 });
    }
}
