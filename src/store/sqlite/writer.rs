//! The SQLite run log's hot path: one rusqlite connection whose statements
//! run on the calling thread.
//!
//! Every call writes the log twice (its run starts, its run ends). Through
//! sqlx each statement is a round trip to the connection's worker thread,
//! two thread wake-ups on a busy machine, which was most of what the log
//! cost a call. Here a statement runs where it is asked for, under a lock
//! held for that one statement: in WAL mode with `synchronous = NORMAL` a
//! commit appends to the WAL without syncing, so it takes tens of
//! microseconds.
//!
//! The connection has no busy handler: a statement that meets another
//! writer's lock (a sqlx transaction deciding an approval, a restarting
//! checkpoint, another process) fails at once with `SQLITE_BUSY`, having
//! changed nothing, and is retried on a blocking thread with backoff, so a
//! runtime thread never sleeps waiting for SQLite.

use crate::store::StoreError;
use rusqlite::{Connection, ErrorCode, OpenFlags};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// How long a write keeps retrying another writer's lock: the busy
/// timeout of the store's other connections.
const GIVE_UP_AFTER: Duration = Duration::from_secs(5);
/// The first and the longest pause between retries.
const FIRST_PAUSE: Duration = Duration::from_micros(200);
const LONGEST_PAUSE: Duration = Duration::from_millis(20);
/// Distinct statements the hot path prepares; each stays compiled.
const STATEMENT_CACHE: usize = 16;

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

/// The hot path's connection. Clones share it.
#[derive(Debug, Clone)]
pub(super) struct Writer {
    conn: Arc<Mutex<Connection>>,
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
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    /// Runs `op` as one write: here and now if nobody holds the database's
    /// write lock, else on a blocking thread that retries until the lock
    /// is free or [`GIVE_UP_AFTER`] has passed. `op` must change nothing
    /// when it fails busy, which a single autocommit statement or a
    /// transaction it rolls back guarantees.
    pub(super) async fn write<T, F>(&self, mut op: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnMut(&mut Connection) -> Result<T, WriteError> + Send + 'static,
    {
        match op(&mut self.lock()) {
            Ok(done) => return Ok(done),
            Err(WriteError::Store(err)) => return Err(err),
            Err(WriteError::Busy) => {}
        }
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.retry(op))
            .await
            .map_err(|err| StoreError::Other(format!("the run log's writer failed: {err}")))?
    }

    /// The slow path of [`Writer::write`]; the lock is not held while it
    /// pauses, so the fast path of other calls goes on meanwhile.
    fn retry<T, F>(&self, mut op: F) -> Result<T, StoreError>
    where
        F: FnMut(&mut Connection) -> Result<T, WriteError>,
    {
        let deadline = Instant::now() + GIVE_UP_AFTER;
        let mut pause = FIRST_PAUSE;
        loop {
            std::thread::sleep(pause);
            match op(&mut self.lock()) {
                Ok(done) => return Ok(done),
                Err(WriteError::Store(err)) => return Err(err),
                Err(WriteError::Busy) if Instant::now() >= deadline => {
                    return Err(StoreError::Unavailable(format!(
                        "the SQLite run log stayed locked by another writer for {} s",
                        GIVE_UP_AFTER.as_secs()
                    )));
                }
                Err(WriteError::Busy) => pause = (pause * 2).min(LONGEST_PAUSE),
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic inside a statement leaves nothing half-done in SQLite
        // (the statement or transaction rolls back), so the connection is
        // still good.
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
