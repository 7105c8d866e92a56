//! `/grants`: the standing allow and deny decisions. `always` decisions
//! leave them; an approver can also give them ahead of any call, and take
//! back one or all of a skill's.

use super::AppState;
use super::auth::{Require, need};
use super::kit::error::{ApiError, Problem, Result};
use super::kit::extract::{JsonBody, Path, Query};
use super::responses::{BadQuery, BodyProblems, NoSuchSkill, StoreUnavailable};
use super::skills::named;
use crate::invoke::GrantAsk;
use crate::store::{self, GrantDecision};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_grants, create_grants, revoke_skill_grants))
        .routes(routes!(revoke_grant))
}

/// A standing allow or deny for one tool of one skill version. This is the
/// API's `Grant`.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Grant)]
pub struct GrantView {
    #[schema(value_type = String, format = "uuid")]
    pub id: Uuid,
    pub skill: String,
    pub tool: String,
    pub skill_hash: String,
    pub decision: GrantDecision,
    /// The token that gave it (`config:…` for the operator's
    /// pre-approvals); `null` on a server without tokens.
    pub created_by: Option<String>,
    #[schema(value_type = String, format = DateTime)]
    pub created_at: DateTime<Utc>,
}

impl From<store::Grant> for GrantView {
    fn from(g: store::Grant) -> Self {
        Self {
            id: g.id,
            skill: g.skill,
            tool: g.tool,
            skill_hash: g.skill_hash,
            decision: g.decision,
            created_by: g.created_by,
            created_at: g.created_at,
        }
    }
}

/// A person's "allow always" for the permissions a skill version
/// declares, given at the skill's first activation in a session (seed
/// 002). This is the API's `SkillApproval`.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = SkillApproval)]
pub struct SkillApprovalView {
    pub skill: String,
    pub skill_hash: String,
    /// The permissions allowed, as the version declared them.
    pub permissions: Vec<String>,
    /// The token that decided; `null` on a server without tokens.
    pub decided_by: Option<String>,
    #[schema(value_type = String, format = DateTime)]
    pub decided_at: DateTime<Utc>,
}

impl From<store::SkillApproval> for SkillApprovalView {
    fn from(a: store::SkillApproval) -> Self {
        Self {
            skill: a.skill,
            skill_hash: a.skill_hash,
            permissions: a.permissions,
            decided_by: a.decided_by,
            decided_at: a.decided_at,
        }
    }
}

/// Standing grants, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct GrantList {
    pub grants: Vec<GrantView>,
    /// `GET /grants` only: the standing "allow always" of skill versions'
    /// permissions (of `skill`, when given), newest first, at most 1000.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skill_approvals: Option<Vec<SkillApprovalView>>,
}

/// The most characters of a skill name (`docs/skills.md`).
const MAX_SKILL_CHARS: usize = 64;

/// The skill whose grants a listing is about.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct GrantQuery {
    /// Only this skill's grants (every tool, every version).
    #[param(min_length = 1, max_length = 64)]
    pub skill: Option<String>,
}

/// The skill whose grants a revocation takes back.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RevokeQuery {
    /// The skill (every tool, every version).
    #[param(min_length = 1, max_length = 64)]
    pub skill: String,
}

/// A skill name as the query gives it, within the documented length.
fn skill_param(skill: &str) -> Result<&str> {
    if skill.is_empty() || skill.chars().count() > MAX_SKILL_CHARS {
        return Err(ApiError::BadRequest(format!(
            "skill must be 1 to {MAX_SKILL_CHARS} characters"
        )));
    }
    Ok(skill)
}

/// The standing allow and deny decisions, newest first (at most 1000),
/// and the "allow always" of skill versions' permissions.
#[utoipa::path(get, path = "/grants", tag = "approvals", security(("bearer" = ["invoke"])), params(GrantQuery),
    responses(
        (status = 200, description = "The standing grants and skill approvals (of one skill, with `skill`)", body = GrantList),
        BadQuery,
        StoreUnavailable,
    ))]
async fn list_grants(
    _: Require<need::Inbox>,
    State(state): State<AppState>,
    Query(q): Query<GrantQuery>,
) -> Result<Json<GrantList>> {
    let skill = q.skill.as_deref().map(skill_param).transpose()?;
    let grants = state.store().list_grants(skill).await?;
    let approvals = state.store().list_skill_approvals(skill).await?;
    Ok(Json(GrantList {
        grants: grants.into_iter().map(GrantView::from).collect(),
        skill_approvals: Some(approvals.into_iter().map(SkillApprovalView::from).collect()),
    }))
}

/// A grant given ahead of any call.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewGrant {
    /// The skill: its name (the version loaded now), or `name@version`
    /// for an installed version.
    pub skill: String,
    /// One tool; every tool the skill has now when left out.
    #[serde(default)]
    pub tool: Option<String>,
    /// `allow` (default) or `deny`.
    #[serde(default = "allow")]
    pub decision: GrantDecision,
    /// The skill hash that was reviewed: refused (409 `hash_mismatch`)
    /// when the skill is no longer that version.
    #[serde(default)]
    pub skill_hash: Option<String>,
}

fn allow() -> GrantDecision {
    GrantDecision::Allow
}

/// Grant a skill version's tools ahead of any call (or deny them): calls
/// of that version are then allowed (or refused) without a person. A
/// token's own allow never covers its own calls: those still ask.
#[utoipa::path(post, path = "/grants", tag = "approvals", security(("bearer" = ["approve"])),
    request_body = NewGrant,
    responses(
        (status = 201, description = "Granted: one grant per tool, each replacing any earlier one for the same tool and version", body = GrantList),
        (status = 400, description = "The body is not a grant", body = Problem, content_type = "application/problem+json"),
        BodyProblems,
        NoSuchSkill,
        (status = 409, description = "The skill is no longer at `skill_hash` (`hash_mismatch`), or has no tools to grant (`no_tools`)", body = Problem, content_type = "application/problem+json"),
        StoreUnavailable,
    ))]
async fn create_grants(
    auth: Require<need::Approve>,
    State(state): State<AppState>,
    JsonBody(body): JsonBody<NewGrant>,
) -> Result<(StatusCode, Json<GrantList>)> {
    let skill = named(&state, &body.skill).await?;
    let ask = GrantAsk {
        tool: body.tool.as_deref(),
        decision: body.decision,
        expect_hash: body.skill_hash.as_deref(),
        by: auth.caller.name.clone(),
    };
    let grants = state.approver.grant(&skill, ask).await?;
    tracing::info!(
        skill = %skill.name, hash = %skill.hash, tools = grants.len(), decision = body.decision.as_str(),
        by = auth.caller.name.as_deref().unwrap_or("-"), "granted ahead of any call"
    );
    let grants = grants.into_iter().map(GrantView::from).collect();
    let list = GrantList {
        grants,
        skill_approvals: None,
    };
    Ok((StatusCode::CREATED, Json(list)))
}

/// How many grants a revocation took back.
#[derive(Debug, Serialize, ToSchema)]
pub struct Revoked {
    pub revoked: u64,
    /// How many "allow always" of the skill's permissions went with them.
    pub skill_approvals: u64,
}

/// Revoke every grant of one skill (every tool, every version), and every
/// "allow always" of its permissions: its calls are decided afresh, and
/// its next activation in a session asks again.
#[utoipa::path(delete, path = "/grants", tag = "approvals", security(("bearer" = ["approve"])), params(RevokeQuery),
    responses(
        (status = 200, description = "Revoked (0 when it had none)", body = Revoked),
        (status = 400, description = "No `skill`, or one over 64 characters: every grant at once is revoked one by one, never by accident", body = Problem, content_type = "application/problem+json"),
        StoreUnavailable,
    ))]
async fn revoke_skill_grants(
    auth: Require<need::Approve>,
    State(state): State<AppState>,
    Query(q): Query<RevokeQuery>,
) -> Result<Json<Revoked>> {
    let skill = skill_param(&q.skill)?;
    let (revoked, skill_approvals) = state.approver.revoke_grants_of(skill).await?;
    tracing::info!(
        %skill, revoked, skill_approvals, by = auth.caller.name.as_deref().unwrap_or("-"),
        "grants and skill approvals revoked"
    );
    Ok(Json(Revoked {
        revoked,
        skill_approvals,
    }))
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
    state.approver.revoke_grant(p.id).await?;
    tracing::info!(grant = %p.id, by = auth.caller.name.as_deref().unwrap_or("-"), "grant revoked");
    Ok(StatusCode::NO_CONTENT)
}
