//! The activation requests that wait for a person, across every caller's
//! sessions: what an approver reads to find them (`GET /activations`),
//! since a session itself is visible only to its caller.

use super::state::{Lifecycle, SessionState};
use super::{SessionError, Sessions};
use crate::skill::triggers::FiredTrigger;
use crate::store::{MAX_SESSIONS_LISTED, SessionRecord};
use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

/// A skill waiting in a session for a person to allow its permissions;
/// decided by `POST /sessions/{session}/activations/{skill}`.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct PendingActivation {
    /// The request's id.
    pub id: Uuid,
    pub session: Uuid,
    /// Who opened the session (null on a server without tokens); that
    /// caller cannot decide it.
    pub caller: Option<String>,
    pub skill: String,
    /// The permissions the skill declares, which allowing it grants.
    pub permissions: Vec<String>,
    /// The content hash of the skill's version that asks: a decision
    /// names it, with the request's `id`.
    pub hash: String,
    pub trust: crate::trust::Trust,
    /// The trigger that asked for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trigger: Option<FiredTrigger>,
    pub requested_at: DateTime<Utc>,
    /// Where its tools may connect (its `network.allow`, each destination
    /// asked for, or "unrestricted"); absent without the network.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
}

/// Every request that waits, oldest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct PendingActivations {
    pub items: Vec<PendingActivation>,
    /// How many of the newest sessions were read: requests in older ones
    /// are not listed (their callers still see them).
    pub sessions_read: u32,
}

impl Sessions {
    /// The activation requests waiting in the live sessions, among the
    /// newest [`MAX_SESSIONS_LISTED`] sessions.
    pub async fn pending_activations(&self) -> Result<PendingActivations, SessionError> {
        let records = self.store.list_sessions(None, MAX_SESSIONS_LISTED).await?;
        let now = Utc::now();
        let mut items: Vec<PendingActivation> = records
            .iter()
            .filter(|r| r.expires_at > now)
            .flat_map(waiting_in)
            .collect();
        items.sort_by_key(|p| (p.requested_at, p.id));
        Ok(PendingActivations {
            items,
            sessions_read: u32::try_from(records.len()).unwrap_or(u32::MAX),
        })
    }
}

/// The requests waiting in `state` (the session `after` as just written)
/// that were not in `before` (the same session as it was read).
pub(super) fn made(
    before: &SessionRecord,
    after: &SessionRecord,
    state: &SessionState,
) -> Vec<PendingActivation> {
    let old: Vec<Uuid> = waiting_in(before).iter().map(|p| p.id).collect();
    waiting(after, state)
        .into_iter()
        .filter(|p| !old.contains(&p.id))
        .collect()
}

/// The requests waiting in one session as the store holds it. A state
/// this version cannot read holds none it can show.
fn waiting_in(record: &SessionRecord) -> Vec<PendingActivation> {
    serde_json::from_value::<SessionState>(record.state.clone())
        .map(|state| waiting(record, &state))
        .unwrap_or_default()
}

/// The requests waiting in `state`, the state of session `record`.
fn waiting(record: &SessionRecord, state: &SessionState) -> Vec<PendingActivation> {
    state
        .skills
        .iter()
        .filter(|(_, s)| s.state == Lifecycle::Activating)
        .filter_map(|(skill, s)| {
            let request = s.approval.as_ref()?;
            Some(PendingActivation {
                id: request.id,
                session: record.id,
                caller: record.caller.clone(),
                skill: skill.clone(),
                permissions: request.permissions.clone(),
                hash: s.hash.clone(),
                trust: request.trust,
                trigger: s.trigger.clone(),
                requested_at: request.requested_at,
                network: request.network.clone(),
            })
        })
        .collect()
}
