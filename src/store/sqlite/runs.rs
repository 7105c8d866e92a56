//! The run log on SQLite (see `store::runs`): the writes every call makes
//! go through the hot path's [`Writer`](super::writer::Writer), reads and
//! recovery through the sqlx pool. Retention's batches are here too: they
//! delete a run with what names it.

use super::writer::WriteError;
use super::{SqliteStore, get, json_text, parse_json, parse_time, parse_uuid, time_text};
use crate::store::runs::{check_final, check_new, export_failed, finished_at_insert, parse_run_status};
use crate::store::{
    Cursor, NewRun, PruneExport, Pruning, Run, RunFilter, RunLog, RunPage, RunPosition, RunStatus,
    StoreError, into_page, keepable, page_size,
};
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::sqlite::SqliteRow;
use sqlx::{QueryBuilder, Sqlite};
use tokio::sync::broadcast;
use uuid::Uuid;

/// Every column of `runs`, in the order [`run_from_row`] reads them; a macro
/// so it can be spliced into `concat!` and the queries stay `&'static str`.
macro_rules! run_columns {
    () => {
        "id, skill, tool, skill_hash, arguments, argv, cwd, status, requested_by, approval_id, \
         created_at, started_at, finished_at, result, pgid, instance, mode, request_id, note, skill_version, \
         session_id"
    };
}

/// Inserts a new run.
const INSERT_RUN: &str = concat!(
    "insert into runs (id, skill, tool, skill_hash, arguments, argv, cwd, status, requested_by, \
     approval_id, created_at, started_at, finished_at, instance, mode, request_id, skill_version, \
     idempotency_key, session_id) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) returning ",
    run_columns!()
);
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

#[async_trait::async_trait]
impl RunLog for SqliteStore {
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
        check_new(&run)?;
        let id = run.id;
        let run = self.writer.write(move |conn| insert_run_on(conn, &run)).await?;
        self.changed(id);
        Ok(run)
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
        let limit = page_size(filter.limit);
        let cursor = filter.cursor.as_deref().map(Cursor::decode).transpose()?;
        if filter.matches_nothing() {
            return Ok(into_page(Vec::new(), limit));
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
        Ok(into_page(runs, limit))
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
}

#[async_trait::async_trait]
impl Pruning for SqliteStore {
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
            export.export(&runs).await.map_err(|e| export_failed(&e))?;
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
        check_final(status)?;
        let result = result.map(keepable);
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
pub(super) fn insert_run_on(conn: &rusqlite::Connection, run: &NewRun) -> Result<Run, WriteError> {
    let started_at = run.started_at.map(time_text).transpose()?;
    let finished_at = finished_at_insert(run).map(time_text).transpose()?;
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
        status: parse_run_status(&row.text("status")?)?,
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
