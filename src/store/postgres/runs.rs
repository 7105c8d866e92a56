//! The run log on PostgreSQL (see `store::runs`): each change one
//! conditional statement, announced to every instance by the `runs`
//! trigger. Retention's batches are here too: they delete a run with what
//! names it, skipping rows another instance has locked.

use super::{PgStore, get};
use crate::store::runs::{check_final, check_new, export_failed, finished_at_insert, parse_run_status};
use crate::store::{
    Cursor, NewRun, PruneExport, Pruning, Run, RunEnd, RunFilter, RunLog, RunPage, RunPosition, RunStatus,
    StoreError, into_page, keepable, page_size,
};
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::postgres::{PgConnection, PgRow};
use sqlx::types::Json;
use sqlx::{Postgres, QueryBuilder};
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

/// Ends a live run: the statement behind `finish_run`.
const FINISH_LIVE: &str = concat!(
    "update runs set status = $2, result = $3, finished_at = $4 \
     where id = $1 and status in ('pending_approval', 'queued', 'running') returning ",
    run_columns!()
);
/// Ends the live runs among many, one statement and one commit for all:
/// the statement behind `finish_runs`.
const FINISH_MANY: &str = "update runs set status = e.status, result = e.result, finished_at = e.finished_at \
     from unnest($1::uuid[], $2::text[], $3::jsonb[], $4::timestamptz[]) as e(id, status, result, finished_at) \
     where runs.id = e.id and runs.status in ('pending_approval', 'queued', 'running') returning runs.id";
/// Ends a run that has not started: the statement behind `end_waiting`.
const FINISH_WAITING: &str = concat!(
    "update runs set status = $2, result = $3, finished_at = $4 \
     where id = $1 and status in ('pending_approval', 'queued') returning ",
    run_columns!()
);
/// The oldest final runs before a position, locked: one batch of
/// retention. `skip locked` passes over runs another instance is pruning
/// right now, so two instances never export or delete the same run.
const DUE_FOR_PRUNING: &str = concat!(
    "select ",
    run_columns!(),
    " from runs where (created_at, id) < ($1, $2) \
     and status not in ('pending_approval', 'queued', 'running') \
     order by created_at, id limit $3 for update skip locked"
);
/// One batch of retention, each statement given the runs' ids: the
/// approved versions their requests stand for are remembered, then the
/// requests' deliveries, the requests (which name their runs) and the runs
/// go.
const PRUNE: [&str; 4] = [
    "insert into approved_versions (skill, skill_hash) select skill, skill_hash from approvals \
     where run_id = any($1) and status = 'approved' on conflict do nothing",
    "delete from notifications where approval_id in (select id from approvals where run_id = any($1))",
    "delete from approvals where run_id = any($1)",
    "delete from runs where id = any($1)",
];

/// With a batch of retention: the settled webhook deliveries of activation
/// requests (which hold no run) older than the batch's cutoff.
const PRUNE_ACTIVATION_DELIVERIES: &str = "delete from notifications where event = 'activation.requested' \
     and status <> 'pending' and created_at < $1";

#[async_trait::async_trait]
impl RunLog for PgStore {
    fn backend(&self) -> &'static str {
        "postgres"
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
        let mut conn = self.pool.acquire().await?;
        let row = insert_run_on(&mut conn, &run).await?;
        drop(conn);
        self.changed(run.id);
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
        .await?;
        match row {
            Some(row) => {
                self.changed(id);
                Ok(Some(run_from_row(&row)?))
            }
            None => self.require(id).await.map(|()| None),
        }
    }

    async fn set_pgid(&self, id: Uuid, pgid: i32) -> Result<(), StoreError> {
        let done = sqlx::query("update runs set pgid = $2 where id = $1 and status = 'running'")
            .bind(id)
            .bind(pgid)
            .execute(&self.pool)
            .await?;
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
        self.finish(id, status, result, at, false).await
    }

    async fn finish_runs(&self, ends: &[RunEnd]) -> Result<(), StoreError> {
        for end in ends {
            check_final(end.status)?;
        }
        let ids: Vec<Uuid> = ends.iter().map(|e| e.id).collect();
        let statuses: Vec<&str> = ends.iter().map(|e| e.status.as_str()).collect();
        let results: Vec<Option<Value>> = ends.iter().map(|e| e.result.clone().map(keepable)).collect();
        let ats: Vec<DateTime<Utc>> = ends.iter().map(|e| e.at).collect();
        let ended: Vec<Uuid> = sqlx::query_scalar(FINISH_MANY)
            .bind(ids)
            .bind(statuses)
            .bind(results)
            .bind(ats)
            .fetch_all(&self.pool)
            .await?;
        for id in ended {
            self.changed(id);
        }
        Ok(())
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
        let row = sqlx::query(concat!("select ", run_columns!(), " from runs where id = $1"))
            .bind(id)
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
        if let Some(session) = filter.session {
            query.push(" and session_id = ").push_bind(session);
        }
        if let Some(cursor) = cursor {
            query
                .push(" and (created_at, id) < (")
                .push_bind(cursor.at)
                .push(", ")
                .push_bind(cursor.id)
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
            " from runs where coalesce(requested_by, '') = $1 and idempotency_key = $2"
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
        sqlx::query("update runs set idempotency_key = null where id = $1")
            .bind(run.id)
            .execute(&self.pool)
            .await?;
        Ok(None)
    }

    async fn interrupt_running(&self, instance: Option<&str>, at: DateTime<Utc>) -> Result<u64, StoreError> {
        let done = sqlx::query(
            "update runs set status = 'interrupted', finished_at = $1 \
             where (status = 'running' or (status = 'queued' and instance is not null)) \
             and ($2::text is null or instance = $2)",
        )
        .bind(at)
        .bind(instance)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }
}

#[async_trait::async_trait]
impl Pruning for PgStore {
    async fn nth_newest_run(&self, n: u64) -> Result<Option<RunPosition>, StoreError> {
        let Some(offset) = n.checked_sub(1).and_then(|o| i64::try_from(o).ok()) else {
            return Ok(None);
        };
        let row: Option<(DateTime<Utc>, Uuid)> = sqlx::query_as(
            "select created_at, id from runs order by created_at desc, id desc limit 1 offset $1",
        )
        .bind(offset)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|(created_at, id)| RunPosition { created_at, id }))
    }

    async fn prune_runs(
        &self,
        before: RunPosition,
        batch: u32,
        export: Option<&dyn PruneExport>,
    ) -> Result<u64, StoreError> {
        let mut tx = self.pool.begin().await?;
        let rows = sqlx::query(DUE_FOR_PRUNING)
            .bind(before.created_at)
            .bind(before.id)
            .bind(i64::from(batch))
            .fetch_all(&mut *tx)
            .await?;
        let runs = rows.iter().map(run_from_row).collect::<Result<Vec<_>, _>>()?;
        if runs.is_empty() {
            return Ok(0);
        }
        // The rows stay locked while they are exported: another instance
        // skips them, and nobody else writes a final run.
        if let Some(export) = export {
            export.export(&runs).await.map_err(|e| export_failed(&e))?;
        }
        let ids: Vec<Uuid> = runs.iter().map(|run| run.id).collect();
        let [versions, deliveries, requests, runs] = PRUNE;
        for sql in [versions, deliveries, requests] {
            sqlx::query(sql).bind(&ids).execute(&mut *tx).await?;
        }
        sqlx::query(PRUNE_ACTIVATION_DELIVERIES)
            .bind(before.created_at)
            .execute(&mut *tx)
            .await?;
        let deleted = sqlx::query(runs).bind(&ids).execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(deleted.rows_affected())
    }
}

impl PgStore {
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
        // One statement: the trigger `runs_withdraw_request` (migration
        // 0002) closes a pending request of the run in the same statement.
        let query = if waiting_only { FINISH_WAITING } else { FINISH_LIVE };
        let row = sqlx::query(query)
            .bind(id)
            .bind(status.as_str())
            .bind(result)
            .bind(at)
            .fetch_optional(&self.pool)
            .await?;
        let Some(row) = row else {
            return self.require(id).await.map(|()| None);
        };
        self.changed(id);
        run_from_row(&row).map(Some)
    }

    /// After a conditional update matched nothing: `NotFound` if the run does
    /// not exist at all, `Ok` if it exists but was in another state. Only
    /// tells the two apart; it decides nothing.
    async fn require(&self, id: Uuid) -> Result<(), StoreError> {
        let found = sqlx::query("select 1 from runs where id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        found.map(|_| ()).ok_or(StoreError::NotFound { what: "run", id })
    }
}

/// The insert of a new run, on a connection or in a transaction.
pub(super) async fn insert_run_on(conn: &mut PgConnection, run: &NewRun) -> Result<PgRow, StoreError> {
    sqlx::query(concat!(
        "insert into runs (id, skill, tool, skill_hash, arguments, argv, cwd, status, requested_by, \
         approval_id, created_at, started_at, finished_at, instance, mode, request_id, skill_version, \
         idempotency_key, session_id) \
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19) returning ",
        run_columns!()
    ))
    .bind(run.id)
    .bind(&run.skill)
    .bind(&run.tool)
    .bind(&run.skill_hash)
    .bind(&run.arguments)
    .bind(Json(&run.argv))
    .bind(&run.cwd)
    .bind(run.status.as_str())
    .bind(&run.requested_by)
    .bind(run.approval_id)
    .bind(run.created_at)
    .bind(run.started_at)
    .bind(finished_at_insert(run))
    .bind(&run.instance)
    .bind(&run.mode)
    .bind(&run.request_id)
    .bind(&run.skill_version)
    .bind(&run.idempotency_key)
    .bind(run.session)
    .fetch_one(conn)
    .await
    .map_err(StoreError::from)
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
        status: parse_run_status(&status)?,
        requested_by: get(row, "requested_by")?,
        approval_id: get(row, "approval_id")?,
        created_at: get(row, "created_at")?,
        started_at: get(row, "started_at")?,
        finished_at: get(row, "finished_at")?,
        result: get(row, "result")?,
        pgid: get(row, "pgid")?,
        instance: get(row, "instance")?,
        mode: get(row, "mode")?,
        request_id: get(row, "request_id")?,
        note: get(row, "note")?,
        skill_version: get(row, "skill_version")?,
        session: get(row, "session_id")?,
    })
}
