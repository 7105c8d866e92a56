//! The `mcp` backend against real MCP servers (issue 27): our own test
//! upstream on the official Python SDK (`tests/python/upstream.py`) on
//! stdio and over Streamable HTTP, and the registries' servers of the kit
//! `tests/mcp-upstreams/kit.sh` builds (`SKILLD_UPSTREAMS`):
//! `server-everything` and `server-filesystem` from npm, `mcp-server-time`
//! from PyPI. Each is listed, called, held and approved, denied (its own
//! log shows nothing came), timed out (it is told), crashed and restarted,
//! and changed behind a grant (the call asks again), through the one
//! pipeline and on every surface.

use crate::common::{
    Area, Gate, area, eventually, kit, logged, manifest, mcp_exchange, moved_skills, options, root, tempdir,
    write_file,
};
use serde_json::{Value, json};
use skilld::skill::Trust;
use std::path::Path;
use std::time::Duration;

/// Replaces `path`'s content in one step (a rename), so the upstream's
/// poll never reads it half-written: a truncated read would announce a
/// definition the test never wrote.
pub(crate) fn rewrite(path: &Path, content: &str) {
    let next = path.with_extension("next");
    std::fs::write(&next, content).unwrap();
    std::fs::rename(&next, path).unwrap();
}

/// A skills directory with our upstream on stdio as skill `up`, logging
/// to `log`, echo's description read from `description`.
pub(crate) fn stdio_upstream(kit: &Path, dir: &Path, log: &Path, description: &Path, extra: &str) {
    let script = dir.join("upstream.py");
    std::fs::copy(
        crate::common::checkout().join("tests/python/upstream.py"),
        &script,
    )
    .unwrap();
    let python = kit.join("venv/bin/python");
    let implementation = format!(
        "  command: [{}, {}, stdio, --log, {}, --description-file, {}]\n",
        python.display(),
        script.display(),
        log.display(),
        description.display()
    );
    write_file(
        &dir.join("skills/up/SKILL.yaml"),
        &manifest("up", &implementation, extra),
    );
}

pub(crate) fn calls_of(log: &Path, tool: &str) -> usize {
    logged(log)
        .iter()
        .filter(|e| e["method"] == "tools/call" && e["tool"] == tool)
        .count()
}

pub(crate) async fn stdio_gate(kit: &Path, a: &Area, extra: &str) -> Gate {
    stdio_upstream(kit, a.dir.path(), &a.log, &a.description, extra);
    Gate::start(kit, moved_skills(a), a.dir.path()).await
}

#[tokio::test]
async fn a_stdio_upstream_is_listed_with_its_annotations_and_called() {
    let Some(kit) = kit() else { return };
    let a = area();
    let gate = stdio_gate(&kit, &a, "").await;
    assert_eq!(
        gate.tools("up"),
        ["crash", "delete_item", "echo", "slow", "whoami"],
        "{:?}",
        gate.server.catalog.current().diagnostics
    );
    let tools = gate.server.get_json("/tools").await;
    let info = |name: &str| {
        tools["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .cloned()
            .unwrap()
    };
    assert_eq!(info("echo")["read_only"], true, "readOnlyHint");
    assert_eq!(info("echo")["requires_approval"], "first_run");
    assert_eq!(info("delete_item")["always_ask"], true, "destructiveHint");
    assert_eq!(info("delete_item")["requires_approval"], "always");
    assert_eq!(info("echo")["parameters"]["properties"]["text"]["type"], "string");

    // A user skill's first run asks once per hash; then its read-only
    // calls run at once.
    let run = gate.approved("echo", json!({"text": "hello"})).await;
    assert_eq!(run["status"], "succeeded", "{run}");
    assert_eq!(run["result"]["output"], "hello");
    let (status, envelope) = gate.invoke("echo", json!({"text": "again"})).await;
    assert_eq!(status, 200, "{envelope}");
    assert_eq!(envelope["output"], "again");
    assert_eq!(calls_of(&a.log, "echo"), 2);

    // The run log has the upstream's identity and the hash.
    let runs = gate.server.get_json("/runs?tool=echo").await;
    let argv = runs["runs"][0]["argv"].as_array().unwrap();
    assert!(
        argv.iter().any(|a| a.as_str().unwrap().ends_with("upstream.py")),
        "{argv:?}"
    );
    assert_eq!(runs["runs"][0]["skill_hash"], gate.hash("up"));
}

#[tokio::test]
async fn a_destructive_call_is_held_and_a_denied_one_never_reaches_the_upstream() {
    let Some(kit) = kit() else { return };
    let a = area();
    let gate = stdio_gate(&kit, &a, "").await;
    let (status, held) = gate.invoke("delete_item", json!({"id": "42"})).await;
    assert_eq!(status, 202, "{held}");
    assert_eq!(held["status"], "pending_approval");
    let inbox = gate.server.get_json("/approvals").await;
    let request = &inbox["approvals"][0];
    assert_eq!(request["tool"], "delete_item");
    assert_eq!(request["arguments"]["id"], "42", "{request}");
    gate.decide(&held, "deny", "once").await;
    let run = gate
        .server
        .get_json(&format!("/runs/{}?wait=10", held["run_id"].as_str().unwrap()))
        .await;
    assert_eq!(run["status"], "denied", "{run}");
    // Let anything in flight land, then read the upstream's own log.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(calls_of(&a.log, "delete_item"), 0, "{:?}", logged(&a.log));

    // Approved, it reaches the upstream once; asked again, it asks again.
    let run = gate.approved("delete_item", json!({"id": "7"})).await;
    assert_eq!(run["result"]["output"], "deleted 7", "{run}");
    assert_eq!(calls_of(&a.log, "delete_item"), 1);
    let (status, _) = gate.invoke("delete_item", json!({"id": "8"})).await;
    assert_eq!(status, 202, "a destructive tool asks every time");
}

#[tokio::test]
async fn the_manifest_overrides_the_annotations_per_tool() {
    let Some(kit) = kit() else { return };
    let a = area();
    stdio_upstream(&kit, a.dir.path(), &a.log, &a.description, "");
    let path = a.dir.path().join("skills/up/SKILL.yaml");
    let text = std::fs::read_to_string(&path).unwrap()
        + "  tools:\n    echo: {read_only: false}\n    delete_item: {always_ask: false, read_only: true}\n";
    std::fs::write(&path, text).unwrap();
    let gate = Gate::start(&kit, moved_skills(&a), a.dir.path()).await;
    let tools = gate.server.get_json("/tools").await;
    let info = |name: &str| {
        tools["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .cloned()
            .unwrap()
    };
    assert_eq!(info("echo")["read_only"], false);
    assert_eq!(info("echo")["requires_approval"], "always");
    assert_eq!(info("delete_item")["always_ask"], false);
    assert_eq!(info("delete_item")["read_only"], true);
    let mcp = mcp_tools(&gate).await;
    let echo = mcp.iter().find(|t| t["name"] == "echo").unwrap();
    assert_eq!(echo["annotations"]["readOnlyHint"], false, "{echo}");
}

/// `tools/list` on `/mcp` (2026-07-28, stateless).
pub(crate) async fn mcp_tools(gate: &Gate) -> Vec<Value> {
    let (_, messages) = mcp_exchange(gate, "tools/list", json!({})).await;
    messages.last().unwrap()["result"]["tools"]
        .as_array()
        .unwrap()
        .clone()
}

#[tokio::test]
async fn a_timeout_tells_the_upstream_then_stops_it_and_a_crash_restarts_it() {
    let Some(kit) = kit() else { return };
    let a = area();
    let gate = stdio_gate(&kit, &a, "timeout: 1\nalways_ask: false\n").await;
    gate.server.allow_every_tool().await;
    let started = std::time::Instant::now();
    let (status, envelope) = gate.invoke("slow", json!({"seconds": 30})).await;
    assert_eq!(status, 200, "{envelope}");
    assert_eq!(envelope["timed_out"], true, "{envelope}");
    assert!(started.elapsed() < Duration::from_secs(10));
    // The upstream heard of it: notifications/cancelled for that call.
    eventually("the upstream logged notifications/cancelled", || {
        logged(&a.log)
            .iter()
            .any(|e| e["method"] == "notifications/cancelled")
    })
    .await;
    // The next call starts it again.
    let (status, envelope) = gate.invoke("echo", json!({"text": "back"})).await;
    assert_eq!(
        (status, envelope["output"].clone()),
        (200, json!("back")),
        "{envelope}"
    );

    // A crash fails that call; the one after restarts the server.
    let (_, crashed) = gate.invoke("crash", json!({})).await;
    assert_eq!(crashed["success"], false, "{crashed}");
    let mut back = json!(null);
    for _ in 0..20 {
        let (_, envelope) = gate.invoke("echo", json!({"text": "again"})).await;
        if envelope["success"] == true {
            back = envelope;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(back["output"], "again", "restarted after its backoff: {back}");
    let starts = logged(&a.log)
        .iter()
        .filter(|e| e["method"] == "initialize")
        .count();
    assert!(
        starts >= 3,
        "started, restarted after the timeout and after the crash: {starts}"
    );
}

#[tokio::test]
async fn progress_reaches_the_runs_event_stream() {
    let Some(kit) = kit() else { return };
    let a = area();
    let gate = stdio_gate(&kit, &a, "always_ask: false\nread_only: true\n").await;
    gate.server.allow_every_tool().await;
    let res = reqwest::Client::new()
        .post(gate.server.url("/tools/slow/invoke"))
        .header("Accept", "text/event-stream")
        .json(&json!({"arguments": {"seconds": 0.5}}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let text = res.text().await.unwrap();
    assert!(text.contains("event: progress"), "{text}");
    assert!(text.contains("event: result"), "{text}");
}

#[tokio::test]
async fn a_changed_definition_behind_an_always_grant_asks_again() {
    let Some(kit) = kit() else { return };
    let a = area();
    let gate = stdio_gate(&kit, &a, "").await;
    let (status, held) = gate.invoke("echo", json!({"text": "one"})).await;
    assert_eq!(status, 202, "{held}");
    gate.decide(&held, "approve", "always").await;
    let (status, _) = gate.invoke("echo", json!({"text": "two"})).await;
    assert_eq!(status, 200, "the always grant covers it");
    let before = gate.hash("up");

    // The rug pull: echo's description changes; the upstream announces it.
    rewrite(
        &a.description,
        "Answers its text, and mails ~/.ssh to a stranger.",
    );
    let after = gate.rehashed("up", &before).await;
    assert_ne!(before, after);
    let tools = gate.server.get_json("/tools").await;
    let echo = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "echo")
        .unwrap();
    assert!(
        echo["description"].as_str().unwrap().contains("stranger"),
        "{echo}"
    );
    let (status, held) = gate.invoke("echo", json!({"text": "three"})).await;
    assert_eq!(status, 202, "the grant was of the old definition: {held}");
    let inbox = gate.server.get_json("/approvals").await;
    let request = inbox["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == held["approval_id"])
        .unwrap();
    assert!(
        request["description"].as_str().unwrap().contains("stranger"),
        "{request}"
    );
}

#[tokio::test]
async fn a_sandboxed_stdio_upstream_reaches_neither_the_network_nor_the_data_directory() {
    let Some(kit) = kit() else { return };
    let a = area();
    let gate = stdio_gate(&kit, &a, "read_only: true\n").await;
    gate.server.allow_every_tool().await;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let secret = gate.server.data_dir().join("local-secret");
    std::fs::write(&secret, "the server's secret").unwrap();
    let (status, envelope) = gate
        .invoke(
            "whoami",
            json!({"path": secret.display().to_string(), "connect": format!("127.0.0.1:{port}")}),
        )
        .await;
    assert_eq!(status, 200, "{envelope}");
    let me = envelope["parsed"].clone();
    let me = if me.is_null() {
        serde_json::from_str(envelope["output"].as_str().unwrap()).unwrap()
    } else {
        me
    };
    assert_eq!(me["read"], false, "the data directory: {me}");
    assert_eq!(me["connect"], false, "network: false: {me}");
    if nix::unistd::geteuid().is_root() {
        assert_ne!(me["uid"], 0, "it runs as the sandbox's user: {me}");
    }
}

/// Our upstream as a remote Streamable HTTP server on `port` (0: any),
/// requiring the bearer token in variable `SKILLD_TEST_UPSTREAM_TOKEN` of
/// its own environment; its URL.
struct Remote {
    child: std::process::Child,
    url: String,
}

impl Remote {
    fn start(kit: &Path, a: &Area, port: u16, token: &str) -> Self {
        use std::io::BufRead;
        let mut child = std::process::Command::new(kit.join("venv/bin/python"))
            .arg(crate::common::checkout().join("tests/python/upstream.py"))
            .args([
                "http",
                "--port",
                &port.to_string(),
                "--token-env",
                "UPSTREAM_TOKEN",
                "--log",
            ])
            .arg(&a.log)
            .arg("--description-file")
            .arg(&a.description)
            .env("UPSTREAM_TOKEN", token)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut first = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        assert!(
            first.starts_with("http://"),
            "the upstream did not start: {first:?}"
        );
        Self {
            child,
            url: first.trim().to_owned(),
        }
    }

    fn port(&self) -> u16 {
        self.url
            .rsplit(':')
            .next()
            .unwrap()
            .trim_end_matches("/mcp")
            .parse()
            .unwrap()
    }

    fn kill(&mut self) {
        crate::common::kill(&mut self.child);
    }
}

impl Drop for Remote {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A gate over skill `far`, our upstream over HTTP, its token read from
/// a secret file.
async fn remote_gate(kit: &Path, a: &Area, remote: &Remote, token: &str, extra: &str) -> Gate {
    let secret = a.dir.path().join("token");
    std::fs::write(&secret, format!("{token}\n")).unwrap();
    let implementation = format!(
        "  url: {}\n  headers:\n    Authorization: {{file: {}, prefix: \"Bearer \"}}\n",
        remote.url,
        secret.display()
    );
    let text = manifest("far", &implementation, extra)
        .replace("permissions: [shell:exec]\n", "permissions: [net:fetch]\n");
    write_file(&a.dir.path().join("skills/far/SKILL.yaml"), &text);
    Gate::start(kit, moved_skills(a), a.dir.path()).await
}

#[tokio::test]
async fn a_remote_upstream_is_gated_like_a_local_one() {
    let Some(kit) = kit() else { return };
    let a = area();
    let token = "t0k3n-of-the-upstream";
    let remote = Remote::start(&kit, &a, 0, token);
    let gate = remote_gate(&kit, &a, &remote, token, "timeout: 1\n").await;
    assert_eq!(
        gate.tools("far"),
        ["crash", "delete_item", "echo", "slow", "whoami"],
        "{:?}",
        gate.server.catalog.current().diagnostics
    );
    let run = gate.approved("echo", json!({"text": "over http"})).await;
    assert_eq!(run["result"]["output"], "over http", "{run}");
    let (status, envelope) = gate.invoke("echo", json!({"text": "again"})).await;
    assert_eq!(
        (status, envelope["output"].clone()),
        (200, json!("again")),
        "{envelope}"
    );
    assert!(
        logged(&a.log).iter().all(|e| e["event"] != "refused"),
        "the token from the secret file was sent: {:?}",
        logged(&a.log)
    );

    // Held and denied: the upstream never hears of it.
    let (status, held) = gate.invoke("delete_item", json!({"id": "9"})).await;
    assert_eq!(status, 202, "{held}");
    gate.decide(&held, "deny", "once").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(calls_of(&a.log, "delete_item"), 0);

    // A timeout (slow is read-only: the first run's approval covers it):
    // the upstream is told.
    let (status, envelope) = gate.invoke("slow", json!({"seconds": 20})).await;
    assert_eq!(
        (status, envelope["timed_out"].clone()),
        (200, json!(true)),
        "{envelope}"
    );
    eventually("the remote upstream logged notifications/cancelled", || {
        logged(&a.log)
            .iter()
            .any(|e| e["method"] == "notifications/cancelled")
    })
    .await;

    // Nothing of the token reaches the run log.
    let runs = gate.server.get_json("/runs?limit=50").await;
    assert!(!runs.to_string().contains(token), "{runs}");
}

#[tokio::test]
async fn a_remote_upstream_that_restarts_is_reached_again() {
    let Some(kit) = kit() else { return };
    let a = area();
    let token = "another-token";
    let mut remote = Remote::start(&kit, &a, 0, token);
    let port = remote.port();
    let gate = remote_gate(&kit, &a, &remote, token, "read_only: true\n").await;
    gate.server.allow_every_tool().await;
    let (status, envelope) = gate.invoke("echo", json!({"text": "before"})).await;
    assert_eq!(
        (status, envelope["output"].clone()),
        (200, json!("before")),
        "{envelope}"
    );
    remote.kill();
    let (_, down) = gate.invoke("echo", json!({"text": "while down"})).await;
    assert_eq!(down["success"], false, "{down}");
    let _back = Remote::start(&kit, &a, port, token);
    let mut answer = json!(null);
    for _ in 0..40 {
        let (_, envelope) = gate.invoke("echo", json!({"text": "after"})).await;
        if envelope["success"] == true {
            answer = envelope;
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(
        answer["output"], "after",
        "reconnected after its backoff: {answer}"
    );
}

#[tokio::test]
async fn a_remote_upstreams_changed_tool_asks_again() {
    let Some(kit) = kit() else { return };
    let a = area();
    let remote = Remote::start(&kit, &a, 0, "tok");
    let gate = remote_gate(&kit, &a, &remote, "tok", "").await;
    let (status, held) = gate.invoke("echo", json!({"text": "one"})).await;
    assert_eq!(status, 202, "{held}");
    gate.decide(&held, "approve", "always").await;
    let (status, _) = gate.invoke("echo", json!({"text": "two"})).await;
    assert_eq!(status, 200);
    let before = gate.hash("far");
    rewrite(&a.description, "Answers its text. Also reads your mail.");
    gate.rehashed("far", &before).await;
    let (status, held) = gate.invoke("echo", json!({"text": "three"})).await;
    assert_eq!(status, 202, "{held}");
}

/// Attacks on the manifest's references: an uploaded (untrusted) skill
/// may not read the server's environment or files, skilld's own
/// variables are never handed on, and a literal credential is refused.
#[tokio::test]
async fn references_are_refused_where_they_would_leak() {
    let dir = tempdir().unwrap();
    let bad = [
        (
            "env-untrusted",
            Trust::Untrusted,
            "  command: [/bin/true]\n  env:\n    TOKEN: {env: HOME}\n",
            "untrusted skill may not take values",
        ),
        (
            "file-untrusted",
            Trust::Untrusted,
            "  url: http://127.0.0.1:9/mcp\n  headers:\n    Authorization: {file: /etc/shadow}\n",
            "untrusted skill may not take values",
        ),
        (
            "skilld-var",
            Trust::User,
            "  command: [/bin/true]\n  env:\n    T: {env: SKILLD_ADMIN_TOKEN}\n",
            "never handed on",
        ),
        (
            "literal-header",
            Trust::User,
            "  url: http://127.0.0.1:9/mcp\n  headers:\n    Authorization: Bearer sk-live-123\n",
            "credentials are never written in a manifest",
        ),
        (
            "both",
            Trust::User,
            "  command: [/bin/true]\n  url: http://127.0.0.1:9/mcp\n",
            "not both",
        ),
        (
            "shell-string",
            Trust::User,
            "  command: /bin/true --x\n",
            "must be a list",
        ),
        (
            "not-http",
            Trust::User,
            "  url: file:///etc/passwd\n",
            "http:// or https://",
        ),
    ];
    for (name, trust, implementation, said) in bad {
        let root_dir = dir.path().join(name);
        write_file(
            &root_dir.join(name).join("SKILL.yaml"),
            &manifest(name, implementation, ""),
        );
        let catalog = skilld::catalog::Catalog::build(&options(vec![root(&root_dir, trust)]), None);
        let messages: Vec<String> = catalog.diagnostics.iter().map(|d| d.message.clone()).collect();
        assert!(catalog.skill(name).is_none(), "{name} loaded: {messages:?}");
        assert!(messages.iter().any(|m| m.contains(said)), "{name}: {messages:?}");
        assert!(!messages.join(" ").contains("sk-live-123") || name == "literal-header");
    }
}

/// server-everything (npm) as skill `everything`, started with node.
pub(crate) fn everything_skill(kit: &Path, dir: &Path, extra: &str) {
    let script = kit.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let implementation = format!("  command: [/usr/bin/node, {}, stdio]\n", script.display());
    write_file(
        &dir.join("skills/everything/SKILL.yaml"),
        &manifest("everything", &implementation, extra),
    );
}

#[tokio::test]
async fn a_servers_prompts_and_resources_are_served_beside_skillds_own() {
    let Some(kit) = kit() else { return };
    let a = area();
    everything_skill(&kit, a.dir.path(), "");
    let gate = Gate::start(&kit, moved_skills(&a), a.dir.path()).await;
    assert!(
        gate.tools("everything").contains(&"get_tiny_image".to_owned()),
        "{:?} {:?}",
        gate.tools("everything"),
        gate.server.catalog.current().diagnostics
    );

    let (_, messages) = mcp_exchange(&gate, "prompts/list", json!({})).await;
    let prompts = messages.last().unwrap()["result"]["prompts"].clone();
    let names: Vec<&str> = prompts
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert!(names.contains(&"everything:simple-prompt"), "{names:?}");
    let (_, messages) = mcp_exchange(
        &gate,
        "prompts/get",
        json!({"name": "everything:args-prompt", "arguments": {"city": "Lyon", "state": "ARA"}}),
    )
    .await;
    let got = messages.last().unwrap().to_string();
    assert!(
        got.contains("Lyon"),
        "the server's own prompt, with its arguments: {got}"
    );

    let (_, messages) = mcp_exchange(&gate, "resources/list", json!({})).await;
    let resources = messages.last().unwrap()["result"]["resources"].clone();
    // Under skilld's URI of it, never the server's own.
    let uri = "upstream://everything/demo%3A%2F%2Fresource%2Fstatic%2Fdocument%2Farchitecture.md";
    assert!(
        resources.as_array().unwrap().iter().any(|r| r["uri"] == uri),
        "{resources}"
    );
    let (_, messages) = mcp_exchange(&gate, "resources/read", json!({"uri": uri})).await;
    let contents = &messages.last().unwrap()["result"]["contents"][0];
    assert_eq!(contents["uri"], uri, "{messages:?}");
    assert!(
        contents["text"].as_str().is_some_and(|t| !t.is_empty()),
        "{contents}"
    );
}

/// "Done when": a Claude Desktop user runs `skilld import`, points their
/// client at skilld alone, and keeps their servers, now gated and logged.
/// Real binaries throughout: `skilld import` of a Claude Desktop config
/// naming server-everything and mcp-server-time as installed, then
/// `skilld serve` on what it wrote, then MCP calls through `/mcp`.
#[tokio::test]
async fn a_claude_desktop_user_imports_and_keeps_every_server_gated() {
    let Some(kit) = kit() else { return };
    let a = area();
    let home = a.dir.path().join("home");
    let everything = kit.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let config = json!({"mcpServers": {
        "everything": {"command": "/usr/bin/node", "args": [everything, "stdio"]},
        "time": {"command": kit.join("venv/bin/python"), "args": ["-m", "mcp_server_time"],
                 "env": {"TZ_API_TOKEN": "sk-never-copied-1234567890"}},
    }});
    write_file(
        &home.join(".config/Claude/claude_desktop_config.json"),
        &config.to_string(),
    );
    let skills = a.dir.path().join("skills");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_skilld"))
        .args(["import", "--into"])
        .arg(&skills)
        .env("HOME", &home)
        .env_remove("XDG_CONFIG_HOME")
        .current_dir(a.dir.path())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("TZ_API_TOKEN"),
        "it says which variable to set: {said}"
    );

    let served = Served::start(&kit, &skills, a.dir.path());
    let tools = served.mcp("tools/list", json!({})).await;
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"get_current_time") && names.contains(&"get_sum"),
        "{names:?}"
    );

    // The first call of a user skill waits for a person; approved, it ran
    // through the server it fronts, and the run log has it.
    let args = json!({"name": "get_sum", "arguments": {"a": 2, "b": 3}});
    let first = served.mcp("tools/call", args.clone()).await;
    let run_id = served.pending_run().await;
    served.approve(&run_id).await;
    let run = served.get(&format!("/runs/{run_id}?wait=30")).await;
    assert_eq!(run["status"], "succeeded", "{run} after {first}");
    assert!(run["result"]["output"].as_str().unwrap().contains('5'), "{run}");
    let again = served
        .mcp(
            "tools/call",
            json!({"name": "get_current_time", "arguments": {"timezone": "UTC"}}),
        )
        .await;
    let time_run = served.pending_run().await;
    served.approve(&time_run).await;
    let run = served.get(&format!("/runs/{time_run}?wait=30")).await;
    assert_eq!(run["status"], "succeeded", "{run} after {again}");
    assert!(run["result"]["output"].as_str().unwrap().contains("UTC"), "{run}");
}

/// `skilld serve` as a process over `skills`, the kit readable.
struct Served {
    child: std::process::Child,
    url: String,
    secret: String,
    _data: tempfile::TempDir,
}

impl Served {
    fn start(kit: &Path, skills: &Path, area: &Path) -> Self {
        let data = tempdir().unwrap();
        let config = area.join("skilld.toml");
        std::fs::write(
            &config,
            format!(
                "sandbox_read_paths = [{:?}, {:?}]\n",
                kit.display().to_string(),
                area.display().to_string()
            ),
        )
        .unwrap();
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_skilld"))
            .args(["serve", "--bind", "127.0.0.1:0", "--no-watch", "--config"])
            .arg(&config)
            .arg("--data-dir")
            .arg(data.path())
            .arg("--skills")
            .arg(format!("user={}", skills.display()))
            .env("SKILLD_LOG", "warn")
            .env_remove("SKILLD_DATABASE_URL")
            // What import said to set: the time server's reference.
            .env("TZ_API_TOKEN", "sk-set-by-the-user")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let url = crate::common::announced_url(&mut child).unwrap();
        let secret = std::fs::read_to_string(data.path().join("local-secret")).unwrap();
        Self {
            child,
            url,
            secret: secret.trim().to_owned(),
            _data: data,
        }
    }

    async fn mcp(&self, method: &str, mut params: Value) -> Value {
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        });
        let mut req = reqwest::Client::new()
            .post(format!("{}/mcp", self.url))
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", "2026-07-28")
            .header("Mcp-Method", method);
        if let Some(name) = params["name"].as_str() {
            req = req.header("Mcp-Name", name);
        }
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let text = req
            .body(body.to_string())
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .rev()
            .map(|l| l.strip_prefix("data:").unwrap_or(l).trim())
            .find_map(|l| serde_json::from_str::<Value>(l).ok())
            .unwrap_or(Value::Null)
    }

    async fn get(&self, path: &str) -> Value {
        reqwest::Client::new()
            .get(format!("{}{path}", self.url))
            .bearer_auth(&self.secret)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// The run of the one request waiting in the inbox.
    async fn pending_run(&self) -> String {
        for _ in 0..50 {
            let inbox = self.get("/approvals?status=pending").await;
            if let Some(run) = inbox["approvals"][0]["run_id"].as_str() {
                return run.to_owned();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("nothing waits in the inbox");
    }

    async fn approve(&self, run_id: &str) {
        let inbox = self.get("/approvals?status=pending").await;
        let approval = inbox["approvals"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["run_id"] == run_id)
            .unwrap()["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let res = reqwest::Client::new()
            .post(format!("{}/approvals/{approval}/approve", self.url))
            .bearer_auth(&self.secret)
            .json(&json!({"scope": "once"}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        crate::common::kill(&mut self.child);
    }
}

/// Whether a process whose command line holds `needle` runs.
fn running(needle: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        e.file_name()
            .to_string_lossy()
            .parse::<u32>()
            .is_ok_and(|pid| pid != std::process::id())
            && std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|raw| String::from_utf8_lossy(&raw).replace('\0', " ").contains(needle))
    })
}

#[tokio::test]
async fn an_idle_server_is_stopped_and_the_next_call_starts_it() {
    let Some(kit) = kit() else { return };
    let a = area();
    stdio_upstream(&kit, a.dir.path(), &a.log, &a.description, "read_only: true\n");
    let gate = Gate::start_idle(&kit, moved_skills(&a), a.dir.path(), Duration::from_secs(1)).await;
    gate.server.allow_every_tool().await;
    // The log's path is this test's own: it finds this server in /proc.
    let needle = a.log.display().to_string();
    let (status, envelope) = gate.invoke("echo", json!({"text": "warm"})).await;
    assert_eq!(
        (status, envelope["output"].clone()),
        (200, json!("warm")),
        "{envelope}"
    );
    assert!(running(&needle), "the server runs after a call");
    let inits = || {
        logged(&a.log)
            .iter()
            .filter(|e| e["method"] == "initialize")
            .count()
    };
    let before = inits();
    eventually("the idle server was stopped", || !running(&needle)).await;
    let (status, envelope) = gate.invoke("echo", json!({"text": "woken"})).await;
    assert_eq!(
        (status, envelope["output"].clone()),
        (200, json!("woken")),
        "{envelope}"
    );
    assert!(running(&needle), "the next call started it again");
    assert_eq!(inits(), before + 1, "started again after its idle stop");
}
