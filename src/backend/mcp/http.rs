//! rmcp's Streamable HTTP client over hyper and rustls on ring, as
//! webhooks and OAuth fetch. By hand because rmcp's own clients are
//! reqwest (which takes either aws-lc, a minute of C, or a process-wide
//! crypto provider every other client in the process would then need) or
//! a Unix socket; rmcp keeps the protocol, this only moves the bytes.

use crate::skill::backend::BackendError;
use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderName, HeaderValue};
use hyper::{Method, Request, StatusCode};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use sse_stream::{Sse, SseStream};
use std::collections::HashMap;
use std::sync::Arc;

const SESSION_ID: &str = "mcp-session-id";
const LAST_EVENT_ID: &str = "last-event-id";
const EVENT_STREAM: &str = "text/event-stream";
const JSON: &str = "application/json";
/// The largest JSON answer, and the most one answer's event stream may
/// carry in all.
const MAX_ANSWER: usize = 16 * 1024 * 1024;
/// The most the standalone stream carries before it is dropped (rmcp then
/// opens it again).
const MAX_STANDALONE: usize = 64 * 1024 * 1024;
/// The most of an error's body kept to say what went wrong.
const MAX_ERROR: usize = 2048;

type Error = StreamableHttpError<HttpError>;

/// What failed below the protocol.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("{0}")]
    Request(String),
}

/// A Streamable HTTP client.
#[derive(Clone)]
pub(super) struct HyperClient {
    client: crate::https::Client<Full<Bytes>>,
}

impl HyperClient {
    pub fn new() -> Result<Self, BackendError> {
        let client = crate::https::client()
            .map_err(|e| BackendError::NotRunning(format!("cannot load the system's TLS roots: {e}")))?;
        Ok(Self { client })
    }

    /// A request with the headers every one carries.
    fn request(
        method: Method,
        uri: &str,
        session: Option<&str>,
        auth: Option<String>,
        custom: HashMap<HeaderName, HeaderValue>,
    ) -> hyper::http::request::Builder {
        let mut req = Request::builder().method(method).uri(uri);
        if let Some(session) = session {
            req = req.header(SESSION_ID, session);
        }
        if let Some(token) = auth {
            req = req.header(AUTHORIZATION, format!("Bearer {token}"));
        }
        for (name, value) in custom {
            req = req.header(name, value);
        }
        req
    }

    async fn send(
        &self,
        req: hyper::http::request::Builder,
        body: Bytes,
    ) -> Result<hyper::Response<hyper::body::Incoming>, Error> {
        let req = req
            .body(Full::new(body))
            .map_err(|e| client_error(e.to_string()))?;
        self.client
            .request(req)
            .await
            .map_err(|e| client_error(format!("{e:#}")))
    }
}

fn client_error(why: String) -> Error {
    StreamableHttpError::Client(HttpError::Request(why))
}

fn content_type(res: &hyper::Response<hyper::body::Incoming>) -> String {
    res.headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase()
}

fn session_of(res: &hyper::Response<hyper::body::Incoming>) -> Option<String> {
    res.headers()
        .get(SESSION_ID)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// The events of a body, at most `limit` bytes of it.
fn events(body: hyper::body::Incoming, limit: usize) -> BoxStream<'static, Result<Sse, SseError>> {
    SseStream::new(Limited::new(body, limit).map_err(std::io::Error::other)).boxed()
}

/// A failed answer as an error that says its status and the start of its
/// body; a lost session is rmcp's to recover.
async fn failure(res: hyper::Response<hyper::body::Incoming>, had_session: bool) -> Error {
    let status = res.status();
    if status == StatusCode::NOT_FOUND && had_session {
        return StreamableHttpError::SessionExpired;
    }
    let body = Limited::new(res.into_body(), MAX_ERROR)
        .collect()
        .await
        .map(|b| String::from_utf8_lossy(&b.to_bytes()).into_owned())
        .unwrap_or_default();
    let said = body.trim();
    StreamableHttpError::UnexpectedServerResponse(format!("HTTP {status}: {said}").into())
}

impl StreamableHttpClient for HyperClient {
    type Error = HttpError;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, Error> {
        let body = serde_json::to_vec(&message)?;
        let req = Self::request(
            Method::POST,
            &uri,
            session_id.as_deref(),
            auth_header,
            custom_headers,
        )
        .header(ACCEPT, format!("{JSON}, {EVENT_STREAM}"))
        .header(CONTENT_TYPE, JSON);
        let res = self.send(req, Bytes::from(body)).await?;
        if matches!(res.status(), StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if !res.status().is_success() {
            return Err(failure(res, session_id.is_some()).await);
        }
        let (kind, session) = (content_type(&res), session_of(&res));
        if kind.starts_with(EVENT_STREAM) {
            return Ok(StreamableHttpPostResponse::Sse(
                events(res.into_body(), MAX_ANSWER),
                session,
            ));
        }
        let bytes = Limited::new(res.into_body(), MAX_ANSWER)
            .collect()
            .await
            .map_err(|_| StreamableHttpError::ResponseBodyTooLarge { max_size: MAX_ANSWER })?
            .to_bytes();
        if bytes.is_empty() {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if !kind.starts_with(JSON) {
            return Err(StreamableHttpError::UnexpectedContentType(Some(kind)));
        }
        let message: ServerJsonRpcMessage = serde_json::from_slice(&bytes)?;
        Ok(StreamableHttpPostResponse::Json(message, session))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Error> {
        let req = Self::request(
            Method::DELETE,
            &uri,
            Some(&session_id),
            auth_header,
            custom_headers,
        );
        let res = self.send(req, Bytes::new()).await?;
        match res.status() {
            s if s.is_success() || s == StatusCode::METHOD_NOT_ALLOWED || s == StatusCode::NOT_FOUND => {
                Ok(())
            }
            _ => Err(failure(res, false).await),
        }
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Error> {
        let mut req = Self::request(
            Method::GET,
            &uri,
            session_id.as_deref(),
            auth_header,
            custom_headers,
        )
        .header(ACCEPT, EVENT_STREAM);
        if let Some(last) = last_event_id {
            req = req.header(LAST_EVENT_ID, last);
        }
        let res = self.send(req, Bytes::new()).await?;
        if res.status() == StatusCode::METHOD_NOT_ALLOWED {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        if !res.status().is_success() {
            return Err(failure(res, session_id.is_some()).await);
        }
        if !content_type(&res).starts_with(EVENT_STREAM) {
            return Err(StreamableHttpError::UnexpectedContentType(Some(content_type(
                &res,
            ))));
        }
        Ok(events(res.into_body(), MAX_STANDALONE))
    }
}
