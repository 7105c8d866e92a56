//! `POST /tools/{tool}/invoke` and its skill-qualified twin.

use super::extract::{JsonBody, Path, Query};
use super::runs::{MAX_WAIT_SECS, event_stream, follow};
use super::tools::resolve_tool;
use crate::AppState;
use crate::auth::{Caller, Require, need};
use crate::error::{ApiError, Result};
use crate::invoke::{Envelope, Held, store_error};
use crate::policy::{Decision, Verdict};
use crate::store::{Run, RunStatus};
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(invoke_tool))
        .routes(routes!(invoke_skill_tool))
        .routes(routes!(run_command))
}

/// The body of an invoke call.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InvokeRequest {
    /// The tool's arguments, checked against its `parameters` schema.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub arguments: Value,
    /// The mode the caller is in (`Global`, `Dev`, …), passed to the tool.
    pub mode: Option<String>,
}

/// Options of an invoke call.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct InvokeQuery {
    /// Render and decide, without running or recording anything.
    pub dry_run: Option<bool>,
    /// Seconds (≤ 300) to hold a call that waits for approval open.
    pub wait: Option<u64>,
}

/// What a dry run would do.
#[derive(Debug, Serialize, ToSchema)]
pub struct DryRun {
    /// The program, then its arguments, exactly as they would run.
    pub argv: Vec<String>,
    pub cwd: String,
    /// Names of the environment variables the tool would get.
    pub env: Vec<String>,
    pub timeout_secs: u64,
    pub decision: Verdict,
    pub reason: String,
}

/// A call accepted to finish later.
#[derive(Debug, Serialize, ToSchema)]
pub struct InvokeAccepted {
    pub run_id: Uuid,
    /// `running`, or `pending_approval` when a person must decide first.
    pub status: String,
    pub approval_id: Option<Uuid>,
    pub approval_url: Option<String>,
    pub run_url: String,
}

/// Path of the bare invoke route.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ToolPath {
    /// A tool name (or the `skill__tool` export name of an ambiguous one).
    pub tool: String,
}

/// Path of the skill-qualified invoke route.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct SkillToolPath {
    pub skill: String,
    pub tool: String,
}

/// Run a tool. Answers with the envelope once it ran (even when the tool
/// failed: that is a result, not an HTTP error); `Prefer: respond-async`
/// answers 202 at once; `Accept: text/event-stream` streams its events.
#[utoipa::path(post, path = "/tools/{tool}/invoke", tag = "invoke", security(("bearer" = ["invoke"])), params(ToolPath, InvokeQuery),
    request_body(content = InvokeRequest, description = "The arguments; an empty body means none"),
    responses(
        (status = 200, description = "The tool ran (or could not start): the envelope; or, with dry_run, what would run", content(
            (Envelope = "application/json"),
            (DryRun = "application/json"),
        )),
        (status = 202, description = "Held for approval (`pending_approval`, with the approval's id and URL), or accepted after `Prefer: respond-async`; follow the run at `Location`", body = InvokeAccepted),
        (status = 400, description = "The body is not JSON or not an invoke request, or `wait` is over 300", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 403, description = "A standing deny grant refused the call (`denied`; nothing ran, the attempt is recorded), or a person denied it while the caller waited", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such tool", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 409, description = "Several skills define this tool name", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 413, description = "The body is over 1 MiB", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 422, description = "The arguments fail the tool's schema, or argument injection", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 429, description = "Too many runs at once; see Retry-After", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 503, description = "The run log is unreachable (nothing ran) or the server is stopping", body = crate::error::Problem, content_type = "application/problem+json"),
    ))]
async fn invoke_tool(
    auth: Require<need::Invoke>,
    State(state): State<AppState>,
    Path(p): Path<ToolPath>,
    Query(q): Query<InvokeQuery>,
    headers: HeaderMap,
    JsonBody(body): JsonBody<InvokeRequest>,
) -> Result<Response> {
    let catalog = state.catalog.current();
    let index = resolve_tool(&catalog, &p.tool)?;
    invoke(&state, &catalog, index, q, &headers, body, &auth.caller).await
}

/// Run a tool of a given skill: the way to call a tool whose bare name
/// several skills define.
#[utoipa::path(post, path = "/skills/{skill}/tools/{tool}/invoke", tag = "invoke", security(("bearer" = ["invoke"])), params(SkillToolPath, InvokeQuery),
    request_body(content = InvokeRequest, description = "The arguments; an empty body means none"),
    responses(
        (status = 200, description = "The tool ran (or could not start): the envelope; or, with dry_run, what would run", content(
            (Envelope = "application/json"),
            (DryRun = "application/json"),
        )),
        (status = 202, description = "Held for approval (`pending_approval`, with the approval's id and URL), or accepted after `Prefer: respond-async`; follow the run at `Location`", body = InvokeAccepted),
        (status = 400, description = "The body is not JSON or not an invoke request, or `wait` is over 300", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 403, description = "A standing deny grant refused the call (`denied`; nothing ran, the attempt is recorded), or a person denied it while the caller waited", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such skill or tool", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 413, description = "The body is over 1 MiB", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 422, description = "The arguments fail the tool's schema, or argument injection", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 429, description = "Too many runs at once; see Retry-After", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 503, description = "The run log is unreachable (nothing ran) or the server is stopping", body = crate::error::Problem, content_type = "application/problem+json"),
    ))]
async fn invoke_skill_tool(
    auth: Require<need::Invoke>,
    State(state): State<AppState>,
    Path(p): Path<SkillToolPath>,
    Query(q): Query<InvokeQuery>,
    headers: HeaderMap,
    JsonBody(body): JsonBody<InvokeRequest>,
) -> Result<Response> {
    let catalog = state.catalog.current();
    catalog
        .skill_index(&p.skill)
        .ok_or_else(|| ApiError::not_found("skill", &p.skill))?;
    let index = catalog
        .skill_tool(&p.skill, &p.tool)
        .ok_or_else(|| ApiError::not_found("tool", format!("{}/{}", p.skill, p.tool)))?;
    invoke(&state, &catalog, index, q, &headers, body, &auth.caller).await
}

/// A command alias in a path.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct CommandPath {
    /// The alias, without its `/`.
    pub command: String,
}

/// Run a command alias (seed 004): a `prompt_rewrite` skill answers with
/// its instructions; a `tool_dispatch` skill invokes its `command_tool`
/// exactly as `POST /tools/{tool}/invoke` would.
#[utoipa::path(post, path = "/commands/{command}", tag = "invoke", security(("bearer" = ["invoke"])), params(CommandPath, InvokeQuery),
    request_body(content = InvokeRequest, description = "Arguments for a tool_dispatch command; an empty body means none"),
    responses(
        (status = 200, description = "The instructions (prompt_rewrite), or the envelope of the dispatched tool", content(
            (crate::http::skills::SkillPrompt = "application/json"),
            (Envelope = "application/json"),
            (DryRun = "application/json"),
        )),
        (status = 202, description = "Held for approval (`pending_approval`, with the approval's id and URL), or accepted after `Prefer: respond-async`; follow the run at `Location`", body = InvokeAccepted),
        (status = 400, description = "The body is not JSON or not an invoke request, or `wait` is over 300", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 403, description = "A standing deny grant refused the call (`denied`; nothing ran, the attempt is recorded), or a person denied it while the caller waited", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such command", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 409, description = "The command's tool name is ambiguous", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 422, description = "The arguments fail the tool's schema, or argument injection", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 429, description = "Too many runs at once; see Retry-After", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 503, description = "The run log is unreachable (nothing ran) or the server is stopping", body = crate::error::Problem, content_type = "application/problem+json"),
    ))]
async fn run_command(
    auth: Require<need::Invoke>,
    State(state): State<AppState>,
    Path(p): Path<CommandPath>,
    Query(q): Query<InvokeQuery>,
    headers: HeaderMap,
    JsonBody(body): JsonBody<InvokeRequest>,
) -> Result<Response> {
    let catalog = state.catalog.current();
    let name = p.command.strip_prefix('/').unwrap_or(&p.command);
    let entry = catalog
        .command(name)
        .ok_or_else(|| ApiError::not_found("command", name))?;
    let skill = catalog.skills[entry.skill].clone();
    match (skill.invocation_mode, &skill.command_tool) {
        (crate::skill::InvocationMode::ToolDispatch, Some(tool)) => {
            let index = resolve_tool(&catalog, tool)?;
            invoke(&state, &catalog, index, q, &headers, body, &auth.caller).await
        }
        _ => Ok(Json(crate::http::skills::SkillPrompt::new(&skill)).into_response()),
    }
}

async fn invoke(
    state: &AppState,
    catalog: &crate::catalog::Catalog,
    index: usize,
    q: InvokeQuery,
    headers: &HeaderMap,
    body: InvokeRequest,
    caller: &Caller,
) -> Result<Response> {
    let invoker = &state.invoker;
    let wait = q.wait.unwrap_or(0);
    if wait > MAX_WAIT_SECS {
        return Err(ApiError::BadRequest(format!(
            "wait must be at most {MAX_WAIT_SECS} seconds"
        )));
    }
    let prepared = invoker.prepare(catalog, index, &body.arguments, body.mode.as_deref())?;
    let (Decision { decision, reason }, facts) = invoker.decide(&prepared).await?;
    if q.dry_run.unwrap_or(false) {
        return Ok(Json(DryRun {
            argv: prepared.argv.clone(),
            cwd: prepared.cwd.display().to_string(),
            env: prepared.env.iter().map(|(k, _)| k.clone()).collect(),
            timeout_secs: prepared.timeout.as_secs(),
            decision,
            reason,
        })
        .into_response());
    }
    let streaming = wants(headers, header::ACCEPT, "text/event-stream");
    let asynchronous = wants(
        headers,
        header::HeaderName::from_static("prefer"),
        "respond-async",
    );
    match decision {
        Verdict::Deny => {
            let id = invoker.refuse(&prepared, caller.name.clone()).await?;
            Err(ApiError::Refused {
                code: "denied",
                detail: format!("{reason}; nothing ran (run {id} is recorded as denied)"),
            })
        }
        Verdict::Ask => {
            let held = invoker.hold(&prepared, &facts, caller.name.clone()).await?;
            tracing::info!(run = %held.run_id, approval = %held.approval_id, %reason, "call held for approval");
            if streaming {
                let first = pending_event(&held);
                return Ok(follow(
                    state.clone(),
                    held.run_id,
                    vec![first],
                    Some(RunStatus::PendingApproval),
                )
                .into_response());
            }
            if wait > 0 && !asynchronous {
                let run = invoker
                    .wait_final(held.run_id, Duration::from_secs(wait))
                    .await
                    .map_err(store_error)?;
                if run.status.is_final() {
                    return finished(&run);
                }
            }
            Ok(accepted(InvokeAccepted {
                run_id: held.run_id,
                status: RunStatus::PendingApproval.as_str().to_owned(),
                approval_id: Some(held.approval_id),
                approval_url: Some(format!("/approvals/{}", held.approval_id)),
                run_url: format!("/runs/{}", held.run_id),
            }))
        }
        Verdict::Run => {
            let (live, events) = invoker.start(prepared, caller.name.clone()).await?;
            if streaming {
                return Ok(event_stream(live, events, None).into_response());
            }
            drop(events);
            if asynchronous {
                return Ok(accepted(InvokeAccepted {
                    run_id: live.id,
                    status: RunStatus::Running.as_str().to_owned(),
                    approval_id: None,
                    approval_url: None,
                    run_url: format!("/runs/{}", live.id),
                }));
            }
            match live.finished().await {
                Some(envelope) => Ok(Json(envelope.as_ref().clone()).into_response()),
                None => Err(ApiError::Conflict {
                    code: "not_run",
                    detail: format!("run {} ended before it started (it was cancelled)", live.id),
                }),
            }
        }
    }
}

/// 202 with `Location: /runs/{id}`.
fn accepted(body: InvokeAccepted) -> Response {
    let location = HeaderValue::from_str(&body.run_url).ok();
    let mut res = (StatusCode::ACCEPTED, Json(body)).into_response();
    if let Some(v) = location {
        res.headers_mut().insert(header::LOCATION, v);
    }
    res
}

/// The first event of a held call's stream.
fn pending_event(held: &Held) -> axum::response::sse::Event {
    super::runs::json_event(
        "status",
        &serde_json::json!({
            "status": RunStatus::PendingApproval,
            "approval_id": held.approval_id,
            "approval_url": format!("/approvals/{}", held.approval_id),
        }),
    )
}

/// What a caller that waited gets for a run that ended: its envelope, or
/// why there is none.
fn finished(run: &Run) -> Result<Response> {
    if let Some(result) = &run.result {
        return Ok(Json(result.clone()).into_response());
    }
    Err(match run.status {
        RunStatus::Denied => ApiError::Refused {
            code: "denied",
            detail: format!("run {} was denied; nothing ran", run.id),
        },
        RunStatus::Expired => ApiError::Conflict {
            code: "approval_expired",
            detail: format!("run {} expired waiting for approval; nothing ran", run.id),
        },
        other => ApiError::Conflict {
            code: "not_run",
            detail: format!("run {} ended {} without running", run.id, other.as_str()),
        },
    })
}

/// Whether a header lists `token` (case-insensitive, ignoring parameters).
fn wants(headers: &HeaderMap, name: impl header::AsHeaderName, token: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| {
            v.split(',').any(|part| {
                part.split(';')
                    .next()
                    .is_some_and(|t| t.trim().eq_ignore_ascii_case(token))
            })
        })
}
