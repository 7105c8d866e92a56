//! CORS for browser-based tool hosts: off unless `allowed_origins` names
//! the pages that may call. The same list lets those pages past the web
//! guard of a server without tokens, so one setting opens both doors.

use axum::http::{HeaderName, HeaderValue, Method};
use std::time::Duration;
use tower_http::cors::{AllowOrigin, CorsLayer};

/// Request headers a page may send: the API's own and MCP's.
const REQUEST_HEADERS: [&str; 8] = [
    "authorization",
    "content-type",
    "accept",
    "prefer",
    "last-event-id",
    "mcp-session-id",
    "mcp-protocol-version",
    "x-request-id",
];

/// Response headers a page may read.
const EXPOSED_HEADERS: [&str; 6] = [
    "location",
    "retry-after",
    "www-authenticate",
    "x-request-id",
    "mcp-session-id",
    "mcp-protocol-version",
];

/// How long a browser may reuse a preflight's answer.
const PREFLIGHT_MAX_AGE: Duration = Duration::from_secs(600);

/// The layer for `origins` (`scheme://host[:port]`, lowercase), or none
/// when no origin is allowed.
pub fn layer(origins: &[String]) -> Option<CorsLayer> {
    let origins: Vec<HeaderValue> = origins
        .iter()
        .filter_map(|o| HeaderValue::from_str(o).ok())
        .collect();
    if origins.is_empty() {
        return None;
    }
    Some(
        CorsLayer::new()
            .allow_origin(AllowOrigin::list(origins))
            .allow_methods([Method::GET, Method::POST, Method::PUT, Method::DELETE])
            .allow_headers(REQUEST_HEADERS.map(HeaderName::from_static))
            .expose_headers(EXPOSED_HEADERS.map(HeaderName::from_static))
            .max_age(PREFLIGHT_MAX_AGE),
    )
}
