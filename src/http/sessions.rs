//! `/sessions`: seed 002's runtime as a resource (`docs/sessions.md`). A
//! session is one conversation; its turns activate skills by their
//! triggers, a person allows a skill's permissions at its first
//! activation, and the active skills' hooks shape the prompt, the tool
//! calls that name the session, and the model's response.

use super::AppState;
use super::auth::{Require, need};
use super::kit::error::{ApiError, Problem, Result};
use super::kit::extract::{JsonBody, Path};
use super::responses::{BadQuery, BodyProblems, StoreUnavailable, empty_bodies_allowed};
use crate::session::state::TriggerContext;
use crate::session::{PendingActivations, ResponseView, SessionView, TurnView, WikiView, view};
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

pub fn router() -> OpenApiRouter<AppState> {
    let mut router = OpenApiRouter::new()
        .routes(routes!(start))
        .routes(routes!(get_session, end))
        .routes(routes!(turn))
        .routes(routes!(respond))
        .routes(routes!(wiki_section))
        .routes(routes!(decide))
        .routes(routes!(pending));
    empty_bodies_allowed(router.get_openapi_mut());
    router
}

/// The header a request on a session shows the session's secret in.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Header)]
pub struct SessionHeaders {
    /// The secret `POST /sessions` answered: a session is steered only by
    /// whoever holds it, or by a token of its own named caller.
    #[serde(rename = "Skilld-Session-Secret")]
    #[param(value_type = String, required = false, max_length = 128)]
    pub secret: Option<String>,
}

/// The longest session secret a request may show, as documented: secrets
/// skilld makes are far shorter.
const SECRET_MAX: usize = 128;

/// The session secret a request shows, if any; 400 for more than one, one
/// that is not text, or one longer than any secret could be (even when a
/// token of the session's caller would let the request through without).
pub(super) fn session_secret(headers: &HeaderMap) -> Result<Option<String>> {
    let mut values = headers.get_all(crate::session::secret::HEADER).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(ApiError::BadRequest("send Skilld-Session-Secret once".to_owned()));
    }
    let text = value
        .to_str()
        .map_err(|_| ApiError::BadRequest("Skilld-Session-Secret must be visible ASCII".to_owned()))?;
    if text.len() > SECRET_MAX {
        return Err(ApiError::BadRequest(format!(
            "Skilld-Session-Secret is at most {SECRET_MAX} characters"
        )));
    }
    Ok(Some(text.to_owned()))
}

/// A session id in a path.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct SessionPath {
    pub id: Uuid,
}

/// A session and one of its skills.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ActivationPath {
    pub id: Uuid,
    /// The skill's name.
    #[param(max_length = 64)]
    pub skill: String,
}

/// A session and a wiki section.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct SectionPath {
    pub id: Uuid,
    /// The section's name.
    #[param(max_length = 256)]
    pub section: String,
}

/// Start a session: the context's triggers (project files, or a directory
/// of the workspace to list, languages, mode, skills named) activate
/// skills, then their `on_conversation_start` hooks run. The answer holds
/// the session's `secret`, which later requests on it show.
#[utoipa::path(post, path = "/sessions", tag = "sessions", security(("bearer" = ["invoke"])),
    request_body(content = TriggerContext, description = "The trigger context; an empty body starts a session without one"),
    responses(
        (status = 201, description = "Started", body = SessionView),
        BodyProblems,
        (status = 400, description = "The body is not of this shape, or a path parameter does not parse", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A field is invalid, names no loaded skill (`unknown_skill`), or `path` is not a directory of the workspace (`bad_path`)", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "The caller holds the most sessions allowed (`too_many_requests`)", body = Problem, content_type = "application/problem+json"),
        StoreUnavailable,
    ))]
async fn start(
    auth: Require<need::Invoke>,
    State(state): State<AppState>,
    JsonBody(context): JsonBody<TriggerContext>,
) -> Result<(StatusCode, Json<SessionView>)> {
    let view = state.sessions.start(auth.caller.name.as_deref(), context).await?;
    Ok((StatusCode::CREATED, Json(view)))
}

/// A session: each skill's state, and the requests waiting for a person.
#[utoipa::path(get, path = "/sessions/{id}", tag = "sessions", security(("bearer" = ["invoke"])), params(SessionPath, SessionHeaders),
    responses(
        (status = 200, description = "The session", body = SessionView),
        BadQuery,
        (status = 403, description = "The session's secret was not shown, or another was (`session_locked`)", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such session of this caller (`session_not_found`)", body = Problem, content_type = "application/problem+json"),
        StoreUnavailable,
    ))]
async fn get_session(
    auth: Require<need::Invoke>,
    State(state): State<AppState>,
    Path(p): Path<SessionPath>,
    headers: HeaderMap,
) -> Result<Json<SessionView>> {
    let secret = session_secret(&headers)?;
    let caller = auth.caller.name.as_deref();
    Ok(Json(state.sessions.get(p.id, caller, secret.as_deref()).await?))
}

/// End a session: its active skills' `on_deactivate` hooks run.
#[utoipa::path(delete, path = "/sessions/{id}", tag = "sessions", security(("bearer" = ["invoke"])), params(SessionPath, SessionHeaders),
    responses(
        (status = 204, description = "Ended"),
        BadQuery,
        (status = 403, description = "The session's secret was not shown, or another was (`session_locked`)", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such session of this caller (`session_not_found`)", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Another request changed the session at the same time (`session_busy`)", body = Problem, content_type = "application/problem+json"),
        StoreUnavailable,
    ))]
async fn end(
    auth: Require<need::Invoke>,
    State(state): State<AppState>,
    Path(p): Path<SessionPath>,
    headers: HeaderMap,
) -> Result<StatusCode> {
    let secret = session_secret(&headers)?;
    state
        .sessions
        .end(p.id, auth.caller.name.as_deref(), secret.as_deref())
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A turn: the user's message fires keyword triggers (and `activate`,
/// `deactivate` switch skills on and off); answers the prompt fragments
/// of the active skills (their instructions, then what their
/// `on_before_prompt_build` hooks add) and the tools active now. A skill
/// that must ask first waits in `activating` with its request.
#[utoipa::path(post, path = "/sessions/{id}/turns", tag = "sessions", security(("bearer" = ["invoke"])), params(SessionPath, SessionHeaders),
    request_body(content = view::TurnRequest, description = "The message and skills to switch; an empty body is a turn without a message"),
    responses(
        (status = 200, description = "The turn", body = TurnView),
        BodyProblems,
        (status = 403, description = "The session's secret was not shown, or another was (`session_locked`)", body = Problem, content_type = "application/problem+json"),
        (status = 400, description = "The body is not of this shape, or a path parameter does not parse", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such session of this caller (`session_not_found`)", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Another request changed the session at the same time (`session_busy`)", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`activate` or `deactivate` names no loaded skill (`unknown_skill`), or a field is past its bound (`invalid_session`)", body = Problem, content_type = "application/problem+json"),
        StoreUnavailable,
    ))]
async fn turn(
    auth: Require<need::Invoke>,
    State(state): State<AppState>,
    Path(p): Path<SessionPath>,
    headers: HeaderMap,
    JsonBody(body): JsonBody<view::TurnRequest>,
) -> Result<Json<TurnView>> {
    let secret = session_secret(&headers)?;
    let who = (auth.caller.name.as_deref(), secret.as_deref());
    Ok(Json(state.sessions.turn(p.id, who, body).await?))
}

/// The model's response: the active skills' `on_after_response` hooks
/// transform it as a chain, in priority order (built-in, user, project).
#[utoipa::path(post, path = "/sessions/{id}/responses", tag = "sessions", security(("bearer" = ["invoke"])), params(SessionPath, SessionHeaders),
    request_body(content = view::ResponseRequest, description = "The response's text"),
    responses(
        (status = 200, description = "The text as the chain left it", body = ResponseView),
        BodyProblems,
        (status = 403, description = "The session's secret was not shown, or another was (`session_locked`)", body = Problem, content_type = "application/problem+json"),
        (status = 400, description = "The body is not of this shape, or a path parameter does not parse", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such session of this caller (`session_not_found`)", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`text` is past its bound (`invalid_session`)", body = Problem, content_type = "application/problem+json"),
        StoreUnavailable,
    ))]
async fn respond(
    auth: Require<need::Invoke>,
    State(state): State<AppState>,
    Path(p): Path<SessionPath>,
    headers: HeaderMap,
    JsonBody(body): JsonBody<view::ResponseRequest>,
) -> Result<Json<ResponseView>> {
    let secret = session_secret(&headers)?;
    let who = (p.id, auth.caller.name.as_deref(), secret.as_deref());
    Ok(Json(state.sessions.respond(who, body.text).await?))
}

/// A wiki section about to be generated: the active skills'
/// `on_before_wiki_section` hooks add to its context. skilld generates no
/// wiki (seed 002 defers the pipeline); this dispatches the phase for a
/// caller that does.
#[utoipa::path(post, path = "/sessions/{id}/wiki-sections/{section}", tag = "sessions", security(("bearer" = ["invoke"])), params(SectionPath, SessionHeaders),
    request_body(content = view::WikiRequest, description = "The context so far; an empty body is none"),
    responses(
        (status = 200, description = "The section's context as the hooks left it", body = WikiView),
        BodyProblems,
        (status = 403, description = "The session's secret was not shown, or another was (`session_locked`)", body = Problem, content_type = "application/problem+json"),
        (status = 400, description = "The body is not of this shape, or a path parameter does not parse", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such session of this caller (`session_not_found`)", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The section's name or `context` is past its bound (`invalid_session`)", body = Problem, content_type = "application/problem+json"),
        StoreUnavailable,
    ))]
async fn wiki_section(
    auth: Require<need::Invoke>,
    State(state): State<AppState>,
    Path(p): Path<SectionPath>,
    headers: HeaderMap,
    JsonBody(body): JsonBody<view::WikiRequest>,
) -> Result<Json<WikiView>> {
    let secret = session_secret(&headers)?;
    let who = (p.id, auth.caller.name.as_deref(), secret.as_deref());
    let view = state.sessions.wiki_section(who, p.section, body.context).await?;
    Ok(Json(view))
}

/// Decide a skill's activation request, named by its `request` id and the
/// `hash` it shows: `allow_once` (this session),
/// `allow_always` (this version of the skill, kept) or `deny` (the skill
/// goes to `error` with the note). The session's own caller cannot.
#[utoipa::path(post, path = "/sessions/{id}/activations/{skill}", tag = "sessions", security(("bearer" = ["approve"])), params(ActivationPath),
    request_body(content = view::DecideActivation, description = "The decision and a note"),
    responses(
        (status = 200, description = "Decided; the session as it is now", body = SessionView),
        BodyProblems,
        (status = 400, description = "The body is not of this shape, or a path parameter does not parse", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "The session's own caller cannot decide (`self_approval`)", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such session (`session_not_found`)", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "No request of that skill waits (`not_activating`), the request named is not the one that waits now (`request_gone`: the skill changed and asked again, or went; the detail names the request that waits instead), the skill changed since (`skill_changed`), or another request changed the session (`session_busy`)", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`note` is past its bound (`invalid_session`)", body = Problem, content_type = "application/problem+json"),
        StoreUnavailable,
    ))]
async fn decide(
    auth: Require<need::Approve>,
    State(state): State<AppState>,
    Path(p): Path<ActivationPath>,
    JsonBody(body): JsonBody<view::DecideActivation>,
) -> Result<Json<SessionView>> {
    let by = auth.caller.name.as_deref();
    let view = state.sessions.decide((p.id, &p.skill), by, &body).await?;
    Ok(Json(view))
}

/// The activation requests waiting for a person, in every caller's live
/// sessions (the newest 1000 sessions are read), oldest first: where an
/// approver finds what to decide with `POST
/// /sessions/{session}/activations/{skill}`.
#[utoipa::path(get, path = "/activations", tag = "sessions", security(("bearer" = ["approve"])),
    responses(
        (status = 200, description = "The requests that wait", body = PendingActivations),
        BadQuery,
        StoreUnavailable,
    ))]
async fn pending(
    _: Require<need::Approve>,
    State(state): State<AppState>,
) -> Result<Json<PendingActivations>> {
    Ok(Json(state.sessions.pending_activations().await?))
}
