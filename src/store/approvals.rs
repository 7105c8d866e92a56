//! Approval requests and standing grants as the store keeps them (`docs/design.md` §4).

use super::{RunStatus, StoreError};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

/// Where an approval request is. Only `pending` ever changes, once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalStatus {
    Pending,
    Approved,
    Denied,
    Expired,
}

impl ApprovalStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Denied => "denied",
            Self::Expired => "expired",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [Self::Pending, Self::Approved, Self::Denied, Self::Expired]
            .into_iter()
            .find(|v| v.as_str() == s)
    }
}

/// How far a decision reaches: this run, or every later call of the same
/// tool of the same skill version (a grant).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    #[default]
    Once,
    Always,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Once => "once",
            Self::Always => "always",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "once" => Some(Self::Once),
            "always" => Some(Self::Always),
            _ => None,
        }
    }
}

/// A standing decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum GrantDecision {
    Allow,
    Deny,
}

impl GrantDecision {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Deny => "deny",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "allow" => Some(Self::Allow),
            "deny" => Some(Self::Deny),
            _ => None,
        }
    }
}

/// An approval request: everything an approver needs to decide, and the
/// decision. This is the API's `Approval`.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Approval {
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

/// A decided request and what became of its run: an entry of the
/// approvers' history.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct DecidedApproval {
    #[serde(flatten)]
    pub approval: Approval,
    /// The status of the run the request held: its outcome once approved.
    pub run_status: RunStatus,
}

/// `GET /approvals/history`'s query: every filter given must match.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DecisionFilter {
    pub skill: Option<String>,
    pub tool: Option<String>,
    /// Page size; the store clamps it to 1..=[`MAX_APPROVALS`](super::MAX_APPROVALS).
    pub limit: u32,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

impl DecisionFilter {
    /// Whether no request can match: no recorded name holds a NUL.
    pub(super) fn matches_nothing(&self) -> bool {
        super::names_hold_nul(&[&self.skill, &self.tool])
    }
}

/// One page of decisions, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct DecisionPage {
    pub decisions: Vec<DecidedApproval>,
    /// Pass back as `cursor` for the next page; absent on the last page.
    pub next_cursor: Option<String>,
}

/// The approval-only fields of a new request; the rest comes from its run.
#[derive(Debug, Clone, PartialEq)]
pub struct NewApproval {
    pub id: Uuid,
    pub description: String,
    pub trust: String,
    pub warning: Option<String>,
    /// The skill's declared permissions.
    pub permissions: Vec<String>,
    pub expires_at: DateTime<Utc>,
}

/// A standing allow or deny for one tool of one skill version. This is the
/// API's `Grant`.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Grant {
    #[schema(value_type = String, format = "uuid")]
    pub id: Uuid,
    pub skill: String,
    pub tool: String,
    pub skill_hash: String,
    pub decision: GrantDecision,
    pub created_by: Option<String>,
    #[schema(value_type = String, format = DateTime)]
    pub created_at: DateTime<Utc>,
}

/// What the store knows that the policy needs, for one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PolicyFacts {
    /// The standing grant for this skill, tool and hash, if any.
    pub grant: Option<GrantDecision>,
    /// Whether any call of this skill version was ever approved (or allowed
    /// by a grant): a user skill's first-run approval.
    pub hash_approved: bool,
}

/// A person's decision on a pending request.
#[derive(Debug, Clone, PartialEq)]
pub struct Decide {
    pub approval_id: Uuid,
    pub approve: bool,
    pub scope: Scope,
    pub decided_by: Option<String>,
    pub note: Option<String>,
    /// On approval the run is claimed for this instance, which runs it.
    pub instance: String,
    pub at: DateTime<Utc>,
}

/// A call as a retry of it would be made: what [`super::Store::pending_like`]
/// matches a pending request against.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SameCall<'a> {
    /// The token's name; `None` (a call without one) is one caller too.
    pub requested_by: Option<&'a str>,
    pub skill: &'a str,
    pub tool: &'a str,
    pub skill_hash: &'a str,
    pub mode: Option<&'a str>,
    /// The validated arguments; key order does not matter.
    pub arguments: &'a Value,
}

impl SameCall<'_> {
    /// Whether `request` is of this call (the store's query has matched
    /// the rest already, but a second look costs nothing).
    pub(super) fn is(&self, request: &Approval) -> bool {
        request.requested_by.as_deref() == self.requested_by
            && request.skill == self.skill
            && request.tool == self.tool
            && request.skill_hash == self.skill_hash
            && request.mode.as_deref() == self.mode
            && &request.arguments == self.arguments
    }
}

/// Why a request could not be decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Undecidable {
    /// Someone decided it first (or it was withdrawn or expired earlier).
    AlreadyDecided(ApprovalStatus),
    /// Its time ran out; it is now marked `expired`, and its run too.
    Expired,
}

pub(super) fn parse_approval_status(s: &str) -> Result<ApprovalStatus, StoreError> {
    ApprovalStatus::parse(s)
        .ok_or_else(|| StoreError::Other(format!("unknown approval status '{s}' in the database")))
}

pub(super) fn parse_scope(s: Option<String>) -> Result<Option<Scope>, StoreError> {
    s.map(|s| {
        Scope::parse(&s).ok_or_else(|| StoreError::Other(format!("unknown scope '{s}' in the database")))
    })
    .transpose()
}

pub(super) fn parse_grant_decision(s: &str) -> Result<GrantDecision, StoreError> {
    GrantDecision::parse(s)
        .ok_or_else(|| StoreError::Other(format!("unknown grant decision '{s}' in the database")))
}
