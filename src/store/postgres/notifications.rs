//! Webhook deliveries on PostgreSQL (see `store::notifications`): a
//! claim skips rows another instance is claiming, so each goes to one.

use super::{PgStore, get};
use crate::store::notifications::http_status;
use crate::store::{
    Attempt, MAX_APPROVALS, NewNotification, Notification, NotificationStatus, Outbox, StoreError, keepable,
    keepable_text,
};
use chrono::{DateTime, Utc};
use sqlx::postgres::PgRow;
use sqlx::{Postgres, QueryBuilder};
use uuid::Uuid;

/// Every column of `notifications` [`notification_from_row`] reads.
macro_rules! notification_columns {
    () => {
        "id, event, approval_id, target, payload, status, attempts, last_status, last_error, \
         created_at, next_attempt_at, delivered_at"
    };
}

#[async_trait::async_trait]
impl Outbox for PgStore {
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
        .bind(keepable(n.payload))
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
        .bind(attempt.error().map(|e| keepable_text(e.to_owned())))
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
            .push_bind(i64::from(limit.clamp(1, MAX_APPROVALS)));
        let rows = query.build().fetch_all(&self.pool).await?;
        rows.iter().map(notification_from_row).collect()
    }
}

fn notification_from_row(row: &PgRow) -> Result<Notification, StoreError> {
    Ok(Notification {
        id: get(row, "id")?,
        event: get(row, "event")?,
        approval_id: get(row, "approval_id")?,
        target: get(row, "target")?,
        status: NotificationStatus::parse(&get::<String>(row, "status")?)?,
        attempts: u32::try_from(get::<i32>(row, "attempts")?).unwrap_or(0),
        last_status: http_status(get(row, "last_status")?),
        last_error: get(row, "last_error")?,
        created_at: get(row, "created_at")?,
        next_attempt_at: get(row, "next_attempt_at")?,
        delivered_at: get(row, "delivered_at")?,
        payload: get(row, "payload")?,
    })
}
