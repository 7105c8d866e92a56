//! One `[[notify]]` entry of the config: where to post, in which shape,
//! signed with which secret, for which events.

use crate::setting::SettingError;
use serde::Deserialize;
use std::fmt;

/// A `[[notify]]` entry as written in the config file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifyConfig {
    /// A name for the log and `GET /notifications` (default `notify-<n>`).
    pub name: Option<String>,
    /// An `http` or `https` URL; it is never shown (a Slack webhook URL is
    /// itself a secret), only its host.
    pub url: String,
    /// `json` (default) or `slack`.
    pub format: Option<String>,
    /// The signing secret; `whsec_<base64>` (Standard Webhooks) is decoded.
    pub secret: Option<String>,
    /// The environment variable holding the secret instead.
    pub secret_env: Option<String>,
    /// `requested`, `decided`, `activation`, `egress` (default: all four).
    pub events: Option<Vec<String>>,
    /// Attempts before a delivery counts as failed (default 6, at most 20).
    pub max_attempts: Option<u32>,
    /// How long one attempt may take (default 10 s).
    pub timeout_secs: Option<u64>,
}

/// The shape of the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `{"type", "timestamp", "data"}`, as Standard Webhooks lays it out.
    Json,
    /// Slack's incoming-webhook body: `text` and `blocks`.
    Slack,
}

/// An event a target may be told of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A call is held for a person.
    Requested,
    /// A person approved or denied it.
    Decided,
    /// A skill waits in a session for a person to allow its permissions.
    ActivationRequested,
    /// A networked run's destination beyond its list waits for a person.
    EgressRequested,
}

impl Event {
    /// The event's name in payloads and the store.
    pub fn name(self) -> &'static str {
        match self {
            Self::Requested => "approval.requested",
            Self::Decided => "approval.decided",
            Self::ActivationRequested => "activation.requested",
            Self::EgressRequested => "egress.requested",
        }
    }
}

/// A resolved `[[notify]]` entry.
#[derive(Clone)]
pub struct Target {
    pub name: String,
    pub url: hyper::Uri,
    pub format: Format,
    pub secret: Option<Vec<u8>>,
    pub events: Vec<Event>,
    pub max_attempts: u32,
    pub timeout: std::time::Duration,
}

/// The URL and secret never reach a log: the host stands for the URL.
impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Target")
            .field("name", &self.name)
            .field("host", &self.url.host())
            .field("format", &self.format)
            .field("signed", &self.secret.is_some())
            .field("events", &self.events)
            .finish_non_exhaustive()
    }
}

const MAX_ATTEMPTS: u32 = 20;

impl Target {
    /// Every `[[notify]]` entry, each checked; their names must differ,
    /// since a delivery is recorded by its target's name.
    pub fn resolve_all(
        entries: &[NotifyConfig],
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Vec<Self>, SettingError> {
        let targets = entries
            .iter()
            .enumerate()
            .map(|(i, n)| Self::resolve(i, n, &env))
            .collect::<Result<Vec<_>, _>>()?;
        let mut names: Vec<&str> = targets.iter().map(|t| t.name.as_str()).collect();
        names.sort_unstable();
        if let Some(pair) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(SettingError::new(
                "notify",
                format!("two [[notify]] entries are named '{}'", pair[0]),
            ));
        }
        Ok(targets)
    }

    /// Resolves entry `index` (0-based) of the config, reading a
    /// `secret_env` from `env`.
    pub fn resolve(
        index: usize,
        c: &NotifyConfig,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, SettingError> {
        let name = c.name.clone().unwrap_or_else(|| format!("notify-{}", index + 1));
        let at = |why: String| SettingError::new("notify", format!("[[notify]] '{name}': {why}"));
        let url = c
            .url
            .parse::<hyper::Uri>()
            .ok()
            .filter(|u| matches!(u.scheme_str(), Some("http" | "https")) && u.host().is_some())
            .ok_or_else(|| at("url must be an http:// or https:// URL with a host".to_owned()))?;
        let format = match c.format.as_deref() {
            None | Some("json") => Format::Json,
            Some("slack") => Format::Slack,
            Some(other) => return Err(at(format!("format '{other}' is not json or slack"))),
        };
        let secret = match (&c.secret, &c.secret_env) {
            (Some(_), Some(_)) => return Err(at("give secret or secret_env, not both".to_owned())),
            (Some(s), None) => Some(secret_bytes(s).map_err(at)?),
            (None, Some(var)) => {
                let s = env(var).ok_or_else(|| at(format!("secret_env {var} is not set")))?;
                Some(secret_bytes(&s).map_err(at)?)
            }
            (None, None) => None,
        };
        let events = match &c.events {
            None => vec![
                Event::Requested,
                Event::Decided,
                Event::ActivationRequested,
                Event::EgressRequested,
            ],
            Some(names) => names
                .iter()
                .map(|n| event(n).map_err(&at))
                .collect::<Result<_, _>>()?,
        };
        let max_attempts = c.max_attempts.unwrap_or(6);
        if !(1..=MAX_ATTEMPTS).contains(&max_attempts) {
            return Err(at(format!("max_attempts must be 1 to {MAX_ATTEMPTS}")));
        }
        let timeout = std::time::Duration::from_secs(c.timeout_secs.unwrap_or(10).clamp(1, 60));
        Ok(Self {
            name,
            url,
            format,
            secret,
            events,
            max_attempts,
            timeout,
        })
    }

    pub fn wants(&self, event: Event) -> bool {
        self.events.contains(&event)
    }
}

fn event(name: &str) -> Result<Event, String> {
    match name {
        "requested" => Ok(Event::Requested),
        "decided" => Ok(Event::Decided),
        "activation" => Ok(Event::ActivationRequested),
        "egress" => Ok(Event::EgressRequested),
        other => Err(format!(
            "event '{other}' is not requested, decided, activation or egress"
        )),
    }
}

/// A secret's bytes: Standard Webhooks' `whsec_<base64>`, or the text.
fn secret_bytes(s: &str) -> Result<Vec<u8>, String> {
    use base64::Engine;
    let bytes = match s.strip_prefix("whsec_") {
        Some(b64) => base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|e| format!("the whsec_ secret is not base64: {e}"))?,
        None => s.as_bytes().to_vec(),
    };
    if bytes.len() < 16 {
        return Err("the secret is shorter than 16 bytes".to_owned());
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(url: &str) -> NotifyConfig {
        NotifyConfig {
            url: url.to_owned(),
            ..NotifyConfig::default()
        }
    }

    #[test]
    fn entries_resolve_with_defaults_and_bad_ones_say_why() {
        let t = Target::resolve(0, &entry("https://hooks.example/x"), |_| None).unwrap();
        assert_eq!(
            (t.name.as_str(), t.format, t.max_attempts),
            ("notify-1", Format::Json, 6)
        );
        assert_eq!(
            t.events,
            [
                Event::Requested,
                Event::Decided,
                Event::ActivationRequested,
                Event::EgressRequested
            ]
        );
        let named = NotifyConfig {
            events: Some(vec!["activation".into()]),
            ..entry("https://hooks.example/x")
        };
        let t = Target::resolve(0, &named, |_| None).unwrap();
        assert_eq!(t.events, [Event::ActivationRequested]);
        let secret = NotifyConfig {
            secret_env: Some("S".into()),
            format: Some("slack".into()),
            ..entry("http://127.0.0.1:9/hook")
        };
        let t = Target::resolve(1, &secret, |v| (v == "S").then(|| "a-secret-of-16-bytes".into())).unwrap();
        assert_eq!(t.secret.as_deref(), Some(&b"a-secret-of-16-bytes"[..]));
        assert!(!format!("{t:?}").contains("a-secret"));
        for (bad, why) in [
            (entry("file:///etc/passwd"), "http:// or https://"),
            (
                NotifyConfig {
                    format: Some("xml".into()),
                    ..entry("https://h/")
                },
                "format 'xml'",
            ),
            (
                NotifyConfig {
                    secret: Some("short".into()),
                    ..entry("https://h/")
                },
                "shorter than 16",
            ),
            (
                NotifyConfig {
                    secret_env: Some("NOPE".into()),
                    ..entry("https://h/")
                },
                "NOPE is not set",
            ),
            (
                NotifyConfig {
                    events: Some(vec!["ran".into()]),
                    ..entry("https://h/")
                },
                "event 'ran'",
            ),
            (
                NotifyConfig {
                    max_attempts: Some(0),
                    ..entry("https://h/")
                },
                "max_attempts",
            ),
        ] {
            let err = Target::resolve(0, &bad, |_| None).unwrap_err();
            assert_eq!(err.key, "notify");
            assert!(err.why.contains(why), "{err}");
        }
    }
}
