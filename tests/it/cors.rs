//! CORS: off by default; with `allowed_origins`, those pages (and only
//! those) get preflights answered and answers they may read.

use crate::common::{TestServer, bundled_dir, options, root};
use reqwest::Method;
use skilld::auth::{Auth, Role, Token};
use skilld::skill::Trust;

const PAGE: &str = "https://tools.example";
const SECRET: &str = "cors-agent-secret-0123456789";

fn tokens() -> Auth {
    Auth::new(vec![
        Token::with_secret("agent", Role::Invoke, SECRET, "test").unwrap(),
    ])
    .unwrap()
}

async fn preflight(server: &TestServer, origin: &str) -> reqwest::Response {
    reqwest::Client::new()
        .request(Method::OPTIONS, server.url("/tools/os_info/invoke"))
        .header("Origin", origin)
        .header("Access-Control-Request-Method", "POST")
        .header("Access-Control-Request-Headers", "authorization, content-type")
        .send()
        .await
        .unwrap()
}

fn allowed(res: &reqwest::Response) -> Option<&str> {
    res.headers()
        .get("access-control-allow-origin")
        .map(|v| v.to_str().unwrap())
}

#[tokio::test]
async fn off_by_default() {
    let server = TestServer::builder(options(vec![root(bundled_dir(), Trust::Bundled)]))
        .auth(tokens())
        .start()
        .await;
    let res = preflight(&server, PAGE).await;
    assert_eq!(allowed(&res), None, "no CORS without allowed_origins");
    assert_ne!(res.status(), 200);
    let res = reqwest::Client::new()
        .get(server.url("/tools"))
        .bearer_auth(SECRET)
        .header("Origin", PAGE)
        .send()
        .await
        .unwrap();
    assert_eq!(allowed(&res), None);
}

#[tokio::test]
async fn allowed_origins_get_preflights_and_readable_answers() {
    let server = TestServer::builder(options(vec![root(bundled_dir(), Trust::Bundled)]))
        .auth(tokens())
        .origins(vec![PAGE.to_owned()])
        .start()
        .await;
    let res = preflight(&server, PAGE).await;
    assert!(res.status().is_success(), "{}", res.status());
    assert_eq!(allowed(&res), Some(PAGE));
    let methods = res.headers()["access-control-allow-methods"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(methods.contains("POST"), "{methods}");
    let headers = res.headers()["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .to_ascii_lowercase();
    assert!(
        headers.contains("authorization") && headers.contains("content-type"),
        "{headers}"
    );

    let client = reqwest::Client::new();
    let res = client
        .get(server.url("/tools"))
        .bearer_auth(SECRET)
        .header("Origin", PAGE)
        .send()
        .await
        .unwrap();
    assert_eq!((res.status().as_u16(), allowed(&res)), (200, Some(PAGE)));
    let exposed = res.headers()["access-control-expose-headers"]
        .to_str()
        .unwrap()
        .to_ascii_lowercase();
    assert!(
        exposed.contains("location") && exposed.contains("mcp-session-id"),
        "{exposed}"
    );
    // A refusal is readable too, so the page can tell the person why.
    let res = client
        .get(server.url("/tools"))
        .header("Origin", PAGE)
        .send()
        .await
        .unwrap();
    assert_eq!((res.status().as_u16(), allowed(&res)), (401, Some(PAGE)));

    // Another page gets no CORS headers, so its browser hides the answer.
    let res = preflight(&server, "https://attacker.example").await;
    assert_eq!(allowed(&res), None);
    let res = client
        .get(server.url("/tools"))
        .bearer_auth(SECRET)
        .header("Origin", "https://attacker.example")
        .send()
        .await
        .unwrap();
    assert_eq!(allowed(&res), None);
}
