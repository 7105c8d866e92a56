//! Bearer tokens and roles (API.md "Auth").
//!
//! Tokens come from the config file and `SKILLD_TOKENS`; only the SHA-256
//! of each secret is kept, so a memory dump or a `Debug` print never shows
//! one. A presented token is hashed and compared with every configured
//! digest in constant time, so neither the comparison nor the number of
//! tokens tried reveals how close a guess came or which token matched.
//!
//! This module knows nothing of HTTP beyond the `Authorization` header's
//! text: the HTTP layer's `Require` extractor calls [`Auth::authenticate`]
//! and [`Caller::require`], and renders an [`AuthError`] as 401 or 403.

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
/// is allowed, as an anonymous caller with every role.
#[derive(Debug, Clone, Default)]
pub struct Auth {
    tokens: Vec<Token>,
}

impl Auth {
    /// No tokens: every request is allowed.
    pub fn open() -> Self {
        Self::default()
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
        Ok(Self { tokens })
    }

    /// Whether no token is configured (and so nothing is enforced).
    pub fn is_open(&self) -> bool {
        self.tokens.is_empty()
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
    /// request carried): the anonymous caller when the server is open,
    /// else the token named by `Bearer <secret>`.
    pub fn authenticate<'a>(
        &self,
        authorization: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<Caller, AuthError> {
        if self.is_open() {
            return Ok(Caller::anonymous());
        }
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
        let token = self.find(secret).ok_or(AuthError::Unknown)?;
        Ok(Caller {
            name: Some(token.name.clone()),
            role: token.role,
        })
    }
}

/// Who made a request: the token's name (passed on as `requested_by` or
/// `decided_by`), or no name when the server has no tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub name: Option<String>,
    pub role: Role,
}

impl Caller {
    /// The caller of an open server: nobody in particular, allowed all.
    pub fn anonymous() -> Self {
        Self {
            name: None,
            role: Role::Admin,
        }
    }

    /// `Forbidden` unless the caller's role includes `need`.
    pub fn require(&self, need: Role) -> Result<(), AuthError> {
        if self.role >= need {
            return Ok(());
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
    /// The token's role is below the one needed.
    #[error("the token '{name}' has the role '{role}'; this needs '{need}' or above")]
    Forbidden { name: String, role: Role, need: Role },
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
        // An open server lets everyone in, whatever they send.
        assert_eq!(
            Auth::open().authenticate(headers(&["Bearer junk"])).unwrap(),
            Caller::anonymous()
        );
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
        assert!(Caller::anonymous().require(Role::Admin).is_ok());
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
