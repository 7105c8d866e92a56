//! MCP tasks (the Tasks extension, SEP-2663) over skilld's runs: a task is
//! a run, its id the run's. A call held for a person, or a call of a
//! skill that declares `tasks`, answers a client that has tasks with one;
//! `tasks/get` reads the run log, so any instance answers it, and
//! `tasks/cancel` withdraws a held call or stops a running one.

use crate::auth::Caller;
use crate::catalog::Catalog;
use crate::invoke::{Approver, Canceller, Envelope, InvokeError, Invoker};
use crate::store::{Run, RunStatus, StoreError};
use chrono::{DateTime, SecondsFormat, Utc};
use rmcp::ErrorData;
use rmcp::model::{CreateTaskResult, DetailedTask, GetTaskResult, JsonObject, Task, TaskPayload, TaskStatus};
use serde_json::{Value, json};
use uuid::Uuid;

/// How often a client should look again, in milliseconds.
const POLL_MS: u64 = 1000;

fn stamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// The task a call became: `message` says what it waits for. The run is
/// already on record, so `tasks/get` finds it at once. No `ttlMs`: the
/// run log keeps runs.
pub(super) fn created(run_id: Uuid, message: Option<String>) -> CreateTaskResult {
    let now = stamp(Utc::now());
    let mut task =
        Task::new(run_id.to_string(), TaskStatus::Working, now.clone(), now).with_poll_interval_ms(POLL_MS);
    task.status_message = message;
    CreateTaskResult::new(task)
}

/// The run of task `id`, if `caller` asked for it: anyone else's task is
/// as unknown as one that does not exist (nothing about it is told).
async fn run_of(approver: &Approver, caller: &Caller, id: &str) -> Result<Run, ErrorData> {
    let unknown = || ErrorData::invalid_params(format!("no task '{id}'"), None);
    let run_id = Uuid::parse_str(id).map_err(|_| unknown())?;
    let run = match approver.reader().get_run(run_id).await {
        Ok(run) => run,
        Err(StoreError::NotFound { .. }) => return Err(unknown()),
        Err(e) => return Err(unavailable(&e)),
    };
    if run.requested_by != caller.name {
        return Err(unknown());
    }
    Ok(run)
}

fn unavailable(e: &dyn std::fmt::Display) -> ErrorData {
    tracing::error!(error = %e, "MCP tasks: the run log failed");
    ErrorData::internal_error("the run log is unavailable", None)
}

/// `tasks/get`: the run as a task; once it ended, with its tool result
/// (its artifacts' links on `origin`).
pub(super) async fn get(
    approver: &Approver,
    catalog: &Catalog,
    caller: &Caller,
    id: &str,
    origin: &str,
) -> Result<GetTaskResult, ErrorData> {
    let run = run_of(approver, caller, id).await?;
    let updated = run.finished_at.or(run.started_at).unwrap_or(run.created_at);
    let mut task = Task::new(id, TaskStatus::Working, stamp(run.created_at), stamp(updated))
        .with_poll_interval_ms(POLL_MS);
    let payload = match run.status {
        RunStatus::PendingApproval => {
            task.status_message = Some(waiting(&run));
            TaskPayload::Working
        }
        RunStatus::Queued | RunStatus::Running => TaskPayload::Working,
        RunStatus::Cancelled => TaskPayload::Cancelled,
        RunStatus::Interrupted => TaskPayload::Failed {
            error: object(json!({
                "code": -32603,
                "message": "the server stopped while the call ran; it did not finish",
            })),
        },
        RunStatus::Denied | RunStatus::Expired => TaskPayload::Completed {
            result: object(undecided(approver, &run).await?),
        },
        RunStatus::Succeeded | RunStatus::Failed | RunStatus::TimedOut => TaskPayload::Completed {
            result: object(ended(approver.pipeline(), catalog, &run, origin).await?),
        },
    };
    Ok(GetTaskResult::new(DetailedTask::new(task, payload)))
}

fn waiting(run: &Run) -> String {
    let approval = run
        .approval_id
        .map(|a| format!(" (approval {a})"))
        .unwrap_or_default();
    format!("waiting for a person to approve the call{approval}; nothing has run yet")
}

/// The tool result of a run that ended.
async fn ended(invoker: &Invoker, catalog: &Catalog, run: &Run, origin: &str) -> Result<Value, ErrorData> {
    let envelope: Envelope = run
        .result
        .clone()
        .and_then(|r| serde_json::from_value(r).ok())
        .ok_or_else(|| ErrorData::internal_error(format!("run {} ended without a result", run.id), None))?;
    serde_json::to_value(super::results::finished(invoker, catalog, &envelope, origin).await)
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))
}

/// The tool result of a call a person denied (with their note) or nobody
/// decided in time: it did not fail, it never ran.
async fn undecided(approver: &Approver, run: &Run) -> Result<Value, ErrorData> {
    let approval = approver
        .reader()
        .approval_of_run(run.id)
        .await
        .map_err(|e| unavailable(&e))?;
    let text = if run.status == RunStatus::Expired {
        "Nobody decided this call in time; nothing ran. Call again to ask again.".to_owned()
    } else {
        let by = approval
            .as_ref()
            .and_then(|a| a.decided_by.clone())
            .map(|by| format!(" by {by}"))
            .unwrap_or_default();
        let note = approval
            .as_ref()
            .and_then(|a| a.note.clone())
            .map(|n| format!(" Their note: {n}"))
            .unwrap_or_default();
        format!("A person denied this call{by}; nothing ran.{note}")
    };
    let structured = json!({
        "status": run.status.as_str(),
        "run_id": run.id,
        "approval_id": run.approval_id,
        "note": approval.as_ref().and_then(|a| a.note.clone()),
        "decided_by": approval.as_ref().and_then(|a| a.decided_by.clone()),
    });
    Ok(json!({
        "content": [{ "type": "text", "text": text }],
        "structuredContent": structured,
        "isError": true,
    }))
}

fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}

/// `tasks/cancel`: withdraws a held or queued call, stops a running one;
/// a task that already ended is left as it is (the ack is the same).
pub(super) async fn cancel(approver: &Approver, caller: &Caller, id: &str) -> Result<(), ErrorData> {
    let run = run_of(approver, caller, id).await?;
    let by = Canceller {
        name: caller.name.as_deref(),
        approver: false,
    };
    match approver.pipeline().follower().cancel(run.id, by).await {
        Ok(_) | Err(InvokeError::RunFinished { .. }) => Ok(()),
        Err(InvokeError::RunElsewhere(_) | InvokeError::RunStarted(_)) => Err(ErrorData::invalid_request(
            format!("task '{id}' runs on another instance of this server; cancel it there"),
            None,
        )),
        Err(e) => Err(ErrorData::internal_error(e.to_string(), None)),
    }
}
