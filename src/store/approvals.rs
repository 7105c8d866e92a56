//! Approval requests and standing grants as the store keeps them
//! (`docs/design.md` §4), and the [`Approvals`] each backend keeps them in.

use super::StoreError;
use super::runs::{NewRun, RunStatus, check_new};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use uuid::Uuid;

/// What the call pipeline does with approvals: reads the policy's facts
/// for a call, holds a call for a person (its run and its request
/// together), finds the same call already held, counts a caller's held
/// calls, and notes a caller who stopped waiting. Held as
/// `Arc<dyn Holds>`; deciding is [`Approvals`]'.
#[async_trait::async_trait]
pub trait Holds: Send + Sync + 'static {
    /// Records a run held for approval (`PendingApproval`, its
    /// `approval_id` set to `approval.id`) and its approval request,
    /// together or not at all.
    async fn insert_pending(&self, run: NewRun, approval: NewApproval) -> Result<(), StoreError>;

    /// The standing grant and first-run approval state for one call.
    async fn policy_facts(
        &self,
        skill: &str,
        tool: &str,
        skill_hash: &str,
    ) -> Result<PolicyFacts, StoreError>;

    /// Notes that the caller of pending request `approval` stopped waiting
    /// for its decision (the first time only; a decided request is left
    /// alone).
    async fn mark_caller_left(&self, approval: Uuid, at: DateTime<Utc>) -> Result<(), StoreError>;

    /// How many requests of one caller (`None`: made without a token)
    /// wait for a decision and have not expired by `at`.
    async fn count_pending_by(
        &self,
        requested_by: Option<&str>,
        at: DateTime<Utc>,
    ) -> Result<u64, StoreError>;

    /// The pending, unexpired (at `at`) request for the same call as
    /// `call`: the same caller, skill, tool, skill hash, mode and
    /// arguments (JSON equality), the oldest if several. Found by the
    /// call's digest ([`SameCall::digest`]), one index look-up however
    /// many requests the caller holds; requests recorded before digests
    /// were kept are compared as before. At most `limit` candidates are
    /// compared (a caller holds few: `max_pending_per_caller`).
    async fn pending_like(
        &self,
        call: &SameCall<'_>,
        at: DateTime<Utc>,
        limit: u32,
    ) -> Result<Option<Approval>, StoreError>;
}

/// Approval requests, their decisions and the standing grants: what a
/// person reads and decides. Held as `Arc<dyn Approvals>`. A request and
/// its run change together, in one transaction of the backend that keeps
/// both.
#[async_trait::async_trait]
pub trait Approvals: Send + Sync + 'static {
    /// One approval request; `NotFound` if there is none.
    async fn get_approval(&self, id: Uuid) -> Result<Approval, StoreError>;

    /// The request run `run_id` was held for; `None` for a run never held.
    async fn approval_of_run(&self, run_id: Uuid) -> Result<Option<Approval>, StoreError>;

    /// Decided requests (approved, denied, expired or withdrawn), newest
    /// decision first, each with its run's status.
    async fn list_decisions(&self, filter: DecisionFilter) -> Result<DecisionPage, StoreError>;

    /// A page of approval requests, oldest first (`created_at`, then `id`,
    /// so requests made in the same microsecond still have one order),
    /// resuming after `filter.cursor`. `InvalidCursor` for a cursor this
    /// store did not make.
    async fn list_approvals(&self, filter: ApprovalFilter) -> Result<ApprovalPage, StoreError>;

    /// Decides a pending, unexpired request, exactly once across every
    /// caller and instance (one conditional update in a transaction). On
    /// approval its run goes pending_approval → queued, claimed for
    /// `decide.instance`, which starts it with
    /// [`RunLog::start_run`](super::RunLog::start_run) once it has a slot;
    /// on denial the run ends `denied`. `always` also records a grant
    /// (replacing any earlier one for the same skill, tool and hash). A
    /// request past its time is marked expired here, run and all.
    /// `NotFound` for an unknown id.
    async fn decide(&self, decide: Decide) -> Result<Result<Approval, Undecidable>, StoreError>;

    /// Marks every pending request past its time `expired`, and its run
    /// too. Returns the ids of those runs.
    async fn expire_approvals(&self, at: DateTime<Utc>) -> Result<Vec<Uuid>, StoreError>;

    /// How many requests wait for a decision.
    async fn count_pending(&self) -> Result<u64, StoreError>;

    /// Records a standing grant directly (replacing any for the same
    /// skill, tool and hash), as an `always` decision would: for operators
    /// who decide ahead of any call.
    async fn put_grant(&self, grant: Grant) -> Result<(), StoreError> {
        self.put_grants(vec![grant]).await
    }

    /// Records several grants as [`Approvals::put_grant`] does, all in one
    /// transaction: all of them or none.
    async fn put_grants(&self, grants: Vec<Grant>) -> Result<(), StoreError>;

    /// The standing grants (of `skill` only, when given), newest first;
    /// at most [`MAX_GRANTS_LISTED`](super::MAX_GRANTS_LISTED).
    async fn list_grants(&self, skill: Option<&str>) -> Result<Vec<Grant>, StoreError>;

    /// Revokes a grant; `NotFound` if there is none with this id.
    async fn revoke_grant(&self, id: Uuid) -> Result<(), StoreError>;

    /// Revokes every grant of `skill`, whatever its tool and hash; returns
    /// how many there were.
    async fn revoke_grants_of(&self, skill: &str) -> Result<u64, StoreError>;
}

/// Where an approval request is. Only `pending` ever changes, once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalStatus {
    Pending,
    Approved,
    Denied,
    Expired,
}

impl ApprovalStatus {
    /// Every status, in the order of the API's list.
    pub const ALL: [ApprovalStatus; 4] = [Self::Pending, Self::Approved, Self::Denied, Self::Expired];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Denied => "denied",
            Self::Expired => "expired",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

/// How far a decision reaches: this run, or every later call of the same
/// tool of the same skill version (a grant).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    #[default]
    Once,
    Always,
}

impl Scope {
    /// Every scope, in the order of the API's list.
    pub const ALL: [Scope; 2] = [Self::Once, Self::Always];

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrantDecision {
    Allow,
    Deny,
}

impl GrantDecision {
    /// Every decision, in the order of the API's list.
    pub const ALL: [GrantDecision; 2] = [Self::Allow, Self::Deny];

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
/// decision. The API's `Approval` is built from it.
#[derive(Debug, Clone, PartialEq)]
pub struct Approval {
    pub id: Uuid,
    /// The run held for this decision.
    pub run_id: Uuid,
    pub skill: String,
    pub tool: String,
    /// What the tool does, as its skill describes it.
    pub description: String,
    /// `bundled`, `user` or `untrusted`.
    pub trust: String,
    /// Why this call deserves a closer look, when it does.
    pub warning: Option<String>,
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
    pub created_at: DateTime<Utc>,
    pub decided_at: Option<DateTime<Utc>>,
    pub expires_at: DateTime<Utc>,
    /// The mode the caller asked in (`SKILL_MODE` for the tool).
    pub mode: Option<String>,
    /// When the caller stopped waiting for the decision (its wait ran out,
    /// or it went away). Approving still runs the call; its result is in
    /// the run log, but nobody is waiting on it.
    pub caller_left_at: Option<DateTime<Utc>>,
}

/// A decided request and what became of its run: an entry of the
/// approvers' history.
#[derive(Debug, Clone, PartialEq)]
pub struct DecidedApproval {
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
#[derive(Debug, Clone, PartialEq)]
pub struct DecisionPage {
    pub decisions: Vec<DecidedApproval>,
    /// Pass back as `cursor` for the next page; null on the last page.
    pub next_cursor: Option<String>,
}

/// `GET /approvals`'s query.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ApprovalFilter {
    /// Only requests in this state (the inbox: `Pending`).
    pub status: Option<ApprovalStatus>,
    /// Page size; the store clamps it to 1..=[`MAX_APPROVALS`](super::MAX_APPROVALS).
    pub limit: u32,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// One page of approval requests, oldest first.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ApprovalPage {
    pub approvals: Vec<Approval>,
    /// Pass back as `cursor` for the next page; `None` on the last page.
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

/// A standing allow or deny for one tool of one skill version. The API's
/// `Grant` is built from it.
#[derive(Debug, Clone, PartialEq)]
pub struct Grant {
    pub id: Uuid,
    pub skill: String,
    pub tool: String,
    pub skill_hash: String,
    pub decision: GrantDecision,
    pub created_by: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// What the store knows that the policy needs, for one call.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PolicyFacts {
    /// The standing grant for this skill, tool and hash, if any.
    pub grant: Option<GrantDecision>,
    /// Who made that grant (a token's name), so that a token's own grant
    /// never stands in for a person's decision on its own calls.
    pub grant_by: Option<String>,
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

/// A call as a retry of it would be made: what [`Approvals::pending_like`]
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

impl<'a> SameCall<'a> {
    /// The call a new run makes, as a retry of it would be matched.
    pub fn of_run(run: &'a NewRun) -> Self {
        Self {
            requested_by: run.requested_by.as_deref(),
            skill: &run.skill,
            tool: &run.tool,
            skill_hash: &run.skill_hash,
            mode: run.mode.as_deref(),
            arguments: &run.arguments,
        }
    }

    /// A digest of everything [`SameCall::is`] compares, kept with each
    /// request so that finding the same call is one index look-up rather
    /// than a walk over the caller's pending requests. Calls that are the
    /// same have the same digest (arguments in any key order); the store
    /// still compares what it finds, so a collision is harmless.
    pub fn digest(&self) -> String {
        let mut text = serde_json::json!([
            self.requested_by,
            self.skill,
            self.tool,
            self.skill_hash,
            self.mode
        ])
        .to_string();
        canonical(self.arguments, &mut text);
        hex::encode(Sha256::digest(text.as_bytes()))
    }

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

/// `value` as text that is the same for every value JSON equality (serde's
/// `Value` `==`) holds equal: object keys sorted. A number prints as it
/// compares (its text, with serde_json's `arbitrary_precision`, which
/// starlark turns on); without that feature `0.0` and `-0.0` would compare
/// equal but print apart, so zero is printed one way. Values that differ
/// may still print alike: the store compares what it finds.
fn canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(fields) => {
            let mut keys: Vec<&String> = fields.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::from(key.as_str()).to_string());
                out.push(':');
                if let Some(field) = fields.get(key) {
                    canonical(field, out);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        Value::Number(n) if n.as_f64() == Some(0.0) && n.is_f64() => out.push_str("0.0"),
        other => out.push_str(&other.to_string()),
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

/// Refuses a pending pair that does not belong together.
pub(super) fn check_pending(run: &NewRun, approval: &NewApproval) -> Result<(), StoreError> {
    check_new(run)?;
    if run.status != RunStatus::PendingApproval || run.approval_id != Some(approval.id) {
        return Err(StoreError::Other(
            "a run held for approval must be pending_approval and name its approval".to_owned(),
        ));
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(arguments: &Value) -> SameCall<'_> {
        SameCall {
            requested_by: Some("agent"),
            skill: "git",
            tool: "git_log",
            skill_hash: "h1",
            mode: Some("Dev"),
            arguments,
        }
    }

    #[test]
    fn json_equal_arguments_have_one_digest() {
        let a = json!({"b": {"y": [1, {"q": 1, "p": 2.5}], "x": "é\"\n"}, "a": null});
        let b: Value =
            serde_json::from_str(r#"{"a": null, "b": {"x": "é\"\n", "y": [1, {"p": 2.5, "q": 1}]}}"#)
                .unwrap();
        assert_eq!(a, b, "the premise: serde's JSON equality");
        assert_eq!(call(&a).digest(), call(&b).digest());
    }

    #[test]
    fn anything_that_differs_changes_the_digest() {
        let args = json!({"n": 1, "s": "x"});
        let base = call(&args).digest();
        let others = [
            json!({"n": 1.0, "s": "x"}),
            json!({"n": 1, "s": "y"}),
            json!({"n": 1}),
            json!([1, "x"]),
        ];
        for other in &others {
            assert_ne!(call(other).digest(), base, "{other}");
        }
        let differ = [
            SameCall {
                requested_by: None,
                ..call(&args)
            },
            SameCall {
                skill: "gi",
                tool: "tgit_log",
                ..call(&args)
            },
            SameCall {
                skill_hash: "h2",
                ..call(&args)
            },
            SameCall {
                mode: None,
                ..call(&args)
            },
        ];
        for other in differ {
            assert_ne!(other.digest(), base, "{other:?}");
        }
    }
}
