//! Seed 000 §7.2: a skill declares the modes it serves in. The caller's
//! mode filtered listings, but a `modes: [Meeting]` tool still ran when
//! called in `Dev`. Now a call in a mode its skill does not serve in is
//! refused (403 `not_in_mode`, an `isError` result over MCP, a message from
//! `skilld run`) before anything runs, is recorded or waits for a person:
//! over HTTP, MCP over HTTP (`/mcp?mode=`, `_meta` `skilld/mode`), MCP over
//! stdio (`skilld mcp --mode`) and `skilld run --mode`.

use crate::common::{McpHttp, McpStdio, TestServer, assert_exit, options, root, skilld, tempdir, write_file};
use serde_json::{Value, json};
use skilld::skill::Trust;
use std::path::Path;

/// `notes` serves only in Meeting and asks a person before each call;
/// `lint` serves only in Dev, read-only; `clock` serves in every mode.
fn skills(dir: &Path) {
    let skill = |name: &str, front: &str, tool: &str| {
        write_file(
            &dir.join(name).join("SKILL.md"),
            &format!(
                "---\nname: {name}\nversion: 1.0.0\ndescription: A tool of some modes.\n{front}---\n\n\
                 ### {tool}\n\nSays its name.\n\n#### Parameters\n\nNone.\n\n#### Command\n\n\
                 ```\necho {tool}\n```\n"
            ),
        );
    };
    skill("notes", "modes: [Meeting]\n", "take_notes");
    skill("lint", "modes: [Dev]\nread_only: true\n", "lint_code");
    skill("clock", "read_only: true\n", "what_time");
}

fn tool_names(list: &Value) -> Vec<String> {
    let tools = list["tools"].as_array().unwrap_or_else(|| panic!("{list}"));
    let mut names: Vec<String> = tools
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

async fn invoke(server: &TestServer, tool: &str, query: &str, body: Value) -> (u16, Value) {
    let res = reqwest::Client::new()
        .post(server.url(&format!("/tools/{tool}/invoke{query}")))
        .json(&body)
        .send()
        .await
        .unwrap();
    (res.status().as_u16(), res.json().await.unwrap())
}

/// How many runs and pending approvals the server has recorded.
async fn recorded(server: &TestServer) -> (usize, usize) {
    let runs = server.get_json("/runs").await;
    let pending = server.get_json("/approvals?status=pending").await;
    (
        runs["runs"].as_array().unwrap().len(),
        pending["approvals"].as_array().unwrap().len(),
    )
}

#[tokio::test]
async fn http_calls_in_another_mode_are_refused_before_anything_happens() {
    let dir = tempdir().unwrap();
    skills(dir.path());
    let server = TestServer::builder(options(vec![root(dir.path(), Trust::Bundled)]))
        .start()
        .await;
    let listed = server.get_json("/tools?mode=Dev").await;
    assert_eq!(tool_names(&listed), ["lint_code", "what_time"]);

    for query in ["", "?dry_run=true"] {
        let (status, problem) = invoke(&server, "take_notes", query, json!({"mode": "Dev"})).await;
        assert_eq!(status, 403, "{problem}");
        assert_eq!(problem["code"], "not_in_mode", "{problem}");
        let detail = problem["detail"].as_str().unwrap();
        assert!(
            detail.contains("take_notes") && detail.contains("Dev") && detail.contains("Meeting"),
            "{detail}"
        );
    }
    let (status, problem) = invoke(&server, "lint_code", "", json!({"mode": "Meeting"})).await;
    assert_eq!((status, problem["code"].as_str()), (403, Some("not_in_mode")));
    assert_eq!(recorded(&server).await, (0, 0), "nothing ran, nothing waits");

    // In its own mode (in any case), in Global, or with no mode named, it
    // is called as before: `take_notes` waits for a person.
    let (status, held) = invoke(&server, "take_notes", "", json!({"mode": "meeting"})).await;
    assert_eq!(
        (status, &held["status"]),
        (202, &json!("pending_approval")),
        "{held}"
    );
    let (status, held) = invoke(&server, "take_notes", "", json!({})).await;
    assert_eq!(status, 202, "{held}");
    let (status, envelope) = invoke(&server, "lint_code", "", json!({"mode": "Dev"})).await;
    assert_eq!((status, &envelope["output"]), (200, &json!("lint_code\n")));
    let (status, envelope) = invoke(&server, "what_time", "", json!({"mode": "Dev"})).await;
    assert_eq!((status, &envelope["output"]), (200, &json!("what_time\n")));
    assert_eq!(recorded(&server).await, (4, 2));
}

fn text_of(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// A `tools/call` refused for its mode: an error result saying so.
fn assert_refused_for_mode(result: &Value, mode: &str) {
    assert_eq!(result["isError"], true, "{result}");
    let text = text_of(result);
    assert!(
        text.contains("not available in mode") && text.contains(mode) && text.contains("nothing ran"),
        "{text}"
    );
}

#[tokio::test]
async fn mcp_over_http_takes_the_mode_from_the_url_or_the_call() {
    let dir = tempdir().unwrap();
    skills(dir.path());
    let server = TestServer::builder(options(vec![root(dir.path(), Trust::Bundled)]))
        .start()
        .await;

    let mut dev = McpHttp::open(&server.url("/mcp?mode=Dev")).await;
    let listed = dev.request("tools/list", json!({})).await;
    assert_eq!(tool_names(&listed), ["lint_code", "what_time"]);
    let called = dev.request("tools/call", json!({"name": "take_notes"})).await;
    assert_refused_for_mode(&called, "Dev");
    let called = dev.request("tools/call", json!({"name": "lint_code"})).await;
    assert_eq!(called["isError"], false, "{called}");

    let mut plain = McpHttp::open(&server.url("/mcp")).await;
    let listed = plain.request("tools/list", json!({})).await;
    assert_eq!(tool_names(&listed), ["lint_code", "take_notes", "what_time"]);
    let called = plain
        .request(
            "tools/call",
            json!({"name": "take_notes", "_meta": {"skilld/mode": "Dev"}}),
        )
        .await;
    assert_refused_for_mode(&called, "Dev");
    // The call's `_meta` wins over the URL's mode.
    let called = dev
        .request(
            "tools/call",
            json!({"name": "take_notes", "_meta": {"skilld/mode": "Meeting"}}),
        )
        .await;
    assert_eq!(
        called["structuredContent"]["status"], "pending_approval",
        "{called}"
    );
    assert_eq!(
        recorded(&server).await,
        (2, 1),
        "lint_code ran and take_notes waits; no more"
    );
}

/// The runs a data directory's SQLite run log holds.
async fn runs_in(data: &Path) -> Vec<(String, String)> {
    let store = skilld::store::connect(&format!("sqlite://{}", data.join("skilld.db").display()))
        .await
        .unwrap();
    let page = store
        .runs
        .list_runs(skilld::store::RunFilter {
            tool: None,
            skill: None,
            status: None,
            session: None,
            limit: 100,
            cursor: None,
        })
        .await
        .unwrap();
    page.runs
        .into_iter()
        .map(|r| (r.tool, r.status.as_str().to_owned()))
        .collect()
}

#[tokio::test]
async fn mcp_over_stdio_takes_the_mode_from_its_flag_or_the_call() {
    let (dir, data) = (tempdir().unwrap(), tempdir().unwrap());
    skills(dir.path());
    let mut mcp = McpStdio::start(&["--mode", "Dev"], data.path(), dir.path());
    let listed = mcp.request("tools/list", json!({}));
    assert_eq!(tool_names(&listed), ["lint_code", "what_time"]);
    let called = mcp.request("tools/call", json!({"name": "take_notes"}));
    assert_refused_for_mode(&called, "Dev");
    let called = mcp.request(
        "tools/call",
        json!({"name": "lint_code", "_meta": {"skilld/mode": "Meeting"}}),
    );
    assert_refused_for_mode(&called, "Meeting");
    let called = mcp.request("tools/call", json!({"name": "lint_code"}));
    assert_eq!(text_of(&called), "lint_code\n", "{called}");
    mcp.end();
    assert_eq!(
        runs_in(data.path()).await,
        [("lint_code".to_owned(), "succeeded".to_owned())]
    );
}

#[tokio::test]
async fn skilld_run_refuses_a_tool_of_another_mode() {
    let (dir, data) = (tempdir().unwrap(), tempdir().unwrap());
    skills(dir.path());
    let run = |mode: &str| {
        skilld()
            .args(["run", "--mode", mode, "--skills"])
            .arg(format!("bundled={}", dir.path().display()))
            .arg("--data-dir")
            .arg(data.path())
            .args(["take_notes"])
            .env_remove("SKILLD_DATABASE_URL")
            .output()
            .unwrap()
    };
    let out = run("Dev");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("tool take_notes is not available in mode Dev") && stderr.contains("Meeting"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
    assert!(runs_in(data.path()).await.is_empty(), "nothing was recorded");

    let out = run("Meeting");
    assert_exit(&out, 0, "");
    assert_eq!(
        runs_in(data.path()).await,
        [("take_notes".to_owned(), "succeeded".to_owned())]
    );
}

/// `tools/list` is made once per catalog and mode and kept: each mode
/// still gets its own tools, case aside, and modes no tool names share one
/// kept list, so a caller cannot grow the cache by making modes up.
#[tokio::test]
async fn listed_tools_are_kept_per_mode_and_made_up_modes_share_one() {
    let dir = tempdir().unwrap();
    skills(dir.path());
    let server = TestServer::builder(options(vec![root(dir.path(), Trust::Bundled)]))
        .start()
        .await;
    let mut expected = vec![
        ("/mcp?mode=Dev", vec!["lint_code", "what_time"]),
        ("/mcp?mode=dev", vec!["lint_code", "what_time"]),
        ("/mcp", vec!["lint_code", "take_notes", "what_time"]),
        ("/mcp", vec!["lint_code", "take_notes", "what_time"]),
    ];
    for n in 0..20 {
        expected.push((
            if n % 2 == 0 {
                "/mcp?mode=Nope"
            } else {
                "/mcp?mode=Other"
            },
            vec!["what_time"],
        ));
    }
    for (path, tools) in expected {
        let mut session = McpHttp::open(&server.url(path)).await;
        let listed = session.request("tools/list", json!({})).await;
        assert_eq!(tool_names(&listed), tools, "{path}");
    }
    let kept = format!("{:?}", server.catalog.current().derived);
    assert_eq!(kept.matches("tools/list").count(), 3, "{kept}");
}
