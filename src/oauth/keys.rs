//! One issuer's signing keys: found through its discovery document
//! (OpenID Connect's, else RFC 8414's), fetched from its JWKS, cached,
//! and fetched again when a token names a key the cache lacks (the issuer
//! rotated its keys) or the cache is old. Fetches for unknown keys are
//! spaced by a cooldown, so that tokens naming made-up key ids cannot
//! make this server hammer the issuer: between fetches they are refused.

use super::fetch::{FetchError, Fetcher, allowed_url};
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// Keys older than this are fetched again before use, so that a key the
/// issuer withdrew stops being trusted within this time.
const MAX_AGE: Duration = Duration::from_secs(600);

/// A verification key and the algorithms it may verify.
pub(super) struct Key {
    kid: Option<String>,
    pub(super) algorithms: Vec<Algorithm>,
    pub(super) decoding: DecodingKey,
}

/// The keys of one JWKS fetch.
#[derive(Default)]
struct KeySet {
    keys: Vec<Arc<Key>>,
    fetched: Option<Instant>,
}

impl KeySet {
    fn fresh(&self) -> bool {
        self.fetched.is_some_and(|at| at.elapsed() < MAX_AGE)
    }

    /// The key named `kid`; without a `kid`, the set's only key.
    fn find(&self, kid: Option<&str>) -> Option<Arc<Key>> {
        match kid {
            Some(kid) => self.keys.iter().find(|k| k.kid.as_deref() == Some(kid)).cloned(),
            None if self.keys.len() == 1 => self.keys.first().cloned(),
            None => None,
        }
    }
}

/// Why no key could be had.
#[derive(Debug)]
pub(super) enum KeyError {
    /// The issuer publishes no such key (or did not, when last asked).
    Unknown,
    /// The issuer's keys could not be fetched, and none are cached.
    Unavailable(String),
}

/// The state of fetching: the JWKS URL once discovered, and when the last
/// fetch was tried.
#[derive(Default)]
struct Fetching {
    jwks_uri: Option<String>,
    last_try: Option<Instant>,
}

/// One issuer's keys.
pub(super) struct IssuerKeys {
    issuer: String,
    cooldown: Duration,
    current: RwLock<Arc<KeySet>>,
    /// Held across a fetch: tokens that wait for one share its result.
    fetching: tokio::sync::Mutex<Fetching>,
}

impl IssuerKeys {
    /// `jwks_uri` skips discovery when given.
    pub(super) fn new(issuer: &str, jwks_uri: Option<String>, cooldown: Duration) -> Self {
        Self {
            issuer: issuer.to_owned(),
            cooldown,
            current: RwLock::default(),
            fetching: tokio::sync::Mutex::new(Fetching {
                jwks_uri,
                last_try: None,
            }),
        }
    }

    fn current(&self) -> Arc<KeySet> {
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The key a token's header names.
    pub(super) async fn key(&self, kid: Option<&str>, fetcher: &Fetcher) -> Result<Arc<Key>, KeyError> {
        let set = self.current();
        if set.fresh()
            && let Some(key) = set.find(kid)
        {
            return Ok(key);
        }
        let mut fetching = self.fetching.lock().await;
        // Another request may have fetched while this one waited.
        let set = self.current();
        if set.fresh()
            && let Some(key) = set.find(kid)
        {
            return Ok(key);
        }
        if fetching.last_try.is_some_and(|at| at.elapsed() < self.cooldown) {
            return set.find(kid).ok_or_else(|| match set.fetched {
                Some(_) => KeyError::Unknown,
                None => KeyError::Unavailable(format!(
                    "the keys of {} could not be fetched; the next try is within {:?}",
                    self.issuer, self.cooldown
                )),
            });
        }
        fetching.last_try = Some(Instant::now());
        match self.fetch(&mut fetching, fetcher).await {
            Ok(fetched) => {
                let found = fetched.find(kid);
                *self
                    .current
                    .write()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(fetched);
                found.ok_or(KeyError::Unknown)
            }
            Err(why) => {
                tracing::warn!(issuer = %self.issuer, error = %why, "cannot fetch an OAuth issuer's keys");
                // Keys past their age still beat none while the issuer is down.
                set.find(kid).ok_or(KeyError::Unavailable(why.to_string()))
            }
        }
    }

    async fn fetch(&self, fetching: &mut Fetching, fetcher: &Fetcher) -> Result<KeySet, FetchError> {
        let jwks_uri = match &fetching.jwks_uri {
            Some(uri) => uri.clone(),
            None => {
                let uri = discover(&self.issuer, fetcher).await?;
                fetching.jwks_uri = Some(uri.clone());
                uri
            }
        };
        let jwks = fetcher.json(&jwks_uri).await?;
        let keys = parse_jwks(&jwks);
        tracing::info!(issuer = %self.issuer, keys = keys.len(), "fetched an OAuth issuer's keys");
        Ok(KeySet {
            keys,
            fetched: Some(Instant::now()),
        })
    }
}

/// The `jwks_uri` of the issuer's metadata: OpenID Connect discovery
/// (`<issuer>/.well-known/openid-configuration`), else RFC 8414's
/// `/.well-known/oauth-authorization-server` inserted before the issuer's
/// path. The document must name the issuer exactly, or another server's
/// keys could be taken for its.
async fn discover(issuer: &str, fetcher: &Fetcher) -> Result<String, FetchError> {
    let oidc = format!(
        "{}/.well-known/openid-configuration",
        issuer.trim_end_matches('/')
    );
    let doc = match fetcher.json(&oidc).await {
        Ok(doc) => doc,
        Err(first) => fetcher.json(&rfc8414_url(issuer)?).await.map_err(|second| {
            let why = format!("no discovery document: {first}; {second}");
            second.reworded(why)
        })?,
    };
    let named = doc.get("issuer").and_then(|v| v.as_str());
    if named != Some(issuer) {
        return Err(FetchError::Malformed(format!(
            "the discovery document of {issuer} names the issuer {named:?}, not {issuer}"
        )));
    }
    let jwks_uri = doc.get("jwks_uri").and_then(|v| v.as_str()).ok_or_else(|| {
        FetchError::Malformed(format!("the discovery document of {issuer} has no jwks_uri"))
    })?;
    allowed_url(jwks_uri)?;
    Ok(jwks_uri.to_owned())
}

/// `https://host/.well-known/oauth-authorization-server/path` for the
/// issuer `https://host/path` (RFC 8414 §3.1).
fn rfc8414_url(issuer: &str) -> Result<String, FetchError> {
    let (scheme, rest) = issuer
        .split_once("://")
        .ok_or_else(|| FetchError::NotAllowed(format!("'{issuer}' is not a URL")))?;
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let path = path.trim_end_matches('/');
    let suffix = if path.is_empty() {
        String::new()
    } else {
        format!("/{path}")
    };
    Ok(format!(
        "{scheme}://{host}/.well-known/oauth-authorization-server{suffix}"
    ))
}

/// The signing keys of a JWKS. A key this server cannot use (for
/// encryption, of an unknown type, a symmetric one, malformed) is skipped
/// rather than failing the others.
fn parse_jwks(jwks: &serde_json::Value) -> Vec<Arc<Key>> {
    let entries = jwks.get("keys").and_then(|k| k.as_array());
    entries
        .into_iter()
        .flatten()
        .filter_map(|entry| serde_json::from_value::<Jwk>(entry.clone()).ok())
        .filter_map(|jwk| to_key(&jwk))
        .map(Arc::new)
        .collect()
}

fn to_key(jwk: &Jwk) -> Option<Key> {
    if matches!(
        jwk.common.public_key_use,
        Some(PublicKeyUse::Encryption | PublicKeyUse::Other(_))
    ) {
        return None;
    }
    let algorithms = algorithms(jwk);
    if algorithms.is_empty() {
        return None;
    }
    Some(Key {
        kid: jwk.common.key_id.clone(),
        algorithms,
        decoding: DecodingKey::from_jwk(jwk).ok()?,
    })
}

/// The algorithms a key may verify: those of its type, narrowed to its
/// `alg` when it states one. Never an HMAC: a public key is no shared
/// secret, and taking one for it is the algorithm-confusion attack.
pub(super) fn algorithms(jwk: &Jwk) -> Vec<Algorithm> {
    use Algorithm::{ES256, ES384, EdDSA, PS256, PS384, PS512, RS256, RS384, RS512};
    let family: &[Algorithm] = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => &[RS256, RS384, RS512, PS256, PS384, PS512],
        AlgorithmParameters::EllipticCurve(p) => match p.curve {
            EllipticCurve::P256 => &[ES256],
            EllipticCurve::P384 => &[ES384],
            _ => &[],
        },
        AlgorithmParameters::OctetKeyPair(p) if p.curve == EllipticCurve::Ed25519 => &[EdDSA],
        _ => &[],
    };
    let stated = jwk
        .common
        .key_algorithm
        .and_then(|a| serde_json::to_value(a).ok())
        .and_then(|v| v.as_str().and_then(|s| s.parse::<Algorithm>().ok()));
    match (jwk.common.key_algorithm, stated) {
        (None, _) => family.to_vec(),
        (Some(_), Some(alg)) if family.contains(&alg) => vec![alg],
        (Some(_), _) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jwk(json: serde_json::Value) -> Jwk {
        serde_json::from_value(json).unwrap()
    }

    const N: &str = "sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7svlJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQhrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw";

    #[test]
    fn public_keys_verify_only_their_own_algorithms() {
        let rsa = jwk(serde_json::json!({"kty": "RSA", "n": N, "e": "AQAB", "kid": "a"}));
        assert_eq!(algorithms(&rsa).len(), 6);
        assert!(
            !algorithms(&rsa)
                .iter()
                .any(|a| format!("{a:?}").starts_with("HS"))
        );
        let pinned = jwk(serde_json::json!({"kty": "RSA", "n": N, "e": "AQAB", "alg": "PS256"}));
        assert_eq!(algorithms(&pinned), [Algorithm::PS256]);
        // An RSA key that claims an HMAC algorithm is no key at all.
        let confused = jwk(serde_json::json!({"kty": "RSA", "n": N, "e": "AQAB", "alg": "HS256"}));
        assert!(algorithms(&confused).is_empty());
        assert!(to_key(&confused).is_none());
    }

    #[test]
    fn symmetric_and_encryption_keys_are_skipped() {
        let jwks = serde_json::json!({"keys": [
            {"kty": "oct", "k": "c2VjcmV0", "kid": "shared"},
            {"kty": "RSA", "n": N, "e": "AQAB", "kid": "enc", "use": "enc"},
            {"kty": "RSA", "n": N, "e": "AQAB", "kid": "sig", "use": "sig"},
            {"kty": "weird", "kid": "w"},
            "not a key",
        ]});
        let keys = parse_jwks(&jwks);
        let kids: Vec<_> = keys.iter().map(|k| k.kid.clone()).collect();
        assert_eq!(kids, [Some("sig".to_owned())]);
        let set = KeySet {
            keys,
            fetched: Some(Instant::now()),
        };
        assert!(set.find(Some("shared")).is_none());
        assert!(set.find(Some("sig")).is_some());
        // Without a kid, the only key.
        assert!(set.find(None).is_some());
    }

    #[test]
    fn rfc8414_inserts_the_well_known_path_before_the_issuers() {
        assert_eq!(
            rfc8414_url("https://a.example").unwrap(),
            "https://a.example/.well-known/oauth-authorization-server"
        );
        assert_eq!(
            rfc8414_url("https://a.example/realms/x/").unwrap(),
            "https://a.example/.well-known/oauth-authorization-server/realms/x"
        );
    }
}
