//! Webhook deliveries on SQLite (see `store::notifications`), through the
//! sqlx pool: each claim is one statement, so one instance gets each row.

use super::{SqliteStore, get, json_text, parse_json, parse_time, parse_uuid, time_text};
use crate::store::notifications::http_status;
use crate::store::{
    Attempt, MAX_APPROVALS, NewNotification, Notification, NotificationStatus, Outbox, StoreError, keepable,
    keepable_text,
};
use chrono::{DateTime, Utc};
use sqlx::sqlite::SqliteRow;
use sqlx::{QueryBuilder, Sqlite};
use uuid::Uuid;

/// Every column of `notifications` [`notification_from_row`] reads.
macro_rules! notification_columns {
    () => {
        "id, event, approval_id, target, payload, status, attempts, last_status, last_error, \
         created_at, next_attempt_at, delivered_at"
    };
}

#[async_trait::async_trait]
impl Outbox for SqliteStore {
    async fn enqueue_notification(&self, n: NewNotification) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "insert into notifications (id, event, approval_id, target, payload, status, created_at, \
             next_attempt_at) values (?, ?, ?, ?, ?, 'pending', ?, ?) \
             on conflict (event, approval_id, target) do nothing",
        )
        .bind(n.id.to_string())
        .bind(&n.event)
        .bind(n.approval_id.to_string())
        .bind(&n.target)
        .bind(json_text(&keepable(n.payload))?)
        .bind(time_text(n.created_at)?)
        .bind(time_text(n.created_at)?)
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
        let now = time_text(now)?;
        let rows = sqlx::query(concat!(
            "update notifications set claimed_by = ?, claimed_until = ?, attempts = attempts + 1 \
             where id in (select id from notifications where status = 'pending' and next_attempt_at <= ? \
             and (claimed_until is null or claimed_until <= ?) order by next_attempt_at limit ?) returning ",
            notification_columns!()
        ))
        .bind(instance)
        .bind(time_text(lease_until)?)
        .bind(&now)
        .bind(&now)
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
            "update notifications set status = ?, last_status = ?, last_error = ?, next_attempt_at = ?, \
             delivered_at = ?, claimed_by = null, claimed_until = null where id = ? and claimed_by = ?",
        )
        .bind(attempt.status().as_str())
        .bind(attempt.http_status())
        .bind(attempt.error().map(|e| keepable_text(e.to_owned())))
        .bind(time_text(next)?)
        .bind(delivered.map(time_text).transpose()?)
        .bind(id.to_string())
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
            QueryBuilder::<Sqlite>::new(concat!("select ", notification_columns!(), " from notifications"));
        if let Some(status) = status {
            query.push(" where status = ").push_bind(status.as_str());
        }
        query
            .push(" order by created_at desc, id desc limit ")
            .push_bind(i64::from(limit.clamp(1, MAX_APPROVALS)));
        let rows = query.build().fetch_all(&self.pool).await?;
        rows.iter().map(notification_from_row).collect()
    }
}

fn notification_from_row(row: &SqliteRow) -> Result<Notification, StoreError> {
    Ok(Notification {
        id: parse_uuid(&get::<String>(row, "id")?)?,
        event: get(row, "event")?,
        approval_id: parse_uuid(&get::<String>(row, "approval_id")?)?,
        target: get(row, "target")?,
        status: NotificationStatus::parse(&get::<String>(row, "status")?)?,
        attempts: u32::try_from(get::<i64>(row, "attempts")?).unwrap_or(u32::MAX),
        last_status: http_status(get(row, "last_status")?),
        last_error: get(row, "last_error")?,
        created_at: parse_time(&get::<String>(row, "created_at")?)?,
        next_attempt_at: parse_time(&get::<String>(row, "next_attempt_at")?)?,
        delivered_at: get::<Option<String>>(row, "delivered_at")?
            .as_deref()
            .map(parse_time)
            .transpose()?,
        payload: parse_json(&get::<String>(row, "payload")?)?,
    })
}
