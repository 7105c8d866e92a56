//! `SKILL.yaml` skills with a `starlark` backend, end to end over HTTP: the
//! tools a script registers are listed and called, the SDK functions check
//! the skill's permissions and stay inside the skill's directories, a
//! script that runs away or eats memory is stopped (the server keeps
//! answering), and a script that does not load is a diagnostic.

use crate::common::{
    TestServer, call, copy_tree, corpus_dir, fails_with, marks_dir, options, root, server_over, star_skill,
    tempdir,
};
use serde_json::{Value, json};
use skilld::skill::Trust;
use std::path::Path;
use std::time::{Duration, Instant};

const STAR: &str = r#"
def info(args):
    return {"skill": "star", "n": args.get("n", 0) + 1, "tags": ["a", "b"]}

def hello(args):
    return exec("echo", ["hi"])

def nothing(args):
    return None

def codec(args):
    return json_decode(json_encode({"a": [1, 2], "b": None}))

def whoami(args):
    uid = exec("id", ["-u"])["output"].strip()
    return {"uid": int(uid), "tmp": exec("printenv", args = ("TMPDIR",))["output"].strip()}

def nap(args):
    return exec("sleep", ["5"], timeout = 0.5)

def broken(args):
    fail("it broke")

register_tool("info", "Answers a dict.", {"type": "object", "properties": {"n": {"type": "integer"}}}, info)
register_tool(
    name = "hello",
    description = "Says hi through echo.",
    parameters = {"type": "object"},
    handler = hello,
)
register_tool("nothing", "Answers nothing.", {"type": "object"}, nothing)
register_tool("codec", "Round-trips JSON.", {"type": "object"}, codec)
register_tool("whoami", "Says who runs its programs.", {"type": "object"}, whoami)
register_tool("nap", "Sleeps past its timeout.", {"type": "object"}, nap)
register_tool("broken", "Fails.", {"type": "object"}, broken)
"#;

#[tokio::test]
async fn a_starlark_skill_lists_its_tools_runs_them_and_records_them() {
    let (server, _skills) = server_over(|root| {
        copy_tree(&corpus_dir().join("valid/k8s"), &root.join("k8s"));
        star_skill(root, "star", "permissions: [shell:exec]\n", STAR);
    })
    .await;
    let tools = server.get_json("/tools").await;
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for tool in [
        "kubectl_get",
        "label_selector",
        "info",
        "hello",
        "nothing",
        "codec",
    ] {
        assert!(names.contains(&tool), "{tool} not in {tools}");
    }
    let skill = server.get_json("/skills/k8s").await;
    assert_eq!(skill["dialect"], "manifest", "{skill}");

    let labels = call(&server, "label_selector", json!({"labels": {"b": "2", "a": "1"}})).await;
    assert_eq!(labels["success"], true, "{labels}");
    assert_eq!(labels["output"], "a=1,b=2", "{labels}");
    let pods = call(&server, "kubectl_get", json!({"resource": "pods"})).await;
    assert_eq!(pods["output"], "kubectl get pods\n", "{pods}");

    let info = call(&server, "info", json!({"n": 1})).await;
    assert_eq!(
        info["parsed"],
        json!({"skill": "star", "n": 2, "tags": ["a", "b"]}),
        "{info}"
    );
    let text: Value = serde_json::from_str(info["output"].as_str().unwrap()).unwrap();
    assert_eq!(text, info["parsed"]);
    let hello = call(&server, "hello", json!({})).await;
    assert_eq!(
        hello["parsed"],
        json!({"exit_code": 0, "output": "hi\n", "success": true}),
        "{hello}"
    );
    let nothing = call(&server, "nothing", json!({})).await;
    assert_eq!(
        (&nothing["success"], &nothing["output"]),
        (&json!(true), &json!("")),
        "{nothing}"
    );
    let codec = call(&server, "codec", json!({})).await;
    assert_eq!(codec["parsed"], json!({"a": [1, 2], "b": null}), "{codec}");
    // Programs run in the run sandbox, in a directory of the call's own.
    let me = call(&server, "whoami", json!({})).await;
    if nix::unistd::geteuid().is_root() {
        assert_eq!(me["parsed"]["uid"], 65534, "{me}");
    }
    let tmp = me["parsed"]["tmp"].as_str().unwrap();
    assert!(tmp.contains("starlark-star-"), "{me}");
    assert!(
        !Path::new(tmp).exists(),
        "the call's directory was left behind: {me}"
    );
    let started = Instant::now();
    let nap = call(&server, "nap", json!({})).await;
    assert_eq!(nap["parsed"]["success"], false, "{nap}");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );

    let broken = fails_with(&server, "broken", json!({}), "fail: it broke (at skill.star:").await;
    assert_eq!(broken["timed_out"], false, "{broken}");

    the_run_is_recorded(&server, &info).await;
}

/// The run log keeps the call of `info`, run by the script host.
async fn the_run_is_recorded(server: &TestServer, info: &Value) {
    let run = server
        .get_json(&format!("/runs/{}?wait=10", info["run_id"].as_str().unwrap()))
        .await;
    assert_eq!(run["status"], "succeeded", "{run}");
    assert_eq!(run["tool"], "info");
    assert_eq!(run["arguments"], json!({"n": 1}));
    // The script's host: the skilld binary, in the run sandbox.
    // (Or a link to it the sandbox's user can reach: `skilld-<dev>-<inode>`.)
    let host = Path::new(run["argv"][0].as_str().unwrap());
    let name = host.file_name().unwrap().to_string_lossy();
    assert!(name == "skilld" || name.starts_with("skilld-"), "{run}");
    assert_eq!(run["argv"][1], "starlark-host", "{run}");
    assert!(
        run["argv"][2].as_str().unwrap().ends_with("star/skill.star"),
        "{run}"
    );
    assert_eq!(run["result"]["parsed"]["n"], 2, "{run}");
}

#[tokio::test]
async fn an_sdk_function_without_its_permission_fails_the_call_and_does_nothing() {
    let marks = marks_dir();
    let (mark, control) = (marks.path().join("bare"), marks.path().join("allowed"));
    let (server, _skills) = server_over(|root| {
        let script = |mark: &Path| {
            format!(
                r#"
def touch(args):
    return exec("touch", [{mark:?}])

def read(args):
    return read_file("SKILL.yaml")

def write(args):
    return write_file("x.txt", "x")

def get(args):
    return fetch("http://127.0.0.1:9/")

def home(args):
    return env("PATH")

PREFIX = "{prefix}"
register_tool(PREFIX + "touch", "Touches a file.", {{"type": "object"}}, touch)
register_tool(PREFIX + "read", "Reads a file.", {{"type": "object"}}, read)
register_tool(PREFIX + "write", "Writes a file.", {{"type": "object"}}, write)
register_tool(PREFIX + "get", "Fetches a URL.", {{"type": "object"}}, get)
register_tool(PREFIX + "home", "Reads the environment.", {{"type": "object"}}, home)
"#,
                mark = mark.display().to_string(),
                prefix = mark.file_name().unwrap().to_str().unwrap()
            )
        };
        star_skill(root, "bare", "", &script(&mark));
        star_skill(root, "allowed", "permissions: [shell:exec]\n", &script(&control));
    })
    .await;
    for (tool, function, permission) in [
        ("baretouch", "exec", "shell:exec"),
        ("bareread", "read_file", "file:read"),
        ("barewrite", "write_file", "file:write"),
        ("bareget", "fetch", "net:fetch"),
        ("barehome", "env", "env:read"),
    ] {
        let says =
            format!("{function} needs the permission '{permission}', which skill 'bare' does not declare");
        let envelope = fails_with(&server, tool, json!({}), &says).await;
        assert_eq!(envelope["output"], "", "{envelope}");
    }
    assert!(!mark.exists(), "exec ran without shell:exec");
    // The same call with the permission does run.
    let touched = call(&server, "allowedtouch", json!({})).await;
    assert_eq!(touched["parsed"]["success"], true, "{touched}");
    assert!(control.exists(), "{touched}");
}

const FILES: &str = r#"
def read(args):
    return read_file(args["path"])

def roundtrip(args):
    write_file("out.txt", "written")
    return read_file(env("TMPDIR") + "/out.txt")

def put(args):
    return write_file(args["path"], "x")

register_tool("read", "Reads a file.", {"type": "object"}, read)
register_tool("roundtrip", "Writes a file, then reads it.", {"type": "object"}, roundtrip)
register_tool("put", "Writes a file.", {"type": "object"}, put)
"#;

#[tokio::test]
async fn files_are_read_and_written_only_inside_the_skill_and_the_evaluation_directory() {
    let (server, skills) = server_over(|root| {
        star_skill(
            root,
            "files",
            "permissions: [file:read, file:write, env:read]\n",
            FILES,
        );
        std::fs::write(root.join("files/notes.txt"), "notes\n").unwrap();
        std::fs::write(root.join("secret.txt"), "secret\n").unwrap();
        // A manifest with a link out of its directory does not load.
        star_skill(root, "linked", "", FILES);
        std::os::unix::fs::symlink("/etc/passwd", root.join("linked/link")).unwrap();
    })
    .await;
    let diagnostics = server.get_json("/diagnostics").await.to_string();
    assert!(
        diagnostics.contains("program_outside_skill") && diagnostics.contains("linked"),
        "{diagnostics}"
    );
    // One planted after the load is refused when read.
    std::os::unix::fs::symlink("/etc/passwd", skills.path().join("files/link")).unwrap();
    let notes = call(&server, "read", json!({"path": "notes.txt"})).await;
    assert_eq!(notes["output"], "notes\n", "{notes}");
    let outside = skills.path().join("secret.txt").display().to_string();
    for path in [
        "../../etc/passwd",
        "../secret.txt",
        "link",
        "/etc/passwd",
        outside.as_str(),
    ] {
        fails_with(
            &server,
            "read",
            json!({"path": path}),
            "outside the skill's directory",
        )
        .await;
    }
    fails_with(&server, "read", json!({"path": "missing.txt"}), "cannot open").await;
    let roundtrip = call(&server, "roundtrip", json!({})).await;
    assert_eq!(roundtrip["output"], "written", "{roundtrip}");
    for path in ["../x.txt", "/tmp/x.txt", ""] {
        fails_with(&server, "put", json!({"path": path}), "not a file name inside").await;
    }
    fails_with(
        &server,
        "put",
        json!({"path": "no/such/dir.txt"}),
        "does not exist",
    )
    .await;
}

const RUNAWAY: &str = r#"
def spin(args):
    for i in range(1000000000):
        pass

def ok(args):
    return "still here"

register_tool("spin", "Never ends.", {"type": "object"}, spin)
register_tool("ok", "Answers.", {"type": "object"}, ok)
"#;

const GREEDY: &str = r#"
def bomb(args):
    s = "x" * 1024
    for i in range(40):
        s = s + s
    return len(s)

def grow(args):
    items = [0] * 1024
    for i in range(40):
        items = items + items
    return len(items)

def deep(args):
    value = []
    for i in range(1000):
        value = [value]
    return value

def shared(args):
    value = [1]
    for i in range(100):
        value = [value, value]
    return json_encode(value)

register_tool("bomb", "Doubles a string.", {"type": "object"}, bomb)
register_tool("grow", "Doubles a list.", {"type": "object"}, grow)
register_tool("deep", "Answers a deeply nested list.", {"type": "object"}, deep)
register_tool("shared", "Encodes a list that shares its parts.", {"type": "object"}, shared)
"#;

#[tokio::test]
async fn a_runaway_or_greedy_handler_is_stopped_and_the_server_keeps_answering() {
    let (server, _skills) = server_over(|root| {
        star_skill(root, "runaway", "timeout: 1\n", RUNAWAY);
        star_skill(root, "greedy", "timeout: 60\n", GREEDY);
    })
    .await;
    let started = Instant::now();
    // Stopped by the host itself (not a killed host): its bounds work.
    let spun = fails_with(&server, "spin", json!({}), "the script's evaluation was stopped").await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(spun["timed_out"], true, "{spun}");
    let run = server
        .get_json(&format!("/runs/{}?wait=10", spun["run_id"].as_str().unwrap()))
        .await;
    assert_eq!(run["status"], "timed_out", "{run}");
    for tool in ["bomb", "grow"] {
        let greedy = fails_with(&server, tool, json!({}), "more than 64 MiB of memory").await;
        assert_eq!(greedy["timed_out"], false, "{greedy}");
    }
    // Values too deep or too large to make JSON of are refused, not walked.
    fails_with(&server, "deep", json!({}), "nests deeper than 128 levels").await;
    fails_with(&server, "shared", json!({}), "holds more than 1000000 values").await;
    assert_eq!(call(&server, "ok", json!({})).await["output"], "still here");
}

#[tokio::test]
async fn a_cancelled_call_stops_its_evaluation() {
    let (server, _skills) = server_over(|root| star_skill(root, "runaway", "timeout: 60\n", RUNAWAY)).await;
    let client = reqwest::Client::new();
    let accepted: Value = client
        .post(server.url("/tools/spin/invoke"))
        .header("prefer", "respond-async")
        .json(&json!({"arguments": {}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = accepted["run_id"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.get_json(&format!("/runs/{id}")).await["status"] != "running" {
        assert!(Instant::now() < deadline, "the run never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let started = Instant::now();
    let res = client
        .post(server.url(&format!("/runs/{id}/cancel")))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 202);
    let run = server.get_json(&format!("/runs/{id}?wait=10")).await;
    assert_eq!(run["status"], "cancelled", "{run}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(call(&server, "ok", json!({})).await["output"], "still here");
}

#[tokio::test]
async fn a_script_that_does_not_load_is_a_backend_failed_diagnostic() {
    let cases: &[(&str, &str, &str)] = &[
        ("syntax", "def broken(:\n", "Parse error"),
        (
            "badschema",
            "def f(args):\n    return 1\nregister_tool(\"t\", \"d\", \"not a dict\", f)\n",
            "parameters of 't' must be a dict",
        ),
        (
            "badhandler",
            "register_tool(\"t\", \"d\", {\"type\": \"object\"}, \"f\")\n",
            "handler must be a function",
        ),
        (
            "badphase",
            "def f(p):\n    return {}\nregister_hook(\"sometime\", f)\n",
            "unknown phase 'sometime'",
        ),
        (
            "loadexec",
            "exec(\"true\")\n",
            "exec needs the permission 'shell:exec', which skill 'loadexec' does not declare",
        ),
        (
            "slowload",
            "def spin():\n    for i in range(1000000000):\n        pass\nspin()\n",
            "did not end within 5s",
        ),
    ];
    let (server, _skills) = server_over(|root| {
        for (name, script, _) in cases {
            star_skill(root, name, "", script);
        }
    })
    .await;
    let diagnostics = server.get_json("/diagnostics").await;
    for (name, _, says) in cases {
        let found = diagnostics["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["skill"] == *name)
            .unwrap_or_else(|| panic!("no diagnostic for {name}: {diagnostics}"));
        assert_eq!(found["code"], "backend_failed", "{found}");
        assert_eq!(found["severity"], "error", "{found}");
        let message = found["message"].as_str().unwrap();
        assert!(message.contains(says), "{name}: {says:?} not in {message:?}");
        assert_eq!(server.get_json(&format!("/skills/{name}")).await["status"], 404);
    }
}

#[tokio::test]
async fn each_script_has_its_own_globals_and_calls_cannot_change_them() {
    let (server, _skills) = server_over(|root| {
        for name in ["one", "two"] {
            let script = format!(
                "STATE = \"{name}\"\nSEEN = []\n\
                 def state(args):\n    return STATE\n\
                 def remember(args):\n    SEEN.append(1)\n    return len(SEEN)\n\
                 register_tool(\"{name}_state\", \"Answers its state.\", {{\"type\": \"object\"}}, state)\n\
                 register_tool(\"{name}_remember\", \"Changes a global.\", {{}}, remember)\n"
            );
            star_skill(root, name, "", &script);
        }
        star_skill(
            root,
            "three",
            "",
            "def f(args):\n    return STATE\nprint(STATE)\n",
        );
    })
    .await;
    assert_eq!(call(&server, "one_state", json!({})).await["output"], "one");
    assert_eq!(call(&server, "two_state", json!({})).await["output"], "two");
    fails_with(&server, "one_remember", json!({}), "globals are frozen").await;
    let diagnostics = server.get_json("/diagnostics").await.to_string();
    assert!(diagnostics.contains("STATE"), "{diagnostics}");
    assert_eq!(server.get_json("/skills/three").await["status"], 404);
}

const HOOKED: &str = r#"
def greet(args):
    return "hello " + args["name"]

def before(payload):
    name = payload["input"]["name"]
    if name == "mallory":
        return {"cancel": "mallory may not be greeted by " + payload["tool"]}
    if name == "shout":
        return {"payload": {"input": {"name": "SHOUT"}}}
    return {}

def after(payload):
    seen = "%s/%s, session %s" % (payload["skill"], payload["tool"], payload["session"])
    return {"payload": {"result": {"output": payload["result"]["output"] + " (checked: " + seen + ")"}}}

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
register_tool("greet", "Greets.", SCHEMA, greet)
register_hook("before_tool_call", before)
register_hook(phase = "after_tool_result", handler = after)
"#;

#[tokio::test]
async fn hooks_registered_by_a_script_change_or_cancel_a_call() {
    let (server, _skills) = server_over(|root| star_skill(root, "hooked", "", HOOKED)).await;
    let shouted = call(&server, "greet", json!({"name": "shout"})).await;
    // Outside a session the hooks see the same fields, the session null.
    assert_eq!(
        shouted["output"], "hello SHOUT (checked: hooked/greet, session None)",
        "{shouted}"
    );
    assert_eq!(shouted["hooks"][0]["effect"], "replaced_input", "{shouted}");
    let (status, problem) = server.invoke("greet", json!({"name": "mallory"})).await;
    assert_eq!(status, 403, "{problem}");
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("mallory may not be greeted by greet"),
        "{problem}"
    );
}

/// Serves `hello` at `/` and 2 MiB at `/big`, one request per connection.
async fn web_server() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0; 4096];
                let n = conn.read(&mut buf).await.unwrap_or(0);
                let body = if String::from_utf8_lossy(&buf[..n]).starts_with("GET /big") {
                    "x".repeat(2 * 1024 * 1024)
                } else {
                    "hello".to_owned()
                };
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = conn.write_all(head.as_bytes()).await;
                let _ = conn.write_all(body.as_bytes()).await;
            });
        }
    });
    format!("http://{addr}")
}

#[tokio::test]
async fn fetch_gets_a_url_bounded_in_size() {
    let url = web_server().await;
    let script = "def get(args):\n    return fetch(args[\"url\"])\n\
                  register_tool(\"get\", \"Fetches.\", {\"type\": \"object\"}, get)\n";
    let (server, _skills) = server_over(|root| {
        star_skill(root, "web", "permissions: [net:fetch]\nnetwork: true\n", script);
    })
    .await;
    let got = call(&server, "get", json!({"url": format!("{url}/")})).await;
    assert_eq!(
        got["parsed"],
        json!({"status": 200, "body": "hello", "success": true}),
        "{got}"
    );
    fails_with(
        &server,
        "get",
        json!({"url": format!("{url}/big")}),
        "larger than 1048576 bytes",
    )
    .await;
    fails_with(
        &server,
        "get",
        json!({"url": "ftp://example.com/x"}),
        "not an http or https URL",
    )
    .await;
}

#[tokio::test]
async fn a_call_of_a_user_starlark_skill_waits_for_approval_like_any_other() {
    let skills = tempdir().unwrap();
    copy_tree(&corpus_dir().join("valid/k8s"), &skills.path().join("k8s"));
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::User)]))
        .start()
        .await;
    let (status, held) = server
        .invoke("label_selector", json!({"labels": {"app": "web"}}))
        .await;
    assert_eq!(status, 202, "{held}");
    let approval = held["approval_id"].as_str().unwrap();
    let request = server.get_json(&format!("/approvals/{approval}")).await;
    assert_eq!(request["permissions"], json!(["shell:exec"]), "{request}");
    let run = server.approve_once_and_wait(&held).await;
    assert_eq!(run["status"], "succeeded", "{run}");
    assert_eq!(run["result"]["output"], "app=web", "{run}");
}

#[tokio::test]
async fn a_starlark_skill_from_an_untrusted_source_runs_confined_once_approved() {
    let skills = tempdir().unwrap();
    // An untrusted script is not evaluated before a call is approved, so
    // its manifest lists its tools.
    star_skill(
        skills.path(),
        "stranger",
        "permissions: [shell:exec]\ntools:\n  - name: who\n    description: Says who runs it.\n    \
         input_schema: {type: object}\n",
        "def who(args):\n    return {'uid': int(exec('id', ['-u'])['output'].strip())}\n\
         register_tool(name = 'who', description = 'Says who runs it.', parameters = {}, handler = who)\n",
    );
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::Untrusted)]))
        .start()
        .await;
    assert_eq!(server.get_json("/skills/stranger").await["trust"], "untrusted");
    let (status, held) = server.invoke("who", json!({})).await;
    assert_eq!(
        status, 202,
        "an untrusted skill's call waits for a person: {held}"
    );
    let run = server.approve_once_and_wait(&held).await;
    assert_eq!(run["status"], "succeeded", "{run}");
    let server_uid = nix::unistd::geteuid().as_raw();
    if server_uid == 0 {
        // Run as root, the sandbox gives its children an identity of their own.
        assert_ne!(run["result"]["parsed"]["uid"], json!(0), "{run}");
    }
}

/// One built-in operation asks for petabytes at once: the allocation
/// fails before any of the interpreter's checks, which aborts the process
/// that evaluates it.
const ABORT: &str = r#"
def boom(args):
    s = "x" * 1000000
    return s * 2000000000

def ok(args):
    return "still here"

register_tool("boom", "Asks for petabytes.", {"type": "object"}, boom)
register_tool("ok", "Answers.", {"type": "object"}, ok)
"#;

#[tokio::test]
async fn an_allocation_that_aborts_takes_only_the_script_host_with_it() {
    let (server, _skills) = server_over(|root| star_skill(root, "aborts", "", ABORT)).await;
    let boom = call(&server, "boom", json!({})).await;
    assert_eq!(boom["success"], false, "{boom}");
    let error = boom["error"].as_str().unwrap_or_default();
    assert!(error.contains("the skill's process"), "{boom}");
    // The server answers, and the next call gets a new host.
    assert_eq!(server.get_json("/healthz").await["status"], "ok");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let again = call(&server, "ok", json!({})).await;
        if again["success"] == true {
            assert_eq!(again["output"], "still here", "{again}");
            break;
        }
        assert!(Instant::now() < deadline, "no new host: {again}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let run = server
        .get_json(&format!("/runs/{}?wait=10", boom["run_id"].as_str().unwrap()))
        .await;
    assert_eq!(run["status"], "failed", "{run}");
}
