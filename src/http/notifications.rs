//! `/notifications`: the record of `[[notify]]` webhook deliveries, for
//! the operator who wants to know what never arrived.

use super::AppState;
use super::auth::{Require, need};
use super::kit::error::Result;
use super::kit::extract::{Query, page_limit};
use super::responses::{BadQuery, StoreUnavailable};
use crate::store::{self, NotificationStatus};
use axum::Json;
use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_notifications))
}

/// Filter of `GET /notifications`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct NotificationQuery {
    /// Only deliveries in this state (`failed`: what never arrived).
    pub status: Option<NotificationStatus>,
    /// At most this many, 1–500 (default 100).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
}

/// A delivery as recorded: the API's `Notification`.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Notification)]
pub struct NotificationView {
    #[schema(value_type = String, format = "uuid")]
    pub id: Uuid,
    pub event: String,
    #[schema(value_type = String, format = "uuid")]
    pub approval_id: Uuid,
    pub target: String,
    pub status: NotificationStatus,
    /// Attempts made (or under way).
    pub attempts: u32,
    /// The HTTP status of the last answer, when there was one.
    pub last_status: Option<u16>,
    /// Why the last attempt failed.
    pub last_error: Option<String>,
    #[schema(value_type = String, format = DateTime)]
    pub created_at: DateTime<Utc>,
    /// When the next attempt is due, while pending.
    #[schema(value_type = String, format = DateTime)]
    pub next_attempt_at: DateTime<Utc>,
    #[schema(value_type = Option<String>, format = DateTime)]
    pub delivered_at: Option<DateTime<Utc>>,
    /// The body sent.
    #[schema(value_type = Object)]
    pub payload: Value,
}

impl From<store::Notification> for NotificationView {
    fn from(n: store::Notification) -> Self {
        Self {
            id: n.id,
            event: n.event,
            approval_id: n.approval_id,
            target: n.target,
            status: n.status,
            attempts: n.attempts,
            last_status: n.last_status,
            last_error: n.last_error,
            created_at: n.created_at,
            next_attempt_at: n.next_attempt_at,
            delivered_at: n.delivered_at,
            payload: n.payload,
        }
    }
}

/// Webhook deliveries, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct NotificationList {
    pub notifications: Vec<NotificationView>,
}

/// Webhook deliveries (`[[notify]]`), newest first: each with its
/// attempts, the last answer or error, and the body sent.
#[utoipa::path(get, path = "/notifications", tag = "approvals", security(("bearer" = ["admin"])), params(NotificationQuery),
    responses(
        (status = 200, description = "Deliveries, newest first", body = NotificationList),
        BadQuery,
        StoreUnavailable,
    ))]
async fn list_notifications(
    _: Require<need::Admin>,
    State(state): State<AppState>,
    Query(q): Query<NotificationQuery>,
) -> Result<Json<NotificationList>> {
    let limit = page_limit(q.limit, 100)?;
    let notifications = state.store().list_notifications(q.status, limit).await?;
    Ok(Json(NotificationList {
        notifications: notifications.into_iter().map(NotificationView::from).collect(),
    }))
}
