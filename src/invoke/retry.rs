//! Retries that make nothing twice (`docs/api.md`, "Retries"): a call
//! made with the caller's `Idempotency-Key` is answered again from the run
//! that key already made, as that run is now. (A held call retried without
//! a key joins its pending request: [`Invoker::pending_like`].)

use super::{Asked, Call, Called, Delivery, Held, InvokeError, Invoker, MAX_WAIT, Prepared};
use crate::store::{Run, RunStatus, StoreError};
use chrono::Utc;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

/// How long a key is remembered: a retry later than this is a new call.
pub const KEY_KEPT: Duration = Duration::from_secs(24 * 3600);

/// The longest key taken.
const MAX_KEY_CHARS: usize = 255;

/// A caller's `Idempotency-Key`: 1–255 printable ASCII characters, spaces
/// only inside (HTTP would trim them off the ends). Keys are the caller's
/// own: another caller's never match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// The key a header value holds, or why it is refused.
    pub fn parse(raw: &[u8]) -> Result<Self, InvokeError> {
        let printable = raw.iter().all(|b| (0x20..=0x7e).contains(b))
            && raw.first() != Some(&b' ')
            && raw.last() != Some(&b' ');
        match std::str::from_utf8(raw) {
            Ok(key) if printable && (1..=MAX_KEY_CHARS).contains(&key.len()) => Ok(Self(key.to_owned())),
            _ => Err(InvokeError::InvalidIdempotencyKey { max: MAX_KEY_CHARS }),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A call made with a key: who made it, and what it asks for, to tell a
/// retry from another call made with the same key.
pub(super) struct Keyed {
    by: Option<String>,
    key: IdempotencyKey,
    skill: String,
    tool: String,
    arguments: Value,
}

impl Keyed {
    pub(super) fn of(p: &Prepared, asked: &Asked, key: IdempotencyKey) -> Self {
        Self {
            by: asked.by.clone(),
            key,
            skill: p.skill.name.clone(),
            tool: p.tool().name.clone(),
            arguments: Value::Object(p.arguments.clone()),
        }
    }

    pub(super) fn key(&self) -> &str {
        self.key.as_str()
    }

    /// Whether `run` was made by this very call (the arguments compared as
    /// JSON, so their order does not matter).
    fn made(&self, run: &Run) -> bool {
        run.skill == self.skill && run.tool == self.tool && run.arguments == self.arguments
    }
}

impl Invoker {
    /// The run this caller made with this key within [`KEY_KEPT`], if
    /// any; `IdempotencyKeyReused` when it was made by another call.
    pub(super) async fn keyed_run(&self, keyed: &Keyed) -> Result<Option<Run>, InvokeError> {
        let kept = chrono::Duration::from_std(KEY_KEPT).unwrap_or(chrono::Duration::hours(24));
        let since = Utc::now() - kept;
        let found = self
            .run_log
            .run_by_key(keyed.by.as_deref(), keyed.key(), since)
            .await?;
        match found {
            Some(run) if !keyed.made(&run) => Err(InvokeError::IdempotencyKeyReused { run_id: run.id }),
            found => Ok(found),
        }
    }

    /// Decides and answers a call made with the caller's key once: a run
    /// the key already made answers it again instead.
    pub(super) async fn decide_once(
        self: &Arc<Self>,
        mut prepared: Prepared,
        call: &Call,
        key: IdempotencyKey,
    ) -> Result<Called, InvokeError> {
        let same = Keyed::of(&prepared, &call.asked, key);
        if let Some(run) = self.keyed_run(&same).await? {
            return self.again(run, call).await;
        }
        prepared.idempotency_key = Some(same.key().to_owned());
        match self.decide_call(prepared, call).await {
            // Another request with the key recorded its run first: this
            // one answers with that run.
            Err(InvokeError::Store(StoreError::Conflict(why))) => match self.keyed_run(&same).await? {
                Some(run) => self.again(run, call).await,
                None => Err(InvokeError::Store(StoreError::Conflict(why))),
            },
            answer => answer,
        }
    }

    /// What the call that made `run` answers now, as [`Call`] asks: held
    /// (with a wait, its end if it comes in time), followed while it runs,
    /// or its final answer.
    pub(super) async fn again(self: &Arc<Self>, run: Run, call: &Call) -> Result<Called, InvokeError> {
        tracing::info!(run = %run.id, status = %run.status, "a retry answers with the run its key made");
        if run.status == RunStatus::Denied && run.approval_id.is_none() {
            return Ok(Called::Refused {
                run_id: run.id,
                reason: "a standing deny refused this call".to_owned(),
            });
        }
        if run.status.is_final() {
            return self.ended(run).await.map(Called::Finished);
        }
        if call.delivery == Delivery::Started
            && let Some(live) = self.runs.get(run.id)
            && run.status != RunStatus::PendingApproval
        {
            let events = live.subscribe();
            return Ok(Called::Started { live, events });
        }
        match run.approval_id {
            Some(approval_id) => {
                let held = Held {
                    run_id: run.id,
                    approval_id,
                };
                self.await_held(held, call).await
            }
            None => self.until_ended(run.id).await,
        }
    }

    /// The end of a run that started at once, as its call waits for it.
    async fn until_ended(&self, id: Uuid) -> Result<Called, InvokeError> {
        loop {
            let run = self.follower.wait_final(id, MAX_WAIT).await?;
            if run.status.is_final() {
                return self.ended(run).await.map(Called::Finished);
            }
            if self.runs.is_closed() {
                return Err(InvokeError::ShuttingDown);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_printable_ascii_of_1_to_255() {
        assert_eq!(IdempotencyKey::parse(b"a b-c_1").unwrap().as_str(), "a b-c_1");
        assert!(IdempotencyKey::parse(&[b'k'; 255]).is_ok());
        for bad in [
            &b""[..],
            &[b'k'; 256],
            b"tab\there",
            b"nul\0",
            "é".as_bytes(),
            b"\x7f",
            b" k",
            b"k ",
        ] {
            assert!(
                matches!(
                    IdempotencyKey::parse(bad),
                    Err(InvokeError::InvalidIdempotencyKey { max: 255 })
                ),
                "{bad:?}"
            );
        }
    }
}
