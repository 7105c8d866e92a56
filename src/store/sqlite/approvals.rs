//! Approval requests and grants on SQLite (see `store::approvals`). A held
//! call's run and request go in one write of the hot path; a decision is
//! one immediate transaction over the request, its run and any grant.

use super::runs::insert_run_on;
use super::writer::WriteError;
use super::{
    BEGIN, FACTS_CACHE_MAX, SqliteStore, get, json_text, parse_json, parse_time, parse_uuid, time_text,
};
use crate::store::approvals::{check_pending, parse_approval_status, parse_grant_decision, parse_scope};
use crate::store::runs::parse_run_status;
use crate::store::{
    Approval, ApprovalFilter, ApprovalPage, ApprovalStatus, Approvals, Cursor, Decide, DecidedApproval,
    DecisionFilter, DecisionPage, Grant, Holds, MAX_APPROVALS, NewApproval, NewRun, PolicyFacts, SameCall,
    Scope, StoreError, Undecidable, into_approval_page, into_decision_page, page_size,
};
use chrono::{DateTime, Utc};
use sqlx::sqlite::SqliteRow;
use sqlx::{QueryBuilder, Sqlite, SqliteConnection};
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

/// Records a pending request, written together with its run.
const INSERT_REQUEST: &str = "insert into approvals (id, run_id, skill, tool, description, trust, warning, \
     arguments, argv, cwd, skill_hash, status, requested_by, created_at, expires_at, mode, permissions, \
     call_digest) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?, ?)";
/// Records a grant, replacing the one for the same skill, tool and hash.
const UPSERT_GRANT: &str = "insert into grants (id, skill, tool, skill_hash, decision, created_by, created_at) \
     values (?, ?, ?, ?, ?, ?, ?) \
     on conflict (skill, tool, skill_hash) do update set id = excluded.id, \
     decision = excluded.decision, created_by = excluded.created_by, created_at = excluded.created_at";

#[async_trait::async_trait]
impl Approvals for SqliteStore {
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
        let limit = filter.limit.clamp(1, MAX_APPROVALS);
        let cursor = filter.cursor.as_deref().map(Cursor::decode).transpose()?;
        if filter.matches_nothing() {
            return Ok(into_decision_page(Vec::new(), limit));
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
        Ok(into_decision_page(decisions, limit))
    }

    async fn list_approvals(&self, filter: ApprovalFilter) -> Result<ApprovalPage, StoreError> {
        let limit = page_size(filter.limit);
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
        Ok(into_approval_page(approvals, limit))
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
        if d.scope == Scope::Always {
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

    async fn count_pending(&self) -> Result<u64, StoreError> {
        let n: i64 = sqlx::query_scalar("select count(*) from approvals where status = 'pending'")
            .fetch_one(&self.pool)
            .await?;
        Ok(u64::try_from(n).unwrap_or(0))
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
}

#[async_trait::async_trait]
impl Holds for SqliteStore {
    async fn insert_pending(&self, run: NewRun, approval: NewApproval) -> Result<(), StoreError> {
        check_pending(&run, &approval)?;
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

/// Ends a run still waiting for approval as `expired`; the trigger
/// `runs_withdraw_request` expires its request in the same statement.
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
        run_status: parse_run_status(&get::<String>(row, "run_status")?)?,
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
