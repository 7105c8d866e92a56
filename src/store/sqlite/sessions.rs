//! Sessions and skill approvals on SQLite (see `store::sessions`). Not
//! the hot path: through the sqlx pool, a session's create in an immediate
//! transaction, so its count and its insert hold the one write lock.

use super::{BEGIN, SqliteStore, get, json_text, parse_json, parse_time, parse_uuid, time_text};
use crate::store::sessions::{self, EXPIRE_BATCH, MAX_SESSIONS_LISTED, MAX_SKILL_APPROVALS_LISTED};
use crate::store::{
    NewSession, SessionRecord, SessionStore, SkillApproval, SkillApprovals, StoreError, TooMany, keepable,
};
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::sqlite::SqliteRow;
use uuid::Uuid;

/// Every column of `sessions`, in the order [`session_from_row`] reads them.
macro_rules! session_columns {
    () => {
        "id, caller, context, turn, state, revision, created_at, updated_at, expires_at, secret_sha256"
    };
}

/// Every column of `skill_approvals`, as [`approval_from_row`] reads them.
macro_rules! skill_approval_columns {
    () => {
        "skill, skill_hash, permissions, decided_by, decided_at"
    };
}

#[async_trait::async_trait]
impl SessionStore for SqliteStore {
    async fn create_session(
        &self,
        s: NewSession,
        max_per_caller: u64,
        now: DateTime<Utc>,
    ) -> Result<Result<SessionRecord, TooMany>, StoreError> {
        let s = s.checked()?;
        let mut tx = self.pool.begin_with(BEGIN).await?;
        let live: i64 =
            sqlx::query_scalar("select count(*) from sessions where caller is ? and expires_at > ?")
                .bind(&s.caller)
                .bind(time_text(now)?)
                .fetch_one(&mut *tx)
                .await?;
        let live = u64::try_from(live).unwrap_or(0);
        if live >= max_per_caller {
            return Ok(Err(TooMany {
                live,
                max: max_per_caller,
            }));
        }
        let created = time_text(s.created_at)?;
        let row = sqlx::query(concat!(
            "insert into sessions (id, caller, context, turn, state, revision, created_at, updated_at, expires_at, \
             secret_sha256) values (?, ?, ?, 0, ?, 0, ?, ?, ?, ?) returning ",
            session_columns!()
        ))
        .bind(s.id.to_string())
        .bind(&s.caller)
        .bind(json_text(&s.context)?)
        .bind(json_text(&s.state)?)
        .bind(&created)
        .bind(&created)
        .bind(time_text(s.expires_at)?)
        .bind(&s.secret_sha256)
        .fetch_one(&mut *tx)
        .await?;
        let record = session_from_row(&row)?;
        tx.commit().await?;
        Ok(Ok(record))
    }

    async fn get_session(&self, id: Uuid) -> Result<Option<SessionRecord>, StoreError> {
        let row = sqlx::query(concat!(
            "select ",
            session_columns!(),
            " from sessions where id = ?"
        ))
        .bind(id.to_string())
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(session_from_row).transpose()
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
        let row = sqlx::query(concat!(
            "update sessions set turn = ?, state = ?, expires_at = ?, updated_at = ?, revision = revision + 1 \
             where id = ? and revision = ? returning ",
            session_columns!()
        ))
        .bind(i64::from(turn))
        .bind(json_text(&keepable(state))?)
        .bind(time_text(expires_at)?)
        .bind(time_text(now)?)
        .bind(id.to_string())
        .bind(revision)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(session_from_row).transpose()
    }

    async fn end_session(&self, id: Uuid) -> Result<bool, StoreError> {
        let done = sqlx::query("delete from sessions where id = ?")
            .bind(id.to_string())
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn expire_sessions(&self, now: DateTime<Utc>) -> Result<Vec<SessionRecord>, StoreError> {
        let rows = sqlx::query(concat!(
            "delete from sessions where id in \
             (select id from sessions where expires_at <= ? order by expires_at limit ?) returning ",
            session_columns!()
        ))
        .bind(time_text(now)?)
        .bind(i64::from(EXPIRE_BATCH))
        .fetch_all(&self.pool)
        .await?;
        let mut gone = rows.iter().map(session_from_row).collect::<Result<Vec<_>, _>>()?;
        // RETURNING follows no order: the oldest expiry first, as documented.
        gone.sort_by_key(|s| (s.expires_at, s.id));
        Ok(gone)
    }

    async fn list_sessions(
        &self,
        caller: Option<&str>,
        limit: u32,
    ) -> Result<Vec<SessionRecord>, StoreError> {
        if caller.is_some_and(|c| sessions::holds_nul(&[c])) {
            return Ok(Vec::new());
        }
        let rows = sqlx::query(concat!(
            "select ",
            session_columns!(),
            " from sessions where (?1 is null or caller = ?1) order by created_at desc, id desc limit ?2"
        ))
        .bind(caller)
        .bind(i64::from(limit.clamp(1, MAX_SESSIONS_LISTED)))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(session_from_row).collect()
    }
}

#[async_trait::async_trait]
impl SkillApprovals for SqliteStore {
    async fn put_skill_approval(&self, a: SkillApproval) -> Result<(), StoreError> {
        a.check()?;
        sqlx::query(
            "insert into skill_approvals (skill, skill_hash, permissions, decided_by, decided_at) \
             values (?, ?, ?, ?, ?) on conflict (skill, skill_hash) do update set \
             permissions = excluded.permissions, decided_by = excluded.decided_by, decided_at = excluded.decided_at",
        )
        .bind(&a.skill)
        .bind(&a.skill_hash)
        .bind(json_text(&a.permissions)?)
        .bind(&a.decided_by)
        .bind(time_text(a.decided_at)?)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn skill_approval(
        &self,
        skill: &str,
        skill_hash: &str,
    ) -> Result<Option<SkillApproval>, StoreError> {
        if sessions::holds_nul(&[skill, skill_hash]) {
            return Ok(None);
        }
        let row = sqlx::query(concat!(
            "select ",
            skill_approval_columns!(),
            " from skill_approvals where skill = ? and skill_hash = ?"
        ))
        .bind(skill)
        .bind(skill_hash)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(approval_from_row).transpose()
    }

    async fn list_skill_approvals(&self, skill: Option<&str>) -> Result<Vec<SkillApproval>, StoreError> {
        if skill.is_some_and(|s| sessions::holds_nul(&[s])) {
            return Ok(Vec::new());
        }
        let rows = sqlx::query(concat!(
            "select ",
            skill_approval_columns!(),
            " from skill_approvals where (?1 is null or skill = ?1) \
             order by decided_at desc, skill, skill_hash limit ?2"
        ))
        .bind(skill)
        .bind(i64::from(MAX_SKILL_APPROVALS_LISTED))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(approval_from_row).collect()
    }

    async fn revoke_skill_approvals(&self, skill: &str) -> Result<u64, StoreError> {
        if sessions::holds_nul(&[skill]) {
            return Ok(0);
        }
        let done = sqlx::query("delete from skill_approvals where skill = ?")
            .bind(skill)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected())
    }
}

fn session_from_row(row: &SqliteRow) -> Result<SessionRecord, StoreError> {
    Ok(SessionRecord {
        id: parse_uuid(&get::<String>(row, "id")?)?,
        caller: get(row, "caller")?,
        context: parse_json(&get::<String>(row, "context")?)?,
        turn: sessions::turn_of(get(row, "turn")?)?,
        state: parse_json(&get::<String>(row, "state")?)?,
        revision: get(row, "revision")?,
        created_at: parse_time(&get::<String>(row, "created_at")?)?,
        updated_at: parse_time(&get::<String>(row, "updated_at")?)?,
        expires_at: parse_time(&get::<String>(row, "expires_at")?)?,
        secret_sha256: get(row, "secret_sha256")?,
    })
}

fn approval_from_row(row: &SqliteRow) -> Result<SkillApproval, StoreError> {
    Ok(SkillApproval {
        skill: get(row, "skill")?,
        skill_hash: get(row, "skill_hash")?,
        permissions: parse_json(&get::<String>(row, "permissions")?)?,
        decided_by: get(row, "decided_by")?,
        decided_at: parse_time(&get::<String>(row, "decided_at")?)?,
    })
}
