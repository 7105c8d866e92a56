//! The store on one SQLite file: the single-machine default. One
//! [`SqliteStore`] keeps every aggregate, each implemented beside its SQL
//! (`runs`, `approvals`, `sessions`, `notifications`, `index_cache`,
//! `egress`).
//!
//! The file runs in WAL mode so readers (`GET /runs`) never block the writer.
//! The writes every call makes go through [`writer`] (rusqlite, on the
//! calling thread); the rest through sqlx, with a busy timeout so that
//! concurrent writers wait for each other instead of failing. Every state
//! change holds SQLite's write lock from its first statement (an immediate
//! transaction, or a statement that writes), so a conditional update can
//! never act on a stale read.

mod approvals;
mod egress;
mod index_cache;
mod notifications;
mod runs;
mod sessions;
mod writer;

use crate::store::{PolicyFacts, StoreError};
use chrono::{DateTime, Datelike, Utc};
use sqlx::error::DatabaseError;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow, SqliteSynchronous,
};
use sqlx::{Connection as _, Row, Sqlite, SqliteConnection};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::broadcast;
use uuid::Uuid;
use writer::Writer;

/// SQLite takes the write lock at the first write of a deferred
/// transaction, which can fail with SQLITE_BUSY when another process holds
/// it; an immediate one takes it at the start and waits (busy timeout).
const BEGIN: &str = "begin immediate";

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

/// The SQLite backend of every store trait.
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
