//! Extractors that answer with our problem+json instead of axum's plain
//! text when a request does not parse.

use super::error::ApiError;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

/// `axum::extract::Query`, rejecting with a 400 problem.
pub struct Query<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| Query(q.0))
            .map_err(|e| ApiError::BadRequest(format!("invalid query: {}", e.body_text())))
    }
}

/// `axum::extract::Path`, rejecting with a 400 problem.
pub struct Path<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for Path<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| Path(p.0))
            .map_err(|e| ApiError::BadRequest(format!("invalid path: {}", e.body_text())))
    }
}

/// The request's `Accept` header, for routes that also answer in text.
pub struct Accept(pub Option<String>);

impl<S: Send + Sync> FromRequestParts<S> for Accept {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Accept(
            parts
                .headers
                .get(axum::http::header::ACCEPT)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
        ))
    }
}

impl Accept {
    /// True when `mime` is listed with a higher quality than JSON.
    pub fn prefers(&self, mime: &str) -> bool {
        let Some(accept) = &self.0 else { return false };
        let quality = |want: &str| {
            accept
                .split(',')
                .filter_map(|part| {
                    let mut it = part.split(';');
                    let m = it.next()?.trim();
                    (m.eq_ignore_ascii_case(want)).then(|| {
                        it.find_map(|p| p.trim().strip_prefix("q=").and_then(|q| q.parse::<f32>().ok()))
                            .unwrap_or(1.0)
                    })
                })
                .fold(None, |best: Option<f32>, q| Some(best.map_or(q, |b| b.max(q))))
        };
        match (quality(mime), quality("application/json")) {
            (Some(m), Some(j)) => m > j,
            (Some(m), None) => m > 0.0,
            _ => false,
        }
    }
}

/// The largest request body read (1 MiB).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// A JSON body; an empty body reads as `{}`. Rejections are problems: 400
/// for JSON that does not parse or fit, 413 over [`MAX_BODY_BYTES`].
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, _: &S) -> Result<Self, ApiError> {
        let bytes = axum::body::to_bytes(req.into_body(), MAX_BODY_BYTES)
            .await
            .map_err(|_| ApiError::PayloadTooLarge(format!("the body is over {MAX_BODY_BYTES} bytes")))?;
        let text: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
            b"{}"
        } else {
            &bytes
        };
        serde_json::from_slice(text)
            .map(JsonBody)
            .map_err(|e| ApiError::BadRequest(format!("the body is not a valid request: {e}")))
    }
}
