//! Liveness and readiness.

use super::AppState;
use super::kit::error::ApiError;
use super::responses::{BadQuery, ForeignPage, StoreUnavailable};
use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(healthz))
        .routes(routes!(readyz))
}

/// `{"status":"ok"}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    pub status: String,
}

/// What the server can serve right now.
#[derive(Debug, Serialize, ToSchema)]
pub struct Readiness {
    pub status: String,
    /// The run log's backend: `sqlite` or `postgres`.
    pub store: String,
    pub skills: usize,
    pub tools: usize,
    /// What the sandbox enforces here, layer by layer.
    pub sandbox: crate::sandbox::Report,
}

/// Liveness: answers while the process serves.
#[utoipa::path(get, path = "/healthz", tag = "service", operation_id = "healthz",
    responses(
        (status = 200, description = "The process serves", body = Health),
        BadQuery,
        ForeignPage,
    ))]
async fn healthz() -> Json<Health> {
    Json(Health {
        status: "ok".to_owned(),
    })
}

/// Readiness: the run log answers, the catalog is loaded, and what the
/// sandbox enforces.
#[utoipa::path(get, path = "/readyz", tag = "service", operation_id = "readyz",
    responses(
        (status = 200, description = "Ready to serve", body = Readiness),
        BadQuery,
        ForeignPage,
        StoreUnavailable,
    ))]
async fn readyz(State(state): State<AppState>) -> Result<Json<Readiness>, ApiError> {
    let store = state.store();
    store.ping().await?;
    let catalog = state.catalog.current();
    Ok(Json(Readiness {
        status: "ready".to_owned(),
        store: store.backend().to_owned(),
        skills: catalog.skills.len(),
        tools: catalog.tools.len(),
        sandbox: state
            .invoker
            .sandbox()
            .report(crate::runner::network_isolation_available()),
    }))
}
