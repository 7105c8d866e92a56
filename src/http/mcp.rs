//! `/mcp`: MCP's Streamable HTTP transport (rmcp), behind the same bearer
//! tokens and web-page guard as every other route. Each request's
//! [`Caller`] rides in its extensions to the MCP server, which checks the
//! role each method needs: read to list, invoke to call. Nothing in MCP
//! decides approvals.

use super::AppState;
use super::error::ApiError;
use crate::auth::Role;
use crate::mcp::McpServer;
use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

pub fn router(state: &AppState) -> Router<AppState> {
    let stop = CancellationToken::new();
    // Sessions keep a stream open; they end when the server shuts down, or
    // graceful shutdown would wait on them for ever.
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        let invoker = state.invoker.clone();
        let stop = stop.clone();
        runtime.spawn(async move {
            invoker.runs.closing().await;
            stop.cancel();
        });
    }
    let config = StreamableHttpServerConfig::default()
        .with_cancellation_token(stop)
        // `guard::refuse_web_pages` checks Host and Origin for every route,
        // configured once for all of them.
        .disable_allowed_hosts()
        .disable_allowed_origins()
        // The same bound as every other JSON body.
        .with_max_request_body_bytes(super::extract::MAX_BODY_BYTES);
    let (catalog, invoker) = (state.catalog.clone(), state.invoker.clone());
    let service = StreamableHttpService::new(
        move || Ok(McpServer::over_http(catalog.clone(), invoker.clone())),
        LocalSessionManager::default().into(),
        config,
    );
    Router::new()
        .route_service("/mcp", service)
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), authenticate))
}

/// 401/403 as on every route, before MCP sees the request; the least role
/// is read, for listing.
async fn authenticate(
    State(state): State<AppState>,
    mut req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let caller = super::auth::caller(&state, req.headers(), Role::Read)?;
    req.extensions_mut().insert(caller);
    Ok(next.run(req).await)
}
