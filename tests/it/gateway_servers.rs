//! The registries' own MCP servers fronted by skilld, through the real
//! pipeline (issue 27): `server-everything` and `server-filesystem` from
//! npm and `mcp-server-time` from PyPI, started on stdio in skilld's
//! sandbox from the kit `tests/mcp-upstreams/kit.sh` builds.
//! - each is listed (in `GET /tools` and every export format), called,
//!   runs as the sandbox's user, and survives a SIGKILL: the next call
//!   after the backoff starts it again;
//! - filesystem's `write_file` is held: approved, the file is written;
//!   denied, nothing is; and approved by a person clicking in the inbox.
//!   Serving `/`, it still cannot read skilld's data directory;
//! - everything's long-running tool times out or is cancelled (either
//!   way its process group is gone, and the next call starts it again)
//!   and streams its progress; its structured content is kept;
//! - served everywhere: `/mcp`, the typed tool server and `skilld mcp` on
//!   stdio.

use crate::common::{
    Api, Area, Gate, area, eventually, kit, manifest, mcp_exchange, moved_skills, tempdir, write_file,
};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn package(kit: &Path, name: &str) -> PathBuf {
    kit.join("node_modules/@modelcontextprotocol")
        .join(name)
        .join("dist/index.js")
}

/// server-everything as skill `everything`. The area's path after
/// `stdio`, which the server ignores, makes its command line this test's
/// own, so that /proc finds this test's server among the others'.
fn everything(kit: &Path, a: &Area, extra: &str) {
    let implementation = format!(
        "  command: [/usr/bin/node, {}, stdio, {}]\n",
        package(kit, "server-everything").display(),
        a.dir.path().display()
    );
    write_file(
        &a.dir.path().join("skills/everything/SKILL.yaml"),
        &manifest("everything", &implementation, extra),
    );
}

/// server-filesystem as skill `filesystem`, serving `files` (under the
/// area's logs, which the gate lets the sandbox write).
fn filesystem(kit: &Path, a: &Area, files: &Path) {
    let implementation = format!(
        "  command: [/usr/bin/node, {}, {}]\n",
        package(kit, "server-filesystem").display(),
        files.display()
    );
    let text =
        manifest("filesystem", &implementation, "").replace("[shell:exec]", "[shell:exec, file:write]");
    write_file(&a.dir.path().join("skills/filesystem/SKILL.yaml"), &text);
}

/// mcp-server-time as skill `time`; `-X` marks its command line with the
/// area (Python keeps unknown `-X` options and ignores them).
fn time(kit: &Path, a: &Area, extra: &str) {
    let implementation = format!(
        "  command: [{}, -X, 'mark={}', -m, mcp_server_time]\n",
        kit.join("venv/bin/python").display(),
        a.dir.path().display()
    );
    write_file(
        &a.dir.path().join("skills/time/SKILL.yaml"),
        &manifest("time", &implementation, extra),
    );
}

/// A directory the filesystem server (the sandbox's user) may write.
fn files_dir(a: &Area) -> PathBuf {
    let files = a.dir.path().join("logs/files");
    std::fs::create_dir_all(&files).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&files, std::fs::Permissions::from_mode(0o777)).unwrap();
    files
}

async fn gate(kit: &Path, a: &Area) -> Gate {
    Gate::start(kit, moved_skills(a), a.dir.path()).await
}

/// The processes whose command line holds `needle`.
fn processes(needle: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(raw) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let line = String::from_utf8_lossy(&raw).replace('\0', " ");
        if pid != std::process::id() as i32 && line.contains(needle) {
            found.push(pid);
        }
    }
    found
}

/// The real uid of a process, while it lives.
fn uid_of(pid: i32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Calls `tool` until it succeeds (a restart waits out its backoff).
async fn until_success(gate: &Gate, tool: &str, arguments: Value) -> Value {
    let mut last = json!(null);
    for _ in 0..40 {
        let (_, envelope) = gate.invoke(tool, arguments.clone()).await;
        if envelope["success"] == true {
            return envelope;
        }
        last = envelope;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!("{tool} never succeeded again: {last}");
}

/// The upstream's process, SIGKILLed, is started again by a later call;
/// `needle` finds it in /proc.
async fn survives_a_kill(gate: &Gate, needle: &str, tool: &str, arguments: Value) {
    let before = processes(needle);
    assert!(!before.is_empty(), "no process has {needle} in its command line");
    if nix::unistd::geteuid().is_root() {
        for pid in &before {
            assert_ne!(uid_of(*pid), Some(0), "{pid} runs as the sandbox's user");
        }
    }
    for pid in &before {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    eventually("the killed server is gone", || {
        processes(needle).iter().all(|p| !before.contains(p))
    })
    .await;
    until_success(gate, tool, arguments).await;
    let after = processes(needle);
    assert!(
        !after.is_empty() && after.iter().all(|p| !before.contains(p)),
        "a new server: {before:?} then {after:?}"
    );
}

/// A tool as `GET /tools` lists it.
async fn listed(gate: &Gate, name: &str) -> Value {
    let tools = gate.server.get_json("/tools").await;
    tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("{name} is not in GET /tools: {tools}"))
}

/// `tool` is in every export format, with `property` in its schema.
async fn exported_everywhere(gate: &Gate, tool: &str, property: &str) {
    let native = listed(gate, tool).await;
    assert!(
        native["parameters"]["properties"].get(property).is_some(),
        "{native}"
    );
    for format in ["openai", "openai-responses", "anthropic", "gemini", "mcp"] {
        let body = gate.server.get_json(&format!("/tools?format={format}")).await;
        let list = body["tools"]
            .as_array()
            .or(body["function_declarations"].as_array())
            .unwrap_or_else(|| panic!("{format}: {body}"));
        let entry = list
            .iter()
            .map(|t| if format == "openai" { &t["function"] } else { t })
            .find(|t| t["name"] == tool)
            .unwrap_or_else(|| panic!("{tool} is not exported as {format}: {body}"));
        let schema = [
            "parameters",
            "input_schema",
            "inputSchema",
            "parameters_json_schema",
        ]
        .iter()
        .find_map(|k| entry.get(*k).filter(|s| !s.is_null()))
        .unwrap_or_else(|| panic!("{format}: {entry}"));
        assert!(schema["properties"].get(property).is_some(), "{format}: {entry}");
    }
}

#[tokio::test]
async fn everything_is_listed_everywhere_called_and_restarted_after_a_kill() {
    let Some(kit) = kit() else { return };
    let a = area();
    everything(&kit, &a, "");
    let gate = gate(&kit, &a).await;
    let tools = gate.tools("everything");
    for name in ["echo", "get_sum", "trigger_long_running_operation"] {
        assert!(
            tools.contains(&name.to_owned()),
            "{tools:?} {:?}",
            gate.server.catalog.current().diagnostics
        );
    }
    let echo = listed(&gate, "echo").await;
    assert_eq!(echo["read_only"], true, "readOnlyHint: {echo}");
    assert_eq!(echo["parameters"]["properties"]["message"]["type"], "string");
    exported_everywhere(&gate, "echo", "message").await;
    exported_everywhere(&gate, "get_sum", "a").await;

    // Read-only: a user skill's first run asks once, then it runs at once.
    let run = gate.approved("echo", json!({"message": "hello"})).await;
    assert_eq!(run["status"], "succeeded", "{run}");
    assert_eq!(run["result"]["output"], "Echo: hello", "{run}");
    let (status, envelope) = gate.invoke("get_sum", json!({"a": 2, "b": 40})).await;
    assert_eq!(status, 200, "{envelope}");
    assert!(envelope["output"].as_str().unwrap().contains("42"), "{envelope}");

    // Its structured content is the envelope's parsed value, as its
    // output schema (listed with the tool) says.
    let (_, envelope) = gate
        .invoke("get_structured_content", json!({"location": "Chicago"}))
        .await;
    assert!(envelope["parsed"]["temperature"].is_number(), "{envelope}");
    let weather = listed(&gate, "get_structured_content").await;
    assert_eq!(
        weather["output_schema"]["required"],
        json!(["temperature", "conditions", "humidity"]),
        "{weather}"
    );

    // Its environment was cleared: none of skilld's own reaches it.
    let (_, envelope) = gate.invoke("get_env", json!({})).await;
    let seen = envelope["output"].as_str().unwrap();
    assert!(seen.contains("PATH"), "{envelope}");
    assert!(!seen.contains("SKILLD_"), "{seen}");

    let mark = a.dir.path().display().to_string();
    survives_a_kill(&gate, &mark, "echo", json!({"message": "back"})).await;
}

#[tokio::test]
async fn everythings_long_operation_times_out_its_group_goes_and_it_starts_again() {
    let Some(kit) = kit() else { return };
    let a = area();
    everything(&kit, &a, "timeout: 1\n");
    let gate = gate(&kit, &a).await;
    gate.server.allow_every_tool().await;
    let mark = a.dir.path().display().to_string();
    let first = processes(&mark);
    assert!(!first.is_empty(), "the server runs once listed");

    let started = std::time::Instant::now();
    let (status, envelope) = gate
        .invoke(
            "trigger_long_running_operation",
            json!({"duration": 30, "steps": 30}),
        )
        .await;
    assert_eq!(status, 200, "{envelope}");
    assert_eq!(envelope["timed_out"], true, "{envelope}");
    assert!(started.elapsed() < Duration::from_secs(10));
    // Stopped: its whole group, not only the call.
    eventually("the server's processes are gone after the timeout", || {
        processes(&mark).is_empty()
    })
    .await;

    let envelope = until_success(&gate, "echo", json!({"message": "again"})).await;
    assert_eq!(envelope["output"], "Echo: again");
    let now = processes(&mark);
    assert!(
        !now.is_empty() && now.iter().all(|p| !first.contains(p)),
        "started again: {first:?} then {now:?}"
    );
}

#[tokio::test]
async fn everythings_progress_reaches_the_runs_event_stream() {
    let Some(kit) = kit() else { return };
    let a = area();
    everything(&kit, &a, "");
    let gate = gate(&kit, &a).await;
    gate.server.allow_every_tool().await;
    let res = reqwest::Client::new()
        .post(gate.server.url("/tools/trigger_long_running_operation/invoke"))
        .header("Accept", "text/event-stream")
        .json(&json!({"arguments": {"duration": 1, "steps": 4}}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let text = res.text().await.unwrap();
    let progress: Vec<Value> = events(&text, "progress");
    assert!(progress.len() >= 2, "{text}");
    let result = events(&text, "result");
    assert_eq!(result.len(), 1, "{text}");
    assert!(
        result[0].to_string().contains("Long running operation completed"),
        "{text}"
    );
}

/// The data of each `event` of an SSE stream.
fn events(text: &str, event: &str) -> Vec<Value> {
    text.split("\n\n")
        .filter(|block| block.lines().any(|l| l == format!("event: {event}")))
        .filter_map(|block| {
            let data: String = block
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim)
                .collect();
            serde_json::from_str(&data).ok()
        })
        .collect()
}

#[tokio::test]
async fn filesystem_reads_and_its_writes_are_held_then_done_or_not() {
    let Some(kit) = kit() else { return };
    let a = area();
    let files = files_dir(&a);
    std::fs::write(files.join("notes.txt"), "written by the test\n").unwrap();
    filesystem(&kit, &a, &files);
    let gate = gate(&kit, &a).await;
    let tools = gate.tools("filesystem");
    for name in ["list_directory", "read_text_file", "write_file"] {
        assert!(
            tools.contains(&name.to_owned()),
            "{tools:?} {:?}",
            gate.server.catalog.current().diagnostics
        );
    }
    let write = listed(&gate, "write_file").await;
    assert_eq!(
        (&write["read_only"], &write["requires_approval"]),
        (&json!(false), &json!("always")),
        "destructiveHint: {write}"
    );
    exported_everywhere(&gate, "read_text_file", "path").await;
    exported_everywhere(&gate, "write_file", "content").await;

    let notes = files.join("notes.txt").display().to_string();
    let run = gate.approved("read_text_file", json!({"path": notes})).await;
    assert_eq!(run["result"]["output"], "written by the test\n", "{run}");
    let dir = files.display().to_string();
    let (status, envelope) = gate.invoke("list_directory", json!({"path": dir})).await;
    assert_eq!(status, 200, "{envelope}");
    assert!(
        envelope["output"].as_str().unwrap().contains("[FILE] notes.txt"),
        "{envelope}"
    );

    // Denied, nothing is written; approved, the server writes it.
    let denied = files.join("denied.txt");
    let (status, held) = gate
        .invoke(
            "write_file",
            json!({"path": denied.display().to_string(), "content": "no"}),
        )
        .await;
    assert_eq!(status, 202, "{held}");
    gate.decide(&held, "deny", "once").await;
    let run = gate
        .server
        .get_json(&format!("/runs/{}?wait=10", held["run_id"].as_str().unwrap()))
        .await;
    assert_eq!(run["status"], "denied", "{run}");
    let approved = files.join("approved.txt");
    let run = gate
        .approved(
            "write_file",
            json!({"path": approved.display().to_string(), "content": "yes, written"}),
        )
        .await;
    assert_eq!(run["status"], "succeeded", "{run}");
    assert_eq!(std::fs::read_to_string(&approved).unwrap(), "yes, written");
    assert!(!denied.exists(), "a denied write_file wrote nothing");

    survives_a_kill(&gate, &dir, "list_directory", json!({"path": dir})).await;
}

#[tokio::test]
async fn time_is_listed_everywhere_called_and_restarted_after_a_kill() {
    let Some(kit) = kit() else { return };
    let a = area();
    time(&kit, &a, "");
    let gate = gate(&kit, &a).await;
    assert_eq!(
        gate.tools("time"),
        ["convert_time", "get_current_time"],
        "{:?}",
        gate.server.catalog.current().diagnostics
    );
    exported_everywhere(&gate, "get_current_time", "timezone").await;
    exported_everywhere(&gate, "convert_time", "source_timezone").await;
    let run = gate
        .approved("get_current_time", json!({"timezone": "Europe/Paris"}))
        .await;
    let answer: Value = serde_json::from_str(run["result"]["output"].as_str().unwrap()).unwrap();
    assert_eq!(answer["timezone"], "Europe/Paris", "{run}");
    let mark = format!("mark={}", a.dir.path().display());
    survives_a_kill(&gate, &mark, "get_current_time", json!({"timezone": "UTC"})).await;
}

/// mcp-server-time's tools on `/mcp` (2026-07-28, stateless): listed,
/// and called after an operator's standing allow, answering the server's
/// own content.
#[tokio::test]
async fn time_is_served_on_mcp() {
    let Some(kit) = kit() else { return };
    let a = area();
    time(&kit, &a, "");
    let gate = gate(&kit, &a).await;
    gate.server.allow_every_tool().await;
    let (_, messages) = mcp_exchange(&gate, "tools/list", json!({})).await;
    let tools = messages.last().unwrap()["result"]["tools"].clone();
    let listed = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "get_current_time")
        .unwrap_or_else(|| panic!("{tools}"));
    assert_eq!(listed["annotations"]["readOnlyHint"], true, "{listed}");
    assert_eq!(listed["inputSchema"]["properties"]["timezone"]["type"], "string");
    let (status, messages) = mcp_exchange(
        &gate,
        "tools/call",
        json!({"name": "get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}),
    )
    .await;
    assert_eq!(status, 200, "{messages:?}");
    let result = &messages.last().unwrap()["result"];
    assert_eq!(result["isError"], false, "{result}");
    let text = result["content"][0]["text"].as_str().unwrap();
    let answer: Value = serde_json::from_str(text).unwrap();
    assert_eq!(answer["timezone"], "Asia/Tokyo", "{result}");
}

/// The typed tool server: an operation for the server's tool, called
/// with its bare arguments.
#[tokio::test]
async fn time_is_served_on_the_typed_tool_server() {
    let Some(kit) = kit() else { return };
    let a = area();
    time(&kit, &a, "");
    let gate = gate(&kit, &a).await;
    gate.server.allow_every_tool().await;
    let doc = gate.server.get_json("/tools/openapi.json").await;
    let op = &doc["paths"]["/tools/convert_time/call"]["post"];
    assert_eq!(op["operationId"], "convert_time", "{doc}");
    // The server's own schema, beside the NUL check every call gets.
    let schema = &op["requestBody"]["content"]["application/json"]["schema"]["allOf"][0];
    assert_eq!(
        schema["required"],
        json!(["source_timezone", "time", "target_timezone"]),
        "{op}"
    );
    let res = Api::of(&gate.server)
        .req(reqwest::Method::POST, "/tools/convert_time/call")
        .json(&json!({"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Kolkata"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let envelope: Value = res.json().await.unwrap();
    let answer: Value = serde_json::from_str(envelope["output"].as_str().unwrap()).unwrap();
    assert_eq!(
        answer["target"]["datetime"].as_str().map(|t| &t[11..16]),
        Some("17:30"),
        "{envelope}"
    );
}

/// `skilld mcp`, as a desktop client starts it, speaking JSON-RPC lines.
struct StdioMcp {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    next: u64,
    _data: tempfile::TempDir,
}

impl StdioMcp {
    fn start(kit: &Path, skills: &str, area: &Path) -> Self {
        use tokio::io::AsyncBufReadExt;
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
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_skilld"))
            .args(["mcp", "--no-watch", "--skills", skills, "--config"])
            .arg(&config)
            .arg("--data-dir")
            .arg(data.path())
            .arg("--workspace")
            .arg(area)
            .env("SKILLD_LOG", "warn")
            .env_remove("SKILLD_DATABASE_URL")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        Self {
            stdin: child.stdin.take().unwrap(),
            stdout: tokio::io::BufReader::new(child.stdout.take().unwrap()).lines(),
            child,
            next: 0,
            _data: data,
        }
    }

    async fn send(&mut self, message: Value) {
        use tokio::io::AsyncWriteExt;
        let line = format!("{message}\n");
        self.stdin.write_all(line.as_bytes()).await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    /// Sends a request; its answer, past any notification.
    async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        loop {
            let line = tokio::time::timeout(Duration::from_secs(60), self.stdout.next_line()).await;
            let Ok(Ok(Some(line))) = line else {
                panic!("skilld mcp did not answer {method}: {line:?}");
            };
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                return message;
            }
        }
    }
}

impl Drop for StdioMcp {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// `skilld mcp` on stdio fronts the server too: an operator's read-only
/// bundled skill runs without a person.
#[tokio::test]
async fn time_is_served_by_skilld_mcp_on_stdio() {
    let Some(kit) = kit() else { return };
    let a = area();
    time(&kit, &a, "read_only: true\n");
    let skills = moved_skills(&a);
    let mut mcp = StdioMcp::start(
        &kit,
        &format!("bundled={}", skills.path().display()),
        a.dir.path(),
    );
    let init = mcp
        .request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "gateway-servers-test", "version": "1"}}),
        )
        .await;
    assert!(init["result"]["capabilities"]["tools"].is_object(), "{init}");
    mcp.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    let tools = mcp.request("tools/list", json!({})).await;
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{tools}"))
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"get_current_time") && names.contains(&"convert_time"),
        "{names:?}"
    );
    let called = mcp
        .request(
            "tools/call",
            json!({"name": "get_current_time", "arguments": {"timezone": "America/Sao_Paulo"}}),
        )
        .await;
    let result = &called["result"];
    assert_eq!(result["isError"], false, "{called}");
    let answer: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(answer["timezone"], "America/Sao_Paulo", "{called}");
}

/// A person approves filesystem's held `write_file` by clicking in the
/// inbox (`tests/browser/inbox.mjs` in headless chromium): the run
/// succeeds and the server wrote the file, which it had not before.
#[tokio::test]
async fn a_person_approves_filesystems_write_in_the_browser() {
    let Some(kit) = kit() else { return };
    let Some(harness) = crate::common::browser_harness() else {
        return;
    };
    let a = area();
    let files = files_dir(&a);
    filesystem(&kit, &a, &files);
    let gate = gate(&kit, &a).await;
    let target = files.join("from-the-inbox.txt");
    let (status, held) = gate
        .invoke(
            "write_file",
            json!({"path": target.display().to_string(), "content": "approved by a click"}),
        )
        .await;
    assert_eq!(status, 202, "{held}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!target.exists(), "nothing is written before a person says yes");

    let env = [
        ("INBOX_APPROVAL_ID", held["approval_id"].as_str().unwrap()),
        ("INBOX_ACTION", "Approve once"),
        ("INBOX_STATUS", "succeeded"),
        ("INBOX_OUTPUT", "Successfully wrote to"),
    ];
    let page = crate::common::Script::start(
        &harness,
        "inbox.mjs",
        "gateway-filesystem-approve.png",
        &gate.server,
        None,
        &env,
    );
    let seen = page.done().await;
    assert_eq!(seen["run_id"], held["run_id"], "{seen}");
    assert_eq!(seen["status"], "succeeded", "{seen}");
    // The arguments read as indented JSON, not as escaped newlines.
    let shown = seen["arguments"].as_str().unwrap_or_default();
    assert!(shown.contains("\n  \"") && !shown.contains("\\u000a"), "{seen}");
    assert!(
        seen["permission_details"]
            .as_array()
            .unwrap()
            .contains(&json!("file:write")),
        "the card shows what the skill may do: {seen}"
    );
    let run = gate
        .server
        .get_json(&format!("/runs/{}?wait=10", held["run_id"].as_str().unwrap()))
        .await;
    assert_eq!(run["status"], "succeeded", "{run}");
    assert_eq!(run["approval_id"], held["approval_id"], "{run}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "approved by a click");
}

/// A run cancelled while everything's long operation goes on: the run
/// ends cancelled, the server's processes are gone, and the next call
/// starts it again.
#[tokio::test]
async fn everythings_long_operation_cancelled_stops_its_group() {
    let Some(kit) = kit() else { return };
    let a = area();
    everything(&kit, &a, "timeout: 60\n");
    let gate = gate(&kit, &a).await;
    gate.server.allow_every_tool().await;
    let mark = a.dir.path().display().to_string();
    let res = Api::of(&gate.server)
        .req(
            reqwest::Method::POST,
            "/tools/trigger_long_running_operation/invoke",
        )
        .header("Prefer", "respond-async")
        .json(&json!({"arguments": {"duration": 60, "steps": 60}}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 202);
    let accepted: Value = res.json().await.unwrap();
    let id = accepted["run_id"].as_str().unwrap().to_owned();
    for _ in 0..100 {
        let run = gate.server.get_json(&format!("/runs/{id}")).await;
        if run["status"] == "running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Let the call reach the server.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let res = Api::of(&gate.server)
        .req(reqwest::Method::POST, &format!("/runs/{id}/cancel"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 202);
    let run = gate.server.get_json(&format!("/runs/{id}?wait=20")).await;
    assert_eq!(run["status"], "cancelled", "{run}");
    eventually("the server's processes are gone after the cancel", || {
        processes(&mark).is_empty()
    })
    .await;
    let envelope = until_success(&gate, "echo", json!({"message": "after"})).await;
    assert_eq!(envelope["output"], "Echo: after");
}

/// server-filesystem told to serve `/` still reads only what the sandbox
/// lets it: a file of the area, not skilld's data directory, even when
/// the file's own mode would let anyone read it.
#[tokio::test]
async fn filesystem_serving_the_root_cannot_read_skillds_data() {
    let Some(kit) = kit() else { return };
    let a = area();
    filesystem(&kit, &a, Path::new("/"));
    let gate = gate(&kit, &a).await;
    gate.server.allow_every_tool().await;
    let data = gate.server.data_dir().to_path_buf();
    let secret = data.join("local-secret");
    std::fs::write(&secret, "the server's secret").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();

    let readable = a.dir.path().join("description.txt").display().to_string();
    let (_, envelope) = gate.invoke("read_text_file", json!({"path": readable})).await;
    assert_eq!(envelope["output"], "Answers its text.", "{envelope}");
    let (_, envelope) = gate
        .invoke("read_text_file", json!({"path": secret.display().to_string()}))
        .await;
    assert_eq!(envelope["success"], false, "{envelope}");
    assert!(
        !envelope.to_string().contains("the server's secret"),
        "{envelope}"
    );
}
