//! Bearer tokens and roles (`docs/api.md`, "Auth").
//!
//! Tokens come from the config file and `SKILLD_TOKENS`; only the SHA-256
//! of each secret is kept, so a memory dump or a `Debug` print never shows
//! one. A presented token is hashed and compared with every configured
//! digest in constant time, so neither the comparison nor the number of
//! tokens tried reveals how close a guess came or which token matched.
//!
//! A server without tokens has a *local secret* instead ([`crate::local_secret`]):
//! anyone who reaches it lists and invokes, as the anonymous caller with
//! the `invoke` role, but only the holder of the secret (the person who
//! started it, through the link it printed) decides approvals, grants
//! and admin work, as `admin`. It is kept and compared as a token is.
//!
//! Beside the static tokens, the access tokens of configured OAuth issuers
//! ([`crate::oauth`]): a bearer that is no static token is verified as a
//! JWT, and its caller is `<sub>@<issuer name>` with the highest role its
//! `skilld:<role>` scopes (or configured claim) grant.
//!
//! This module knows nothing of HTTP beyond the `Authorization` header's
//! text, the one way in: no cookie is a credential, since a browser sends
//! a cookie to every port of the host that set it. The HTTP layer's `Require`
//! extractor calls [`Auth::identify`] and [`Caller::require`], and
//! renders an [`AuthError`] as 401 or 403.

use crate::setting::SettingError;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::fmt;
use std::str::FromStr;
use subtle::{ConditionallySelectable, ConstantTimeEq};

/// What a token may do; each role includes the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// List and export skills and tools.
    Read,
    /// Plus invoke tools and read runs.
    Invoke,
    /// Plus decide approvals and revoke grants.
    Approve,
    /// Everything, plus install, remove and reload skills.
    Admin,
}

impl Role {
    /// Every role, lowest first.
    pub const ALL: [Role; 4] = [Role::Read, Role::Invoke, Role::Approve, Role::Admin];

    /// The name used in config, messages and the OpenAPI document.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Invoke => "invoke",
            Role::Approve => "approve",
            Role::Admin => "admin",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| format!("unknown role '{s}'; expected read, invoke, approve or admin"))
    }
}

/// One configured token: its name, its role and the SHA-256 of its secret.
#[derive(Clone)]
pub struct Token {
    name: String,
    role: Role,
    digest: [u8; 32],
    /// Where it was configured, for error messages about duplicates.
    source: &'static str,
}

/// Shows the name and role only: the digest is as good as a secret to
/// anyone who can brute-force a short one.
impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Token")
            .field("name", &self.name)
            .field("role", &self.role)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl Token {
    /// A token whose secret is given in clear; only its hash is kept.
    pub fn with_secret(name: &str, role: Role, secret: &str, source: &'static str) -> Result<Self, String> {
        let name = check_name(name, source)?;
        if secret.is_empty() {
            return Err(format!("token '{name}' ({source}): the secret is empty"));
        }
        // A header carries visible ASCII only; a secret with a space or a
        // non-ASCII letter could be configured but never sent.
        if !secret.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(format!(
                "token '{name}' ({source}): the secret holds a space, a control character or \
                 non-ASCII text, which an Authorization header cannot carry"
            ));
        }
        Ok(Self {
            name,
            role,
            digest: Sha256::digest(secret.as_bytes()).into(),
            source,
        })
    }

    /// A token given by the SHA-256 of its secret (64 hex digits), so the
    /// config file need not hold the secret itself.
    pub fn with_sha256(
        name: &str,
        role: Role,
        hex_digest: &str,
        source: &'static str,
    ) -> Result<Self, String> {
        let name = check_name(name, source)?;
        let mut digest = [0u8; 32];
        hex::decode_to_slice(hex_digest.trim(), &mut digest).map_err(|_| {
            format!(
                "token '{name}' ({source}): secret_sha256 must be 64 hexadecimal digits, \
                 the SHA-256 of the secret (e.g. `printf %s \"$SECRET\" | sha256sum`)"
            )
        })?;
        Ok(Self {
            name,
            role,
            digest,
            source,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn role(&self) -> Role {
        self.role
    }
}

/// Names end up in the run log (`requested_by`) and in log lines, so they
/// stay short and plain.
fn check_name(name: &str, source: &str) -> Result<String, String> {
    let ok = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'@'));
    if ok {
        Ok(name.to_owned())
    } else {
        Err(format!(
            "token name '{}' ({source}) must be 1-64 letters, digits, '.', '_', '-' or '@'",
            name.escape_debug()
        ))
    }
}

/// A `[[tokens]]` table of the config file.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenConfig {
    pub name: String,
    pub role: String,
    pub secret: Option<String>,
    pub secret_sha256: Option<String>,
}

/// Hides the secret: a config printed for debugging must not leak it.
impl fmt::Debug for TokenConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenConfig")
            .field("name", &self.name)
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

impl TokenConfig {
    /// Validates the entry; errors name the token, never its secret.
    pub fn to_token(&self, source: &'static str) -> Result<Token, String> {
        let role: Role = self
            .role
            .parse()
            .map_err(|e| format!("token '{}' ({source}): {e}", self.name.escape_debug()))?;
        match (&self.secret, &self.secret_sha256) {
            (Some(secret), None) => Token::with_secret(&self.name, role, secret, source),
            (None, Some(hex)) => Token::with_sha256(&self.name, role, hex, source),
            (Some(_), Some(_)) => Err(format!(
                "token '{}' ({source}): give secret or secret_sha256, not both",
                self.name.escape_debug()
            )),
            (None, None) => Err(format!(
                "token '{}' ({source}): give its secret or secret_sha256",
                self.name.escape_debug()
            )),
        }
    }
}

/// The text of `SKILLD_TOKENS`, kept apart from other settings because it
/// holds secrets: its `Debug` shows none of it.
#[derive(Clone, Default)]
pub struct TokenList(pub String);

impl fmt::Debug for TokenList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TokenList(***)")
    }
}

impl TokenList {
    /// `SKILLD_TOKENS`, when set.
    pub fn from_env() -> Option<Self> {
        std::env::var("SKILLD_TOKENS").ok().map(TokenList)
    }

    /// Parses `name:role:secret,…`. The secret is everything after the
    /// second colon, so it may hold colons (but not commas). Blank entries
    /// (a trailing comma) are skipped. An entry that does not parse is
    /// named by its position and name, never by its text, which may be a
    /// secret.
    pub fn parse(&self) -> Result<Vec<Token>, String> {
        const SOURCE: &str = "SKILLD_TOKENS";
        let mut tokens = Vec::new();
        for (i, entry) in self.0.split(',').enumerate() {
            let entry = entry.trim();
            if entry.is_empty() {
                continue;
            }
            let mut parts = entry.splitn(3, ':');
            let (Some(name), Some(role), Some(secret)) = (parts.next(), parts.next(), parts.next()) else {
                return Err(format!("SKILLD_TOKENS entry {} is not name:role:secret", i + 1));
            };
            let role: Role = role
                .parse()
                .map_err(|e| format!("token '{}' ({SOURCE}): {e}", name.escape_debug()))?;
            tokens.push(Token::with_secret(name, role, secret, SOURCE)?);
        }
        Ok(tokens)
    }
}

/// The configured tokens. Empty means the server is open: every request
/// is allowed to list and invoke, as the anonymous caller, and the holder
/// of the local secret (if there is one) may do everything.
#[derive(Clone, Default)]
pub struct Auth {
    tokens: Vec<Token>,
    /// Without tokens: the SHA-256 of the local secret.
    local: Option<[u8; 32]>,
    /// The OAuth issuers whose access tokens are taken too.
    oauth: Option<std::sync::Arc<crate::oauth::OAuth>>,
}

/// Names the tokens, and whether there is a local secret, never a digest.
impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Auth")
            .field("tokens", &self.tokens)
            .field("local_secret", &self.local.is_some())
            .field("oauth", &self.oauth)
            .finish()
    }
}

impl Auth {
    /// No tokens and no local secret: anyone lists and invokes, and nobody
    /// decides approvals or administers.
    pub fn open() -> Self {
        Self::default()
    }

    /// No tokens, and `secret` as the local secret, whose holder is admin.
    pub fn open_with_secret(secret: &str) -> Result<Self, String> {
        let token = Token::with_secret("local", Role::Admin, secret, "the local secret")?;
        Ok(Self {
            tokens: Vec::new(),
            local: Some(token.digest),
            oauth: None,
        })
    }

    /// Refuses two tokens with one name (the run log could not tell their
    /// callers apart) or one secret (it would match either token).
    pub fn new(tokens: Vec<Token>) -> Result<Self, String> {
        for (i, t) in tokens.iter().enumerate() {
            for earlier in &tokens[..i] {
                if earlier.name == t.name {
                    return Err(format!(
                        "token '{}' is defined twice ({} and {})",
                        t.name, earlier.source, t.source
                    ));
                }
                if earlier.digest == t.digest {
                    return Err(format!(
                        "tokens '{}' and '{}' have the same secret; each needs its own",
                        earlier.name, t.name
                    ));
                }
            }
        }
        Ok(Self {
            tokens,
            local: None,
            oauth: None,
        })
    }

    /// The config file's `[[tokens]]`, then `SKILLD_TOKENS`'; both
    /// count, and a name defined in both is refused rather than one
    /// silently overriding the other.
    pub fn configured(file: &[TokenConfig], env: Option<&TokenList>) -> Result<Self, SettingError> {
        let mut tokens = file
            .iter()
            .map(|t| t.to_token("config file"))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|why| SettingError::new("tokens", why))?;
        if let Some(list) = env {
            tokens.extend(
                list.parse()
                    .map_err(|why| SettingError::new("SKILLD_TOKENS", why))?,
            );
        }
        Self::new(tokens).map_err(|why| SettingError::new("tokens", why))
    }

    /// These tokens, and the access tokens `oauth` verifies. The local
    /// secret goes: the server is no longer open. A static token named as
    /// an issuer's callers are (`…@<issuer name>`) is refused, or it could
    /// pass for one of them in the run log and in approvals.
    pub fn with_oauth(self, oauth: std::sync::Arc<crate::oauth::OAuth>) -> Result<Self, String> {
        for token in &self.tokens {
            if let Some(issuer) = oauth
                .issuer_names()
                .find(|issuer| token.name.ends_with(&format!("@{issuer}")))
            {
                return Err(format!(
                    "token '{}' ({}) is named as the callers of the OAuth issuer '{issuer}' are; rename it",
                    token.name, token.source
                ));
            }
        }
        Ok(Self {
            tokens: self.tokens,
            local: None,
            oauth: Some(oauth),
        })
    }

    /// The OAuth verifier, when issuers are configured.
    pub fn oauth(&self) -> Option<&std::sync::Arc<crate::oauth::OAuth>> {
        self.oauth.as_ref()
    }

    /// Whether no token is configured, static or OAuth: anyone lists and
    /// invokes.
    pub fn is_open(&self) -> bool {
        self.tokens.is_empty() && self.oauth.is_none()
    }

    /// Whether `secret` is the local secret (in constant time).
    pub fn is_local_secret(&self, secret: &str) -> bool {
        let Some(local) = &self.local else {
            return false;
        };
        let digest: [u8; 32] = Sha256::digest(secret.as_bytes()).into();
        bool::from(digest.ct_eq(local))
    }

    /// The configured tokens (names and roles; secrets are not kept).
    pub fn tokens(&self) -> &[Token] {
        &self.tokens
    }

    /// The token whose secret is `secret`. Every configured digest is
    /// compared, in constant time, whatever matches: the time taken
    /// depends on the number of tokens only.
    pub fn find(&self, secret: &str) -> Option<&Token> {
        let digest: [u8; 32] = Sha256::digest(secret.as_bytes()).into();
        let mut found = subtle::Choice::from(0);
        let mut index = 0u64;
        for (i, token) in self.tokens.iter().enumerate() {
            let same = digest.ct_eq(&token.digest);
            index.conditional_assign(&(i as u64), same);
            found |= same;
        }
        let index = usize::try_from(index).ok()?;
        bool::from(found).then(|| self.tokens.get(index)).flatten()
    }

    /// Who sent these `Authorization` header values (every one the
    /// request carried): the token named by `Bearer <secret>`; on a server
    /// without tokens, the holder of the local secret sent as that bearer,
    /// else the anonymous caller.
    pub fn authenticate<'a>(
        &self,
        authorization: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<Caller, AuthError> {
        if self.is_open() {
            // Whatever else a request sends, it may still list and invoke.
            let local = bearer(authorization).is_ok_and(|s| self.is_local_secret(s));
            return Ok(if local {
                Caller::local()
            } else {
                Caller::anonymous()
            });
        }
        let secret = bearer(authorization)?;
        let token = self.find(secret).ok_or(AuthError::Unknown)?;
        Ok(Caller {
            name: Some(token.name.clone()),
            role: token.role,
        })
    }
}

impl Auth {
    /// Who sent these `Authorization` values, as [`Auth::authenticate`]
    /// says, or, for a bearer that is no static token, as the configured
    /// OAuth issuers' access token it is.
    pub async fn identify(&self, authorization: &[&[u8]]) -> Result<Caller, AuthError> {
        let static_caller = self.authenticate(authorization.iter().copied());
        let Some(oauth) = &self.oauth else {
            return static_caller;
        };
        if static_caller != Err(AuthError::Unknown) {
            return static_caller;
        }
        let token = bearer(authorization.iter().copied())?;
        let verified = oauth.verify(token).await.map_err(|e| match e {
            crate::oauth::OAuthError::Invalid(why) => AuthError::InvalidToken(why),
            crate::oauth::OAuthError::Unavailable(why) => AuthError::IssuerUnavailable(why),
        })?;
        let role = verified
            .grants
            .iter()
            .filter_map(|g| g.parse::<Role>().ok())
            .max();
        match role {
            Some(role) => Ok(Caller {
                name: Some(verified.name),
                role,
            }),
            None => Err(AuthError::NoRole { name: verified.name }),
        }
    }
}

/// The secret of the one `Authorization: Bearer <secret>` value.
fn bearer<'a>(authorization: impl IntoIterator<Item = &'a [u8]>) -> Result<&'a str, AuthError> {
    let mut values = authorization.into_iter();
    let value = values.next().ok_or(AuthError::Missing)?;
    if values.next().is_some() {
        return Err(AuthError::Malformed);
    }
    let text = std::str::from_utf8(value).map_err(|_| AuthError::Malformed)?;
    let (scheme, secret) = text.trim().split_once(' ').ok_or(AuthError::Malformed)?;
    let secret = secret.trim_start_matches(' ');
    if !scheme.eq_ignore_ascii_case("bearer") || secret.is_empty() {
        return Err(AuthError::Malformed);
    }
    Ok(secret)
}

/// Who made a request: the token's name (passed on as `requested_by` or
/// `decided_by`), or no name when the server has no tokens (the anonymous
/// caller, or the holder of the local secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub name: Option<String>,
    pub role: Role,
}

impl Caller {
    /// The caller of a server without tokens who shows no local secret:
    /// any process of the machine (a tool's too), so it lists and invokes,
    /// and decides nothing.
    pub fn anonymous() -> Self {
        Self {
            name: None,
            role: Role::Invoke,
        }
    }

    /// The holder of a server's local secret: the person who started it.
    pub fn local() -> Self {
        Self {
            name: None,
            role: Role::Admin,
        }
    }

    /// `Forbidden` unless the caller's role includes `need`; for the
    /// anonymous caller, `NeedsLocalSecret`.
    pub fn require(&self, need: Role) -> Result<(), AuthError> {
        if self.role >= need {
            return Ok(());
        }
        if self.name.is_none() {
            return Err(AuthError::NeedsLocalSecret { need });
        }
        Err(AuthError::Forbidden {
            name: self.name.clone().unwrap_or_default(),
            role: self.role,
            need,
        })
    }
}

/// Why a request may not do what it asks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// Tokens are configured and the request sent none.
    #[error("this server requires a token: send `Authorization: Bearer <token>`")]
    Missing,
    /// Not one `Bearer <secret>` value.
    #[error("the Authorization header is not `Bearer <token>`")]
    Malformed,
    #[error("the bearer token is not one this server knows")]
    Unknown,
    /// An OAuth access token that does not pass: why, in words.
    #[error("the bearer token is refused: {0}")]
    InvalidToken(String),
    /// An OAuth access token whose issuer's keys cannot be had now.
    #[error("{0}")]
    IssuerUnavailable(String),
    /// A good OAuth access token that grants no role here.
    #[error(
        "the token of '{name}' grants no role on this server: it needs one of the scopes \
         skilld:read, skilld:invoke, skilld:approve or skilld:admin (or their role names in the \
         claim the server reads roles from)"
    )]
    NoRole { name: String },
    /// The token's role is below the one needed.
    #[error("the token '{name}' has the role '{role}'; this needs '{need}' or above")]
    Forbidden { name: String, role: Role, need: Role },
    /// A server without tokens, and a request without its local secret,
    /// for something only a person may do.
    #[error(
        "this server has no tokens: anyone on this machine may list and invoke, but this needs the \
         '{need}' role, which only the holder of its local secret has. Open the inbox through the \
         link `skilld serve` printed when it started (http://…/ui#secret=…), or send \
         `Authorization: Bearer <secret>` with the secret kept in the file local-secret of the \
         server's data directory"
    )]
    NeedsLocalSecret { need: Role },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth() -> Auth {
        Auth::new(vec![
            Token::with_secret("reader", Role::Read, "r-secret", "test").unwrap(),
            Token::with_secret("agent", Role::Invoke, "i-secret", "test").unwrap(),
            Token::with_sha256(
                "root",
                Role::Admin,
                &hex::encode(Sha256::digest(b"a-secret")),
                "test",
            )
            .unwrap(),
        ])
        .unwrap()
    }

    fn headers<'a>(values: &[&'a str]) -> Vec<&'a [u8]> {
        values.iter().map(|v| v.as_bytes()).collect()
    }

    #[test]
    fn roles_are_ordered_and_parse() {
        assert!(Role::Read < Role::Invoke && Role::Invoke < Role::Approve && Role::Approve < Role::Admin);
        for r in Role::ALL {
            assert_eq!(r.as_str().parse::<Role>().unwrap(), r);
        }
        assert!(
            "Admin"
                .parse::<Role>()
                .unwrap_err()
                .contains("unknown role 'Admin'")
        );
    }

    #[test]
    fn find_matches_exactly_one_token() {
        let a = auth();
        assert_eq!(a.find("r-secret").map(Token::name), Some("reader"));
        assert_eq!(a.find("i-secret").map(Token::name), Some("agent"));
        assert_eq!(a.find("a-secret").map(Token::name), Some("root"));
        for wrong in ["", "r-secre", "r-secrett", "R-SECRET", "i-secret ", "a-secret\0"] {
            assert!(a.find(wrong).is_none(), "{wrong:?}");
        }
        assert!(Auth::open().find("anything").is_none());
    }

    #[test]
    fn secrets_are_kept_only_as_digests() {
        let a = auth();
        let printed = format!("{a:?} {:?}", TokenList("x:read:hunter2".into()));
        assert!(
            !printed.contains("r-secret") && !printed.contains("hunter2"),
            "{printed}"
        );
        let hashed = hex::encode(Sha256::digest(b"r-secret"));
        assert!(!printed.contains(&hashed[..16]), "{printed}");
    }

    #[test]
    fn authenticate_reads_the_bearer_header() {
        let a = auth();
        let caller = a.authenticate(headers(&["Bearer i-secret"])).unwrap();
        assert_eq!(
            caller,
            Caller {
                name: Some("agent".into()),
                role: Role::Invoke
            }
        );
        // The scheme is case-insensitive; extra spaces are tolerated.
        assert_eq!(
            a.authenticate(headers(&["bearer   a-secret"])).unwrap().role,
            Role::Admin
        );
        let code = |h: Vec<&[u8]>| match a.authenticate(h) {
            Err(AuthError::Missing) => false,
            Err(AuthError::Malformed | AuthError::Unknown) => true,
            other => panic!("{other:?}"),
        };
        assert!(!code(headers(&[])));
        for bad in [
            "Bearer nope",
            "Bearer",
            "Bearer ",
            "Basic cmVhZGVyOnI=",
            "r-secret",
            "Token r-secret",
        ] {
            assert!(code(headers(&[bad])), "{bad}");
        }
        assert!(code(headers(&["Bearer r-secret", "Bearer i-secret"])));
        // An open server lets everyone in to invoke, whatever they send.
        assert_eq!(
            Auth::open().authenticate(headers(&["Bearer junk"])).unwrap(),
            Caller::anonymous()
        );
    }

    #[test]
    fn the_local_secret_makes_its_holder_admin_and_no_one_else() {
        let a = Auth::open_with_secret("local-0123").unwrap();
        assert!(a.is_open());
        let who = |h: &[&str]| a.authenticate(headers(h)).unwrap();
        assert_eq!(who(&["Bearer local-0123"]), Caller::local());
        for h in [
            &[][..],
            &["Bearer local-012"][..],
            &["Bearer local-01234"][..],
            &["Bearer local-0123", "Bearer local-0123"][..],
            &["local-0123"][..],
            // The old start link's cookie, pasted where a token goes.
            &["skilld-local-0123456789ab=local-0123"][..],
        ] {
            assert_eq!(who(h), Caller::anonymous(), "{h:?}");
        }
        assert!(a.is_local_secret("local-0123") && !a.is_local_secret("local-0123 "));
        assert!(!Auth::open().is_local_secret(""));
        assert!(!format!("{a:?}").contains(&hex::encode(Sha256::digest(b"local-0123"))[..8]));
        // The anonymous caller invokes; the rest asks for the secret.
        let anonymous = Caller::anonymous();
        assert!(anonymous.require(Role::Invoke).is_ok());
        assert_eq!(
            anonymous.require(Role::Approve),
            Err(AuthError::NeedsLocalSecret { need: Role::Approve })
        );
        assert!(Caller::local().require(Role::Admin).is_ok());
    }

    #[test]
    fn require_compares_roles() {
        let agent = Caller {
            name: Some("agent".into()),
            role: Role::Invoke,
        };
        assert!(agent.require(Role::Read).is_ok());
        assert!(agent.require(Role::Invoke).is_ok());
        let err = agent.require(Role::Approve).unwrap_err();
        assert!(
            matches!(
                err,
                AuthError::Forbidden {
                    need: Role::Approve,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("'agent' has the role 'invoke'"), "{err}");
    }

    #[test]
    fn env_list_parses_and_errors_name_the_token_not_the_secret() {
        let tokens = TokenList(" a:read:s1, b:admin:with:colons ,".into())
            .parse()
            .unwrap();
        let names: Vec<_> = tokens.iter().map(|t| (t.name(), t.role())).collect();
        assert_eq!(names, [("a", Role::Read), ("b", Role::Admin)]);
        let a = Auth::new(tokens).unwrap();
        assert_eq!(a.find("with:colons").map(Token::name), Some("b"));

        let err = |s: &str| TokenList(s.into()).parse().unwrap_err();
        assert_eq!(
            err("justasecret"),
            "SKILLD_TOKENS entry 1 is not name:role:secret"
        );
        assert_eq!(
            err("a:read:x,b:read"),
            "SKILLD_TOKENS entry 2 is not name:role:secret"
        );
        assert_eq!(
            err("a:writer:x"),
            "token 'a' (SKILLD_TOKENS): unknown role 'writer'; expected read, invoke, approve or admin"
        );
        assert_eq!(err("a:read:"), "token 'a' (SKILLD_TOKENS): the secret is empty");
        assert!(err("a:read:has space").contains("cannot carry"));
        assert!(err(":read:x").contains("token name ''"));
        assert!(err("a b:read:x").contains("token name 'a b'"));
    }

    #[test]
    fn file_entries_need_exactly_one_valid_secret() {
        let entry = |secret: Option<&str>, sha: Option<&str>| TokenConfig {
            name: "ci".into(),
            role: "invoke".into(),
            secret: secret.map(str::to_owned),
            secret_sha256: sha.map(str::to_owned),
        };
        let hex = hex::encode(Sha256::digest(b"s"));
        let t = entry(None, Some(&hex.to_uppercase())).to_token("file").unwrap();
        assert_eq!((t.name(), t.role()), ("ci", Role::Invoke));
        assert!(Auth::new(vec![t]).unwrap().find("s").is_some());
        let err = |e: TokenConfig| e.to_token("file").unwrap_err();
        assert!(err(entry(Some("s"), Some(&hex))).contains("not both"));
        assert!(err(entry(None, None)).contains("give its secret"));
        assert!(err(entry(None, Some("abc"))).starts_with("token 'ci' (file): secret_sha256 must be 64"));
        assert!(err(entry(None, Some(&"g".repeat(64)))).contains("64 hexadecimal"));
        assert!(format!("{:?}", entry(Some("hunter2"), None)).contains("ci"));
        assert!(!format!("{:?}", entry(Some("hunter2"), None)).contains("hunter2"));
    }

    fn oauth(issuer_name: &str) -> std::sync::Arc<crate::oauth::OAuth> {
        let config: crate::oauth::OAuthConfig = toml::from_str(&format!(
            "[[issuers]]\nissuer = \"https://login.example.com\"\nname = \"{issuer_name}\"\n"
        ))
        .unwrap();
        let settings = config.resolve().unwrap().unwrap();
        std::sync::Arc::new(crate::oauth::OAuth::new(&settings, "https://skilld.example/").unwrap())
    }

    #[test]
    fn oauth_closes_the_server_and_keeps_names_apart() {
        let with = Auth::open_with_secret("local")
            .unwrap()
            .with_oauth(oauth("idp"))
            .unwrap();
        assert!(!with.is_open());
        assert!(!with.is_local_secret("local"), "the local secret goes");
        assert_eq!(with.oauth().unwrap().resource(), "https://skilld.example");
        // A static token named as the issuer's callers are could pass for one.
        let twin = Auth::new(vec![
            Token::with_secret("agent@idp", Role::Admin, "s", "config file").unwrap(),
        ])
        .unwrap()
        .with_oauth(oauth("idp"))
        .unwrap_err();
        assert!(twin.contains("token 'agent@idp' (config file)"), "{twin}");
        assert!(auth().with_oauth(oauth("idp")).is_ok());
    }

    #[tokio::test]
    async fn a_bearer_that_is_no_static_token_is_tried_as_a_jwt() {
        let a = auth().with_oauth(oauth("idp")).unwrap();
        let who = |h: &'static str| {
            let a = a.clone();
            async move { a.identify(&[h.as_bytes()]).await }
        };
        assert_eq!(
            who("Bearer i-secret").await.unwrap().name.as_deref(),
            Some("agent")
        );
        assert!(matches!(
            who("Bearer nope").await,
            Err(AuthError::InvalidToken(_))
        ));
        assert!(matches!(
            who("Bearer a.b.c").await,
            Err(AuthError::InvalidToken(_))
        ));
        assert_eq!(who("Basic x").await, Err(AuthError::Malformed));
        assert_eq!(a.identify(&[]).await, Err(AuthError::Missing));
    }

    #[test]
    fn duplicate_names_and_secrets_are_refused() {
        let t =
            |name: &str, secret: &str, source| Token::with_secret(name, Role::Read, secret, source).unwrap();
        assert_eq!(
            Auth::new(vec![t("a", "1", "config file"), t("a", "2", "SKILLD_TOKENS")]).unwrap_err(),
            "token 'a' is defined twice (config file and SKILLD_TOKENS)"
        );
        assert_eq!(
            Auth::new(vec![t("a", "1", "x"), t("b", "1", "x")]).unwrap_err(),
            "tokens 'a' and 'b' have the same secret; each needs its own"
        );
    }
}
