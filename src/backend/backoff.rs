//! How soon a backend's child (or an upstream server) is started again
//! after failures in a row: 0.25 s after the first, doubling up to 30 s.

use crate::skill::backend::BackendError;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;
use tokio::time::Instant;

/// The first wait before a restart after a failure; it doubles with each
/// failure in a row, up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Failures in a row, and when the next start may be tried.
#[derive(Debug, Default)]
pub(super) struct Backoff {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    failures: u32,
    not_before: Option<Instant>,
}

impl Backoff {
    /// Counts a failure that happened `at`.
    pub fn failed(&self, at: Instant) {
        let mut s = self.lock();
        s.failures = s.failures.saturating_add(1);
        let wait = FIRST_BACKOFF
            .saturating_mul(1 << s.failures.saturating_sub(1).min(16))
            .min(MAX_BACKOFF);
        s.not_before = Some(at + wait);
    }

    /// It answered: whatever failed before, it works now.
    pub fn answered(&self) {
        self.lock().failures = 0;
    }

    /// Waits until a start may be tried, or says (naming `what`) why not
    /// by `deadline`.
    pub async fn wait(&self, deadline: Instant, what: &str) -> Result<(), BackendError> {
        let (failures, not_before) = {
            let s = self.lock();
            (s.failures, s.not_before)
        };
        let Some(at) = not_before.filter(|at| *at > Instant::now()) else {
            return Ok(());
        };
        if at > deadline {
            let wait = at.saturating_duration_since(Instant::now());
            return Err(BackendError::NotRunning(format!(
                "{what} failed {failures} time(s) in a row; it is started again in {:.1}s",
                wait.as_secs_f64()
            )));
        }
        tokio::time::sleep_until(at).await;
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
