//! `/ui`: the approvals inbox, a static page that talks to the same API as
//! every other client (`docs/design.md` §7). Beside the calls waiting for
//! a person, it lists the uploads waiting for an admin's review
//! (`GET /reviews`), with their findings and changes.
//!
//! The files under `ui/` are compiled in with `include_str!`, so the binary
//! is the whole deployment: no asset directory to ship or to get out of step
//! with the server. The page holds no data and needs no token to load; every
//! call it makes carries the token the person typed in, so the API's own
//! auth decides what it may see and do.
//!
//! It is not in the OpenAPI document (like `/docs`): it is a page for
//! people, not part of the API's contract.

use super::AppState;
use super::error::ApiError;
use super::extract::Path;
use axum::Router;
use axum::http::{HeaderName, HeaderValue, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;

const INDEX_HTML: &str = include_str!("../../ui/index.html");
const APP_JS: &str = include_str!("../../ui/app.js");
const STYLE_CSS: &str = include_str!("../../ui/style.css");

/// Everything comes from this server and nothing runs inline, so an
/// injected `<script>` or `style` attribute (should escaping ever fail)
/// does nothing; the page cannot be framed (clickjacking an "Approve"
/// button) and its forms post nowhere.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/ui", get(index))
        // Relative links on the page resolve against `/ui`, not `/ui/`.
        .route("/ui/", get(|| async { Redirect::permanent("../ui") }))
        .route("/ui/{asset}", get(asset))
}

async fn index() -> Response {
    page(INDEX_HTML, "text/html; charset=utf-8")
}

async fn asset(Path(name): Path<String>) -> Result<Response, ApiError> {
    match name.as_str() {
        "app.js" => Ok(page(APP_JS, "text/javascript; charset=utf-8")),
        "style.css" => Ok(page(STYLE_CSS, "text/css; charset=utf-8")),
        _ => Err(ApiError::not_found("file", name)),
    }
}

/// One of the page's files with the headers that keep it inert to
/// injection and sniffing. `no-cache` (revalidate, not "never store")
/// because the files change with the binary and carry no version in
/// their names.
fn page(body: &'static str, content_type: &'static str) -> Response {
    let headers: [(HeaderName, HeaderValue); 6] = [
        (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        ),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
        (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
        (header::REFERRER_POLICY, HeaderValue::from_static("no-referrer")),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
    ];
    (headers, body).into_response()
}
