//! The HTTP API: one module per resource, merged here with the OpenAPI
//! document they describe, and the middleware every request passes.

pub mod approvals;
pub mod archive;
pub mod auth;
mod conn;
mod cors;
pub mod error;
mod extract;
pub mod guard;
pub mod health;
pub mod install;
pub mod invoke;
pub mod mcp;
pub mod metrics;
pub mod notifications;
pub mod oauth;
mod query;
pub mod responses;
pub mod runs;
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
pub use conn::{ServerLimits, raise_open_files_limit};
use error::{ApiError, InternalCause};
use std::future::Future;
use std::sync::Arc;
use tower_http::request_id::{MakeRequestId, PropagateRequestIdLayer, RequestId, SetRequestIdLayer};
use tower_http::trace::{DefaultOnResponse, TraceLayer};
use tracing::Level;
use utoipa::OpenApi;
use utoipa::openapi::OpenApi as Document;
use utoipa_axum::router::OpenApiRouter;
use utoipa_swagger_ui::SwaggerUi;

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    pub catalog: Arc<CatalogHandle>,
    pub invoker: Arc<crate::invoke::Invoker>,
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
    tokio::spawn(state.installer.clone().prepare_dependencies(housekeeping.clone()));
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

/// The next connection and its peer's address.
async fn accept(listener: &tokio::net::TcpListener) -> (tokio::net::TcpStream, std::net::SocketAddr) {
    loop {
        match listener.accept().await {
            Ok(accepted) => return accepted,
            Err(e) => {
                // Out of descriptors, most likely: wait rather than spin.
                tracing::warn!(error = %e, "cannot accept a connection");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "skilld",
        description = "Serves skills as an API: the catalog, tool exports for LLM providers, and tool runs.",
        license(name = "MIT OR Apache-2.0", identifier = "MIT OR Apache-2.0"),
    ),
    // Routes axum registers with a wildcard (see `skills::router`, `runs::router`).
    paths(skills::get_skill_file, runs::get_run_file),
    // Types used only in query parameters are not collected on their own.
    components(schemas(crate::export::Format, install::UploadTrust)),
    tags(
        (name = "service", description = "Health, readiness and metrics"),
        (name = "skills", description = "The skill catalog"),
        (name = "tools", description = "Tools and their exports"),
        (name = "invoke", description = "Running tools"),
        (name = "runs", description = "The audit log of every run"),
        (name = "approvals", description = "Calls waiting for a person, decisions and standing grants"),
    )
)]
struct ApiDoc;

/// Every route with its spec entry.
fn api() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(health::router())
        .merge(skills::router())
        .merge(archive::router())
        .merge(install::router())
        .merge(skill_match::router())
        .merge(tools::router())
        .merge(invoke::router())
        .merge(runs::router())
        .merge(approvals::router())
        .merge(notifications::router())
        .merge(metrics::router())
}

/// The OpenAPI document, exactly as `/openapi.json` serves it.
pub fn openapi() -> Document {
    let (_, mut doc) = api().split_for_parts();
    doc.info.version = env!("CARGO_PKG_VERSION").to_owned();
    describe_auth(&mut doc);
    type_run_result(&mut doc);
    doc
}

/// `Run.result` holds an `Envelope` (or null). The store keeps it as JSON
/// and does not import the invoke pipeline that defines the envelope, so
/// the document says so here.
fn type_run_result(doc: &mut Document) {
    use utoipa::openapi::schema::{OneOfBuilder, Schema, Type};
    use utoipa::openapi::{Object, Ref, RefOr};
    let run = doc.components.as_mut().and_then(|c| c.schemas.get_mut("Run"));
    if let Some(RefOr::T(Schema::Object(run))) = run {
        let mut envelope = Ref::from_schema_name("Envelope");
        envelope.description = "The envelope, once finished.".to_owned();
        let result = OneOfBuilder::new()
            .item(envelope)
            .item(Object::with_type(Type::Null))
            .build();
        run.properties
            .insert("result".to_owned(), Schema::OneOf(result).into());
    }
}

/// Adds the `bearer` scheme, and the 401 and 403 answers of every
/// operation that names it. Handlers declare only
/// `security(("bearer" = ["<role>"]))` (OpenAPI 3.1 lets a non-OAuth
/// requirement list role names), so these answers read the same everywhere.
fn describe_auth(doc: &mut Document) {
    use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
    use utoipa::openapi::{ContentBuilder, HeaderBuilder, Object, Ref, ResponseBuilder, Type};
    doc.components
        .get_or_insert_with(Default::default)
        .add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "`Authorization: Bearer <token>`, required once the server has tokens configured. \
                     Each operation lists the least role it needs; roles include the ones before them: \
                     read < invoke < approve < admin. A server without tokens lets anyone list and \
                     invoke; the rest (deciding approvals, reading them and the grants, admin) needs \
                     its local secret, as this bearer token or in the cookie its start link sets.",
                    ))
                    .build(),
            ),
        );
    describe_signed_links(doc);
    let problem = || {
        ContentBuilder::new()
            .schema(Some(Ref::from_schema_name("Problem")))
            .build()
    };
    for item in doc.paths.paths.values_mut() {
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ];
        for op in operations.into_iter().flatten() {
            let roles: Vec<String> = op
                .security
                .iter()
                .flatten()
                .filter_map(|req| serde_json::to_value(req).ok())
                .filter_map(|v| serde_json::from_value::<Vec<String>>(v["bearer"].clone()).ok())
                .flatten()
                .collect();
            let Some(role) = roles.first() else { continue };
            let unauthorized = ResponseBuilder::new()
                .description(
                    "Tokens are configured, and the request sent none, or an unknown or malformed one; \
                     or the server has none, and this needs its local secret (`local_secret_required`)",
                )
                .header(
                    "WWW-Authenticate",
                    HeaderBuilder::new()
                        .schema(Some(Object::with_type(Type::String)))
                        .description(Some(
                            r#"`Bearer realm="skilld"`, with `error="invalid_token"` when a token was sent, and `resource_metadata="<URL>"` (RFC 9728) when OAuth issuers are configured"#,
                        ))
                        .build(),
                )
                .content("application/problem+json", problem());
            let forbidden = ResponseBuilder::new()
                .description(format!("The token's role is below `{role}`"))
                .content("application/problem+json", problem());
            op.responses
                .responses
                .insert("401".to_owned(), unauthorized.into());
            // A handler may document its own 403 (a standing deny); the
            // role reason then joins it rather than replacing it.
            match op.responses.responses.get_mut("403") {
                Some(utoipa::openapi::RefOr::T(own)) => {
                    own.description = format!("{}; or the token's role is below `{role}`", own.description);
                }
                Some(_) => {}
                None => {
                    op.responses.responses.insert("403".to_owned(), forbidden.into());
                }
            }
        }
    }
}

/// Adds the `signed_link` scheme: an artifact's `url` opens that one file
/// without a token until it expires (`runs::get_run_file`).
fn describe_signed_links(doc: &mut Document) {
    use utoipa::openapi::security::{ApiKey, ApiKeyValue, SecurityScheme};
    doc.components
        .get_or_insert_with(Default::default)
        .add_security_scheme(
            "signed_link",
            SecurityScheme::ApiKey(ApiKey::Query(ApiKeyValue::with_description(
                "signature",
                "The `signature` (with `expires`) of an artifact's `url` in a run's envelope: it opens that one \
                 file of that run, without a token, until `expires` (Unix seconds), when the artifact is \
                 deleted. An HMAC-SHA256 under a key of the instance that ran the run, kept in its data \
                 directory. Altered, it is refused with 403 `bad_signature`; late, 403 `link_expired`.",
            ))),
        );
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

/// The URI as the log shows it: a `secret` in the query (the start link's,
/// `/ui?secret=…`) or a `signature` (an artifact link's, which opens the
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
}
