//! `skilld install`'s side of the wire: fetching a skill's archive from
//! another skilld (with the hash it claims), and uploading one to a
//! server. A hand-written HTTP call on hyper's client, already a
//! dependency for webhooks, rather than a second HTTP client crate.
//!
//! How a transfer goes is told to an [`Observer`] the caller passes: the
//! command line draws it on a terminal, and this layer knows of none.

use bytes::Bytes;
use futures_util::StreamExt;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Body as _, Frame};
use hyper::{Method, Request, StatusCode};
use std::convert::Infallible;
use std::future::Future;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

/// Every body sent: a whole one, or an upload told part by part.
type Body = BoxBody<Bytes, Infallible>;
type Client = crate::https::Client<Body>;

/// The parts an upload is sent in, so that its progress moves.
const UPLOAD_PART: usize = 64 * 1024;

/// Told how a transfer goes, by whoever shows it. Every method does
/// nothing unless the observer says otherwise.
pub trait Observer: Send + Sync {
    /// How many bytes will move, when that is known.
    fn length(&self, _bytes: Option<u64>) {}
    /// `bytes` more moved.
    fn advanced(&self, _bytes: u64) {}
    /// Whether an upload asks for the server's progress lines (as an
    /// event stream): only an observer that shows them needs them.
    fn follows(&self) -> bool {
        false
    }
    /// One line of the server's progress.
    fn said(&self, _line: &str) {}
    /// The transfer ended, well or not.
    fn finished(&self) {}
}

/// What a peer or a file gave.
pub struct Fetched {
    pub file: std::fs::File,
    /// `SkillDetail.hash` of the skill at its source (`X-Skill-Hash`).
    pub hash: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{0}")]
    Usage(String),
    #[error("cannot reach {url}: {why}")]
    Unreachable { url: String, why: String },
    /// The peer answered with a problem: its status and detail.
    #[error("{url} answered {status}: {detail}")]
    Refused {
        url: String,
        status: u16,
        detail: String,
    },
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

fn client() -> Result<Client, ClientError> {
    Ok(crate::https::client()?)
}

/// The archive URL of a skill named by `url`: `…/skills/NAME[@VERSION]`,
/// with or without `/archive`.
pub fn archive_url(url: &str) -> Result<String, ClientError> {
    let trimmed = url.trim_end_matches('/');
    let Some((_, after)) = trimmed.rsplit_once("/skills/") else {
        return Err(ClientError::Usage(format!(
            "{url} names no skill; give its address as http://HOST/skills/NAME"
        )));
    };
    let name = after.trim_end_matches("/archive");
    if name.is_empty() || name.contains('/') {
        return Err(ClientError::Usage(format!(
            "{url} names no skill; give its address as http://HOST/skills/NAME"
        )));
    }
    Ok(if after.ends_with("/archive") {
        trimmed.to_owned()
    } else {
        format!("{trimmed}/archive")
    })
}

/// Whether `url` names a server on this machine: `localhost` or a
/// loopback address.
pub fn is_loopback_url(url: &str) -> bool {
    let Ok(uri) = url.parse::<hyper::Uri>() else {
        return false;
    };
    let Some(host) = uri.host() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Downloads a skill's archive from a skilld into an unnamed temporary
/// file, telling `observer` of the bytes against the answer's length.
pub async fn fetch(
    url: &str,
    token: Option<&str>,
    max_bytes: u64,
    observer: &dyn Observer,
) -> Result<Fetched, ClientError> {
    download(&archive_url(url)?, token, max_bytes, observer).await
}

/// Downloads whatever `url` serves into an unnamed temporary file, with
/// the skill hash it claims (`X-Skill-Hash`), if any.
pub async fn download(
    url: &str,
    token: Option<&str>,
    max_bytes: u64,
    observer: &dyn Observer,
) -> Result<Fetched, ClientError> {
    let fetched = receive(url, token, max_bytes, observer).await;
    observer.finished();
    fetched
}

async fn receive(
    url: &str,
    token: Option<&str>,
    max_bytes: u64,
    observer: &dyn Observer,
) -> Result<Fetched, ClientError> {
    let (response, url) = get_following(url, token).await?;
    let hash = response
        .headers()
        .get("x-skill-hash")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let status = response.status();
    let mut body = response.into_body();
    if status != StatusCode::OK {
        return Err(refused(&url, status, &error_body(body).await));
    }
    observer.length(body.size_hint().exact());
    let mut file = tempfile::tempfile()?;
    let mut received = 0u64;
    while let Some(frame) = within(IDLE, &url, body.frame()).await? {
        let frame = frame.map_err(|e| unreachable(&url, e))?;
        if let Ok(data) = frame.into_data() {
            received += data.len() as u64;
            observer.advanced(data.len() as u64);
            if received > max_bytes {
                return Err(ClientError::Usage(format!(
                    "{url} sent more than {max_bytes} bytes"
                )));
            }
            file.write_all(&data)?;
        }
    }
    std::io::Seek::rewind(&mut file)?;
    Ok(Fetched { file, hash })
}

/// The body `url` answers with, at most `max_bytes` of it.
pub async fn get(url: &str, token: Option<&str>, max_bytes: usize) -> Result<Vec<u8>, ClientError> {
    let (response, url) = get_following(url, token).await?;
    let status = response.status();
    if status != StatusCode::OK {
        return Err(refused(&url, status, &error_body(response.into_body()).await));
    }
    let limited = http_body_util::Limited::new(response.into_body(), max_bytes);
    let bytes = within(WHOLE, &url, limited.collect())
        .await?
        .map_err(|e| unreachable(&url, e))?
        .to_bytes();
    Ok(bytes.to_vec())
}

/// How long a GET may wait for its answer to begin, or between two parts
/// of its body: a host that stops answering is given up on.
const IDLE: Duration = Duration::from_secs(30);
/// How long a whole small answer (an index) may take.
const WHOLE: Duration = Duration::from_secs(120);
/// The largest JSON answer of a server's API read.
const MAX_ANSWER: usize = 16 * 1024 * 1024;
/// Redirects followed: static hosts answer 301 or 302 for release assets
/// and for http → https.
const MAX_REDIRECTS: usize = 5;

async fn within<T>(limit: Duration, url: &str, f: impl Future<Output = T>) -> Result<T, ClientError> {
    tokio::time::timeout(limit, f)
        .await
        .map_err(|_| unreachable(url, format!("no answer for {} s", limit.as_secs())))
}

/// A GET that follows redirects, over http(s) only and never from https
/// down to http; the token goes only to the origin it was given for.
/// The answer, and the address that gave it.
async fn get_following(
    url: &str,
    token: Option<&str>,
) -> Result<(hyper::Response<hyper::body::Incoming>, String), ClientError> {
    let client = client()?;
    let first = url::Url::parse(url)
        .map_err(|e| ClientError::Usage(format!("{url} is not a usable address: {e}")))?;
    let mut at = first.clone();
    for _ in 0..=MAX_REDIRECTS {
        let sent_token = token.filter(|_| at.origin() == first.origin());
        let response = within(
            IDLE,
            at.as_str(),
            send(&client, Method::GET, at.as_str(), sent_token, None, &[]),
        )
        .await??;
        if !response.status().is_redirection() {
            return Ok((response, at.to_string()));
        }
        at = redirected(&at, &response)?;
    }
    Err(unreachable(url, format!("more than {MAX_REDIRECTS} redirects")))
}

/// Where a redirect leads, if it may be followed.
fn redirected(
    from: &url::Url,
    response: &hyper::Response<hyper::body::Incoming>,
) -> Result<url::Url, ClientError> {
    let status = response.status();
    let location = response
        .headers()
        .get(hyper::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| refused(from.as_str(), status, b"a redirect without a Location"))?;
    let to = from
        .join(location)
        .map_err(|e| unreachable(from.as_str(), format!("a redirect to {location}: {e}")))?;
    let allowed = matches!(
        (from.scheme(), to.scheme()),
        ("http", "http" | "https") | ("https", "https")
    );
    if !allowed {
        return Err(unreachable(
            from.as_str(),
            format!("a redirect to {to} is not followed (only http(s), never down from https)"),
        ));
    }
    Ok(to)
}

/// The start of an error's body: enough for a problem's detail, never a
/// host's endless answer.
async fn error_body(body: hyper::body::Incoming) -> Bytes {
    let limited = http_body_util::Limited::new(body, 64 * 1024);
    match tokio::time::timeout(IDLE, limited.collect()).await {
        Ok(Ok(collected)) => collected.to_bytes(),
        _ => Bytes::new(),
    }
}

/// Uploads an archive to `server`'s `POST /skills`, with the `.minisig`
/// text of its signature when there is one (sent as `X-Skill-Signature`,
/// base64): the new skill's `SkillDetail` and its `X-Skill-Status`.
/// `observer` is told of the bytes sent and, when it
/// [follows](Observer::follows), of the server's progress lines as it
/// installs.
pub async fn push(
    server: &str,
    token: Option<&str>,
    archive: Vec<u8>,
    (query, minisig): (&str, Option<&str>),
    observer: impl Observer + 'static,
) -> Result<(serde_json::Value, String), ClientError> {
    let observer: Arc<dyn Observer> = Arc::new(observer);
    let pushed = upload(server, token, archive, (query, minisig), &observer).await;
    observer.finished();
    pushed
}

async fn upload(
    server: &str,
    token: Option<&str>,
    archive: Vec<u8>,
    (query, minisig): (&str, Option<&str>),
    observer: &Arc<dyn Observer>,
) -> Result<(serde_json::Value, String), ClientError> {
    use base64::Engine;
    let url = format!("{}/skills{query}", server.trim_end_matches('/'));
    let follows = observer.follows();
    // Sent in parts, the body still says its length: a proxy in front of
    // the server need not take a chunked upload.
    let length = archive.len().to_string();
    let encoded = minisig.map(|m| base64::engine::general_purpose::STANDARD.encode(m));
    let mut headers = vec![("content-type", "application/zip"), ("content-length", &length)];
    if let Some(encoded) = &encoded {
        headers.push(("x-skill-signature", encoded.as_str()));
    }
    if follows {
        headers.push(("accept", "text/event-stream"));
    }
    observer.length(Some(archive.len() as u64));
    let body = told_in_parts(Bytes::from(archive), observer.clone());
    let response = send_body(&client()?, Method::POST, &url, token, body, &headers).await?;
    let status = response.status();
    if follows && status == StatusCode::OK && is_event_stream(&response) {
        let detail = follow_install(&url, response.into_body(), observer.as_ref()).await?;
        let status = version_status(server, token, &detail).await?;
        return Ok((detail, status));
    }
    let skill_status = response
        .headers()
        .get("x-skill-status")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("ready")
        .to_owned();
    let bytes = response.into_body();
    let bytes = http_body_util::Limited::new(bytes, MAX_ANSWER)
        .collect()
        .await
        .map_err(|e| unreachable(&url, e))?
        .to_bytes();
    if status != StatusCode::CREATED {
        return Err(refused(&url, status, &bytes));
    }
    let detail = serde_json::from_slice(&bytes)
        .map_err(|e| ClientError::Usage(format!("{url} answered with something not JSON: {e}")))?;
    Ok((detail, skill_status))
}

/// `archive` as a body sent in parts, each told to `observer` as hyper
/// takes it to send.
fn told_in_parts(archive: Bytes, observer: Arc<dyn Observer>) -> Body {
    let parts: Vec<Bytes> = (0..archive.len())
        .step_by(UPLOAD_PART)
        .map(|at| archive.slice(at..archive.len().min(at + UPLOAD_PART)))
        .collect();
    let frames = futures_util::stream::iter(parts).map(move |part| {
        observer.advanced(part.len() as u64);
        Ok::<_, Infallible>(Frame::data(part))
    });
    BodyExt::boxed(StreamBody::new(frames))
}

fn is_event_stream(response: &hyper::Response<hyper::body::Incoming>) -> bool {
    response
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

/// An install's event stream: each `progress` line told to `observer`,
/// then the `installed` event's `SkillDetail`, or the `error` event's
/// problem as the same refusal a plain answer would have been.
async fn follow_install(
    url: &str,
    body: hyper::body::Incoming,
    observer: &dyn Observer,
) -> Result<serde_json::Value, ClientError> {
    let mut events = sse_stream::SseStream::new(body);
    while let Some(event) = events.next().await {
        let event = event.map_err(|e| unreachable(url, e))?;
        let data = event.data.unwrap_or_default();
        match event.event.as_deref() {
            Some("progress") => observer.said(&data),
            Some("installed") => {
                return serde_json::from_str(&data).map_err(|e| {
                    ClientError::Usage(format!("{url} announced an install that is not JSON: {e}"))
                });
            }
            Some("error") => {
                let status = serde_json::from_str::<serde_json::Value>(&data)
                    .ok()
                    .and_then(|p| p["status"].as_u64())
                    .and_then(|s| StatusCode::from_u16(u16::try_from(s).ok()?).ok())
                    .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                return Err(refused(url, status, data.as_bytes()));
            }
            _ => {}
        }
    }
    Err(unreachable(url, "the answer ended before the install's outcome"))
}

/// The status of the version just installed (an event stream has no
/// `X-Skill-Status`), as its version list says.
async fn version_status(
    server: &str,
    token: Option<&str>,
    detail: &serde_json::Value,
) -> Result<String, ClientError> {
    let name = detail["name"].as_str().unwrap_or_default();
    let path = format!("/skills/{}/versions", encoded(name));
    let (_, list) = call(server, Method::GET, &path, token, None).await?;
    let status = list["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["version"] == detail["version"])
        .and_then(|v| v["status"].as_str())
        .unwrap_or("ready");
    Ok(status.to_owned())
}

/// What a path segment keeps as it is: a `/`, `?`, `#`, `%` or `.` of a
/// name would make it another request.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'~');

/// `name` as one segment of a path, whatever it holds.
pub fn encoded(name: &str) -> String {
    percent_encoding::utf8_percent_encode(name, SEGMENT).to_string()
}

/// One call of `server`'s API, `method path`, with a JSON body or none:
/// its status and JSON answer (null for an empty one, such as a 204).
/// Any answer of 400 or more is a [`ClientError::Refused`] with the
/// problem's detail.
pub async fn call(
    server: &str,
    method: Method,
    path: &str,
    token: Option<&str>,
    body: Option<&serde_json::Value>,
) -> Result<(u16, serde_json::Value), ClientError> {
    let url = format!("{}{path}", server.trim_end_matches('/'));
    let body = body.map(serde_json::Value::to_string).map(String::into_bytes);
    let headers: &[(&str, &str)] = match body {
        Some(_) => &[("content-type", "application/json")],
        None => &[],
    };
    let response = send(&client()?, method, &url, token, body, headers).await?;
    let status = response.status();
    let bytes = response.into_body();
    let bytes = http_body_util::Limited::new(bytes, MAX_ANSWER)
        .collect()
        .await
        .map_err(|e| unreachable(&url, e))?
        .to_bytes();
    if status.as_u16() >= 400 {
        return Err(refused(&url, status, &bytes));
    }
    if bytes.is_empty() {
        return Ok((status.as_u16(), serde_json::Value::Null));
    }
    let answer = serde_json::from_slice(&bytes)
        .map_err(|e| ClientError::Usage(format!("{url} answered with something not JSON: {e}")))?;
    Ok((status.as_u16(), answer))
}

async fn send(
    client: &Client,
    method: Method,
    url: &str,
    token: Option<&str>,
    body: Option<Vec<u8>>,
    headers: &[(&str, &str)],
) -> Result<hyper::Response<hyper::body::Incoming>, ClientError> {
    let body = Full::new(Bytes::from(body.unwrap_or_default())).boxed();
    send_body(client, method, url, token, body, headers).await
}

async fn send_body(
    client: &Client,
    method: Method,
    url: &str,
    token: Option<&str>,
    body: Body,
    headers: &[(&str, &str)],
) -> Result<hyper::Response<hyper::body::Incoming>, ClientError> {
    let mut req = Request::builder().method(method).uri(url);
    if let Some(token) = token {
        req = req.header("authorization", format!("Bearer {token}"));
    }
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let req = req
        .body(body)
        .map_err(|e| ClientError::Usage(format!("{url} is not a usable address: {e}")))?;
    client.request(req).await.map_err(|e| unreachable(url, e))
}

fn unreachable(url: &str, why: impl std::fmt::Display) -> ClientError {
    ClientError::Unreachable {
        url: url.to_owned(),
        why: why.to_string(),
    }
}

/// A peer's refusal, with the problem's detail when it sent one.
fn refused(url: &str, status: StatusCode, body: &[u8]) -> ClientError {
    let detail = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|p| p["detail"].as_str().map(str::to_owned))
        .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(500)]).into_owned());
    // A peer's words reach a terminal: no escape sequence of theirs.
    let detail = detail
        .chars()
        .map(|c| if c.is_control() && c != '\n' { ' ' } else { c })
        .take(2000)
        .collect();
    ClientError::Refused {
        url: url.to_owned(),
        status: status.as_u16(),
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_servers_are_told_apart_from_others() {
        for yes in [
            "http://127.0.0.1:8080",
            "http://localhost:1/",
            "http://[::1]:9",
            "http://127.9.9.9",
        ] {
            assert!(is_loopback_url(yes), "{yes}");
        }
        for no in [
            "http://10.0.0.1:8080",
            "https://example.com",
            "http://localhost.evil.com",
            "nonsense",
            "/x",
        ] {
            assert!(!is_loopback_url(no), "{no}");
        }
    }

    #[test]
    fn a_name_stays_one_segment_of_a_path() {
        assert_eq!(encoded("csv-stats_2~"), "csv-stats_2~");
        assert_eq!(encoded("../a/b?c#d%"), "%2E%2E%2Fa%2Fb%3Fc%23d%25");
    }

    #[test]
    fn a_skill_address_becomes_its_archive_address() {
        for (given, want) in [
            ("http://a:1/skills/git", "http://a:1/skills/git/archive"),
            ("http://a:1/skills/git/", "http://a:1/skills/git/archive"),
            (
                "http://a:1/skills/git@1.0.0/archive",
                "http://a:1/skills/git@1.0.0/archive",
            ),
            ("http://a:1/api/skills/git", "http://a:1/api/skills/git/archive"),
        ] {
            assert_eq!(archive_url(given).unwrap(), want);
        }
        for bad in ["http://a:1/", "http://a:1/skills/", "http://a:1/skills/a/b"] {
            assert!(archive_url(bad).is_err(), "{bad}");
        }
    }
}
