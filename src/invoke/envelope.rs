//! The result envelope of a run (`docs/api.md`, "Invoke").

use super::Prepared;
use crate::artifacts::Artifact;
use crate::egress::Entry;
use crate::egress::ask::Answer;
use crate::egress::ledger::Destination;
use crate::runner::Outcome;
use crate::skill::backend::{BackendError, BackendErrorKind, BackendResult};
use crate::store::{self, RunStatus};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use utoipa::ToSchema;
use uuid::Uuid;

/// What a run gave: HTTP 200 even when the tool failed (errors of the tool
/// are results, not HTTP errors).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Envelope {
    pub run_id: Uuid,
    pub skill: String,
    pub tool: String,
    pub success: bool,
    /// The exit code, or 128+signal when a signal ended the process; null
    /// when it never started.
    pub exit_code: Option<i32>,
    /// stdout and stderr merged: the first and last 2048 bytes when longer.
    pub output: String,
    pub truncated: bool,
    /// Everything the tool wrote, in bytes.
    pub output_bytes: u64,
    pub duration_ms: u64,
    pub timed_out: bool,
    /// The signal that ended the process (`SIGKILL`, …).
    pub signal: Option<String>,
    /// stdout as JSON (any JSON value), when it is valid JSON (an entrypoint's `output.json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<serde_json::Value>)]
    pub parsed: Option<Value>,
    /// Why it failed, when `success` is false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How the skill's backend failed, when the call failed for the
    /// backend's sake and not the tool's: `not_running`, `crashed`,
    /// `timed_out`, `refused` or `protocol`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_error: Option<BackendErrorKind>,
    /// Artifacts of an entrypoint run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<Vec<Artifact>>,
    /// What the skill's hooks did to the call, in the order they ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hooks: Option<Vec<super::hooks::HookEffect>>,
    /// Where a run of a `network.allow` skill went through its egress
    /// proxy: each destination as the program named it, how often it was
    /// let through or refused, and the bytes each way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<Vec<EgressLine>>,
}

/// One destination of a run's egress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct EgressLine {
    pub host: String,
    pub port: u16,
    /// Connections or requests let through.
    pub allowed: u32,
    /// Connections or requests refused.
    pub denied: u32,
    /// Bytes the run sent there.
    pub bytes_out: u64,
    /// Bytes the run received from there.
    pub bytes_in: u64,
    /// Beyond the skill's list, let through by an egress grant of its
    /// version, no one asked.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub granted: bool,
    /// Beyond the skill's list, held for a person: the request (see
    /// `GET /egress/{id}`) and how it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<crate::egress::ask::Held>,
}

/// A run's ledger as its envelope shows it, in the ledger's order.
pub(super) fn egress_lines(entries: BTreeMap<Destination, (Entry, Option<Answer>)>) -> Vec<EgressLine> {
    entries
        .into_iter()
        .map(|((host, port), (e, answer))| EgressLine {
            host,
            port,
            allowed: e.allowed,
            denied: e.denied,
            bytes_out: e.bytes_out,
            bytes_in: e.bytes_in,
            granted: answer.as_ref().is_some_and(|a| a.granted),
            held: answer.and_then(|a| a.held),
        })
        .collect()
}

/// A run's egress lines summed, for the metrics.
pub(super) fn egress_totals(lines: &[EgressLine]) -> crate::metrics::EgressTotals {
    lines
        .iter()
        .fold(crate::metrics::EgressTotals::default(), |mut t, l| {
            t.allowed += u64::from(l.allowed);
            t.denied += u64::from(l.denied);
            t.bytes_out += l.bytes_out;
            t.bytes_in += l.bytes_in;
            t
        })
}

impl Envelope {
    pub(super) fn from_outcome(run_id: Uuid, p: &Prepared, o: &Outcome) -> Self {
        let error = if let Some(e) = &o.spawn_error {
            Some(e.clone())
        } else if o.timed_out {
            Some(format!("timed out after {}s", p.timeout.as_secs()))
        } else if o.cancelled {
            Some("cancelled".to_owned())
        } else if let Some(sig) = &o.signal {
            Some(format!("killed by {sig}"))
        } else {
            match o.exit_code {
                Some(0) => None,
                Some(code) => Some(format!("exited with code {code}")),
                None => Some("ended without an exit code".to_owned()),
            }
        };
        Self {
            run_id,
            skill: p.skill.name.clone(),
            tool: p.tool().name.clone(),
            success: error.is_none(),
            exit_code: o.exit_code,
            output: o.output.clone(),
            truncated: o.truncated,
            output_bytes: o.output_bytes,
            duration_ms: u64::try_from(o.duration.as_millis()).unwrap_or(u64::MAX),
            timed_out: o.timed_out,
            signal: o.signal.clone(),
            parsed: o.stdout_json.clone(),
            error,
            backend_error: None,
            files: None,
            hooks: None,
            egress: None,
        }
    }

    /// What a backend's tool gave, kept as a run's output is (head and
    /// tail); a JSON output is `parsed` unless the text had to be cut.
    pub(super) fn from_backend(
        run_id: Uuid,
        p: &Prepared,
        r: &BackendResult,
        took: std::time::Duration,
    ) -> Self {
        let (output, truncated, output_bytes) = crate::runner::clip(r.output.as_bytes());
        Self {
            run_id,
            skill: p.skill.name.clone(),
            tool: p.tool().name.clone(),
            success: r.error.is_none(),
            exit_code: None,
            output,
            truncated,
            output_bytes,
            duration_ms: u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
            timed_out: r.timed_out,
            signal: None,
            parsed: r.parsed.clone().filter(|_| !truncated),
            error: r.error.clone(),
            backend_error: r.fault,
            files: None,
            hooks: None,
            egress: None,
        }
    }

    /// A run that could not start for a reason of the server's own.
    pub(super) fn not_started(run_id: Uuid, skill: &str, tool: &str, why: &str) -> Self {
        Self {
            run_id,
            skill: skill.to_owned(),
            tool: tool.to_owned(),
            success: false,
            exit_code: None,
            output: String::new(),
            truncated: false,
            output_bytes: 0,
            duration_ms: 0,
            timed_out: false,
            signal: None,
            parsed: None,
            error: Some(why.to_owned()),
            backend_error: None,
            files: None,
            hooks: None,
            egress: None,
        }
    }

    /// A run its skill's backend failed before the tool ran (it did not
    /// start, or a hook failed).
    pub(super) fn backend_failed(run_id: Uuid, skill: &str, tool: &str, why: &BackendError) -> Self {
        let mut envelope = Self::not_started(run_id, skill, tool, &why.to_string());
        envelope.backend_error = Some(why.kind());
        envelope
    }

    /// Fails a run that had a result, for `why` of its backend's (a hook
    /// after the call); the result stays for the record.
    pub(super) fn fail_for_backend(&mut self, why: &BackendError) {
        self.success = false;
        self.error = Some(why.to_string());
        self.backend_error = Some(why.kind());
    }

    /// The envelope as the run log keeps it ([`store::keepable`]), so that
    /// the caller is answered with exactly what was recorded.
    pub(super) fn keepable(mut self) -> Self {
        self.output = store::keepable_text(self.output);
        self.parsed = self.parsed.map(store::keepable);
        self
    }

    /// Why a `before_tool_call` hook cancelled the call, if one did.
    pub fn cancelled_by_hook(&self) -> Option<String> {
        self.hooks
            .iter()
            .flatten()
            .find(|h| h.effect == "cancelled")
            .map(|h| {
                h.detail
                    .as_ref()
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            })
    }

    /// The final status this envelope stands for, as far as it tells
    /// (a cancelled run also reads as failed).
    pub fn run_status(&self) -> RunStatus {
        if self.timed_out {
            RunStatus::TimedOut
        } else if self.success {
            RunStatus::Succeeded
        } else {
            RunStatus::Failed
        }
    }

    /// The run's final status.
    pub(super) fn status(&self, o: &Outcome) -> RunStatus {
        if o.timed_out {
            RunStatus::TimedOut
        } else if o.cancelled {
            RunStatus::Cancelled
        } else if self.success {
            RunStatus::Succeeded
        } else {
            RunStatus::Failed
        }
    }
}
