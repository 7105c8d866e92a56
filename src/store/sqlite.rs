//! [`Store`] on one SQLite file: the single-machine default.
//!
//! The file runs in WAL mode so readers (`GET /runs`) never block the writer,
//! with a busy timeout so that concurrent writers wait for each other instead
//! of failing. Every state change is one autocommit statement: SQLite takes
//! the write lock when such a statement begins, so a conditional update can
//! never act on a stale read.

use super::{Cursor, NewRun, Run, RunFilter, RunPage, RunStatus, Store, StoreError};
use chrono::{DateTime, Datelike, Utc};
use serde_json::Value;
use sqlx::error::DatabaseError;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow, SqliteSynchronous,
};
use sqlx::{QueryBuilder, Row, Sqlite};
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;
use uuid::Uuid;

/// Every column of `runs`, in the order [`run_from_row`] reads them; a macro
/// so it can be spliced into `concat!` and the queries stay `&'static str`.
macro_rules! run_columns {
    () => {
        "id, skill, tool, skill_hash, arguments, argv, cwd, status, requested_by, approval_id, \
         created_at, started_at, finished_at, result, pgid, instance"
    };
}

/// How long a writer waits for another's lock before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// SQLite has one writer at a time. With several connections, writers that
/// collide sleep in SQLite's busy handler (1, 2, 5, 10 ms …); one connection
/// makes them queue in the pool instead, which measured 873 → 1070 run-log
/// cycles/s at 8 concurrent callers (`cargo bench --bench invoke`). Queries
/// take well under a millisecond, so readers lose little by waiting too.
const MAX_CONNECTIONS: u32 = 1;
/// How long a request waits for a free connection before the store counts as
/// unavailable (and the invocation fails closed).
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// The SQLite implementation of [`Store`].
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
}

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

        let mut pool = SqlitePoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .acquire_timeout(ACQUIRE_TIMEOUT);
        if in_memory {
            // An in-memory database lives as long as one of its connections:
            // keep one open for the life of the pool.
            pool = pool.min_connections(1).idle_timeout(None).max_lifetime(None);
        }
        let pool = pool.connect_with(options).await.map_err(map_err)?;

        sqlx::migrate!("./migrations/sqlite")
            .run(&pool)
            .await
            .map_err(|err| super::map_migrate(err, transient))?;
        Ok(Self { pool })
    }
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
        sqlx::query("select 1")
            .execute(&self.pool)
            .await
            .map_err(map_err)?;
        Ok(())
    }

    async fn insert_run(&self, run: NewRun) -> Result<Run, StoreError> {
        super::check_new(&run)?;
        let row = sqlx::query(concat!(
            "insert into runs (id, skill, tool, skill_hash, arguments, argv, cwd, status, requested_by, \
             approval_id, created_at) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) returning ",
            run_columns!()
        ))
        .bind(run.id.to_string())
        .bind(run.skill)
        .bind(run.tool)
        .bind(run.skill_hash)
        .bind(json_text(&run.arguments)?)
        .bind(json_text(&run.argv)?)
        .bind(run.cwd)
        .bind(run.status.as_str())
        .bind(run.requested_by)
        .bind(run.approval_id.map(|id| id.to_string()))
        .bind(time_text(run.created_at)?)
        .fetch_one(&self.pool)
        .await
        .map_err(map_err)?;
        run_from_row(&row)
    }

    async fn start_run(
        &self,
        id: Uuid,
        pgid: Option<i32>,
        instance: &str,
        at: DateTime<Utc>,
    ) -> Result<Option<Run>, StoreError> {
        let row = sqlx::query(concat!(
            "update runs set status = 'running', started_at = ?, pgid = ?, instance = ? \
             where id = ? and status = 'queued' returning ",
            run_columns!()
        ))
        .bind(time_text(at)?)
        .bind(pgid)
        .bind(instance)
        .bind(id.to_string())
        .fetch_optional(&self.pool)
        .await
        .map_err(map_err)?;
        match row {
            Some(row) => Ok(Some(run_from_row(&row)?)),
            None => self.require(id).await.map(|()| None),
        }
    }

    async fn set_pgid(&self, id: Uuid, pgid: i32) -> Result<(), StoreError> {
        let done = sqlx::query("update runs set pgid = ? where id = ? and status = 'running'")
            .bind(pgid)
            .bind(id.to_string())
            .execute(&self.pool)
            .await
            .map_err(map_err)?;
        if done.rows_affected() == 1 {
            return Ok(());
        }
        self.require(id).await?;
        Err(StoreError::Conflict(format!("run {id} is not running")))
    }

    async fn finish_run(
        &self,
        id: Uuid,
        status: RunStatus,
        result: Option<Value>,
        at: DateTime<Utc>,
    ) -> Result<Option<Run>, StoreError> {
        super::check_final(status)?;
        let result = result.as_ref().map(json_text).transpose()?;
        let row = sqlx::query(concat!(
            "update runs set status = ?, result = ?, finished_at = ? \
             where id = ? and status in ('pending_approval', 'queued', 'running') returning ",
            run_columns!()
        ))
        .bind(status.as_str())
        .bind(result)
        .bind(time_text(at)?)
        .bind(id.to_string())
        .fetch_optional(&self.pool)
        .await
        .map_err(map_err)?;
        match row {
            Some(row) => Ok(Some(run_from_row(&row)?)),
            None => self.require(id).await.map(|()| None),
        }
    }

    async fn get_run(&self, id: Uuid) -> Result<Run, StoreError> {
        let row = sqlx::query(concat!("select ", run_columns!(), " from runs where id = ?"))
            .bind(id.to_string())
            .fetch_optional(&self.pool)
            .await
            .map_err(map_err)?
            .ok_or(StoreError::NotFound)?;
        run_from_row(&row)
    }

    async fn list_runs(&self, filter: RunFilter) -> Result<RunPage, StoreError> {
        let limit = super::page_size(filter.limit);
        let cursor = filter.cursor.as_deref().map(Cursor::decode).transpose()?;

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
        if let Some(cursor) = cursor {
            query
                .push(" and (created_at, id) < (")
                .push_bind(time_text(cursor.created_at)?)
                .push(", ")
                .push_bind(cursor.id.to_string())
                .push(")");
        }
        query
            .push(" order by created_at desc, id desc limit ")
            .push_bind(i64::from(limit) + 1);

        let rows = query.build().fetch_all(&self.pool).await.map_err(map_err)?;
        let runs = rows.iter().map(run_from_row).collect::<Result<Vec<_>, _>>()?;
        Ok(super::into_page(runs, limit))
    }

    async fn interrupt_running(&self, instance: Option<&str>, at: DateTime<Utc>) -> Result<u64, StoreError> {
        let done = sqlx::query(
            "update runs set status = 'interrupted', finished_at = ? \
             where status = 'running' and (? is null or instance = ?)",
        )
        .bind(time_text(at)?)
        .bind(instance)
        .bind(instance)
        .execute(&self.pool)
        .await
        .map_err(map_err)?;
        Ok(done.rows_affected())
    }
}

impl SqliteStore {
    /// After a conditional update matched nothing: `NotFound` if the run does
    /// not exist at all, `Ok` if it exists but was in another state. Only
    /// tells the two apart; it decides nothing.
    async fn require(&self, id: Uuid) -> Result<(), StoreError> {
        let found = sqlx::query("select 1 from runs where id = ?")
            .bind(id.to_string())
            .fetch_optional(&self.pool)
            .await
            .map_err(map_err)?;
        found.map(|_| ()).ok_or(StoreError::NotFound)
    }
}

fn run_from_row(row: &SqliteRow) -> Result<Run, StoreError> {
    let status: String = get(row, "status")?;
    Ok(Run {
        id: parse_uuid(&get::<String>(row, "id")?)?,
        skill: get(row, "skill")?,
        tool: get(row, "tool")?,
        skill_hash: get(row, "skill_hash")?,
        arguments: parse_json(&get::<String>(row, "arguments")?)?,
        argv: parse_json(&get::<String>(row, "argv")?)?,
        cwd: get(row, "cwd")?,
        status: RunStatus::parse(&status)
            .ok_or_else(|| StoreError::Other(format!("unknown run status '{status}' in the database")))?,
        requested_by: get(row, "requested_by")?,
        approval_id: get::<Option<String>>(row, "approval_id")?
            .as_deref()
            .map(parse_uuid)
            .transpose()?,
        created_at: parse_time(&get::<String>(row, "created_at")?)?,
        started_at: get::<Option<String>>(row, "started_at")?
            .as_deref()
            .map(parse_time)
            .transpose()?,
        finished_at: get::<Option<String>>(row, "finished_at")?
            .as_deref()
            .map(parse_time)
            .transpose()?,
        result: get::<Option<String>>(row, "result")?
            .as_deref()
            .map(parse_json)
            .transpose()?,
        pgid: get(row, "pgid")?,
        instance: get(row, "instance")?,
    })
}

fn get<'r, T>(row: &'r SqliteRow, column: &str) -> Result<T, StoreError>
where
    T: sqlx::Decode<'r, Sqlite> + sqlx::Type<Sqlite>,
{
    row.try_get(column).map_err(map_err)
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

fn map_err(err: sqlx::Error) -> StoreError {
    super::map_sqlx(err, transient)
}

/// SQLite result codes that mean the file cannot be used right now (busy
/// past the timeout, locked, I/O error, cannot open, disk full) rather than
/// that the statement was wrong.
fn transient(err: &dyn DatabaseError) -> bool {
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
