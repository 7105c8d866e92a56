//! The results every backend gives when a call did not get the tool's
//! own: it failed, ran out of time, or was cancelled.

use crate::skill::backend::BackendResult;
use std::time::Duration;

pub(super) fn failed(why: String) -> BackendResult {
    BackendResult {
        error: Some(why),
        ..BackendResult::default()
    }
}

/// Timed out after `timeout`; `then` says what became of the child.
pub(super) fn timed_out(timeout: Duration, then: &str) -> BackendResult {
    BackendResult {
        timed_out: true,
        error: Some(format!("timed out after {}s; {then}", timeout.as_secs())),
        ..BackendResult::default()
    }
}

pub(super) fn cancelled() -> BackendResult {
    BackendResult {
        cancelled: true,
        error: Some("cancelled".to_owned()),
        ..BackendResult::default()
    }
}
