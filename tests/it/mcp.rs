//! MCP, as the official Python SDK (`mcp`, pinned with the other Python
//! requirements) speaks it, over Streamable HTTP and over stdio, in both
//! protocol eras: `tests/python/mcp_client.py` lists and calls tools, has a
//! held call approved (and another denied) over HTTP while it waits, reads
//! prompts and resources, and hears of a reload.

use crate::common::{TestServer, options, root, run_script};
use skilld::auth::{Auth, Role, Token};
use skilld::skill::Trust;
use std::path::Path;
use std::time::Duration;

const AGENT: &str = "mcp-agent-secret-0123456789";
const BOSS: &str = "mcp-boss-secret-0123456789";
const READER: &str = "mcp-reader-secret-0123456789";
const ADMIN: &str = "mcp-admin-secret-0123456789";

fn tokens() -> Auth {
    Auth::new(vec![
        Token::with_secret("agent", Role::Invoke, AGENT, "test").unwrap(),
        Token::with_secret("boss", Role::Approve, BOSS, "test").unwrap(),
        Token::with_secret("reader", Role::Read, READER, "test").unwrap(),
        Token::with_secret("admin", Role::Admin, ADMIN, "test").unwrap(),
    ])
    .unwrap()
}

/// `greet` and `stamp` (see `common`), and `run_sh`, which runs a shell
/// line (to fail on purpose).
fn skills(dir: &Path) {
    crate::common::greet_skill(dir);
    crate::common::stamp_skill(dir);
    crate::common::one_tool_skill(dir, "run_sh", "", "code", "sh -c {{code}}");
}

/// A skill to copy into the root before a reload.
fn extra_skill(dir: &Path) {
    crate::common::write_file(
        &dir.join("SKILL.md"),
        "---\nname: wave\nversion: 1.0.0\ndescription: Waves.\nread_only: true\n---\n\n### wave\n\n\
         Waves.\n\n#### Parameters\n\nNone.\n\n#### Command\n\n```\necho wave\n```\n",
    );
}

async fn python(args: &[&str], env: &[(&str, String)]) {
    let mut all: Vec<(&str, &str)> = vec![
        ("SKILLD_TEST_AGENT", AGENT),
        ("SKILLD_TEST_BOSS", BOSS),
        ("SKILLD_TEST_READER", READER),
        ("SKILLD_TEST_ADMIN", ADMIN),
    ];
    all.extend(env.iter().map(|(k, v)| (*k, v.as_str())));
    run_script("mcp_client.py", args, &all, Duration::from_secs(240)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_client_works_over_streamable_http() {
    let root_dir = crate::common::tempdir().unwrap();
    skills(root_dir.path());
    let extra = crate::common::tempdir().unwrap();
    extra_skill(extra.path());
    let out = crate::common::marks_dir();
    let marker = out.path().join("stamps");
    let server = TestServer::builder(options(vec![root(root_dir.path(), Trust::Bundled)]))
        .auth(tokens())
        .start()
        .await;
    let env = [
        ("SKILLD_TEST_MARKER", marker.display().to_string()),
        ("SKILLD_TEST_EXTRA_SKILL", extra.path().display().to_string()),
        (
            "SKILLD_TEST_EXTRA_TARGET",
            root_dir.path().join("wave").display().to_string(),
        ),
    ];
    python(&["http", server.url("").trim_end_matches('/')], &env).await;
}

/// `skilld mcp` on stdio, with a `skilld serve` on the same run log where
/// the person approves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_client_works_over_stdio() {
    let root_dir = crate::common::tempdir().unwrap();
    skills(root_dir.path());
    let data = crate::common::tempdir().unwrap();
    let out = crate::common::marks_dir();
    let marker = out.path().join("stamps");
    let (child, addr) = crate::common::serve(
        crate::common::skilld()
            .args(["serve", "--bind", "127.0.0.1:0", "--no-watch", "--skills"])
            .arg(format!("bundled={}", root_dir.path().display()))
            .arg("--data-dir")
            .arg(data.path())
            .env(
                "SKILLD_TOKENS",
                format!("agent:invoke:{AGENT},boss:approve:{BOSS},reader:read:{READER},admin:admin:{ADMIN}"),
            ),
    );
    let env = [
        ("SKILLD_TEST_MARKER", marker.display().to_string()),
        ("SKILLD_TEST_REQUESTER", "mcp:tester".to_owned()),
        (
            "SKILLD_SANDBOX_WRITE_PATHS",
            crate::common::marks_root().display().to_string(),
        ),
    ];
    let args = [
        "stdio",
        env!("CARGO_BIN_EXE_skilld"),
        &root_dir.path().display().to_string(),
        &data.path().display().to_string(),
        &format!("http://{addr}"),
    ];
    let args: Vec<&str> = args.iter().map(std::convert::AsRef::as_ref).collect();
    python(&args, &env).await;
    crate::common::stop(child);
}

/// `/mcp` is behind the same door as every route: a server without tokens
/// takes no web page of another origin and no foreign `Host` (DNS
/// rebinding), and a body over 1 MiB is refused before MCP parses it.
#[tokio::test]
async fn web_pages_cannot_drive_mcp() {
    let server = TestServer::builder(options(vec![root(crate::common::bundled_dir(), Trust::Bundled)]))
        .start()
        .await;
    let init = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
    let post = |headers: &[(&str, &str)], body: String| {
        let mut req = reqwest::Client::new()
            .post(server.url("/mcp"))
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .body(body);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        req.send()
    };
    let res = post(&[], init.to_string()).await.unwrap();
    assert_eq!(res.status(), 200, "a local client connects");
    let res = post(&[("Origin", "https://attacker.example")], init.to_string())
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    let res = post(&[("Host", "attacker.example")], init.to_string())
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    let huge = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{{\"x\":\"{}\"}}}}",
        "a".repeat(2 << 20)
    );
    let res = post(&[], huge).await.unwrap();
    assert_eq!(res.status(), 413);
}

/// `DELETE /mcp` ends a session with 204 and no body (the Python SDK
/// takes anything but 200 or 204 for a failure); the ended session is gone.
#[tokio::test]
async fn ending_a_session_answers_204() {
    let server = TestServer::builder(options(vec![root(crate::common::bundled_dir(), Trust::Bundled)]))
        .start()
        .await;
    let client = reqwest::Client::new();
    let init = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
    let res = client
        .post(server.url("/mcp"))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body(init.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let id = res.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    let ended = client
        .delete(server.url("/mcp"))
        .header("Mcp-Session-Id", &id)
        .header("MCP-Protocol-Version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert_eq!(ended.status(), 204);
    assert!(ended.bytes().await.unwrap().is_empty());
    let ping = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "ping"});
    let after = client
        .post(server.url("/mcp"))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2025-11-25")
        .header("Mcp-Session-Id", &id)
        .body(ping.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(after.status(), 404, "the session is gone");
}

/// An attacker (or a leaky client) opening session after session: past
/// the cap a new one is refused with 503 while the open ones keep working,
/// and ending one makes room.
#[tokio::test]
async fn mcp_sessions_are_capped() {
    // One caller may hold all of them here; `attacks_limits` shows the
    // share of each caller.
    const MAX_SESSIONS: usize = 40;
    let limits = skilld::http::ServerLimits {
        max_mcp_sessions: MAX_SESSIONS,
        max_mcp_sessions_per_caller: MAX_SESSIONS,
        ..Default::default()
    };
    let opts = options(vec![root(crate::common::bundled_dir(), Trust::Bundled)]);
    let server = TestServer::builder(opts)
        .auth(skilld::auth::Auth::open())
        .limits(limits)
        .start()
        .await;
    let client = reqwest::Client::new();
    let post = |session: Option<&str>, body: serde_json::Value| {
        let mut req = client
            .post(server.url("/mcp"))
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", "2025-11-25")
            .body(body.to_string());
        if let Some(id) = session {
            req = req.header("Mcp-Session-Id", id);
        }
        req.send()
    };
    let init = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
    let mut sessions = Vec::new();
    for _ in 0..MAX_SESSIONS {
        let res = post(None, init.clone()).await.unwrap();
        assert_eq!(res.status(), 200);
        let id = res.headers()["mcp-session-id"].to_str().unwrap().to_owned();
        sessions.push(id);
    }
    let refused = post(None, init.clone()).await.unwrap();
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.headers()["content-type"], "application/problem+json");
    let problem: serde_json::Value = refused.json().await.unwrap();
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("MCP sessions are open"),
        "{problem}"
    );

    // An open session still answers.
    let initialized = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let res = post(Some(&sessions[0]), initialized).await.unwrap();
    assert!(res.status().is_success(), "{}", res.status());
    let ping = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "ping"});
    let res = post(Some(&sessions[0]), ping).await.unwrap();
    assert_eq!(res.status(), 200);

    // Ending one makes room for one.
    let ended = client
        .delete(server.url("/mcp"))
        .header("Mcp-Session-Id", &sessions[1])
        .send()
        .await
        .unwrap();
    assert!(ended.status().is_success(), "{}", ended.status());
    assert_eq!(post(None, init.clone()).await.unwrap().status(), 200);
    assert_eq!(post(None, init).await.unwrap().status(), 503);
}

/// A run that fails (a non-zero exit, a timeout) answers `isError: true`
/// with the same envelope as structured content that a success has, so a
/// program reads the exit code and the output either way.
#[tokio::test]
async fn a_failed_run_keeps_its_envelope() {
    use serde_json::json;
    let dir = crate::common::tempdir().unwrap();
    crate::common::one_tool_skill(dir.path(), "run_sh", "", "code", "sh -c {{code}}");
    crate::common::one_tool_skill(dir.path(), "slow_sh", "timeout: 1s\n", "code", "sh -c {{code}}");
    let server = TestServer::builder(options(vec![root(dir.path(), Trust::Bundled)]))
        .start()
        .await;
    let mut mcp = crate::common::McpHttp::open(&server.url("/mcp")).await;
    let mut call = async |name: &str, code: &str| {
        let params = json!({"name": name, "arguments": {"code": code}});
        mcp.request("tools/call", params).await
    };
    let ok = call("run_sh", "echo fine").await;
    assert_eq!(ok["isError"], false, "{ok}");
    let fields = |result: &serde_json::Value| {
        let envelope = result["structuredContent"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        let mut keys: Vec<String> = envelope.into_iter().map(|(k, _)| k).collect();
        keys.retain(|k| k != "error");
        keys.sort();
        keys
    };
    assert!(fields(&ok).contains(&"run_id".to_owned()), "{ok}");

    let failed = call("run_sh", "echo partial; exit 3").await;
    assert_eq!(failed["isError"], true, "{failed}");
    let envelope = &failed["structuredContent"];
    assert_eq!(envelope["success"], false, "{failed}");
    assert_eq!(envelope["exit_code"], 3, "{failed}");
    assert_eq!(envelope["tool"], "run_sh", "{failed}");
    assert!(
        envelope["output"].as_str().unwrap().contains("partial"),
        "{failed}"
    );
    assert_eq!(fields(&failed), fields(&ok), "the same envelope as a success");

    let timed_out = call("slow_sh", "sleep 30").await;
    assert_eq!(timed_out["isError"], true, "{timed_out}");
    let envelope = &timed_out["structuredContent"];
    assert_eq!(envelope["timed_out"], true, "{timed_out}");
    assert_eq!(envelope["success"], false, "{timed_out}");
    assert_eq!(fields(&timed_out), fields(&ok), "the same envelope as a success");
}
