//! `/runs`: the audit log of every call, live waits and event streams,
//! cancellation, and entrypoint artifacts.

use super::extract::{Path, Query};
use crate::AppState;
use crate::auth::{Require, need};
use crate::error::{ApiError, Result};
use crate::invoke::{LiveRun, RunEvent, artifacts_dir, store_error};
use crate::store::{Run, RunFilter, RunStatus, StoreError};
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

/// The longest `wait` honoured, in seconds.
pub const MAX_WAIT_SECS: u64 = 300;
/// Largest artifact served.
const MAX_ARTIFACT_BYTES: u64 = 64 * 1024 * 1024;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_runs))
        .routes(routes!(get_run))
        .routes(routes!(run_events))
        .routes(routes!(cancel_run))
        // `{*path}` is not an OpenAPI template; the spec entry is added in `http::openapi`.
        .route("/runs/{id}/files/{*path}", axum::routing::get(get_run_file))
}

/// Filters of `GET /runs`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RunQuery {
    pub tool: Option<String>,
    pub skill: Option<String>,
    pub status: Option<RunStatus>,
    /// Page size, 1–500 (default 50).
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// A page of runs, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunList {
    pub runs: Vec<Run>,
    /// Pass as `cursor` for the next page; null on the last.
    pub next_cursor: Option<String>,
}

/// The audit log, newest first.
#[utoipa::path(get, path = "/runs", tag = "runs", security(("bearer" = ["invoke"])), params(RunQuery),
    responses(
        (status = 200, description = "A page of runs", body = RunList),
        (status = 400, description = "Invalid query or cursor", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 503, description = "The run log is unreachable", body = crate::error::Problem, content_type = "application/problem+json"),
    ))]
async fn list_runs(
    _: Require<need::Invoke>,
    State(state): State<AppState>,
    Query(q): Query<RunQuery>,
) -> Result<Json<RunList>> {
    let limit = q.limit.unwrap_or(50);
    if !(1..=500).contains(&limit) {
        return Err(ApiError::BadRequest("limit must be between 1 and 500".to_owned()));
    }
    let page = state
        .invoker
        .store
        .list_runs(RunFilter {
            tool: q.tool,
            skill: q.skill,
            status: q.status,
            limit,
            cursor: q.cursor,
        })
        .await
        .map_err(store_error)?;
    Ok(Json(RunList {
        runs: page.runs,
        next_cursor: page.next_cursor,
    }))
}

/// A run id in a path.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct RunPath {
    pub id: Uuid,
}

/// How long to hold `GET /runs/{id}` open.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct WaitQuery {
    /// Seconds (≤ 300) to wait for the run to finish before answering.
    pub wait: Option<u64>,
}

async fn load_run(state: &AppState, id: Uuid) -> Result<Run> {
    state.invoker.store.get_run(id).await.map_err(|e| match e {
        StoreError::NotFound => ApiError::not_found("run", id.to_string()),
        other => store_error(other),
    })
}

/// One run; with `wait`, held until it finishes or the time passes.
#[utoipa::path(get, path = "/runs/{id}", tag = "runs", security(("bearer" = ["invoke"])), params(RunPath, WaitQuery),
    responses(
        (status = 200, description = "The run", body = Run),
        (status = 400, description = "Invalid id", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such run", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 503, description = "The run log is unreachable", body = crate::error::Problem, content_type = "application/problem+json"),
    ))]
async fn get_run(
    _: Require<need::Invoke>,
    State(state): State<AppState>,
    Path(p): Path<RunPath>,
    Query(q): Query<WaitQuery>,
) -> Result<Json<Run>> {
    let wait = q.wait.unwrap_or(0);
    if wait > MAX_WAIT_SECS {
        return Err(ApiError::BadRequest(format!(
            "wait must be at most {MAX_WAIT_SECS} seconds"
        )));
    }
    if wait == 0 {
        return Ok(Json(load_run(&state, p.id).await?));
    }
    // Through the store, so a run decided or finished on another instance
    // wakes this waiter too.
    let run = state
        .invoker
        .wait_final(p.id, Duration::from_secs(wait))
        .await
        .map_err(|e| match e {
            StoreError::NotFound => ApiError::not_found("run", p.id.to_string()),
            other => store_error(other),
        })?;
    Ok(Json(run))
}

/// The run's events: `status`, `output` chunks, then `result` with the
/// envelope, and the stream ends.
#[utoipa::path(get, path = "/runs/{id}/events", tag = "runs", security(("bearer" = ["invoke"])), params(RunPath),
    responses(
        (status = 200, description = "Server-sent events", content_type = "text/event-stream", body = String),
        (status = 404, description = "No such run", body = crate::error::Problem, content_type = "application/problem+json"),
    ))]
async fn run_events(
    _: Require<need::Invoke>,
    State(state): State<AppState>,
    Path(p): Path<RunPath>,
) -> Result<Response> {
    // Running here: subscribed before anything else, so no output is
    // missed. A run still waiting (queued or held) is followed instead,
    // since it may end without ever running.
    if let Some(live) = state.invoker.runs.get(p.id)
        && live.has_started()
    {
        let rx = live.subscribe();
        let run = load_run(&state, p.id).await?;
        return Ok(event_stream(live, rx, Some(run.status)).into_response());
    }
    let run = load_run(&state, p.id).await?;
    if run.status.is_final() {
        let mut events = vec![status_event(run.status)];
        if let Some(result) = &run.result {
            events.push(json_event("result", result));
        }
        let stream = futures_util::stream::iter(events.into_iter().map(Ok::<_, Infallible>));
        return Ok(Sse::new(stream).into_response());
    }
    Ok(follow(state, p.id, Vec::new(), None).into_response())
}

/// Streams the events of a run that is not (yet) live here: its status
/// changes as the store sees them (from any instance), its live output
/// once it runs on this instance, and its result; then the stream ends.
/// A task feeds the stream and stops when the client goes away.
pub fn follow(
    state: AppState,
    id: Uuid,
    first: Vec<Event>,
    known: Option<RunStatus>,
) -> Sse<impl futures_util::Stream<Item = Result<Event, Infallible>>> {
    let (tx, rx) = tokio::sync::mpsc::channel::<Event>(16);
    tokio::spawn(async move {
        for event in first {
            if tx.send(event).await.is_err() {
                return;
            }
        }
        // The last status sent, so each is sent once.
        let mut last = known;
        loop {
            let seen = last;
            let run = state
                .invoker
                .wait_until(id, FOLLOW_POLL, |run| {
                    Some(run.status) != seen || run.status.is_final()
                })
                .await;
            let run = match run {
                Ok(run) => run,
                Err(e) => {
                    tracing::warn!(run = %id, error = %e, "cannot follow the run");
                    return;
                }
            };
            if last != Some(run.status) {
                last = Some(run.status);
                if tx.send(status_event(run.status)).await.is_err() {
                    return;
                }
            }
            if run.status.is_final() {
                if let Some(result) = &run.result {
                    let _ = tx.send(json_event("result", result)).await;
                }
                return;
            }
            if let Some(live) = state.invoker.runs.get(id) {
                let mut events = live.subscribe();
                if live.has_started() && last != Some(RunStatus::Running) {
                    last = Some(RunStatus::Running);
                    if tx.send(status_event(RunStatus::Running)).await.is_err() {
                        return;
                    }
                }
                loop {
                    // As in `event_stream`: the end is watched beside the
                    // events (a run can end without a result), and so is
                    // the client.
                    let received = tokio::select! {
                        biased;
                        received = events.recv() => received,
                        _ = live.finished() => break,
                        () = tx.closed() => return,
                    };
                    let event = match received {
                        Ok(RunEvent::Output(chunk)) => output_event(&chunk),
                        Ok(RunEvent::Result(envelope)) => {
                            let _ = tx.send(status_event(run_status(&envelope))).await;
                            let _ = tx.send(json_event("result", envelope.as_ref())).await;
                            return;
                        }
                        Ok(RunEvent::Status(status)) if last != Some(status) => {
                            last = Some(status);
                            status_event(status)
                        }
                        Ok(RunEvent::Status(_)) | Err(broadcast::error::RecvError::Lagged(_)) => continue,
                        // Ended: the store has how.
                        Err(broadcast::error::RecvError::Closed) => break,
                    };
                    if tx.send(event).await.is_err() {
                        return;
                    }
                }
            }
            if tx.is_closed() {
                return;
            }
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|event| (Ok(event), rx))
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// How long `follow` waits for a change before checking its client is
/// still there.
const FOLLOW_POLL: Duration = Duration::from_secs(15);

/// The status an envelope stands for, for the last `status` event.
fn run_status(envelope: &crate::invoke::Envelope) -> RunStatus {
    if envelope.timed_out {
        RunStatus::TimedOut
    } else if envelope.success {
        RunStatus::Succeeded
    } else {
        RunStatus::Failed
    }
}

fn output_event(chunk: &[u8]) -> Event {
    json_event(
        "output",
        &serde_json::json!({"chunk": String::from_utf8_lossy(chunk)}),
    )
}

fn status_event(status: RunStatus) -> Event {
    json_event("status", &serde_json::json!({"status": status}))
}

pub(super) fn json_event(name: &str, data: &impl Serialize) -> Event {
    Event::default()
        .event(name)
        .json_data(data)
        .unwrap_or_else(|_| Event::default().event(name))
}

/// Streams a live run's events until its result.
pub fn event_stream(
    live: Arc<LiveRun>,
    rx: broadcast::Receiver<RunEvent>,
    initial: Option<RunStatus>,
) -> Sse<impl futures_util::Stream<Item = Result<Event, Infallible>>> {
    struct State {
        live: Arc<LiveRun>,
        rx: broadcast::Receiver<RunEvent>,
        initial: Option<RunStatus>,
        done: bool,
    }
    let state = State {
        live,
        rx,
        initial,
        done: false,
    };
    let stream = futures_util::stream::unfold(state, |mut st| async move {
        if st.done {
            return None;
        }
        if let Some(status) = st.initial.take() {
            return Some((Ok(status_event(status)), st));
        }
        loop {
            // The live run holds the sender, so `recv` alone would wait
            // forever for a run that ends without a result (cancelled
            // before it started): its end is watched too, events first.
            let received = tokio::select! {
                biased;
                received = st.rx.recv() => received,
                ended = st.live.finished() => {
                    st.done = true;
                    return ended.map(|envelope| (Ok(json_event("result", envelope.as_ref())), st));
                }
            };
            let event = match received {
                Ok(RunEvent::Status(s)) => status_event(s),
                Ok(RunEvent::Output(chunk)) => output_event(&chunk),
                Ok(RunEvent::Result(envelope)) => {
                    st.done = true;
                    json_event("result", envelope.as_ref())
                }
                // A slow reader missed some output; the result still comes.
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => {
                    st.done = true;
                    match st.live.finished().await {
                        Some(envelope) => json_event("result", envelope.as_ref()),
                        None => return None,
                    }
                }
            };
            return Some((Ok(event), st));
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// What a cancel did.
#[derive(Debug, Serialize, ToSchema)]
pub struct CancelAccepted {
    pub run_id: Uuid,
    /// `cancelling` for a running run (its group gets SIGTERM, then
    /// SIGKILL after the grace), `cancelled` for one that had not started.
    pub status: String,
}

/// Cancel a run: a running one's process group is killed; a pending one
/// is withdrawn; a finished one answers 409.
#[utoipa::path(post, path = "/runs/{id}/cancel", tag = "runs", security(("bearer" = ["invoke"])), params(RunPath),
    responses(
        (status = 202, description = "Cancelling", body = CancelAccepted),
        (status = 404, description = "No such run", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 409, description = "The run already finished, or runs on another instance", body = crate::error::Problem, content_type = "application/problem+json"),
    ))]
async fn cancel_run(
    _: Require<need::Invoke>,
    State(state): State<AppState>,
    Path(p): Path<RunPath>,
) -> Result<Response> {
    if let Some(live) = state.invoker.runs.get(p.id) {
        live.cancel.cancel();
        return Ok(accepted(p.id, "cancelling"));
    }
    let run = load_run(&state, p.id).await?;
    if run.status.is_final() {
        return Err(ApiError::Conflict {
            code: "run_finished",
            detail: format!("run {} already finished ({})", p.id, run.status.as_str()),
        });
    }
    if run.status == RunStatus::Running {
        return Err(ApiError::Conflict {
            code: "run_elsewhere",
            detail: format!("run {} is running on another instance; cancel it there", p.id),
        });
    }
    // Only a run that has not started: one an approval just started on
    // another instance is that instance's to end.
    let done = state
        .invoker
        .store
        .end_waiting(p.id, RunStatus::Cancelled, chrono::Utc::now())
        .await
        .map_err(store_error)?;
    match done {
        Some(_) => Ok(accepted(p.id, "cancelled")),
        None => Err(ApiError::Conflict {
            code: "run_finished",
            detail: format!("run {} already started or finished", p.id),
        }),
    }
}

fn accepted(id: Uuid, status: &str) -> Response {
    (
        StatusCode::ACCEPTED,
        Json(CancelAccepted {
            run_id: id,
            status: status.to_owned(),
        }),
    )
        .into_response()
}

/// An artifact path in a path.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct RunFilePath {
    pub id: Uuid,
    /// Relative to the run's `SANDBOX_FILES_DIR`.
    pub path: String,
}

/// An artifact of an entrypoint run, as a download.
#[utoipa::path(get, path = "/runs/{id}/files/{path}", tag = "runs", security(("bearer" = ["invoke"])), params(RunFilePath),
    responses(
        (status = 200, description = "The file", content_type = "application/octet-stream", body = Vec<u8>),
        (status = 404, description = "No such run or file", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 413, description = "The file is too large to serve", body = crate::error::Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn get_run_file(
    _: Require<need::Invoke>,
    State(state): State<AppState>,
    Path(p): Path<RunFilePath>,
) -> Result<Response> {
    let dir = artifacts_dir(&state.invoker.settings.data_dir, p.id);
    let bytes = super::read_file_inside(dir, &p.path, MAX_ARTIFACT_BYTES).await?;
    let name = p
        .path
        .rsplit('/')
        .next()
        .unwrap_or("file")
        .replace(['"', '\\'], "_");
    let disposition = HeaderValue::from_str(&format!("attachment; filename=\"{name}\""))
        .unwrap_or_else(|_| HeaderValue::from_static("attachment"));
    Ok((
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/octet-stream"),
            ),
            (header::CONTENT_DISPOSITION, disposition),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
        ],
        bytes,
    )
        .into_response())
}
