//! Egress requests and egress grants as the store keeps them (issue 42):
//! a destination a networked run asked for that its skill's list does
//! not cover, held for a person, and the `always` decisions that let a
//! skill version reach a destination from then on. Kept in the store so
//! that any instance sharing it lists and decides a hold made by another,
//! and so that a grant survives a restart.

use super::StoreError;
use super::approvals::{ApprovalStatus, Scope};
use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

/// Held destinations, their decisions and the egress grants. Held as
/// `Arc<dyn EgressDecisions>`.
#[async_trait::async_trait]
pub trait EgressDecisions: Send + Sync + 'static {
    /// Records a held destination, `pending` until `expires_at`.
    async fn hold_destination(&self, request: NewEgressRequest) -> Result<(), StoreError>;

    /// One request; `NotFound` if there is none.
    async fn egress_request(&self, id: Uuid) -> Result<EgressRequest, StoreError>;

    /// The requests still pending and unexpired at `at`, oldest first
    /// (`created_at`, then `id`), at most `limit`.
    async fn pending_egress(&self, at: DateTime<Utc>, limit: u32) -> Result<Vec<EgressRequest>, StoreError>;

    /// Decides a pending, unexpired request exactly once across every
    /// caller and instance (one conditional update). An `always`
    /// allowance also records the grant of its skill, hash, host and port
    /// (kept once, whoever decides it again), in the same transaction. A
    /// request past its time is marked expired here. `NotFound` for an
    /// unknown id.
    async fn decide_egress(
        &self,
        decide: EgressDecide,
    ) -> Result<Result<EgressRequest, EgressUndecidable>, StoreError>;

    /// Marks request `id` expired if it is still pending (its waiter gave
    /// up at `at`), and returns it as it now stands: decided, if a person
    /// was first. `NotFound` for an unknown id.
    async fn expire_egress(&self, id: Uuid, at: DateTime<Utc>) -> Result<EgressRequest, StoreError>;

    /// Whether skill `skill` at content hash `skill_hash` has a grant for
    /// `host:port`.
    async fn egress_granted(
        &self,
        skill: &str,
        skill_hash: &str,
        host: &str,
        port: u16,
    ) -> Result<bool, StoreError>;

    /// The egress grants (of `skill` only, when given), newest first; at
    /// most [`MAX_GRANTS_LISTED`](super::MAX_GRANTS_LISTED).
    async fn egress_grants(&self, skill: Option<&str>) -> Result<Vec<EgressGrant>, StoreError>;

    /// Revokes every egress grant of `skill`; returns how many there were.
    async fn revoke_egress_grants_of(&self, skill: &str) -> Result<u64, StoreError>;
}

/// A destination to hold for a person.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEgressRequest {
    pub id: Uuid,
    /// The run that asked; `None` for a long-lived child (a backend, a
    /// gateway's server) that serves many calls.
    pub run_id: Option<Uuid>,
    pub skill: String,
    pub skill_version: Option<String>,
    pub skill_hash: String,
    /// The tool called, when a run asked.
    pub tool: Option<String>,
    /// Who made the call (a token's name); `None` without one.
    pub requested_by: Option<String>,
    /// As the program named it, lowercase.
    pub host: String,
    pub port: u16,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

impl NewEgressRequest {
    /// The request as the store keeps it once held: pending, undecided.
    pub fn pending(&self) -> EgressRequest {
        EgressRequest {
            id: self.id,
            run_id: self.run_id,
            skill: self.skill.clone(),
            skill_version: self.skill_version.clone(),
            skill_hash: self.skill_hash.clone(),
            tool: self.tool.clone(),
            requested_by: self.requested_by.clone(),
            host: self.host.clone(),
            port: self.port,
            status: ApprovalStatus::Pending,
            scope: None,
            decided_by: None,
            note: None,
            created_at: self.created_at,
            expires_at: self.expires_at,
            decided_at: None,
        }
    }
}

/// A held destination and, once decided, its decision.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EgressRequest {
    pub id: Uuid,
    pub run_id: Option<Uuid>,
    pub skill: String,
    pub skill_version: Option<String>,
    pub skill_hash: String,
    pub tool: Option<String>,
    pub requested_by: Option<String>,
    pub host: String,
    pub port: u16,
    /// `pending` until decided or expired; `approved` means allowed.
    pub status: ApprovalStatus,
    /// For an allowance: this run (`once`) or this skill version
    /// (`always`).
    pub scope: Option<Scope>,
    pub decided_by: Option<String>,
    pub note: Option<String>,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub decided_at: Option<DateTime<Utc>>,
}

/// A person's decision on a held destination.
#[derive(Debug, Clone, PartialEq)]
pub struct EgressDecide {
    pub id: Uuid,
    pub allow: bool,
    /// Ignored for a denial, which holds for the run that asked.
    pub scope: Scope,
    pub decided_by: Option<String>,
    pub note: Option<String>,
    pub at: DateTime<Utc>,
}

/// Why a request could not be decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EgressUndecidable {
    /// Someone decided it first, or its waiter gave up.
    AlreadyDecided(ApprovalStatus),
    /// Its time ran out; it is now marked `expired`.
    Expired,
}

/// A skill version's standing permission to reach one destination.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EgressGrant {
    pub skill: String,
    pub skill_hash: String,
    pub host: String,
    pub port: u16,
    pub decided_by: Option<String>,
    pub note: Option<String>,
    pub created_at: DateTime<Utc>,
    /// The request whose decision made it.
    pub request_id: Uuid,
}

/// Refuses what no backend can keep: a NUL in any text.
pub(super) fn check_new(r: &NewEgressRequest) -> Result<(), StoreError> {
    let texts = [
        Some(r.skill.as_str()),
        r.skill_version.as_deref(),
        Some(r.skill_hash.as_str()),
        r.tool.as_deref(),
        r.requested_by.as_deref(),
        Some(r.host.as_str()),
    ];
    if texts.into_iter().flatten().any(|t| t.contains('\0')) {
        return Err(StoreError::Invalid(
            "an egress request's texts may not hold a NUL byte".to_owned(),
        ));
    }
    Ok(())
}

/// Refuses a decision's texts that no backend can keep.
pub(super) fn check_decide(d: &EgressDecide) -> Result<(), StoreError> {
    if [d.decided_by.as_deref(), d.note.as_deref()]
        .into_iter()
        .flatten()
        .any(|t| t.contains('\0'))
    {
        return Err(StoreError::Invalid(
            "a decision's decider and note may not hold a NUL byte".to_owned(),
        ));
    }
    Ok(())
}
