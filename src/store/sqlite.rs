//! [`Store`] on one SQLite file: the single-machine default.
//!
//! The file runs in WAL mode so readers (`GET /runs`) never block the writer.
//! The writes every call makes go through [`writer`] (rusqlite, on the
//! calling thread); the rest through sqlx, with a busy timeout so that
//! concurrent writers wait for each other instead of failing. Every state
//! change holds SQLite's write lock from its first statement (an immediate
//! transaction, or a statement that writes), so a conditional update can
//! never act on a stale read.

mod sessions;
mod writer;

use super::approvals::{parse_approval_status, parse_grant_decision, parse_scope};
use super::{
    Approval, ApprovalFilter, ApprovalPage, ApprovalStatus, Attempt, CachedIndex, Cursor, Decide,
    DecidedApproval, DecisionFilter, DecisionPage, Grant, NewApproval, NewNotification, NewRun, NewSession,
    Notification, NotificationStatus, PolicyFacts, PruneExport, Run, RunFilter, RunPage, RunPosition,
    RunStatus, SameCall, SessionRecord, SkillApproval, Store, StoreError, TooMany, Undecidable,
};
use chrono::{DateTime, Datelike, Utc};
use serde_json::Value;
use sqlx::error::DatabaseError;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow, SqliteSynchronous,
};
use sqlx::{Connection as _, QueryBuilder, Row, Sqlite, SqliteConnection};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::broadcast;
use uuid::Uuid;
use writer::{WriteError, Writer};

/// Every column of `runs`, in the order [`run_from_row`] reads them; a macro
/// so it can be spliced into `concat!` and the queries stay `&'static str`.
macro_rules! run_columns {
    () => {
        "id, skill, tool, skill_hash, arguments, argv, cwd, status, requested_by, approval_id, \
         created_at, started_at, finished_at, result, pgid, instance, mode, request_id, note, skill_version, \
         session_id"
    };
}

/// Every column of `approvals`, in the order [`approval_from_row`] reads them.
macro_rules! approval_columns {
    () => {
        "id, run_id, skill, tool, description, trust, warning, arguments, argv, cwd, skill_hash, status, \
         scope, requested_by, decided_by, note, created_at, decided_at, expires_at, mode, caller_left_at, \
         permissions"
    };
}

/// Every column of `grants`, in the order [`grant_from_row`] reads them.
macro_rules! grant_columns {
    () => {
        "id, skill, tool, skill_hash, decision, created_by, created_at"
    };
}

/// Every column of `notifications` [`notification_from_row`] reads.
macro_rules! notification_columns {
    () => {
        "id, event, approval_id, target, payload, status, attempts, last_status, last_error, \
         created_at, next_attempt_at, delivered_at"
    };
}

/// SQLite takes the write lock at the first write of a deferred
/// transaction, which can fail with SQLITE_BUSY when another process holds
/// it; an immediate one takes it at the start and waits (busy timeout).
const BEGIN: &str = "begin immediate";

/// Inserts a new run.
const INSERT_RUN: &str = concat!(
    "insert into runs (id, skill, tool, skill_hash, arguments, argv, cwd, status, requested_by, \
     approval_id, created_at, started_at, finished_at, instance, mode, request_id, skill_version, \
     idempotency_key, session_id) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) returning ",
    run_columns!()
);
/// Records a pending request, written together with its run.
const INSERT_REQUEST: &str = "insert into approvals (id, run_id, skill, tool, description, trust, warning, \
     arguments, argv, cwd, skill_hash, status, requested_by, created_at, expires_at, mode, permissions, \
     call_digest) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?, ?)";
/// Starts a queued run: the statement behind `start_run`.
const START_QUEUED: &str = concat!(
    "update runs set status = 'running', started_at = ?, pgid = ?, instance = ? \
     where id = ? and status = 'queued' returning ",
    run_columns!()
);
/// Ends a live run: the statement behind `finish_run`.
const FINISH_LIVE: &str = concat!(
    "update runs set status = ?, result = ?, finished_at = ? \
     where id = ? and status in ('pending_approval', 'queued', 'running') returning ",
    run_columns!()
);
/// Ends a run that has not started: the statement behind `end_waiting`.
const FINISH_WAITING: &str = concat!(
    "update runs set status = ?, result = ?, finished_at = ? \
     where id = ? and status in ('pending_approval', 'queued') returning ",
    run_columns!()
);
/// Records a grant, replacing the one for the same skill, tool and hash.
const UPSERT_GRANT: &str = "insert into grants (id, skill, tool, skill_hash, decision, created_by, created_at) \
     values (?, ?, ?, ?, ?, ?, ?) \
     on conflict (skill, tool, skill_hash) do update set id = excluded.id, \
     decision = excluded.decision, created_by = excluded.created_by, created_at = excluded.created_at";

/// The oldest final runs before a position: one batch of retention. The
/// listing index `runs_created` gives them in order; live runs in the way
/// are few (calls in flight, requests not yet expired).
const DUE_FOR_PRUNING: &str = concat!(
    "select ",
    run_columns!(),
    " from runs where (created_at, id) < (?, ?) \
     and status not in ('pending_approval', 'queued', 'running') order by created_at, id limit ?"
);
/// One batch of retention, each statement given the runs' ids as a JSON
/// array: the approved versions their requests stand for are remembered,
/// then the requests' deliveries, the requests (which name their runs) and
/// the runs go. The last statement checks again that a run is final.
const PRUNE: [&str; 4] = [
    "insert or ignore into approved_versions (skill, skill_hash) select skill, skill_hash from approvals \
     where run_id in (select value from json_each(?1)) and status = 'approved'",
    "delete from notifications where approval_id in \
     (select id from approvals where run_id in (select value from json_each(?1)))",
    "delete from approvals where run_id in (select value from json_each(?1))",
    "delete from runs where id in (select value from json_each(?1)) \
     and status not in ('pending_approval', 'queued', 'running')",
];

/// With a batch of retention: the settled webhook deliveries of activation
/// requests (which hold no run) older than the batch's cutoff.
const PRUNE_ACTIVATION_DELIVERIES: &str = "delete from notifications where event = 'activation.requested' \
     and status <> 'pending' and created_at < ?1";

/// How long a writer waits for another's lock before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// SQLite has one writer at a time. With several connections, writers that
/// collide sleep in SQLite's busy handler (1, 2, 5, 10 ms …); one connection
/// makes them queue in the pool instead, which is faster under concurrent
/// calls. Queries are short, so readers lose little by waiting too.
const MAX_CONNECTIONS: u32 = 1;
/// How long a request waits for a free connection before the store counts as
/// unavailable (and the invocation fails closed).
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// How often the background checkpointer moves the WAL into the database.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(500);
/// The WAL file is cut back to this size (16 MiB) after a checkpoint
/// resets it.
const WAL_SIZE_LIMIT: &str = "16777216";

/// The SQLite implementation of [`Store`].
#[derive(Debug, Clone)]
pub struct SqliteStore {
    /// Everything but the hot path: reads, approvals, grants, notifications.
    pool: SqlitePool,
    /// The writes every call makes: a run's insert, start, pgid and end.
    writer: Writer,
    /// Checkpoints off the request path; stops with the last clone.
    _checkpointer: Option<Arc<Checkpointer>>,
    /// Run status changes made through this store. One process owns the
    /// file, so its own writes are all the changes there are.
    changes: broadcast::Sender<Uuid>,
    /// Policy facts already read, so a call that runs at once costs the
    /// single-writer log two statements instead of three. Exact because
    /// one process owns the file (several instances share PostgreSQL,
    /// never SQLite): every write that can change a fact goes through this
    /// store and clears the cache.
    facts: Arc<Mutex<FactsCache>>,
    /// Held through a batch of retention, from its read to its delete, so
    /// that two prunes at once never export the same run twice (the
    /// batch is read outside the write lock).
    pruning: Arc<tokio::sync::Mutex<()>>,
}

/// See [`SqliteStore::facts`]. `generation` counts clears, so a read that
/// raced a clear does not put its stale answer back.
#[derive(Debug, Default)]
struct FactsCache {
    generation: u64,
    entries: HashMap<(String, String, String), PolicyFacts>,
}

/// Past this many entries the cache starts over rather than grow.
const FACTS_CACHE_MAX: usize = 10_000;

impl SqliteStore {
    /// Opens (creating the file and its directory if missing) the database a
    /// `sqlite://path` or `sqlite:path` URL names, and applies the
    /// migrations in `migrations/sqlite`.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let options = SqliteConnectOptions::from_str(url)
            .map_err(|err| StoreError::Other(format!("invalid SQLite URL: {err}")))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(BUSY_TIMEOUT)
            .foreign_keys(true);

        let in_memory = url.contains(":memory:") || url.contains("mode=memory");
        if !in_memory && let Some(dir) = options.get_filename().parent() {
            create_dir(dir)?;
        }

        // No ping before each use: the connection is to a local file and
        // cannot go stale, and the ping is a round trip to sqlx's worker
        // thread that doubled the cost of every statement.
        let mut pool = SqlitePoolOptions::new()
            .test_before_acquire(false)
            .max_connections(MAX_CONNECTIONS)
            .acquire_timeout(ACQUIRE_TIMEOUT);
        if in_memory {
            // An in-memory database lives as long as one of its connections:
            // keep one open for the life of the pool.
            pool = pool.min_connections(1).idle_timeout(None).max_lifetime(None);
        }
        // The request path never checkpoints: an automatic checkpoint runs
        // in whichever statement's commit crosses the threshold and syncs
        // the database file there, which was the 100–150 ms tail of about
        // one call in a hundred. A task on its own connection does it.
        let options = options
            .pragma("wal_autocheckpoint", "0")
            .pragma("journal_size_limit", WAL_SIZE_LIMIT);
        let pool = pool.connect_with(options.clone()).await?;

        sqlx::migrate!("./migrations/sqlite").run(&pool).await?;
        let writer = Writer::open(options.get_filename(), in_memory)?;
        let checkpointer = if in_memory {
            None
        } else {
            Some(Arc::new(Checkpointer::start(options).await?))
        };
        Ok(Self {
            pool,
            writer,
            _checkpointer: checkpointer,
            changes: broadcast::channel(super::CHANGES_CAPACITY).0,
            facts: Arc::default(),
            pruning: Arc::default(),
        })
    }

    fn facts_cache(&self) -> std::sync::MutexGuard<'_, FactsCache> {
        self.facts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// After a write that may change a grant or a first-run approval.
    fn forget_facts(&self) {
        let mut cache = self.facts_cache();
        cache.generation += 1;
        cache.entries.clear();
    }

    fn changed(&self, id: Uuid) {
        // Nobody waiting is fine.
        let _ = self.changes.send(id);
    }
}

/// The background checkpointer: every [`CHECKPOINT_EVERY`], a passive
/// checkpoint on a connection of its own, which copies what the WAL holds
/// into the database (and syncs it) without blocking the writer. Once all
/// of it is copied, the next write starts the WAL over, so it stays small.
/// Under writes without a pause the passive checkpoint never catches up
/// with the writer and the WAL would only grow; past [`WAL_RESTART_FRAMES`]
/// a restarting checkpoint then takes the write lock for the frames the
/// passive one left (few: it just ran), so the next write starts over.
#[derive(Debug)]
struct Checkpointer(tokio::task::JoinHandle<()>);

/// The WAL length, in frames (pages), past which a checkpoint makes the
/// writer wait: 32768 frames of 4 KiB, 128 MiB. The wait (copying what
/// the passive checkpoint left, then syncing) is paid once per that much
/// writing, under 1 call in 500 at c=8.
const WAL_RESTART_FRAMES: i64 = 32768;

impl Checkpointer {
    async fn start(options: SqliteConnectOptions) -> Result<Self, StoreError> {
        let mut conn = SqliteConnection::connect_with(&options).await?;
        Ok(Self(tokio::spawn(async move {
            let mut tick = tokio::time::interval(CHECKPOINT_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                // (busy, frames in the WAL, frames copied)
                let passive = sqlx::query_as::<_, (i64, i64, i64)>("pragma wal_checkpoint(passive)")
                    .fetch_one(&mut conn)
                    .await;
                let outcome = match passive {
                    Ok((_, frames, _)) if frames > WAL_RESTART_FRAMES => {
                        sqlx::query("pragma wal_checkpoint(restart)")
                            .execute(&mut conn)
                            .await
                            .map(drop)
                    }
                    other => other.map(drop),
                };
                if let Err(e) = outcome {
                    tracing::warn!(error = %e, "cannot checkpoint the SQLite run log");
                }
            }
        })))
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Claims the SQLite database a URL names for one serving process, or says
/// which other process has it. Held (the returned file open) for the life
/// of `skilld serve`; `None` for an in-memory database.
///
/// One server per file is what makes SQLite's state exact: start-up
/// recovery marks every `running` run interrupted, and the policy cache
/// and the change notifications see only this process's writes. A second
/// server on the same file would interrupt the first's live runs and miss
/// its grants, so it is refused; several instances share PostgreSQL.
/// `skilld run` does not claim the file: it neither recovers nor caches.
pub fn claim_for_serving(url: &str) -> Result<Option<nix::fcntl::Flock<std::fs::File>>, StoreError> {
    let Some((db, path)) = serve_lock(url)? else {
        return Ok(None);
    };
    if let Some(dir) = db.parent() {
        create_dir(dir)?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|err| StoreError::Unavailable(format!("cannot open {}: {err}", path.display())))?;
    match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(Some(lock)),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Err(StoreError::Conflict(format!(
            "another skilld serve already uses {}; give each server its own --data-dir or --database, \
             or share one PostgreSQL between several",
            db.display()
        ))),
        Err((_, err)) => Err(StoreError::Unavailable(format!(
            "cannot lock {}: {err}",
            path.display()
        ))),
    }
}

/// The database file a SQLite URL names and the lock file beside it that
/// a serving process holds; `None` for an in-memory database.
fn serve_lock(url: &str) -> Result<Option<(PathBuf, PathBuf)>, StoreError> {
    let options = SqliteConnectOptions::from_str(url)
        .map_err(|err| StoreError::Other(format!("invalid SQLite URL: {err}")))?;
    if url.contains(":memory:") || url.contains("mode=memory") {
        return Ok(None);
    }
    let db = options.get_filename().to_path_buf();
    let mut name = db.as_os_str().to_owned();
    name.push(".serve-lock");
    Ok(Some((db, PathBuf::from(name))))
}

/// Writes into the claim where people reach the server holding it, for
/// `skilld mcp` sessions on the same run log to point them there.
pub fn announce_serving(claim: &nix::fcntl::Flock<std::fs::File>, url: &str) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    claim.set_len(0)?;
    claim.write_all_at(format!("{url}\n").as_bytes(), 0)
}

/// Whether a `skilld serve` serves a run log now, as far as this machine
/// can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Serving {
    /// Not a SQLite file: a shared PostgreSQL does not say.
    Unknown,
    Nobody,
    /// One does, reached at the address it announced, if it did.
    At(Option<String>),
}

/// Who serves the run log at `url`: a SQLite file's claim is held by its
/// server. The probe takes the lock shared for an instant, so a server
/// starting in that same instant would be told the file is taken; it is
/// made only for a call held for a person.
pub fn who_serves(url: &str) -> Serving {
    if !url.starts_with("sqlite:") {
        return Serving::Unknown;
    }
    let Ok(Some((_, path))) = serve_lock(url) else {
        return Serving::Unknown;
    };
    let Ok(file) = std::fs::File::open(&path) else {
        return Serving::Nobody;
    };
    match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockSharedNonblock) {
        Ok(_free) => Serving::Nobody,
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
            let said = std::fs::read_to_string(&path).unwrap_or_default();
            let url = said.trim();
            let valid = url.starts_with("http://") || url.starts_with("https://");
            Serving::At(valid.then(|| url.to_owned()))
        }
        Err(_) => Serving::Unknown,
    }
}

/// The files a `sqlite:` URL keeps the run log in: the database and the
/// journal, shared memory and lock files beside it. None for an in-memory
/// database or a URL that is not SQLite's.
pub fn files_of(url: &str) -> Vec<PathBuf> {
    if !url.starts_with("sqlite:") || url.contains(":memory:") || url.contains("mode=memory") {
        return Vec::new();
    }
    let Ok(options) = SqliteConnectOptions::from_str(url) else {
        return Vec::new();
    };
    let db = options.get_filename();
    let beside = |suffix: &str| {
        let mut name = db.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    };
    let mut files = vec![db.to_path_buf()];
    files.extend(["-wal", "-shm", "-journal", ".serve-lock"].map(beside));
    files
}

/// Creates the database's directory, so a fresh `--store sqlite://…` works
/// without a manual `mkdir`.
fn create_dir(dir: &Path) -> Result<(), StoreError> {
    if dir.as_os_str().is_empty() {
        return Ok(());
    }
    std::fs::create_dir_all(dir)
        .map_err(|err| StoreError::Unavailable(format!("cannot create {}: {err}", dir.display())))
}

#[async_trait::async_trait]
impl Store for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("select 1").execute(&self.pool).await?;
        Ok(())
    }

    fn changes(&self) -> broadcast::Receiver<Uuid> {
        self.changes.subscribe()
    }

    async fn insert_run(&self, run: NewRun) -> Result<Run, StoreError> {
        super::check_new(&run)?;
        let id = run.id;
        let run = self.writer.write(move |conn| insert_run_on(conn, &run)).await?;
        self.changed(id);
        Ok(run)
    }

    async fn insert_pending(&self, run: NewRun, approval: NewApproval) -> Result<(), StoreError> {
        super::check_pending(&run, &approval)?;
        let id = run.id;
        self.writer
            // One write: the run and its request stand or fall together.
            .write(move |conn| {
                insert_run_on(conn, &run)?;
                insert_request_on(conn, &run, &approval)
            })
            .await?;
        self.changed(id);
        Ok(())
    }

    async fn policy_facts(
        &self,
        skill: &str,
        tool: &str,
        skill_hash: &str,
    ) -> Result<PolicyFacts, StoreError> {
        let key = (skill.to_owned(), tool.to_owned(), skill_hash.to_owned());
        let generation = {
            let cache = self.facts_cache();
            if let Some(facts) = cache.entries.get(&key) {
                return Ok(facts.clone());
            }
            cache.generation
        };
        let row = sqlx::query(
            "select g.decision as grant_decision, g.created_by as grant_by, \
             (exists (select 1 from approvals where skill = ? and skill_hash = ? and status = 'approved') \
              or exists (select 1 from grants where skill = ? and skill_hash = ? and decision = 'allow') \
              or exists (select 1 from approved_versions where skill = ? and skill_hash = ?)) as approved \
             from (select 1) left join grants g on g.skill = ? and g.tool = ? and g.skill_hash = ?",
        )
        .bind(skill)
        .bind(skill_hash)
        .bind(skill)
        .bind(skill_hash)
        .bind(skill)
        .bind(skill_hash)
        .bind(skill)
        .bind(tool)
        .bind(skill_hash)
        .fetch_one(&self.pool)
        .await?;
        let facts = PolicyFacts {
            grant: get::<Option<String>>(&row, "grant_decision")?
                .as_deref()
                .map(parse_grant_decision)
                .transpose()?,
            grant_by: get(&row, "grant_by")?,
            hash_approved: get::<bool>(&row, "approved")?,
        };
        let mut cache = self.facts_cache();
        if cache.generation == generation {
            if cache.entries.len() >= FACTS_CACHE_MAX {
                cache.entries.clear();
            }
            cache.entries.insert(key, facts.clone());
        }
        Ok(facts)
    }

    async fn get_approval(&self, id: Uuid) -> Result<Approval, StoreError> {
        let row = sqlx::query(concat!(
            "select ",
            approval_columns!(),
            " from approvals where id = ?"
        ))
        .bind(id.to_string())
        .fetch_optional(&self.pool)
        .await?
        .ok_or(StoreError::NotFound { what: "approval", id })?;
        approval_from_row(&row)
    }

    async fn approval_of_run(&self, run_id: Uuid) -> Result<Option<Approval>, StoreError> {
        let row = sqlx::query(concat!(
            "select ",
            approval_columns!(),
            " from approvals where run_id = ?"
        ))
        .bind(run_id.to_string())
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(approval_from_row).transpose()
    }

    async fn list_decisions(&self, filter: DecisionFilter) -> Result<DecisionPage, StoreError> {
        let limit = filter.limit.clamp(1, super::MAX_APPROVALS);
        let cursor = filter.cursor.as_deref().map(Cursor::decode).transpose()?;
        if filter.matches_nothing() {
            return Ok(super::into_decision_page(Vec::new(), limit));
        }
        let mut query = QueryBuilder::<Sqlite>::new(concat!(
            "select ",
            approval_columns!(),
            ", (select status from runs where runs.id = approvals.run_id) as run_status \
             from approvals where status <> 'pending'"
        ));
        if let Some(skill) = filter.skill {
            query.push(" and skill = ").push_bind(skill);
        }
        if let Some(tool) = filter.tool {
            query.push(" and tool = ").push_bind(tool);
        }
        if let Some(cursor) = cursor {
            query
                .push(" and (decided_at, id) < (")
                .push_bind(time_text(cursor.at)?)
                .push(", ")
                .push_bind(cursor.id.to_string())
                .push(")");
        }
        query
            .push(" order by decided_at desc, id desc limit ")
            .push_bind(i64::from(limit) + 1);
        let rows = query.build().fetch_all(&self.pool).await?;
        let decisions = rows.iter().map(decided_from_row).collect::<Result<Vec<_>, _>>()?;
        Ok(super::into_decision_page(decisions, limit))
    }

    async fn enqueue_notification(&self, n: NewNotification) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "insert into notifications (id, event, approval_id, target, payload, status, created_at, \
             next_attempt_at) values (?, ?, ?, ?, ?, 'pending', ?, ?) \
             on conflict (event, approval_id, target) do nothing",
        )
        .bind(n.id.to_string())
        .bind(&n.event)
        .bind(n.approval_id.to_string())
        .bind(&n.target)
        .bind(json_text(&super::keepable(n.payload))?)
        .bind(time_text(n.created_at)?)
        .bind(time_text(n.created_at)?)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn claim_notifications(
        &self,
        instance: &str,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        max: u32,
    ) -> Result<Vec<Notification>, StoreError> {
        let now = time_text(now)?;
        let rows = sqlx::query(concat!(
            "update notifications set claimed_by = ?, claimed_until = ?, attempts = attempts + 1 \
             where id in (select id from notifications where status = 'pending' and next_attempt_at <= ? \
             and (claimed_until is null or claimed_until <= ?) order by next_attempt_at limit ?) returning ",
            notification_columns!()
        ))
        .bind(instance)
        .bind(time_text(lease_until)?)
        .bind(&now)
        .bind(&now)
        .bind(i64::from(max))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(notification_from_row).collect()
    }

    async fn record_attempt(
        &self,
        id: Uuid,
        instance: &str,
        attempt: Attempt,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let next = match &attempt {
            Attempt::Retry { next, .. } => *next,
            _ => at,
        };
        let delivered = matches!(attempt, Attempt::Delivered { .. }).then_some(at);
        sqlx::query(
            "update notifications set status = ?, last_status = ?, last_error = ?, next_attempt_at = ?, \
             delivered_at = ?, claimed_by = null, claimed_until = null where id = ? and claimed_by = ?",
        )
        .bind(attempt.status().as_str())
        .bind(attempt.http_status())
        .bind(attempt.error().map(|e| super::keepable_text(e.to_owned())))
        .bind(time_text(next)?)
        .bind(delivered.map(time_text).transpose()?)
        .bind(id.to_string())
        .bind(instance)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn list_notifications(
        &self,
        status: Option<NotificationStatus>,
        limit: u32,
    ) -> Result<Vec<Notification>, StoreError> {
        let mut query =
            QueryBuilder::<Sqlite>::new(concat!("select ", notification_columns!(), " from notifications"));
        if let Some(status) = status {
            query.push(" where status = ").push_bind(status.as_str());
        }
        query
            .push(" order by created_at desc, id desc limit ")
            .push_bind(i64::from(limit.clamp(1, super::MAX_APPROVALS)));
        let rows = query.build().fetch_all(&self.pool).await?;
        rows.iter().map(notification_from_row).collect()
    }

    async fn list_approvals(&self, filter: ApprovalFilter) -> Result<ApprovalPage, StoreError> {
        let limit = super::page_size(filter.limit);
        let cursor = filter.cursor.as_deref().map(Cursor::decode).transpose()?;
        let mut query = QueryBuilder::<Sqlite>::new(concat!(
            "select ",
            approval_columns!(),
            " from approvals where true"
        ));
        if let Some(status) = filter.status {
            query.push(" and status = ").push_bind(status.as_str());
        }
        if let Some(cursor) = cursor {
            query
                .push(" and (created_at, id) > (")
                .push_bind(time_text(cursor.at)?)
                .push(", ")
                .push_bind(cursor.id.to_string())
                .push(")");
        }
        query
            .push(" order by created_at, id limit ")
            .push_bind(i64::from(limit) + 1);
        let rows = query.build().fetch_all(&self.pool).await?;
        let approvals = rows
            .iter()
            .map(approval_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(super::into_approval_page(approvals, limit))
    }

    async fn decide(&self, d: Decide) -> Result<Result<Approval, Undecidable>, StoreError> {
        let at = time_text(d.at)?;
        let status = if d.approve {
            ApprovalStatus::Approved
        } else {
            ApprovalStatus::Denied
        };
        let mut tx = self.pool.begin_with(BEGIN).await?;
        let row = sqlx::query(concat!(
            "update approvals set status = ?, scope = ?, decided_by = ?, note = ?, decided_at = ? \
             where id = ? and status = 'pending' and expires_at > ? returning ",
            approval_columns!()
        ))
        .bind(status.as_str())
        .bind(d.scope.as_str())
        .bind(&d.decided_by)
        .bind(&d.note)
        .bind(&at)
        .bind(d.approval_id.to_string())
        .bind(&at)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else {
            let current = sqlx::query(concat!(
                "select ",
                approval_columns!(),
                " from approvals where id = ?"
            ))
            .bind(d.approval_id.to_string())
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(StoreError::NotFound {
                what: "approval",
                id: d.approval_id,
            })?;
            let current = approval_from_row(&current)?;
            if current.status != ApprovalStatus::Pending {
                return Ok(Err(Undecidable::AlreadyDecided(current.status)));
            }
            expire_on(&mut tx, current.run_id, &at).await?;
            tx.commit().await?;
            self.changed(current.run_id);
            return Ok(Err(Undecidable::Expired));
        };
        let approval = approval_from_row(&row)?;
        move_decided_run(&mut tx, &d, approval.run_id, &at).await?;
        if d.scope == super::Scope::Always {
            sqlx::query(UPSERT_GRANT)
                .bind(Uuid::now_v7().to_string())
                .bind(&approval.skill)
                .bind(&approval.tool)
                .bind(&approval.skill_hash)
                .bind(if d.approve { "allow" } else { "deny" })
                .bind(&d.decided_by)
                .bind(&at)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        self.forget_facts();
        self.changed(approval.run_id);
        Ok(Ok(approval))
    }

    async fn expire_approvals(&self, at: DateTime<Utc>) -> Result<Vec<Uuid>, StoreError> {
        // One statement: ending each overdue run expires its request
        // through the trigger `runs_withdraw_request`.
        let rows = sqlx::query(
            "update runs set status = 'expired', finished_at = ?1 where status = 'pending_approval' \
             and approval_id in (select id from approvals where status = 'pending' and expires_at <= ?1) \
             returning id",
        )
        .bind(time_text(at)?)
        .fetch_all(&self.pool)
        .await?;
        let runs = rows
            .iter()
            .map(|row| parse_uuid(&get::<String>(row, "id")?))
            .collect::<Result<Vec<_>, _>>()?;
        for run in &runs {
            self.changed(*run);
        }
        Ok(runs)
    }

    async fn mark_caller_left(&self, approval: Uuid, at: DateTime<Utc>) -> Result<(), StoreError> {
        let run: Option<String> = sqlx::query_scalar(
            "update approvals set caller_left_at = ? \
             where id = ? and status = 'pending' and caller_left_at is null returning run_id",
        )
        .bind(time_text(at)?)
        .bind(approval.to_string())
        .fetch_optional(&self.pool)
        .await?;
        // The inbox shows that nobody waits any more.
        if let Some(run) = run {
            self.changed(parse_uuid(&run)?);
        }
        Ok(())
    }

    async fn count_pending(&self) -> Result<u64, StoreError> {
        let n: i64 = sqlx::query_scalar("select count(*) from approvals where status = 'pending'")
            .fetch_one(&self.pool)
            .await?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn count_pending_by(
        &self,
        requested_by: Option<&str>,
        at: DateTime<Utc>,
    ) -> Result<u64, StoreError> {
        let n: i64 = sqlx::query_scalar(
            "select count(*) from approvals where status = 'pending' and requested_by is ? and expires_at > ?",
        )
        .bind(requested_by)
        .bind(time_text(at)?)
        .fetch_one(&self.pool)
        .await?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn pending_like(
        &self,
        call: &SameCall<'_>,
        at: DateTime<Utc>,
        limit: u32,
    ) -> Result<Option<Approval>, StoreError> {
        // The digest finds the call in one look-up; requests recorded
        // before digests were kept are looked for as they were then.
        let rows = sqlx::query(concat!(
            "select ",
            approval_columns!(),
            " from approvals where status = 'pending' and call_digest = ?1 and expires_at > ?2 \
             union all select ",
            approval_columns!(),
            " from approvals where status = 'pending' and call_digest is null and requested_by is ?3 \
             and skill = ?4 and tool = ?5 and skill_hash = ?6 and mode is ?7 and expires_at > ?2 \
             order by created_at, id limit ?8"
        ))
        .bind(call.digest())
        .bind(time_text(at)?)
        .bind(call.requested_by)
        .bind(call.skill)
        .bind(call.tool)
        .bind(call.skill_hash)
        .bind(call.mode)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        for row in &rows {
            let request = approval_from_row(row)?;
            if call.is(&request) {
                return Ok(Some(request));
            }
        }
        Ok(None)
    }

    async fn run_by_key(
        &self,
        requested_by: Option<&str>,
        key: &str,
        since: DateTime<Utc>,
    ) -> Result<Option<Run>, StoreError> {
        let row = sqlx::query(concat!(
            "select ",
            run_columns!(),
            " from runs where coalesce(requested_by, '') = ? and idempotency_key = ?"
        ))
        .bind(requested_by.unwrap_or(""))
        .bind(key)
        .fetch_optional(&self.pool)
        .await?;
        let Some(run) = row.as_ref().map(run_from_row).transpose()? else {
            return Ok(None);
        };
        if run.created_at >= since {
            return Ok(Some(run));
        }
        sqlx::query("update runs set idempotency_key = null where id = ?")
            .bind(run.id.to_string())
            .execute(&self.pool)
            .await?;
        Ok(None)
    }

    async fn put_grants(&self, grants: Vec<Grant>) -> Result<(), StoreError> {
        let mut tx = self.pool.begin_with(BEGIN).await?;
        for grant in &grants {
            sqlx::query(UPSERT_GRANT)
                .bind(grant.id.to_string())
                .bind(&grant.skill)
                .bind(&grant.tool)
                .bind(&grant.skill_hash)
                .bind(grant.decision.as_str())
                .bind(&grant.created_by)
                .bind(time_text(grant.created_at)?)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        self.forget_facts();
        Ok(())
    }

    async fn list_grants(&self, skill: Option<&str>) -> Result<Vec<Grant>, StoreError> {
        let rows = sqlx::query(concat!(
            "select ",
            grant_columns!(),
            " from grants where (?1 is null or skill = ?1) order by created_at desc, id desc limit ",
            max_grants_listed!()
        ))
        .bind(skill)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(grant_from_row).collect()
    }

    async fn revoke_grant(&self, id: Uuid) -> Result<(), StoreError> {
        let done = sqlx::query("delete from grants where id = ?")
            .bind(id.to_string())
            .execute(&self.pool)
            .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound { what: "grant", id });
        }
        self.forget_facts();
        Ok(())
    }

    async fn revoke_grants_of(&self, skill: &str) -> Result<u64, StoreError> {
        let done = sqlx::query("delete from grants where skill = ?")
            .bind(skill)
            .execute(&self.pool)
            .await?;
        self.forget_facts();
        Ok(done.rows_affected())
    }

    async fn cached_index(&self, url: &str) -> Result<Option<CachedIndex>, StoreError> {
        let row = sqlx::query("select body, fetched_at from registry_cache where url = ?")
            .bind(url)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|row| {
            Ok(CachedIndex {
                url: url.to_owned(),
                body: row.try_get("body")?,
                fetched_at: parse_time(&row.try_get::<String, _>("fetched_at")?)?,
            })
        })
        .transpose()
    }

    async fn cache_index(&self, index: CachedIndex) -> Result<(), StoreError> {
        sqlx::query(
            "insert into registry_cache (url, body, fetched_at) values (?, ?, ?) \
             on conflict (url) do update set body = excluded.body, fetched_at = excluded.fetched_at",
        )
        .bind(&index.url)
        .bind(&index.body)
        .bind(time_text(index.fetched_at)?)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn create_session(
        &self,
        s: NewSession,
        max_per_caller: u64,
        now: DateTime<Utc>,
    ) -> Result<Result<SessionRecord, TooMany>, StoreError> {
        sessions::create(&self.pool, s, max_per_caller, now).await
    }

    async fn get_session(&self, id: Uuid) -> Result<Option<SessionRecord>, StoreError> {
        sessions::get_one(&self.pool, id).await
    }

    async fn update_session(
        &self,
        id: Uuid,
        revision: i64,
        turn: u32,
        state: Value,
        expires_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Option<SessionRecord>, StoreError> {
        sessions::update(&self.pool, (id, revision), turn, state, expires_at, now).await
    }

    async fn end_session(&self, id: Uuid) -> Result<bool, StoreError> {
        sessions::end(&self.pool, id).await
    }

    async fn expire_sessions(&self, now: DateTime<Utc>) -> Result<Vec<SessionRecord>, StoreError> {
        sessions::expire(&self.pool, now).await
    }

    async fn list_sessions(
        &self,
        caller: Option<&str>,
        limit: u32,
    ) -> Result<Vec<SessionRecord>, StoreError> {
        sessions::list(&self.pool, caller, limit).await
    }

    async fn put_skill_approval(&self, a: SkillApproval) -> Result<(), StoreError> {
        sessions::put_approval(&self.pool, a).await
    }

    async fn skill_approval(
        &self,
        skill: &str,
        skill_hash: &str,
    ) -> Result<Option<SkillApproval>, StoreError> {
        sessions::approval(&self.pool, skill, skill_hash).await
    }

    async fn list_skill_approvals(&self, skill: Option<&str>) -> Result<Vec<SkillApproval>, StoreError> {
        sessions::list_approvals(&self.pool, skill).await
    }

    async fn revoke_skill_approvals(&self, skill: &str) -> Result<u64, StoreError> {
        sessions::revoke_approvals(&self.pool, skill).await
    }

    async fn start_run(
        &self,
        id: Uuid,
        pgid: Option<i32>,
        instance: &str,
        at: DateTime<Utc>,
    ) -> Result<Option<Run>, StoreError> {
        let params = (time_text(at)?, pgid, instance.to_owned(), id.to_string());
        self.update_run(id, START_QUEUED, params).await
    }

    async fn set_pgid(&self, id: Uuid, pgid: i32) -> Result<(), StoreError> {
        self.writer
            .write(move |conn| {
                let set = conn
                    .prepare_cached("update runs set pgid = ? where id = ? and status = 'running'")?
                    .execute(rusqlite::params![pgid, id.to_string()])?;
                if set == 1 {
                    return Ok(());
                }
                run_or_why(conn, id, None)?;
                Err(StoreError::Conflict(format!("run {id} is not running")).into())
            })
            .await
    }

    async fn finish_run(
        &self,
        id: Uuid,
        status: RunStatus,
        result: Option<Value>,
        at: DateTime<Utc>,
    ) -> Result<Option<Run>, StoreError> {
        self.finish(id, status, result, at, false).await
    }

    async fn end_waiting(
        &self,
        id: Uuid,
        status: RunStatus,
        at: DateTime<Utc>,
    ) -> Result<Option<Run>, StoreError> {
        self.finish(id, status, None, at, true).await
    }

    async fn get_run(&self, id: Uuid) -> Result<Run, StoreError> {
        let row = sqlx::query(concat!("select ", run_columns!(), " from runs where id = ?"))
            .bind(id.to_string())
            .fetch_optional(&self.pool)
            .await?
            .ok_or(StoreError::NotFound { what: "run", id })?;
        run_from_row(&row)
    }

    async fn list_runs(&self, filter: RunFilter) -> Result<RunPage, StoreError> {
        let limit = super::page_size(filter.limit);
        let cursor = filter.cursor.as_deref().map(Cursor::decode).transpose()?;
        if filter.matches_nothing() {
            return Ok(super::into_page(Vec::new(), limit));
        }

        let mut query =
            QueryBuilder::<Sqlite>::new(concat!("select ", run_columns!(), " from runs where 1 = 1"));
        if let Some(tool) = filter.tool {
            query.push(" and tool = ").push_bind(tool);
        }
        if let Some(skill) = filter.skill {
            query.push(" and skill = ").push_bind(skill);
        }
        if let Some(status) = filter.status {
            query.push(" and status = ").push_bind(status.as_str());
        }
        if let Some(session) = filter.session {
            query.push(" and session_id = ").push_bind(session.to_string());
        }
        if let Some(cursor) = cursor {
            query
                .push(" and (created_at, id) < (")
                .push_bind(time_text(cursor.at)?)
                .push(", ")
                .push_bind(cursor.id.to_string())
                .push(")");
        }
        query
            .push(" order by created_at desc, id desc limit ")
            .push_bind(i64::from(limit) + 1);

        let rows = query.build().fetch_all(&self.pool).await?;
        let runs = rows.iter().map(run_from_row).collect::<Result<Vec<_>, _>>()?;
        Ok(super::into_page(runs, limit))
    }

    async fn interrupt_running(&self, instance: Option<&str>, at: DateTime<Utc>) -> Result<u64, StoreError> {
        let done = sqlx::query(
            "update runs set status = 'interrupted', finished_at = ? \
             where (status = 'running' or (status = 'queued' and instance is not null)) \
             and (? is null or instance = ?)",
        )
        .bind(time_text(at)?)
        .bind(instance)
        .bind(instance)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }

    async fn nth_newest_run(&self, n: u64) -> Result<Option<RunPosition>, StoreError> {
        let Some(offset) = n.checked_sub(1).and_then(|o| i64::try_from(o).ok()) else {
            return Ok(None);
        };
        let row: Option<(String, String)> = sqlx::query_as(
            "select created_at, id from runs order by created_at desc, id desc limit 1 offset ?",
        )
        .bind(offset)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|(at, id)| {
            Ok(RunPosition {
                created_at: parse_time(&at)?,
                id: parse_uuid(&id)?,
            })
        })
        .transpose()
    }

    async fn prune_runs(
        &self,
        before: RunPosition,
        batch: u32,
        export: Option<&dyn PruneExport>,
    ) -> Result<u64, StoreError> {
        // Read without the write lock (WAL readers never block the
        // writer), and exported before any lock is taken: a final run
        // never changes again, and only this process writes the file.
        let _pruning = self.pruning.lock().await;
        let rows = sqlx::query(DUE_FOR_PRUNING)
            .bind(time_text(before.created_at)?)
            .bind(before.id.to_string())
            .bind(i64::from(batch))
            .fetch_all(&self.pool)
            .await?;
        let runs = rows.iter().map(run_from_row).collect::<Result<Vec<_>, _>>()?;
        if runs.is_empty() {
            return Ok(0);
        }
        if let Some(export) = export {
            export.export(&runs).await.map_err(|e| super::export_failed(&e))?;
        }
        let ids = json_text(&runs.iter().map(|run| run.id.to_string()).collect::<Vec<_>>())?;
        let cutoff = time_text(before.created_at)?;
        // Through the hot path's writer: calls meanwhile queue behind the
        // one short transaction instead of retrying against a lock.
        self.writer.write(move |conn| prune_on(conn, &ids, &cutoff)).await
    }
}

/// One batch of retention ([`PRUNE`], then [`PRUNE_ACTIVATION_DELIVERIES`]
/// before `cutoff`) inside a write; how many runs went.
fn prune_on(conn: &rusqlite::Connection, ids: &str, cutoff: &str) -> Result<u64, WriteError> {
    let [versions, deliveries, requests, runs] = PRUNE;
    for sql in [versions, deliveries, requests] {
        conn.prepare_cached(sql)?.execute([ids])?;
    }
    conn.prepare_cached(PRUNE_ACTIVATION_DELIVERIES)?
        .execute([cutoff])?;
    let deleted = conn.prepare_cached(runs)?.execute([ids])?;
    Ok(u64::try_from(deleted).unwrap_or(u64::MAX))
}

impl SqliteStore {
    /// `finish_run`, or with `waiting_only` `end_waiting`: one transaction
    /// ending the run and withdrawing its pending request.
    async fn finish(
        &self,
        id: Uuid,
        status: RunStatus,
        result: Option<Value>,
        at: DateTime<Utc>,
        waiting_only: bool,
    ) -> Result<Option<Run>, StoreError> {
        super::check_final(status)?;
        let result = result.map(super::keepable);
        let result = result.as_ref().map(json_text).transpose()?;
        // One statement: the trigger `runs_withdraw_request` (migration
        // 0002) closes a pending request of the run in the same statement.
        let query = if waiting_only { FINISH_WAITING } else { FINISH_LIVE };
        let params = (status.as_str(), result, time_text(at)?, id.to_string());
        self.update_run(id, query, params).await
    }

    /// A conditional update of one run that returns it (`… returning`),
    /// announced when it matched; see [`run_or_why`] for when it did not.
    async fn update_run<P>(&self, id: Uuid, sql: &'static str, params: P) -> Result<Option<Run>, StoreError>
    where
        P: rusqlite::Params + Clone + Send + 'static,
    {
        let updated = self
            .writer
            .write(move |conn| {
                let run = one_run(conn, sql, params.clone())?;
                run_or_why(conn, id, run)
            })
            .await?;
        if updated.is_some() {
            self.changed(id);
        }
        Ok(updated)
    }
}

/// The insert of a new run, inside a write of the hot path.
fn insert_run_on(conn: &rusqlite::Connection, run: &NewRun) -> Result<Run, WriteError> {
    let started_at = run.started_at.map(time_text).transpose()?;
    let finished_at = super::finished_at_insert(run).map(time_text).transpose()?;
    let params = rusqlite::params![
        run.id.to_string(),
        run.skill,
        run.tool,
        run.skill_hash,
        json_text(&run.arguments)?,
        json_text(&run.argv)?,
        run.cwd,
        run.status.as_str(),
        run.requested_by,
        run.approval_id.map(|id| id.to_string()),
        time_text(run.created_at)?,
        started_at,
        finished_at,
        run.instance,
        run.mode,
        run.request_id,
        run.skill_version,
        run.idempotency_key,
        run.session.map(|id| id.to_string()),
    ];
    one_run(conn, INSERT_RUN, params)?
        .ok_or_else(|| StoreError::Other("the insert returned no run".into()).into())
}

/// The pending request of a held run, in the write that inserts the run.
fn insert_request_on(
    conn: &rusqlite::Connection,
    run: &NewRun,
    approval: &NewApproval,
) -> Result<(), WriteError> {
    conn.prepare_cached(INSERT_REQUEST)?.execute(rusqlite::params![
        approval.id.to_string(),
        run.id.to_string(),
        run.skill,
        run.tool,
        approval.description,
        approval.trust,
        approval.warning,
        json_text(&run.arguments)?,
        json_text(&run.argv)?,
        run.cwd,
        run.skill_hash,
        run.requested_by,
        time_text(run.created_at)?,
        time_text(approval.expires_at)?,
        run.mode,
        json_text(&approval.permissions)?,
        SameCall::of_run(run).digest(),
    ])?;
    Ok(())
}

/// Runs a statement that returns at most one run (`… returning` the run's
/// columns) to its end, so that its commit, and any error of it, happens
/// here.
fn one_run(
    conn: &rusqlite::Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> Result<Option<Run>, WriteError> {
    let mut statement = conn.prepare_cached(sql)?;
    let mut rows = statement.query(params)?;
    let run = match rows.next()? {
        Some(row) => Some(run_from_row(row)?),
        None => None,
    };
    while rows.next()?.is_some() {}
    Ok(run)
}

/// After a conditional update: its run, or if it matched nothing,
/// `NotFound` when the run does not exist at all and `None` when it exists
/// in another state. Only tells the two apart; it decides nothing.
fn run_or_why(conn: &rusqlite::Connection, id: Uuid, run: Option<Run>) -> Result<Option<Run>, WriteError> {
    if run.is_some() {
        return Ok(run);
    }
    let mut exists = conn.prepare_cached("select 1 from runs where id = ?")?;
    if exists.exists([id.to_string()])? {
        Ok(None)
    } else {
        Err(StoreError::NotFound { what: "run", id }.into())
    }
}

/// Ends a run still waiting for approval as `expired`; the trigger
/// `runs_withdraw_request` expires its request in the same statement.
/// Moves a decided request's run out of `pending_approval`: queued to run,
/// or denied.
async fn move_decided_run(
    conn: &mut SqliteConnection,
    d: &Decide,
    run_id: Uuid,
    at: &str,
) -> Result<(), StoreError> {
    let run = if d.approve {
        sqlx::query(
            "update runs set status = 'queued', instance = ?, note = ? where id = ? and status = 'pending_approval'",
        )
        .bind(&d.instance)
        .bind(&d.note)
        .bind(run_id.to_string())
    } else {
        sqlx::query(
            "update runs set status = 'denied', finished_at = ?, note = ? \
             where id = ? and status = 'pending_approval'",
        )
        .bind(at)
        .bind(&d.note)
        .bind(run_id.to_string())
    };
    let moved = run.execute(conn).await?;
    if moved.rows_affected() != 1 {
        // Cannot happen while every path that ends a pending run also
        // closes its request; refuse rather than decide a run that
        // is no longer waiting.
        return Err(StoreError::Conflict(format!(
            "run {run_id} is no longer waiting for approval"
        )));
    }
    Ok(())
}

async fn expire_on(conn: &mut SqliteConnection, run: Uuid, at: &str) -> Result<(), StoreError> {
    sqlx::query(
        "update runs set status = 'expired', finished_at = ? where id = ? and status = 'pending_approval'",
    )
    .bind(at)
    .bind(run.to_string())
    .execute(conn)
    .await?;
    Ok(())
}

fn approval_from_row(row: &SqliteRow) -> Result<Approval, StoreError> {
    Ok(Approval {
        id: parse_uuid(&get::<String>(row, "id")?)?,
        run_id: parse_uuid(&get::<String>(row, "run_id")?)?,
        skill: get(row, "skill")?,
        tool: get(row, "tool")?,
        description: get(row, "description")?,
        trust: get(row, "trust")?,
        warning: get(row, "warning")?,
        arguments: parse_json(&get::<String>(row, "arguments")?)?,
        argv: parse_json(&get::<String>(row, "argv")?)?,
        cwd: get(row, "cwd")?,
        permissions: parse_json(&get::<String>(row, "permissions")?)?,
        skill_hash: get(row, "skill_hash")?,
        status: parse_approval_status(&get::<String>(row, "status")?)?,
        scope: parse_scope(get(row, "scope")?)?,
        requested_by: get(row, "requested_by")?,
        decided_by: get(row, "decided_by")?,
        note: get(row, "note")?,
        created_at: parse_time(&get::<String>(row, "created_at")?)?,
        decided_at: get::<Option<String>>(row, "decided_at")?
            .as_deref()
            .map(parse_time)
            .transpose()?,
        expires_at: parse_time(&get::<String>(row, "expires_at")?)?,
        mode: get(row, "mode")?,
        caller_left_at: get::<Option<String>>(row, "caller_left_at")?
            .as_deref()
            .map(parse_time)
            .transpose()?,
    })
}

fn decided_from_row(row: &SqliteRow) -> Result<DecidedApproval, StoreError> {
    Ok(DecidedApproval {
        approval: approval_from_row(row)?,
        run_status: super::parse_run_status(&get::<String>(row, "run_status")?)?,
    })
}

fn notification_from_row(row: &SqliteRow) -> Result<Notification, StoreError> {
    Ok(Notification {
        id: parse_uuid(&get::<String>(row, "id")?)?,
        event: get(row, "event")?,
        approval_id: parse_uuid(&get::<String>(row, "approval_id")?)?,
        target: get(row, "target")?,
        status: NotificationStatus::parse(&get::<String>(row, "status")?)?,
        attempts: u32::try_from(get::<i64>(row, "attempts")?).unwrap_or(u32::MAX),
        last_status: super::http_status(get(row, "last_status")?),
        last_error: get(row, "last_error")?,
        created_at: parse_time(&get::<String>(row, "created_at")?)?,
        next_attempt_at: parse_time(&get::<String>(row, "next_attempt_at")?)?,
        delivered_at: get::<Option<String>>(row, "delivered_at")?
            .as_deref()
            .map(parse_time)
            .transpose()?,
        payload: parse_json(&get::<String>(row, "payload")?)?,
    })
}

fn grant_from_row(row: &SqliteRow) -> Result<Grant, StoreError> {
    Ok(Grant {
        id: parse_uuid(&get::<String>(row, "id")?)?,
        skill: get(row, "skill")?,
        tool: get(row, "tool")?,
        skill_hash: get(row, "skill_hash")?,
        decision: parse_grant_decision(&get::<String>(row, "decision")?)?,
        created_by: get(row, "created_by")?,
        created_at: parse_time(&get::<String>(row, "created_at")?)?,
    })
}

/// A row of `runs` as either driver hands it over (sqlx for reads,
/// rusqlite for the hot path's writes), so one function reads both.
trait RunRow {
    fn text(&self, column: &str) -> Result<String, StoreError>;
    fn maybe_text(&self, column: &str) -> Result<Option<String>, StoreError>;
    fn maybe_int(&self, column: &str) -> Result<Option<i32>, StoreError>;
}

impl RunRow for SqliteRow {
    fn text(&self, column: &str) -> Result<String, StoreError> {
        get(self, column)
    }
    fn maybe_text(&self, column: &str) -> Result<Option<String>, StoreError> {
        get(self, column)
    }
    fn maybe_int(&self, column: &str) -> Result<Option<i32>, StoreError> {
        get(self, column)
    }
}

impl RunRow for rusqlite::Row<'_> {
    fn text(&self, column: &str) -> Result<String, StoreError> {
        Ok(self.get(column)?)
    }
    fn maybe_text(&self, column: &str) -> Result<Option<String>, StoreError> {
        Ok(self.get(column)?)
    }
    fn maybe_int(&self, column: &str) -> Result<Option<i32>, StoreError> {
        Ok(self.get(column)?)
    }
}

fn run_from_row(row: &impl RunRow) -> Result<Run, StoreError> {
    let time = |column: &str| row.maybe_text(column)?.as_deref().map(parse_time).transpose();
    Ok(Run {
        id: parse_uuid(&row.text("id")?)?,
        skill: row.text("skill")?,
        tool: row.text("tool")?,
        skill_hash: row.text("skill_hash")?,
        arguments: parse_json(&row.text("arguments")?)?,
        argv: parse_json(&row.text("argv")?)?,
        cwd: row.text("cwd")?,
        status: super::parse_run_status(&row.text("status")?)?,
        requested_by: row.maybe_text("requested_by")?,
        approval_id: row
            .maybe_text("approval_id")?
            .as_deref()
            .map(parse_uuid)
            .transpose()?,
        created_at: parse_time(&row.text("created_at")?)?,
        started_at: time("started_at")?,
        finished_at: time("finished_at")?,
        result: row.maybe_text("result")?.as_deref().map(parse_json).transpose()?,
        pgid: row.maybe_int("pgid")?,
        instance: row.maybe_text("instance")?,
        mode: row.maybe_text("mode")?,
        request_id: row.maybe_text("request_id")?,
        note: row.maybe_text("note")?,
        skill_version: row.maybe_text("skill_version")?,
        session: row
            .maybe_text("session_id")?
            .as_deref()
            .map(parse_uuid)
            .transpose()?,
    })
}

fn get<'r, T>(row: &'r SqliteRow, column: &str) -> Result<T, StoreError>
where
    T: sqlx::Decode<'r, Sqlite> + sqlx::Type<Sqlite>,
{
    row.try_get(column).map_err(StoreError::from)
}

/// The one text form of a timestamp in this database: UTC, always six
/// fractional digits, so that comparing the text compares the times. (sqlx's
/// own encoding drops trailing zeros, and `…:00Z` sorts after `…:00.5Z`.)
/// Years outside 0..=9999 would break the fixed width, so they are refused.
fn time_text(at: DateTime<Utc>) -> Result<String, StoreError> {
    if !(0..=9999).contains(&at.year()) {
        return Err(StoreError::Other(format!("timestamp {at} is out of range")));
    }
    Ok(at.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string())
}

fn parse_time(text: &str) -> Result<DateTime<Utc>, StoreError> {
    DateTime::parse_from_rfc3339(text)
        .map(|at| at.with_timezone(&Utc))
        .map_err(|err| StoreError::Other(format!("bad timestamp '{text}' in the database: {err}")))
}

fn parse_uuid(text: &str) -> Result<Uuid, StoreError> {
    Uuid::try_parse(text).map_err(|err| StoreError::Other(format!("bad id '{text}' in the database: {err}")))
}

fn json_text<T: serde::Serialize + ?Sized>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|err| StoreError::Other(format!("cannot encode JSON: {err}")))
}

fn parse_json<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|err| StoreError::Other(format!("bad JSON in the database: {err}")))
}

/// SQLite result codes that mean the file cannot be used right now (busy
/// past the timeout, locked, I/O error, cannot open, disk full) rather than
/// that the statement was wrong.
pub(super) fn transient(err: &dyn DatabaseError) -> bool {
    const BUSY: i32 = 5;
    const LOCKED: i32 = 6;
    const IOERR: i32 = 10;
    const FULL: i32 = 13;
    const CANTOPEN: i32 = 14;
    let primary = err
        .code()
        .and_then(|code| code.parse::<i32>().ok())
        .map(|code| code & 0xff);
    matches!(primary, Some(BUSY | LOCKED | IOERR | FULL | CANTOPEN))
}
