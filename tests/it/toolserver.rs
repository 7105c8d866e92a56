//! The typed tool server: `GET /tools/openapi.json` has one operation per
//! tool, and `POST /tools/{tool}/call` takes the arguments as its body.
//! A client generated from that document calls a tool as a typed function
//! (`tests/python/use_tool_server.py`).

use crate::common::{Api, TestServer, options, root, run_script, show, venv};
use serde_json::{Value, json};
use skilld::auth::{Auth, Role, Token};
use skilld::skill::Trust;
use std::path::Path;
use std::time::Duration;

const AGENT: &str = "tools-agent-secret-0123456789";
const BOSS: &str = "tools-boss-secret-0123456789";
const READER: &str = "tools-reader-secret-0123456789";

fn tokens() -> Auth {
    Auth::new(vec![
        Token::with_secret("agent", Role::Invoke, AGENT, "test").unwrap(),
        Token::with_secret("boss", Role::Approve, BOSS, "test").unwrap(),
        Token::with_secret("reader", Role::Read, READER, "test").unwrap(),
    ])
    .unwrap()
}

/// `repeat` (read-only, runs at once) and `stamp` (asks every time).
fn skills(dir: &Path) {
    crate::common::write_file(
        &dir.join("repeat/SKILL.md"),
        "---\nname: repeat\nversion: 1.0.0\ndescription: Repeats a word.\nread_only: true\n---\n\n\
         ### repeat\n\nPrints a word a number of times.\n\n#### Parameters\n\n\
         | Name | Type | Required | Default | Description |\n|---|---|---|---|---|\n\
         | word | string | yes | | The word. |\n| times | integer | no | 2 | How often. |\n\n\
         #### Command\n\n```\nsh -c 'for i in $(seq \"$1\"); do echo \"$0\"; done' {{word}} {{times}}\n```\n",
    );
    crate::common::stamp_skill(dir);
}

async fn post(server: &TestServer, path: &str, token: &str, body: Value) -> (u16, Value) {
    Api::new(server.url(""), Some(token)).post(path, body).await
}

#[tokio::test]
async fn one_typed_operation_per_tool_and_only_invoke_role_ones() {
    let dir = crate::common::tempdir().unwrap();
    skills(dir.path());
    let server = TestServer::builder(options(vec![root(dir.path(), Trust::Bundled)]))
        .auth(tokens())
        .start()
        .await;
    let res = reqwest::Client::new()
        .get(server.url("/tools/openapi.json"))
        .bearer_auth(READER)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let doc: Value = res.json().await.unwrap();
    let paths: Vec<&String> = doc["paths"].as_object().unwrap().keys().collect();
    assert_eq!(paths, ["/tools/repeat/call", "/tools/stamp/call"]);
    let op = &doc["paths"]["/tools/repeat/call"]["post"];
    assert_eq!(op["operationId"], "repeat");
    let schema = &op["requestBody"]["content"]["application/json"]["schema"];
    assert_eq!(schema["required"], json!(["word"]));
    assert_eq!(schema["properties"]["times"]["default"], 2);
    assert_eq!(
        op["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/Envelope"
    );
    for name in ["Envelope", "InvokeAccepted", "Problem"] {
        assert!(doc["components"]["schemas"].get(name).is_some(), "{name}");
    }
    // Every $ref resolves inside the document.
    let text = doc.to_string();
    for part in text.split("\"#/components/schemas/").skip(1) {
        let name = part.split('"').next().unwrap();
        assert!(
            doc["components"]["schemas"].get(name).is_some(),
            "dangling $ref {name}"
        );
    }
    // Only calls: nothing that approves, cancels or reloads.
    for item in doc["paths"].as_object().unwrap().values() {
        let methods: Vec<&String> = item.as_object().unwrap().keys().collect();
        assert_eq!(methods, ["post"]);
    }

    let (status, envelope) = post(&server, "/tools/repeat/call", AGENT, json!({"word": "hi"})).await;
    assert_eq!(
        (status, envelope["output"].as_str()),
        (200, Some("hi\nhi\n")),
        "{envelope}"
    );
    let (status, problem) = post(
        &server,
        "/tools/repeat/call",
        AGENT,
        json!({"word": "hi", "times": "x"}),
    )
    .await;
    assert_eq!(status, 422, "{problem}");
    let (status, problem) = post(&server, "/tools/repeat/call", READER, json!({"word": "hi"})).await;
    assert_eq!(status, 403, "a read token lists but cannot call: {problem}");
    let (status, problem) = post(&server, "/tools/nope/call", AGENT, json!({})).await;
    assert_eq!(status, 404, "{problem}");
    let out = crate::common::marks_dir();
    let marker = out.path().join("stamps");
    let (status, held) = post(&server, "/tools/stamp/call", AGENT, json!({"path": marker})).await;
    assert_eq!(
        (status, held["status"].as_str()),
        (202, Some("pending_approval")),
        "{held}"
    );
    assert!(!marker.exists(), "nothing ran while held");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_generated_from_it_calls_tools_as_typed_functions() {
    let dir = crate::common::tempdir().unwrap();
    skills(dir.path());
    let server = TestServer::builder(options(vec![root(dir.path(), Trust::Bundled)]))
        .auth(tokens())
        .start()
        .await;
    let doc = reqwest::Client::new()
        .get(server.url("/tools/openapi.json"))
        .bearer_auth(READER)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let venv = venv();
    let tmp = crate::common::tempdir().unwrap();
    let spec = tmp.path().join("tools.json");
    std::fs::write(&spec, doc).unwrap();
    std::fs::write(tmp.path().join("config.yaml"), "post_hooks: []\n").unwrap();
    let generated = std::process::Command::new(venv.join("bin/openapi-python-client"))
        .current_dir(tmp.path())
        .args(["generate", "--path"])
        .arg(&spec)
        .args(["--output-path"])
        .arg(tmp.path().join("skilld_tools"))
        .args(["--meta", "none", "--fail-on-warning", "--config"])
        .arg(tmp.path().join("config.yaml"))
        .output()
        .unwrap();
    assert!(generated.status.success(), "{}", show(&generated));
    let out = crate::common::marks_dir();
    let (pythonpath, marker) = (
        tmp.path().display().to_string(),
        out.path().join("stamps").display().to_string(),
    );
    let env = [
        ("PYTHONPATH", pythonpath.as_str()),
        ("SKILLD_TEST_AGENT", AGENT),
        ("SKILLD_TEST_BOSS", BOSS),
        ("SKILLD_TEST_MARKER", marker.as_str()),
    ];
    let base = server.url("");
    run_script(
        "use_tool_server.py",
        &[base.trim_end_matches('/')],
        &env,
        Duration::from_secs(120),
    )
    .await;
}
