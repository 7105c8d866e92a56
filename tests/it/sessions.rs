//! Seed 002's runtime through sessions over HTTP (`docs/sessions.md`):
//! the seed's example skills (kubernetes, ddd-expert, rfc-writer) with a
//! Starlark skill (`watcher`, bundled) and a process skill (`auditor`,
//! user) that register every hook phase, driven through a whole session:
//! activation by a project file and by a keyword, the activation approval,
//! prompt fragments within the token budget, a tool call seen by the other
//! skills' hooks in priority order, the transform chain, a workflow
//! calling two tools (one of them held), per-turn limits, and the end.

use crate::common::{
    AGENT, Api, BOSS, CAROL, TestServer, checkout, copy_tree, options, plain, redacted, root, tempdir,
    tokens, write_file,
};
use insta::assert_json_snapshot;
use serde_json::{Value, json};
use skilld::invoke::RunSettings;
use skilld::session::SessionSettings;
use skilld::skill::Trust;
use std::collections::HashMap;
use std::path::Path;
use std::sync::{LazyLock, Mutex};

/// Each session's secret, as its start answered it, by session id (ids
/// are unique across tests and instances).
static SECRETS: LazyLock<Mutex<HashMap<String, String>>> = LazyLock::new(Mutex::default);

/// Keeps the secret of a session a start answered.
pub(crate) fn remember(started: &Value) {
    if let (Some(id), Some(secret)) = (started["id"].as_str(), started["secret"].as_str()) {
        SECRETS.lock().unwrap().insert(id.to_owned(), secret.to_owned());
    }
}

/// The secret of session `id`.
pub(crate) fn secret(id: &str) -> String {
    SECRETS.lock().unwrap().get(id).cloned().unwrap_or_default()
}

/// The secret of the session a request names in its path or its body.
fn secret_for(path: &str, body: &Value) -> Option<String> {
    let secrets = SECRETS.lock().unwrap();
    secrets
        .iter()
        .find(|(id, _)| path.contains(id.as_str()) || body["session"] == id.as_str())
        .map(|(_, secret)| secret.clone())
}

/// A decision on the request `skill` has waiting in `view` (a session),
/// naming it as the decision must.
pub(crate) fn decision(view: &Value, skill_name: &str, decided: Value) -> Value {
    let s = skill(view, skill_name);
    let mut body = decided;
    body["request"] = s["approval"]["id"].clone();
    body["hash"] = s["hash"].clone();
    if body["request"].is_null() {
        body["request"] = json!(uuid::Uuid::nil());
    }
    body
}

/// A manifest with an unpinned image.
const MANIFEST: &str = "kind: Deployment\nspec:\n  containers:\n    - image: nginx:latest\n";

/// Every phase, as the watcher and the auditor register them.
const PHASES: [&str; 9] = [
    "on_activate",
    "on_deactivate",
    "on_conversation_start",
    "on_before_prompt_build",
    "before_tool_call",
    "after_tool_result",
    "on_after_response",
    "on_before_wiki_section",
    "on_security_scan_complete",
];

/// The bundled watcher: every phase in Starlark, each leaving a mark a
/// test can see, and `spin`, which runs `true` as often as asked.
const WATCHER: &str = r#"
def keep(payload):
    return {}

def prompt(payload):
    return {"payload": {"fragments": ["watcher: turn %d" % payload["turn"]]}}

def after(payload):
    return {"payload": {"result": {"output": payload["result"]["output"] + " [watched]"}}}

def respond(payload):
    return {"payload": {"text": payload["text"] + " (watched)"}}

def wiki(payload):
    return {"payload": {"context": ["watcher knows " + payload["section"]]}}

def scanned(payload):
    return {"payload": {"findings": payload["findings"]}}

def spin(args):
    done = 0
    for i in range(args["n"]):
        exec("true")
        done += 1
    return done

register_tool("spin", "Runs true n times.", {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}, spin)
register_hook("on_activate", keep)
register_hook("on_deactivate", keep)
register_hook("on_conversation_start", keep)
register_hook("on_before_prompt_build", prompt)
register_hook("before_tool_call", keep)
register_hook("after_tool_result", after)
register_hook("on_after_response", respond)
register_hook("on_before_wiki_section", wiki)
register_hook("on_security_scan_complete", scanned)
"#;

/// The user's auditor: every phase over the process protocol. It changes
/// `stamp`'s input (once: a second pass leaves it as it is).
const AUDITOR: &str = r#"
import json, sys

PHASES = ["on_activate", "on_deactivate", "on_conversation_start", "on_before_prompt_build",
          "before_tool_call", "after_tool_result", "on_after_response", "on_before_wiki_section",
          "on_security_scan_complete"]

def hook(params):
    phase, payload = params["phase"], params.get("payload") or {}
    if phase == "before_tool_call" and params.get("tool") == "stamp":
        text = payload["input"]["text"]
        if not text.endswith(" (audited)"):
            return {"payload": {"input": {"text": text + " (audited)"}}}
    if phase == "after_tool_result":
        return {"payload": {"result": {"output": payload["result"]["output"] + " [audited]"}}}
    if phase == "on_after_response":
        return {"payload": {"text": payload["text"] + " (audited)"}}
    if phase == "on_before_prompt_build":
        return {"payload": {"fragments": ["auditor: turn %d" % payload["turn"]]}}
    if phase == "on_before_wiki_section":
        return {"payload": {"context": ["auditor knows " + payload["section"]]}}
    return {}

for line in sys.stdin:
    request = json.loads(line)
    method, params = request["method"], request.get("params") or {}
    if method == "initialize":
        result = {"tools": [], "hooks": PHASES}
    elif method == "hook/handle":
        result = hook(params)
    else:
        result = None
    print(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}), flush=True)
    if method == "shutdown":
        break
"#;

/// The one parameter of `desk`'s tools.
const PARAMS: &str = "| Name | Type | Required | Default | Description |\n|---|---|---|---|---|\n\
                      | text | string | yes | | The text. |\n";

/// The skills: seed 002's examples, the watcher and `desk` (two tools
/// that always ask) bundled; the auditor the user's.
fn skills(bundled: &Path, user: &Path) {
    copy_tree(&checkout().join("examples/seed002"), bundled);
    std::fs::remove_file(bundled.join("README.md")).unwrap();
    write_file(
        &bundled.join("watcher/SKILL.yaml"),
        "name: watcher\nversion: 1.0.0\ndescription: Watches every phase.\ntypes: [tool, transform]\nread_only: true\n\
         triggers:\n  modes: [interactive]\npermissions: [shell:exec]\n\
         implementation:\n  backend: starlark\n  entrypoint: skill.star\n",
    );
    write_file(&bundled.join("watcher/skill.star"), WATCHER);
    write_file(
        &bundled.join("desk/SKILL.md"),
        &format!(
            "---\nname: desk\nversion: 1.0.0\ndescription: Publishes and stamps texts.\nalways_ask: true\n---\n\n\
         ### publish\n\nPublishes a text.\n\n#### Parameters\n\n{PARAMS}\n\
         #### Command\n\n```\necho published: {{{{text}}}}\n```\n\n\
         ### stamp\n\nStamps a text.\n\n#### Parameters\n\n{PARAMS}\n\
         #### Command\n\n```\necho stamped: {{{{text}}}}\n```\n"
        ),
    );
    write_file(
        &user.join("auditor/SKILL.yaml"),
        "name: auditor\nversion: 1.0.0\ndescription: Audits every phase.\ntypes: [transform]\n\
         triggers:\n  modes: [interactive]\npermissions: [shell:exec]\n\
         implementation:\n  backend: process\n  entrypoint: main.py\n",
    );
    write_file(&user.join("auditor/main.py"), AUDITOR);
}

/// A project with a Kubernetes deployment and an RFC.
fn project(dir: &Path) {
    write_file(&dir.join("deploy/deployment.yaml"), "kind: Deployment\n");
    write_file(&dir.join("rfcs/0001-sessions.md"), "# RFC: sessions\n");
    write_file(&dir.join("README.md"), "# a project\n");
}

struct World {
    server: TestServer,
    _dirs: Vec<tempfile::TempDir>,
}

async fn world(sessions: (SessionSettings, u32)) -> World {
    world_with(sessions, None).await
}

async fn world_with(
    (sessions, shell_execs): (SessionSettings, u32),
    auth: Option<skilld::auth::Auth>,
) -> World {
    let (bundled, user, workspace) = (tempdir().unwrap(), tempdir().unwrap(), tempdir().unwrap());
    skills(bundled.path(), user.path());
    project(workspace.path());
    let mut settings = RunSettings {
        workspace: workspace.path().to_path_buf(),
        ..RunSettings::default()
    };
    settings.turn_limits.shell_execs_per_turn = shell_execs;
    let server = TestServer::builder(options(vec![
        root(bundled.path(), Trust::Bundled),
        root(user.path(), Trust::User),
    ]))
    .settings(settings)
    .sessions(sessions);
    let server = match auth {
        Some(auth) => server.auth(auth),
        None => server,
    }
    .start()
    .await;
    World {
        server,
        _dirs: vec![bundled, user, workspace],
    }
}

fn settings(shell_execs: u32) -> (SessionSettings, u32) {
    let sessions = SessionSettings {
        approved_skills: vec!["auditor".to_owned(), "watcher".to_owned()],
        ..SessionSettings::default()
    };
    (sessions, shell_execs)
}

impl World {
    /// A request as the session's caller makes it: with the secret of the
    /// session its path or body names.
    fn req(&self, method: reqwest::Method, path: &str, body: &Value) -> reqwest::RequestBuilder {
        let req = Api::of(&self.server).req(method, path);
        match secret_for(path, body) {
            Some(secret) => req.header("Skilld-Session-Secret", secret),
            None => req,
        }
    }

    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let body = self.named(path, body).await;
        let res = self
            .req(reqwest::Method::POST, path, &body)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        let answer = res.json().await.unwrap_or(Value::Null);
        if path == "/sessions" {
            remember(&answer);
        }
        (status, answer)
    }

    /// A session as its caller reads it.
    async fn get(&self, path: &str) -> Value {
        let res = self
            .req(reqwest::Method::GET, path, &Value::Null)
            .send()
            .await
            .unwrap();
        res.json().await.unwrap()
    }

    /// A decision's body naming the request that waits now, unless it
    /// names one already.
    async fn named(&self, path: &str, body: Value) -> Value {
        let Some((session, skill_name)) = path
            .strip_prefix("/sessions/")
            .and_then(|rest| rest.split_once("/activations/"))
        else {
            return body;
        };
        if !body["request"].is_null() || !body.is_object() {
            return body;
        }
        let view = self.get(&format!("/sessions/{session}")).await;
        if view["skills"]
            .as_array()
            .is_some_and(|s| s.iter().any(|s| s["name"] == skill_name))
        {
            decision(&view, skill_name, body)
        } else {
            body
        }
    }

    async fn ok(&self, path: &str, body: Value) -> Value {
        let (status, answer) = self.post(path, body).await;
        assert!(status == 200 || status == 201, "{path}: {status} {answer}");
        answer
    }

    async fn invoke(&self, tool: &str, session: &str, arguments: Value, wait: u64) -> (u16, Value) {
        let body = json!({"arguments": arguments, "session": session});
        self.post(&format!("/tools/{tool}/invoke?wait={wait}"), body)
            .await
    }
}

fn skill<'a>(view: &'a Value, name: &str) -> &'a Value {
    let skills = view["skills"].as_array().unwrap();
    skills
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("{name} not in {view}"))
}

/// The (skill, phase, effect) of each hook a request ran, in order.
fn ran(view: &Value) -> Vec<(String, String, String)> {
    view["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            let s = |k: &str| h[k].as_str().unwrap_or_default().to_owned();
            (s("skill"), s("phase"), s("effect"))
        })
        .collect()
}

#[tokio::test]
async fn a_whole_session_runs_seed_002s_example_skills() {
    let w = world(settings(3)).await;
    let id = started(&w).await;
    not_yet_then_allowed(&w, &id).await;
    turned(&w, &id).await;
    seen_by_hooks(&w, &id).await;
    chained(&w, &id).await;
    limited(&w, &id).await;
    ended(&w, &id).await;
}

async fn started(w: &World) -> String {
    // Start: the project's files fire kubernetes (deploy/deployment.yaml)
    // and rfc-writer (rfcs/*.md); both declare permissions and wait for a
    // person. The watcher and auditor (allowed by the configuration)
    // activate by the mode, and their hooks run.
    let started = w
        .ok(
            "/sessions",
            json!({"path": ".", "mode": "interactive", "explicit": ["desk"]}),
        )
        .await;
    let id = started["id"].as_str().unwrap().to_owned();
    // The whole view: kubernetes (by its file trigger, asking for
    // file:read) and rfc-writer activating, the watcher active as
    // configured, desk active as asked, and the hooks that ran.
    redacted().bind(|| assert_json_snapshot!("whole_session_started", plain(&started)));
    let hooks = ran(&started);
    for who in ["watcher", "auditor"] {
        for phase in ["on_activate", "on_conversation_start"] {
            assert!(
                hooks.iter().any(|(s, p, _)| s == who && p == phase),
                "{who} {phase} not in {hooks:?}"
            );
        }
    }

    id
}

async fn not_yet_then_allowed(w: &World, id: &str) {
    // A tool of a skill not yet active cannot be called in the session.
    let (status, problem) = w.invoke("k8s_check", id, json!({"manifest": MANIFEST}), 0).await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (409, Some("skill_not_active")),
        "{problem}"
    );

    // The person allows kubernetes once and rfc-writer always.
    let path = |skill: &str| format!("/sessions/{id}/activations/{skill}");
    let allowed = w.ok(&path("kubernetes"), json!({"decision": "allow_once"})).await;
    assert_eq!(skill(&allowed, "kubernetes")["state"], "active", "{allowed}");
    assert_eq!(skill(&allowed, "kubernetes")["allowed"], "once");
    let allowed = w
        .ok(&path("rfc-writer"), json!({"decision": "allow_always"}))
        .await;
    assert_eq!(skill(&allowed, "rfc-writer")["allowed"], "always");
    let (status, again) = w.post(&path("rfc-writer"), json!({"decision": "deny"})).await;
    assert_eq!(
        (status, again["code"].as_str()),
        (409, Some("not_activating")),
        "{again}"
    );
}

async fn turned(w: &World, id: &str) {
    // A turn whose message names an aggregate activates ddd-expert by
    // keyword (it declares nothing: no one is asked). The prompt holds
    // the active skills' instructions, ddd-expert's context files cut to
    // its budget, and the hooks' fragments.
    let turn = w
        .ok(
            &format!("/sessions/{id}/turns"),
            json!({"message": "Model the order aggregate, then write an rfc for it"}),
        )
        .await;
    let ddd = skill(&turn["session"], "ddd-expert");
    assert_eq!(ddd["state"], "active", "{turn}");
    assert_eq!(ddd["trigger"], json!({"kind": "keyword", "value": "aggregate"}));
    let prompt = turn["prompt"].as_array().unwrap();
    let text_of = |skill: &str, source: &str| -> Vec<String> {
        prompt
            .iter()
            .filter(|f| f["skill"] == skill && f["source"] == source)
            .map(|f| f["text"].as_str().unwrap().to_owned())
            .collect()
    };
    let ddd_text = text_of("ddd-expert", "instructions").concat();
    assert!(ddd_text.contains("Bounded context"), "{ddd_text}");
    assert!(
        !ddd_text.contains("Pattern 59"),
        "the budget was not kept: {ddd_text}"
    );
    assert!(
        text_of("kubernetes", "instructions")
            .concat()
            .contains("kubectl apply")
    );
    assert_eq!(
        text_of("rfc-writer", "hook"),
        ["Number new RFCs as RFC-NNNN, after the highest in rfcs/."]
    );
    assert_eq!(text_of("watcher", "hook"), ["watcher: turn 1"]);
    assert_eq!(text_of("auditor", "hook"), ["auditor: turn 1"]);
    let tools: Vec<&str> = turn["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for tool in ["k8s_check", "rfc_outline", "draft_rfc", "spin", "publish"] {
        assert!(tools.contains(&tool), "{tool} not in {tools:?}");
    }
}

async fn seen_by_hooks(w: &World, id: &str) {
    // A tool call in the session: the watcher's and the auditor's hooks
    // see it, bundled before user.
    let (status, checked) = w.invoke("k8s_check", id, json!({"manifest": MANIFEST}), 0).await;
    assert_eq!(status, 200, "{checked}");
    assert!(
        checked["output"]
            .as_str()
            .unwrap()
            .ends_with(" [watched] [audited]"),
        "{checked}"
    );
    let order: Vec<(String, String)> = checked["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["skill"].as_str().unwrap().to_owned(),
                h["phase"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expected = [
        ("watcher", "before_tool_call"),
        ("auditor", "before_tool_call"),
        ("watcher", "after_tool_result"),
        ("auditor", "after_tool_result"),
    ];
    assert_eq!(
        order,
        expected.map(|(s, p)| (s.to_owned(), p.to_owned())),
        "{checked}"
    );
}

async fn chained(w: &World, id: &str) {
    // The transform chain, in priority order: rfc-writer's house style
    // and the watcher (bundled, by name), then the auditor (user).
    let answered = w
        .ok(
            &format!("/sessions/{id}/responses"),
            json!({"text": "see the rfc draft"}),
        )
        .await;
    assert_eq!(
        answered["text"], "see the RFC draft (watched) (audited)",
        "{answered}"
    );
}

async fn limited(w: &World, id: &str) {
    // The per-turn limit: three shell execs this turn, then refused.
    let (_, spun) = w.invoke("spin", id, json!({"n": 3}), 0).await;
    assert_eq!(spun["parsed"], 3, "{spun}");
    let (_, spent) = w.invoke("spin", id, json!({"n": 1}), 0).await;
    assert!(
        spent["error"]
            .as_str()
            .unwrap_or_default()
            .contains("shell_execs_per_turn"),
        "{spent}"
    );
    w.ok(&format!("/sessions/{id}/turns"), json!({"message": "next"}))
        .await;
    let (_, fresh) = w.invoke("spin", id, json!({"n": 2}), 0).await;
    assert_eq!(fresh["parsed"], 2, "a new turn has a new budget: {fresh}");
}

async fn ended(w: &World, id: &str) {
    // The end: the session is gone, and so are its calls.
    let res = w
        .req(reqwest::Method::DELETE, &format!("/sessions/{id}"), &Value::Null)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 204);
    let (status, gone) = w.invoke("k8s_check", id, json!({"manifest": MANIFEST}), 0).await;
    assert_eq!(
        (status, gone["code"].as_str()),
        (404, Some("session_not_found")),
        "{gone}"
    );
}

#[tokio::test]
async fn a_workflow_calls_two_tools_through_the_pipeline_one_of_them_held() {
    let w = world(settings(10)).await;
    let started = w
        .ok(
            "/sessions",
            json!({"path": ".", "mode": "interactive", "explicit": ["desk"]}),
        )
        .await;
    let id = started["id"].as_str().unwrap().to_owned();
    w.ok(
        &format!("/sessions/{id}/activations/rfc-writer"),
        json!({"decision": "allow_once"}),
    )
    .await;
    // The workflow runs at once (a bundled skill's tool); its second call,
    // `publish`, always asks: it waits for the person inside the workflow.
    let body = json!({"arguments": {"title": "Sessions", "publish_with": "publish"}, "session": id});
    let res = w
        .req(reqwest::Method::POST, "/tools/draft_rfc/invoke", &body)
        .header("Prefer", "respond-async")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 202);
    let started_run: Value = res.json().await.unwrap();
    let held = pending_of(&w, "publish").await;
    assert!(
        held["arguments"]["text"]
            .as_str()
            .unwrap()
            .contains("# RFC: Sessions"),
        "{held}"
    );
    let approval = held["id"].as_str().unwrap();
    let (status, _) = w
        .post(
            &format!("/approvals/{approval}/approve"),
            json!({"scope": "once"}),
        )
        .await;
    assert_eq!(status, 200);
    let run_id = started_run["run_id"].as_str().unwrap();
    let run = w.server.get_json(&format!("/runs/{run_id}?wait=60")).await;
    let result = &run["result"]["parsed"];
    assert_eq!(run["status"], "succeeded", "{run}");
    assert_eq!(
        result["steps"][0],
        json!({"tool": "rfc_outline", "success": true}),
        "{run}"
    );
    assert_eq!(result["steps"][1]["tool"], "publish");
    assert_eq!(result["steps"][1]["success"], true, "{run}");
    // Each call the workflow made is in the run log, in the session.
    let runs = w.server.get_json(&format!("/runs?session={id}")).await;
    let tools: Vec<&str> = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["tool"].as_str().unwrap())
        .collect();
    for tool in ["draft_rfc", "rfc_outline", "publish"] {
        assert!(tools.contains(&tool), "{tool} not in {tools:?}");
    }
}

/// The request of `tool` waiting for a person.
async fn pending_of(w: &World, tool: &str) -> Value {
    for _ in 0..100 {
        let list = w.server.get_json("/approvals?status=pending").await;
        let found = list["approvals"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["tool"] == tool)
            .cloned();
        if let Some(found) = found {
            return found;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("no request of {tool} came");
}

#[tokio::test]
async fn a_hook_that_changes_an_approved_input_sends_the_call_back_to_a_person() {
    let w = world(settings(10)).await;
    let started = w
        .ok("/sessions", json!({"mode": "interactive", "explicit": ["desk"]}))
        .await;
    let id = started["id"].as_str().unwrap().to_owned();
    // `stamp` always asks; the person approves "draft".
    let (status, held) = w.invoke("stamp", &id, json!({"text": "draft"}), 0).await;
    assert_eq!(status, 202, "{held}");
    assert_eq!(held["status"], "pending_approval");
    let approval = held["approval_id"].as_str().unwrap();
    w.ok(
        &format!("/approvals/{approval}/approve"),
        json!({"scope": "once"}),
    )
    .await;
    // The auditor's hook changes the input to "draft (audited)", which no
    // one approved: that run ends, and the changed call waits again.
    let first = w
        .server
        .get_json(&format!("/runs/{}?wait=30", held["run_id"].as_str().unwrap()))
        .await;
    assert_eq!(first["status"], "cancelled", "{first}");
    let again = pending_of(&w, "stamp").await;
    assert_eq!(again["arguments"], json!({"text": "draft (audited)"}), "{again}");
    assert_ne!(again["id"], held["approval_id"]);
    // Approved as changed, the hooks leave it as it is: it runs.
    let approval = again["id"].as_str().unwrap();
    w.ok(
        &format!("/approvals/{approval}/approve"),
        json!({"scope": "once"}),
    )
    .await;
    let run = w
        .server
        .get_json(&format!("/runs/{}?wait=30", again["run_id"].as_str().unwrap()))
        .await;
    assert_eq!(run["status"], "succeeded", "{run}");
    assert!(
        run["result"]["output"]
            .as_str()
            .unwrap()
            .starts_with("stamped: draft (audited)"),
        "{run}"
    );
}

#[tokio::test]
async fn every_phase_runs_on_both_backends() {
    let w = world(settings(10)).await;
    let started = w.ok("/sessions", json!({"mode": "interactive"})).await;
    let id = started["id"].as_str().unwrap().to_owned();
    let mut seen: Vec<(String, String, String)> = ran(&started);
    let turn = w
        .ok(&format!("/sessions/{id}/turns"), json!({"message": "hello"}))
        .await;
    seen.extend(ran(&turn["session"]));
    let (_, spun) = w.invoke("spin", &id, json!({"n": 0}), 0).await;
    for h in spun["hooks"].as_array().unwrap() {
        let s = |k: &str| h[k].as_str().unwrap_or_default().to_owned();
        seen.push((s("skill"), s("phase"), s("effect")));
    }
    let answered = w
        .ok(&format!("/sessions/{id}/responses"), json!({"text": "t"}))
        .await;
    seen.extend(ran(&answered));
    let wiki = w
        .ok(&format!("/sessions/{id}/wiki-sections/overview"), json!({}))
        .await;
    assert_eq!(
        wiki["context"],
        json!(["watcher knows overview", "auditor knows overview"]),
        "{wiki}"
    );
    seen.extend(ran(&wiki));
    let scanned = w.ok("/scan", json!({"path": "."})).await;
    for h in scanned["hooks"].as_array().into_iter().flatten() {
        let s = |k: &str| h[k].as_str().unwrap_or_default().to_owned();
        seen.push((s("skill"), "on_security_scan_complete".to_owned(), s("effect")));
    }
    let off = w
        .ok(
            &format!("/sessions/{id}/turns"),
            json!({"deactivate": ["watcher", "auditor"]}),
        )
        .await;
    seen.extend(ran(&off["session"]));
    for who in ["watcher", "auditor"] {
        for phase in PHASES {
            assert!(
                seen.iter()
                    .any(|(s, p, e)| s == who && p == phase && e != "failed"),
                "{who}'s {phase} did not run: {seen:?}"
            );
        }
    }
    // Deactivated by the caller, a skill stays off though its trigger
    // (the mode) still fires.
    let later = w
        .ok(&format!("/sessions/{id}/turns"), json!({"message": "again"}))
        .await;
    assert_eq!(
        skill(&later["session"], "watcher")["state"],
        "inactive",
        "{later}"
    );
}

#[tokio::test]
async fn a_session_is_its_callers_and_only_another_person_allows_its_skills() {
    let w = world_with(settings(10), Some(tokens())).await;
    let api = Api::of(&w.server);
    let (agent, boss, carol) = (api.as_(AGENT), api.as_(BOSS), api.as_(CAROL));
    let (status, started) = agent.post("/sessions", json!({"path": "."})).await;
    assert_eq!(status, 201, "{started}");
    let id = started["id"].as_str().unwrap();
    // The whole view: kubernetes and rfc-writer activating (each with the
    // permissions a person grants), the configured skills active, the
    // hooks that ran.
    redacted().bind(|| assert_json_snapshot!("agent_session_started", plain(&started)));
    another_caller_finds_nothing(&carol, id).await;
    // The agent cannot allow its own session's skills: it has no approve
    // role, and a person with one who opened the session cannot either.
    let decide = format!("/sessions/{id}/activations/kubernetes");
    let (status, _) = agent.post(&decide, json!({"decision": "allow_always"})).await;
    assert_eq!(status, 403);
    let (_, own) = boss.post("/sessions", json!({"path": "."})).await;
    let own_id = own["id"].as_str().unwrap();
    let (status, refused) = boss
        .post(
            &format!("/sessions/{own_id}/activations/kubernetes"),
            decision(&own, "kubernetes", json!({"decision": "allow_once"})),
        )
        .await;
    assert_eq!(status, 403, "{refused}");
    redacted().bind(|| assert_json_snapshot!("self_approval_problem", plain(&refused)));
    // An approver finds both requests, oldest first, each with its
    // session and caller; the agent may not read them.
    let (k8s, rfc) = ("kubernetes", "rfc-writer");
    let expected = [
        (id, "agent", k8s),
        (id, "agent", rfc),
        (own_id, "boss", k8s),
        (own_id, "boss", rfc),
    ];
    assert_eq!(waiting(&boss).await, expected.map(owned));
    let (status, _) = agent.get("/activations").await;
    assert_eq!(status, 403);
    // A person denies: the skill is in error with the reason, and its
    // tools are not callable in the session.
    let (status, denied) = boss
        .post(
            &decide,
            decision(
                &started,
                "kubernetes",
                json!({"decision": "deny", "note": "not today"}),
            ),
        )
        .await;
    assert_eq!(status, 200, "{denied}");
    // The whole view: kubernetes in error, the reason naming who denied
    // it and their note.
    redacted().bind(|| assert_json_snapshot!("agent_session_denied", plain(&denied)));
    assert_eq!(
        waiting(&boss).await,
        expected[1..].iter().copied().map(owned).collect::<Vec<_>>()
    );
    let (status, problem) = agent
        .post(
            "/tools/k8s_check/invoke",
            json!({"arguments": {"manifest": "kind: Pod"}, "session": id}),
        )
        .await;
    assert_eq!(status, 409, "{problem}");
    redacted().bind(|| assert_json_snapshot!("denied_skill_not_active_problem", plain(&problem)));
    // A denied skill stays in error: its trigger does not ask again.
    let (_, turn) = agent
        .post(
            &format!("/sessions/{id}/turns"),
            json!({"message": "kubectl please"}),
        )
        .await;
    assert_eq!(skill(&turn["session"], "kubernetes")["state"], "error", "{turn}");
}

/// Another caller sees no such session, and cannot call in it.
async fn another_caller_finds_nothing(carol: &Api, id: &str) {
    let (status, other) = carol.get(&format!("/sessions/{id}")).await;
    assert_eq!(status, 404, "{other}");
    redacted().bind(|| assert_json_snapshot!("other_callers_session_problem", plain(&other)));
    let (status, other) = carol
        .post(
            "/tools/rfc_outline/invoke",
            json!({"arguments": {"title": "x"}, "session": id}),
        )
        .await;
    assert_eq!(status, 404, "{other}");
    redacted().bind(|| assert_json_snapshot!("other_callers_session_call_problem", plain(&other)));
}

/// The approver's page: an invoke token sees that activations are not its
/// to decide; an approver sees both waiting skills with what allowing them
/// grants, denies one with a note and allows the other always, and the
/// session is as they decided.
#[tokio::test]
async fn an_approver_decides_activations_in_the_page() {
    let Some(harness) = crate::common::browser_harness() else {
        return;
    };
    let w = world_with(settings(10), Some(tokens())).await;
    let agent = Api::of(&w.server).as_(AGENT);
    let (_, started) = agent.post("/sessions", json!({"path": "."})).await;
    let id = started["id"].as_str().unwrap().to_owned();
    let env = [
        ("ACTIVATIONS_SESSION", id.as_str()),
        ("ACTIVATIONS_APPROVER", BOSS),
    ];
    let page = crate::common::Script::start(
        &harness,
        "activations.mjs",
        "ui-activations.png",
        &w.server,
        Some(AGENT),
        &env,
    );
    let seen = page.done().await;
    assert!(
        seen["refused_line"].as_str().unwrap().contains("approve"),
        "{seen}"
    );
    assert_eq!(seen["count"], "(2)", "{seen}");
    let k8s = &seen["seen"]["kubernetes"];
    assert_eq!(
        (&k8s["skill"], &k8s["trust"]),
        (&json!("kubernetes"), &json!("bundled")),
        "{seen}"
    );
    assert_eq!(k8s["permissions"], json!(["file:read"]), "{seen}");
    let facts = k8s["facts"].as_str().unwrap();
    assert!(
        facts.contains("file: **/deployment.yaml") && facts.contains(&id) && facts.contains("agent"),
        "{seen}"
    );
    assert_eq!(
        seen["seen"]["rfc"]["permissions"],
        json!(["skill:invoke"]),
        "{seen}"
    );

    let (_, now) = agent.get(&format!("/sessions/{id}")).await;
    assert_eq!(skill(&now, "kubernetes")["state"], "error", "{now}");
    assert_eq!(
        skill(&now, "kubernetes")["reason"],
        "denied by boss: not today",
        "{now}"
    );
    assert_eq!(
        (
            &skill(&now, "rfc-writer")["state"],
            &skill(&now, "rfc-writer")["allowed"]
        ),
        (&json!("active"), &json!("always")),
        "{now}"
    );
}

/// The activation requests `api` finds waiting, as (session, caller,
/// skill), in the order listed.
async fn waiting(api: &Api) -> Vec<(String, String, String)> {
    let (status, pending) = api.get("/activations").await;
    assert_eq!(status, 200, "{pending}");
    let items = pending["items"].as_array().unwrap();
    assert!(
        items
            .iter()
            .all(|p| p["permissions"].is_array() && p["trust"] == "bundled"),
        "{pending}"
    );
    items
        .iter()
        .map(|p| {
            let text = |key: &str| p[key].as_str().unwrap().to_owned();
            (text("session"), text("caller"), text("skill"))
        })
        .collect()
}

fn owned((a, b, c): (&str, &str, &str)) -> (String, String, String) {
    (a.to_owned(), b.to_owned(), c.to_owned())
}

#[tokio::test]
async fn sessions_are_bounded_per_caller_and_paths_stay_in_the_workspace() {
    let mut bounded = settings(10);
    bounded.0.max_per_caller = 2;
    let w = world(bounded).await;
    let workspace = w._dirs[2].path();
    std::os::unix::fs::symlink("/etc", workspace.join("etc-link")).unwrap();
    for (path, code) in [
        ("../", "bad_path"),
        ("/etc", "bad_path"),
        ("deploy/../../", "bad_path"),
        ("etc-link", "bad_path"),
        ("nowhere", "bad_path"),
    ] {
        let (status, problem) = w.post("/sessions", json!({"path": path})).await;
        assert_eq!(
            (status, problem["code"].as_str()),
            (422, Some(code)),
            "{path}: {problem}"
        );
    }
    // A link inside the project is not followed.
    let (_, started) = w.post("/sessions", json!({"path": "."})).await;
    let files = started["context"]["files"].as_array().unwrap();
    assert!(
        files.iter().all(|f| !f.as_str().unwrap().starts_with("etc-link")),
        "{started}"
    );
    assert!(files.contains(&json!("deploy/deployment.yaml")), "{started}");
    let (status, _) = w.post("/sessions", json!({})).await;
    assert_eq!(status, 201);
    let (status, problem) = w.post("/sessions", json!({})).await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (429, Some("too_many_requests")),
        "{problem}"
    );
    let (status, problem) = w.post("/sessions", json!({"explicit": ["nobody"]})).await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (422, Some("unknown_skill")),
        "{problem}"
    );
}

/// Every bound the request schemas give is kept: at the bound a request
/// is taken, one past it is refused (422 `invalid_session`) naming the
/// field, and the session is as it was.
#[tokio::test]
async fn every_bound_the_schemas_give_is_kept() {
    let w = world(settings(10)).await;
    let id = w.ok("/sessions", json!({})).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let s = |path: &str| format!("/sessions/{id}{path}");
    for (path, field, within, past) in bounded_bodies(&id) {
        if !within.is_null() {
            let (status, answer) = w.post(&path, within).await;
            assert!(
                status == 200 || status == 201,
                "{path} {field} at its bound: {status} {answer}"
            );
            if path == "/sessions" {
                let made = answer["id"].as_str().unwrap();
                remember(&answer);
                let res = w
                    .req(
                        reqwest::Method::DELETE,
                        &format!("/sessions/{made}"),
                        &Value::Null,
                    )
                    .send()
                    .await
                    .unwrap();
                assert_eq!(res.status(), 204);
            }
        }
        let (status, problem) = w.post(&path, past).await;
        assert_eq!(
            (status, problem["code"].as_str()),
            (422, Some("invalid_session")),
            "{path} {field} past its bound: {problem}"
        );
        assert_eq!(problem["errors"][0]["field"], field, "{problem}");
    }
    let (status, problem) = w.post(&s("/responses"), json!({})).await;
    assert_eq!(status, 400, "a response needs its text: {problem}");
    let turn = w.ok(&s("/turns"), json!({})).await["session"]["turn"].clone();
    assert_eq!(turn, 4, "the refused turns did not count: {turn}");
}

/// Each bounded field of the session routes: the path, the field, a body
/// at its bound (null: none to send) and one past it.
fn bounded_bodies(id: &str) -> Vec<(String, &'static str, Value, Value)> {
    let names = |n: usize| vec!["watcher"; n];
    let texts = |n: usize| vec!["x"; n];
    let s = |path: &str| format!("/sessions/{id}{path}");
    vec![
        (
            "/sessions".into(),
            "languages",
            json!({"languages": texts(100)}),
            json!({"languages": texts(101)}),
        ),
        (
            "/sessions".into(),
            "explicit",
            json!({"explicit": names(1000)}),
            json!({"explicit": names(1001)}),
        ),
        (
            "/sessions".into(),
            "files",
            json!({"files": texts(10_000)}),
            json!({"files": texts(10_001)}),
        ),
        (
            "/sessions".into(),
            "mode",
            json!({"mode": "m".repeat(64)}),
            json!({"mode": "m".repeat(65)}),
        ),
        (
            s("/turns"),
            "message",
            json!({"message": "é".repeat(100_000)}),
            json!({"message": "é".repeat(100_001)}),
        ),
        (
            s("/turns"),
            "activate",
            json!({"activate": names(1000)}),
            json!({"activate": names(1001)}),
        ),
        (
            s("/turns"),
            "deactivate",
            json!({"deactivate": names(1000)}),
            json!({"deactivate": names(1001)}),
        ),
        (
            s("/responses"),
            "text",
            json!({"text": "a".repeat(1_000_000)}),
            json!({"text": "a".repeat(1_000_001)}),
        ),
        (
            s("/wiki-sections/intro"),
            "context",
            json!({"context": texts(100)}),
            json!({"context": texts(101)}),
        ),
        (
            s(&format!("/wiki-sections/{}", "w".repeat(257))),
            "section",
            Value::Null,
            json!({}),
        ),
        (
            s("/activations/watcher"),
            "note",
            Value::Null,
            json!({"decision": "deny", "note": "n".repeat(4097)}),
        ),
    ]
}

/// A server over the skills and workspace of `dirs` (bundled, user,
/// workspace), its run log and sessions at `url`.
async fn instance(dirs: &[tempfile::TempDir], url: &str) -> World {
    let settings = RunSettings {
        workspace: dirs[2].path().to_path_buf(),
        ..RunSettings::default()
    };
    let server = TestServer::builder(options(vec![
        root(dirs[0].path(), Trust::Bundled),
        root(dirs[1].path(), Trust::User),
    ]))
    .settings(settings)
    .sessions(settings_of_the_tests())
    .database(url)
    .start()
    .await;
    World {
        server,
        _dirs: Vec::new(),
    }
}

fn settings_of_the_tests() -> SessionSettings {
    settings(10).0
}

#[tokio::test]
async fn a_session_survives_a_restart_and_a_second_instance_sees_it() {
    crate::common::on_postgres(|url| async move {
        let dirs = vec![tempdir().unwrap(), tempdir().unwrap(), tempdir().unwrap()];
        skills(dirs[0].path(), dirs[1].path());
        project(dirs[2].path());
        let a = instance(&dirs, &url).await;
        let started = a
            .ok("/sessions", json!({"path": ".", "mode": "interactive"}))
            .await;
        let id = started["id"].as_str().unwrap().to_owned();
        a.ok(
            &format!("/sessions/{id}/activations/kubernetes"),
            json!({"decision": "allow_once"}),
        )
        .await;
        // A second instance on the same store sees the session whole, and
        // takes its turns.
        let b = instance(&dirs, &url).await;
        let seen = b.get(&format!("/sessions/{id}")).await;
        assert_eq!(skill(&seen, "kubernetes")["state"], "active", "{seen}");
        assert_eq!(skill(&seen, "kubernetes")["allowed"], "once");
        let turn = b
            .ok(
                &format!("/sessions/{id}/turns"),
                json!({"message": "an aggregate"}),
            )
            .await;
        assert_eq!(skill(&turn["session"], "ddd-expert")["state"], "active", "{turn}");
        // The first instance calls in it, with every active skill's hooks.
        let (status, checked) = a.invoke("k8s_check", &id, json!({"manifest": MANIFEST}), 0).await;
        assert_eq!(status, 200, "{checked}");
        assert!(
            checked["output"]
                .as_str()
                .unwrap()
                .ends_with(" [watched] [audited]"),
            "{checked}"
        );
        // A restart keeps it.
        a.server.shutdown().await;
        let again = instance(&dirs, &url).await;
        let kept = again.get(&format!("/sessions/{id}")).await;
        assert_eq!(kept["turn"], 1, "{kept}");
        assert_eq!(skill(&kept, "ddd-expert")["state"], "active", "{kept}");
        let runs = again.server.get_json(&format!("/runs?session={id}")).await;
        assert_eq!(runs["runs"][0]["tool"], "k8s_check", "{runs}");
    })
    .await;
}

/// A skill that asks the session's model (`llm:call`).
const THINKER: &str = r#"
def think(args):
    return "the model says: " + llm(args["question"], system = "Answer briefly.", max_tokens = 64)

register_tool("think", "Asks the model.", {"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]}, think)
"#;

/// A server of one bundled Starlark skill `name`, triggered by the
/// keyword `keyword`, declaring `permission` and allowed without asking.
async fn alone(name: &str, keyword: &str, permission: &str, script: &str, ttl_secs: u64) -> World {
    let skills = tempdir().unwrap();
    write_file(
        &skills.path().join(format!("{name}/SKILL.yaml")),
        &format!(
            "name: {name}\nversion: 1.0.0\ndescription: One skill alone.\ntypes: [tool]\nread_only: true\n\
             triggers:\n  keywords: [{keyword}]\npermissions: [{permission}]\n\
             implementation:\n  backend: starlark\n  entrypoint: skill.star\n"
        ),
    );
    write_file(&skills.path().join(format!("{name}/skill.star")), script);
    let sessions = SessionSettings {
        approved_skills: vec![name.to_owned()],
        ttl_secs,
        ..SessionSettings::default()
    };
    World {
        server: TestServer::builder(options(vec![root(skills.path(), Trust::Bundled)]))
            .sessions(sessions)
            .start()
            .await,
        _dirs: vec![skills],
    }
}

/// A new session whose turn `message` activated `skill`: its id.
async fn activated(w: &World, message: &str, skill_name: &str) -> String {
    let id = w.ok("/sessions", json!({})).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let turn = w
        .ok(&format!("/sessions/{id}/turns"), json!({"message": message}))
        .await;
    assert_eq!(skill(&turn["session"], skill_name)["state"], "active", "{turn}");
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_mcp_a_call_names_its_session_and_llm_is_the_clients_sampling() {
    let w = alone("thinker", "think", "llm:call", THINKER, 3600).await;
    let base = w.server.url("");
    crate::common::run_script(
        "mcp_sessions.py",
        &[base.trim_end_matches('/')],
        &[],
        std::time::Duration::from_secs(120),
    )
    .await;
}

/// On MCP 2026-07-28 a request stands alone: the server cannot send the
/// client a sampling request in the middle of it, even when the client
/// says it samples. A call in a session still runs there, and the skill's
/// `llm()` fails saying why instead of waiting for an answer.
#[tokio::test]
async fn on_the_stateless_protocol_llm_fails_clearly() {
    let w = alone("thinker", "think", "llm:call", THINKER, 3600).await;
    let id = activated(&w, "think", "thinker").await;
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"sampling": {}},
        "skilld/session": id,
        "skilld/session-secret": secret(&id),
    });
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "think", "arguments": {"question": "why?"}, "_meta": meta}});
    let res = Api::of(&w.server)
        .req(reqwest::Method::POST, "/mcp")
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", "think")
        .body(body.to_string())
        .send();
    let res = tokio::time::timeout(std::time::Duration::from_secs(30), res)
        .await
        .expect("the call waited for a model that cannot answer")
        .unwrap();
    assert_eq!(res.status(), 200);
    let text = res.text().await.unwrap();
    let answer: Value = text
        .lines()
        .map(|l| l.strip_prefix("data:").unwrap_or(l).trim())
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .next_back()
        .unwrap_or_else(|| panic!("no message in {text}"));
    let result = &answer["result"];
    assert_eq!(result["isError"], true, "{answer}");
    let said = result["content"][0]["text"].as_str().unwrap_or_default();
    assert!(said.contains("llm: no model"), "{answer}");
    // The run is in the session's log, failed, with the reason.
    let runs = w.server.get_json(&format!("/runs?session={id}")).await;
    assert_eq!(runs["runs"][0]["status"], "failed", "{runs}");
}

/// A session past its time is ended by the sweep: it is gone, and its
/// active skills' `on_deactivate` hooks ran, told it expired.
#[tokio::test]
async fn an_expired_session_tells_its_active_skills() {
    let marks = crate::common::marks_dir();
    let dir = marks.path().display().to_string();
    let script = format!(
        r#"
def leave(payload):
    exec("touch", ["{dir}/" + payload["skill"] + "-expired-" + str(payload.get("expired", False))])
    return {{}}

def noop(args):
    return "ok"

register_tool("noop", "Does nothing.", {{"type": "object"}}, noop)
register_hook("on_deactivate", leave)
"#
    );
    let w = alone("leaver", "hello", "shell:exec", &script, 1).await;
    let id = activated(&w, "hello", "leaver").await;
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    // The sweep runs every 30 s; a test need not wait for it.
    w.server.sessions.sweep().await;
    assert!(
        marks.path().join("leaver-expired-True").is_file(),
        "on_deactivate did not run"
    );
    let res = Api::of(&w.server)
        .req(reqwest::Method::GET, &format!("/sessions/{id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
}
