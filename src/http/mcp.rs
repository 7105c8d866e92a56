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
use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Sessions of the handshake era (clients before MCP 2026-07-28) open at
/// once; an `initialize` past this answers 503. Each holds a task and a
/// channel until its client ends it or it idles out (rmcp's keep-alive,
/// five minutes), so without a bound a client could pile them up.
pub const MAX_SESSIONS: usize = 1000;

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
    let sessions = Arc::new(LocalSessionManager::default());
    let service = StreamableHttpService::new(
        move || Ok(McpServer::over_http(catalog.clone(), invoker.clone())),
        sessions.clone(),
        config,
    );
    Router::new()
        .route_service("/mcp", service)
        .route_layer(axum::middleware::from_fn_with_state(sessions, cap_sessions))
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), authenticate))
}

/// Refuses a new session while [`MAX_SESSIONS`] are open. Only a request
/// without a session id can open one, and only when the cap is reached is
/// its body read to see whether it is an `initialize`.
async fn cap_sessions(
    State(sessions): State<Arc<LocalSessionManager>>,
    req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    if req.headers().contains_key("mcp-session-id") || sessions.sessions.read().await.len() < MAX_SESSIONS {
        return Ok(next.run(req).await);
    }
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, super::extract::MAX_BODY_BYTES)
        .await
        .map_err(|_| {
            ApiError::PayloadTooLarge(format!(
                "the body is over {} bytes",
                super::extract::MAX_BODY_BYTES
            ))
        })?;
    let method = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|message| message.get("method").and_then(|m| m.as_str()).map(str::to_owned));
    if method.as_deref() == Some("initialize") {
        return Err(ApiError::Unavailable(format!(
            "{MAX_SESSIONS} MCP sessions are open, the most this server keeps; end one (DELETE /mcp \
             with its Mcp-Session-Id) or wait for idle ones to expire"
        )));
    }
    Ok(next.run(Request::from_parts(parts, Body::from(bytes))).await)
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
