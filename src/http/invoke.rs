//! `POST /tools/{tool}/invoke` and its skill-qualified twin.

use super::AppState;
use super::auth::{Require, need};
use super::kit::error::{ApiError, Problem, Result};
use super::kit::extract::{AgentPolicy, AgentToolsQuery, JsonBody, Path, Peer, Query};
use super::responses::{BodyProblems, InvokeProblems, describe_streams, empty_bodies_allowed};
use super::runs::sse;
use crate::auth::Caller;
use crate::invoke::{
    Asked, Call, CallSession, Called, Delivery, DryRun, Envelope, Gate, IdempotencyKey, InvokeError,
    StreamPermit, Target,
};
use crate::store::RunStatus;
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
    let mut router = OpenApiRouter::new()
        .routes(routes!(invoke_tool))
        .routes(routes!(invoke_skill_tool))
        .routes(routes!(run_command));
    describe_streams(router.get_openapi_mut());
    empty_bodies_allowed(router.get_openapi_mut());
    router
}

/// The body of an invoke call.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InvokeRequest {
    /// The tool's arguments, checked against its `parameters` schema.
    /// `null` reads as `{}`.
    #[serde(default)]
    #[schema(value_type = Option<std::collections::HashMap<String, Value>>)]
    pub arguments: Value,
    /// The mode the caller is in (`Global`, `Dev`, …), passed to the tool:
    /// 1–32 letters, digits, `_`, `-` or `.`.
    #[schema(pattern = "^[A-Za-z0-9_.-]{1,32}$")]
    pub mode: Option<String>,
    /// The session the call is made in (`POST /sessions`): the hooks of
    /// every skill active in it wrap the call, and its tool must be of
    /// one of them.
    pub session: Option<uuid::Uuid>,
}

impl InvokeRequest {
    /// The checks the pipeline makes of every call, for the answers that
    /// do not reach it (a `prompt_rewrite` command), so that a request one
    /// route refuses is refused by all.
    fn check(&self, q: &InvokeQuery) -> Result<(), InvokeError> {
        let wait = Duration::from_secs(q.wait.unwrap_or(0));
        crate::invoke::check_request(&self.arguments, self.mode.as_deref(), wait)
    }
}

/// Options of an invoke call.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct InvokeQuery {
    /// Render and decide, without running or recording anything.
    pub dry_run: Option<bool>,
    /// Seconds (≤ 300) to hold a call that waits for approval open.
    #[param(maximum = 300)]
    pub wait: Option<u64>,
}

/// The request headers an invoke call reads. Declared for the document
/// only (so generated clients can send them); the handler reads them
/// from the `HeaderMap`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Header)]
pub struct InvokeHeaders {
    /// `respond-async` answers 202 at once with the run's id and `Location`,
    /// and runs the tool in the background. Other preferences are ignored.
    #[serde(rename = "Prefer")]
    #[param(value_type = String, required = false)]
    pub prefer: Option<String>,
    /// `text/event-stream` streams the run's events instead of answering
    /// once it ends; anything else answers JSON.
    #[serde(rename = "Accept")]
    #[param(value_type = String, required = false)]
    pub accept: Option<String>,
    /// 1–255 printable ASCII characters (spaces only inside) naming this
    /// call, so that a retry of it (by the same caller, within 24 hours)
    /// answers with the run the first made instead of making another:
    /// held, followed while it runs, or its final answer. The same key
    /// with another tool or other arguments is refused (422
    /// `idempotency_key_reused`).
    #[serde(rename = "Idempotency-Key")]
    #[param(value_type = String, required = false, min_length = 1, max_length = 255, pattern = "^[!-~]([ -~]{0,253}[!-~])?$")]
    pub idempotency_key: Option<String>,
    /// With `session` in the body: the secret `POST /sessions` answered,
    /// which a call in the session shows (a token of the session's own
    /// named caller does instead).
    #[serde(rename = "Skilld-Session-Secret")]
    #[param(value_type = String, required = false, max_length = 128)]
    pub session_secret: Option<String>,
}

/// The 200 of an invoke: the run's envelope, or with `dry_run=true` what
/// would run. The two have no required field in common, so a body is
/// exactly one of them.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum InvokeOutcome {
    Envelope(Envelope),
    DryRun(DryRun),
}

/// The 200 of a command: a `prompt_rewrite` skill's prompt, or what its
/// `tool_dispatch` tool's invoke answers; `/skills` the available skills
/// index, `/help` the commands. No two share every required field, so a
/// body is exactly one of them.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum CommandOutcome {
    Prompt(crate::http::skills::SkillPrompt),
    Envelope(Envelope),
    DryRun(DryRun),
    Index(crate::http::skills::SkillList),
    Commands(crate::http::skills::CommandList),
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

/// What invoke's 200 holds.
const INVOKE_OK: &str = "The tool ran (or could not start): its `Envelope`, also when the tool failed \
(`success: false`). With `dry_run=true`, a `DryRun`: what would run, and whether it would be held for approval. \
With `Accept: text/event-stream`, the run's events instead.";

/// What an invoke's (or a command's) 202 holds.
const INVOKE_ACCEPTED: &str = "Held for approval (`pending_approval`, with the approval's id and URL), or \
accepted after `Prefer: respond-async`; follow the run at `Location`";

/// What a command's 200 holds.
const COMMAND_OK: &str = "A `prompt_rewrite` command: the skill's `SkillPrompt`. A `tool_dispatch` command: \
what invoking its tool answers (an `Envelope`, a `DryRun` with `dry_run=true`, or with \
`Accept: text/event-stream` the run's events). The built-ins: `/skills` answers the available skills \
index (a `SkillList`), `/help` the commands (a `CommandList`), and `/skill` with \
`{\"arguments\": {\"name\": SKILL, \"arguments\": {…}}}` what that skill's command would.";

/// The 409 of a command.
const CONFLICT_COMMAND: &str = "The caller's tool policy (`agent_tools`) lacks a tool the command's skill \
requires, and no loaded skill provides it (`missing_required_tool`); several skills define its \
`command_tool` (`ambiguous_tool`); or, with `wait`, the call expired before a person decided it \
(`approval_expired`), or its run ended without running (`not_run`)";

/// The 409 of an invoke that names a skill.
const CONFLICT_WAITED: &str = "With `wait`, the call expired before a person decided it (`approval_expired`), \
or its run ended without running (`not_run`)";

/// The 409 of an invoke by a bare tool name.
const CONFLICT_AMBIGUOUS: &str = "Several skills define this tool name (`ambiguous_tool`, with `candidates`); \
or, with `wait`, the call expired before a person decided it (`approval_expired`), or its run ended without \
running (`not_run`)";

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
#[utoipa::path(post, path = "/tools/{tool}/invoke", tag = "invoke", security(("bearer" = ["invoke"])), params(ToolPath, InvokeQuery, InvokeHeaders),
    request_body(content = InvokeRequest, description = "The arguments; an empty body means none"),
    responses(
        (status = 200, description = INVOKE_OK, content(
            (InvokeOutcome = "application/json"),
            (String = "text/event-stream"),
        )),
        (status = 202, description = INVOKE_ACCEPTED, body = InvokeAccepted),
        InvokeProblems,
        BodyProblems,
        (status = 404, description = "No such tool", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = CONFLICT_AMBIGUOUS, body = Problem, content_type = "application/problem+json"),
    ))]
async fn invoke_tool(
    auth: Require<need::Invoke>,
    State(state): State<AppState>,
    Path(p): Path<ToolPath>,
    Query(q): Query<InvokeQuery>,
    peer: Peer,
    headers: HeaderMap,
    JsonBody(body): JsonBody<InvokeRequest>,
) -> Result<Response> {
    let holder = peer.holder(&auth);
    invoke(
        &state,
        Target::Tool(p.tool),
        q,
        &headers,
        body,
        &auth.caller,
        &holder,
    )
    .await
}

/// Run a tool of a given skill: the way to call a tool whose bare name
/// several skills define.
#[utoipa::path(post, path = "/skills/{skill}/tools/{tool}/invoke", tag = "invoke", security(("bearer" = ["invoke"])), params(SkillToolPath, InvokeQuery, InvokeHeaders),
    request_body(content = InvokeRequest, description = "The arguments; an empty body means none"),
    responses(
        (status = 200, description = INVOKE_OK, content(
            (InvokeOutcome = "application/json"),
            (String = "text/event-stream"),
        )),
        (status = 202, description = INVOKE_ACCEPTED, body = InvokeAccepted),
        InvokeProblems,
        BodyProblems,
        (status = 404, description = "No such skill or tool", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = CONFLICT_WAITED, body = Problem, content_type = "application/problem+json"),
    ))]
async fn invoke_skill_tool(
    auth: Require<need::Invoke>,
    State(state): State<AppState>,
    Path(p): Path<SkillToolPath>,
    Query(q): Query<InvokeQuery>,
    peer: Peer,
    headers: HeaderMap,
    JsonBody(body): JsonBody<InvokeRequest>,
) -> Result<Response> {
    let target = Target::SkillTool {
        skill: p.skill,
        tool: p.tool,
    };
    invoke(
        &state,
        target,
        q,
        &headers,
        body,
        &auth.caller,
        &peer.holder(&auth),
    )
    .await
}

/// A command alias in a path.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct CommandPath {
    /// The alias, or a built-in (`skills`, `skill`, `help`), without its `/`.
    pub command: String,
}

/// Run a command (seed 004): a skill's alias, where a `prompt_rewrite`
/// skill answers with its instructions and a `tool_dispatch` skill invokes
/// its `command_tool` exactly as `POST /tools/{tool}/invoke` would; or a
/// built-in: `/skills` (the available skills index), `/skill` (a skill by
/// its exact name, as its alias would run) and `/help` (the commands). A
/// skill the caller's tool policy leaves out is not run: 409.
#[utoipa::path(post, path = "/commands/{command}", tag = "invoke", security(("bearer" = ["invoke"])), params(CommandPath, InvokeQuery, AgentToolsQuery, InvokeHeaders),
    request_body(content = InvokeRequest, description = "Arguments for a tool_dispatch command, or `/skill`'s \
`name` (and `arguments`); an empty body means none"),
    responses(
        (status = 200, description = COMMAND_OK, content(
            (CommandOutcome = "application/json"),
            (String = "text/event-stream"),
        )),
        (status = 202, description = INVOKE_ACCEPTED, body = InvokeAccepted),
        InvokeProblems,
        BodyProblems,
        (status = 404, description = "No such command, or no skill of the name `/skill` was given", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = CONFLICT_COMMAND, body = Problem, content_type = "application/problem+json"),
    ))]
#[expect(clippy::too_many_arguments, reason = "one extractor per part of the request")]
async fn run_command(
    auth: Require<need::Invoke>,
    State(state): State<AppState>,
    Path(p): Path<CommandPath>,
    Query(q): Query<InvokeQuery>,
    AgentPolicy(policy): AgentPolicy,
    peer: Peer,
    headers: HeaderMap,
    JsonBody(body): JsonBody<InvokeRequest>,
) -> Result<Response> {
    // Checked for every command, also those that answer without a call:
    // a key or a secret that is not one is a bad request whatever it
    // would have keyed or opened.
    idempotency_key(&headers)?;
    super::sessions::session_secret(&headers)?;
    let catalog = state.catalog.current();
    let name = p.command.strip_prefix('/').unwrap_or(&p.command);
    let request = CommandRequest {
        state: &state,
        policy,
        q,
        headers: &headers,
        caller: &auth.caller,
        holder: peer.holder(&auth),
    };
    match name {
        "skills" => {
            no_arguments(&body, &request.q, name)?;
            let index = crate::http::skills::SkillList::of(&catalog, &request.policy, |_, _| true);
            Ok(Json(CommandOutcome::Index(index)).into_response())
        }
        "help" => {
            no_arguments(&body, &request.q, name)?;
            let commands = crate::http::skills::CommandList::of(&catalog, &request.policy);
            Ok(Json(CommandOutcome::Commands(commands)).into_response())
        }
        "skill" => {
            let (skill, body) = named_skill(body, &request.q)?;
            let skill = catalog
                .skill(&skill)
                .ok_or_else(|| not_loaded(&catalog, &skill))?
                .clone();
            request.run(&catalog, &skill, body).await
        }
        alias => {
            let entry = catalog
                .command(alias)
                .ok_or_else(|| ApiError::not_found("command", alias))?;
            let skill = catalog.skills[entry.skill].clone();
            request.run(&catalog, &skill, body).await
        }
    }
}

/// What a command needs besides its skill and its body.
struct CommandRequest<'a> {
    state: &'a AppState,
    policy: crate::catalog::AgentTools,
    q: InvokeQuery,
    headers: &'a HeaderMap,
    caller: &'a Caller,
    holder: String,
}

impl CommandRequest<'_> {
    /// Runs `skill` as its command: its instructions, or its
    /// `command_tool` invoked with `body`; unless the policy leaves it out.
    async fn run(
        self,
        catalog: &crate::catalog::Catalog,
        skill: &crate::skill::Skill,
        body: InvokeRequest,
    ) -> Result<Response> {
        crate::http::skills::available(catalog, skill, &self.policy)?;
        match (skill.invocation_mode, &skill.command_tool) {
            (crate::skill::InvocationMode::ToolDispatch, Some(tool)) => {
                let target = Target::Tool(tool.clone());
                invoke(
                    self.state,
                    target,
                    self.q,
                    self.headers,
                    body,
                    self.caller,
                    &self.holder,
                )
                .await
            }
            _ => {
                body.check(&self.q)?;
                let prompt = crate::http::skills::SkillPrompt::new(skill);
                Ok(Json(CommandOutcome::Prompt(prompt)).into_response())
            }
        }
    }
}

/// 404 for `/skill` of a name no loaded skill has, saying why when the
/// loader excluded a skill of that name (seed 004 §5.2: fail clearly).
fn not_loaded(catalog: &crate::catalog::Catalog, name: &str) -> ApiError {
    let why = catalog
        .diagnostics
        .iter()
        .find(|d| d.is_error() && d.skill.as_deref() == Some(name));
    match why {
        Some(d) => ApiError::NotLoaded(format!(
            "skill '{name}' is not loaded: {} ({}); GET /diagnostics lists why skills are excluded",
            d.message, d.code
        )),
        None => ApiError::not_found("skill", name),
    }
}

/// A built-in that takes no arguments refuses some.
fn no_arguments(body: &InvokeRequest, q: &InvokeQuery, command: &str) -> Result<()> {
    body.check(q)?;
    let given: Vec<&String> = body
        .arguments
        .as_object()
        .into_iter()
        .flat_map(|a| a.keys())
        .collect();
    if given.is_empty() {
        return Ok(());
    }
    Err(invalid_arguments(
        format!("/{command} takes no arguments"),
        given
            .into_iter()
            .map(|k| (k.clone(), format!("/{command} takes no arguments")))
            .collect(),
    ))
}

/// `/skill`'s arguments: the skill's exact `name`, and the `arguments`
/// its command takes (an object), as the body its alias would get.
fn named_skill(body: InvokeRequest, q: &InvokeQuery) -> Result<(String, InvokeRequest)> {
    body.check(q)?;
    let mut args = match body.arguments {
        Value::Object(args) => args,
        _ => serde_json::Map::new(),
    };
    let name = args.remove("name");
    let inner = args.remove("arguments");
    let mut errors: Vec<(String, String)> = args
        .keys()
        .map(|k| (k.clone(), "/skill takes only name and arguments".to_owned()))
        .collect();
    let name = match name {
        Some(Value::String(n)) => Some(n),
        Some(_) => {
            errors.push(("name".to_owned(), "must be a skill's name, a string".to_owned()));
            None
        }
        None => {
            errors.push(("name".to_owned(), "is required: the skill to run".to_owned()));
            None
        }
    };
    if inner.as_ref().is_some_and(|a| !a.is_object() && !a.is_null()) {
        errors.push(("arguments".to_owned(), "must be an object".to_owned()));
    }
    match name {
        Some(name) if errors.is_empty() => Ok((
            name,
            InvokeRequest {
                arguments: inner.unwrap_or(Value::Null),
                mode: body.mode,
                session: None,
            },
        )),
        _ => Err(invalid_arguments(
            format!("{} argument(s) of /skill are invalid", errors.len()),
            errors,
        )),
    }
}

/// 422 `invalid_arguments`, field by field.
fn invalid_arguments(detail: String, errors: Vec<(String, String)>) -> ApiError {
    ApiError::Unprocessable {
        code: "invalid_arguments",
        detail,
        errors: errors
            .into_iter()
            .map(|(field, message)| crate::invoke::FieldError { field, message })
            .collect(),
    }
}

/// The pipeline's call for an HTTP request, and its answer as a response.
async fn invoke(
    state: &AppState,
    target: Target,
    q: InvokeQuery,
    headers: &HeaderMap,
    body: InvokeRequest,
    caller: &Caller,
    holder: &str,
) -> Result<Response> {
    let streaming = wants(headers, header::ACCEPT, "text/event-stream");
    let asynchronous = wants(
        headers,
        header::HeaderName::from_static("prefer"),
        "respond-async",
    );
    let dry_run = q.dry_run.unwrap_or(false);
    let key = idempotency_key(headers)?;
    let secret = super::sessions::session_secret(headers)?;
    // Taken first: a call must not start for a stream that cannot open.
    let permit = (streaming && !dry_run)
        .then(|| state.invoker.follower().stream_permit(holder))
        .transpose()?;
    let call = Call {
        target,
        arguments: body.arguments,
        mode: body.mode,
        dry_run,
        wait: Duration::from_secs(q.wait.unwrap_or(0)),
        delivery: if streaming || asynchronous {
            Delivery::Started
        } else {
            Delivery::Result
        },
        gate: Gate::Policy,
        asked: asked(caller, headers),
        sampler: None,
        budget: None,
        session: body.session.map(|id| CallSession::named(id, secret)),
    };
    let catalog = state.catalog.current();
    let called = state.invoker.call_keyed(&catalog, call, key).await?;
    respond(state, called, permit)
}

/// The request's `Idempotency-Key`, if it sent one; 400 if it is not one
/// (or it sent several).
pub(super) fn idempotency_key(headers: &HeaderMap) -> Result<Option<IdempotencyKey>> {
    let mut values = headers.get_all("idempotency-key").iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(ApiError::BadRequest(
            "send one Idempotency-Key header, not several".to_owned(),
        ));
    }
    Ok(Some(IdempotencyKey::parse(value.as_bytes())?))
}

/// Who asked, as the run log records it: the token's name and the
/// request's id.
pub(super) fn asked(caller: &Caller, headers: &HeaderMap) -> Asked {
    Asked {
        by: caller.name.clone(),
        request_id: headers
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
    }
}

/// The answer to a call: its envelope, 202, or its events.
pub(super) fn respond(state: &AppState, called: Called, permit: Option<StreamPermit>) -> Result<Response> {
    Ok(match (called, permit) {
        (Called::DryRun(plan), _) => Json(InvokeOutcome::DryRun(*plan)).into_response(),
        (Called::Refused { run_id, reason }, _) => {
            return Err(ApiError::Refused {
                code: "denied",
                detail: format!("{reason}; nothing ran (run {run_id} is recorded as denied)"),
            });
        }
        (Called::Held(held), Some(permit)) => sse(state.invoker.follower().held_events(held, permit)),
        (Called::Held(held), None) => accepted(InvokeAccepted {
            run_id: held.run_id,
            status: RunStatus::PendingApproval.as_str().to_owned(),
            approval_id: Some(held.approval_id),
            approval_url: Some(format!("/approvals/{}", held.approval_id)),
            run_url: format!("/runs/{}", held.run_id),
        }),
        (Called::Finished(envelope), _) => Json(envelope.as_ref()).into_response(),
        (Called::Started { live, events }, Some(permit)) => {
            sse(state.invoker.follower().started_events(live, events, permit))
        }
        (Called::Started { live, .. }, None) => accepted(InvokeAccepted {
            run_id: live.id,
            status: RunStatus::Running.as_str().to_owned(),
            approval_id: None,
            approval_url: None,
            run_url: format!("/runs/{}", live.id),
        }),
    })
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
