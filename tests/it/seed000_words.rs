//! Seed 000 §3.4: "optional parameters with no value are omitted from the
//! command", for a value inside a word. The seed's own example,
//! `curl "https://api.com/search?q={{query}}&n={{limit}}"`, called without
//! `limit` rendered as `argv: ["curl"]`: the URL vanished and curl ran
//! without it. Now a missing value in a URL's query takes its pair away
//! and the rest stays; a word that carries a value given is never dropped
//! (the call is refused, naming the parameter); a word that only holds
//! the missing value still goes (`--limit={{limit}}`). Each through a real
//! server: its dry run's argv, and a real call.

use crate::common::{Api, TestServer, options, root, write_file};
use serde_json::{Value, json};
use skilld::skill::Trust;
use std::path::Path;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A read-only skill `name` whose one tool `name` takes `query` (a
/// required string) and `limit` (an optional integer) and runs `command`.
fn skill(dir: &Path, name: &str, front: &str, command: &str) {
    write_file(
        &dir.join(name.replace('_', "-")).join("SKILL.md"),
        &format!(
            "---\nname: {skill}\nversion: 1.0.0\ndescription: Searches.\nread_only: true\n{front}---\n\n\
             ### {name}\n\nSearches.\n\n#### Parameters\n\n\
             | Name | Type | Required | Description |\n|------|------|----------|-------------|\n\
             | query | string | yes | The search query. |\n\
             | limit | integer | no | Max results. |\n\n\
             #### Command\n\n```bash\n{command}\n```\n",
            skill = name.replace('_', "-"),
        ),
    );
}

async fn call(server: &TestServer, tool: &str, query: &str, arguments: Value) -> (u16, Value) {
    let path = format!("/tools/{tool}/invoke{query}");
    Api::anonymous(server)
        .post(&path, json!({ "arguments": arguments }))
        .await
}

async fn argv(server: &TestServer, tool: &str, arguments: Value) -> Value {
    let (status, body) = call(server, tool, "?dry_run=true", arguments).await;
    assert_eq!(status, 200, "{body}");
    body["argv"].clone()
}

/// What one HTTP request asked for (its request line), answering 200.
async fn one_request(listener: tokio::net::TcpListener) -> String {
    let (mut conn, _) = listener.accept().await.unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = conn.read(&mut buf).await.unwrap();
        if n == 0 {
            break;
        }
        seen.extend_from_slice(&buf[..n]);
    }
    let _ = conn
        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\nconnection: close\r\n\r\nok\n")
        .await;
    let text = String::from_utf8_lossy(&seen).into_owned();
    text.lines().next().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn the_seeds_url_keeps_its_query_without_the_missing_pair() {
    let dir = crate::common::tempdir().unwrap();
    // The seed's example word for word, and the same against a local
    // server, to run it for real.
    skill(
        dir.path(),
        "search",
        "",
        r#"curl "https://api.com/search?q={{query}}&n={{limit}}""#,
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    skill(
        dir.path(),
        "search_here",
        "network: true\n",
        &format!(r#"curl -s "http://127.0.0.1:{port}/search?q={{{{query}}}}&n={{{{limit}}}}""#),
    );
    let server = TestServer::builder(options(vec![root(dir.path(), Trust::Bundled)]))
        .start()
        .await;

    assert_eq!(
        argv(&server, "search", json!({"query": "rust lang", "limit": 5})).await,
        json!(["curl", "https://api.com/search?q=rust%20lang&n=5"])
    );
    assert_eq!(
        argv(&server, "search", json!({"query": "rust lang"})).await,
        json!(["curl", "https://api.com/search?q=rust%20lang"])
    );

    let asked = tokio::spawn(one_request(listener));
    let (status, envelope) = call(&server, "search_here", "", json!({"query": "rust lang"})).await;
    assert_eq!(status, 200, "{envelope}");
    assert_eq!(envelope["success"], true, "{envelope}");
    assert_eq!(envelope["output"], "ok\n");
    assert_eq!(
        asked.await.unwrap(),
        "GET /search?q=rust%20lang HTTP/1.1",
        "curl asked for the URL without the missing pair"
    );
}

#[tokio::test]
async fn a_word_with_a_value_given_is_refused_not_dropped() {
    let dir = crate::common::tempdir().unwrap();
    // Seed 000 §3.1's template, with `echo` as the program.
    skill(
        dir.path(),
        "listing",
        "",
        "echo arg1 arg2 {{query}} --limit={{limit}}",
    );
    skill(dir.path(), "ranged", "", "echo --range={{query}}..{{limit}}");
    skill(
        dir.path(),
        "fetch",
        "",
        "echo https://api.com/{{limit}}/items?q={{query}}",
    );
    let server = TestServer::builder(options(vec![root(dir.path(), Trust::Bundled)]))
        .start()
        .await;

    // A word that holds only the missing value still goes.
    assert_eq!(
        argv(&server, "listing", json!({"query": "rust lang"})).await,
        json!(["echo", "arg1", "arg2", "rust lang"])
    );
    let (status, envelope) = call(&server, "listing", "", json!({"query": "rust lang"})).await;
    assert_eq!(
        (status, &envelope["output"]),
        (200, &json!("arg1 arg2 rust lang\n"))
    );
    let (status, envelope) = call(&server, "listing", "", json!({"query": "x", "limit": 3})).await;
    assert_eq!(
        (status, &envelope["output"]),
        (200, &json!("arg1 arg2 x --limit=3\n"))
    );

    // A word that carries the query too, and a URL outside its query:
    // no rule makes a sensible word, so the call is refused, dry or not.
    for (tool, word) in [
        ("ranged", "--range={{query}}..{{limit}}"),
        ("fetch", "https://api.com/{{limit}}/items?q={{query}}"),
    ] {
        for query in ["?dry_run=true", ""] {
            let (status, problem) = call(&server, tool, query, json!({"query": "rust"})).await;
            assert_eq!(status, 422, "{problem}");
            assert_eq!(problem["code"], "invalid_arguments", "{problem}");
            assert_eq!(problem["errors"][0]["field"], "limit", "{problem}");
            let detail = problem["detail"].as_str().unwrap();
            assert!(
                detail.contains("'limit'") && detail.contains(word),
                "the detail names the parameter and the word: {detail}"
            );
        }
        // Given, it renders.
        let (status, envelope) = call(&server, tool, "", json!({"query": "rust", "limit": 2})).await;
        assert_eq!(status, 200, "{envelope}");
        assert_eq!(envelope["success"], true, "{envelope}");
    }
    let runs = server.get_json("/runs?tool=ranged").await;
    let runs = runs["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "only the call with both values ran: {runs:?}");
}
