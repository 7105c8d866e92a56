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

/// A client for issuers' documents.
pub(super) struct Fetcher {
    client: Client,
}

impl Fetcher {
    pub(super) fn new() -> Result<Self, String> {
        let client = crate::https::client()
            .map_err(|e| format!("cannot load the system's TLS roots for OAuth issuers: {e}"))?;
        Ok(Self { client })
    }

    /// The JSON document at `url`, which must answer 200.
    pub(super) async fn json(&self, url: &str) -> Result<serde_json::Value, String> {
        let uri = allowed_url(url)?;
        let request = hyper::Request::get(uri)
            .header(header::ACCEPT, "application/json")
            .header(header::USER_AGENT, concat!("skilld/", env!("CARGO_PKG_VERSION")))
            .body(Empty::new())
            .map_err(|e| format!("{url}: {e}"))?;
        let fetch = async {
            let res = self
                .client
                .request(request)
                .await
                .map_err(|e| format!("{url}: {e}"))?;
            if res.status() != StatusCode::OK {
                return Err(format!("{url} answered {}", res.status()));
            }
            let body = Limited::new(res.into_body(), MAX_BYTES)
                .collect()
                .await
                .map_err(|e| format!("{url}: the body failed or is over {MAX_BYTES} bytes: {e}"))?;
            serde_json::from_slice(&body.to_bytes()).map_err(|e| format!("{url} is not JSON: {e}"))
        };
        tokio::time::timeout(FETCH_TIMEOUT, fetch)
            .await
            .map_err(|_| format!("{url} did not answer within {FETCH_TIMEOUT:?}"))?
    }
}

/// `url` when it is `https://`, or `http://` to a loopback host: keys
/// fetched in clear from elsewhere could be swapped on the way.
pub fn allowed_url(url: &str) -> Result<Uri, String> {
    let uri: Uri = url.parse().map_err(|_| format!("'{url}' is not a URL"))?;
    let host = uri.host().ok_or_else(|| format!("'{url}' names no host"))?;
    match uri.scheme_str() {
        Some("https") => Ok(uri),
        Some("http") if is_loopback(host) => Ok(uri),
        Some("http") => Err(format!(
            "'{url}' is plain http to a host that is not loopback; an issuer's keys must come over https"
        )),
        _ => Err(format!("'{url}' is not an https:// URL")),
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
