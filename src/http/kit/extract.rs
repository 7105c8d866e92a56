//! Extractors that answer with our problem+json instead of axum's plain
//! text when a request does not parse.

use super::error::ApiError;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

/// The address of the client at the other end of the request's
/// connection (`serve` records it), when there is one.
pub struct Peer(pub Option<std::net::IpAddr>);

impl<S: Send + Sync> FromRequestParts<S> for Peer {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Self::of(&parts.extensions))
    }
}

impl Peer {
    /// The peer a request's `extensions` name.
    pub fn of(extensions: &axum::http::Extensions) -> Self {
        let info = extensions.get::<axum::extract::ConnectInfo<std::net::SocketAddr>>();
        Self(info.map(|i| i.0.ip()))
    }

    /// Who holds what `caller` opens over this connection (see
    /// [`crate::share::holder`]).
    pub fn holder(&self, caller: &crate::auth::Caller) -> String {
        crate::share::holder(caller.name.as_deref(), self.0)
    }
}

/// `axum::extract::Query`, rejecting with a 400 problem.
pub struct Query<T>(pub T);

/// The largest page any list operation serves.
pub const MAX_PAGE: u32 = 500;

/// A list operation's `limit`: `default` when not given, else 1 to
/// [`MAX_PAGE`] (the documented range), or 400.
pub fn page_limit(given: Option<u32>, default: u32) -> Result<u32, ApiError> {
    let limit = given.unwrap_or(default);
    if (1..=MAX_PAGE).contains(&limit) {
        Ok(limit)
    } else {
        Err(ApiError::BadRequest(format!(
            "limit must be between 1 and {MAX_PAGE}"
        )))
    }
}

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or_default();
        let fields = serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
        serde_path_to_error::deserialize(fields)
            .map(Query)
            .map_err(|e| ApiError::BadRequest(explain_query(&e)))
    }
}

/// A query that does not fit, in the caller's terms: which parameter,
/// and what it takes.
fn explain_query(e: &serde_path_to_error::Error<serde_urlencoded::de::Error>) -> String {
    let text = e.inner().to_string().replace('`', "'");
    let what = match text.as_str() {
        "invalid digit found in string" | "cannot parse integer from empty string" => {
            "must be a whole number".to_owned()
        }
        "number too large to fit in target type" => "is too large".to_owned(),
        "provided string was not `true` or `false`" | "provided string was not 'true' or 'false'" => {
            "must be true or false".to_owned()
        }
        other => reword(other),
    };
    match e.path().to_string().as_str() {
        "." => format!("the query does not fit this request: {what}"),
        name => format!("query parameter '{name}' {what}"),
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

/// A JSON body; an empty body reads as `{}`. Rejections are problems: 415
/// unless it is sent as `application/json` (an empty body may come with no
/// type at all), 400 for JSON that does not parse or fit, 413 over
/// [`MAX_BODY_BYTES`].
///
/// The type is required because a web page can send `text/plain` and form
/// bodies anywhere without asking (a "simple" cross-site request), but not
/// `application/json`.
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, _: &S) -> Result<Self, ApiError> {
        let content_type = req
            .headers()
            .get(axum::http::header::CONTENT_TYPE)
            .map(|v| v.to_str().unwrap_or("(not text)").to_owned());
        if let Some(ct) = &content_type
            && !is_json(ct)
        {
            return Err(ApiError::UnsupportedMediaType(format!(
                "this operation takes a JSON body: send Content-Type: application/json, not '{}'",
                ct.escape_debug()
            )));
        }
        // A client that trickles its body would hold a task and a
        // connection for as long as it liked.
        let bytes = tokio::time::timeout(
            BODY_TIMEOUT,
            axum::body::to_bytes(req.into_body(), MAX_BODY_BYTES),
        )
        .await
        .map_err(|_| {
            ApiError::RequestTimeout(format!(
                "the body did not arrive within {} seconds",
                BODY_TIMEOUT.as_secs()
            ))
        })?
        .map_err(unread)?;
        // Only an empty body means none: whitespace alone is not JSON.
        let text: &[u8] = if bytes.is_empty() {
            b"{}"
        } else if content_type.is_none() {
            return Err(ApiError::UnsupportedMediaType(
                "this operation takes a JSON body: send Content-Type: application/json with it".to_owned(),
            ));
        } else {
            &bytes
        };
        let mut json = serde_json::Deserializer::from_slice(text);
        let value: serde_json::Value =
            serde_path_to_error::deserialize(&mut json).map_err(|e| ApiError::BadRequest(explain(&e)))?;
        json.end()
            .map_err(|e| ApiError::BadRequest(format!("the body is not valid JSON: {}", plain(&e))))?;
        // serde reads a struct from an array too (`[null, null]`): every
        // body this API takes is an object, so say so rather than guess.
        if !value.is_object() {
            return Err(ApiError::BadRequest(format!(
                "the body must be a JSON object, not {}",
                json_kind(&value)
            )));
        }
        let value = serde_path_to_error::deserialize(value).map_err(|e| ApiError::BadRequest(explain(&e)))?;
        Ok(JsonBody(value))
    }
}

fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// The longest a request body may take to arrive, whole.
pub const BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Why a body could not be read: too large, or broken off by the client.
fn unread(e: axum::Error) -> ApiError {
    let cause = e.into_inner();
    if cause.is::<http_body_util::LengthLimitError>() {
        ApiError::PayloadTooLarge(format!("the body is over {MAX_BODY_BYTES} bytes"))
    } else {
        ApiError::BadRequest(format!("the body could not be read: {cause}"))
    }
}

/// `application/json` or a `+json` type, with any parameters.
fn is_json(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// A body that does not fit, in the caller's terms: which field, and what
/// was wrong with it, without the parser's line and column for JSON that
/// parsed.
fn explain(e: &serde_path_to_error::Error<serde_json::Error>) -> String {
    let inner = e.inner();
    if inner.is_syntax() || inner.is_eof() {
        return format!(
            "the body is not valid JSON: {} (line {}, column {})",
            plain(inner),
            inner.line(),
            inner.column()
        );
    }
    let what = reword(&plain(inner));
    match e.path().to_string().as_str() {
        "." => format!("the body does not fit this request: {what}"),
        path => format!("field '{path}' {what}"),
    }
}

/// serde_json's message without its position, with quotes for backticks.
fn plain(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let text = match text.rfind(" at line ") {
        Some(i) => &text[..i],
        None => &text,
    };
    text.replace('`', "'")
}

/// serde's phrases as sentences about the field they are prefixed with.
fn reword(message: &str) -> String {
    if let Some(rest) = message.strip_prefix("unknown field ") {
        let expected = rest.split_once(", expected ").map_or("", |(_, e)| e);
        return format!(
            "is not one this request takes (it takes {})",
            expected.trim_start_matches("one of ")
        );
    }
    if let Some(rest) = message.strip_prefix("unknown variant ") {
        let (got, expected) = rest.split_once(", expected ").unwrap_or((rest, "another value"));
        return format!("must be {}, not {got}", expected.trim_start_matches("one of "));
    }
    if let Some(rest) = message.strip_prefix("invalid type: ") {
        let (got, expected) = rest.split_once(", expected ").unwrap_or((rest, "another type"));
        return format!("must be {expected}, not {got}");
    }
    if let Some(name) = message.strip_prefix("missing field ") {
        return format!("is missing its required field {name}");
    }
    message.to_owned()
}

/// The caller's tool policy: `?agent_tools=read,write,shell` (repeated, the
/// lists join), else the server's `agent_tools` setting, else unstated.
pub struct AgentPolicy(pub crate::catalog::AgentTools);

impl FromRequestParts<crate::http::AppState> for AgentPolicy {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &crate::http::AppState,
    ) -> Result<Self, Self::Rejection> {
        let stated = crate::catalog::AgentTools::from_query(parts.uri.query());
        Ok(Self(stated.or(state.catalog.agent_tools())))
    }
}

/// `?agent_tools=`, as the OpenAPI document describes it; read by
/// [`AgentPolicy`].
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AgentToolsQuery {
    /// The tools the calling agent has, comma-separated (`read,write,shell`;
    /// empty: none). A skill whose `requires_tools` names a tool that is
    /// neither here nor served by a loaded skill is left out, with the
    /// reason. Without it, the server's `agent_tools` setting applies, and
    /// without that nothing is left out.
    #[expect(
        dead_code,
        reason = "declared for the document; `AgentPolicy` reads the query"
    )]
    pub agent_tools: Option<String>,
}
