//! `/approvals`: the inbox of calls waiting for a person and the decisions
//! on them (the standing grants they leave are `/grants`).

use super::AppState;
use super::auth::{Require, need};
use super::kit::error::{Problem, Result};
use super::kit::extract::{JsonBody, Path, Peer, Query, page_limit};
use super::responses::{
    BadQuery, BodyProblems, DecisionProblems, StoreUnavailable, describe_inbox_stream, empty_bodies_allowed,
};
use super::runs::json_event;
use crate::invoke::{InboxEvent, Ruling};
use crate::store::{self, ApprovalFilter, ApprovalPage, ApprovalStatus, DecisionFilter, RunStatus, Scope};
use axum::Json;
use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;
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
        .routes(routes!(deny));
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
    /// Page size, 1–500 (default 100).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page, as it was handed out.
    #[param(pattern = "^[0-9]{1,16}_[0-9a-fA-F]{32}$")]
    pub cursor: Option<String>,
}

/// An approval request: everything an approver needs to decide, and the
/// decision. This is the API's `Approval`.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Approval)]
pub struct ApprovalView {
    #[schema(value_type = String, format = "uuid")]
    pub id: Uuid,
    /// The run held for this decision.
    #[schema(value_type = String, format = "uuid")]
    pub run_id: Uuid,
    pub skill: String,
    pub tool: String,
    /// What the tool does, as its skill describes it.
    pub description: String,
    /// `bundled`, `user` or `untrusted`.
    pub trust: String,
    /// Why this call deserves a closer look, when it does.
    pub warning: Option<String>,
    #[schema(value_type = Object)]
    pub arguments: Value,
    /// The exact command line that will run once approved.
    pub argv: Vec<String>,
    pub cwd: String,
    /// The permissions the skill declares (`file:write`, `net:fetch`, …),
    /// which an approval grants along with the call. Part of the skill's
    /// content, so a changed set is a changed `skill_hash`.
    pub permissions: Vec<String>,
    /// The skill version this request (and an `always` grant) is bound to.
    pub skill_hash: String,
    pub status: ApprovalStatus,
    /// Set once decided.
    pub scope: Option<Scope>,
    pub requested_by: Option<String>,
    pub decided_by: Option<String>,
    pub note: Option<String>,
    #[schema(value_type = String, format = DateTime)]
    pub created_at: DateTime<Utc>,
    #[schema(value_type = Option<String>, format = DateTime)]
    pub decided_at: Option<DateTime<Utc>>,
    #[schema(value_type = String, format = DateTime)]
    pub expires_at: DateTime<Utc>,
    /// The mode the caller asked in (`SKILL_MODE` for the tool).
    pub mode: Option<String>,
    /// When the caller stopped waiting for the decision (its wait ran out,
    /// or it went away). Approving still runs the call; its result is in
    /// the run log, but nobody is waiting on it.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub caller_left_at: Option<DateTime<Utc>>,
}

impl From<store::Approval> for ApprovalView {
    fn from(a: store::Approval) -> Self {
        Self {
            id: a.id,
            run_id: a.run_id,
            skill: a.skill,
            tool: a.tool,
            description: a.description,
            trust: a.trust,
            warning: a.warning,
            arguments: a.arguments,
            argv: a.argv,
            cwd: a.cwd,
            permissions: a.permissions,
            skill_hash: a.skill_hash,
            status: a.status,
            scope: a.scope,
            requested_by: a.requested_by,
            decided_by: a.decided_by,
            note: a.note,
            created_at: a.created_at,
            decided_at: a.decided_at,
            expires_at: a.expires_at,
            mode: a.mode,
            caller_left_at: a.caller_left_at,
        }
    }
}

/// A page of approval requests, oldest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApprovalList {
    pub approvals: Vec<ApprovalView>,
    /// Pass back as `cursor` for the next page; null on the last page.
    pub next_cursor: Option<String>,
}

impl From<ApprovalPage> for ApprovalList {
    fn from(page: ApprovalPage) -> Self {
        Self {
            approvals: page.approvals.into_iter().map(ApprovalView::from).collect(),
            next_cursor: page.next_cursor,
        }
    }
}

/// Approval requests, oldest first, a page at a time: with
/// `status=pending`, the inbox.
#[utoipa::path(get, path = "/approvals", tag = "approvals", security(("bearer" = ["invoke"])), params(ApprovalQuery),
    responses(
        (status = 200, description = "A page of approval requests, oldest first", body = ApprovalList),
        BadQuery,
        StoreUnavailable,
    ))]
async fn list_approvals(
    _: Require<need::Inbox>,
    State(state): State<AppState>,
    Query(q): Query<ApprovalQuery>,
) -> Result<Json<ApprovalList>> {
    let filter = ApprovalFilter {
        status: q.status,
        limit: page_limit(q.limit, 100)?,
        cursor: q.cursor,
    };
    let page = state.store().list_approvals(filter).await?;
    Ok(Json(page.into()))
}

/// The inbox, live: the first page of pending requests (the rest are
/// read from `GET /approvals` with its `next_cursor`), then each change.
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
    let events = state.approver.inbox_events(&peer.holder(&auth))?;
    let stream = events.map(|event| Ok::<_, Infallible>(inbox_event(&event)));
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()).into_response())
}

fn inbox_event(event: &InboxEvent) -> Event {
    match event {
        InboxEvent::Snapshot(page) => json_event("snapshot", &ApprovalList::from(page.clone())),
        InboxEvent::Changed(approval) => json_event("approval", &ApprovalView::from((**approval).clone())),
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

/// A decided request and what became of its run: an entry of the
/// approvers' history.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = DecidedApproval)]
pub struct DecidedApprovalView {
    #[serde(flatten)]
    pub approval: ApprovalView,
    /// The status of the run the request held: its outcome once approved.
    pub run_status: RunStatus,
}

/// One page of decisions, newest first.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = DecisionPage)]
pub struct DecisionPageView {
    pub decisions: Vec<DecidedApprovalView>,
    /// Pass back as `cursor` for the next page; null on the last page.
    pub next_cursor: Option<String>,
}

impl From<store::DecisionPage> for DecisionPageView {
    fn from(page: store::DecisionPage) -> Self {
        let decided = |d: store::DecidedApproval| DecidedApprovalView {
            approval: d.approval.into(),
            run_status: d.run_status,
        };
        Self {
            decisions: page.decisions.into_iter().map(decided).collect(),
            next_cursor: page.next_cursor,
        }
    }
}

/// Who decided what: decided requests, newest decision first, each with
/// its run's outcome.
#[utoipa::path(get, path = "/approvals/history", tag = "approvals", security(("bearer" = ["invoke"])), params(HistoryQuery),
    responses(
        (status = 200, description = "A page of decisions", body = DecisionPageView),
        BadQuery,
        StoreUnavailable,
    ))]
async fn approval_history(
    _: Require<need::Inbox>,
    State(state): State<AppState>,
    Query(q): Query<HistoryQuery>,
) -> Result<Json<DecisionPageView>> {
    let limit = page_limit(q.limit, 50)?;
    let filter = DecisionFilter {
        skill: q.skill,
        tool: q.tool,
        limit,
        cursor: q.cursor,
    };
    Ok(Json(state.store().list_decisions(filter).await?.into()))
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
        (status = 200, description = "The request", body = ApprovalView),
        BadQuery,
        (status = 404, description = "No such approval", body = Problem, content_type = "application/problem+json"),
        StoreUnavailable,
    ))]
async fn get_approval(
    _: Require<need::Inbox>,
    State(state): State<AppState>,
    Path(p): Path<ApprovalPath>,
) -> Result<Json<ApprovalView>> {
    Ok(Json(state.store().get_approval(p.id).await?.into()))
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
        (status = 200, description = "Approved; the run is queued on this instance and starts as soon as it has a slot (follow it at /runs/{run_id})", body = ApprovalView),
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
) -> Result<Json<ApprovalView>> {
    decide(&state, &auth, p.id, body, true).await
}

/// Deny a pending call: its run ends `denied` and nothing runs. `always`
/// also denies later calls of this tool of this skill version.
#[utoipa::path(post, path = "/approvals/{id}/deny", tag = "approvals", security(("bearer" = ["approve"])), params(ApprovalPath),
    request_body(content = DecisionRequest, description = "The scope and a note; an empty body means once, no note"),
    responses(
        (status = 200, description = "Denied", body = ApprovalView),
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
) -> Result<Json<ApprovalView>> {
    decide(&state, &auth, p.id, body, false).await
}

async fn decide(
    state: &AppState,
    auth: &Require<need::Approve>,
    id: Uuid,
    body: DecisionRequest,
    approve: bool,
) -> Result<Json<ApprovalView>> {
    let ruling = Ruling {
        approve,
        scope: body.scope,
        decided_by: auth.caller.name.clone(),
        note: (!body.note.is_empty()).then_some(body.note),
        own: false,
    };
    let catalog = state.catalog.current();
    let decided = state.approver.decide_request(&catalog, id, ruling).await?;
    tracing::info!(
        approval = %decided.id, run = %decided.run_id, status = decided.status.as_str(),
        scope = body.scope.as_str(), by = decided.decided_by.as_deref().unwrap_or("-"),
        "approval decided"
    );
    Ok(Json(decided.into()))
}
