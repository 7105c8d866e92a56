//! `/approvals` and `/grants`: the inbox of calls waiting for a person, the
//! decisions on them, and the standing grants those decisions leave.

use super::AppState;
use super::auth::{Require, need};
use super::error::{Problem, Result};
use super::extract::{JsonBody, Path, Peer, Query, page_limit};
use super::responses::{
    BadQuery, BodyProblems, DecisionProblems, StoreUnavailable, describe_inbox_stream, empty_bodies_allowed,
};
use super::runs::json_event;
use crate::invoke::{InboxEvent, Ruling};
use crate::store::{Approval, ApprovalStatus, DecisionFilter, DecisionPage, Grant, Scope};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use std::convert::Infallible;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

pub fn router() -> OpenApiRouter<AppState> {
    let mut router = OpenApiRouter::new()
        .routes(routes!(list_approvals))
        .routes(routes!(approval_events))
        .routes(routes!(approval_history))
        .routes(routes!(get_approval))
        .routes(routes!(approve))
        .routes(routes!(deny))
        .routes(routes!(list_grants))
        .routes(routes!(revoke_grant));
    empty_bodies_allowed(router.get_openapi_mut());
    describe_inbox_stream(router.get_openapi_mut());
    router
}

/// Filter of `GET /approvals`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ApprovalQuery {
    /// Only requests in this state (the inbox: `pending`).
    pub status: Option<ApprovalStatus>,
    /// At most this many, 1–500 (default 100).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
}

/// Approval requests, oldest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApprovalList {
    pub approvals: Vec<Approval>,
}

/// Approval requests, oldest first: with `status=pending`, the inbox.
#[utoipa::path(get, path = "/approvals", tag = "approvals", security(("bearer" = ["invoke"])), params(ApprovalQuery),
    responses(
        (status = 200, description = "Approval requests, oldest first", body = ApprovalList),
        BadQuery,
        StoreUnavailable,
    ))]
async fn list_approvals(
    _: Require<need::Inbox>,
    State(state): State<AppState>,
    Query(q): Query<ApprovalQuery>,
) -> Result<Json<ApprovalList>> {
    let limit = page_limit(q.limit, 100)?;
    let approvals = state.invoker.store.list_approvals(q.status, limit).await?;
    Ok(Json(ApprovalList { approvals }))
}

/// The inbox, live: every pending request, then each change.
#[utoipa::path(get, path = "/approvals/events", tag = "approvals", security(("bearer" = ["invoke"])),
    responses(
        (status = 200, description = "The inbox's events, as server-sent events", content_type = "text/event-stream", body = String),
        BadQuery,
        (status = 429, description = "This caller holds its share of the event streams (`max_event_streams_per_caller`); see Retry-After", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The store is unreachable, or too many event streams are open", body = Problem, content_type = "application/problem+json"),
    ))]
async fn approval_events(
    auth: Require<need::Inbox>,
    peer: Peer,
    State(state): State<AppState>,
) -> Result<Response> {
    let events = state.invoker.inbox_events(&peer.holder(&auth))?;
    let stream = events.map(|event| Ok::<_, Infallible>(inbox_event(&event)));
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()).into_response())
}

fn inbox_event(event: &InboxEvent) -> Event {
    match event {
        InboxEvent::Snapshot(approvals) => json_event(
            "snapshot",
            &ApprovalList {
                approvals: approvals.clone(),
            },
        ),
        InboxEvent::Changed(approval) => json_event("approval", approval),
    }
}

/// Filters of `GET /approvals/history`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct HistoryQuery {
    pub skill: Option<String>,
    pub tool: Option<String>,
    /// Page size, 1–500 (default 50).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page, as it was handed out.
    #[param(pattern = "^[0-9]{1,16}_[0-9a-fA-F]{32}$")]
    pub cursor: Option<String>,
}

/// Who decided what: decided requests, newest decision first, each with
/// its run's outcome.
#[utoipa::path(get, path = "/approvals/history", tag = "approvals", security(("bearer" = ["invoke"])), params(HistoryQuery),
    responses(
        (status = 200, description = "A page of decisions", body = DecisionPage),
        BadQuery,
        StoreUnavailable,
    ))]
async fn approval_history(
    _: Require<need::Inbox>,
    State(state): State<AppState>,
    Query(q): Query<HistoryQuery>,
) -> Result<Json<DecisionPage>> {
    let limit = page_limit(q.limit, 50)?;
    let filter = DecisionFilter {
        skill: q.skill,
        tool: q.tool,
        limit,
        cursor: q.cursor,
    };
    Ok(Json(state.invoker.store.list_decisions(filter).await?))
}

/// An approval id in a path.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ApprovalPath {
    pub id: Uuid,
}

/// One approval request.
#[utoipa::path(get, path = "/approvals/{id}", tag = "approvals", security(("bearer" = ["invoke"])), params(ApprovalPath),
    responses(
        (status = 200, description = "The request", body = Approval),
        BadQuery,
        (status = 404, description = "No such approval", body = Problem, content_type = "application/problem+json"),
        StoreUnavailable,
    ))]
async fn get_approval(
    _: Require<need::Inbox>,
    State(state): State<AppState>,
    Path(p): Path<ApprovalPath>,
) -> Result<Json<Approval>> {
    Ok(Json(state.invoker.store.get_approval(p.id).await?))
}

/// A decision: for this run only, or standing for the tool of this skill
/// version.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DecisionRequest {
    /// `once` (default) or `always`.
    #[serde(default)]
    pub scope: Scope,
    /// Why, for the record: at most 4096 characters, no NUL byte.
    #[serde(default)]
    #[schema(max_length = 4096, pattern = "^[^\\u0000]*$")]
    pub note: String,
}

/// Approve a pending call: it starts on this instance. `always` also
/// grants later calls of this tool of this skill version.
#[utoipa::path(post, path = "/approvals/{id}/approve", tag = "approvals", security(("bearer" = ["approve"])), params(ApprovalPath),
    request_body(content = DecisionRequest, description = "The scope and a note; an empty body means once, no note"),
    responses(
        (status = 200, description = "Approved; the run is queued on this instance and starts as soon as it has a slot (follow it at /runs/{run_id})", body = Approval),
        DecisionProblems,
        BodyProblems,
        (status = 404, description = "No such approval", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Already decided, expired, or the skill changed since the call", body = Problem, content_type = "application/problem+json"),
        StoreUnavailable,
    ))]
async fn approve(
    auth: Require<need::Approve>,
    State(state): State<AppState>,
    Path(p): Path<ApprovalPath>,
    JsonBody(body): JsonBody<DecisionRequest>,
) -> Result<Json<Approval>> {
    decide(&state, &auth, p.id, body, true).await
}

/// Deny a pending call: its run ends `denied` and nothing runs. `always`
/// also denies later calls of this tool of this skill version.
#[utoipa::path(post, path = "/approvals/{id}/deny", tag = "approvals", security(("bearer" = ["approve"])), params(ApprovalPath),
    request_body(content = DecisionRequest, description = "The scope and a note; an empty body means once, no note"),
    responses(
        (status = 200, description = "Denied", body = Approval),
        DecisionProblems,
        BodyProblems,
        (status = 404, description = "No such approval", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Already decided or expired", body = Problem, content_type = "application/problem+json"),
        StoreUnavailable,
    ))]
async fn deny(
    auth: Require<need::Approve>,
    State(state): State<AppState>,
    Path(p): Path<ApprovalPath>,
    JsonBody(body): JsonBody<DecisionRequest>,
) -> Result<Json<Approval>> {
    decide(&state, &auth, p.id, body, false).await
}

async fn decide(
    state: &AppState,
    auth: &Require<need::Approve>,
    id: Uuid,
    body: DecisionRequest,
    approve: bool,
) -> Result<Json<Approval>> {
    let ruling = Ruling {
        approve,
        scope: body.scope,
        decided_by: auth.caller.name.clone(),
        note: (!body.note.is_empty()).then_some(body.note),
        own: false,
    };
    let catalog = state.catalog.current();
    let decided = state.invoker.decide_request(&catalog, id, ruling).await?;
    tracing::info!(
        approval = %decided.id, run = %decided.run_id, status = decided.status.as_str(),
        scope = body.scope.as_str(), by = decided.decided_by.as_deref().unwrap_or("-"),
        "approval decided"
    );
    Ok(Json(decided))
}

/// Standing grants, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct GrantList {
    pub grants: Vec<Grant>,
}

/// The standing allow and deny decisions, newest first.
#[utoipa::path(get, path = "/grants", tag = "approvals", security(("bearer" = ["invoke"])),
    responses(
        (status = 200, description = "Every standing grant", body = GrantList),
        BadQuery,
        StoreUnavailable,
    ))]
async fn list_grants(_: Require<need::Inbox>, State(state): State<AppState>) -> Result<Json<GrantList>> {
    let grants = state.invoker.store.list_grants().await?;
    Ok(Json(GrantList { grants }))
}

/// A grant id in a path.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct GrantPath {
    pub id: Uuid,
}

/// Revoke a standing grant: later calls are decided afresh.
#[utoipa::path(delete, path = "/grants/{id}", tag = "approvals", security(("bearer" = ["approve"])), params(GrantPath),
    responses(
        (status = 204, description = "Revoked"),
        BadQuery,
        (status = 404, description = "No such grant", body = Problem, content_type = "application/problem+json"),
        StoreUnavailable,
    ))]
async fn revoke_grant(
    auth: Require<need::Approve>,
    State(state): State<AppState>,
    Path(p): Path<GrantPath>,
) -> Result<StatusCode> {
    state.invoker.store.revoke_grant(p.id).await?;
    tracing::info!(grant = %p.id, by = auth.caller.name.as_deref().unwrap_or("-"), "grant revoked");
    Ok(StatusCode::NO_CONTENT)
}
