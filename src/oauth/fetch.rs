//! Fetching an issuer's discovery document and JWKS: hyper's client over
//! rustls (as webhooks use, `crate::notify`), bounded in time and size,
//! following no redirect, and only to `https://` URLs, or `http://` on
//! loopback (a provider the tests start, or one beside the server).

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper::http::{StatusCode, Uri, header};
use std::time::Duration;

/// The longest one fetch may take, answer and body together.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest document taken: a JWKS of a few dozen keys is tens of KiB.
const MAX_BYTES: usize = 512 * 1024;

type Client = crate::https::Client<Empty<Bytes>>;

/// Why an issuer's document was not had. Each carries its sentence.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    /// The system's TLS roots could not be loaded: nothing can be fetched.
    #[error("{0}")]
    NoTls(String),
    /// The URL may not be fetched: not one, or not https nor loopback http.
    #[error("{0}")]
    NotAllowed(String),
    /// The issuer did not answer, not with 200, or not in time.
    #[error("{0}")]
    Unreachable(String),
    /// It answered something that is not the document asked for.
    #[error("{0}")]
    Malformed(String),
}

/// A client for issuers' documents.
pub(super) struct Fetcher {
    client: Client,
}

impl Fetcher {
    pub(super) fn new() -> Result<Self, FetchError> {
        let client = crate::https::client().map_err(|e| {
            FetchError::NoTls(format!(
                "cannot load the system's TLS roots for OAuth issuers: {e}"
            ))
        })?;
        Ok(Self { client })
    }

    /// The JSON document at `url`, which must answer 200.
    pub(super) async fn json(&self, url: &str) -> Result<serde_json::Value, FetchError> {
        let uri = allowed_url(url)?;
        let unreachable = FetchError::Unreachable;
        let request = hyper::Request::get(uri)
            .header(header::ACCEPT, "application/json")
            .header(header::USER_AGENT, concat!("skilld/", env!("CARGO_PKG_VERSION")))
            .body(Empty::new())
            .map_err(|e| FetchError::NotAllowed(format!("{url}: {e}")))?;
        let fetch = async {
            let res = self
                .client
                .request(request)
                .await
                .map_err(|e| unreachable(format!("{url}: {e}")))?;
            if res.status() != StatusCode::OK {
                return Err(unreachable(format!("{url} answered {}", res.status())));
            }
            let body = Limited::new(res.into_body(), MAX_BYTES)
                .collect()
                .await
                .map_err(|e| {
                    unreachable(format!(
                        "{url}: the body failed or is over {MAX_BYTES} bytes: {e}"
                    ))
                })?;
            serde_json::from_slice(&body.to_bytes())
                .map_err(|e| FetchError::Malformed(format!("{url} is not JSON: {e}")))
        };
        tokio::time::timeout(FETCH_TIMEOUT, fetch)
            .await
            .map_err(|_| unreachable(format!("{url} did not answer within {FETCH_TIMEOUT:?}")))?
    }
}

/// `url` when it is `https://`, or `http://` to a loopback host: keys
/// fetched in clear from elsewhere could be swapped on the way.
pub fn allowed_url(url: &str) -> Result<Uri, FetchError> {
    let refused = FetchError::NotAllowed;
    let uri: Uri = url
        .parse()
        .map_err(|_| refused(format!("'{url}' is not a URL")))?;
    let host = uri
        .host()
        .ok_or_else(|| refused(format!("'{url}' names no host")))?;
    match uri.scheme_str() {
        Some("https") => Ok(uri),
        Some("http") if is_loopback(host) => Ok(uri),
        Some("http") => Err(refused(format!(
            "'{url}' is plain http to a host that is not loopback; an issuer's keys must come over https"
        ))),
        _ => Err(refused(format!("'{url}' is not an https:// URL"))),
    }
}

impl FetchError {
    /// The same kind of failure, said as `why`.
    #[must_use]
    pub fn reworded(self, why: String) -> Self {
        match self {
            FetchError::NoTls(_) => FetchError::NoTls(why),
            FetchError::NotAllowed(_) => FetchError::NotAllowed(why),
            FetchError::Unreachable(_) => FetchError::Unreachable(why),
            FetchError::Malformed(_) => FetchError::Malformed(why),
        }
    }
}

fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_https_or_loopback_http() {
        for ok in [
            "https://login.example.com/realms/a",
            "http://127.0.0.1:8080",
            "http://localhost:3000/x",
            "http://[::1]:9/",
        ] {
            assert!(allowed_url(ok).is_ok(), "{ok}");
        }
        for bad in [
            "http://login.example.com",
            "http://10.0.0.1",
            "ftp://x",
            "login.example.com",
            "",
            "http://127.0.0.1.evil.example/",
        ] {
            assert!(allowed_url(bad).is_err(), "{bad}");
        }
    }
}
