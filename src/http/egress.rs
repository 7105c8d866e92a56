//! `/egress`: destinations networked runs asked for beyond their skill's
//! `network.allow`, held for a person (`docs/egress.md`), their decisions,
//! and the egress grants `always` leaves.

use super::AppState;
use super::approvals::DecisionRequest;
use super::auth::{Require, need};
use super::kit::error::{ApiError, Problem, Result};
use super::kit::extract::{JsonBody, Path, Query};
use super::responses::{BadQuery, BodyProblems, DecisionProblems, StoreUnavailable, empty_bodies_allowed};
use crate::egress::Asking;
use crate::invoke::MAX_NOTE_CHARS;
use crate::store::{ApprovalStatus, EgressDecide, EgressGrant, EgressRequest, EgressUndecidable, Scope};
use axum::Json;
use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

/// The most held destinations listed at once.
const MAX_LISTED: u32 = 500;

pub fn router() -> OpenApiRouter<AppState> {
    let mut router = OpenApiRouter::new()
        .routes(routes!(list_egress))
        .routes(routes!(list_egress_grants, revoke_egress_grants))
        .routes(routes!(get_egress))
        .routes(routes!(allow_egress))
        .routes(routes!(deny_egress));
    empty_bodies_allowed(router.get_openapi_mut());
    router
}

/// A destination held for a person, and its decision once made.
#[derive(Debug, Serialize, ToSchema)]
pub struct EgressRequestView {
    pub id: Uuid,
    /// What a person reads: "pdf-tools 1.3 (call 0193…) wants
    /// api.example.com:443".
    pub summary: String,
    /// The run that asked; absent for a long-lived child (a backend).
    pub run_id: Option<Uuid>,
    pub skill: String,
    pub skill_version: Option<String>,
    pub skill_hash: String,
    pub tool: Option<String>,
    pub requested_by: Option<String>,
    pub host: String,
    pub port: u16,
    /// `pending`, `approved` (allowed), `denied` or `expired`.
    #[schema(value_type = String)]
    pub status: ApprovalStatus,
    /// For an allowance: `once` (this run) or `always` (this skill version).
    #[schema(value_type = Option<String>)]
    pub scope: Option<Scope>,
    pub decided_by: Option<String>,
    pub note: Option<String>,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub decided_at: Option<DateTime<Utc>>,
}

impl From<EgressRequest> for EgressRequestView {
    fn from(r: EgressRequest) -> Self {
        Self {
            summary: summary(&r),
            id: r.id,
            run_id: r.run_id,
            skill: r.skill,
            skill_version: r.skill_version,
            skill_hash: r.skill_hash,
            tool: r.tool,
            requested_by: r.requested_by,
            host: r.host,
            port: r.port,
            status: r.status,
            scope: r.scope,
            decided_by: r.decided_by,
            note: r.note,
            created_at: r.created_at,
            expires_at: r.expires_at,
            decided_at: r.decided_at,
        }
    }
}

/// "pdf-tools 1.3 (call 0193…) wants api.example.com:443".
fn summary(r: &EgressRequest) -> String {
    let version = r
        .skill_version
        .as_deref()
        .map(|v| format!(" {v}"))
        .unwrap_or_default();
    let by = match r.run_id {
        Some(run) => format!("call {}…", &run.simple().to_string()[..8]),
        None => "its long-lived process".to_owned(),
    };
    format!("{}{version} ({by}) wants {}:{}", r.skill, r.host, r.port)
}

/// The held destinations waiting for a person.
#[derive(Debug, Serialize, ToSchema)]
pub struct EgressRequestList {
    pub items: Vec<EgressRequestView>,
}

/// Destinations held for a person, oldest first, on every instance that
/// shares this store.
#[utoipa::path(get, path = "/egress", tag = "egress", security(("bearer" = ["invoke"])),
    responses(
        (status = 200, description = "Pending egress requests", body = EgressRequestList),
        BadQuery,
        StoreUnavailable,
    ))]
async fn list_egress(
    _: Require<need::Inbox>,
    State(state): State<AppState>,
) -> Result<Json<EgressRequestList>> {
    let Some(asking) = state.invoker.egress_asking() else {
        return Ok(Json(EgressRequestList { items: Vec::new() }));
    };
    let held = asking.store().pending_egress(Utc::now(), MAX_LISTED).await?;
    Ok(Json(EgressRequestList {
        items: held.into_iter().map(Into::into).collect(),
    }))
}

/// Filter of `GET /egress/grants`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct EgressGrantQuery {
    /// Only this skill's grants.
    pub skill: Option<String>,
}

/// The egress grants: which skill version may reach which destination,
/// decided `always` by whom.
#[derive(Debug, Serialize, ToSchema)]
pub struct EgressGrantList {
    pub items: Vec<EgressGrantView>,
}

/// A skill version's standing permission to reach one destination.
#[derive(Debug, Serialize, ToSchema)]
pub struct EgressGrantView {
    pub skill: String,
    pub skill_hash: String,
    pub host: String,
    pub port: u16,
    pub decided_by: Option<String>,
    pub note: Option<String>,
    pub created_at: DateTime<Utc>,
    pub request_id: Uuid,
}

impl From<EgressGrant> for EgressGrantView {
    fn from(g: EgressGrant) -> Self {
        Self {
            skill: g.skill,
            skill_hash: g.skill_hash,
            host: g.host,
            port: g.port,
            decided_by: g.decided_by,
            note: g.note,
            created_at: g.created_at,
            request_id: g.request_id,
        }
    }
}

/// Egress grants, newest first.
#[utoipa::path(get, path = "/egress/grants", tag = "egress", security(("bearer" = ["invoke"])), params(EgressGrantQuery),
    responses(
        (status = 200, description = "Egress grants", body = EgressGrantList),
        BadQuery,
        StoreUnavailable,
    ))]
async fn list_egress_grants(
    _: Require<need::Inbox>,
    State(state): State<AppState>,
    Query(q): Query<EgressGrantQuery>,
) -> Result<Json<EgressGrantList>> {
    let grants = match state.invoker.egress_asking() {
        Some(asking) => asking.store().egress_grants(q.skill.as_deref()).await?,
        None => Vec::new(),
    };
    Ok(Json(EgressGrantList {
        items: grants.into_iter().map(Into::into).collect(),
    }))
}

/// Which skill's egress grants to revoke.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct EgressRevokeQuery {
    pub skill: String,
}

/// How many egress grants were revoked.
#[derive(Debug, Serialize, ToSchema)]
pub struct EgressRevoked {
    pub revoked: u64,
}

/// Revoke every egress grant of a skill, whatever its version: its runs
/// ask again for what its list lacks.
#[utoipa::path(delete, path = "/egress/grants", tag = "egress", security(("bearer" = ["approve"])), params(EgressRevokeQuery),
    responses(
        (status = 200, description = "Revoked", body = EgressRevoked),
        BadQuery,
        StoreUnavailable,
    ))]
async fn revoke_egress_grants(
    _: Require<need::Approve>,
    State(state): State<AppState>,
    Query(q): Query<EgressRevokeQuery>,
) -> Result<Json<EgressRevoked>> {
    let revoked = match state.invoker.egress_asking() {
        Some(asking) => asking.store().revoke_egress_grants_of(&q.skill).await?,
        None => 0,
    };
    tracing::info!(skill = %q.skill, revoked, "egress grants revoked");
    Ok(Json(EgressRevoked { revoked }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct EgressPath {
    pub id: Uuid,
}

/// One egress request.
#[utoipa::path(get, path = "/egress/{id}", tag = "egress", security(("bearer" = ["invoke"])), params(EgressPath),
    responses(
        (status = 200, description = "The request", body = EgressRequestView),
        BadQuery,
        (status = 404, description = "No such egress request", body = Problem, content_type = "application/problem+json"),
        StoreUnavailable,
    ))]
async fn get_egress(
    _: Require<need::Inbox>,
    State(state): State<AppState>,
    Path(p): Path<EgressPath>,
) -> Result<Json<EgressRequestView>> {
    let asking = asking(&state, p.id)?;
    Ok(Json(asking.store().egress_request(p.id).await?.into()))
}

/// Allow a held destination: `once` for the run that asked, `always` for
/// every run of this skill version. The waiting connection goes on.
#[utoipa::path(post, path = "/egress/{id}/allow", tag = "egress", security(("bearer" = ["approve"])), params(EgressPath),
    request_body(content = DecisionRequest, description = "The scope and a note; an empty body means once, no note"),
    responses(
        (status = 200, description = "Allowed", body = EgressRequestView),
        DecisionProblems,
        BodyProblems,
        (status = 404, description = "No such egress request", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Already decided, or expired", body = Problem, content_type = "application/problem+json"),
        StoreUnavailable,
    ))]
async fn allow_egress(
    auth: Require<need::Approve>,
    State(state): State<AppState>,
    Path(p): Path<EgressPath>,
    JsonBody(body): JsonBody<DecisionRequest>,
) -> Result<Json<EgressRequestView>> {
    decide(&state, &auth, p.id, body, true).await
}

/// Deny a held destination, with a note the program reads: the waiting
/// connection gets `403`, and the run's later ones to it too.
#[utoipa::path(post, path = "/egress/{id}/deny", tag = "egress", security(("bearer" = ["approve"])), params(EgressPath),
    request_body(content = DecisionRequest, description = "A note for the program (the scope is ignored: a denial holds for the run)"),
    responses(
        (status = 200, description = "Denied", body = EgressRequestView),
        DecisionProblems,
        BodyProblems,
        (status = 404, description = "No such egress request", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Already decided, or expired", body = Problem, content_type = "application/problem+json"),
        StoreUnavailable,
    ))]
async fn deny_egress(
    auth: Require<need::Approve>,
    State(state): State<AppState>,
    Path(p): Path<EgressPath>,
    JsonBody(body): JsonBody<DecisionRequest>,
) -> Result<Json<EgressRequestView>> {
    decide(&state, &auth, p.id, body, false).await
}

/// The server's asking, or 404 for `id` where nothing is ever held.
fn asking(state: &AppState, id: Uuid) -> Result<&Asking> {
    state
        .invoker
        .egress_asking()
        .ok_or_else(|| ApiError::not_found("egress request", id.to_string()))
}

async fn decide(
    state: &AppState,
    auth: &Require<need::Approve>,
    id: Uuid,
    body: DecisionRequest,
    allow: bool,
) -> Result<Json<EgressRequestView>> {
    if body.note.chars().count() > MAX_NOTE_CHARS || body.note.contains('\0') {
        return Err(ApiError::BadRequest(format!(
            "a note is at most {MAX_NOTE_CHARS} characters, with no NUL byte"
        )));
    }
    let asking = asking(state, id)?;
    let request = asking.store().egress_request(id).await?;
    if let Some(name) = &auth.caller.name
        && request.requested_by.as_deref() == Some(name.as_str())
    {
        return Err(ApiError::Refused {
            code: "self_approval",
            detail: format!("{name} made the call that asks for this destination, so cannot decide it"),
        });
    }
    let decided = asking
        .decide(EgressDecide {
            id,
            allow,
            scope: body.scope,
            decided_by: auth.caller.name.clone(),
            note: (!body.note.is_empty()).then_some(body.note),
            at: Utc::now(),
        })
        .await?
        .map_err(|why| undecidable(id, why))?;
    tracing::info!(
        egress = %decided.id, skill = %decided.skill, host = %decided.host, port = decided.port,
        status = decided.status.as_str(), by = decided.decided_by.as_deref().unwrap_or("-"),
        "egress decided"
    );
    Ok(Json(decided.into()))
}

fn undecidable(id: Uuid, why: EgressUndecidable) -> ApiError {
    match why {
        EgressUndecidable::Expired => ApiError::Conflict {
            code: "approval_expired",
            detail: format!("egress request {id} expired: its connection stopped waiting"),
        },
        EgressUndecidable::AlreadyDecided(status) => ApiError::Conflict {
            code: "already_decided",
            detail: format!("egress request {id} is already {}", status.as_str()),
        },
    }
}
