//! The results every backend gives when a call did not get the tool's
//! own: it failed, ran out of time, or was cancelled.

use crate::skill::backend::{BackendError, BackendResult};
use std::time::Duration;

pub(super) fn failed(why: BackendError) -> BackendResult {
    BackendResult::failed(why)
}

/// Timed out after `timeout`; `then` says what became of the child.
pub(super) fn timed_out(timeout: Duration, then: &str) -> BackendResult {
    let why = format!("timed out after {}s; {then}", timeout.as_secs());
    BackendResult::failed(BackendError::TimedOut(why))
}

pub(super) fn cancelled() -> BackendResult {
    BackendResult {
        cancelled: true,
        error: Some("cancelled".to_owned()),
        ..BackendResult::default()
    }
}
