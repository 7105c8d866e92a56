//! `/notifications`: the record of `[[notify]]` webhook deliveries, for
//! the operator who wants to know what never arrived.

use super::AppState;
use super::auth::{Require, need};
use super::error::Result;
use super::extract::{Query, page_limit};
use super::responses::{BadQuery, StoreUnavailable};
use crate::store::{Notification, NotificationStatus};
use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

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

/// Webhook deliveries, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct NotificationList {
    pub notifications: Vec<Notification>,
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
    let notifications = state.invoker.store.list_notifications(q.status, limit).await?;
    Ok(Json(NotificationList { notifications }))
}
