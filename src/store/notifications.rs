//! Deliveries of `[[notify]]` webhooks as the store keeps them: one row
//! per event and target, claimed by one instance at a time, so that with
//! several instances each event is delivered once (`docs/api.md`,
//! "Notifications").

use super::StoreError;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

/// The deliveries of `[[notify]]` webhooks, as the notifier records them,
/// claims them in its instance's name and settles them; held as
/// `Arc<dyn Outbox>`.
#[async_trait::async_trait]
pub trait Outbox: Send + Sync + 'static {
    /// Records a webhook delivery to make; `false` when the same event was
    /// already recorded for the same target (by this or another instance).
    async fn enqueue_notification(&self, n: NewNotification) -> Result<bool, StoreError>;

    /// Claims up to `max` pending deliveries that are due at `now` and not
    /// claimed by a live lease, for `instance` until `lease_until`, and
    /// counts the attempt. Across instances each is claimed by one.
    async fn claim_notifications(
        &self,
        instance: &str,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        max: u32,
    ) -> Result<Vec<Notification>, StoreError>;

    /// Records how `instance`'s attempt at delivery `id` ended, and
    /// releases its claim (nothing, if the claim was lost meanwhile).
    async fn record_attempt(
        &self,
        id: Uuid,
        instance: &str,
        attempt: Attempt,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError>;

    /// Deliveries, newest first, at most `limit`.
    async fn list_notifications(
        &self,
        status: Option<NotificationStatus>,
        limit: u32,
    ) -> Result<Vec<Notification>, StoreError>;
}

/// Where a delivery is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotificationStatus {
    /// Not delivered yet: waiting for its first attempt or a retry.
    Pending,
    Delivered,
    /// Every attempt failed; no more are made.
    Failed,
}

impl NotificationStatus {
    /// Every status, in the order of the API's list.
    pub const ALL: [NotificationStatus; 3] = [Self::Pending, Self::Delivered, Self::Failed];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Delivered => "delivered",
            Self::Failed => "failed",
        }
    }

    pub(super) fn parse(s: &str) -> Result<Self, StoreError> {
        Self::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| StoreError::Other(format!("unknown notification status '{s}' in the database")))
    }
}

/// A delivery to record. Recording the same event for the same target
/// twice (two instances seeing one change) keeps the first.
#[derive(Debug, Clone, PartialEq)]
pub struct NewNotification {
    pub id: Uuid,
    /// `approval.requested` or `approval.decided`.
    pub event: String,
    pub approval_id: Uuid,
    /// The `[[notify]]` entry's name.
    pub target: String,
    /// The body, as it will be sent on every attempt.
    pub payload: Value,
    pub created_at: DateTime<Utc>,
}

/// A delivery as recorded: the API's `Notification`.
#[derive(Debug, Clone, PartialEq)]
pub struct Notification {
    pub id: Uuid,
    pub event: String,
    pub approval_id: Uuid,
    pub target: String,
    pub status: NotificationStatus,
    /// Attempts made (or under way).
    pub attempts: u32,
    /// The HTTP status of the last answer, when there was one.
    pub last_status: Option<u16>,
    /// Why the last attempt failed.
    pub last_error: Option<String>,
    pub created_at: DateTime<Utc>,
    /// When the next attempt is due, while pending.
    pub next_attempt_at: DateTime<Utc>,
    pub delivered_at: Option<DateTime<Utc>>,
    /// The body sent.
    pub payload: Value,
}

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Attempt {
    /// The receiver answered 2xx.
    Delivered { status: u16 },
    /// It failed; the next attempt is due at `next`.
    Retry {
        status: Option<u16>,
        error: String,
        next: DateTime<Utc>,
    },
    /// It failed, and it was the last attempt.
    Failed { status: Option<u16>, error: String },
}

impl Attempt {
    pub(super) fn status(&self) -> NotificationStatus {
        match self {
            Self::Delivered { .. } => NotificationStatus::Delivered,
            Self::Retry { .. } => NotificationStatus::Pending,
            Self::Failed { .. } => NotificationStatus::Failed,
        }
    }

    pub(super) fn http_status(&self) -> Option<i32> {
        match self {
            Self::Delivered { status } => Some(i32::from(*status)),
            Self::Retry { status, .. } | Self::Failed { status, .. } => status.map(i32::from),
        }
    }

    pub(super) fn error(&self) -> Option<&str> {
        match self {
            Self::Delivered { .. } => None,
            Self::Retry { error, .. } | Self::Failed { error, .. } => Some(error),
        }
    }
}

/// A stored HTTP status, read back.
pub(super) fn http_status(stored: Option<i32>) -> Option<u16> {
    stored.and_then(|s| u16::try_from(s).ok())
}
