//! skilld: serves directories of skills as an HTTP API.

pub mod catalog;
pub mod cli;
pub mod config;
pub mod error;
pub mod export;
pub mod http;
pub mod policy;
pub mod skill;
pub mod watch;

use catalog::CatalogHandle;
use std::future::Future;
use std::sync::Arc;

pub use http::{app, openapi};

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    pub catalog: Arc<CatalogHandle>,
}

/// Serves `app(state)` on a bound listener until `shutdown` completes.
pub async fn serve(
    state: AppState,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, app(state))
        .with_graceful_shutdown(shutdown)
        .await
}
