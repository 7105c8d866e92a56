//! Seed 002's sessions and skill approvals as the store keeps them
//! (`docs/design.md` §5): one session per conversation of an orchestrator,
//! and a person's "allow always" for the permissions a skill version
//! declares. What a session's context and state mean is the session
//! runtime's business (`crate::session`); the store keeps them as JSON.

use super::{StoreError, keepable};
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::fmt;
use uuid::Uuid;

/// Sessions and skill approvals, as the session runtime keeps them; held
/// as `Arc<dyn SessionStore>`.
#[async_trait::async_trait]
pub trait SessionStore: Send + Sync + 'static {
    /// Records a new session, unless its caller (`None`: a group of its
    /// own) already holds `max_per_caller` sessions unexpired at `now`:
    /// the count and the insert are one transaction, serialized per
    /// caller across instances, so concurrent creates never pass the
    /// bound. `Conflict` on a duplicate id; `Invalid` for a NUL in the
    /// caller (one in the JSON becomes U+FFFD, see [`keepable`]).
    async fn create_session(
        &self,
        s: NewSession,
        max_per_caller: u64,
        now: DateTime<Utc>,
    ) -> Result<Result<SessionRecord, TooMany>, StoreError>;

    /// One session, expired or not (the runtime decides what an expired
    /// one means); `None` if there is none with this id.
    async fn get_session(&self, id: Uuid) -> Result<Option<SessionRecord>, StoreError>;

    /// Replaces a session's turn, state and expiry, only if it is still
    /// at `revision` (one conditional update), bumping the revision;
    /// `None` when the revision moved on or the session is gone.
    async fn update_session(
        &self,
        id: Uuid,
        revision: i64,
        turn: u32,
        state: Value,
        expires_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Option<SessionRecord>, StoreError>;

    /// Deletes a session; whether it existed.
    async fn end_session(&self, id: Uuid) -> Result<bool, StoreError>;

    /// Deletes up to [`EXPIRE_BATCH`] sessions expired at `now` (oldest
    /// expiry first) and returns them as they were, so that their skills
    /// can be told; fewer than the batch when no more are due. Across
    /// instances each session is returned to one.
    async fn expire_sessions(&self, now: DateTime<Utc>) -> Result<Vec<SessionRecord>, StoreError>;

    /// Sessions expired or not, newest first (of `caller` only, when
    /// given), at most `limit` (clamped to 1..=[`MAX_SESSIONS_LISTED`]).
    async fn list_sessions(&self, caller: Option<&str>, limit: u32)
    -> Result<Vec<SessionRecord>, StoreError>;
}

/// Skills a person allowed "always" into sessions, each bound to one
/// version (seed 002's `allow_always`). Held as `Arc<dyn SkillApprovals>`.
#[async_trait::async_trait]
pub trait SkillApprovals: Send + Sync + 'static {
    /// Records an "allow always", replacing any for the same skill and
    /// hash. `Invalid` for a NUL in any of its texts.
    async fn put_skill_approval(&self, a: SkillApproval) -> Result<(), StoreError>;

    /// The "allow always" for one skill version, if any.
    async fn skill_approval(
        &self,
        skill: &str,
        skill_hash: &str,
    ) -> Result<Option<SkillApproval>, StoreError>;

    /// The "allow always" approvals (of `skill` only, when given), newest
    /// decision first; at most [`MAX_SKILL_APPROVALS_LISTED`].
    async fn list_skill_approvals(&self, skill: Option<&str>) -> Result<Vec<SkillApproval>, StoreError>;

    /// Revokes every "allow always" of `skill`, whatever its hash; returns
    /// how many there were.
    async fn revoke_skill_approvals(&self, skill: &str) -> Result<u64, StoreError>;
}

/// The most sessions [`SessionStore::expire_sessions`] deletes at once;
/// the sweep comes back for the rest.
pub const EXPIRE_BATCH: u32 = 1000;

/// The most sessions [`SessionStore::list_sessions`] gives at once.
pub const MAX_SESSIONS_LISTED: u32 = 1000;

/// A session as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRecord {
    pub id: Uuid,
    /// The token name that opened it (None on a server without tokens).
    pub caller: Option<String>,
    /// The trigger context it was started with (JSON object, opaque to the store).
    pub context: Value,
    /// The turn number (0 before the first turn).
    pub turn: u32,
    /// Each skill's state in the session (JSON object, opaque to the store).
    pub state: Value,
    /// Bumped by every update: optimistic concurrency between instances.
    pub revision: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    /// The SHA-256 (hex) of the secret its creator got: what shows a
    /// later request may steer it. None for a session made before
    /// sessions had secrets.
    pub secret_sha256: Option<String>,
}

/// A session as first recorded: turn 0, revision 0, updated when created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSession {
    pub id: Uuid,
    pub caller: Option<String>,
    pub context: Value,
    pub state: Value,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    /// The SHA-256 (hex) of the session's secret.
    pub secret_sha256: Option<String>,
}

impl NewSession {
    /// The session as every backend can keep it: a NUL in its caller is
    /// refused (no token name holds one), one inside its JSON becomes
    /// U+FFFD, as in a run's result.
    pub(super) fn checked(self) -> Result<Self, StoreError> {
        refuse_nul("a session's caller", self.caller.as_deref())?;
        Ok(Self {
            context: keepable(self.context),
            state: keepable(self.state),
            ..self
        })
    }
}

/// Why a session was not created: its caller already holds `max` live
/// (unexpired) sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooMany {
    /// How many live sessions the caller holds.
    pub live: u64,
    pub max: u64,
}

impl fmt::Display for TooMany {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the caller holds {} live sessions, and at most {} are allowed; end one or wait for one to expire",
            self.live, self.max
        )
    }
}

/// A person's "allow always" for a skill version's declared permissions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillApproval {
    pub skill: String,
    pub skill_hash: String,
    pub permissions: Vec<String>,
    pub decided_by: Option<String>,
    pub decided_at: DateTime<Utc>,
}

impl SkillApproval {
    /// Refuses an approval holding a NUL in any of its texts: PostgreSQL
    /// cannot keep one, and no skill name, hash or permission holds one.
    pub(super) fn check(&self) -> Result<(), StoreError> {
        refuse_nul("a skill approval's skill", Some(&self.skill))?;
        refuse_nul("a skill approval's skill hash", Some(&self.skill_hash))?;
        refuse_nul("a skill approval's decider", self.decided_by.as_deref())?;
        for permission in &self.permissions {
            refuse_nul("a skill approval's permission", Some(permission))?;
        }
        Ok(())
    }
}

/// The most skill approvals [`SessionStore::list_skill_approvals`] gives at once.
pub const MAX_SKILL_APPROVALS_LISTED: u32 = 1000;

/// `Invalid` for a text holding a NUL.
fn refuse_nul(what: &str, text: Option<&str>) -> Result<(), StoreError> {
    match text {
        Some(text) if text.contains('\0') => Err(StoreError::Invalid(format!("{what} holds a NUL byte"))),
        _ => Ok(()),
    }
}

/// Whether a look-up by these names can find nothing: no kept name holds
/// a NUL, and PostgreSQL refuses one in a query rather than finding none.
pub(super) fn holds_nul(names: &[&str]) -> bool {
    names.iter().any(|name| name.contains('\0'))
}

/// A turn as the databases keep it (a signed integer).
pub(super) fn turn_of(stored: i64) -> Result<u32, StoreError> {
    u32::try_from(stored).map_err(|_| StoreError::Other(format!("bad session turn {stored} in the database")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn new_session(caller: Option<&str>) -> NewSession {
        NewSession {
            id: Uuid::now_v7(),
            caller: caller.map(str::to_owned),
            context: json!({"k\u{0}": "v\u{0}"}),
            state: json!({"s": ["\u{0}"]}),
            created_at: Utc::now(),
            expires_at: Utc::now(),
            secret_sha256: None,
        }
    }

    #[test]
    fn a_nul_in_a_caller_is_refused_and_in_json_replaced() {
        assert!(matches!(
            new_session(Some("a\0b")).checked(),
            Err(StoreError::Invalid(why)) if why.contains("NUL")
        ));
        let kept = new_session(Some("alice")).checked().unwrap();
        assert_eq!(kept.context, json!({"k\u{fffd}": "v\u{fffd}"}));
        assert_eq!(kept.state, json!({"s": ["\u{fffd}"]}));
    }

    #[test]
    fn a_nul_anywhere_in_an_approval_is_refused() {
        let good = SkillApproval {
            skill: "git".to_owned(),
            skill_hash: "sha256:00".to_owned(),
            permissions: vec!["shell:exec".to_owned()],
            decided_by: Some("alice".to_owned()),
            decided_at: Utc::now(),
        };
        assert!(good.check().is_ok());
        let bad = [
            SkillApproval {
                skill: "g\0".to_owned(),
                ..good.clone()
            },
            SkillApproval {
                skill_hash: "\0".to_owned(),
                ..good.clone()
            },
            SkillApproval {
                permissions: vec!["file:read".to_owned(), "x\0".to_owned()],
                ..good.clone()
            },
            SkillApproval {
                decided_by: Some("\0".to_owned()),
                ..good
            },
        ];
        for approval in bad {
            assert!(
                matches!(approval.check(), Err(StoreError::Invalid(_))),
                "{approval:?}"
            );
        }
    }

    #[test]
    fn a_stored_turn_must_fit() {
        assert_eq!(turn_of(7).unwrap(), 7);
        assert!(turn_of(-1).is_err());
        assert!(turn_of(i64::from(u32::MAX) + 1).is_err());
    }
}
