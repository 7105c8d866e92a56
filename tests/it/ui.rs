//! The web inbox (`/ui`): its files and headers over a real socket. The
//! browser test (`tests/browser/inbox.mjs`) joins once approvals exist.

use crate::common::{TestServer, options, root};
use reqwest::StatusCode;
use skilld::auth::{Auth, Role, Token};
use skilld::skill::Trust;

const INVOKE: &str = "ui-invoke-secret-0123";
const APPROVE: &str = "ui-approve-secret-4567";

fn tokens() -> Auth {
    Auth::new(vec![
        Token::with_secret("agent", Role::Invoke, INVOKE, "test").unwrap(),
        Token::with_secret("boss", Role::Approve, APPROVE, "test").unwrap(),
    ])
    .unwrap()
}

async fn get(url: &str) -> reqwest::Response {
    reqwest::get(url).await.unwrap()
}

#[tokio::test]
async fn the_page_and_its_assets_are_served_with_strict_headers() {
    let skills = tempfile::tempdir().unwrap();
    // With tokens configured: the page itself holds no data and needs none.
    let server = TestServer::start_with_auth(options(vec![root(skills.path(), Trust::User)]), tokens()).await;

    for (path, content_type, needle) in [
        ("/ui", "text/html; charset=utf-8", "<h2 id=\"approvals-heading\">"),
        ("/ui/app.js", "text/javascript; charset=utf-8", "textContent"),
        ("/ui/style.css", "text/css; charset=utf-8", ".badge"),
    ] {
        let res = get(&server.url(path)).await;
        assert_eq!(res.status(), StatusCode::OK, "{path}");
        let h = res.headers().clone();
        assert_eq!(h["content-type"], content_type, "{path}");
        assert_eq!(h["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(h["x-frame-options"], "DENY", "{path}");
        assert_eq!(h["referrer-policy"], "no-referrer", "{path}");
        assert_eq!(h["cache-control"], "no-cache", "{path}");
        let csp = h["content-security-policy"].to_str().unwrap();
        assert!(csp.starts_with("default-src 'self';"), "{csp}");
        for directive in ["script-src 'self'", "frame-ancestors 'none'", "base-uri 'none'"] {
            assert!(csp.contains(directive), "{csp} lacks {directive}");
        }
        assert!(!csp.contains("unsafe"), "{csp}");
        assert!(h.contains_key("x-request-id"), "{path}");
        let body = res.text().await.unwrap();
        assert!(body.contains(needle), "{path} lacks {needle}");
    }

    // Server data never goes through innerHTML, and nothing is fetched from
    // elsewhere (the CSP would block it; this says so before a browser does).
    let js = get(&server.url("/ui/app.js")).await.text().await.unwrap();
    for sink in [
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
    ] {
        assert!(!js.contains(sink), "app.js uses {sink}");
    }
    let html = get(&server.url("/ui")).await.text().await.unwrap();
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "index.html links outside"
    );
    assert!(
        !html.contains("<script>") && !html.contains(" style="),
        "index.html has inline code"
    );

    // `/ui/` leads to `/ui`, whose relative links then resolve.
    let res = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(server.url("/ui/"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::PERMANENT_REDIRECT);
    assert_eq!(res.headers()["location"], "../ui");

    let res = get(&server.url("/ui/secrets.txt")).await;
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    assert_eq!(res.headers()["content-type"], "application/problem+json");
    let res = get(&server.url("/ui/..%2FCargo.toml")).await;
    assert_eq!(res.status(), StatusCode::NOT_FOUND);

    // The API behind the page still wants a token.
    assert_eq!(get(&server.url("/runs")).await.status(), StatusCode::UNAUTHORIZED);
}
