//! `/mcp`: MCP's Streamable HTTP transport (rmcp), behind the same bearer
//! tokens and web-page guard as every other route. Each request's
//! [`Caller`] rides in its extensions to the MCP server, which checks the
//! role each method needs: read to list, invoke to call. Nothing in MCP
//! decides approvals.

use super::AppState;
use super::kit::error::ApiError;
use super::kit::extract::Peer;
use crate::auth::Role;
use crate::mcp::McpServer;
use crate::share::{Pool, Refused, Share};
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// Sessions of the handshake era (clients before MCP 2026-07-28) open at
/// once by default (`max_mcp_sessions`); an `initialize` past the cap
/// answers 503. Each holds a task and a channel until its client ends it
/// or it idles out (rmcp's keep-alive, five minutes), so without a bound a
/// client could pile them up.
pub const MAX_SESSIONS: usize = 1000;

pub fn router(state: &AppState) -> Router<AppState> {
    let stop = CancellationToken::new();
    // Sessions keep a stream open; they end when the server shuts down, or
    // graceful shutdown would wait on them for ever.
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        let invoker = state.invoker.clone();
        let stop = stop.clone();
        runtime.spawn(async move {
            invoker.closing().await;
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
        .with_max_request_body_bytes(super::kit::extract::MAX_BODY_BYTES);
    let (catalog, approver) = (state.catalog.clone(), state.approver.clone());
    let manager = Arc::new(LocalSessionManager::default());
    let service = StreamableHttpService::new(
        move || Ok(McpServer::over_http(catalog.clone(), approver.clone())),
        manager.clone(),
        config,
    );
    let sessions = Arc::new(Sessions {
        manager,
        pool: Pool::new(
            state.limits.max_mcp_sessions,
            state.limits.max_mcp_sessions_per_caller,
        ),
        shares: Mutex::default(),
    });
    Router::new()
        .route_service("/mcp", service)
        .route_layer(axum::middleware::from_fn(ended_is_no_content))
        .route_layer(axum::middleware::from_fn_with_state(sessions, cap_sessions))
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), authenticate))
}

/// The open sessions, and whose each is: a caller may hold its share of
/// them (`max_mcp_sessions_per_caller`), so one token cannot take them all.
struct Sessions {
    manager: Arc<LocalSessionManager>,
    pool: Arc<Pool>,
    /// Each session's share, by session id, until the session is gone.
    shares: Mutex<HashMap<String, Share>>,
}

impl Sessions {
    /// Gives back the shares of the sessions that ended (closed by their
    /// client, or idled out), so the counts are those open now.
    async fn forget_ended(&self) {
        let open = self.manager.sessions.read().await;
        lock(&self.shares).retain(|id, _| open.contains_key(id.as_str()));
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Refuses a new session past the cap (503) or past the caller's share
/// (429). Only a request without a session id can open one, and only an
/// `initialize` does: its share is taken before it goes on, and kept with
/// the session it opened.
async fn cap_sessions(
    State(sessions): State<Arc<Sessions>>,
    req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    if req.headers().contains_key("mcp-session-id") {
        return Ok(next.run(req).await);
    }
    // `authenticate` put the caller there.
    let name = req
        .extensions()
        .get::<crate::auth::Caller>()
        .and_then(|caller| caller.name.clone());
    let holder = crate::share::holder(name.as_deref(), Peer::of(req.extensions()).0);
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, super::kit::extract::MAX_BODY_BYTES)
        .await
        .map_err(|_| {
            ApiError::PayloadTooLarge(format!(
                "the body is over {} bytes",
                super::kit::extract::MAX_BODY_BYTES
            ))
        })?;
    let req = Request::from_parts(parts, Body::from(bytes.clone()));
    if !is_initialize(&bytes) {
        return Ok(next.run(req).await);
    }
    sessions.forget_ended().await;
    let share = sessions.pool.take(&holder).map_err(refusal)?;
    let res = next.run(req).await;
    if let Some(id) = res.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()) {
        lock(&sessions.shares).insert(id.to_owned(), share);
    }
    Ok(res)
}

/// A `DELETE /mcp` that ended its session answers 204: rmcp says 202,
/// which clients (the Python SDK among them) take, and log, as a failure
/// to end it.
async fn ended_is_no_content(req: Request, next: Next) -> Response {
    let delete = req.method() == axum::http::Method::DELETE;
    let mut res = next.run(req).await;
    if delete && res.status() == axum::http::StatusCode::ACCEPTED {
        *res.status_mut() = axum::http::StatusCode::NO_CONTENT;
        *res.body_mut() = Body::empty();
        res.headers_mut().remove(axum::http::header::CONTENT_LENGTH);
        res.headers_mut().remove(axum::http::header::CONTENT_TYPE);
    }
    res
}

fn is_initialize(body: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .is_some_and(|message| message.get("method").and_then(|m| m.as_str()) == Some("initialize"))
}

fn refusal(refused: Refused) -> ApiError {
    match refused {
        Refused::Full { total } => ApiError::Unavailable(format!(
            "{total} MCP sessions are open, the most this server keeps; end one (DELETE /mcp \
             with its Mcp-Session-Id) or wait for idle ones to expire"
        )),
        Refused::OverShare { per_holder } => ApiError::TooManyRequests {
            detail: format!(
                "you have {per_holder} MCP sessions open, the most one caller may hold; end one \
                 (DELETE /mcp with its Mcp-Session-Id) or wait for idle ones to expire"
            ),
            retry_after_secs: 60,
        },
    }
}

/// 401/403 as on every route, before MCP sees the request; the least role
/// is read, for listing.
async fn authenticate(
    State(state): State<AppState>,
    mut req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let caller = super::auth::caller(&state, req.headers(), Role::Read).await?;
    req.extensions_mut().insert(caller);
    Ok(next.run(req).await)
}
