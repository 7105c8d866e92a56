//! `SKILL.yaml` skills with a `process` backend, end to end over HTTP: the
//! tools the child declares are listed and called, approvals and the run
//! log work as for any tool, and a child that misbehaves (crashes, hangs,
//! writes garbage or too much) is killed and replaced, never the server.

use crate::common::{TestServer, options, root, tempdir};
use serde_json::{Value, json};
use skilld::invoke::RunSettings;
use skilld::skill::Trust;
use std::path::Path;
use std::time::{Duration, Instant};

/// A child that answers each request on a thread of its own, so answers
/// can overtake each other; its tools exercise every way a child can
/// behave, and misbehave.
const CHILD: &str = r#"
import json, os, sys, threading, time

TOOLS = [
    {"name": "echo", "description": "Answers its input.",
     "input_schema": {"type": "object", "properties": {"text": {"type": "string"}},
                      "required": ["text"], "additionalProperties": False}},
    {"name": "count", "description": "Counts its calls.", "input_schema": {"type": "object"}},
    {"name": "slow", "description": "Waits, then answers.",
     "input_schema": {"type": "object", "properties": {"secs": {"type": "number"}, "tag": {"type": "string"}}}},
    {"name": "whoami", "description": "Says who runs it.", "input_schema": {"type": "object"}},
    {"name": "fail", "description": "Reports a failure.", "input_schema": {"type": "object"}},
    {"name": "oops", "description": "Answers a JSON-RPC error.", "input_schema": {"type": "object"}},
    {"name": "crash", "description": "Exits.", "input_schema": {"type": "object"}},
    {"name": "hang", "description": "Never answers.", "input_schema": {"type": "object"}},
    {"name": "garbage", "description": "Writes a line that is not JSON-RPC.", "input_schema": {"type": "object"}},
    {"name": "huge", "description": "Writes a 2 MiB line.", "input_schema": {"type": "object"}},
    {"name": "flood", "description": "Floods stdout with broken JSON.", "input_schema": {"type": "object"}},
    {"name": "noisy", "description": "Writes 8 MiB to stderr, then answers.", "input_schema": {"type": "object"}},
]
CALLS = [0]
lock = threading.Lock()

def send(obj):
    with lock:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()

def execute(name, args):
    if name == "echo":
        return {"output": {"text": args["text"], "pid": os.getpid()}, "success": True}
    if name == "count":
        CALLS[0] += 1
        return {"output": "call %d" % CALLS[0], "success": True}
    if name == "slow":
        time.sleep(args.get("secs", 0))
        return {"output": args.get("tag", ""), "success": True}
    if name == "whoami":
        return {"output": {"uid": os.getuid(), "pid": os.getpid(), "tmp": os.environ.get("TMPDIR")}, "success": True}
    if name == "fail":
        return {"output": "it did not work\nsecond line", "success": False}
    if name == "oops":
        raise ValueError("no such thing")
    if name == "crash":
        os._exit(3)
    if name == "hang":
        time.sleep(3600)
    if name == "garbage":
        with lock:
            sys.stdout.write("hello, world\n")
            sys.stdout.flush()
        time.sleep(3600)
    if name == "huge":
        with lock:
            sys.stdout.write("x" * (2 * 1024 * 1024) + "\n")
            sys.stdout.flush()
        time.sleep(3600)
    if name == "flood":
        while True:
            sys.stdout.write('{"jsonrpc": "2.0", "id": \n')
    if name == "noisy":
        for _ in range(8 * 1024):
            sys.stderr.write("e" * 1023 + "\n")
        sys.stderr.flush()
        return {"output": "done", "success": True}

def handle(req):
    try:
        method, params = req["method"], req.get("params") or {}
        if method == "initialize":
            result = {"tools": TOOLS, "hooks": []}
        elif method == "tool/execute":
            result = execute(params["name"], params.get("input") or {})
        else:
            result = None
        send({"jsonrpc": "2.0", "id": req["id"], "result": result})
    except Exception as e:
        send({"jsonrpc": "2.0", "id": req["id"], "error": {"code": -32000, "message": str(e)}})

for line in sys.stdin:
    req = json.loads(line)
    if req.get("method") == "shutdown":
        send({"jsonrpc": "2.0", "id": req["id"], "result": None})
        break
    threading.Thread(target=handle, args=(req,), daemon=True).start()
"#;

/// Writes a process skill named `name` whose child is [`CHILD`].
fn process_skill(root: &Path, name: &str, extra: &str) {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("SKILL.yaml"),
        format!(
            "name: {name}\nversion: 1.0.0\ndescription: A process skill for tests.\ntypes: [tool]\n\
             permissions: [shell:exec]\nimplementation:\n  backend: process\n  entrypoint: child.py\n{extra}"
        ),
    )
    .unwrap();
    std::fs::write(dir.join("child.py"), CHILD).unwrap();
}

/// A server over one process skill, its calls allowed ahead of time.
async fn server_with(extra: &str, settings: RunSettings) -> (TestServer, tempfile::TempDir) {
    let skills = tempdir().unwrap();
    process_skill(skills.path(), "proc", extra);
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::Bundled)]))
        .settings(settings)
        .allowed()
        .start()
        .await;
    (server, skills)
}

async fn call(server: &TestServer, tool: &str, args: Value) -> Value {
    let (status, body) = server.invoke(tool, args).await;
    assert_eq!(status, 200, "{body}");
    body
}

#[tokio::test]
async fn a_process_skill_lists_its_tools_runs_them_in_one_child_and_records_them() {
    let (server, _skills) = server_with("read_only: true\n", RunSettings::default()).await;
    let tools = server.get_json("/tools").await;
    let echo = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "echo")
        .unwrap_or_else(|| panic!("no echo in {tools}"));
    assert_eq!(echo["parameters"]["required"], json!(["text"]), "{echo}");
    let openai = server.get_json("/tools?format=openai").await.to_string();
    assert!(
        openai.contains("\"echo\"") && openai.contains("Answers its input."),
        "{openai}"
    );
    let skill = server.get_json("/skills/proc").await;
    assert_eq!(skill["dialect"], "manifest", "{skill}");

    let first = call(&server, "echo", json!({"text": "hi"})).await;
    assert_eq!(first["success"], true, "{first}");
    assert_eq!(first["parsed"]["text"], "hi", "{first}");
    assert_eq!(first["exit_code"], Value::Null);
    // State lives in the one child: its calls are counted across requests.
    assert_eq!(call(&server, "count", json!({})).await["output"], "call 1");
    assert_eq!(call(&server, "count", json!({})).await["output"], "call 2");
    let again = call(&server, "echo", json!({"text": "again"})).await;
    assert_eq!(
        again["parsed"]["pid"], first["parsed"]["pid"],
        "the child was not kept"
    );

    let run = server
        .get_json(&format!("/runs/{}", first["run_id"].as_str().unwrap()))
        .await;
    assert_eq!(run["status"], "succeeded", "{run}");
    assert_eq!(run["tool"], "echo");
    assert_eq!(run["arguments"], json!({"text": "hi"}));
    assert!(
        run["argv"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a.as_str().unwrap().ends_with("child.py")),
        "{run}"
    );
    assert_eq!(run["result"]["parsed"]["text"], "hi", "{run}");
}

#[tokio::test]
async fn arguments_are_checked_against_the_declared_schema() {
    let (server, _skills) = server_with("", RunSettings::default()).await;
    let (status, problem) = server.invoke("echo", json!({"text": 5, "more": 1})).await;
    assert_eq!(status, 422, "{problem}");
    let text = problem.to_string();
    assert!(text.contains("text") && text.contains("more"), "{problem}");
    let (status, problem) = server.invoke("echo", json!({})).await;
    assert_eq!(status, 422, "{problem}");
}

#[tokio::test]
async fn a_failure_or_an_error_of_the_tool_is_a_failed_envelope() {
    let (server, _skills) = server_with("", RunSettings::default()).await;
    let failed = call(&server, "fail", json!({})).await;
    assert_eq!(failed["success"], false, "{failed}");
    assert_eq!(failed["error"], "it did not work");
    assert!(failed["output"].as_str().unwrap().contains("second line"));
    let oops = call(&server, "oops", json!({})).await;
    assert_eq!(oops["success"], false, "{oops}");
    assert!(
        oops["error"].as_str().unwrap().contains("no such thing"),
        "{oops}"
    );
    // Neither hurt the child.
    assert_eq!(call(&server, "count", json!({})).await["output"], "call 1");
}

#[tokio::test]
async fn concurrent_calls_share_the_child_and_each_gets_its_own_answer() {
    let (server, _skills) = server_with("", RunSettings::default()).await;
    let server = std::sync::Arc::new(server);
    let started = Instant::now();
    let calls: Vec<_> = [(0.9, "a"), (0.1, "b"), (0.5, "c")]
        .into_iter()
        .map(|(secs, tag)| {
            let server = server.clone();
            tokio::spawn(async move {
                (
                    tag,
                    call(&server, "slow", json!({"secs": secs, "tag": tag})).await,
                )
            })
        })
        .collect();
    for c in calls {
        let (tag, envelope) = c.await.unwrap();
        assert_eq!(envelope["output"], tag, "{envelope}");
    }
    // One child answered all three at once, not one after another.
    assert!(
        started.elapsed() < Duration::from_millis(1400),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_crashed_child_fails_its_call_and_the_next_call_starts_another() {
    let (server, _skills) = server_with("", RunSettings::default()).await;
    let before = call(&server, "whoami", json!({})).await;
    let crashed = call(&server, "crash", json!({})).await;
    assert_eq!(crashed["success"], false, "{crashed}");
    assert!(
        crashed["error"].as_str().unwrap().contains("exited with code 3"),
        "{crashed}"
    );
    let after = call(&server, "whoami", json!({})).await;
    assert_eq!(after["success"], true, "{after}");
    assert_ne!(after["parsed"]["pid"], before["parsed"]["pid"]);
}

#[tokio::test]
async fn a_hung_child_is_killed_at_the_timeout_and_replaced() {
    let (server, _skills) = server_with("timeout: 1\n", RunSettings::default()).await;
    let before = call(&server, "whoami", json!({})).await;
    let pid = before["parsed"]["pid"].as_i64().unwrap();
    let hung = call(&server, "hang", json!({})).await;
    assert_eq!(hung["success"], false, "{hung}");
    assert_eq!(hung["timed_out"], true, "{hung}");
    let run = server
        .get_json(&format!("/runs/{}", hung["run_id"].as_str().unwrap()))
        .await;
    assert_eq!(run["status"], "timed_out", "{run}");
    wait_gone(pid).await;
    let after = call(&server, "whoami", json!({})).await;
    assert_eq!(after["success"], true, "{after}");
}

#[tokio::test]
async fn a_line_that_is_not_json_rpc_or_too_long_kills_the_child_not_the_server() {
    let (server, _skills) = server_with("", RunSettings::default()).await;
    for (tool, says) in [
        ("garbage", "not a JSON-RPC 2.0 answer"),
        ("huge", "longer than 1048576 bytes"),
    ] {
        let pid = call(&server, "whoami", json!({})).await["parsed"]["pid"]
            .as_i64()
            .unwrap();
        let broken = call(&server, tool, json!({})).await;
        assert_eq!(broken["success"], false, "{broken}");
        assert!(
            broken["error"].as_str().unwrap().contains(says),
            "{tool}: {broken}"
        );
        wait_gone(pid).await;
    }
    let fine = call(&server, "echo", json!({"text": "still here"})).await;
    assert_eq!(fine["parsed"]["text"], "still here", "{fine}");
}

#[tokio::test]
async fn a_child_flooding_stderr_is_read_and_still_answers() {
    let (server, _skills) = server_with("", RunSettings::default()).await;
    let noisy = call(&server, "noisy", json!({})).await;
    assert_eq!(noisy["output"], "done", "{noisy}");
}

#[tokio::test]
async fn an_idle_child_is_stopped_and_the_next_call_starts_it_again() {
    let settings = RunSettings {
        backend_idle: Duration::from_secs(1),
        ..RunSettings::default()
    };
    let (server, _skills) = server_with("", settings).await;
    let pid = call(&server, "whoami", json!({})).await["parsed"]["pid"]
        .as_i64()
        .unwrap();
    wait_gone(pid).await;
    let again = call(&server, "whoami", json!({})).await;
    assert_eq!(again["success"], true, "{again}");
    assert_ne!(again["parsed"]["pid"].as_i64().unwrap(), pid);
}

#[tokio::test]
async fn the_child_runs_in_the_sandbox() {
    let (server, _skills) = server_with("", RunSettings::default()).await;
    let me = call(&server, "whoami", json!({})).await;
    if nix::unistd::geteuid().is_root() {
        assert_eq!(me["parsed"]["uid"], 65534, "{me}");
    }
    let tmp = me["parsed"]["tmp"].as_str().unwrap();
    assert!(tmp.contains("backend-proc-"), "{me}");
}

#[tokio::test]
async fn a_call_of_a_user_process_skill_waits_for_approval_like_any_other() {
    let skills = tempdir().unwrap();
    process_skill(skills.path(), "proc", "read_only: true\n");
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::User)]))
        .start()
        .await;
    let (status, held) = server.invoke("echo", json!({"text": "may I"})).await;
    assert_eq!(status, 202, "{held}");
    assert_eq!(held["status"], "pending_approval", "{held}");
    let request = server
        .get_json(&format!("/approvals/{}", held["approval_id"].as_str().unwrap()))
        .await;
    assert_eq!(request["permissions"], json!(["shell:exec"]), "{request}");
    let run = server.approve_once_and_wait(&held).await;
    assert_eq!(run["status"], "succeeded", "{run}");
    assert_eq!(run["result"]["parsed"]["text"], "may I", "{run}");
}

#[tokio::test]
async fn a_child_that_does_not_initialize_is_an_error_diagnostic() {
    let skills = tempdir().unwrap();
    let dir = skills.path().join("broken");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("SKILL.yaml"),
        "name: broken\nversion: 1.0.0\ndescription: Exits at once.\ntypes: [tool]\n\
         permissions: [shell:exec]\nimplementation:\n  backend: process\n  entrypoint: child.py\n",
    )
    .unwrap();
    std::fs::write(dir.join("child.py"), "import sys\nsys.exit(1)\n").unwrap();
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::Bundled)]))
        .start()
        .await;
    let diagnostics = server.get_json("/diagnostics").await;
    let found = diagnostics["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["skill"] == "broken")
        .unwrap_or_else(|| panic!("{diagnostics}"));
    assert_eq!(found["code"], "backend_failed", "{found}");
    assert_eq!(found["severity"], "error");
    assert_eq!(found["line"], 6, "{found}");
    assert_eq!(server.get_json("/skills/broken").await["status"], 404);
}

/// Waits (at most 10 s) until process `pid` is gone.
async fn wait_gone(pid: i64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Path::new(&format!("/proc/{pid}")).exists() {
        assert!(Instant::now() < deadline, "process {pid} is still there");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A child with both hooks: `before_tool_call` cancels, rewrites or
/// breaks the input by the name given; `after_tool_result` marks or
/// breaks the result.
const HOOK_CHILD: &str = r#"
import json, sys

TOOLS = [{"name": "greet", "description": "Greets.",
          "input_schema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}]

def hook(params):
    name = params["payload"]["input"].get("name")
    if params["phase"] == "before_tool_call":
        if name == "mallory":
            return {"cancel": "mallory may not be greeted"}
        if name == "shout":
            return {"payload": {"input": {"name": "SHOUT"}}}
        if name == "bad":
            return {"payload": {"input": {"name": 5}}}
        return {}
    if name == "checked":
        out = params["payload"]["result"]["output"]
        return {"payload": {"result": {"output": out + " (checked)"}}}
    if name == "boom":
        raise ValueError("the after hook broke")
    return {}

for line in sys.stdin:
    req = json.loads(line)
    method, params = req["method"], req.get("params") or {}
    try:
        if method == "initialize":
            result = {"tools": TOOLS, "hooks": ["before_tool_call", "after_tool_result"]}
        elif method == "tool/execute":
            result = {"output": "hello " + params["input"]["name"], "success": True}
        elif method == "hook/handle":
            result = hook(params)
        else:
            result = None
        reply = {"jsonrpc": "2.0", "id": req["id"], "result": result}
    except Exception as e:
        reply = {"jsonrpc": "2.0", "id": req["id"], "error": {"code": -32000, "message": str(e)}}
    print(json.dumps(reply), flush=True)
    if method == "shutdown":
        break
"#;

async fn hooked_server() -> (TestServer, tempfile::TempDir) {
    let skills = tempdir().unwrap();
    let dir = skills.path().join("hooked");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("SKILL.yaml"),
        "name: hooked\nversion: 1.0.0\ndescription: Greets, between hooks.\ntypes: [tool]\n\
         permissions: [shell:exec]\nimplementation:\n  backend: process\n  entrypoint: child.py\n",
    )
    .unwrap();
    std::fs::write(dir.join("child.py"), HOOK_CHILD).unwrap();
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::Bundled)]))
        .allowed()
        .start()
        .await;
    (server, skills)
}

#[tokio::test]
async fn a_before_hook_cancels_with_403_and_the_run_is_recorded_cancelled() {
    let (server, _skills) = hooked_server().await;
    let (status, problem) = server.invoke("greet", json!({"name": "mallory"})).await;
    assert_eq!(status, 403, "{problem}");
    assert_eq!(problem["code"], "hook_cancelled", "{problem}");
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("mallory may not be greeted"),
        "{problem}"
    );
    let runs = server.get_json("/runs?skill=hooked").await;
    let run = &runs["runs"][0];
    assert_eq!(run["status"], "cancelled", "{runs}");
    assert_eq!(run["result"]["hooks"][0]["effect"], "cancelled", "{run}");
    assert_eq!(run["result"]["hooks"][0]["phase"], "before_tool_call", "{run}");
}

#[tokio::test]
async fn hooks_change_the_input_and_the_result_and_say_so_on_the_run() {
    let (server, _skills) = hooked_server().await;
    let shouted = call(&server, "greet", json!({"name": "shout"})).await;
    assert_eq!(shouted["output"], "hello SHOUT", "{shouted}");
    assert_eq!(shouted["hooks"][0]["effect"], "replaced_input", "{shouted}");
    assert_eq!(shouted["hooks"][0]["detail"], json!({"name": "SHOUT"}));
    assert_eq!(shouted["hooks"][1]["effect"], "kept", "{shouted}");
    let checked = call(&server, "greet", json!({"name": "checked"})).await;
    assert_eq!(checked["output"], "hello checked (checked)", "{checked}");
    assert_eq!(checked["hooks"][1]["effect"], "replaced_result", "{checked}");
    let run = server
        .get_json(&format!("/runs/{}", checked["run_id"].as_str().unwrap()))
        .await;
    assert_eq!(run["result"]["hooks"], checked["hooks"], "{run}");
    // The run log keeps what the caller asked for; the hook's change is in
    // the envelope.
    assert_eq!(run["arguments"], json!({"name": "checked"}));
}

#[tokio::test]
async fn a_failing_hook_fails_the_call_clearly() {
    let (server, _skills) = hooked_server().await;
    let bad = call(&server, "greet", json!({"name": "bad"})).await;
    assert_eq!(bad["success"], false, "{bad}");
    let error = bad["error"].as_str().unwrap();
    assert!(
        error.contains("before_tool_call hook failed") && error.contains("not valid"),
        "{bad}"
    );
    assert_eq!(bad["hooks"][0]["effect"], "failed", "{bad}");
    let boom = call(&server, "greet", json!({"name": "boom"})).await;
    assert_eq!(boom["success"], false, "{boom}");
    assert!(
        boom["error"].as_str().unwrap().contains("the after hook broke"),
        "{boom}"
    );
    assert_eq!(
        boom["output"], "hello boom",
        "the result is kept for the record: {boom}"
    );
    let run = server
        .get_json(&format!("/runs/{}", boom["run_id"].as_str().unwrap()))
        .await;
    assert_eq!(run["status"], "failed", "{run}");
}

#[tokio::test]
async fn a_call_needing_an_undeclared_permission_is_refused_and_nothing_runs() {
    let skills = tempdir().unwrap();
    // Network access is fetching: without net:fetch, no call.
    process_skill(skills.path(), "online", "network: true\n");
    // A process backend is a program: without shell:exec it is not even
    // started, and its declared tools are refused.
    let quiet = skills.path().join("quiet");
    std::fs::create_dir_all(&quiet).unwrap();
    std::fs::write(
        quiet.join("SKILL.yaml"),
        "name: quiet\nversion: 1.0.0\ndescription: Declares no permission.\ntypes: [tool]\n\
         implementation:\n  backend: process\n  entrypoint: child.py\n\
         tools:\n  - name: quiet_ping\n    description: Pings.\n",
    )
    .unwrap();
    let marker = skills.path().join("started");
    std::fs::write(
        quiet.join("child.py"),
        format!("open({:?}, 'w').write('started')\n", marker.display().to_string()),
    )
    .unwrap();
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::Bundled)]))
        .allowed()
        .start()
        .await;
    let (status, problem) = server.invoke("count", json!({})).await;
    assert_eq!(status, 403, "{problem}");
    assert_eq!(problem["code"], "permission_not_declared", "{problem}");
    assert!(
        problem["detail"].as_str().unwrap().contains("net:fetch"),
        "{problem}"
    );
    let (status, problem) = server.invoke("quiet_ping", json!({})).await;
    assert_eq!(status, 403, "{problem}");
    assert!(
        problem["detail"].as_str().unwrap().contains("shell:exec"),
        "{problem}"
    );
    assert!(!marker.exists(), "the child ran");
    let runs = server.get_json("/runs").await;
    assert_eq!(runs["runs"], json!([]), "{runs}");
    let diagnostics = server.get_json("/diagnostics").await.to_string();
    assert!(
        diagnostics.contains("the process backend is not started"),
        "{diagnostics}"
    );
}

/// Loads `files` (name → text) as skill `name`, without a launcher.
fn load_manifest(name: &str, files: &[(&str, &str)]) -> (tempfile::TempDir, skilld::skill::Loaded) {
    use skilld::skill::{LoadOptions, PathCache, Runtimes, load_skill};
    let root = tempdir().unwrap();
    let dir = root.path().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    for (file, text) in files {
        let path = dir.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let loaded = load_skill(
        &dir,
        &LoadOptions {
            source: "test",
            trust: Trust::User,
            max_timeout_secs: 600,
            runtimes: &Runtimes::default(),
            installed: false,
            path: &PathCache::new(std::env::var_os("PATH")),
            launcher: None,
            rules: &Default::default(),
        },
    );
    (root, loaded)
}

/// Each diagnostic as `code@line:column`.
fn found(l: &skilld::skill::Loaded) -> Vec<String> {
    l.diagnostics
        .iter()
        .map(|d| format!("{}@{}:{}", d.code, d.line.unwrap_or(0), d.column.unwrap_or(0)))
        .collect()
}

#[test]
fn a_manifest_is_validated_with_positions() {
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "empty",
            "{}\n",
            &[
                "missing_field@1:1",
                "missing_field@1:1",
                "missing_field@1:1",
                "missing_field@1:1",
            ],
        ),
        ("yaml", "name: yaml\nversion: [1\n", &["invalid_yaml@3:1"]),
        (
            "fields",
            "name: other\nversion: one\ndescription: Bad fields.\ntypes: [tool, gadget]\nshiny: true\n\
             implementation: {backend: plugin, entrypoint: plugin.so}\n",
            &[
                "unknown_field@5:1",
                "name_mismatch@1:1",
                "invalid_version@2:1",
                "invalid_field@4:1",
                "unsupported_backend@6:1",
            ],
        ),
        (
            "entry",
            "name: entry\nversion: 1.0.0\ndescription: Missing entrypoint.\ntypes: [tool]\n\
             implementation:\n  backend: process\n  entrypoint: ../main.py\n",
            &["program_outside_skill@5:1"],
        ),
        (
            "tools",
            "name: tools\nversion: 1.0.0\ndescription: Bad tools.\ntypes: [prompt]\ntools:\n\
             \x20 - name: Bad-Name\n  - name: stringy\n    input_schema: {type: string}\n\
             \x20 - name: twice\n  - name: twice\n",
            &[
                "invalid_tool_name@6:11",
                "invalid_parameter@7:11",
                "duplicate_tool@9:11",
                "missing_field@4:1",
            ],
        ),
    ];
    for (name, text, want) in cases {
        let (_root, loaded) = load_manifest(name, &[("SKILL.yaml", text)]);
        assert!(loaded.skill.is_none(), "{name} loaded");
        assert_eq!(&found(&loaded), want, "{name}: {:#?}", loaded.diagnostics);
        assert!(
            loaded.diagnostics.iter().all(|d| d.path.ends_with("SKILL.yaml")),
            "{name}: {:#?}",
            loaded.diagnostics
        );
    }
}

#[test]
fn a_prompt_manifest_serves_its_prompt_and_context_within_budget() {
    let manifest = "name: guide\nversion: 0.1.0\ndescription: A guide.\ntypes: [prompt]\n\
                    prompt:\n  system_prompt_file: prompts/system.md\n  context_files: [notes/a.md, notes/b.md]\n\
                    \x20 max_context_tokens: 40\n";
    let (_root, loaded) = load_manifest(
        "guide",
        &[
            ("SKILL.yaml", manifest),
            ("prompts/system.md", "You are a careful guide.\n"),
            ("notes/a.md", "Short note.\n"),
            ("notes/b.md", &"long ".repeat(100)),
            (
                "SKILL.md",
                "---\nname: guide\ndescription: Not read.\n---\nIgnored body.\n",
            ),
        ],
    );
    let skill = loaded
        .skill
        .clone()
        .unwrap_or_else(|| panic!("{:#?}", loaded.diagnostics));
    assert_eq!(
        skill.dialect,
        skilld::skill::Dialect::Manifest,
        "SKILL.yaml decides"
    );
    assert_eq!(skill.types, ["prompt"]);
    assert!(skill.tools.is_empty());
    assert!(
        skill.instructions.starts_with("You are a careful guide."),
        "{}",
        skill.instructions
    );
    assert!(
        skill.instructions.contains("## notes/a.md\n\nShort note."),
        "{}",
        skill.instructions
    );
    assert!(
        !skill.instructions.contains("long long"),
        "over budget: {}",
        skill.instructions
    );
    assert_eq!(
        found(&loaded),
        ["context_over_budget@5:1"],
        "{:#?}",
        loaded.diagnostics
    );
}

#[test]
fn dependencies_are_checked_across_skills() {
    let skills = tempdir().unwrap();
    let prompt = |name: &str, deps: &str| {
        let dir = skills.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("SKILL.yaml"),
            format!("name: {name}\nversion: 1.0.0\ndescription: Guidance.\ntypes: [prompt]\ndependencies: {deps}\n"),
        )
        .unwrap();
    };
    prompt("base", "[]");
    prompt("uses-base", "[base]");
    prompt("uses-nothing-there", "[nowhere]");
    prompt("maybe", "[{name: nowhere, optional: true}]");
    prompt("uses-broken", "[{name: uses-nothing-there, version: 1.0.0}]");
    let catalog = skilld::catalog::Catalog::build(&options(vec![root(skills.path(), Trust::User)]), None);
    let loaded: Vec<&str> = catalog.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        loaded,
        ["base", "maybe", "uses-base"],
        "{:#?}",
        catalog.diagnostics
    );
    let said: Vec<String> = catalog
        .diagnostics
        .iter()
        .map(|d| format!("{} {} {:?}", d.skill.as_deref().unwrap_or(""), d.code, d.severity))
        .collect();
    for want in [
        "uses-nothing-there missing_dependency Error",
        "uses-broken missing_dependency Error",
        "maybe missing_dependency Warning",
    ] {
        assert!(said.iter().any(|s| s == want), "{want} not in {said:#?}");
    }
}
