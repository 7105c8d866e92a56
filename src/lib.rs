//! skilld: serves directories of skills as an HTTP API.

pub mod auth;
pub mod catalog;
pub mod cli;
pub mod config;
pub mod error;
pub mod export;
pub mod http;
pub mod invoke;
pub mod metrics;
pub mod policy;
pub mod runner;
pub mod skill;
pub mod store;
pub mod watch;

use catalog::CatalogHandle;
use std::future::Future;
use std::sync::Arc;

pub use http::{app, openapi};

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    pub catalog: Arc<CatalogHandle>,
    pub invoker: Arc<invoke::Invoker>,
    /// The bearer tokens every protected handler checks (`auth::Require`);
    /// `Auth::open()` when none are configured.
    pub auth: Arc<auth::Auth>,
}

/// Serves `app(state)` on a bound listener until `shutdown` completes.
/// Then no new connection or run is taken; running tools get `grace` to
/// finish before their process groups are killed, and this returns once
/// every run has ended and been recorded.
pub async fn serve(
    state: AppState,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: std::time::Duration,
) -> std::io::Result<()> {
    let housekeeping = tokio_util::sync::CancellationToken::new();
    tokio::spawn(state.invoker.clone().housekeeping(housekeeping.clone()));
    let _stop_housekeeping = housekeeping.drop_guard();
    let invoker = state.invoker.clone();
    let stopping = async move {
        shutdown.await;
        // Runs end within the grace (or are killed), which lets the
        // requests waiting on them complete, which lets axum return.
        tokio::spawn(async move { invoker.shutdown(grace).await });
    };
    let served = axum::serve(listener, app(state.clone()))
        .with_graceful_shutdown(stopping)
        .await;
    state.invoker.shutdown(grace).await;
    served
}
