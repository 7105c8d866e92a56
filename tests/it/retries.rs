//! Retries file nothing twice (issue 26, "a retry does not file a new
//! request"): a held call retried by the same caller joins its pending
//! request, over HTTP and MCP, until the call differs (arguments, caller,
//! the skill's files); and an `Idempotency-Key` answers a retry with the
//! run its key made, whatever became of it, even when the retries race.
//! Every test counts what was recorded and what ran.

use crate::common::{Api, TestServer, options, root};
use serde_json::{Value, json};
use skilld::auth::{Auth, Role, Token};
use skilld::invoke::RunSettings;
use skilld::skill::Trust;
use skilld::store::Stores;
use std::path::Path;

const AGENT: &str = "agent-secret-0123456789";
const OTHER: &str = "other-secret-0123456789";
const BOSS: &str = "boss-secret-0123456789";

fn tokens() -> Auth {
    Auth::new(vec![
        Token::with_secret("agent", Role::Invoke, AGENT, "test").unwrap(),
        Token::with_secret("other", Role::Invoke, OTHER, "test").unwrap(),
        Token::with_secret("boss", Role::Admin, BOSS, "test").unwrap(),
    ])
    .unwrap()
}

/// A skill whose tool `mark` is held for a person (it is not read-only)
/// and appends a line to the file `path` when it runs; and a read-only
/// tool `run_sh` that runs at once.
fn skills(dir: &Path) {
    mark_skill(dir, "");
    crate::common::one_tool_skill(dir, "run_sh", "", "code", "sh -c {{code}}");
}

fn mark_skill(dir: &Path, extra: &str) {
    crate::common::write_file(
        &dir.join("mark").join("SKILL.md"),
        &format!(
            "---\nname: mark\nversion: 1.0.0\ndescription: Leaves a mark.{extra}\n---\n\n### mark\n\n\
             Appends a line to a file.\n\n#### Parameters\n\n| Name | Type | Required | Description |\n\
             |---|---|---|---|\n| path | string | yes | The file. |\n\n#### Command\n\n\
             ```\nsh -c 'echo ran >> \"$0\"; echo marked' {{{{path}}}}\n```\n"
        ),
    );
}

/// How many times `mark` wrote to `path`.
fn marks(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |s| s.lines().count())
}

/// A server with the skills of [`skills`] and tokens, its skills' directory,
/// and a directory the tools may write to.
struct Fixture {
    server: TestServer,
    skills: tempfile::TempDir,
    out: tempfile::TempDir,
}

async fn fixture() -> Fixture {
    let data = crate::common::tempdir().unwrap();
    let store = crate::common::test_store(data.path()).await;
    fixture_on(store, data).await
}

/// The fixture on a given run log (PostgreSQL's, say).
async fn fixture_on(store: Stores, data: tempfile::TempDir) -> Fixture {
    let dir = crate::common::tempdir().unwrap();
    skills(dir.path());
    let opts = options(vec![root(dir.path(), Trust::Bundled)]);
    let server = TestServer::builder(opts)
        .settings(RunSettings::default())
        .store(store, data)
        .auth(tokens())
        .start()
        .await;
    Fixture {
        server,
        skills: dir,
        out: crate::common::marks_dir(),
    }
}

impl Fixture {
    fn file(&self, name: &str) -> String {
        self.out.path().join(name).display().to_string()
    }

    /// `POST path` with `body` as the holder of `secret`, with `headers`.
    async fn post(&self, secret: &str, path: &str, body: Value, headers: &[(&str, &[u8])]) -> (u16, Value) {
        let mut req = reqwest::Client::new()
            .post(self.server.url(path))
            .bearer_auth(secret)
            .json(&body);
        for (name, value) in headers {
            req = req.header(*name, reqwest::header::HeaderValue::from_bytes(value).unwrap());
        }
        let res = req.send().await.unwrap();
        let status = res.status().as_u16();
        if status >= 400 {
            assert_eq!(res.headers()["content-type"], "application/problem+json");
        }
        (status, res.json().await.unwrap_or(Value::Null))
    }

    /// A call of `tool` with `arguments`, and `Idempotency-Key: key` if given.
    async fn call(&self, secret: &str, tool: &str, arguments: Value, key: Option<&str>) -> (u16, Value) {
        let headers: Vec<(&str, &[u8])> = key
            .map(|k| ("Idempotency-Key", k.as_bytes()))
            .into_iter()
            .collect();
        let path = format!("/tools/{tool}/invoke");
        self.post(secret, &path, json!({ "arguments": arguments }), &headers)
            .await
    }

    async fn get(&self, path: &str) -> Value {
        let res = reqwest::Client::new()
            .get(self.server.url(path))
            .bearer_auth(BOSS)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200, "{path}");
        res.json().await.unwrap()
    }

    /// The ids of the pending requests, oldest first.
    async fn pending(&self) -> Vec<String> {
        let list = self.get("/approvals?status=pending").await;
        ids(&list["approvals"], "id")
    }

    /// The ids of the runs of `tool`, newest first.
    async fn runs(&self, tool: &str) -> Vec<String> {
        let page = self.get(&format!("/runs?tool={tool}&limit=100")).await;
        ids(&page["runs"], "id")
    }

    async fn approve(&self, approval: &Value) {
        let path = format!("/approvals/{}/approve", approval.as_str().unwrap());
        let (status, body) = self.post(BOSS, &path, json!({"scope": "once"}), &[]).await;
        assert_eq!(status, 200, "{body}");
    }
}

fn ids(list: &Value, field: &str) -> Vec<String> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|item| item[field].as_str().unwrap().to_owned())
        .collect()
}

/// Asserts a 202 held for approval; its run and request.
fn held((status, body): &(u16, Value)) -> (Value, Value) {
    assert_eq!(*status, 202, "{body}");
    assert_eq!(body["status"], "pending_approval", "{body}");
    (body["run_id"].clone(), body["approval_id"].clone())
}

#[tokio::test]
async fn a_held_call_retried_over_http_joins_its_request() {
    let f = fixture().await;
    let file = f.file("m");
    let first = held(&f.call(AGENT, "mark", json!({"path": file}), None).await);
    // The agent reads the 202 as a failure and tries again, twice.
    for _ in 0..2 {
        let again = held(&f.call(AGENT, "mark", json!({"path": file}), None).await);
        assert_eq!(again, first, "a retry answers with the pending request");
    }
    assert_eq!(f.pending().await, [first.1.as_str().unwrap()]);
    assert_eq!(
        f.runs("mark").await.len(),
        1,
        "no run was recorded for the retries"
    );

    // Other arguments are another call; another caller's call is theirs.
    let other_args = held(&f.call(AGENT, "mark", json!({"path": f.file("n")}), None).await);
    assert_ne!(other_args.0, first.0);
    let other_caller = held(&f.call(OTHER, "mark", json!({"path": file}), None).await);
    assert_ne!(other_caller.0, first.0);
    assert_ne!(other_caller.0, other_args.0);
    assert_eq!(f.pending().await.len(), 3);

    // A retry that waits gets the result of the one request once it is
    // approved; the tool ran once.
    let waiting = {
        let (server, file) = (f.server.url("/tools/mark/invoke?wait=30"), file.clone());
        tokio::spawn(async move {
            let res = reqwest::Client::new()
                .post(server)
                .bearer_auth(AGENT)
                .json(&json!({"arguments": {"path": file}}))
                .send()
                .await
                .unwrap();
            (res.status().as_u16(), res.json::<Value>().await.unwrap())
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(f.pending().await.len(), 3, "the waiting retry joined too");
    f.approve(&first.1).await;
    let (status, envelope) = waiting.await.unwrap();
    assert_eq!(status, 200, "{envelope}");
    assert_eq!(envelope["run_id"], first.0, "{envelope}");
    assert_eq!(marks(Path::new(&file)), 1);

    // Once decided, the same call is asked anew.
    let later = held(&f.call(AGENT, "mark", json!({"path": file}), None).await);
    assert_ne!(later.0, first.0);
    assert_eq!(f.pending().await.len(), 3);
}

#[tokio::test]
async fn a_retry_after_the_skill_changed_files_a_new_request() {
    let f = fixture().await;
    let file = f.file("m");
    let first = held(&f.call(AGENT, "mark", json!({"path": file}), None).await);
    // The skill's files change: what a person would approve is another
    // version, so the retry must not ride on the request for the old one.
    mark_skill(f.skills.path(), " Now changed.");
    let (status, body) = f.post(BOSS, "/skills/reload", json!({}), &[]).await;
    assert_eq!(status, 200, "{body}");
    let after = held(&f.call(AGENT, "mark", json!({"path": file}), None).await);
    assert_ne!(after.0, first.0);
    let hashes: Vec<Value> = {
        let list = f.get("/approvals?status=pending").await;
        list["approvals"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["skill_hash"].clone())
            .collect()
    };
    assert_eq!(hashes.len(), 2);
    assert_ne!(hashes[0], hashes[1]);
    // A retry of the new version joins the new request.
    let again = held(&f.call(AGENT, "mark", json!({"path": file}), None).await);
    assert_eq!(again, after);
    assert_eq!(f.pending().await.len(), 2);
}

#[tokio::test]
async fn a_held_call_retried_over_mcp_joins_its_request() {
    let dir = crate::common::tempdir().unwrap();
    skills(dir.path());
    let server = TestServer::builder(options(vec![root(dir.path(), Trust::Bundled)]))
        .start()
        .await;
    let out = crate::common::marks_dir();
    let file = out.path().join("m").display().to_string();
    let mut mcp = crate::common::McpHttp::open(&server.url("/mcp")).await;
    let params = json!({"name": "mark", "arguments": {"path": file}});
    for _ in 0..3 {
        let result = mcp.request("tools/call", params.clone()).await;
        assert!(result.is_object(), "{result}");
    }
    let pending = server.get_json("/approvals?status=pending").await;
    let requests = pending["approvals"].as_array().unwrap();
    assert_eq!(requests.len(), 1, "{pending}");
    let runs = server.get_json("/runs?tool=mark").await;
    assert_eq!(runs["runs"].as_array().unwrap().len(), 1, "{runs}");
    assert_eq!(runs["runs"][0]["id"], requests[0]["run_id"]);

    // The same call over HTTP by the same (local) caller joins it too.
    let res = Api::of(&server)
        .req(reqwest::Method::POST, "/tools/mark/invoke")
        .json(&json!({"arguments": {"path": file}}))
        .send()
        .await
        .unwrap();
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["approval_id"], requests[0]["id"], "{body}");

    // Other arguments file another request.
    let other = json!({"name": "mark", "arguments": {"path": out.path().join("n")}});
    mcp.request("tools/call", other).await;
    let pending = server.get_json("/approvals?status=pending").await;
    assert_eq!(pending["approvals"].as_array().unwrap().len(), 2, "{pending}");
    assert_eq!(marks(Path::new(&file)), 0, "nothing ran");
}

#[tokio::test]
async fn an_idempotency_key_answers_a_retry_with_its_run() {
    let f = fixture().await;
    let file = f.file("m");
    let args = json!({"path": file});
    let first = held(&f.call(AGENT, "mark", args.clone(), Some("order-1")).await);
    // While it waits: the same request.
    let again = held(&f.call(AGENT, "mark", args.clone(), Some("order-1")).await);
    assert_eq!(again, first);
    assert_eq!(f.pending().await.len(), 1);

    // The same key for another call is refused, and records nothing.
    for (tool, arguments) in [
        ("mark", json!({"path": f.file("n")})),
        ("run_sh", json!({"code": "echo hi"})),
    ] {
        let (status, problem) = f.call(AGENT, tool, arguments, Some("order-1")).await;
        assert_eq!(status, 422, "{problem}");
        assert_eq!(problem["code"], "idempotency_key_reused", "{problem}");
        assert!(
            problem["detail"]
                .as_str()
                .unwrap()
                .contains(first.0.as_str().unwrap()),
            "{problem}"
        );
    }
    assert!(f.runs("run_sh").await.is_empty());
    // Keys are per caller: another caller's same key is its own call.
    let theirs = held(&f.call(OTHER, "mark", args.clone(), Some("order-1")).await);
    assert_ne!(theirs.0, first.0);

    // Approved and finished: a retry gets the same final answer, and
    // nothing runs again (without the key it would be asked anew).
    f.approve(&first.1).await;
    let run = f
        .get(&format!("/runs/{}?wait=30", first.0.as_str().unwrap()))
        .await;
    assert_eq!(run["status"], "succeeded", "{run}");
    let (status, envelope) = f.call(AGENT, "mark", args.clone(), Some("order-1")).await;
    assert_eq!(status, 200, "{envelope}");
    assert_eq!(envelope, run["result"], "the run's own envelope");
    let (status, envelope) = f.call(AGENT, "mark", args.clone(), Some("order-1")).await;
    assert_eq!((status, &envelope), (200, &run["result"]));
    assert_eq!(marks(Path::new(&file)), 1, "the tool ran once");
    assert_eq!(
        f.runs("mark").await.len(),
        2,
        "the agent's and the other caller's"
    );
    assert_eq!(f.pending().await, [theirs.1.as_str().unwrap()]);
}

#[tokio::test]
async fn a_keyed_call_that_ran_answers_its_retry_with_the_same_result() {
    let f = fixture().await;
    let args = json!({"code": "echo $$"});
    let (status, first) = f.call(AGENT, "run_sh", args.clone(), Some("k")).await;
    assert_eq!(status, 200, "{first}");
    let (status, again) = f.call(AGENT, "run_sh", args.clone(), Some("k")).await;
    assert_eq!(
        (status, &again),
        (200, &first),
        "the same envelope, the same process id"
    );
    assert_eq!(f.runs("run_sh").await.len(), 1);
    let sleepy = json!({"code": "sleep 1; echo slept"});
    // Started in the background: a retry while it runs waits for its end.
    let (status, accepted) = f
        .post(
            AGENT,
            "/tools/run_sh/invoke",
            json!({"arguments": sleepy}),
            &[("Idempotency-Key", b"slow"), ("Prefer", b"respond-async")],
        )
        .await;
    assert_eq!(status, 202, "{accepted}");
    assert_eq!(accepted["status"], "running", "{accepted}");
    let (status, envelope) = f.call(AGENT, "run_sh", sleepy, Some("slow")).await;
    assert_eq!(status, 200, "{envelope}");
    assert_eq!(envelope["run_id"], accepted["run_id"], "{envelope}");
    assert_eq!(envelope["output"], "slept\n", "{envelope}");
    assert_eq!(f.runs("run_sh").await.len(), 2);
}

#[tokio::test]
async fn racing_requests_with_one_key_make_one_run() {
    racing_requests(fixture().await).await;
}

/// The same race on PostgreSQL, where the requests truly run at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_requests_with_one_key_make_one_run_on_postgres() {
    crate::common::on_postgres(|url| async move {
        let store = skilld::store::connect(&url).await.unwrap();
        racing_requests(fixture_on(store, crate::common::tempdir().unwrap()).await).await;
    })
    .await;
}

/// Eight requests at once with one key, of a tool that runs at once and
/// of one held for a person.
async fn racing_requests(f: Fixture) {
    let race = |tool: &'static str, arguments: Value, key: &'static str| {
        let url = f.server.url(&format!("/tools/{tool}/invoke"));
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let (url, arguments) = (url.clone(), arguments.clone());
                tokio::spawn(async move {
                    let res = reqwest::Client::new()
                        .post(url)
                        .bearer_auth(AGENT)
                        .header("Idempotency-Key", key)
                        .json(&json!({ "arguments": arguments }))
                        .send()
                        .await
                        .unwrap();
                    (res.status().as_u16(), res.json::<Value>().await.unwrap())
                })
            })
            .collect();
        async move {
            let mut answers = Vec::new();
            for task in tasks {
                answers.push(task.await.unwrap());
            }
            answers
        }
    };

    // A tool that runs at once: one run, and every request its answer.
    let answers = race("run_sh", json!({"code": "sleep 0.3; echo once"}), "race-1").await;
    let runs = f.runs("run_sh").await;
    assert_eq!(runs.len(), 1, "{answers:?}");
    for (status, envelope) in &answers {
        assert_eq!(*status, 200, "{envelope}");
        assert_eq!(envelope["run_id"], runs[0].as_str(), "{envelope}");
        assert_eq!(envelope["output"], "once\n", "{envelope}");
    }

    // A held tool: one request, every request answered with it.
    let file = f.file("m");
    let answers = race("mark", json!({"path": file}), "race-2").await;
    let pending = f.pending().await;
    assert_eq!(pending.len(), 1, "{answers:?}");
    for answer in &answers {
        assert_eq!(held(answer).1, pending[0].as_str());
    }
    assert_eq!(f.runs("mark").await.len(), 1);
}

#[tokio::test]
async fn a_bad_idempotency_key_is_refused() {
    let f = fixture().await;
    let long = "k".repeat(256);
    // (Spaces around a key never arrive: HTTP trims them.)
    let bad: [&[u8]; 4] = [b"", long.as_bytes(), "ké".as_bytes(), b"a\tb"];
    for key in bad {
        let (status, problem) = f
            .post(
                AGENT,
                "/tools/run_sh/invoke",
                json!({"arguments": {"code": "echo hi"}}),
                &[("Idempotency-Key", key)],
            )
            .await;
        assert_eq!(status, 400, "{key:?}: {problem}");
        assert!(
            problem["detail"].as_str().unwrap().contains("Idempotency-Key"),
            "{problem}"
        );
    }
    assert!(f.runs("run_sh").await.is_empty(), "nothing ran");
    // A command that answers without a call checks it too (schemathesis
    // found /commands/{command} taking a key its document refuses).
    for path in ["/commands/help", "/tools/run_sh/invoke?dry_run=true"] {
        let (status, problem) = f
            .post(
                AGENT,
                path,
                json!({"arguments": null}),
                &[("Idempotency-Key", b"a\tb")],
            )
            .await;
        assert_eq!(status, 400, "{path}: {problem}");
    }
    // The longest key, and one with spaces inside, are keys.
    let longest = "k".repeat(255);
    for key in [longest.as_str(), "a key with spaces"] {
        let (status, body) = f
            .call(AGENT, "run_sh", json!({"code": "echo hi"}), Some(key))
            .await;
        assert_eq!(status, 200, "{body}");
    }
}
