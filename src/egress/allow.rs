//! Where a skill may go: `network: {allow: [...]}` patterns, read and
//! linted, and matched against the name a program asks the proxy for.
//!
//! A pattern is a host name, or `*.` and a domain (any name under it, not
//! the domain itself), with an optional `:port`. Without a port it covers
//! 443 and 80, the ports of HTTPS and HTTP: an API named by its host is
//! reached on those, and a wider reach is written out.

use std::fmt;

/// The ports a pattern without one covers.
pub const DEFAULT_PORTS: [u16; 2] = [443, 80];

/// The longest host name DNS carries (RFC 1035 §2.3.4).
const MAX_NAME: usize = 253;

/// Why a pattern was refused, for the line that names it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    #[error("`{0}` is empty")]
    Empty(String),
    #[error("`{0}` names a scheme or a path; write the host alone (`api.example.com`)")]
    NotAHost(String),
    #[error("`{0}` has a bad port: write 1 to 65535 after the colon")]
    BadPort(String),
    #[error("`{0}`: `*` may only stand alone as the first label (`*.example.com`)")]
    BadWildcard(String),
    #[error("`{0}` would allow everywhere; name the hosts (or `*.example.com`)")]
    Everywhere(String),
    #[error("`{0}` is an IP address; name the host, so that the proxy checks what it resolves to")]
    Address(String),
    #[error("`{0}` is not a host name (letters, digits and `-` in labels of 1 to 63, dot-separated)")]
    BadName(String),
}

/// One allowed destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    /// Lowercase, without a trailing dot; for a wildcard, the domain
    /// after `*.`.
    host: String,
    wildcard: bool,
    port: Option<u16>,
}

impl Pattern {
    /// Reads one pattern as a manifest or frontmatter writes it.
    pub fn parse(text: &str) -> Result<Self, PatternError> {
        let refuse = |f: fn(String) -> PatternError| f(text.to_owned());
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(refuse(PatternError::Empty));
        }
        if trimmed.contains("://") || trimmed.contains('/') || trimmed.contains('@') {
            return Err(refuse(PatternError::NotAHost));
        }
        if trimmed.starts_with('[') || trimmed.parse::<std::net::IpAddr>().is_ok() {
            return Err(refuse(PatternError::Address));
        }
        let (host, port) = match trimmed.rsplit_once(':') {
            Some((host, port)) => (
                host,
                Some(parse_port(port).ok_or_else(|| refuse(PatternError::BadPort))?),
            ),
            None => (trimmed, None),
        };
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let (wildcard, name) = match host.strip_prefix("*.") {
            Some(rest) => (true, rest.to_owned()),
            None => (false, host),
        };
        if name == "*" || name.is_empty() && wildcard {
            return Err(refuse(PatternError::Everywhere));
        }
        if name.contains('*') {
            return Err(refuse(PatternError::BadWildcard));
        }
        if name.parse::<std::net::Ipv4Addr>().is_ok() {
            return Err(refuse(PatternError::Address));
        }
        if !is_host_name(&name) || (wildcard && !name.contains('.')) {
            return Err(refuse(PatternError::BadName));
        }
        Ok(Self {
            host: name,
            wildcard,
            port,
        })
    }

    /// Whether a connection to `host:port` (as the program named it) is
    /// covered.
    pub fn covers(&self, host: &str, port: u16) -> bool {
        let Some(host) = normalize(host) else {
            return false;
        };
        let port_ok = self.port.map_or(DEFAULT_PORTS.contains(&port), |p| p == port);
        let host_ok = if self.wildcard {
            host.strip_suffix(&self.host)
                .is_some_and(|head| head.len() > 1 && head.ends_with('.'))
        } else {
            host == self.host
        };
        port_ok && host_ok
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.wildcard {
            f.write_str("*.")?;
        }
        f.write_str(&self.host)?;
        match self.port {
            Some(port) => write!(f, ":{port}"),
            None => Ok(()),
        }
    }
}

/// A skill's `network.allow`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowList(Vec<Pattern>);

impl AllowList {
    /// Reads every pattern; the errors of all that fail, in order.
    pub fn parse<'a>(texts: impl IntoIterator<Item = &'a str>) -> Result<Self, Vec<PatternError>> {
        let (ok, bad): (Vec<_>, Vec<_>) = texts.into_iter().map(Pattern::parse).partition(Result::is_ok);
        if bad.is_empty() {
            Ok(Self(ok.into_iter().filter_map(Result::ok).collect()))
        } else {
            Err(bad.into_iter().filter_map(Result::err).collect())
        }
    }

    /// The first pattern covering `host:port`.
    pub fn find(&self, host: &str, port: u16) -> Option<&Pattern> {
        self.0.iter().find(|p| p.covers(host, port))
    }

    pub fn patterns(&self) -> &[Pattern] {
        &self.0
    }
}

fn parse_port(text: &str) -> Option<u16> {
    let digits_only = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    text.parse::<u16>().ok().filter(|p| digits_only && *p != 0)
}

/// A name as asked for, compared as DNS does: case-insensitively, with
/// or without the root's dot. `None` for what is no host name at all.
pub fn normalize(host: &str) -> Option<String> {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    is_host_name(&host).then_some(host)
}

/// Letters, digits and hyphens in labels of 1 to 63, no hyphen at either
/// end of a label (RFC 1123 §2.1); `_` too, which real names carry
/// (`_dmarc`, some CDNs).
fn is_host_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_covers_itself_on_the_web_ports_only() {
        let p = Pattern::parse("API.github.com.").unwrap();
        assert!(p.covers("api.github.com", 443));
        assert!(p.covers("Api.GitHub.com.", 80));
        assert!(!p.covers("api.github.com", 22));
        assert!(!p.covers("github.com", 443));
        assert!(!p.covers("xapi.github.com", 443));
        assert!(!p.covers("api.github.com.evil.net", 443));
    }

    #[test]
    fn a_wildcard_covers_names_under_its_domain_not_the_domain() {
        let p = Pattern::parse("*.githubusercontent.com:443").unwrap();
        assert!(p.covers("raw.githubusercontent.com", 443));
        assert!(p.covers("a.b.githubusercontent.com", 443));
        assert!(!p.covers("githubusercontent.com", 443));
        assert!(!p.covers("evilgithubusercontent.com", 443));
        assert!(!p.covers("raw.githubusercontent.com", 80));
        assert_eq!(p.to_string(), "*.githubusercontent.com:443");
    }

    #[test]
    fn patterns_that_are_no_host_are_refused_with_the_reason() {
        let cases = [
            ("", PatternError::Empty(String::new())),
            (
                "https://api.github.com",
                PatternError::NotAHost("https://api.github.com".into()),
            ),
            (
                "api.github.com/v3",
                PatternError::NotAHost("api.github.com/v3".into()),
            ),
            (
                "api.github.com:0",
                PatternError::BadPort("api.github.com:0".into()),
            ),
            (
                "api.github.com:99999",
                PatternError::BadPort("api.github.com:99999".into()),
            ),
            (
                "api.github.com:+1",
                PatternError::BadPort("api.github.com:+1".into()),
            ),
            ("*", PatternError::Everywhere("*".into())),
            ("*:443", PatternError::Everywhere("*:443".into())),
            ("*.com", PatternError::BadName("*.com".into())),
            ("api.*.com", PatternError::BadWildcard("api.*.com".into())),
            ("**.github.com", PatternError::BadWildcard("**.github.com".into())),
            ("127.0.0.1", PatternError::Address("127.0.0.1".into())),
            (
                "169.254.169.254:80",
                PatternError::Address("169.254.169.254:80".into()),
            ),
            ("[::1]:443", PatternError::Address("[::1]:443".into())),
            ("-bad.example", PatternError::BadName("-bad.example".into())),
            ("a b.example", PatternError::BadName("a b.example".into())),
        ];
        for (text, want) in cases {
            assert_eq!(Pattern::parse(text), Err(want), "{text}");
        }
    }

    #[test]
    fn a_list_reports_every_bad_pattern() {
        let errors = AllowList::parse(["api.github.com", "http://x", "*"]).unwrap_err();
        assert_eq!(errors.len(), 2);
        let list = AllowList::parse(["api.github.com", "*.example.org:8443"]).unwrap();
        assert_eq!(
            list.find("x.example.org", 8443)
                .map(ToString::to_string)
                .as_deref(),
            Some("*.example.org:8443")
        );
        assert!(list.find("x.example.org", 443).is_none());
    }
}
