//! `/ui`: the approvals inbox, a static page that talks to the same API as
//! every other client (`docs/design.md` §7). Beside the calls waiting for
//! a person, it lists the uploads waiting for an admin's review
//! (`GET /reviews`), with their findings and changes.
//!
//! The files under `ui/` are compiled in with `include_str!`, so the binary
//! is the whole deployment: no asset directory to ship or to get out of step
//! with the server. Only the names `FILES` lists are served, a fixed list:
//! no other file, and no path, is reachable. The page holds no data and
//! needs no token to load; every call it makes carries, as a bearer token,
//! the token the person typed in or the local secret of a server without
//! tokens, so the API's own auth decides what it may see and do.
//!
//! The script is ES modules served as they are, with no build step:
//! `index.html` loads `app.js`, which imports the others by relative name
//! (`./api.js`): a module per part of the page (the inbox, the activations,
//! the uploads, the runs, the grants, the history, signing in) and a small
//! kit they share (what the browser keeps, the API client, the DOM helpers,
//! the cards and their polling). `script-src 'self'` lets same-origin
//! modules run; a browser runs a module only when it is served as
//! `text/javascript`, and `nosniff` holds every other file to its type too.
//!
//! The local secret comes from the link `skilld serve` prints at start,
//! `/ui#secret=…`. A fragment never reaches a server, so the secret is in
//! no request, log or `Referer`; the page takes it from the address bar at
//! once and keeps it in `sessionStorage`, which is its origin's alone
//! (scheme, host and port). No cookie holds it: a cookie goes to every
//! port of its host, so any other local listener would receive it.
//!
//! The start link once carried the secret in the query, `/ui?secret=…`.
//! Such a link now sets nothing: it is sent back to the page, which says
//! to use the new link (`OLD_LINK`).
//!
//! It is not in the OpenAPI document (like `/docs`): it is a page for
//! people, not part of the API's contract.

use super::AppState;
use super::kit::error::ApiError;
use super::kit::extract::Path;
use axum::Router;
use axum::extract::RawQuery;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;

const INDEX_HTML: &str = include_str!("../../ui/index.html");

const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

/// The files under `/ui/`, by name, with their types; a new module of the
/// page is served once it is listed here.
const FILES: &[(&str, &str, &str)] = &[
    ("style.css", include_str!("../../ui/style.css"), CSS),
    // The entry point, and the page's parts.
    ("app.js", include_str!("../../ui/app.js"), JS),
    ("signin.js", include_str!("../../ui/signin.js"), JS),
    ("inbox.js", include_str!("../../ui/inbox.js"), JS),
    ("approval-card.js", include_str!("../../ui/approval-card.js"), JS),
    ("stream.js", include_str!("../../ui/stream.js"), JS),
    ("notify.js", include_str!("../../ui/notify.js"), JS),
    ("activations.js", include_str!("../../ui/activations.js"), JS),
    ("egress.js", include_str!("../../ui/egress.js"), JS),
    ("uploads.js", include_str!("../../ui/uploads.js"), JS),
    ("runs.js", include_str!("../../ui/runs.js"), JS),
    ("grants.js", include_str!("../../ui/grants.js"), JS),
    ("history.js", include_str!("../../ui/history.js"), JS),
    ("views.js", include_str!("../../ui/views.js"), JS),
    // The kit they share.
    ("storage.js", include_str!("../../ui/storage.js"), JS),
    ("api.js", include_str!("../../ui/api.js"), JS),
    ("dom.js", include_str!("../../ui/dom.js"), JS),
    ("format.js", include_str!("../../ui/format.js"), JS),
    ("cards.js", include_str!("../../ui/cards.js"), JS),
];

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

/// Where an old start link (`/ui?secret=…`) is sent: the page, with a
/// fragment that tells it to say the link is of the old form. The secret
/// is not carried on (nor checked): the new link is the one to use.
const OLD_LINK: &str = "ui#old-start-link";

async fn index(RawQuery(query): RawQuery) -> Response {
    let old_link = query
        .as_deref()
        .is_some_and(|q| form_urlencoded::parse(q.as_bytes()).any(|(name, _)| name == "secret"));
    if old_link {
        return from_old_link();
    }
    page(INDEX_HTML, "text/html; charset=utf-8")
}

/// The old start link's answer: back to the page and nothing set. Neither
/// stored (`no-store`) nor named to the next site (`no-referrer`), since
/// its address holds the secret.
fn from_old_link() -> Response {
    let headers = [
        (header::LOCATION, HeaderValue::from_static(OLD_LINK)),
        (header::REFERRER_POLICY, HeaderValue::from_static("no-referrer")),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
    ];
    (StatusCode::SEE_OTHER, headers).into_response()
}

async fn asset(Path(name): Path<String>) -> Result<Response, ApiError> {
    match FILES.iter().find(|(known, _, _)| *known == name) {
        Some(&(_, body, content_type)) => Ok(page(body, content_type)),
        None => Err(ApiError::not_found("file", name)),
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
