//! Approval requests and grants on PostgreSQL (see `store::approvals`).
//! A held call's run and request, and a decision with its run and grant,
//! are each one transaction; the row lock of a decision makes a racing
//! decider wait, then find the request decided.

use super::runs::insert_run_on;
use super::{PgStore, get};
use crate::store::approvals::{check_pending, parse_approval_status, parse_grant_decision, parse_scope};
use crate::store::runs::parse_run_status;
use crate::store::{
    Approval, ApprovalFilter, ApprovalPage, ApprovalStatus, Approvals, Cursor, Decide, DecidedApproval,
    DecisionFilter, DecisionPage, Grant, Holds, MAX_APPROVALS, NewApproval, NewRun, PolicyFacts, SameCall,
    Scope, StoreError, Undecidable, into_approval_page, into_decision_page, page_size,
};
use chrono::{DateTime, Utc};
use sqlx::postgres::{PgConnection, PgRow};
use sqlx::types::Json;
use sqlx::{Postgres, QueryBuilder};
use uuid::Uuid;

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

/// Records a grant, replacing the one for the same skill, tool and hash.
const UPSERT_GRANT: &str = "insert into grants (id, skill, tool, skill_hash, decision, created_by, created_at) \
     values ($1, $2, $3, $4, $5, $6, $7) \
     on conflict (skill, tool, skill_hash) do update set id = excluded.id, \
     decision = excluded.decision, created_by = excluded.created_by, created_at = excluded.created_at";

#[async_trait::async_trait]
impl Approvals for PgStore {
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
        let limit = filter.limit.clamp(1, MAX_APPROVALS);
        let cursor = filter.cursor.as_deref().map(Cursor::decode).transpose()?;
        if filter.matches_nothing() {
            return Ok(into_decision_page(Vec::new(), limit));
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
        Ok(into_decision_page(decisions, limit))
    }

    async fn list_approvals(&self, filter: ApprovalFilter) -> Result<ApprovalPage, StoreError> {
        let limit = page_size(filter.limit);
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
        Ok(into_approval_page(approvals, limit))
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
        if d.scope == Scope::Always {
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

    async fn count_pending(&self) -> Result<u64, StoreError> {
        let n: i64 = sqlx::query_scalar("select count(*) from approvals where status = 'pending'")
            .fetch_one(&self.pool)
            .await?;
        Ok(u64::try_from(n).unwrap_or(0))
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
}

#[async_trait::async_trait]
impl Holds for PgStore {
    async fn insert_pending(&self, run: NewRun, approval: NewApproval) -> Result<(), StoreError> {
        check_pending(&run, &approval)?;
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
        run_status: parse_run_status(&get::<String>(row, "run_status")?)?,
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
