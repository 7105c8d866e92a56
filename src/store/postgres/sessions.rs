//! Sessions and skill approvals on PostgreSQL (see `store::sessions`).
//! A session's create counts its caller's live sessions and inserts under
//! a transaction-scoped advisory lock on the caller, so two instances
//! creating for one caller at once take turns, and the second counts the
//! first's session.

use super::{PgStore, get};
use crate::store::sessions::{self, EXPIRE_BATCH, MAX_SESSIONS_LISTED, MAX_SKILL_APPROVALS_LISTED};
use crate::store::{
    NewSession, SessionRecord, SessionStore, SkillApproval, SkillApprovals, StoreError, TooMany, keepable,
};
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::postgres::PgRow;
use sqlx::types::Json;
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

/// The advisory lock a caller's creates take turns on: a 64-bit hash of
/// the caller, in a namespace of its own (`anonymous` for no caller, which
/// no `caller:` key can equal). Another lock that happens to share the
/// hash only makes one wait for the other.
const LOCK_CALLER: &str = "select pg_advisory_xact_lock(hashtextextended('skilld.sessions/' || coalesce('caller:' || $1, 'anonymous'), 0))";

#[async_trait::async_trait]
impl SessionStore for PgStore {
    async fn create_session(
        &self,
        s: NewSession,
        max_per_caller: u64,
        now: DateTime<Utc>,
    ) -> Result<Result<SessionRecord, TooMany>, StoreError> {
        let s = s.checked()?;
        // Read committed, whatever the server's default: the count's snapshot
        // is then taken after the lock is held, so it sees every session the
        // lock's last holder committed.
        let mut tx = self
            .pool
            .begin_with("begin isolation level read committed")
            .await?;
        sqlx::query(LOCK_CALLER).bind(&s.caller).execute(&mut *tx).await?;
        // `caller = $1` or `caller is null`, each answered by the index on
        // (caller, expires_at); `is not distinct from` would scan.
        let count = match s.caller {
            Some(_) => "select count(*) from sessions where caller = $1 and expires_at > $2",
            None => {
                "select count(*) from sessions where caller is null and $1::text is null and expires_at > $2"
            }
        };
        let live: i64 = sqlx::query_scalar(count)
            .bind(&s.caller)
            .bind(now)
            .fetch_one(&mut *tx)
            .await?;
        let live = u64::try_from(live).unwrap_or(0);
        if live >= max_per_caller {
            return Ok(Err(TooMany {
                live,
                max: max_per_caller,
            }));
        }
        let row = sqlx::query(concat!(
            "insert into sessions (id, caller, context, turn, state, revision, created_at, updated_at, expires_at, \
             secret_sha256) values ($1, $2, $3, 0, $4, 0, $5, $5, $6, $7) returning ",
            session_columns!()
        ))
        .bind(s.id)
        .bind(&s.caller)
        .bind(&s.context)
        .bind(&s.state)
        .bind(s.created_at)
        .bind(s.expires_at)
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
            " from sessions where id = $1"
        ))
        .bind(id)
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
            "update sessions set turn = $3, state = $4, expires_at = $5, updated_at = $6, revision = revision + 1 \
             where id = $1 and revision = $2 returning ",
            session_columns!()
        ))
        .bind(id)
        .bind(revision)
        .bind(i64::from(turn))
        .bind(keepable(state))
        .bind(expires_at)
        .bind(now)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(session_from_row).transpose()
    }

    async fn end_session(&self, id: Uuid) -> Result<bool, StoreError> {
        let done = sqlx::query("delete from sessions where id = $1")
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// `skip locked`: a session another instance is expiring (or updating)
    /// right now is left to it, so no sweep waits on another.
    async fn expire_sessions(&self, now: DateTime<Utc>) -> Result<Vec<SessionRecord>, StoreError> {
        let rows = sqlx::query(concat!(
            "delete from sessions where id in (select id from sessions where expires_at <= $1 \
             order by expires_at limit $2 for update skip locked) returning ",
            session_columns!()
        ))
        .bind(now)
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
            " from sessions where ($1::text is null or caller = $1) order by created_at desc, id desc limit $2"
        ))
        .bind(caller)
        .bind(i64::from(limit.clamp(1, MAX_SESSIONS_LISTED)))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(session_from_row).collect()
    }
}

#[async_trait::async_trait]
impl SkillApprovals for PgStore {
    async fn put_skill_approval(&self, a: SkillApproval) -> Result<(), StoreError> {
        a.check()?;
        sqlx::query(
            "insert into skill_approvals (skill, skill_hash, permissions, decided_by, decided_at) \
             values ($1, $2, $3, $4, $5) on conflict (skill, skill_hash) do update set \
             permissions = excluded.permissions, decided_by = excluded.decided_by, decided_at = excluded.decided_at",
        )
        .bind(&a.skill)
        .bind(&a.skill_hash)
        .bind(Json(&a.permissions))
        .bind(&a.decided_by)
        .bind(a.decided_at)
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
            " from skill_approvals where skill = $1 and skill_hash = $2"
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
            " from skill_approvals where ($1::text is null or skill = $1) \
             order by decided_at desc, skill, skill_hash limit $2"
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
        let done = sqlx::query("delete from skill_approvals where skill = $1")
            .bind(skill)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected())
    }
}

fn session_from_row(row: &PgRow) -> Result<SessionRecord, StoreError> {
    Ok(SessionRecord {
        id: get(row, "id")?,
        caller: get(row, "caller")?,
        context: get(row, "context")?,
        turn: sessions::turn_of(get(row, "turn")?)?,
        state: get(row, "state")?,
        revision: get(row, "revision")?,
        created_at: get(row, "created_at")?,
        updated_at: get(row, "updated_at")?,
        expires_at: get(row, "expires_at")?,
        secret_sha256: get(row, "secret_sha256")?,
    })
}

fn approval_from_row(row: &PgRow) -> Result<SkillApproval, StoreError> {
    Ok(SkillApproval {
        skill: get(row, "skill")?,
        skill_hash: get(row, "skill_hash")?,
        permissions: get::<Json<Vec<String>>>(row, "permissions")?.0,
        decided_by: get(row, "decided_by")?,
        decided_at: get(row, "decided_at")?,
    })
}
