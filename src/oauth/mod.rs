//! skilld as an OAuth 2.1 resource server (MCP's authorization spec,
//! `docs/mcp.md` "OAuth sign-in"): it takes JWT access tokens (RFC 9068)
//! from the configured issuers beside its static tokens, and describes
//! itself in protected-resource metadata (RFC 9728) so that a client
//! given only its URL finds where to get one.
//!
//! A token is taken when it is a JWS signed by a key its issuer publishes
//! (found by discovery, cached, refetched on rotation: [`keys`]) with an
//! algorithm of that key's type (never `none`, never an HMAC), names a
//! configured issuer exactly, carries one of this server's audiences, and
//! is within its `exp` and `nbf` give or take the clock skew. Its bearer
//! is `<sub>@<issuer name>`, with the roles its scopes (or a configured
//! claim) grant: [`Verified`]. This module knows nothing of roles or HTTP;
//! `crate::auth` maps the grants to a role.

mod claims;
mod fetch;
mod keys;
pub mod settings;

pub use claims::{SCOPE_PREFIX, scope};
pub use fetch::FetchError;
pub use settings::{OAuthConfig, OAuthSettings};

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{AlgorithmFamily, Validation};
use serde_json::{Value, json};
use settings::IssuerSettings;
use std::fmt;

/// The path of the metadata of the whole server; that of `/mcp` adds `/mcp`.
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// Every scope this server knows, lowest role first.
pub const SCOPES: [&str; 4] = ["skilld:read", "skilld:invoke", "skilld:approve", "skilld:admin"];

/// The verifier of access tokens and the source of the metadata.
pub struct OAuth {
    /// This server's resource identifier, without a trailing `/`.
    resource: String,
    issuers: Vec<Issuer>,
    clock_skew: u64,
    fetcher: fetch::Fetcher,
}

struct Issuer {
    settings: IssuerSettings,
    audiences: Vec<String>,
    keys: keys::IssuerKeys,
}

/// Names the issuers and the resource; nothing else is worth printing.
impl fmt::Debug for OAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuth")
            .field("resource", &self.resource)
            .field(
                "issuers",
                &self
                    .issuers
                    .iter()
                    .map(|i| &i.settings.issuer)
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

/// The bearer of a verified token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// `<sub>@<issuer name>`: a subject qualified by its issuer, so that
    /// two issuers' subjects (and static tokens' names) stay apart.
    pub name: String,
    /// The role names the token grants, known or not.
    pub grants: Vec<String>,
}

/// Why a token was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OAuthError {
    /// The token is bad: expired, for another audience, forged, … (401).
    #[error("{0}")]
    Invalid(String),
    /// Its issuer's keys cannot be had just now (503).
    #[error("{0}")]
    Unavailable(String),
}

impl OAuth {
    /// The verifier for `settings`, this server being reached at
    /// `public_url` (its resource unless `[oauth] resource` says).
    pub fn new(settings: &OAuthSettings, public_url: &str) -> Result<Self, FetchError> {
        let resource = settings
            .resource
            .clone()
            .unwrap_or_else(|| public_url.trim_end_matches('/').to_owned());
        let issuers = settings
            .issuers
            .iter()
            .map(|s| Issuer {
                audiences: s
                    .audiences
                    .clone()
                    .unwrap_or_else(|| vec![resource.clone(), format!("{resource}/mcp")]),
                keys: keys::IssuerKeys::new(&s.issuer, s.jwks_uri.clone(), settings.jwks_cooldown),
                settings: s.clone(),
            })
            .collect();
        Ok(Self {
            resource,
            issuers,
            clock_skew: settings.clock_skew.as_secs(),
            fetcher: fetch::Fetcher::new()?,
        })
    }

    /// This server's resource identifier.
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// The issuers' names, by which their callers are qualified.
    pub fn issuer_names(&self) -> impl Iterator<Item = &str> {
        self.issuers.iter().map(|i| i.settings.name.as_str())
    }

    /// Where the metadata of the whole server, or of `/mcp`, is.
    pub fn metadata_url(&self, mcp: bool) -> String {
        let suffix = if mcp { "/mcp" } else { "" };
        format!("{}{METADATA_PATH}{suffix}", self.resource)
    }

    /// The RFC 9728 metadata of the whole server, or of `/mcp`.
    pub fn metadata(&self, mcp: bool) -> Value {
        let suffix = if mcp { "/mcp" } else { "" };
        json!({
            "resource": format!("{}{suffix}", self.resource),
            "authorization_servers": self.issuers.iter().map(|i| &i.settings.issuer).collect::<Vec<_>>(),
            "scopes_supported": SCOPES,
            "bearer_methods_supported": ["header"],
            "resource_name": "skilld",
        })
    }

    /// The bearer of `token`, once it is known good.
    pub async fn verify(&self, token: &str) -> Result<Verified, OAuthError> {
        let invalid = |why: &str| OAuthError::Invalid(why.to_owned());
        if token.split('.').count() != 3 {
            return Err(invalid(
                "the bearer token is neither a static token nor a signed JWT",
            ));
        }
        let header = jsonwebtoken::decode_header(token)
            .map_err(|_| invalid("the token's header is not a JWS header with a known algorithm"))?;
        if header.alg.family() == AlgorithmFamily::Hmac {
            return Err(OAuthError::Invalid(format!(
                "the token is signed with {:?}, a shared-secret algorithm; this server takes only \
                 tokens signed with an issuer's public key",
                header.alg
            )));
        }
        let issuer = self.issuer_of(token)?;
        let key = issuer
            .keys
            .key(header.kid.as_deref(), &self.fetcher)
            .await
            .map_err(|e| match e {
                keys::KeyError::Unknown => {
                    invalid("the token is signed with a key its issuer does not publish")
                }
                keys::KeyError::Unavailable(why) => OAuthError::Unavailable(format!(
                    "the keys of the token's issuer cannot be had just now; try again later ({why})"
                )),
            })?;
        if !key.algorithms.contains(&header.alg) {
            return Err(invalid("the token's algorithm is not one its key verifies"));
        }
        let mut validation = Validation::new(header.alg);
        validation.leeway = self.clock_skew;
        validation.validate_nbf = true;
        validation.set_issuer(&[&issuer.settings.issuer]);
        validation.set_audience(&issuer.audiences);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let data = jsonwebtoken::decode::<Value>(token, &key.decoding, &validation)
            .map_err(|e| OAuthError::Invalid(self.describe(e.kind(), issuer)))?;
        let sub = claims::subject(&data.claims).map_err(OAuthError::Invalid)?;
        Ok(Verified {
            name: format!("{sub}@{}", issuer.settings.name),
            grants: claims::grants(&data.claims, issuer.settings.roles_claim.as_deref()),
        })
    }

    /// The configured issuer the (not yet verified) token names.
    fn issuer_of(&self, token: &str) -> Result<&Issuer, OAuthError> {
        let claims: Value = jsonwebtoken::dangerous::insecure_decode_claims(token)
            .map_err(|_| OAuthError::Invalid("the token's claims are not a JSON object".to_owned()))?;
        let iss = claims.get("iss").and_then(Value::as_str).unwrap_or_default();
        self.issuers
            .iter()
            .find(|i| i.settings.issuer == iss)
            .ok_or_else(|| OAuthError::Invalid("the token's issuer is not one this server trusts".to_owned()))
    }

    /// Why the checks failed, in words a client's operator can act on.
    fn describe(&self, kind: &ErrorKind, issuer: &Issuer) -> String {
        match kind {
            ErrorKind::ExpiredSignature => "the token has expired".to_owned(),
            ErrorKind::ImmatureSignature => "the token is not valid yet (its nbf is ahead)".to_owned(),
            ErrorKind::InvalidAudience => format!(
                "the token is for another audience; this server takes {}",
                issuer.audiences.join(" or ")
            ),
            ErrorKind::InvalidIssuer => "the token's issuer is not one this server trusts".to_owned(),
            ErrorKind::InvalidSignature => "the token's signature does not verify".to_owned(),
            ErrorKind::MissingRequiredClaim(claim) => format!("the token has no '{claim}' claim"),
            ErrorKind::InvalidClaimFormat(claim) => format!("the token's '{claim}' claim is malformed"),
            _ => "the token is malformed".to_owned(),
        }
    }
}

#[cfg(test)]
mod tests;
