//! Held destinations and egress grants on PostgreSQL (see
//! `store::egress`). A decision and its grant are one transaction; the
//! row lock of the deciding update makes a racing decider, on this
//! instance or another, wait, then find the request decided.

use super::{PgStore, get};
use crate::store::approvals::{parse_approval_status, parse_scope};
use crate::store::egress::{check_decide, check_new};
use crate::store::sessions::holds_nul;
use crate::store::{
    ApprovalStatus, EgressDecide, EgressDecisions, EgressGrant, EgressRequest, EgressUndecidable,
    NewEgressRequest, Scope, StoreError,
};
use chrono::{DateTime, Utc};
use sqlx::postgres::{PgConnection, PgRow};
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

/// Read committed, whatever the server's default: a decider that waited on
/// the row lock then re-reads the row and finds it decided, where a
/// stricter level would fail it with a serialization error instead.
const BEGIN: &str = "begin isolation level read committed";

/// One request, by id.
const SELECT_REQUEST: &str = concat!(
    "select ",
    request_columns!(),
    " from egress_requests where id = $1"
);
/// One request, by id, locked until the transaction ends.
const LOCK_REQUEST: &str = concat!(
    "select ",
    request_columns!(),
    " from egress_requests where id = $1 for update"
);

#[async_trait::async_trait]
impl EgressDecisions for PgStore {
    async fn hold_destination(&self, r: NewEgressRequest) -> Result<(), StoreError> {
        check_new(&r)?;
        sqlx::query(
            "insert into egress_requests (id, run_id, skill, skill_version, skill_hash, tool, requested_by, \
             host, port, status, created_at, expires_at) \
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'pending', $10, $11)",
        )
        .bind(r.id)
        .bind(r.run_id)
        .bind(&r.skill)
        .bind(&r.skill_version)
        .bind(&r.skill_hash)
        .bind(&r.tool)
        .bind(&r.requested_by)
        .bind(&r.host)
        .bind(i32::from(r.port))
        .bind(r.created_at)
        .bind(r.expires_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn egress_request(&self, id: Uuid) -> Result<EgressRequest, StoreError> {
        let mut conn = self.pool.acquire().await?;
        request_on(&mut conn, SELECT_REQUEST, id)
            .await?
            .ok_or(not_found(id))
    }

    async fn pending_egress(&self, at: DateTime<Utc>, limit: u32) -> Result<Vec<EgressRequest>, StoreError> {
        let rows = sqlx::query(concat!(
            "select ",
            request_columns!(),
            " from egress_requests where status = 'pending' and expires_at > $1 \
             order by created_at, id limit $2"
        ))
        .bind(at)
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
        let mut tx = self.pool.begin_with(BEGIN).await?;
        let Some(request) = decide_on(&mut tx, &d).await? else {
            let why = undecidable_on(&mut tx, d.id, d.at).await?;
            tx.commit().await?;
            return Ok(Err(why));
        };
        if d.allow && d.scope == Scope::Always {
            insert_grant_on(&mut tx, &request, &d).await?;
        }
        tx.commit().await?;
        Ok(Ok(request))
    }

    async fn expire_egress(&self, id: Uuid, at: DateTime<Utc>) -> Result<EgressRequest, StoreError> {
        let mut conn = self.pool.acquire().await?;
        if let Some(expired) = expire_on(&mut conn, id, at).await? {
            return Ok(expired);
        }
        // Not pending: decided or expired already, which it stays.
        request_on(&mut conn, SELECT_REQUEST, id)
            .await?
            .ok_or(not_found(id))
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
             where skill = $1 and skill_hash = $2 and host = $3 and port = $4)",
        )
        .bind(skill)
        .bind(skill_hash)
        .bind(host)
        .bind(i32::from(port))
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
            " from egress_grants where ($1::text is null or skill = $1) \
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
        let done = sqlx::query("delete from egress_grants where skill = $1")
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
async fn decide_on(conn: &mut PgConnection, d: &EgressDecide) -> Result<Option<EgressRequest>, StoreError> {
    let (status, scope) = if d.allow {
        (ApprovalStatus::Approved, Some(d.scope.as_str()))
    } else {
        (ApprovalStatus::Denied, None)
    };
    let row = sqlx::query(concat!(
        "update egress_requests set status = $2, scope = $3, decided_by = $4, note = $5, decided_at = $6 \
         where id = $1 and status = 'pending' and expires_at > $6 returning ",
        request_columns!()
    ))
    .bind(d.id)
    .bind(status.as_str())
    .bind(scope)
    .bind(&d.decided_by)
    .bind(&d.note)
    .bind(d.at)
    .fetch_optional(&mut *conn)
    .await?;
    row.as_ref().map(request_from_row).transpose()
}

/// Why request `id` could not be decided: it is unknown, decided, or past
/// its time, and then marked expired here. The row lock keeps a racing
/// expiry from landing between the read and the write.
async fn undecidable_on(
    conn: &mut PgConnection,
    id: Uuid,
    at: DateTime<Utc>,
) -> Result<EgressUndecidable, StoreError> {
    let current = request_on(conn, LOCK_REQUEST, id).await?.ok_or(not_found(id))?;
    if current.status != ApprovalStatus::Pending {
        return Ok(EgressUndecidable::AlreadyDecided(current.status));
    }
    expire_on(conn, id, at).await?;
    Ok(EgressUndecidable::Expired)
}

/// Marks request `id` expired at `at` if it is still pending; the request
/// so marked, or `None` if it was not pending (or is unknown).
async fn expire_on(
    conn: &mut PgConnection,
    id: Uuid,
    at: DateTime<Utc>,
) -> Result<Option<EgressRequest>, StoreError> {
    let row = sqlx::query(concat!(
        "update egress_requests set status = 'expired', decided_at = $2 \
         where id = $1 and status = 'pending' returning ",
        request_columns!()
    ))
    .bind(id)
    .bind(at)
    .fetch_optional(&mut *conn)
    .await?;
    row.as_ref().map(request_from_row).transpose()
}

/// Request `id`, read by `sql` ([`SELECT_REQUEST`] or
/// [`LOCK_REQUEST`]).
async fn request_on(
    conn: &mut PgConnection,
    sql: &'static str,
    id: Uuid,
) -> Result<Option<EgressRequest>, StoreError> {
    let row = sqlx::query(sql).bind(id).fetch_optional(&mut *conn).await?;
    row.as_ref().map(request_from_row).transpose()
}

/// Records the grant an `always` allowance makes; the first one for a
/// destination stays.
async fn insert_grant_on(
    conn: &mut PgConnection,
    request: &EgressRequest,
    d: &EgressDecide,
) -> Result<(), StoreError> {
    sqlx::query(
        "insert into egress_grants (skill, skill_hash, host, port, decided_by, note, created_at, request_id) \
         values ($1, $2, $3, $4, $5, $6, $7, $8) on conflict (skill, skill_hash, host, port) do nothing",
    )
    .bind(&request.skill)
    .bind(&request.skill_hash)
    .bind(&request.host)
    .bind(i32::from(request.port))
    .bind(&d.decided_by)
    .bind(&d.note)
    .bind(d.at)
    .bind(request.id)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// A port as the database keeps it (a signed integer).
fn port_of(stored: i32) -> Result<u16, StoreError> {
    u16::try_from(stored).map_err(|_| StoreError::Other(format!("bad port {stored} in the database")))
}

fn request_from_row(row: &PgRow) -> Result<EgressRequest, StoreError> {
    Ok(EgressRequest {
        id: get(row, "id")?,
        run_id: get(row, "run_id")?,
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
        created_at: get(row, "created_at")?,
        expires_at: get(row, "expires_at")?,
        decided_at: get(row, "decided_at")?,
    })
}

fn grant_from_row(row: &PgRow) -> Result<EgressGrant, StoreError> {
    Ok(EgressGrant {
        skill: get(row, "skill")?,
        skill_hash: get(row, "skill_hash")?,
        host: get(row, "host")?,
        port: port_of(get(row, "port")?)?,
        decided_by: get(row, "decided_by")?,
        note: get(row, "note")?,
        created_at: get(row, "created_at")?,
        request_id: get(row, "request_id")?,
    })
}
