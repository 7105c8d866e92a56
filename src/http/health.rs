//! Liveness and readiness.

use crate::AppState;
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
    /// The run store's backend, once runs are recorded (`sqlite`, `postgres`).
    pub store: Option<String>,
    pub skills: usize,
    pub tools: usize,
    pub sandbox: Sandbox,
}

/// Which isolation the runner can enforce on this host.
#[derive(Debug, Serialize, ToSchema)]
pub struct Sandbox {
    /// `enforced` when `network: false` gets its own network namespace,
    /// `advisory` when the flag is only reported.
    pub network: String,
}

/// Liveness: answers while the process serves.
#[utoipa::path(get, path = "/healthz", tag = "service", operation_id = "healthz",
    responses((status = 200, description = "The process serves", body = Health)))]
async fn healthz() -> Json<Health> {
    Json(Health {
        status: "ok".to_owned(),
    })
}

/// Readiness: the catalog is loaded and what the sandbox enforces.
#[utoipa::path(get, path = "/readyz", tag = "service", operation_id = "readyz",
    responses((status = 200, description = "Ready to serve", body = Readiness)))]
async fn readyz(State(state): State<AppState>) -> Json<Readiness> {
    let catalog = state.catalog.current();
    Json(Readiness {
        status: "ready".to_owned(),
        store: None,
        skills: catalog.skills.len(),
        tools: catalog.tools.len(),
        sandbox: Sandbox {
            network: "advisory".to_owned(),
        },
    })
}
