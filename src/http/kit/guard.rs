//! What keeps web pages from driving a server that has no tokens.
//!
//! Without tokens every caller may invoke, so any page a person has open
//! could call `http://localhost:8080` from their browser (a cross-site
//! request), or point a name it controls at 127.0.0.1 and call the server
//! as its own origin (DNS rebinding). A browser always says who is asking:
//! `Host` names the server as the page addressed it, and `Origin` the page.
//! So a server without tokens that listens on loopback answers only
//! requests addressed to a loopback host, and never a page of a foreign
//! origin unless the operator allowed it (`allowed_origins`). With tokens
//! none of this applies: a page cannot send a token it does not have.

use super::error::ApiError;
use crate::http::AppState;
use crate::setting::SettingError;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// How a server without tokens tells its own callers from web pages.
#[derive(Debug, Clone, Default)]
pub struct WebGuard {
    /// Refuse a `Host` that is not a loopback name (the server listens on
    /// loopback; with `--insecure` on another address, it cannot know its
    /// names, and does not check).
    pub loopback_only: bool,
    /// Foreign origins the operator allowed, `scheme://host[:port]`.
    pub allowed_origins: Vec<String>,
}

impl WebGuard {
    /// The config's `allowed_origins`, lowercased. Each must be an origin,
    /// `scheme://host[:port]`, as a browser sends it in `Origin`: no path,
    /// no trailing slash.
    pub fn allowed_origins(given: &[String]) -> Result<Vec<String>, SettingError> {
        given
            .iter()
            .map(|o| o.trim())
            .filter(|o| !o.is_empty())
            .map(|o| {
                let ok = o.split_once("://").is_some_and(|(scheme, host)| {
                    matches!(scheme, "http" | "https") && !host.is_empty() && !host.contains(['/', '?', '#', '@'])
                });
                if ok {
                    Ok(o.to_ascii_lowercase())
                } else {
                    Err(SettingError::new(
                        "allowed_origins",
                        format!(
                            "allowed origin '{}' is not an origin such as https://app.example or http://localhost:3000",
                            o.escape_debug()
                        ),
                    ))
                }
            })
            .collect()
    }

    /// Whether a request with these headers may go on.
    fn check(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        let host = headers
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if self.loopback_only && !is_loopback_host(host) {
            return Err(ApiError::Refused {
                code: "foreign_host",
                detail: format!(
                    "this server has no tokens, so it answers only requests addressed to a loopback \
                     host (localhost, 127.0.0.1, [::1]), not '{}'; configure tokens to serve other names",
                    host.escape_debug()
                ),
            });
        }
        let Some(origin) = headers.get(header::ORIGIN) else {
            return Ok(());
        };
        let origin = origin.to_str().unwrap_or("").to_ascii_lowercase();
        let same = origin.split_once("://").is_some_and(|(scheme, rest)| {
            matches!(scheme, "http" | "https") && rest.eq_ignore_ascii_case(host)
        });
        if same || self.allowed_origins.contains(&origin) {
            return Ok(());
        }
        Err(ApiError::Refused {
            code: "foreign_origin",
            detail: format!(
                "this server has no tokens, so it takes no requests from the web page at '{}'; \
                 add that origin to allowed_origins, or configure tokens",
                origin.escape_debug()
            ),
        })
    }
}

/// `localhost` (and names under it), `127.0.0.0/8` and `[::1]`, with any port.
fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split_once(']').map_or(v6, |(addr, _)| addr),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    let name = name.to_ascii_lowercase();
    name == "localhost"
        || name.ends_with(".localhost")
        || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Refuses, on a server without tokens, requests a web page could forge.
pub async fn refuse_web_pages(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if state.auth.is_open()
        && let Err(refused) = state.web.check(req.headers())
    {
        return refused.into_response();
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts() {
        for ok in [
            "localhost",
            "localhost:8080",
            "a.localhost:1",
            "127.0.0.1",
            "127.1.2.3:80",
            "[::1]:8080",
            "[::1]",
        ] {
            assert!(is_loopback_host(ok), "{ok}");
        }
        for bad in [
            "",
            "example.com",
            "10.0.0.1:8080",
            "localhost.evil.com",
            "[::2]:1",
            "127.0.0.1.nip.io",
        ] {
            assert!(!is_loopback_host(bad), "{bad}");
        }
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn origins_are_same_origin_or_allowed() {
        let guard = WebGuard {
            loopback_only: true,
            allowed_origins: vec!["https://app.example".into()],
        };
        let code = |pairs: &[(&'static str, &str)]| match guard.check(&headers(pairs)) {
            Ok(()) => "ok",
            Err(ApiError::Refused { code, .. }) => code,
            Err(other) => panic!("{other:?}"),
        };
        assert_eq!(code(&[("host", "127.0.0.1:8080")]), "ok");
        assert_eq!(
            code(&[("host", "127.0.0.1:8080"), ("origin", "http://127.0.0.1:8080")]),
            "ok"
        );
        assert_eq!(
            code(&[("host", "localhost:8080"), ("origin", "https://app.example")]),
            "ok"
        );
        assert_eq!(
            code(&[("host", "127.0.0.1:8080"), ("origin", "http://attacker.example")]),
            "foreign_origin"
        );
        assert_eq!(
            code(&[("host", "127.0.0.1:8080"), ("origin", "null")]),
            "foreign_origin"
        );
        assert_eq!(
            code(&[("host", "127.0.0.1:8081"), ("origin", "http://127.0.0.1:8080")]),
            "foreign_origin"
        );
        assert_eq!(code(&[("host", "attacker.example:8080")]), "foreign_host");
        assert_eq!(code(&[]), "foreign_host");
    }
}
