//! [`Store`] on PostgreSQL: what several skilld instances share
//! (DESIGN.md §6). Every state change is one conditional `update … returning`,
//! so of two instances racing for the same run exactly one gets it, with no
//! explicit transaction or lock.

use super::{Cursor, NewRun, Run, RunFilter, RunPage, RunStatus, Store, StoreError};
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::error::DatabaseError;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgRow};
use sqlx::types::Json;
use sqlx::{Postgres, QueryBuilder, Row};
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

/// Enough for the concurrent runs and readers of one instance, while several
/// instances stay well under PostgreSQL's default of 100 connections.
const MAX_CONNECTIONS: u32 = 16;
/// How long a request waits for a connection before the store counts as
/// unavailable (and the invocation fails closed).
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// The PostgreSQL implementation of [`Store`].
#[derive(Debug, Clone)]
pub struct PgStore {
    pool: PgPool,
}

impl PgStore {
    /// Connects to a `postgres://` or `postgresql://` URL (libpq's query
    /// parameters, such as `options=-c search_path=…`, apply) and applies the
    /// migrations in `migrations/postgres`.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        // sqlx's parse errors never include the password; pass them on.
        let options = PgConnectOptions::from_str(url)
            .map_err(|err| StoreError::Other(format!("invalid PostgreSQL URL: {err}")))?;
        let pool = PgPoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_with(options)
            .await
            .map_err(map_err)?;
        sqlx::migrate!("./migrations/postgres")
            .run(&pool)
            .await
            .map_err(|err| super::map_migrate(err, transient))?;
        Ok(Self { pool })
    }
}

#[async_trait::async_trait]
impl Store for PgStore {
    fn backend(&self) -> &'static str {
        "postgres"
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
             approval_id, created_at) values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) returning ",
            run_columns!()
        ))
        .bind(run.id)
        .bind(run.skill)
        .bind(run.tool)
        .bind(run.skill_hash)
        .bind(run.arguments)
        .bind(Json(run.argv))
        .bind(run.cwd)
        .bind(run.status.as_str())
        .bind(run.requested_by)
        .bind(run.approval_id)
        .bind(run.created_at)
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
            "update runs set status = 'running', started_at = $2, pgid = $3, instance = $4 \
             where id = $1 and status = 'queued' returning ",
            run_columns!()
        ))
        .bind(id)
        .bind(at)
        .bind(pgid)
        .bind(instance)
        .fetch_optional(&self.pool)
        .await
        .map_err(map_err)?;
        match row {
            Some(row) => Ok(Some(run_from_row(&row)?)),
            None => self.require(id).await.map(|()| None),
        }
    }

    async fn set_pgid(&self, id: Uuid, pgid: i32) -> Result<(), StoreError> {
        let done = sqlx::query("update runs set pgid = $2 where id = $1 and status = 'running'")
            .bind(id)
            .bind(pgid)
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
        let row = sqlx::query(concat!(
            "update runs set status = $2, result = $3, finished_at = $4 \
             where id = $1 and status in ('pending_approval', 'queued', 'running') returning ",
            run_columns!()
        ))
        .bind(id)
        .bind(status.as_str())
        .bind(result)
        .bind(at)
        .fetch_optional(&self.pool)
        .await
        .map_err(map_err)?;
        match row {
            Some(row) => Ok(Some(run_from_row(&row)?)),
            None => self.require(id).await.map(|()| None),
        }
    }

    async fn get_run(&self, id: Uuid) -> Result<Run, StoreError> {
        let row = sqlx::query(concat!("select ", run_columns!(), " from runs where id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(map_err)?
            .ok_or(StoreError::NotFound)?;
        run_from_row(&row)
    }

    async fn list_runs(&self, filter: RunFilter) -> Result<RunPage, StoreError> {
        let limit = super::page_size(filter.limit);
        let cursor = filter.cursor.as_deref().map(Cursor::decode).transpose()?;

        // Only the filters given become predicates, so each shape of query
        // can use its own index.
        let mut query =
            QueryBuilder::<Postgres>::new(concat!("select ", run_columns!(), " from runs where true"));
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
                .push_bind(cursor.created_at)
                .push(", ")
                .push_bind(cursor.id)
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
            "update runs set status = 'interrupted', finished_at = $1 \
             where status = 'running' and ($2::text is null or instance = $2)",
        )
        .bind(at)
        .bind(instance)
        .execute(&self.pool)
        .await
        .map_err(map_err)?;
        Ok(done.rows_affected())
    }
}

impl PgStore {
    /// After a conditional update matched nothing: `NotFound` if the run does
    /// not exist at all, `Ok` if it exists but was in another state. Only
    /// tells the two apart; it decides nothing.
    async fn require(&self, id: Uuid) -> Result<(), StoreError> {
        let found = sqlx::query("select 1 from runs where id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(map_err)?;
        found.map(|_| ()).ok_or(StoreError::NotFound)
    }
}

fn run_from_row(row: &PgRow) -> Result<Run, StoreError> {
    let status: String = get(row, "status")?;
    Ok(Run {
        id: get(row, "id")?,
        skill: get(row, "skill")?,
        tool: get(row, "tool")?,
        skill_hash: get(row, "skill_hash")?,
        arguments: get(row, "arguments")?,
        argv: get::<Json<Vec<String>>>(row, "argv")?.0,
        cwd: get(row, "cwd")?,
        status: RunStatus::parse(&status)
            .ok_or_else(|| StoreError::Other(format!("unknown run status '{status}' in the database")))?,
        requested_by: get(row, "requested_by")?,
        approval_id: get(row, "approval_id")?,
        created_at: get(row, "created_at")?,
        started_at: get(row, "started_at")?,
        finished_at: get(row, "finished_at")?,
        result: get(row, "result")?,
        pgid: get(row, "pgid")?,
        instance: get(row, "instance")?,
    })
}

fn get<'r, T>(row: &'r PgRow, column: &str) -> Result<T, StoreError>
where
    T: sqlx::Decode<'r, Postgres> + sqlx::Type<Postgres>,
{
    row.try_get(column).map_err(map_err)
}

fn map_err(err: sqlx::Error) -> StoreError {
    super::map_sqlx(err, transient)
}

/// SQLSTATEs that mean the server cannot serve us right now rather than that
/// the statement was wrong: connection exceptions (08), insufficient
/// resources (53, e.g. too many connections), operator intervention (57P,
/// shutting down or starting up), and a read-only server (25006, a standby
/// after a failover).
fn transient(err: &dyn DatabaseError) -> bool {
    err.code().is_some_and(|code| {
        code.starts_with("08") || code.starts_with("53") || code.starts_with("57P") || code == "25006"
    })
}
