//! `/ui`: the approvals inbox, a static page that talks to the same API as
//! every other client (`docs/design.md` §7). Beside the calls waiting for
//! a person, it lists the uploads waiting for an admin's review
//! (`GET /reviews`), with their findings and changes.
//!
//! The files under `ui/` are compiled in with `include_str!`, so the binary
//! is the whole deployment: no asset directory to ship or to get out of step
//! with the server. The page holds no data and needs no token to load; every
//! call it makes carries the token the person typed in, or the cookie of a
//! server without tokens, so the API's own auth decides what it may see and
//! do.
//!
//! That cookie comes from the link `skilld serve` prints at start,
//! `/ui?secret=…`: its answer sets the cookie (HttpOnly, so no script reads
//! it; SameSite=Strict, so no other site's page sends it) and sends the
//! browser back to `/ui`, so the secret leaves the address bar and history.
//!
//! It is not in the OpenAPI document (like `/docs`): it is a page for
//! people, not part of the API's contract.

use super::AppState;
use super::error::ApiError;
use super::extract::Path;
use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
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

async fn index(State(state): State<AppState>, RawQuery(query): RawQuery) -> Response {
    let secret = query.as_deref().and_then(|q| {
        form_urlencoded::parse(q.as_bytes())
            .find(|(name, _)| name == "secret")
            .map(|(_, value)| value.into_owned())
    });
    match secret {
        Some(secret) => sign_in(&state, &secret),
        None => page(INDEX_HTML, "text/html; charset=utf-8"),
    }
}

/// The start link's answer: back to the page, with the secret as a cookie
/// when it is the right one (a wrong one is dropped, and the page then says
/// how to get in).
fn sign_in(state: &AppState, secret: &str) -> Response {
    let mut res = (StatusCode::SEE_OTHER, [(header::LOCATION, "ui")]).into_response();
    res.headers_mut()
        .insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    res.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    let Some(id) = state
        .auth
        .local_id()
        .filter(|_| state.auth.is_local_secret(secret))
    else {
        return res;
    };
    let cookie = format!(
        "{}{id}={secret}; HttpOnly; SameSite=Strict; Path=/",
        super::auth::COOKIE_PREFIX
    );
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        res.headers_mut().insert(header::SET_COOKIE, value);
    }
    res
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
