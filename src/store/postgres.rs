//! [`Store`] on PostgreSQL: what several skilld instances share
//! (`docs/design.md` §6). Every state change is a conditional `update … returning`
//! (in a transaction where two tables change together), so of two instances
//! racing for the same run or request exactly one gets it. A trigger
//! notifies `skilld_runs` of every run status change; each store listens,
//! so a caller waiting on one instance wakes when another decides or
//! finishes its run.

mod sessions;

use super::approvals::{parse_approval_status, parse_grant_decision, parse_scope};
use super::{
    Approval, ApprovalFilter, ApprovalPage, ApprovalStatus, Attempt, CachedIndex, Cursor, Decide,
    DecidedApproval, DecisionFilter, DecisionPage, Grant, NewApproval, NewNotification, NewRun, NewSession,
    Notification, NotificationStatus, PolicyFacts, PruneExport, Run, RunFilter, RunPage, RunPosition,
    RunStatus, SameCall, SessionRecord, SkillApproval, Store, StoreError, TooMany, Undecidable,
};
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::error::DatabaseError;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgListener, PgPool, PgPoolOptions, PgRow};
use sqlx::types::Json;
use sqlx::{Postgres, QueryBuilder, Row};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;
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

/// Every column of `approvals`, in the order [`approval_from_row`] reads them.
macro_rules! approval_columns {
    () => {
        "id, run_id, skill, tool, description, trust, warning, arguments, argv, cwd, skill_hash, status, \
         scope, requested_by, decided_by, note, created_at, decided_at, expires_at, mode, caller_left_at, \
         permissions"
    };
}

/// Every column of `notifications` [`notification_from_row`] reads.
macro_rules! notification_columns {
    () => {
        "id, event, approval_id, target, payload, status, attempts, last_status, last_error, \
         created_at, next_attempt_at, delivered_at"
    };
}

/// Every column of `grants`, in the order [`grant_from_row`] reads them.
macro_rules! grant_columns {
    () => {
        "id, skill, tool, skill_hash, decision, created_by, created_at"
    };
}

/// The channel the `runs` trigger notifies (see migrations/postgres/0002).
const CHANNEL: &str = "skilld_runs";

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
/// Records a grant, replacing the one for the same skill, tool and hash.
const UPSERT_GRANT: &str = "insert into grants (id, skill, tool, skill_hash, decision, created_by, created_at) \
     values ($1, $2, $3, $4, $5, $6, $7) \
     on conflict (skill, tool, skill_hash) do update set id = excluded.id, \
     decision = excluded.decision, created_by = excluded.created_by, created_at = excluded.created_at";

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
    changes: broadcast::Sender<Uuid>,
    /// Stops the listener when the last clone of the store goes.
    _listener: Arc<ListenerTask>,
}

/// The task that forwards notifications into `changes`.
#[derive(Debug)]
struct ListenerTask(tokio::task::JoinHandle<()>);

impl Drop for ListenerTask {
    fn drop(&mut self) {
        self.0.abort();
    }
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
            // No ping before each statement: it was a second round trip
            // per statement, and a connection the server has closed (a
            // restart, a failover, an idle timeout) is found out and
            // replaced without it (`cut_postgres_connections_are_replaced`).
            .test_before_acquire(false)
            .connect_with(options)
            .await?;
        sqlx::migrate!("./migrations/postgres").run(&pool).await?;
        let changes = broadcast::channel(super::CHANGES_CAPACITY).0;
        let mut listener = PgListener::connect_with(&pool).await?;
        listener.listen(CHANNEL).await?;
        let task = tokio::spawn(forward_notifications(listener, changes.clone()));
        Ok(Self {
            pool,
            changes,
            _listener: Arc::new(ListenerTask(task)),
        })
    }

    fn changed(&self, id: Uuid) {
        let _ = self.changes.send(id);
    }
}

/// Forwards every notified run id. `PgListener::recv` reconnects after a
/// lost connection, but notifications sent meanwhile are gone; waiters also
/// re-read on a timer, so a lost one only delays them.
async fn forward_notifications(mut listener: PgListener, changes: broadcast::Sender<Uuid>) {
    loop {
        match listener.recv().await {
            Ok(note) => {
                if let Ok(id) = Uuid::try_parse(note.payload()) {
                    let _ = changes.send(id);
                }
            }
            Err(err) => {
                tracing::warn!(%err, "lost the PostgreSQL notification channel; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

#[async_trait::async_trait]
impl Store for PgStore {
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
        super::check_new(&run)?;
        let mut conn = self.pool.acquire().await?;
        let row = insert_run_on(&mut conn, &run).await?;
        drop(conn);
        self.changed(run.id);
        run_from_row(&row)
    }

    async fn insert_pending(&self, run: NewRun, approval: NewApproval) -> Result<(), StoreError> {
        super::check_pending(&run, &approval)?;
        let mut tx = self.pool.begin().await?;
        insert_run_on(&mut tx, &run).await?;
        sqlx::query(
            "insert into approvals (id, run_id, skill, tool, description, trust, warning, arguments, argv, cwd, \
             skill_hash, status, requested_by, created_at, expires_at, mode, permissions, call_digest) \
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'pending', $12, $13, $14, $15, $16, $17)",
        )
        .bind(approval.id)
        .bind(run.id)
        .bind(&run.skill)
        .bind(&run.tool)
        .bind(approval.description)
        .bind(approval.trust)
        .bind(approval.warning)
        .bind(&run.arguments)
        .bind(Json(&run.argv))
        .bind(&run.cwd)
        .bind(&run.skill_hash)
        .bind(&run.requested_by)
        .bind(run.created_at)
        .bind(approval.expires_at)
        .bind(&run.mode)
        .bind(Json(&approval.permissions))
        .bind(SameCall::of_run(&run).digest())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        self.changed(run.id);
        Ok(())
    }

    async fn policy_facts(
        &self,
        skill: &str,
        tool: &str,
        skill_hash: &str,
    ) -> Result<PolicyFacts, StoreError> {
        let row = sqlx::query(
            "select g.decision as grant_decision, g.created_by as grant_by, \
             (exists (select 1 from approvals where skill = $1 and skill_hash = $3 and status = 'approved') \
              or exists (select 1 from grants where skill = $1 and skill_hash = $3 and decision = 'allow') \
              or exists (select 1 from approved_versions where skill = $1 and skill_hash = $3)) as approved \
             from (select 1) as one left join grants g on g.skill = $1 and g.tool = $2 and g.skill_hash = $3",
        )
        .bind(skill)
        .bind(tool)
        .bind(skill_hash)
        .fetch_one(&self.pool)
        .await?;
        Ok(PolicyFacts {
            grant: get::<Option<String>>(&row, "grant_decision")?
                .as_deref()
                .map(parse_grant_decision)
                .transpose()?,
            grant_by: get(&row, "grant_by")?,
            hash_approved: get::<bool>(&row, "approved")?,
        })
    }

    async fn get_approval(&self, id: Uuid) -> Result<Approval, StoreError> {
        let row = sqlx::query(concat!(
            "select ",
            approval_columns!(),
            " from approvals where id = $1"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?
        .ok_or(StoreError::NotFound { what: "approval", id })?;
        approval_from_row(&row)
    }

    async fn approval_of_run(&self, run_id: Uuid) -> Result<Option<Approval>, StoreError> {
        let row = sqlx::query(concat!(
            "select ",
            approval_columns!(),
            " from approvals where run_id = $1"
        ))
        .bind(run_id)
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
        let mut query = QueryBuilder::<Postgres>::new(concat!(
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
                .push_bind(cursor.at)
                .push(", ")
                .push_bind(cursor.id)
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
             next_attempt_at) values ($1, $2, $3, $4, $5, 'pending', $6, $6) \
             on conflict (event, approval_id, target) do nothing",
        )
        .bind(n.id)
        .bind(&n.event)
        .bind(n.approval_id)
        .bind(&n.target)
        .bind(super::keepable(n.payload))
        .bind(n.created_at)
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
        // `skip locked`: instances claiming at once each get other rows.
        let rows = sqlx::query(concat!(
            "update notifications set claimed_by = $1, claimed_until = $2, attempts = attempts + 1 \
             where id in (select id from notifications where status = 'pending' and next_attempt_at <= $3 \
             and (claimed_until is null or claimed_until <= $3) order by next_attempt_at limit $4 \
             for update skip locked) returning ",
            notification_columns!()
        ))
        .bind(instance)
        .bind(lease_until)
        .bind(now)
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
            "update notifications set status = $1, last_status = $2, last_error = $3, next_attempt_at = $4, \
             delivered_at = $5, claimed_by = null, claimed_until = null where id = $6 and claimed_by = $7",
        )
        .bind(attempt.status().as_str())
        .bind(attempt.http_status())
        .bind(attempt.error().map(|e| super::keepable_text(e.to_owned())))
        .bind(next)
        .bind(delivered)
        .bind(id)
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
            QueryBuilder::<Postgres>::new(concat!("select ", notification_columns!(), " from notifications"));
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
        let mut query = QueryBuilder::<Postgres>::new(concat!(
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
                .push_bind(cursor.at)
                .push(", ")
                .push_bind(cursor.id)
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
        let status = if d.approve {
            ApprovalStatus::Approved
        } else {
            ApprovalStatus::Denied
        };
        let mut tx = self.pool.begin().await?;
        // The row lock taken here makes a racing decider wait for this
        // transaction, then find the request no longer pending.
        let row = sqlx::query(concat!(
            "update approvals set status = $2, scope = $3, decided_by = $4, note = $5, decided_at = $6 \
             where id = $1 and status = 'pending' and expires_at > $6 returning ",
            approval_columns!()
        ))
        .bind(d.approval_id)
        .bind(status.as_str())
        .bind(d.scope.as_str())
        .bind(&d.decided_by)
        .bind(&d.note)
        .bind(d.at)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else {
            let current = sqlx::query(concat!(
                "select ",
                approval_columns!(),
                " from approvals where id = $1 for update"
            ))
            .bind(d.approval_id)
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
            expire_on(&mut tx, current.run_id, d.at).await?;
            tx.commit().await?;
            self.changed(current.run_id);
            return Ok(Err(Undecidable::Expired));
        };
        let approval = approval_from_row(&row)?;
        let run = if d.approve {
            sqlx::query(
                "update runs set status = 'queued', instance = $2, note = $3 where id = $1 and status = 'pending_approval'",
            )
            .bind(approval.run_id)
            .bind(&d.instance)
            .bind(&d.note)
        } else {
            sqlx::query(
                "update runs set status = 'denied', finished_at = $2, note = $3 \
                 where id = $1 and status = 'pending_approval'",
            )
            .bind(approval.run_id)
            .bind(d.at)
            .bind(&d.note)
        };
        let moved = run.execute(&mut *tx).await?;
        if moved.rows_affected() != 1 {
            // Cannot happen while every path that ends a pending run also
            // closes its request; refuse rather than decide a run that
            // is no longer waiting.
            return Err(StoreError::Conflict(format!(
                "run {} is no longer waiting for approval",
                approval.run_id
            )));
        }
        if d.scope == super::Scope::Always {
            sqlx::query(UPSERT_GRANT)
                .bind(Uuid::now_v7())
                .bind(&approval.skill)
                .bind(&approval.tool)
                .bind(&approval.skill_hash)
                .bind(if d.approve { "allow" } else { "deny" })
                .bind(&d.decided_by)
                .bind(d.at)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        self.changed(approval.run_id);
        Ok(Ok(approval))
    }

    async fn expire_approvals(&self, at: DateTime<Utc>) -> Result<Vec<Uuid>, StoreError> {
        // One statement: ending each overdue run expires its request
        // through the trigger `runs_withdraw_request`.
        let runs: Vec<Uuid> = sqlx::query_scalar(
            "update runs set status = 'expired', finished_at = $1 where status = 'pending_approval' \
             and approval_id in (select id from approvals where status = 'pending' and expires_at <= $1) \
             returning id",
        )
        .bind(at)
        .fetch_all(&self.pool)
        .await?;
        for run in &runs {
            self.changed(*run);
        }
        Ok(runs)
    }

    async fn mark_caller_left(&self, approval: Uuid, at: DateTime<Utc>) -> Result<(), StoreError> {
        // Every instance's inbox shows that nobody waits any more: the
        // change is announced as the run's, as a status change is.
        sqlx::query(
            "with left_ as (update approvals set caller_left_at = $1 \
             where id = $2 and status = 'pending' and caller_left_at is null returning run_id) \
             select pg_notify('skilld_runs', run_id::text) from left_",
        )
        .bind(at)
        .bind(approval)
        .execute(&self.pool)
        .await?;
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
            "select count(*) from approvals \
             where status = 'pending' and requested_by is not distinct from $1 and expires_at > $2",
        )
        .bind(requested_by)
        .bind(at)
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
            " from approvals where status = 'pending' and call_digest = $1 and expires_at > $2 \
             union all select ",
            approval_columns!(),
            " from approvals where status = 'pending' and call_digest is null \
             and requested_by is not distinct from $3 and skill = $4 and tool = $5 and skill_hash = $6 \
             and mode is not distinct from $7 and expires_at > $2 order by created_at, id limit $8"
        ))
        .bind(call.digest())
        .bind(at)
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

    async fn put_grants(&self, grants: Vec<Grant>) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        for grant in &grants {
            sqlx::query(UPSERT_GRANT)
                .bind(grant.id)
                .bind(&grant.skill)
                .bind(&grant.tool)
                .bind(&grant.skill_hash)
                .bind(grant.decision.as_str())
                .bind(&grant.created_by)
                .bind(grant.created_at)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn list_grants(&self, skill: Option<&str>) -> Result<Vec<Grant>, StoreError> {
        let rows = sqlx::query(concat!(
            "select ",
            grant_columns!(),
            " from grants where ($1::text is null or skill = $1) order by created_at desc, id desc limit ",
            max_grants_listed!()
        ))
        .bind(skill)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(grant_from_row).collect()
    }

    async fn revoke_grant(&self, id: Uuid) -> Result<(), StoreError> {
        let done = sqlx::query("delete from grants where id = $1")
            .bind(id)
            .execute(&self.pool)
            .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound { what: "grant", id });
        }
        Ok(())
    }

    async fn revoke_grants_of(&self, skill: &str) -> Result<u64, StoreError> {
        let done = sqlx::query("delete from grants where skill = $1")
            .bind(skill)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected())
    }

    async fn cached_index(&self, url: &str) -> Result<Option<CachedIndex>, StoreError> {
        let row = sqlx::query("select body, fetched_at from registry_cache where url = $1")
            .bind(url)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|row| {
            Ok(CachedIndex {
                url: url.to_owned(),
                body: row.try_get("body")?,
                fetched_at: row.try_get("fetched_at")?,
            })
        })
        .transpose()
    }

    async fn cache_index(&self, index: CachedIndex) -> Result<(), StoreError> {
        sqlx::query(
            "insert into registry_cache (url, body, fetched_at) values ($1, $2, $3) \
             on conflict (url) do update set body = excluded.body, fetched_at = excluded.fetched_at",
        )
        .bind(&index.url)
        .bind(&index.body)
        .bind(index.fetched_at)
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

    async fn finish_runs(&self, ends: &[super::RunEnd]) -> Result<(), StoreError> {
        for end in ends {
            super::check_final(end.status)?;
        }
        let ids: Vec<Uuid> = ends.iter().map(|e| e.id).collect();
        let statuses: Vec<&str> = ends.iter().map(|e| e.status.as_str()).collect();
        let results: Vec<Option<Value>> = ends
            .iter()
            .map(|e| e.result.clone().map(super::keepable))
            .collect();
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
        let limit = super::page_size(filter.limit);
        let cursor = filter.cursor.as_deref().map(Cursor::decode).transpose()?;
        if filter.matches_nothing() {
            return Ok(super::into_page(Vec::new(), limit));
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
        Ok(super::into_page(runs, limit))
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
            export.export(&runs).await.map_err(|e| super::export_failed(&e))?;
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
        super::check_final(status)?;
        let result = result.map(super::keepable);
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
async fn insert_run_on(conn: &mut PgConnection, run: &NewRun) -> Result<PgRow, StoreError> {
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
    .bind(super::finished_at_insert(run))
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

/// Ends a run still waiting for approval as `expired`; the trigger
/// `runs_withdraw_request` expires its request in the same statement.
async fn expire_on(conn: &mut PgConnection, run: Uuid, at: DateTime<Utc>) -> Result<(), StoreError> {
    sqlx::query(
        "update runs set status = 'expired', finished_at = $2 where id = $1 and status = 'pending_approval'",
    )
    .bind(run)
    .bind(at)
    .execute(conn)
    .await?;
    Ok(())
}

fn approval_from_row(row: &PgRow) -> Result<Approval, StoreError> {
    Ok(Approval {
        id: get(row, "id")?,
        run_id: get(row, "run_id")?,
        skill: get(row, "skill")?,
        tool: get(row, "tool")?,
        description: get(row, "description")?,
        trust: get(row, "trust")?,
        warning: get(row, "warning")?,
        arguments: get(row, "arguments")?,
        argv: get::<Json<Vec<String>>>(row, "argv")?.0,
        cwd: get(row, "cwd")?,
        permissions: get::<Json<Vec<String>>>(row, "permissions")?.0,
        skill_hash: get(row, "skill_hash")?,
        status: parse_approval_status(&get::<String>(row, "status")?)?,
        scope: parse_scope(get(row, "scope")?)?,
        requested_by: get(row, "requested_by")?,
        decided_by: get(row, "decided_by")?,
        note: get(row, "note")?,
        created_at: get(row, "created_at")?,
        decided_at: get(row, "decided_at")?,
        expires_at: get(row, "expires_at")?,
        mode: get(row, "mode")?,
        caller_left_at: get(row, "caller_left_at")?,
    })
}

fn decided_from_row(row: &PgRow) -> Result<DecidedApproval, StoreError> {
    Ok(DecidedApproval {
        approval: approval_from_row(row)?,
        run_status: super::parse_run_status(&get::<String>(row, "run_status")?)?,
    })
}

fn notification_from_row(row: &PgRow) -> Result<Notification, StoreError> {
    Ok(Notification {
        id: get(row, "id")?,
        event: get(row, "event")?,
        approval_id: get(row, "approval_id")?,
        target: get(row, "target")?,
        status: NotificationStatus::parse(&get::<String>(row, "status")?)?,
        attempts: u32::try_from(get::<i32>(row, "attempts")?).unwrap_or(0),
        last_status: super::http_status(get(row, "last_status")?),
        last_error: get(row, "last_error")?,
        created_at: get(row, "created_at")?,
        next_attempt_at: get(row, "next_attempt_at")?,
        delivered_at: get(row, "delivered_at")?,
        payload: get(row, "payload")?,
    })
}

fn grant_from_row(row: &PgRow) -> Result<Grant, StoreError> {
    Ok(Grant {
        id: get(row, "id")?,
        skill: get(row, "skill")?,
        tool: get(row, "tool")?,
        skill_hash: get(row, "skill_hash")?,
        decision: parse_grant_decision(&get::<String>(row, "decision")?)?,
        created_by: get(row, "created_by")?,
        created_at: get(row, "created_at")?,
    })
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
        status: super::parse_run_status(&status)?,
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

fn get<'r, T>(row: &'r PgRow, column: &str) -> Result<T, StoreError>
where
    T: sqlx::Decode<'r, Postgres> + sqlx::Type<Postgres>,
{
    row.try_get(column).map_err(StoreError::from)
}

/// SQLSTATEs that mean the server cannot serve us right now rather than that
/// the statement was wrong: connection exceptions (08), insufficient
/// resources (53, e.g. too many connections), operator intervention (57P,
/// shutting down or starting up), and a read-only server (25006, a standby
/// after a failover).
pub(super) fn transient(err: &dyn DatabaseError) -> bool {
    err.code().is_some_and(|code| {
        code.starts_with("08") || code.starts_with("53") || code.starts_with("57P") || code == "25006"
    })
}
