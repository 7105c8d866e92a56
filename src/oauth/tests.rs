//! `OAuth::verify` against an issuer served here (discovery and JWKS on
//! loopback), with tokens signed by an Ed25519 key of a fixed seed: the
//! clock-skew edges, `nbf`, `iss` and `sub`, which a real provider cannot
//! be made to get wrong. `tests/it/oauth.rs` covers the rest against one.

use super::*;
use jsonwebtoken::{Algorithm, EncodingKey, Header};

/// PKCS#8 for Ed25519, before the 32 bytes of the seed.
const PKCS8_PREFIX: [u8; 16] = [
    0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
];

fn key() -> EncodingKey {
    let mut der = PKCS8_PREFIX.to_vec();
    der.extend([7u8; 32]);
    EncodingKey::from_ed_der(&der)
}

/// An issuer on loopback publishing [`key`] as `kid` "k"; its URL.
async fn issuer() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let mut jwk =
        serde_json::to_value(jsonwebtoken::jwk::Jwk::from_encoding_key(&key(), Algorithm::EdDSA).unwrap())
            .unwrap();
    jwk["kid"] = json!("k");
    let discovery = json!({"issuer": url, "jwks_uri": format!("{url}/jwks")});
    let app = axum::Router::new()
        .route(
            "/.well-known/openid-configuration",
            axum::routing::get(move || async move { axum::Json(discovery) }),
        )
        .route(
            "/jwks",
            axum::routing::get(move || async move { axum::Json(json!({"keys": [jwk]})) }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

fn oauth(issuer: &str) -> OAuth {
    let config: OAuthConfig =
        toml::from_str(&format!("[[issuers]]\nissuer = \"{issuer}\"\nname = \"t\"\n")).unwrap();
    OAuth::new(&config.resolve().unwrap().unwrap(), "https://skilld.example").unwrap()
}

fn now() -> i64 {
    i64::try_from(jsonwebtoken::get_current_timestamp()).unwrap()
}

fn token(claims: Value) -> String {
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = Some("k".into());
    jsonwebtoken::encode(&header, &claims, &key()).unwrap()
}

fn claims(issuer: &str, exp_in: i64) -> Value {
    json!({"iss": issuer, "sub": "bot", "aud": "https://skilld.example/mcp", "exp": now() + exp_in,
        "scope": "skilld:invoke"})
}

#[tokio::test]
async fn exp_and_nbf_hold_within_the_skew() {
    let url = issuer().await;
    let oauth = oauth(&url);
    let verified = oauth.verify(&token(claims(&url, 600))).await.unwrap();
    assert_eq!(
        verified,
        Verified {
            name: "bot@t".into(),
            grants: vec!["invoke".into()]
        }
    );
    // Expired 30 s ago: within the default 60 s skew. 90 s ago: not.
    assert!(oauth.verify(&token(claims(&url, -30))).await.is_ok());
    let late = oauth.verify(&token(claims(&url, -90))).await.unwrap_err();
    assert_eq!(late, OAuthError::Invalid("the token has expired".into()));
    let mut early = claims(&url, 600);
    early["nbf"] = json!(now() + 30);
    assert!(oauth.verify(&token(early.clone())).await.is_ok());
    early["nbf"] = json!(now() + 300);
    let err = oauth.verify(&token(early)).await.unwrap_err();
    assert!(matches!(err, OAuthError::Invalid(why) if why.contains("not valid yet")));
}

#[tokio::test]
async fn issuer_subject_and_audience_are_checked() {
    let url = issuer().await;
    let oauth = oauth(&url);
    let refused = |claims: Value| {
        let oauth = &oauth;
        async move {
            match oauth.verify(&token(claims)).await {
                Err(OAuthError::Invalid(why)) => why,
                other => panic!("{other:?}"),
            }
        }
    };
    let mut other_issuer = claims(&url, 600);
    other_issuer["iss"] = json!(format!("{url}/"));
    assert!(refused(other_issuer).await.contains("not one this server trusts"));
    let mut no_sub = claims(&url, 600);
    no_sub.as_object_mut().unwrap().remove("sub");
    assert!(refused(no_sub).await.contains("'sub'"));
    let mut root = claims(&url, 600);
    root["aud"] = json!(["https://elsewhere.example", "https://skilld.example"]);
    assert!(oauth.verify(&token(root)).await.is_ok());
    let mut wrong = claims(&url, 600);
    wrong["aud"] = json!("https://skilld.example/other");
    assert!(refused(wrong).await.contains("another audience"));
    let mut no_exp = claims(&url, 600);
    no_exp.as_object_mut().unwrap().remove("exp");
    assert!(refused(no_exp).await.contains("'exp'"));
}
