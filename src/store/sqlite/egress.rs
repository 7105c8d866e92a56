//! Held destinations and egress grants on SQLite (see `store::egress`).
//! Not the hot path: through the sqlx pool, a decision in one immediate
//! transaction, so its read, its update and its grant hold the one write
//! lock and a racing decider finds the request decided.

use super::{BEGIN, SqliteStore, get, parse_time, parse_uuid, time_text};
use crate::store::approvals::{parse_approval_status, parse_scope};
use crate::store::egress::{check_decide, check_new};
use crate::store::sessions::holds_nul;
use crate::store::{
    ApprovalStatus, EgressDecide, EgressDecisions, EgressGrant, EgressRequest, EgressUndecidable,
    NewEgressRequest, Scope, StoreError,
};
use chrono::{DateTime, Utc};
use sqlx::SqliteConnection;
use sqlx::sqlite::SqliteRow;
use uuid::Uuid;

/// Every column of `egress_requests`, in the order [`request_from_row`]
/// reads them.
macro_rules! request_columns {
    () => {
        "id, run_id, skill, skill_version, skill_hash, tool, requested_by, host, port, status, scope, \
         decided_by, note, created_at, expires_at, decided_at"
    };
}

/// Every column of `egress_grants`, as [`grant_from_row`] reads them.
macro_rules! grant_columns {
    () => {
        "skill, skill_hash, host, port, decided_by, note, created_at, request_id"
    };
}

/// The most pending requests listed at once.
const MAX_PENDING_LISTED: u32 = 1000;

#[async_trait::async_trait]
impl EgressDecisions for SqliteStore {
    async fn hold_destination(&self, r: NewEgressRequest) -> Result<(), StoreError> {
        check_new(&r)?;
        sqlx::query(
            "insert into egress_requests (id, run_id, skill, skill_version, skill_hash, tool, requested_by, \
             host, port, status, created_at, expires_at) values (?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)",
        )
        .bind(r.id.to_string())
        .bind(r.run_id.map(|id| id.to_string()))
        .bind(&r.skill)
        .bind(&r.skill_version)
        .bind(&r.skill_hash)
        .bind(&r.tool)
        .bind(&r.requested_by)
        .bind(&r.host)
        .bind(i64::from(r.port))
        .bind(time_text(r.created_at)?)
        .bind(time_text(r.expires_at)?)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn egress_request(&self, id: Uuid) -> Result<EgressRequest, StoreError> {
        let row = sqlx::query(concat!(
            "select ",
            request_columns!(),
            " from egress_requests where id = ?"
        ))
        .bind(id.to_string())
        .fetch_optional(&self.pool)
        .await?
        .ok_or(not_found(id))?;
        request_from_row(&row)
    }

    async fn pending_egress(&self, at: DateTime<Utc>, limit: u32) -> Result<Vec<EgressRequest>, StoreError> {
        let rows = sqlx::query(concat!(
            "select ",
            request_columns!(),
            " from egress_requests where status = 'pending' and expires_at > ? \
             order by created_at, id limit ?"
        ))
        .bind(time_text(at)?)
        .bind(i64::from(limit.clamp(1, MAX_PENDING_LISTED)))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(request_from_row).collect()
    }

    async fn decide_egress(
        &self,
        d: EgressDecide,
    ) -> Result<Result<EgressRequest, EgressUndecidable>, StoreError> {
        check_decide(&d)?;
        let at = time_text(d.at)?;
        let mut tx = self.pool.begin_with(BEGIN).await?;
        let Some(request) = decide_on(&mut tx, &d, &at).await? else {
            let why = undecidable_on(&mut tx, d.id, &at).await?;
            tx.commit().await?;
            return Ok(Err(why));
        };
        if d.allow && d.scope == Scope::Always {
            insert_grant_on(&mut tx, &request, &d, &at).await?;
        }
        tx.commit().await?;
        Ok(Ok(request))
    }

    async fn expire_egress(&self, id: Uuid, at: DateTime<Utc>) -> Result<EgressRequest, StoreError> {
        let mut tx = self.pool.begin_with(BEGIN).await?;
        expire_on(&mut tx, id, &time_text(at)?).await?;
        let request = request_on(&mut tx, id).await?.ok_or(not_found(id))?;
        tx.commit().await?;
        Ok(request)
    }

    async fn egress_granted(
        &self,
        skill: &str,
        skill_hash: &str,
        host: &str,
        port: u16,
    ) -> Result<bool, StoreError> {
        if holds_nul(&[skill, skill_hash, host]) {
            return Ok(false);
        }
        let granted: bool = sqlx::query_scalar(
            "select exists (select 1 from egress_grants \
             where skill = ? and skill_hash = ? and host = ? and port = ?)",
        )
        .bind(skill)
        .bind(skill_hash)
        .bind(host)
        .bind(i64::from(port))
        .fetch_one(&self.pool)
        .await?;
        Ok(granted)
    }

    async fn egress_grants(&self, skill: Option<&str>) -> Result<Vec<EgressGrant>, StoreError> {
        if skill.is_some_and(|s| holds_nul(&[s])) {
            return Ok(Vec::new());
        }
        let rows = sqlx::query(concat!(
            "select ",
            grant_columns!(),
            " from egress_grants where (?1 is null or skill = ?1) \
             order by created_at desc, request_id desc limit ",
            max_grants_listed!()
        ))
        .bind(skill)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(grant_from_row).collect()
    }

    async fn revoke_egress_grants_of(&self, skill: &str) -> Result<u64, StoreError> {
        if holds_nul(&[skill]) {
            return Ok(0);
        }
        let done = sqlx::query("delete from egress_grants where skill = ?")
            .bind(skill)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected())
    }
}

fn not_found(id: Uuid) -> StoreError {
    StoreError::NotFound {
        what: "egress request",
        id,
    }
}

/// The one conditional update that decides a pending, unexpired request;
/// `None` if it is not one (unknown, decided, expired).
async fn decide_on(
    conn: &mut SqliteConnection,
    d: &EgressDecide,
    at: &str,
) -> Result<Option<EgressRequest>, StoreError> {
    let (status, scope) = if d.allow {
        (ApprovalStatus::Approved, Some(d.scope.as_str()))
    } else {
        (ApprovalStatus::Denied, None)
    };
    let row = sqlx::query(concat!(
        "update egress_requests set status = ?1, scope = ?2, decided_by = ?3, note = ?4, decided_at = ?5 \
         where id = ?6 and status = 'pending' and expires_at > ?5 returning ",
        request_columns!()
    ))
    .bind(status.as_str())
    .bind(scope)
    .bind(&d.decided_by)
    .bind(&d.note)
    .bind(at)
    .bind(d.id.to_string())
    .fetch_optional(&mut *conn)
    .await?;
    row.as_ref().map(request_from_row).transpose()
}

/// Why request `id` could not be decided: it is unknown, decided, or past
/// its time, and then marked expired here.
async fn undecidable_on(
    conn: &mut SqliteConnection,
    id: Uuid,
    at: &str,
) -> Result<EgressUndecidable, StoreError> {
    let current = request_on(conn, id).await?.ok_or(not_found(id))?;
    if current.status != ApprovalStatus::Pending {
        return Ok(EgressUndecidable::AlreadyDecided(current.status));
    }
    expire_on(conn, id, at).await?;
    Ok(EgressUndecidable::Expired)
}

/// Marks request `id` expired at `at` if it is still pending.
async fn expire_on(conn: &mut SqliteConnection, id: Uuid, at: &str) -> Result<(), StoreError> {
    sqlx::query(
        "update egress_requests set status = 'expired', decided_at = ? where id = ? and status = 'pending'",
    )
    .bind(at)
    .bind(id.to_string())
    .execute(&mut *conn)
    .await?;
    Ok(())
}

async fn request_on(conn: &mut SqliteConnection, id: Uuid) -> Result<Option<EgressRequest>, StoreError> {
    let row = sqlx::query(concat!(
        "select ",
        request_columns!(),
        " from egress_requests where id = ?"
    ))
    .bind(id.to_string())
    .fetch_optional(&mut *conn)
    .await?;
    row.as_ref().map(request_from_row).transpose()
}

/// Records the grant an `always` allowance makes; the first one for a
/// destination stays.
async fn insert_grant_on(
    conn: &mut SqliteConnection,
    request: &EgressRequest,
    d: &EgressDecide,
    at: &str,
) -> Result<(), StoreError> {
    sqlx::query(
        "insert into egress_grants (skill, skill_hash, host, port, decided_by, note, created_at, request_id) \
         values (?, ?, ?, ?, ?, ?, ?, ?) on conflict (skill, skill_hash, host, port) do nothing",
    )
    .bind(&request.skill)
    .bind(&request.skill_hash)
    .bind(&request.host)
    .bind(i64::from(request.port))
    .bind(&d.decided_by)
    .bind(&d.note)
    .bind(at)
    .bind(request.id.to_string())
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// A port as the database keeps it (a signed integer).
fn port_of(stored: i64) -> Result<u16, StoreError> {
    u16::try_from(stored).map_err(|_| StoreError::Other(format!("bad port {stored} in the database")))
}

fn request_from_row(row: &SqliteRow) -> Result<EgressRequest, StoreError> {
    Ok(EgressRequest {
        id: parse_uuid(&get::<String>(row, "id")?)?,
        run_id: get::<Option<String>>(row, "run_id")?
            .as_deref()
            .map(parse_uuid)
            .transpose()?,
        skill: get(row, "skill")?,
        skill_version: get(row, "skill_version")?,
        skill_hash: get(row, "skill_hash")?,
        tool: get(row, "tool")?,
        requested_by: get(row, "requested_by")?,
        host: get(row, "host")?,
        port: port_of(get(row, "port")?)?,
        status: parse_approval_status(&get::<String>(row, "status")?)?,
        scope: parse_scope(get(row, "scope")?)?,
        decided_by: get(row, "decided_by")?,
        note: get(row, "note")?,
        created_at: parse_time(&get::<String>(row, "created_at")?)?,
        expires_at: parse_time(&get::<String>(row, "expires_at")?)?,
        decided_at: get::<Option<String>>(row, "decided_at")?
            .as_deref()
            .map(parse_time)
            .transpose()?,
    })
}

fn grant_from_row(row: &SqliteRow) -> Result<EgressGrant, StoreError> {
    Ok(EgressGrant {
        skill: get(row, "skill")?,
        skill_hash: get(row, "skill_hash")?,
        host: get(row, "host")?,
        port: port_of(get(row, "port")?)?,
        decided_by: get(row, "decided_by")?,
        note: get(row, "note")?,
        created_at: parse_time(&get::<String>(row, "created_at")?)?,
        request_id: parse_uuid(&get::<String>(row, "request_id")?)?,
    })
}
