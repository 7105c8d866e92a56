//! Unknown query parameters are refused, not ignored: `?dryRun=true`
//! silently running a tool that was meant to be tried is the kind of
//! surprise an API must not spring. Which names an operation takes is read
//! from the OpenAPI document, so the check and the document cannot differ.

use super::error::ApiError;
use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use utoipa::openapi::path::ParameterIn;
use utoipa::openapi::{OpenApi, RefOr};

/// The query parameters of every documented operation, by method and
/// route template (as axum matches it).
#[derive(Debug, Default)]
pub struct KnownQueries(HashMap<(Method, String), BTreeSet<String>>);

impl KnownQueries {
    pub fn from_document(doc: &OpenApi) -> Self {
        let mut known = HashMap::new();
        for (path, item) in &doc.paths.paths {
            let operations = [
                (Method::GET, &item.get),
                (Method::PUT, &item.put),
                (Method::POST, &item.post),
                (Method::DELETE, &item.delete),
                (Method::PATCH, &item.patch),
            ];
            for (method, op) in operations {
                let Some(op) = op else { continue };
                let names = op
                    .parameters
                    .iter()
                    .flatten()
                    .filter_map(|p| match p {
                        RefOr::T(p) if p.parameter_in == ParameterIn::Query => Some(p.name.clone()),
                        _ => None,
                    })
                    .collect();
                known.insert((method, path.clone()), names);
            }
        }
        Self(known)
    }

    /// The names an operation takes; `None` for a route the document does
    /// not describe (the docs, the web page), which is not checked.
    fn of(&self, method: &Method, route: &str) -> Option<&BTreeSet<String>> {
        // axum spells a catch-all `{*path}`; the document `{path}`.
        let route = route.replace("{*", "{");
        self.0.get(&(method.clone(), route))
    }
}

/// Answers 400 when the query names a parameter the operation does not
/// take; runs inside the router, where axum has put the `MatchedPath`.
pub async fn refuse_unknown(State(known): State<Arc<KnownQueries>>, req: Request, next: Next) -> Response {
    let Some(query) = req.uri().query() else {
        return next.run(req).await;
    };
    let route = req.extensions().get::<MatchedPath>().map(MatchedPath::as_str);
    if let Some(takes) = route.and_then(|r| known.of(req.method(), r)) {
        let unknown: BTreeSet<String> = form_urlencoded::parse(query.as_bytes())
            .map(|(name, _)| name.into_owned())
            .filter(|name| !takes.contains(name))
            .collect();
        if !unknown.is_empty() {
            return ApiError::BadRequest(message(&unknown, takes)).into_response();
        }
    }
    next.run(req).await
}

fn message(unknown: &BTreeSet<String>, takes: &BTreeSet<String>) -> String {
    let quoted: Vec<String> = unknown
        .iter()
        .map(|n| format!("'{}'", n.escape_debug()))
        .collect();
    let which = if unknown.len() == 1 {
        format!("unknown query parameter {}", quoted.join(", "))
    } else {
        format!("unknown query parameters {}", quoted.join(", "))
    };
    if takes.is_empty() {
        format!("{which}; this operation takes no query parameters")
    } else {
        let names: Vec<&str> = takes.iter().map(String::as_str).collect();
        format!("{which}; this operation takes: {}", names.join(", "))
    }
}
