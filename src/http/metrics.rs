//! `GET /metrics`, and the middleware that counts every HTTP request.

use super::AppState;
use super::auth::{Require, need};
use axum::extract::{MatchedPath, Request};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::time::Instant;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The content type of Prometheus' text exposition format.
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(metrics))
}

/// Prometheus metrics, in the text format.
///
/// Runs by tool and status, the run-duration histogram, runs in flight,
/// approvals pending, and HTTP requests by route template and status.
/// Needs `read`, like the catalog, since the series name every tool and
/// how often it runs; a scraper sends its token with `authorization` in
/// its scrape config.
#[utoipa::path(get, path = "/metrics", tag = "service", operation_id = "metrics",
    security(("bearer" = ["read"])),
    responses(
        (status = 200, description = "The Prometheus text format, version 0.0.4",
            body = String, content_type = "text/plain; version=0.0.4"),
        super::responses::BadQuery,
    ))]
async fn metrics(_: Require<need::Read>) -> Response {
    (
        [(header::CONTENT_TYPE, PROMETHEUS_TEXT)],
        crate::metrics::render(),
    )
        .into_response()
}

/// Counts the request under its route template. It runs inside the
/// router, where axum has put the `MatchedPath`; the fallback has none,
/// so unknown paths share one `unmatched` series however many a client
/// makes up.
pub async fn track(req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = req.method().clone();
    let route = req.extensions().get::<MatchedPath>().cloned();
    let res = next.run(req).await;
    crate::metrics::http_request_finished(
        &method,
        route.as_ref().map(MatchedPath::as_str),
        res.status().as_u16(),
        started.elapsed(),
    );
    res
}
