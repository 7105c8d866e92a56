//! The SQLite run log's hot path: one rusqlite connection, written on the
//! calling thread, with writes that arrive together committed together.
//!
//! Every call writes the log twice (its run starts, its run ends). Through
//! sqlx each statement is a round trip to the connection's worker thread,
//! two thread wake-ups on a busy machine, which was most of what the log
//! cost a call. Here a write is queued and the caller tries to become the
//! leader: whoever holds the connection runs everything queued in one
//! transaction, each write in its own savepoint. A lone call is its own
//! leader and pays no hop; under concurrent calls a write waits (as a
//! task, not a thread) for the batch in progress and rides the next one,
//! so the pages every run touches (the newest leaf of each index) go to
//! the WAL once per batch instead of once per write. In WAL mode with
//! `synchronous = NORMAL` a commit appends to the WAL without syncing.
//!
//! The connection has no busy handler: a batch that meets another writer's
//! lock (a sqlx transaction deciding an approval, a restarting checkpoint,
//! another process) fails at once with `SQLITE_BUSY`, having changed
//! nothing, and is retried on a blocking thread with backoff, so a runtime
//! thread never sleeps waiting for SQLite.

use crate::store::StoreError;
use rusqlite::{Connection, ErrorCode, OpenFlags};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// How long a batch keeps retrying another writer's lock: the busy
/// timeout of the store's other connections.
const GIVE_UP_AFTER: Duration = Duration::from_secs(5);
/// The first and the longest pause between retries.
const FIRST_PAUSE: Duration = Duration::from_micros(200);
const LONGEST_PAUSE: Duration = Duration::from_millis(2);
/// Distinct statements the hot path prepares; each stays compiled.
const STATEMENT_CACHE: usize = 24;
/// Writes per transaction at most, so one leader's turn stays short.
const MAX_BATCH: usize = 64;
/// Batches one caller commits for others before it hands on.
const LEADER_TURNS: usize = 4;

/// Why one attempt at a write did not finish: another writer held the lock
/// (try again), or anything else (give up).
#[derive(Debug)]
pub(super) enum WriteError {
    Busy,
    Store(StoreError),
}

impl From<StoreError> for WriteError {
    fn from(err: StoreError) -> Self {
        WriteError::Store(err)
    }
}

impl From<rusqlite::Error> for WriteError {
    fn from(err: rusqlite::Error) -> Self {
        match err.sqlite_error_code() {
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => WriteError::Busy,
            _ => WriteError::Store(err.into()),
        }
    }
}

/// The one mapping from rusqlite's errors to the store's, as
/// `From<sqlx::Error>` does for sqlx's.
impl From<rusqlite::Error> for StoreError {
    fn from(err: rusqlite::Error) -> Self {
        const UNIQUE: i32 = 2067;
        const PRIMARY_KEY: i32 = 1555;
        let Some(sqlite) = err.sqlite_error() else {
            return StoreError::Other(err.to_string());
        };
        match sqlite.code {
            ErrorCode::ConstraintViolation if matches!(sqlite.extended_code, UNIQUE | PRIMARY_KEY) => {
                StoreError::Conflict(err.to_string())
            }
            ErrorCode::DatabaseBusy
            | ErrorCode::DatabaseLocked
            | ErrorCode::SystemIoFailure
            | ErrorCode::DiskFull
            | ErrorCode::CannotOpen => StoreError::Unavailable(err.to_string()),
            _ => StoreError::Other(err.to_string()),
        }
    }
}

/// The hot path's connection and its queue. Clones share them.
#[derive(Clone)]
pub(super) struct Writer {
    shared: Arc<Shared>,
}

struct Shared {
    conn: Mutex<Connection>,
    queue: Mutex<Vec<Box<dyn Job>>>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").finish_non_exhaustive()
    }
}

/// One queued write, its value kept until its batch commits.
trait Job: Send {
    /// Runs the write inside the batch's transaction: `false` if it
    /// failed (its error kept for its caller) and must be undone.
    fn attempt(&mut self, conn: &Connection) -> Result<bool, WriteError>;
    /// Forgets a value its rolled-back batch produced.
    fn reset(&mut self);
    /// Tells the caller: its value once committed, else why not.
    fn complete(self: Box<Self>, outcome: Result<(), StoreError>);
}

/// A [`Job`] for an `op` giving a `T`.
struct Pending<T, F> {
    op: F,
    value: Option<Result<T, StoreError>>,
    done: oneshot::Sender<Result<T, StoreError>>,
}

impl<T, F> Job for Pending<T, F>
where
    T: Send,
    F: FnMut(&Connection) -> Result<T, WriteError> + Send,
{
    fn attempt(&mut self, conn: &Connection) -> Result<bool, WriteError> {
        let (value, done) = match (self.op)(conn) {
            Ok(value) => (Ok(value), true),
            Err(WriteError::Store(err)) => (Err(err), false),
            Err(WriteError::Busy) => return Err(WriteError::Busy),
        };
        self.value = Some(value);
        Ok(done)
    }

    fn reset(&mut self) {
        self.value = None;
    }

    fn complete(self: Box<Self>, outcome: Result<(), StoreError>) {
        let Pending { value, done, .. } = *self;
        let answer = match (outcome, value) {
            (Err(err), _) => Err(err),
            (Ok(()), Some(value)) => value,
            (Ok(()), None) => Err(StoreError::Other("a write was committed without running".into())),
        };
        // A caller that stopped waiting has nothing to be told.
        let _ = done.send(answer);
    }
}

impl Writer {
    /// Opens the database sqlx opened, as sqlx names it: `filename` is
    /// `SqliteConnectOptions::get_filename`, and an in-memory database is
    /// one sqlx opened with a shared cache under that name.
    pub(super) fn open(filename: &Path, in_memory: bool) -> Result<Self, StoreError> {
        let mut flags =
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        if in_memory {
            flags |= OpenFlags::SQLITE_OPEN_MEMORY | OpenFlags::SQLITE_OPEN_SHARED_CACHE;
        }
        let conn = Connection::open_with_flags(filename, flags)?;
        conn.busy_timeout(Duration::ZERO)?;
        // Per-connection settings, the same as sqlx's connections have;
        // the journal mode (WAL) belongs to the file and is already set.
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        // The background checkpointer checkpoints, never a call's commit.
        conn.pragma_update(None, "wal_autocheckpoint", 0)?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        Ok(Self {
            shared: Arc::new(Shared {
                conn: Mutex::new(conn),
                queue: Mutex::new(Vec::new()),
            }),
        })
    }

    /// Runs `op` as one atomic write, committed before this returns. `op`
    /// runs inside a savepoint of a batch's transaction: it must not begin
    /// or end transactions itself, and it may run again if its batch is
    /// rolled back (another writer held the lock).
    pub(super) async fn write<T, F>(&self, op: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnMut(&Connection) -> Result<T, WriteError> + Send + 'static,
    {
        let (done, answer) = oneshot::channel();
        let job = Pending {
            op,
            value: None,
            done,
        };
        lock(&self.shared.queue).push(Box::new(job));
        self.lead();
        answer
            .await
            .map_err(|_| StoreError::Other("the run log's writer dropped a write".into()))?
    }

    /// Commits what is queued, unless another caller holds the
    /// connection: that leader looks at the queue again after letting go
    /// of it, so nothing queued is left behind. A caller leads for
    /// [`LEADER_TURNS`] batches at most, then hands on to a task of its
    /// own, so that under endless writes nobody's answer waits for ever.
    fn lead(&self) {
        for _ in 0..LEADER_TURNS {
            if !self.lead_once() {
                return;
            }
        }
        let this = self.clone();
        tokio::spawn(async move { this.lead() });
    }

    /// One turn of [`Writer::lead`]: `false` when there is nothing left
    /// for this caller to do (the queue is empty, or another leads).
    fn lead_once(&self) -> bool {
        let conn = match self.shared.conn.try_lock() {
            Ok(conn) => conn,
            Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return false,
        };
        let mut batch = self.take_batch();
        if batch.is_empty() {
            drop(conn);
            // Queued after the look but before the lock went: ours to do.
            return !lock(&self.shared.queue).is_empty();
        }
        let outcome = commit(&conn, &mut batch);
        drop(conn);
        if let Some(batch) = settle(batch, outcome) {
            let this = self.clone();
            tokio::task::spawn_blocking(move || this.retry(batch));
        }
        true
    }

    /// The oldest queued writes, [`MAX_BATCH`] at most.
    fn take_batch(&self) -> Vec<Box<dyn Job>> {
        let mut queue = lock(&self.shared.queue);
        let n = queue.len().min(MAX_BATCH);
        queue.drain(..n).collect()
    }

    /// The slow path: a batch that met another writer's lock, retried
    /// until the lock is free or [`GIVE_UP_AFTER`] has passed. The
    /// connection is not held while it pauses, so other batches go on.
    fn retry(&self, mut batch: Vec<Box<dyn Job>>) {
        let deadline = Instant::now() + GIVE_UP_AFTER;
        let mut pause = FIRST_PAUSE;
        loop {
            std::thread::sleep(pause);
            let outcome = commit(&lock(&self.shared.conn), &mut batch);
            let Some(busy) = settle(batch, outcome) else {
                return;
            };
            if Instant::now() >= deadline {
                let why = format!(
                    "the SQLite run log stayed locked by another writer for {} s",
                    GIVE_UP_AFTER.as_secs()
                );
                return complete(busy, &Err(StoreError::Unavailable(why)));
            }
            batch = busy;
            pause = (pause * 2).min(LONGEST_PAUSE);
        }
    }
}

/// Tells a batch's callers how its commit went, or hands the batch back
/// when it met another writer's lock, to be tried again.
fn settle(batch: Vec<Box<dyn Job>>, outcome: Result<(), WriteError>) -> Option<Vec<Box<dyn Job>>> {
    match outcome {
        Ok(()) => complete(batch, &Ok(())),
        Err(WriteError::Store(err)) => complete(batch, &Err(err)),
        Err(WriteError::Busy) => return Some(batch),
    }
    None
}

/// One transaction for the batch, a savepoint for each write, so a write
/// that fails is undone alone. `Busy` rolls back everything: the batch
/// is then retried whole.
fn commit(conn: &Connection, batch: &mut [Box<dyn Job>]) -> Result<(), WriteError> {
    let outcome = run_batch(conn, batch);
    if outcome.is_err() {
        // A failed statement may have ended the transaction already; then
        // there is nothing to roll back.
        if !conn.is_autocommit() {
            let _ = conn.execute_batch("rollback");
        }
        batch.iter_mut().for_each(|job| job.reset());
    }
    outcome
}

fn run_batch(conn: &Connection, batch: &mut [Box<dyn Job>]) -> Result<(), WriteError> {
    if !conn.is_autocommit() {
        // Left open by a leader that panicked mid-batch: undo its part.
        conn.execute_batch("rollback")?;
    }
    conn.prepare_cached("begin immediate")?.execute([])?;
    for job in batch {
        conn.prepare_cached("savepoint write")?.execute([])?;
        if !job.attempt(conn)? {
            conn.prepare_cached("rollback to write")?.execute([])?;
        }
        conn.prepare_cached("release write")?.execute([])?;
        // For counting (`benches/invoke.rs`); free while nobody listens.
        tracing::trace!(target: "skilld::run_log", summary = "write (rusqlite)");
    }
    conn.prepare_cached("commit")?.execute([])?;
    tracing::trace!(target: "skilld::run_log", summary = "transaction (rusqlite)");
    Ok(())
}

fn complete(batch: Vec<Box<dyn Job>>, outcome: &Result<(), StoreError>) {
    for job in batch {
        job.complete(outcome.clone());
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic inside a write leaves nothing half-done in SQLite (its
    // transaction rolls back), so the connection and queue are still good.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
