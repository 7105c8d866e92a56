//! Persistence: the audit log of runs, behind one narrow trait with a SQLite
//! and a PostgreSQL implementation (`docs/design.md` §5).
//!
//! Handlers and the runner only ever see `Arc<dyn Store>` and [`StoreError`];
//! which database sits behind it is decided once, by the URL scheme, in
//! [`connect`]. Decisions that must happen exactly once (a run starts, a run
//! finishes) are single conditional `update … where status … returning`
//! statements, never a read followed by a write, so two instances sharing one
//! PostgreSQL cannot both win.

/// The most grants listed at once, as a literal for the stores' SQL.
macro_rules! max_grants_listed {
    () => {
        "1000"
    };
}

mod approvals;
mod deferred;
mod notifications;
mod postgres;
mod sessions;
mod sqlite;
mod views;

pub use approvals::{
    Approval, ApprovalFilter, ApprovalPage, ApprovalStatus, Decide, DecidedApproval, DecisionFilter,
    DecisionPage, Grant, GrantDecision, NewApproval, PolicyFacts, SameCall, Scope, Undecidable,
};
pub use deferred::{Deferred, MAX_COMMIT_INTERVAL};
use notifications::http_status;
pub use notifications::{Attempt, NewNotification, Notification, NotificationStatus};
pub use postgres::PgStore;
pub use sessions::{
    EXPIRE_BATCH, MAX_SESSIONS_LISTED, MAX_SKILL_APPROVALS_LISTED, NewSession, SessionRecord, SkillApproval,
    TooMany,
};
pub use sqlite::{
    Serving, SqliteStore, announce_serving, claim_for_serving, files_of as sqlite_files, who_serves,
};
pub use views::{Outbox, StoreReader};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast;
use uuid::Uuid;

/// Where a run is in its life. The first three are live; the rest are final
/// and never change again (see [`RunStatus::is_final`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    PendingApproval,
    Queued,
    Running,
    Succeeded,
    Failed,
    TimedOut,
    Cancelled,
    Denied,
    Expired,
    Interrupted,
}

impl RunStatus {
    /// Every status, in the order of the API's list.
    pub const ALL: [RunStatus; 10] = [
        RunStatus::PendingApproval,
        RunStatus::Queued,
        RunStatus::Running,
        RunStatus::Succeeded,
        RunStatus::Failed,
        RunStatus::TimedOut,
        RunStatus::Cancelled,
        RunStatus::Denied,
        RunStatus::Expired,
        RunStatus::Interrupted,
    ];

    /// The wire and database spelling; the same as serde's.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::PendingApproval => "pending_approval",
            RunStatus::Queued => "queued",
            RunStatus::Running => "running",
            RunStatus::Succeeded => "succeeded",
            RunStatus::Failed => "failed",
            RunStatus::TimedOut => "timed_out",
            RunStatus::Cancelled => "cancelled",
            RunStatus::Denied => "denied",
            RunStatus::Expired => "expired",
            RunStatus::Interrupted => "interrupted",
        }
    }

    /// The inverse of [`RunStatus::as_str`]; `None` for anything else, so a
    /// bad `?status=` can be answered as the caller's mistake.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|status| status.as_str() == s)
    }

    /// A final run has its `finished_at` and, usually, its envelope; the
    /// store refuses to move it anywhere else.
    pub fn is_final(self) -> bool {
        !matches!(
            self,
            RunStatus::PendingApproval | RunStatus::Queued | RunStatus::Running
        )
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One call of a tool as the audit log holds it; the API's `Run` is built
/// from it.
///
/// Timestamps come back from the store with microsecond precision (what
/// PostgreSQL keeps), whatever precision they were given with.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Run {
    pub id: Uuid,
    pub skill: String,
    pub tool: String,
    /// The skill's content hash when the call was decided: what an approval
    /// or grant was given for.
    pub skill_hash: String,
    pub arguments: Value,
    /// The exact command line that runs (or ran, or would have run).
    pub argv: Vec<String>,
    pub cwd: String,
    pub status: RunStatus,
    pub requested_by: Option<String>,
    pub approval_id: Option<Uuid>,
    pub created_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    /// The envelope, once finished, as JSON: the store does not import the
    /// pipeline that defines it.
    pub result: Option<Value>,
    /// Process group of the running child; kept out of the API because it
    /// means nothing outside the machine that ran it.
    #[serde(skip)]
    pub pgid: Option<i32>,
    /// The server instance that ran it, so start-up recovery on one instance
    /// does not interrupt another's live runs.
    #[serde(skip)]
    pub instance: Option<String>,
    /// The caller's mode (`SKILL_MODE`), kept so that an approved run is
    /// prepared again exactly as it was asked for.
    #[serde(skip)]
    pub mode: Option<String>,
    /// The `x-request-id` of the request that made the call, to find its
    /// log lines.
    pub request_id: Option<String>,
    /// What the person who decided the call wrote: why they denied it, or
    /// what they said approving it.
    pub note: Option<String>,
    /// The version of the skill called (installed skills keep several).
    pub skill_version: Option<String>,
    /// The session the call named, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<Uuid>,
}

/// A run as first recorded, before anything has started.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRun {
    /// A UUIDv7, so ids also sort roughly by creation.
    pub id: Uuid,
    pub skill: String,
    pub tool: String,
    pub skill_hash: String,
    pub arguments: Value,
    pub argv: Vec<String>,
    pub cwd: String,
    /// `Queued` or `PendingApproval`; `Running` when it starts at once
    /// (then `started_at` and `instance` are set: one write instead of an
    /// insert and a claim); `Denied` for a call a standing deny refused,
    /// recorded finished. Anything else is refused.
    pub status: RunStatus,
    pub requested_by: Option<String>,
    pub approval_id: Option<Uuid>,
    pub created_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub instance: Option<String>,
    pub mode: Option<String>,
    pub request_id: Option<String>,
    pub skill_version: Option<String>,
    /// The caller's `Idempotency-Key`, unique per caller (see
    /// [`Store::run_by_key`]): a second run with one key is a `Conflict`.
    pub idempotency_key: Option<String>,
    /// The session the call named, if any.
    pub session: Option<Uuid>,
}

/// How one run ended, for [`Store::finish_runs`].
#[derive(Debug, Clone, PartialEq)]
pub struct RunEnd {
    pub id: Uuid,
    pub status: RunStatus,
    pub result: Option<Value>,
    pub at: DateTime<Utc>,
}

/// `GET /runs`'s query: every filter given must match.
#[derive(Debug, Clone, PartialEq)]
pub struct RunFilter {
    pub tool: Option<String>,
    pub skill: Option<String>,
    pub status: Option<RunStatus>,
    /// Only the runs called in this session.
    pub session: Option<Uuid>,
    /// Page size, 1..=500. The caller clamps; the store clamps again rather
    /// than trust it with an unbounded query.
    pub limit: u32,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

impl RunFilter {
    /// The largest page a caller may ask for.
    pub const MAX_LIMIT: u32 = 500;

    /// Whether no run can match: no recorded name holds a NUL, and
    /// PostgreSQL refuses one in a query rather than finding nothing.
    fn matches_nothing(&self) -> bool {
        names_hold_nul(&[&self.skill, &self.tool])
    }
}

impl Default for RunFilter {
    /// No filter, the first page of 50.
    fn default() -> Self {
        Self {
            tool: None,
            skill: None,
            status: None,
            session: None,
            limit: 50,
            cursor: None,
        }
    }
}

/// One page of runs, newest first.
#[derive(Debug, Clone, PartialEq)]
pub struct RunPage {
    pub runs: Vec<Run>,
    /// Pass back as `cursor` for the next page; null on the last page.
    pub next_cursor: Option<String>,
}

/// A place in the run log's order: a run's creation time, then its id.
/// Compared as that pair, as `GET /runs` orders runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct RunPosition {
    pub created_at: DateTime<Utc>,
    pub id: Uuid,
}

impl RunPosition {
    /// Before every run created at `at` or later.
    pub fn created_before(at: DateTime<Utc>) -> Self {
        Self {
            created_at: at,
            id: Uuid::nil(),
        }
    }
}

/// Where pruned runs are kept before they are deleted (see
/// [`Store::prune_runs`]).
#[async_trait::async_trait]
pub trait PruneExport: Send + Sync {
    /// Keeps `runs` durably (written and synced) before returning.
    async fn export(&self, runs: &[Run]) -> std::io::Result<()>;
}

/// An export error as the store reports it: nothing was deleted.
fn export_failed(err: &std::io::Error) -> StoreError {
    StoreError::Unavailable(format!("cannot export the runs to prune: {err}"))
}

/// What can go wrong at the store boundary: narrow on purpose, mapped once to
/// HTTP elsewhere (404, 409, 400, 503, 500). Messages of `Unavailable` and
/// `Other` are for the log, never for a client.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// No `what` (a run, an approval, a grant) has this id.
    #[error("{what} {id} not found")]
    NotFound { what: &'static str, id: Uuid },
    #[error("conflict: {0}")]
    Conflict(String),
    /// The `cursor` was not one this store handed out: the caller's mistake.
    #[error("invalid cursor")]
    InvalidCursor,
    /// An input no backend can keep (a NUL byte in a text): the caller's
    /// mistake, said in words a client may see.
    #[error("invalid input: {0}")]
    Invalid(String),
    /// The database cannot be reached or is not answering; callers fail
    /// closed, because nothing may run that could not be recorded.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    #[error("store error: {0}")]
    Other(String),
}

/// The audit log (and, later, approvals and grants), held as `Arc<dyn Store>`.
#[async_trait::async_trait]
pub trait Store: Send + Sync + 'static {
    /// `"sqlite"` or `"postgres"`, for `/readyz` and the log.
    fn backend(&self) -> &'static str;

    /// A round trip to the database, for `/readyz` and for failing an
    /// invocation closed before anything runs.
    async fn ping(&self) -> Result<(), StoreError>;

    /// Status changes of runs (their ids), made by this instance and, on
    /// PostgreSQL, by every other one (`LISTEN/NOTIFY`), so that waiters
    /// wake when a run they wait for is decided or finishes. A lagging
    /// receiver should re-read what it waits for.
    fn changes(&self) -> broadcast::Receiver<Uuid>;

    /// Records a new run (see [`NewRun::status`]) and returns it as stored.
    /// `Conflict` on a duplicate id.
    async fn insert_run(&self, run: NewRun) -> Result<Run, StoreError>;

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
    /// `decide.instance`, which starts it with [`Store::start_run`] once it
    /// has a slot; on denial the run ends `denied`. `always` also records a grant (replacing any earlier one
    /// for the same skill, tool and hash). A request past its time is
    /// marked expired here, run and all. `NotFound` for an unknown id.
    async fn decide(&self, decide: Decide) -> Result<Result<Approval, Undecidable>, StoreError>;

    /// Marks every pending request past its time `expired`, and its run
    /// too. Returns the ids of those runs.
    async fn expire_approvals(&self, at: DateTime<Utc>) -> Result<Vec<Uuid>, StoreError>;

    /// Notes that the caller of pending request `approval` stopped waiting
    /// for its decision (the first time only; a decided request is left
    /// alone).
    async fn mark_caller_left(&self, approval: Uuid, at: DateTime<Utc>) -> Result<(), StoreError>;

    /// How many requests wait for a decision.
    async fn count_pending(&self) -> Result<u64, StoreError>;

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

    /// The run `requested_by` made with idempotency key `key`, if it was
    /// made at `since` or later. A run made earlier gives the key up (it
    /// is cleared from the run), so that the key can be used again.
    async fn run_by_key(
        &self,
        requested_by: Option<&str>,
        key: &str,
        since: DateTime<Utc>,
    ) -> Result<Option<Run>, StoreError>;

    /// Records a standing grant directly (replacing any for the same
    /// skill, tool and hash), as an `always` decision would: for operators
    /// who decide ahead of any call.
    async fn put_grant(&self, grant: Grant) -> Result<(), StoreError> {
        self.put_grants(vec![grant]).await
    }

    /// Records several grants as [`Store::put_grant`] does, all in one
    /// transaction: all of them or none.
    async fn put_grants(&self, grants: Vec<Grant>) -> Result<(), StoreError>;

    /// The standing grants (of `skill` only, when given), newest first;
    /// at most [`MAX_GRANTS_LISTED`].
    async fn list_grants(&self, skill: Option<&str>) -> Result<Vec<Grant>, StoreError>;

    /// Revokes a grant; `NotFound` if there is none with this id.
    async fn revoke_grant(&self, id: Uuid) -> Result<(), StoreError>;

    /// Revokes every grant of `skill`, whatever its tool and hash; returns
    /// how many there were.
    async fn revoke_grants_of(&self, skill: &str) -> Result<u64, StoreError>;

    /// A registry's index as last fetched, if it ever was.
    async fn cached_index(&self, url: &str) -> Result<Option<CachedIndex>, StoreError>;

    /// Keeps a registry's index, replacing what was kept for its address.
    async fn cache_index(&self, index: CachedIndex) -> Result<(), StoreError>;

    // ---- sessions (seed 002, `src/store/sessions.rs`) ----

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

    /// Records a webhook delivery to make; `false` when the same event was
    /// already recorded for the same target (by this or another instance).
    async fn enqueue_notification(&self, n: NewNotification) -> Result<bool, StoreError>;

    /// Claims up to `max` pending deliveries that are due at `now` and not
    /// claimed by a live lease, for `instance` until `lease_until`, and
    /// counts the attempt. Across instances each is claimed by one.
    async fn claim_notifications(
        &self,
        instance: &str,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        max: u32,
    ) -> Result<Vec<Notification>, StoreError>;

    /// Records how `instance`'s attempt at delivery `id` ended, and
    /// releases its claim (nothing, if the claim was lost meanwhile).
    async fn record_attempt(
        &self,
        id: Uuid,
        instance: &str,
        attempt: Attempt,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError>;

    /// Deliveries, newest first, at most `limit`.
    async fn list_notifications(
        &self,
        status: Option<NotificationStatus>,
        limit: u32,
    ) -> Result<Vec<Notification>, StoreError>;

    /// Claims a queued run: queued → running, only if still queued, with one
    /// conditional update. This is the exactly-once primitive: of any number
    /// of concurrent callers, on any number of instances, one gets the run
    /// and the others `Ok(None)`. `NotFound` for an unknown id.
    async fn start_run(
        &self,
        id: Uuid,
        pgid: Option<i32>,
        instance: &str,
        at: DateTime<Utc>,
    ) -> Result<Option<Run>, StoreError>;

    /// Records the child's process group once it is spawned (the run stays
    /// running). `Conflict` when the run is no longer running, e.g. it was
    /// cancelled between the claim and the spawn: the caller should then kill
    /// the group it just made. `NotFound` for an unknown id.
    async fn set_pgid(&self, id: Uuid, pgid: i32) -> Result<(), StoreError>;

    /// Ends a live run (pending_approval, queued or running) with a final
    /// status and its envelope, only if it is not final already; `Ok(None)`
    /// if it was, so a run is finished exactly once and stays as it ended.
    /// A pending approval request of the run is withdrawn with it (marked
    /// `expired`), in the same transaction.
    /// `NotFound` for an unknown id; `Other` if `status` is not final.
    async fn finish_run(
        &self,
        id: Uuid,
        status: RunStatus,
        result: Option<Value>,
        at: DateTime<Utc>,
    ) -> Result<Option<Run>, StoreError>;

    /// Ends a live run as [`Store::finish_run`] does, but may answer before
    /// the end commits (`docs/design.md` §5): this store's own reads show
    /// the end at once, and [`Store::flush`] waits for its commit. A store
    /// without such a queue writes it here.
    async fn finish_run_soon(
        &self,
        id: Uuid,
        status: RunStatus,
        result: Option<Value>,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.finish_run(id, status, result, at).await.map(|_| ())
    }

    /// Ends each of several live runs as [`Store::finish_run`] does, in as
    /// few commits as the store can: for ends gathered after their answers.
    /// A run already final is left as it ended; an unknown one is skipped.
    async fn finish_runs(&self, ends: &[RunEnd]) -> Result<(), StoreError> {
        let each = ends
            .iter()
            .map(|end| self.finish_run(end.id, end.status, end.result.clone(), end.at));
        for done in futures_util::future::join_all(each).await {
            match done {
                Ok(_) | Err(StoreError::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Waits until every end given to [`Store::finish_run_soon`] so far
    /// has committed (or been given up): before the process exits.
    async fn flush(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Ends a run that has not started (pending_approval or queued) with
    /// a final status and no envelope, withdrawing its pending request;
    /// `Ok(None)` if it has started or ended meanwhile, so a run claimed
    /// by an approval elsewhere is never ended under the instance running
    /// it. `NotFound` for an unknown id; `Other` if `status` is not final.
    async fn end_waiting(
        &self,
        id: Uuid,
        status: RunStatus,
        at: DateTime<Utc>,
    ) -> Result<Option<Run>, StoreError>;

    /// One run; `NotFound` if there is none with this id.
    async fn get_run(&self, id: Uuid) -> Result<Run, StoreError>;

    /// A page of runs, newest first (`created_at` desc, then `id` desc, so
    /// runs created in the same microsecond still have one order), resuming
    /// after `filter.cursor`. `InvalidCursor` for a cursor this store did not
    /// make.
    async fn list_runs(&self, filter: RunFilter) -> Result<RunPage, StoreError>;

    /// Start-up recovery: every run still `running`, or `queued` after an
    /// approval claimed it for an instance (of this instance, or of any
    /// instance when `instance` is `None`), was orphaned by a crash and
    /// becomes `interrupted`, finished at `at`. Returns how many.
    async fn interrupt_running(&self, instance: Option<&str>, at: DateTime<Utc>) -> Result<u64, StoreError>;

    // ---- retention (`docs/design.md` §5, `crate::retention`) ----

    /// Where the `n`th newest run stands (1: the newest), in the order of
    /// [`Store::list_runs`]; `None` when there are fewer runs. Retention by
    /// count prunes what is older. It walks `n` index entries: for a
    /// background task, not for a request.
    async fn nth_newest_run(&self, n: u64) -> Result<Option<RunPosition>, StoreError>;

    /// Deletes up to `batch` final runs older than `before`, oldest first,
    /// in one short transaction, with their approval requests and those
    /// requests' webhook deliveries; a live run (pending_approval, queued,
    /// running) is never touched. An approved request's skill version is
    /// remembered first, so that first-run approval does not ask again.
    /// `export`, if given, gets the runs before the delete commits, and
    /// must have them durably when it returns: an export error deletes
    /// nothing. Runs another instance is pruning at the same moment are
    /// skipped, so no run is exported twice by two instances. Returns how
    /// many runs were deleted: fewer than `batch` when no more are due.
    async fn prune_runs(
        &self,
        before: RunPosition,
        batch: u32,
        export: Option<&dyn PruneExport>,
    ) -> Result<u64, StoreError>;
}

/// A registry's index as fetched (seed 002's registry cache), so that a
/// search within its ttl asks nobody and one the registry cannot answer
/// still finds what it last said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedIndex {
    pub url: String,
    pub body: String,
    pub fetched_at: DateTime<Utc>,
}

/// Opens the store a URL names and applies its migrations: `sqlite://path`
/// (or `sqlite:path`) → [`SqliteStore`], `postgres://` or `postgresql://` →
/// [`PgStore`]; runs' ends commit after the answer, without waiting.
pub async fn connect(url: &str) -> Result<Arc<dyn Store>, StoreError> {
    connect_with(url, Duration::ZERO).await
}

/// [`connect`], with runs' ends committed after the answer (see
/// [`Deferred`]), gathered for `commit_interval` before each commit.
pub async fn connect_with(url: &str, commit_interval: Duration) -> Result<Arc<dyn Store>, StoreError> {
    Ok(Deferred::wrap(open(url).await?, commit_interval))
}

/// The store a URL names, writing every end before it answers.
pub async fn open(url: &str) -> Result<Arc<dyn Store>, StoreError> {
    if url.starts_with("sqlite:") {
        Ok(Arc::new(SqliteStore::connect(url).await?))
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Arc::new(PgStore::connect(url).await?))
    } else {
        // Only the scheme is echoed: the rest of a URL may hold a password.
        let scheme = url.split_once(':').map_or("(none)", |(scheme, _)| scheme);
        Err(StoreError::Other(format!(
            "unsupported store URL scheme '{scheme}': expected sqlite://, postgres:// or postgresql://"
        )))
    }
}

/// `value` as every backend can keep it: PostgreSQL's jsonb cannot hold
/// the code point U+0000, so a NUL in any string or key of a tool's
/// result (a tool may print anything) becomes U+FFFD, on both backends.
pub fn keepable(value: Value) -> Value {
    match value {
        Value::String(s) => Value::String(keepable_text(s)),
        Value::Array(items) => Value::Array(items.into_iter().map(keepable).collect()),
        Value::Object(fields) => Value::Object(
            fields
                .into_iter()
                .map(|(k, v)| (keepable_text(k), keepable(v)))
                .collect(),
        ),
        other => other,
    }
}

/// A text as [`keepable`] keeps it.
pub fn keepable_text(s: String) -> String {
    if s.contains('\0') {
        s.replace('\0', "\u{fffd}")
    } else {
        s
    }
}

/// A run status as the database holds it.
fn parse_run_status(s: &str) -> Result<RunStatus, StoreError> {
    RunStatus::parse(s).ok_or_else(|| StoreError::Other(format!("unknown run status '{s}' in the database")))
}

/// Whether a name filter holds a NUL, which no recorded name does.
fn names_hold_nul(names: &[&Option<String>]) -> bool {
    names.iter().copied().flatten().any(|name| name.contains('\0'))
}

/// The page size actually used: never zero, never unbounded.
fn page_size(limit: u32) -> u32 {
    limit.clamp(1, RunFilter::MAX_LIMIT)
}

/// A position in a keyset order: the last row of a page, by its time (a
/// run's creation, a request's decision or creation) and id. The order
/// (newest or oldest first) is the listing's; the cursor only says where
/// its last page ended.
///
/// Rendered as `<time in µs since the epoch>_<id>`, which is URL-safe
/// as it stands and means the same to both backends.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Cursor {
    at: DateTime<Utc>,
    id: Uuid,
}

impl Cursor {
    fn after(run: &Run) -> Self {
        Self {
            at: run.created_at,
            id: run.id,
        }
    }

    fn after_decision(d: &DecidedApproval) -> Self {
        Self {
            at: d.approval.decided_at.unwrap_or(d.approval.created_at),
            id: d.approval.id,
        }
    }

    fn after_request(a: &Approval) -> Self {
        Self {
            at: a.created_at,
            id: a.id,
        }
    }

    fn encode(self) -> String {
        format!("{}_{}", self.at.timestamp_micros(), self.id.as_simple())
    }

    fn decode(s: &str) -> Result<Self, StoreError> {
        let (micros, id) = s.split_once('_').ok_or(StoreError::InvalidCursor)?;
        let micros: i64 = micros.parse().map_err(|_| StoreError::InvalidCursor)?;
        let at = DateTime::from_timestamp_micros(micros).ok_or(StoreError::InvalidCursor)?;
        let id = Uuid::try_parse(id).map_err(|_| StoreError::InvalidCursor)?;
        Ok(Self { at, id })
    }
}

/// Cuts up to `limit + 1` rows to a page: the extra row only says that
/// there is a next page, which starts after the page's last row.
fn next_cursor<T>(rows: &mut Vec<T>, limit: u32, cursor: impl Fn(&T) -> Cursor) -> Option<String> {
    let limit = limit as usize;
    if rows.len() <= limit {
        return None;
    }
    rows.truncate(limit);
    rows.last().map(|row| cursor(row).encode())
}

/// Builds a page of runs (see [`next_cursor`]).
fn into_page(mut runs: Vec<Run>, limit: u32) -> RunPage {
    let next_cursor = next_cursor(&mut runs, limit, Cursor::after);
    RunPage { runs, next_cursor }
}

/// Builds a page of decisions (see [`next_cursor`]).
fn into_decision_page(mut decisions: Vec<DecidedApproval>, limit: u32) -> DecisionPage {
    let next_cursor = next_cursor(&mut decisions, limit, Cursor::after_decision);
    DecisionPage {
        decisions,
        next_cursor,
    }
}

/// Builds a page of approval requests (see [`next_cursor`]).
fn into_approval_page(mut approvals: Vec<Approval>, limit: u32) -> ApprovalPage {
    let next_cursor = next_cursor(&mut approvals, limit, Cursor::after_request);
    ApprovalPage {
        approvals,
        next_cursor,
    }
}

/// Refuses a `NewRun` in a state the store would never create one in.
fn check_new(run: &NewRun) -> Result<(), StoreError> {
    let started = run.started_at.is_some() && run.instance.is_some();
    match run.status {
        RunStatus::Queued | RunStatus::PendingApproval | RunStatus::Denied if run.started_at.is_none() => {
            Ok(())
        }
        RunStatus::Running if started => Ok(()),
        RunStatus::Running => Err(StoreError::Other(
            "a run recorded as running needs started_at and instance".to_owned(),
        )),
        other => Err(StoreError::Other(format!(
            "a new run must be queued, pending_approval, running or denied, not {other}"
        ))),
    }
}

/// Refuses a pending pair that does not belong together.
fn check_pending(run: &NewRun, approval: &NewApproval) -> Result<(), StoreError> {
    check_new(run)?;
    if run.status != RunStatus::PendingApproval || run.approval_id != Some(approval.id) {
        return Err(StoreError::Other(
            "a run held for approval must be pending_approval and name its approval".to_owned(),
        ));
    }
    Ok(())
}

/// When a new run in `status` counts as finished: a denied call ends as it
/// is recorded.
fn finished_at_insert(run: &NewRun) -> Option<DateTime<Utc>> {
    (run.status == RunStatus::Denied).then_some(run.created_at)
}

/// The size of each store's channel of run changes. A receiver that falls
/// this far behind is told it lagged and re-reads.
const CHANGES_CAPACITY: usize = 1024;

/// The most approval requests listed at once.
pub const MAX_APPROVALS: u32 = 500;

/// The most grants [`Store::list_grants`] gives at once.
pub const MAX_GRANTS_LISTED: usize = 1000;

#[cfg(test)]
mod grants_listed {
    #[test]
    fn the_sql_limit_is_the_constant() {
        assert_eq!(max_grants_listed!(), super::MAX_GRANTS_LISTED.to_string());
    }
}

/// Refuses to "finish" a run into a live status.
fn check_final(status: RunStatus) -> Result<(), StoreError> {
    if status.is_final() {
        Ok(())
    } else {
        Err(StoreError::Other(format!("{status} is not a final status")))
    }
}

/// The one mapping from sqlx's errors to ours. Which database errors mean
/// "cannot reach or use the database right now" depends on the backend
/// that raised them.
impl From<sqlx::Error> for StoreError {
    fn from(err: sqlx::Error) -> Self {
        match err {
            sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::WorkerCrashed => StoreError::Unavailable(err.to_string()),
            sqlx::Error::Database(ref db) if db.is_unique_violation() => {
                StoreError::Conflict(db.message().to_owned())
            }
            sqlx::Error::Database(ref db) if transient(db.as_ref()) => {
                StoreError::Unavailable(err.to_string())
            }
            other => StoreError::Other(other.to_string()),
        }
    }
}

fn transient(db: &dyn sqlx::error::DatabaseError) -> bool {
    if db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>().is_some() {
        postgres::transient(db)
    } else {
        sqlite::transient(db)
    }
}

/// Migration failures: unreachable is still `Unavailable`, anything else
/// (a changed or broken migration) is `Other`.
impl From<sqlx::migrate::MigrateError> for StoreError {
    fn from(err: sqlx::migrate::MigrateError) -> Self {
        match err {
            sqlx::migrate::MigrateError::Execute(err)
            | sqlx::migrate::MigrateError::ExecuteMigration(err, _) => err.into(),
            other => StoreError::Other(format!("migration failed: {other}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_spellings_round_trip_and_match_serde() {
        for status in RunStatus::ALL {
            assert_eq!(RunStatus::parse(status.as_str()), Some(status));
            assert_eq!(
                serde_json::to_value(status).unwrap(),
                Value::from(status.as_str())
            );
        }
        assert_eq!(RunStatus::parse("Running"), None);
        let live: Vec<_> = RunStatus::ALL.into_iter().filter(|s| !s.is_final()).collect();
        assert_eq!(
            live,
            [RunStatus::PendingApproval, RunStatus::Queued, RunStatus::Running]
        );
    }

    #[test]
    fn cursor_round_trips_and_rejects_garbage() {
        let cursor = Cursor {
            at: DateTime::from_timestamp_micros(1_732_249_260_123_456).unwrap(),
            id: Uuid::now_v7(),
        };
        assert_eq!(Cursor::decode(&cursor.encode()).unwrap(), cursor);
        for bad in [
            "",
            "x",
            "12_",
            "_0193",
            "abc_0193",
            &format!("1_{}x", cursor.id.as_simple()),
        ] {
            assert!(
                matches!(Cursor::decode(bad), Err(StoreError::InvalidCursor)),
                "{bad}"
            );
        }
    }

    #[test]
    fn page_size_is_bounded() {
        assert_eq!(page_size(0), 1);
        assert_eq!(page_size(20), 20);
        assert_eq!(page_size(100_000), 500);
    }
}
