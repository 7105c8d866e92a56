//! The `[oauth]` section of the config file and `--oauth-issuer`
//! (`SKILLD_OAUTH_ISSUERS`), checked once at start-up.

use super::fetch::allowed_url;
use crate::setting::SettingError;
use serde::Deserialize;
use std::time::Duration;

/// What `exp` and `nbf` are allowed to be off by, by default: clocks drift.
pub const DEFAULT_CLOCK_SKEW_SECS: u64 = 60;
/// The least time between two fetches of an issuer's keys for a key id
/// its cached set lacks, by default.
pub const DEFAULT_JWKS_COOLDOWN_SECS: u64 = 30;

/// `[oauth]`: the issuers whose access tokens this server takes.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OAuthConfig {
    /// This server's resource identifier, in its metadata and the default
    /// audience (default: `public_url`, else `http://` and the address it
    /// listens on).
    pub resource: Option<String>,
    /// See [`DEFAULT_CLOCK_SKEW_SECS`].
    pub clock_skew_secs: Option<u64>,
    /// See [`DEFAULT_JWKS_COOLDOWN_SECS`].
    pub jwks_cooldown_secs: Option<u64>,
    /// `[[oauth.issuers]]`.
    #[serde(default)]
    pub issuers: Vec<IssuerConfig>,
}

/// `[[oauth.issuers]]`: one authorization server.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IssuerConfig {
    /// Its issuer identifier, exactly as its tokens' `iss` says.
    pub issuer: String,
    /// How its callers are named: `<sub>@<name>` (default: the issuer's
    /// host).
    pub name: Option<String>,
    /// The `aud` its tokens must carry one of (default: this server's
    /// resource and the resource of `/mcp`).
    pub audience: Option<OneOrMany>,
    /// A claim holding role names (`roles`, or a dotted path such as
    /// `realm_access.roles`), read instead of the `skilld:<role>` scopes.
    pub roles_claim: Option<String>,
    /// Its JWKS, when it publishes no discovery document.
    pub jwks_uri: Option<String>,
}

/// A string, or a list of them.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl IssuerConfig {
    /// `issuer` with every default, as `--oauth-issuer` names one.
    pub fn new(issuer: &str) -> Self {
        Self {
            issuer: issuer.to_owned(),
            name: None,
            audience: None,
            roles_claim: None,
            jwks_uri: None,
        }
    }
}

impl OneOrMany {
    fn into_vec(self) -> Vec<String> {
        match self {
            OneOrMany::One(one) => vec![one],
            OneOrMany::Many(many) => many,
        }
    }
}

/// The checked settings.
#[derive(Debug, Clone)]
pub struct OAuthSettings {
    pub resource: Option<String>,
    pub clock_skew: Duration,
    pub jwks_cooldown: Duration,
    pub issuers: Vec<IssuerSettings>,
}

/// One checked issuer.
#[derive(Debug, Clone)]
pub struct IssuerSettings {
    pub issuer: String,
    pub name: String,
    /// `None`: this server's resources.
    pub audiences: Option<Vec<String>>,
    pub roles_claim: Option<String>,
    pub jwks_uri: Option<String>,
}

impl OAuthConfig {
    /// The settings, or `None` without any issuer.
    pub fn resolve(&self) -> Result<Option<OAuthSettings>, SettingError> {
        let given = self.issuers.clone();
        if given.is_empty() {
            return Ok(None);
        }
        let issuers = given
            .into_iter()
            .map(check_issuer)
            .collect::<Result<Vec<_>, _>>()?;
        for (i, one) in issuers.iter().enumerate() {
            if let Some(twin) = issuers[..i].iter().find(|e| e.name == one.name) {
                return Err(SettingError::new(
                    "oauth.issuers",
                    format!(
                        "OAuth issuers {} and {} are both named '{}'; give each its own `name`",
                        twin.issuer, one.issuer, one.name
                    ),
                ));
            }
        }
        if let Some(resource) = &self.resource {
            check_resource(resource)?;
        }
        Ok(Some(OAuthSettings {
            resource: self.resource.as_ref().map(|r| r.trim_end_matches('/').to_owned()),
            clock_skew: Duration::from_secs(self.clock_skew_secs.unwrap_or(DEFAULT_CLOCK_SKEW_SECS)),
            jwks_cooldown: Duration::from_secs(self.jwks_cooldown_secs.unwrap_or(DEFAULT_JWKS_COOLDOWN_SECS)),
            issuers,
        }))
    }
}

fn check_issuer(config: IssuerConfig) -> Result<IssuerSettings, SettingError> {
    let refused = |why: String| SettingError::new("oauth.issuers", why);
    let issuer = config.issuer;
    let uri = allowed_url(&issuer).map_err(|e| refused(format!("OAuth issuer: {e}")))?;
    if uri.query().is_some() || issuer.contains('#') {
        return Err(refused(format!(
            "OAuth issuer '{issuer}' has a query or fragment; an issuer has neither"
        )));
    }
    if let Some(jwks_uri) = &config.jwks_uri {
        allowed_url(jwks_uri).map_err(|e| refused(format!("OAuth issuer {issuer}: jwks_uri: {e}")))?;
    }
    let name = match config.name {
        Some(name) => name,
        None => uri.host().unwrap_or_default().trim_matches(['[', ']']).to_owned(),
    };
    let plain = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !plain {
        return Err(refused(format!(
            "OAuth issuer {issuer}: name '{}' must be 1-64 letters, digits, '.', '_' or '-'",
            name.escape_debug()
        )));
    }
    let audiences = config.audience.map(OneOrMany::into_vec);
    if audiences
        .as_ref()
        .is_some_and(|a| a.is_empty() || a.iter().any(std::string::String::is_empty))
    {
        return Err(refused(format!("OAuth issuer {issuer}: audience is empty")));
    }
    if config
        .roles_claim
        .as_ref()
        .is_some_and(|c| c.split('.').any(str::is_empty))
    {
        return Err(refused(format!(
            "OAuth issuer {issuer}: roles_claim is empty or has an empty part"
        )));
    }
    Ok(IssuerSettings {
        issuer,
        name,
        audiences,
        roles_claim: config.roles_claim,
        jwks_uri: config.jwks_uri,
    })
}

fn check_resource(resource: &str) -> Result<(), SettingError> {
    let ok = resource
        .split_once("://")
        .is_some_and(|(scheme, rest)| matches!(scheme, "http" | "https") && !rest.is_empty())
        && !resource.contains(['?', '#']);
    if ok {
        Ok(())
    } else {
        Err(SettingError::new(
            "oauth.resource",
            format!(
                "[oauth] resource '{resource}' must be an http:// or https:// URL without query or fragment"
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issuer(url: &str) -> IssuerConfig {
        IssuerConfig::new(url)
    }

    #[test]
    fn no_issuer_no_oauth() {
        assert!(OAuthConfig::default().resolve().unwrap().is_none());
    }

    #[test]
    fn issuers_are_checked_and_named_by_host() {
        let config = OAuthConfig {
            issuers: vec![
                issuer("https://login.example.com/realms/a"),
                issuer("http://127.0.0.1:4000"),
            ],
            ..OAuthConfig::default()
        };
        let settings = config.resolve().unwrap().unwrap();
        let names: Vec<_> = settings.issuers.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(names, ["login.example.com", "127.0.0.1"]);
        assert_eq!(settings.clock_skew, Duration::from_secs(60));

        let err = |issuers: Vec<IssuerConfig>| {
            OAuthConfig {
                issuers,
                ..OAuthConfig::default()
            }
            .resolve()
            .unwrap_err()
            .why
        };
        assert!(err(vec![issuer("http://login.example.com")]).contains("https"));
        assert!(err(vec![issuer("https://a.example/?x=1")]).contains("query"));
        assert!(
            err(vec![
                issuer("https://a.example/one"),
                issuer("https://a.example/two")
            ])
            .contains("both named 'a.example'")
        );
        let mut spaced = issuer("https://a.example");
        spaced.name = Some("a b".into());
        assert!(err(vec![spaced]).contains("name 'a b'"));
    }

    #[test]
    fn audience_is_one_or_many() {
        let parsed: OAuthConfig = toml::from_str(
            "[[issuers]]\nissuer = \"https://a.example\"\naudience = \"https://s.example\"\n\
             [[issuers]]\nissuer = \"https://b.example\"\naudience = [\"x\", \"y\"]\n",
        )
        .unwrap();
        let settings = parsed.resolve().unwrap().unwrap();
        assert_eq!(
            settings.issuers[0].audiences.as_deref(),
            Some(&["https://s.example".to_owned()][..])
        );
        assert_eq!(settings.issuers[1].audiences.as_ref().unwrap().len(), 2);
    }
}
