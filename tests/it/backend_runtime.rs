//! Seed 002's runtime in the manifest backends, through a real server:
//! all nine hook phases answered by a Starlark script and by a Python
//! process, workflows served as tools, scanners and their findings.

use crate::common::{TestServer, call, server_over, star_skill, tempdir};
use serde_json::{Value, json};
use skilld::skill::backend::{Backend, BackendErrorKind, HookAnswer, HookCall, ScanCall};
use skilld::skill::context::{CallContext, TurnLimits};
use skilld::skill::phases::Phase;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// A script with a hook for every phase (the tool phases in the seed's
/// spelling), a workflow and a scanner.
const STAR: &str = r#"
def hook_of(phase):
    def handle(payload):
        if phase == "before_tool_call" and payload.get("input", {}).get("stop"):
            return {"cancel": "stopped by " + phase}
        if phase == "on_activate" or ("tool" in phase and not payload.get("probe")):
            return {}
        return {"payload": {"phase": phase, "got": payload}}
    return handle

PHASES = ["on_activate", "on_deactivate", "on_conversation_start", "on_before_prompt_build",
          "on_before_tool_call", "on_after_tool_result", "on_after_response",
          "on_before_wiki_section", "on_security_scan_complete"]
def register_hooks():
    for p in PHASES:
        register_hook(p, hook_of(p[3:] if "tool" in p else p))

register_hooks()

def tally(args):
    return {"words": len(args["text"].split()), "via": "workflow"}

def plain(args):
    return "plain"

register_tool("plain", "A plain tool.", {"type": "object"}, plain)
register_workflow("tally", tally, description = "Counts words.",
    parameters = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
register_workflow("plain", plain)

def secrets(files):
    found = []
    for f in files:
        for i, line in enumerate(f["text"].split("\n")):
            if "password" in line:
                found.append({"rule": "no-passwords", "severity": "high", "message": "a password",
                              "path": f["path"], "line": i + 1})
    return found

def sloppy(files):
    return [{"rule": "x", "severity": "dire", "message": "m", "path": "p", "line": 1}]

register_scanner("secrets", secrets)
register_scanner("sloppy", sloppy)
"#;

/// The same, as a Python process.
const CHILD: &str = r#"
import json, sys

PHASES = ["on_activate", "on_deactivate", "on_conversation_start", "on_before_prompt_build",
          "on_before_tool_call", "on_after_tool_result", "on_after_response",
          "on_before_wiki_section", "on_security_scan_complete"]

def handle(method, params):
    if method == "initialize":
        return {"tools": [{"name": "pyplain", "input_schema": {"type": "object"}}],
                "hooks": PHASES,
                "workflows": [{"name": "pytally", "description": "Counts words.",
                               "input_schema": {"type": "object", "required": ["text"]}}],
                "scanners": ["secrets", "sloppy"]}
    if method == "tool/execute":
        return {"output": "plain", "success": True}
    if method == "workflow/execute":
        return {"output": {"words": len(params["input"]["text"].split()), "via": params["name"]}}
    if method == "hook/handle":
        phase = params["phase"]
        if phase == "before_tool_call" and params["payload"].get("input", {}).get("stop"):
            return {"cancel": "stopped by " + phase}
        if phase == "on_activate" or ("tool" in phase and not params["payload"].get("probe")):
            return {}
        return {"payload": {"phase": phase, "got": params["payload"], "tool": params.get("tool", "none")}}
    if method == "scanner/run":
        if params["scanner"] not in ("secrets", "sloppy"):
            raise ValueError("no scanner " + params["scanner"])
        if params["scanner"] == "sloppy":
            return {"findings": [{"rule": "x", "severity": "high", "path": "p"}]}
        found = []
        for f in params["files"]:
            for i, line in enumerate(f["text"].split("\n")):
                if "password" in line:
                    found.append({"rule": "no-passwords", "severity": "high", "message": "a password",
                                  "path": f["path"], "line": i + 1})
        return {"findings": found}
    raise ValueError("no method " + method)

for line in sys.stdin:
    req = json.loads(line)
    try:
        reply = {"jsonrpc": "2.0", "id": req["id"], "result": handle(req["method"], req.get("params") or {})}
    except Exception as e:
        reply = {"jsonrpc": "2.0", "id": req["id"], "error": {"code": -32000, "message": str(e)}}
    print(json.dumps(reply), flush=True)
    if req["method"] == "shutdown":
        break
"#;

fn process_skill(root: &Path) {
    let dir = root.join("py");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("SKILL.yaml"),
        "name: py\nversion: 1.0.0\ndescription: A process skill with every contribution.\n\
         types: [tool, workflow, security-rule]\npermissions: [shell:exec]\n\
         implementation:\n  backend: process\n  entrypoint: child.py\n",
    )
    .unwrap();
    std::fs::write(dir.join("child.py"), CHILD).unwrap();
}

async fn both() -> (TestServer, tempfile::TempDir) {
    server_over(|root| {
        star_skill(root, "star", "", STAR);
        process_skill(root);
    })
    .await
}

fn backend_of(server: &TestServer, skill: &str) -> Arc<dyn Backend> {
    let catalog = server.catalog.current();
    let skill = catalog
        .skill(skill)
        .unwrap_or_else(|| panic!("{skill} is not loaded"));
    skill.backend.clone().unwrap()
}

fn hook(phase: Phase, payload: Value) -> HookCall {
    HookCall {
        phase,
        tool: phase.is_tool_phase().then(|| "plain".to_owned()),
        payload,
        timeout: Duration::from_secs(10),
        context: CallContext::alone(TurnLimits::default()),
    }
}

/// What each phase is sent, as the session runtime sends it.
fn payload_of(phase: Phase) -> Value {
    match phase {
        Phase::OnActivate | Phase::OnDeactivate => json!({"session": "s1", "skill": "x"}),
        Phase::OnConversationStart => json!({"session": "s1", "context": {}}),
        Phase::OnBeforePromptBuild => json!({"session": "s1", "turn": 1, "message": "hi", "fragments": []}),
        // `probe`: the hooks of tool phases change only these, not the
        // calls a test makes through the pipeline.
        Phase::BeforeToolCall => {
            json!({"input": {"a": 1}, "tool": "plain", "skill": "x", "session": null, "probe": true})
        }
        Phase::AfterToolResult => {
            json!({"input": {}, "result": {"output": "o"}, "tool": "plain", "skill": "x", "probe": true})
        }
        Phase::OnAfterResponse => json!({"text": "the answer"}),
        Phase::OnBeforeWikiSection => json!({"section": "intro", "context": []}),
        Phase::OnSecurityScanComplete => json!({"findings": []}),
    }
}

#[tokio::test]
async fn every_phase_is_registered_and_answered_by_both_backends() {
    let (server, _skills) = both().await;
    let catalog = server.catalog.current();
    let every: Vec<&str> = Phase::ALL.iter().map(|p| p.as_str()).collect();
    for name in ["star", "py"] {
        let skill = catalog.skill(name).unwrap();
        let mut hooks: Vec<&str> = skill.hooks.iter().map(String::as_str).collect();
        hooks.sort_unstable();
        let mut want = every.clone();
        want.sort_unstable();
        assert_eq!(hooks, want, "{name}: {:?}", skill.warnings);
    }
    for phase in Phase::ALL {
        let payload = payload_of(phase);
        let star = backend_of(&server, "star")
            .hook(hook(phase, payload.clone()))
            .await;
        let py = backend_of(&server, "py").hook(hook(phase, payload.clone())).await;
        if phase == Phase::OnActivate {
            assert_eq!(star, Ok(HookAnswer::Keep));
            assert_eq!(py, Ok(HookAnswer::Keep));
            continue;
        }
        // The Starlark handler gets the tool in the payload of a tool
        // phase; the process gets it beside, and only for those.
        let mut star_got = payload.clone();
        let tool = if phase.is_tool_phase() {
            star_got["tool"] = json!("plain");
            json!("plain")
        } else {
            json!("none")
        };
        let name = phase.as_str();
        assert_eq!(
            star,
            Ok(HookAnswer::Replace(json!({"phase": name, "got": star_got}))),
            "{name}"
        );
        assert_eq!(
            py,
            Ok(HookAnswer::Replace(
                json!({"phase": name, "got": payload, "tool": tool})
            )),
            "{name}"
        );
    }
    let stop = json!({"input": {"stop": true}});
    for skill in ["star", "py"] {
        let answer = backend_of(&server, skill)
            .hook(hook(Phase::BeforeToolCall, stop.clone()))
            .await;
        assert_eq!(
            answer,
            Ok(HookAnswer::Cancel("stopped by before_tool_call".to_owned())),
            "{skill}"
        );
    }
}

#[tokio::test]
async fn an_unknown_phase_is_refused_by_a_script_and_a_warning_for_a_process() {
    let skills = tempdir().unwrap();
    star_skill(
        skills.path(),
        "odd",
        "",
        "def h(p):\n    return {}\nregister_hook('on_lunch', h)\n",
    );
    let dir = skills.path().join("oddpy");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("SKILL.yaml"),
        "name: oddpy\nversion: 1.0.0\ndescription: Offers a hook of no phase.\ntypes: [tool]\n\
         permissions: [shell:exec]\nimplementation:\n  backend: process\n  entrypoint: child.py\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("child.py"),
        CHILD.replace("\"hooks\": PHASES", "\"hooks\": [\"on_lunch\", \"on_activate\"]"),
    )
    .unwrap();
    let (server, _skills) = server_over(|root| crate::common::copy_tree(skills.path(), root)).await;
    let catalog = server.catalog.current();
    assert!(
        catalog.skill("odd").is_none(),
        "a script with an unknown phase loaded"
    );
    let oddpy = catalog.skill("oddpy").unwrap();
    assert_eq!(oddpy.hooks, ["on_activate"]);
    let warned = oddpy
        .warnings
        .iter()
        .any(|w| w.message.contains("'on_lunch'") && w.code.as_str() == "unknown_field");
    assert!(warned, "{:?}", oddpy.warnings);
}

#[tokio::test]
async fn a_workflow_is_called_as_a_tool_and_recorded() {
    let (server, _skills) = both().await;
    let info = server.get_json("/tools/tally").await;
    assert_eq!(info["workflow"], true, "{info}");
    assert_eq!(info["description"], "Counts words.", "{info}");
    let plain = server.get_json("/tools/plain").await;
    assert!(plain.get("workflow").is_none(), "{plain}");

    let tallied = call(&server, "tally", json!({"text": "one two three"})).await;
    assert_eq!(tallied["success"], true, "{tallied}");
    assert_eq!(
        tallied["parsed"],
        json!({"words": 3, "via": "workflow"}),
        "{tallied}"
    );
    let run = server
        .get_json(&format!("/runs/{}?wait=10", tallied["run_id"].as_str().unwrap()))
        .await;
    assert_eq!(run["status"], "succeeded", "{run}");
    assert_eq!(run["tool"], "tally", "{run}");
    assert_eq!(run["arguments"], json!({"text": "one two three"}), "{run}");
    // Checked against its parameters like any tool's call.
    let (status, problem) = server.invoke("tally", json!({})).await;
    assert_eq!(status, 422, "{problem}");
    // The process's workflow, too.
    let py = call(&server, "pytally", json!({"text": "a b"})).await;
    assert_eq!(py["parsed"], json!({"words": 2, "via": "pytally"}), "{py}");
    // A workflow named as a tool is not served: the tool stands.
    let plain = call(&server, "plain", json!({})).await;
    assert_eq!(plain["output"], "plain", "{plain}");
    let star = server.catalog.current().skill("star").unwrap().clone();
    let warned = star
        .warnings
        .iter()
        .any(|w| w.message.contains("workflow 'plain'"));
    assert!(warned, "{:?}", star.warnings);
}

fn scan(scanner: &str) -> ScanCall {
    ScanCall {
        scanner: scanner.to_owned(),
        files: vec![
            json!({"path": "a.py", "text": "x = 1\npassword = 'hunter2'\n"}),
            json!({"path": "b.py", "text": "clean\n"}),
        ],
        timeout: Duration::from_secs(10),
        context: CallContext::alone(TurnLimits::default()),
    }
}

#[tokio::test]
async fn a_scanner_answers_findings_and_a_malformed_one_is_refused() {
    let (server, _skills) = both().await;
    let catalog = server.catalog.current();
    for skill in ["star", "py"] {
        assert_eq!(
            catalog.skill(skill).unwrap().scanners,
            ["secrets", "sloppy"],
            "{skill}"
        );
        let backend = backend_of(&server, skill);
        let findings = backend.scan(scan("secrets")).await.unwrap();
        assert_eq!(
            findings,
            vec![
                json!({"rule": "no-passwords", "severity": "high", "message": "a password", "path": "a.py", "line": 2})
            ],
            "{skill}"
        );
        // A malformed answer is out of protocol; an unknown scanner, refused.
        let why = backend.scan(scan("sloppy")).await.unwrap_err();
        assert_eq!(why.kind(), BackendErrorKind::Protocol, "{skill}: {why}");
        let why = why.to_string();
        assert!(
            why.contains("scanner sloppy") && why.contains("finding 0"),
            "{skill}: {why}"
        );
        let why = backend.scan(scan("absent")).await.unwrap_err();
        assert_eq!(why.kind(), BackendErrorKind::Refused, "{skill}: {why}");
        assert!(why.to_string().contains("absent"), "{skill}: {why}");
    }
}

/// A process whose tools fail three ways: it refuses (a JSON-RPC error),
/// it crashes (exits mid-call), or the tool itself reports a failure.
const MOODY: &str = r#"
import json, sys

for line in sys.stdin:
    req = json.loads(line)
    method, params = req["method"], req.get("params") or {}
    if method == "initialize":
        tools = [{"name": n, "input_schema": {"type": "object"}} for n in ("refuse", "crash", "sulk")]
        reply = {"result": {"tools": tools}}
    elif method == "tool/execute" and params["name"] == "refuse":
        reply = {"error": {"code": -32000, "message": "I will not"}}
    elif method == "tool/execute" and params["name"] == "crash":
        sys.exit(3)
    elif method == "tool/execute":
        reply = {"result": {"output": "not today", "success": False}}
    else:
        reply = {"result": {}}
    reply.update({"jsonrpc": "2.0", "id": req["id"]})
    print(json.dumps(reply), flush=True)
    if method == "shutdown":
        break
"#;

#[tokio::test]
async fn a_crashed_backend_and_a_refusing_one_are_told_apart_in_the_envelope() {
    let (server, _skills) = server_over(|root| {
        let dir = root.join("moody");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("SKILL.yaml"),
            "name: moody\nversion: 1.0.0\ndescription: A process that fails in every way.\ntypes: [tool]\n\
             permissions: [shell:exec]\n\
             implementation:\n  backend: process\n  entrypoint: child.py\n",
        )
        .unwrap();
        std::fs::write(dir.join("child.py"), MOODY).unwrap();
    })
    .await;

    let refused = call(&server, "refuse", json!({})).await;
    assert_eq!(refused["success"], false, "{refused}");
    assert_eq!(refused["backend_error"], "refused", "{refused}");
    assert_eq!(refused["error"], "I will not", "{refused}");

    let crashed = call(&server, "crash", json!({})).await;
    assert_eq!(crashed["success"], false, "{crashed}");
    assert_eq!(crashed["backend_error"], "crashed", "{crashed}");
    let error = crashed["error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with("the skill's process") && error.contains('3'),
        "{crashed}"
    );

    // The tool's own failure is a result, not the backend's.
    let sulked = call(&server, "sulk", json!({})).await;
    assert_eq!(sulked["success"], false, "{sulked}");
    assert_eq!(sulked["error"], "not today", "{sulked}");
    assert!(sulked.get("backend_error").is_none(), "{sulked}");

    for envelope in [&refused, &crashed] {
        let id = envelope["run_id"].as_str().unwrap();
        let run = server.get_json(&format!("/runs/{id}?wait=10")).await;
        assert_eq!(run["status"], "failed", "{run}");
        assert_eq!(run["result"]["backend_error"], envelope["backend_error"], "{run}");
    }
}
