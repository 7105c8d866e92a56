//! skilld as an OAuth resource server over HTTP (`crate::oauth`): its
//! protected-resource metadata (RFC 9728) at
//! `/.well-known/oauth-protected-resource` (the whole server) and
//! `/.well-known/oauth-protected-resource/mcp` (`/mcp`), and the
//! `resource_metadata` of every 401's challenge, which is how an MCP
//! client given only the URL finds the authorization server.
//!
//! Without OAuth issuers configured all of this is absent: the paths
//! answer 404 as any unknown path does, and challenges stay as they were.
//! `/.well-known/oauth-authorization-server` is never served: this server
//! issues no tokens, and RFC 9728 sends clients to the issuers it lists.

use super::AppState;
use super::kit::error::{ApiError, Challenge};
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{Uri, header};
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::get;

pub fn router() -> Router<AppState> {
    let metadata = crate::oauth::METADATA_PATH;
    Router::new()
        .route(metadata, get(server_metadata))
        .route(&format!("{metadata}/mcp"), get(mcp_metadata))
        .route(
            "/.well-known/oauth-authorization-server",
            get(no_authorization_server),
        )
        .route(
            "/.well-known/oauth-authorization-server/{*rest}",
            get(no_authorization_server),
        )
}

async fn server_metadata(
    State(state): State<AppState>,
    uri: Uri,
) -> Result<axum::Json<serde_json::Value>, ApiError> {
    let oauth = state.auth.oauth().ok_or_else(|| no_route(&uri))?;
    Ok(axum::Json(oauth.metadata(false)))
}

async fn mcp_metadata(
    State(state): State<AppState>,
    uri: Uri,
) -> Result<axum::Json<serde_json::Value>, ApiError> {
    let oauth = state.auth.oauth().ok_or_else(|| no_route(&uri))?;
    Ok(axum::Json(oauth.metadata(true)))
}

/// 404, saying where to look instead when OAuth is configured: clients of
/// MCP's 2025-03-26 authorization spec look here first.
async fn no_authorization_server(State(state): State<AppState>, uri: Uri) -> ApiError {
    match state.auth.oauth() {
        Some(oauth) => ApiError::NotLoaded(format!(
            "skilld is an OAuth resource server, not an authorization server: its metadata at {} \
             lists the authorization servers that issue its tokens",
            oauth.metadata_url(false)
        )),
        None => no_route(&uri),
    }
}

fn no_route(uri: &Uri) -> ApiError {
    ApiError::NoRoute {
        method: "GET".to_owned(),
        path: uri.path().to_owned(),
    }
}

/// Adds `resource_metadata` (and the scope, for a 403) to the challenge
/// of every answer that carries one, when OAuth is configured: `/mcp`'s
/// name `/mcp`'s metadata, the rest the server's.
pub async fn challenge(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let Some(oauth) = state.auth.oauth().cloned() else {
        return next.run(req).await;
    };
    let path = req.uri().path();
    let mcp = path == "/mcp" || path.starts_with("/mcp/");
    let mut res = next.run(req).await;
    let value = res
        .extensions()
        .get::<Challenge>()
        .and_then(|c| c.header(Some(&oauth.metadata_url(mcp))));
    if let Some(value) = value {
        res.headers_mut().insert(header::WWW_AUTHENTICATE, value);
    }
    res
}
