//! The HTTP API's server: what every handler shares (`AppState`), serving
//! connections, and the application: one module per resource, merged here
//! into the routes of the OpenAPI document (`openapi`), and the middleware
//! every request passes.

pub mod approvals;
pub mod archive;
pub mod auth;
pub mod egress;
mod enums;
pub mod grants;
pub mod health;
pub mod install;
pub mod invoke;
pub mod kit;
pub mod mcp;
pub mod metrics;
pub mod notifications;
pub mod oauth;
mod openapi;
mod registry;
pub mod responses;
pub mod runs;
pub mod scan;
pub mod sessions;
pub mod skill_match;
pub mod skills;
pub mod tools;
pub mod toolserver;
pub mod ui;

use crate::catalog::CatalogHandle;
use axum::Router;
use axum::extract::Request;
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::{Redirect, Response};
pub use kit::conn::{ServerLimits, raise_open_files_limit};
use kit::error::{ApiError, InternalCause};
use kit::{conn, cors, guard, query};
use std::future::Future;
use std::sync::Arc;
use tower_http::request_id::{MakeRequestId, PropagateRequestIdLayer, RequestId, SetRequestIdLayer};
use tower_http::trace::{DefaultOnResponse, TraceLayer};
use tracing::Level;
use utoipa::openapi::OpenApi as Document;
use utoipa_axum::router::OpenApiRouter;
use utoipa_swagger_ui::SwaggerUi;

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    pub catalog: Arc<CatalogHandle>,
    pub invoker: Arc<crate::invoke::Invoker>,
    /// A person's side of the pipeline: deciding, the inbox, grants.
    pub approver: crate::invoke::Approver,
    /// The bearer tokens every protected handler checks (`auth::Require`);
    /// without any, the local secret (`Auth::open_with_secret`).
    pub auth: Arc<crate::auth::Auth>,
    /// Without tokens: which hosts and origins may call (`guard`).
    pub web: Arc<guard::WebGuard>,
    /// Installs uploads and manages installed versions.
    pub installer: Arc<crate::install::Installer>,
    /// How many connections and MCP sessions clients may hold, and for how
    /// long a connection may stay silent.
    pub limits: ServerLimits,
    /// Seed 002's runtime: sessions, their skills and hooks.
    pub sessions: Arc<crate::session::Sessions>,
}

impl AppState {
    /// The store, read-only: a handler that changes anything goes through
    /// the pipeline (`invoker`).
    pub fn store(&self) -> &crate::store::StoreReader {
        self.approver.reader()
    }
}

/// Serves `app(state)` on a bound listener until `shutdown` completes.
/// Then no new connection or run is taken; running tools get `grace` to
/// finish before their process groups are killed, and this returns once
/// every run has ended and been recorded.
///
/// Connections are served by hyper directly rather than `axum::serve`,
/// which bounds neither how many are open nor how long one may stay
/// silent: `conn` does, as `state.limits` says.
pub async fn serve(
    state: AppState,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: std::time::Duration,
) -> std::io::Result<()> {
    let housekeeping = tokio_util::sync::CancellationToken::new();
    tokio::spawn(state.invoker.clone().housekeeping(housekeeping.clone()));
    tokio::spawn(state.approver.clone().housekeeping(housekeeping.clone()));
    tokio::spawn(state.installer.clone().prepare_dependencies(housekeeping.clone()));
    tokio::spawn(state.sessions.clone().housekeeping(housekeeping.clone()));
    let _stop_housekeeping = housekeeping.drop_guard();
    let app = app(state.clone());
    let open = conn::Connections::new(state.limits.clone());
    let connections = hyper_util::server::graceful::GracefulShutdown::new();
    let mut builder = hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
    builder
        .http1()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(state.limits.header_timeout);
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = accept(&listener) => accepted,
            () = &mut shutdown => break,
        };
        // While this one waits for room, the next wait in the backlog.
        let slot = tokio::select! {
            slot = open.admit() => slot,
            () = &mut shutdown => break,
        };
        let connection = builder
            .serve_connection_with_upgrades(
                hyper_util::rt::TokioIo::new(stream),
                slot.service(app.clone(), peer),
            )
            .into_owned();
        // A client that goes away mid-request is not the server's fault.
        tokio::spawn(slot.serve(connections.watch(connection)));
    }
    drop(listener);
    // Runs end within the grace (or are killed), which lets the requests
    // waiting on them complete, which lets their connections close.
    let invoker = state.invoker.clone();
    tokio::spawn(async move { invoker.shutdown(grace).await });
    connections.shutdown().await;
    state.invoker.shutdown(grace).await;
    Ok(())
}

/// The next connection and its peer's address, with Nagle's algorithm
/// off. A streamed answer (an MCP call's SSE, a run's events) is written
/// in pieces: with Nagle on, each piece after the first waited for the
/// client's ACK of the one before, which a kept-alive client delays by up
/// to 40 ms, so every MCP `tools/call` took 40 ms more on a reused
/// connection (`cargo bench --bench mcp_sessions`).
async fn accept(listener: &tokio::net::TcpListener) -> (tokio::net::TcpStream, std::net::SocketAddr) {
    loop {
        match listener.accept().await {
            Ok(accepted) => {
                if let Err(e) = accepted.0.set_nodelay(true) {
                    tracing::debug!(error = %e, "cannot set TCP_NODELAY");
                }
                return accepted;
            }
            Err(e) => {
                // Out of descriptors, most likely: wait rather than spin.
                tracing::warn!(error = %e, "cannot accept a connection");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
}

/// Every route with its spec entry.
fn api() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(openapi::base())
        .merge(health::router())
        .merge(skills::router())
        .merge(archive::router())
        .merge(install::router())
        .merge(skill_match::router())
        .merge(sessions::router())
        .merge(scan::router())
        .merge(tools::router())
        .merge(invoke::router())
        .merge(runs::router())
        .merge(approvals::router())
        .merge(grants::router())
        .merge(egress::router())
        .merge(registry::router())
        .merge(notifications::router())
        .merge(metrics::router())
}

/// The OpenAPI document, exactly as `/openapi.json` serves it.
pub fn openapi() -> Document {
    let (_, doc) = api().split_for_parts();
    openapi::finish(doc)
}

/// The application: routes, docs, fallbacks and middleware.
pub fn app(state: AppState) -> Router {
    let (router, _) = api().split_for_parts();
    let doc = openapi();
    let cors = cors::layer(&state.web.allowed_origins);
    let known_queries = Arc::new(query::KnownQueries::from_document(&doc));
    router
        .merge(SwaggerUi::new("/docs").url("/openapi.json", doc))
        .merge(ui::router())
        .merge(mcp::router(&state))
        .merge(toolserver::router())
        .merge(oauth::router())
        // The interactive docs are the best first page for a person.
        .route(
            "/",
            axum::routing::get(|| async { Redirect::temporary("/docs/") }),
        )
        .fallback(no_route)
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .layer(axum::middleware::from_fn_with_state(
            known_queries,
            query::refuse_unknown,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            guard::refuse_web_pages,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            oauth::challenge,
        ))
        .with_state(state)
        .layer(axum::middleware::from_fn(metrics::track))
        .layer(axum::middleware::from_fn(log_internal))
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(|req: &Request| {
                    let id = req
                        .headers()
                        .get("x-request-id")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("");
                    // `caller` is filled in by `auth::Require` once the token is known.
                    tracing::info_span!("request", method = %req.method(), uri = %shown_uri(req.uri()),
                        request_id = %id, caller = tracing::field::Empty)
                })
                .on_response(DefaultOnResponse::new().level(Level::INFO)),
        )
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(SetRequestIdLayer::x_request_id(MakeUuid7))
        // Outermost: a preflight is answered before any check, and every
        // answer (a 401 too) carries the headers a page needs to read it.
        .layer(tower::util::option_layer(cors))
}

/// The URI as the log shows it: a `secret` in the query (an old start
/// link's, `/ui?secret=…`; the new one keeps it in the fragment, which no
/// request carries) or a `signature` (an artifact link's, which opens the
/// file to whoever holds it) is replaced by `***`, so the log never holds
/// either.
fn shown_uri(uri: &axum::http::Uri) -> std::borrow::Cow<'_, str> {
    let hidden = |name: &str| name == "secret" || name == "signature";
    let Some(query) = uri.query() else {
        return uri.to_string().into();
    };
    let pairs = form_urlencoded::parse(query.as_bytes());
    if !pairs.clone().any(|(name, _)| hidden(&name)) {
        return uri.to_string().into();
    }
    let mut shown = form_urlencoded::Serializer::new(String::new());
    for (name, value) in pairs {
        shown.append_pair(&name, if hidden(&name) { "***" } else { &value });
    }
    format!("{}?{}", uri.path(), shown.finish()).into()
}

/// 404 for a path no route serves, naming it.
async fn no_route(method: axum::http::Method, uri: axum::http::Uri) -> ApiError {
    ApiError::NoRoute {
        method: method.to_string(),
        path: uri.path().to_owned(),
    }
}

/// The longest a file route waits for the disk.
pub(crate) const FILE_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Reads `rel` beneath the directory `base` as [`crate::fsafe::read`]
/// does (no link followed, regular single-link files only), off the async
/// threads: 404 naming `shown` when refused, 413 over `limit`, 504 when
/// the disk does not answer within [`FILE_READ_TIMEOUT`].
pub(crate) async fn read_file_beneath(
    base: std::path::PathBuf,
    rel: String,
    shown: &str,
    limit: u64,
) -> Result<Vec<u8>, ApiError> {
    use crate::fsafe::Refused;
    match crate::fsafe::read(base, rel, limit, FILE_READ_TIMEOUT).await {
        Ok(bytes) => Ok(bytes),
        Err(Refused::NotFound) => Err(ApiError::not_found("file", shown)),
        Err(Refused::TooLarge(_)) => Err(ApiError::PayloadTooLarge(format!(
            "{shown} is larger than {limit} bytes"
        ))),
        Err(Refused::TimedOut(after)) => Err(ApiError::Timeout(format!(
            "{shown} could not be read within {after:?}; try again later"
        ))),
    }
}

/// Logs the hidden cause of a 500 inside the request's span.
async fn log_internal(req: Request, next: Next) -> Response {
    let res = next.run(req).await;
    if let Some(InternalCause(cause)) = res.extensions().get::<InternalCause>() {
        tracing::error!(%cause, "internal error");
    }
    res
}

/// Request ids are UUIDv7, like every other id of the API.
#[derive(Clone, Copy)]
struct MakeUuid7;

impl MakeRequestId for MakeUuid7 {
    fn make_request_id<B>(&mut self, _: &axum::http::Request<B>) -> Option<RequestId> {
        HeaderValue::from_str(&uuid::Uuid::now_v7().to_string())
            .ok()
            .map(RequestId::new)
    }
}

#[cfg(test)]
mod tests {
    use super::shown_uri;

    #[test]
    fn the_log_never_shows_a_secret_in_a_query() {
        let shown = |u: &str| shown_uri(&u.parse().unwrap()).into_owned();
        assert_eq!(shown("/ui?secret=abc123"), "/ui?secret=***");
        assert_eq!(
            shown("/ui?x=1&secret=abc&secret=d"),
            "/ui?x=1&secret=***&secret=***"
        );
        assert_eq!(shown("/runs?limit=5"), "/runs?limit=5");
        assert_eq!(
            shown("/runs/x/files/a.txt?expires=9&signature=ab12"),
            "/runs/x/files/a.txt?expires=9&signature=***"
        );
        assert_eq!(shown("/healthz"), "/healthz");
    }

    /// Streamed answers go out piece by piece at once: no piece waits for
    /// the client's delayed ACK of the one before.
    #[tokio::test]
    async fn accepted_connections_have_nagle_off() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (stream, peer) = super::accept(&listener).await;
        assert_eq!(peer, client.local_addr().unwrap());
        assert!(stream.nodelay().unwrap());
    }
}
