//! The run log: one record per call of a tool, from its request to its
//! end (`docs/design.md` §5), as [`RunLog`] keeps it, and what retention
//! deletes of it ([`Pruning`]).

use super::StoreError;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;
use tokio::sync::broadcast;
use uuid::Uuid;

/// The audit log of runs, as the pipeline records calls and reads them
/// back, held as `Arc<dyn RunLog>`. [`super::Deferred`] wraps a backend's
/// to answer before a run's end commits.
#[async_trait::async_trait]
pub trait RunLog: Send + Sync + 'static {
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

    /// Ends a live run as [`RunLog::finish_run`] does, but may answer before
    /// the end commits (`docs/design.md` §5): this log's own reads show
    /// the end at once, and [`RunLog::flush`] waits for its commit. A log
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

    /// Ends each of several live runs as [`RunLog::finish_run`] does, in as
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

    /// Waits until every end given to [`RunLog::finish_run_soon`] so far
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

    /// The run `requested_by` made with idempotency key `key`, if it was
    /// made at `since` or later. A run made earlier gives the key up (it
    /// is cleared from the run), so that the key can be used again.
    async fn run_by_key(
        &self,
        requested_by: Option<&str>,
        key: &str,
        since: DateTime<Utc>,
    ) -> Result<Option<Run>, StoreError>;

    /// Start-up recovery: every run still `running`, or `queued` after an
    /// approval claimed it for an instance (of this instance, or of any
    /// instance when `instance` is `None`), was orphaned by a crash and
    /// becomes `interrupted`, finished at `at`. Returns how many.
    async fn interrupt_running(&self, instance: Option<&str>, at: DateTime<Utc>) -> Result<u64, StoreError>;
}

/// What retention deletes of the run log (`docs/design.md` §5,
/// `crate::retention`): final runs past the cutoff, with what names them.
/// Not through [`super::Deferred`]: a run whose end is held there is
/// still live in the database, and no live run is ever pruned.
#[async_trait::async_trait]
pub trait Pruning: Send + Sync + 'static {
    /// Where the `n`th newest run stands (1: the newest), in the order of
    /// [`RunLog::list_runs`]; `None` when there are fewer runs. Retention by
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
    /// [`RunLog::run_by_key`]): a second run with one key is a `Conflict`.
    pub idempotency_key: Option<String>,
    /// The session the call named, if any.
    pub session: Option<Uuid>,
}

/// How one run ended, for [`RunLog::finish_runs`].
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
    pub(super) fn matches_nothing(&self) -> bool {
        super::names_hold_nul(&[&self.skill, &self.tool])
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
/// [`Pruning::prune_runs`]).
#[async_trait::async_trait]
pub trait PruneExport: Send + Sync {
    /// Keeps `runs` durably (written and synced) before returning.
    async fn export(&self, runs: &[Run]) -> std::io::Result<()>;
}

/// An export error as the store reports it: nothing was deleted.
pub(super) fn export_failed(err: &std::io::Error) -> StoreError {
    StoreError::Unavailable(format!("cannot export the runs to prune: {err}"))
}

/// A run status as the database holds it.
pub(super) fn parse_run_status(s: &str) -> Result<RunStatus, StoreError> {
    RunStatus::parse(s).ok_or_else(|| StoreError::Other(format!("unknown run status '{s}' in the database")))
}

/// Refuses a `NewRun` in a state the store would never create one in.
pub(super) fn check_new(run: &NewRun) -> Result<(), StoreError> {
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

/// When a new run in `status` counts as finished: a denied call ends as it
/// is recorded.
pub(super) fn finished_at_insert(run: &NewRun) -> Option<DateTime<Utc>> {
    (run.status == RunStatus::Denied).then_some(run.created_at)
}

/// Refuses to "finish" a run into a live status.
pub(super) fn check_final(status: RunStatus) -> Result<(), StoreError> {
    if status.is_final() {
        Ok(())
    } else {
        Err(StoreError::Other(format!("{status} is not a final status")))
    }
}
