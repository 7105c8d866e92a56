//! `/runs`: the audit log of every call, live waits and event streams,
//! cancellation, and entrypoint artifacts.

use super::AppState;
use super::auth::{Require, need};
use super::kit::error::{Problem, Result};
use super::kit::extract::{Path, Peer, Query, page_limit};
use super::responses::{BadQuery, Binary, StoreUnavailable, describe_streams};
use crate::artifacts::{Access, Served};
use crate::auth::Role;
use crate::invoke::{Cancelled, Canceller, Envelope, RunEvent};
use crate::store::{self, RunFilter, RunStatus};
use axum::Json;
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use futures_util::stream::{BoxStream, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::convert::Infallible;
use std::time::Duration;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

pub fn router() -> OpenApiRouter<AppState> {
    let mut router = OpenApiRouter::new()
        .routes(routes!(list_runs))
        .routes(routes!(get_run))
        .routes(routes!(run_events))
        .routes(routes!(cancel_run))
        // `{*path}` is not an OpenAPI template; the spec entry is added in `http::openapi`.
        .route("/runs/{id}/files/{*path}", axum::routing::get(get_run_file));
    describe_streams(router.get_openapi_mut());
    router
}

/// Filters of `GET /runs`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RunQuery {
    pub tool: Option<String>,
    pub skill: Option<String>,
    pub status: Option<RunStatus>,
    /// Only the runs called in this session (its id).
    #[param(value_type = Option<String>, format = "uuid")]
    pub session: Option<Uuid>,
    /// Page size, 1–500 (default 50).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page, as it was handed out.
    #[param(pattern = "^[0-9]{1,16}_[0-9a-fA-F]{32}$")]
    pub cursor: Option<String>,
}

/// One call of a tool as the audit log holds it. This is the API's `Run`.
///
/// Timestamps come back from the store with microsecond precision (what
/// PostgreSQL keeps), whatever precision they were given with.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Run)]
pub struct RunView {
    #[schema(value_type = String, format = "uuid")]
    pub id: Uuid,
    pub skill: String,
    pub tool: String,
    /// The skill's content hash when the call was decided: what an approval
    /// or grant was given for.
    pub skill_hash: String,
    #[schema(value_type = Object)]
    pub arguments: Value,
    /// The exact command line that runs (or ran, or would have run).
    pub argv: Vec<String>,
    pub cwd: String,
    pub status: RunStatus,
    pub requested_by: Option<String>,
    #[schema(value_type = Option<String>, format = "uuid")]
    pub approval_id: Option<Uuid>,
    #[schema(value_type = String, format = DateTime)]
    pub created_at: DateTime<Utc>,
    #[schema(value_type = Option<String>, format = DateTime)]
    pub started_at: Option<DateTime<Utc>>,
    #[schema(value_type = Option<String>, format = DateTime)]
    pub finished_at: Option<DateTime<Utc>>,
    /// The envelope, once finished.
    #[schema(value_type = Option<Envelope>)]
    pub result: Option<Value>,
    /// The `x-request-id` of the request that made the call, to find its
    /// log lines.
    pub request_id: Option<String>,
    /// What the person who decided the call wrote: why they denied it, or
    /// what they said approving it.
    pub note: Option<String>,
    /// The version of the skill called (installed skills keep several).
    pub skill_version: Option<String>,
    /// The session the call named; absent for a call outside any session.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = "uuid")]
    pub session: Option<Uuid>,
}

/// The run as the log keeps it, less what means nothing outside the
/// machine that ran it (its process group, its instance, its mode).
impl From<store::Run> for RunView {
    fn from(run: store::Run) -> Self {
        Self {
            id: run.id,
            skill: run.skill,
            tool: run.tool,
            skill_hash: run.skill_hash,
            arguments: run.arguments,
            argv: run.argv,
            cwd: run.cwd,
            status: run.status,
            requested_by: run.requested_by,
            approval_id: run.approval_id,
            created_at: run.created_at,
            started_at: run.started_at,
            finished_at: run.finished_at,
            result: run.result,
            request_id: run.request_id,
            note: run.note,
            skill_version: run.skill_version,
            session: run.session,
        }
    }
}

/// A page of runs, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunList {
    pub runs: Vec<RunView>,
    /// Pass as `cursor` for the next page; null on the last.
    pub next_cursor: Option<String>,
}

/// The audit log, newest first. Without tokens it needs the local
/// secret, like the inbox: it shows every caller's arguments and output,
/// and a tool with the network is such a caller. A run read by its id
/// (an unguessable UUIDv7, known to whoever made the call) stays open.
#[utoipa::path(get, path = "/runs", tag = "runs", security(("bearer" = ["invoke"])), params(RunQuery),
    responses(
        (status = 200, description = "A page of runs", body = RunList),
        BadQuery,
        StoreUnavailable,
    ))]
async fn list_runs(
    _: Require<need::Inbox>,
    State(state): State<AppState>,
    Query(q): Query<RunQuery>,
) -> Result<Json<RunList>> {
    let limit = page_limit(q.limit, 50)?;
    let page = state
        .store()
        .list_runs(RunFilter {
            tool: q.tool,
            skill: q.skill,
            status: q.status,
            session: q.session,
            limit,
            cursor: q.cursor,
        })
        .await?;
    Ok(Json(RunList {
        runs: page.runs.into_iter().map(RunView::from).collect(),
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
    #[param(maximum = 300)]
    pub wait: Option<u64>,
}

/// One run; with `wait`, held until it finishes or the time passes.
#[utoipa::path(get, path = "/runs/{id}", tag = "runs", security(("bearer" = ["invoke"])), params(RunPath, WaitQuery),
    responses(
        (status = 200, description = "The run", body = RunView),
        BadQuery,
        (status = 404, description = "No such run", body = Problem, content_type = "application/problem+json"),
        StoreUnavailable,
    ))]
async fn get_run(
    _: Require<need::Invoke>,
    State(state): State<AppState>,
    Path(p): Path<RunPath>,
    Query(q): Query<WaitQuery>,
) -> Result<Json<RunView>> {
    let wait = Duration::from_secs(q.wait.unwrap_or(0));
    Ok(Json(state.invoker.follower().run_after(p.id, wait).await?.into()))
}

/// The run's events: `status`, `output` chunks, then `result` with the
/// envelope, and the stream ends.
#[utoipa::path(get, path = "/runs/{id}/events", tag = "runs", security(("bearer" = ["invoke"])), params(RunPath),
    responses(
        (status = 200, description = "The run's events, as server-sent events; a finished run's stream has its `result` alone", content_type = "text/event-stream", body = String),
        BadQuery,
        (status = 404, description = "No such run", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "This caller holds its share of the event streams (`max_event_streams_per_caller`); see Retry-After", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The store is unreachable, or too many event streams are open", body = Problem, content_type = "application/problem+json"),
    ))]
async fn run_events(
    auth: Require<need::Invoke>,
    peer: Peer,
    State(state): State<AppState>,
    Path(p): Path<RunPath>,
) -> Result<Response> {
    Ok(sse(state
        .invoker
        .follower()
        .events(p.id, &peer.holder(&auth))
        .await?))
}

/// A run's events as server-sent events: `status` (with the approval of a
/// held call), `output` chunks, then `result` with the envelope.
pub(super) fn sse(events: BoxStream<'static, RunEvent>) -> Response {
    let stream = events.map(|event| Ok::<_, Infallible>(sse_event(&event)));
    Sse::new(stream).keep_alive(KeepAlive::default()).into_response()
}

fn sse_event(event: &RunEvent) -> Event {
    match event {
        RunEvent::Held(held) => json_event(
            "status",
            &serde_json::json!({
                "status": RunStatus::PendingApproval,
                "approval_id": held.approval_id,
                "approval_url": format!("/approvals/{}", held.approval_id),
            }),
        ),
        RunEvent::Status(status) => json_event("status", &serde_json::json!({"status": status})),
        RunEvent::Denied { note } => json_event(
            "status",
            &serde_json::json!({"status": RunStatus::Denied, "note": note}),
        ),
        RunEvent::Output(chunk) => json_event(
            "output",
            &serde_json::json!({"chunk": String::from_utf8_lossy(chunk)}),
        ),
        RunEvent::Progress(p) => json_event(
            "progress",
            &serde_json::json!({"progress": p.progress, "total": p.total, "message": p.message}),
        ),
        RunEvent::Result(envelope) => json_event("result", envelope.as_ref()),
    }
}

pub(super) fn json_event(name: &str, data: &impl Serialize) -> Event {
    Event::default()
        .event(name)
        .json_data(data)
        .unwrap_or_else(|_| Event::default().event(name))
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
/// is withdrawn; a finished one answers 409. With tokens, only the token
/// that asked for the run, or an approver, may cancel it.
#[utoipa::path(post, path = "/runs/{id}/cancel", tag = "runs", security(("bearer" = ["invoke"])), params(RunPath),
    responses(
        (status = 202, description = "Cancelling", body = CancelAccepted),
        BadQuery,
        (status = 403, description = "The token did not ask for this run and is not an approver (`not_requester`)", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such run", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The run already finished, or runs on another instance", body = Problem, content_type = "application/problem+json"),
        StoreUnavailable,
    ))]
async fn cancel_run(
    auth: Require<need::Invoke>,
    State(state): State<AppState>,
    Path(p): Path<RunPath>,
) -> Result<Response> {
    let by = Canceller {
        name: auth.caller.name.as_deref(),
        approver: auth.caller.role >= Role::Approve,
    };
    let status = match state.invoker.follower().cancel(p.id, by).await? {
        Cancelled::Cancelling => "cancelling",
        Cancelled::Withdrawn => "cancelled",
    };
    Ok(accepted(p.id, status))
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

/// A signed link's query, as the envelope's `url` carries it.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct LinkQuery {
    /// When the link stops working, in Unix seconds; signed with the rest.
    #[param(value_type = Option<i64>)]
    pub expires: Option<String>,
    /// HMAC-SHA256 of the run, the path and `expires` under this
    /// instance's key, in hex.
    #[param(pattern = "^[0-9a-f]{64}$")]
    pub signature: Option<String>,
}

/// Who may have an artifact: a caller who may invoke, or anyone holding
/// a signed link (checked once the run is known). A request with neither
/// is refused before anything is looked up.
pub(super) enum FileAccess {
    Caller,
    Signed(LinkQuery),
}

impl FromRequestParts<AppState> for FileAccess {
    type Rejection = super::kit::error::ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self> {
        let Query(link) = Query::<LinkQuery>::from_request_parts(parts, state).await?;
        if link.expires.is_none() && link.signature.is_none() {
            Require::<need::Invoke>::from_request_parts(parts, state).await?;
            return Ok(Self::Caller);
        }
        Ok(Self::Signed(link))
    }
}

/// An artifact of an entrypoint run: its bytes, or a redirect to the
/// artifact bucket.
#[utoipa::path(get, path = "/runs/{id}/files/{path}", tag = "runs",
    security(("bearer" = ["invoke"]), ("signed_link" = [])), params(RunFilePath, LinkQuery),
    responses(
        (status = 200, description = "The file's bytes, as an attachment (artifacts on the server's disk)", content_type = "application/octet-stream", body = inline(Binary)),
        (status = 307, description = "Artifacts in a bucket: `Location` is a presigned URL of the file, good until the artifact expires",
            headers(("Location" = String, description = "The presigned URL"))),
        BadQuery,
        (status = 403, description = "A signed link whose signature does not match (`bad_signature`) or whose time has passed (`link_expired`)", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such run or file among the run's artifacts (`not_found`); the artifacts were deleted \
after `artifact_ttl_secs` (`artifact_expired`); or they are on the disk of the instance that ran the run, not this one \
(`artifact_elsewhere`). A path with `..`, a symbolic link on the way, or something other than a regular file with a \
single link is never served.", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "The file is over 64 MiB", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The run log or the artifact bucket is unreachable", body = Problem, content_type = "application/problem+json"),
        (status = 504, description = "The server's disk did not give the file within 10 s", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn get_run_file(
    access: FileAccess,
    State(state): State<AppState>,
    Path(p): Path<RunFilePath>,
) -> Result<Response> {
    let access = match &access {
        FileAccess::Caller => Access::Caller,
        FileAccess::Signed(link) => Access::Signed {
            expires: link.expires.as_deref(),
            signature: link.signature.as_deref(),
        },
    };
    match state.invoker.serve_artifact(p.id, &p.path, access).await? {
        Served::Bytes(bytes) => Ok(attachment(&p.path, bytes)),
        Served::Redirect(url) => Ok((
            StatusCode::TEMPORARY_REDIRECT,
            [
                (header::LOCATION, url),
                (header::CACHE_CONTROL, "no-store".to_owned()),
            ],
        )
            .into_response()),
    }
}

/// `bytes` as a download named after the last part of `path`.
fn attachment(path: &str, bytes: Vec<u8>) -> Response {
    let name = path
        .rsplit('/')
        .next()
        .unwrap_or("file")
        .replace(['"', '\\'], "_");
    let disposition = HeaderValue::from_str(&format!("attachment; filename=\"{name}\""))
        .unwrap_or_else(|_| HeaderValue::from_static("attachment"));
    (
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
        .into_response()
}
