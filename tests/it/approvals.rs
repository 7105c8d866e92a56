//! Approvals end to end (`docs/design.md` §4): the decision table over HTTP on
//! both stores, first-run approval, grants voided by changed files, deny
//! once vs always, expiry, who may decide, racing approvers, and two real
//! `skilld serve` processes sharing one PostgreSQL. Every test checks what
//! did or did not run through the marker file its tool appends to.

use crate::common::{
    AGENT, Api, BOSS, CAROL, TestServer, held, mark_skill, marks, on_postgres, options, ran, root, tokens,
};
use serde_json::{Value, json};
use skilld::catalog::Root;
use skilld::invoke::RunSettings;
use skilld::skill::Trust;
use skilld::store::{Grant, GrantDecision};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// One skill (see [`mark_skill`]) in a fresh root of `trust`, its server,
/// a client, and the marker file its tool writes to.
struct Fixture {
    skills: tempfile::TempDir,
    server: TestServer,
    api: Api,
    file: PathBuf,
    _out: tempfile::TempDir,
}

async fn fixture(name: &str, front: &str, trust: Trust) -> Fixture {
    let skills = crate::common::tempdir().unwrap();
    mark_skill(skills.path(), name, front);
    let server = TestServer::builder(options(vec![root(skills.path(), trust)]))
        .start()
        .await;
    let api = Api::of(&server);
    let out = crate::common::marks_dir();
    let file = out.path().join("m");
    Fixture {
        skills,
        server,
        api,
        file,
        _out: out,
    }
}

/// Calls `tool` with `?wait=30` on a task of its own: a caller waiting for
/// a decision.
fn call_waiting(api: &Api, tool: &str, file: &Path) -> tokio::task::JoinHandle<(u16, Value)> {
    let (api, file) = (api.clone(), file.to_owned());
    let path = format!("/tools/{tool}/invoke?wait=30");
    tokio::spawn(async move { api.post(&path, json!({"arguments": {"path": file}})).await })
}

fn roots(bundled: &Path, user: &Path, untrusted: &Path) -> Vec<Root> {
    vec![
        root(bundled, Trust::Bundled),
        root(user, Trust::User),
        root(untrusted, Trust::Untrusted),
    ]
}

// ---- the decision table ---------------------------------------------------------

/// `docs/design.md` §4 row by row, through HTTP, on whatever store `server` has.
async fn decision_table(server: &TestServer) {
    let api = Api::of(server);
    let out = crate::common::marks_dir();
    let mark = |name: &str| out.path().join(name);
    let grant = |skill: &str, decision: GrantDecision| {
        let catalog = server.catalog.current();
        let s = catalog.skill(skill).unwrap();
        Grant {
            id: uuid::Uuid::now_v7(),
            skill: s.name.clone(),
            tool: s.tools[0].name.clone(),
            skill_hash: s.hash.clone(),
            decision,
            created_by: Some("operator".to_owned()),
            created_at: chrono::Utc::now(),
        }
    };
    let approvals = &server.store.approvals;
    approvals
        .put_grant(grant("denied-ro", GrantDecision::Deny))
        .await
        .unwrap();
    approvals
        .put_grant(grant("allowed-untrusted", GrantDecision::Allow))
        .await
        .unwrap();
    approvals
        .put_grant(grant("allowed-rw", GrantDecision::Allow))
        .await
        .unwrap();

    // 1. A standing deny → 403, nothing runs, the attempt is on record.
    let (status, problem) = api.call("denied_ro", &mark("denied")).await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (403, Some("denied")),
        "{problem}"
    );
    assert_eq!(marks(&mark("denied")), 0);
    let (_, runs) = api.get("/runs?tool=denied_ro").await;
    assert_eq!(runs["runs"][0]["status"], "denied", "{runs}");
    // 2. A standing allow → runs, even untrusted, even not read-only.
    for tool in ["allowed_untrusted", "allowed_rw"] {
        let (status, env) = api.call(tool, &mark(tool)).await;
        ran(status, &env);
        assert_eq!(marks(&mark(tool)), 1);
    }
    // 3. Untrusted asks, with a warning; always_ask asks even read-only bundled.
    let (status, body) = api.call("untrusted_ro", &mark("untrusted")).await;
    let body = held(status, &body);
    let (_, approval) = api
        .get(&format!("/approvals/{}", body["approval_id"].as_str().unwrap()))
        .await;
    assert!(
        approval["warning"].as_str().unwrap().contains("untrusted"),
        "{approval}"
    );
    assert_eq!(approval["trust"], "untrusted");
    let (status, body) = api.call("always_ask", &mark("always")).await;
    held(status, &body);
    // 4. A user skill never approved asks (first run), read-only or not.
    let (status, body) = api.call("user_ro", &mark("user")).await;
    held(status, &body);
    // 5. Read-only bundled runs.
    let (status, env) = api.call("bundled_ro", &mark("bundled")).await;
    ran(status, &env);
    // 6. Anything else asks.
    let (status, body) = api.call("bundled_rw", &mark("rw")).await;
    held(status, &body);
    for name in ["untrusted", "always", "user", "rw"] {
        assert_eq!(marks(&mark(name)), 0, "{name} must not have run");
    }
    // What the tools list says in general.
    let (_, tools) = api.get("/tools").await;
    let requires = |name: &str| {
        tools["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .map(|t| t["requires_approval"].clone())
            .unwrap()
    };
    assert_eq!(requires("bundled_ro"), "never");
    assert_eq!(requires("user_ro"), "first_run");
    assert_eq!(requires("untrusted_ro"), "always");
    assert_eq!(requires("bundled_rw"), "always");
}

fn table_skills() -> [tempfile::TempDir; 3] {
    let dirs = [(); 3].map(|()| crate::common::tempdir().unwrap());
    let [bundled, user, untrusted] = &dirs;
    mark_skill(bundled.path(), "denied-ro", "read_only: true\n");
    mark_skill(bundled.path(), "allowed-rw", "");
    mark_skill(untrusted.path(), "allowed-untrusted", "");
    mark_skill(untrusted.path(), "untrusted-ro", "read_only: true\n");
    mark_skill(
        bundled.path(),
        "always-ask",
        "read_only: true\nalways_ask: true\n",
    );
    mark_skill(user.path(), "user-ro", "read_only: true\n");
    mark_skill(bundled.path(), "bundled-ro", "read_only: true\n");
    mark_skill(bundled.path(), "bundled-rw", "");
    dirs
}

#[tokio::test]
async fn the_decision_table_on_sqlite() {
    let dirs = table_skills();
    let server = TestServer::builder(options(roots(dirs[0].path(), dirs[1].path(), dirs[2].path())))
        .start()
        .await;
    decision_table(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_decision_table_on_postgres() {
    on_postgres(|url| async move {
        let dirs = table_skills();
        let server = TestServer::builder(options(roots(dirs[0].path(), dirs[1].path(), dirs[2].path())))
            .database(&url)
            .start()
            .await;
        decision_table(&server).await;
    })
    .await;
}

// ---- first run, changed files ----------------------------------------------------

#[tokio::test]
async fn first_run_approval_then_the_read_only_user_skill_runs_until_it_changes() {
    let f = fixture("notes", "read_only: true\n", Trust::User).await;
    let (api, file) = (f.api.clone(), f.file.clone());

    let (status, body) = api.call("notes", &file).await;
    let body = held(status, &body);
    let (_, approval) = api
        .get(&format!("/approvals/{}", body["approval_id"].as_str().unwrap()))
        .await;
    assert!(
        approval["warning"].as_str().unwrap().contains("First run"),
        "{approval}"
    );
    assert_eq!(
        approval["argv"],
        json!(["sh", "-c", "echo ran >> \"$0\"; echo marked", file])
    );
    let (status, decided) = api.approve(&body["approval_id"], "once").await;
    assert_eq!(status, 200, "{decided}");
    assert_eq!(
        (decided["status"].as_str(), decided["scope"].as_str()),
        (Some("approved"), Some("once"))
    );
    let run = api.finished_run(&body["run_id"]).await;
    assert_eq!(run["status"], "succeeded", "{run}");
    assert_eq!(run["result"]["output"], "marked\n");
    assert_eq!(run["approval_id"], body["approval_id"]);
    assert_eq!(marks(&file), 1);

    // Approved once for this version: later calls run without asking.
    for expected in 2..=3 {
        let (status, env) = api.call("notes", &file).await;
        ran(status, &env);
        assert_eq!(marks(&file), expected);
    }
    // A changed SKILL.md is a new version: it asks again.
    let md = f.skills.path().join("notes/SKILL.md");
    let text = std::fs::read_to_string(&md)
        .unwrap()
        .replace("Leaves a mark.", "Leaves a mark, now.");
    std::fs::write(&md, text).unwrap();
    f.server.catalog.reload();
    let (status, body) = api.call("notes", &file).await;
    held(status, &body);
    assert_eq!(marks(&file), 3);
}

/// A scripts-dialect skill: `scripts/mark.sh` appends a line.
fn script_skill(dir: &Path) {
    let skill = dir.join("scribe");
    std::fs::create_dir_all(skill.join("scripts")).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: scribe\nversion: 1.0.0\ndescription: Writes marks with a script.\n---\n\n# Scribe\n\n\
         Run `mark` with the file to append to.\n",
    )
    .unwrap();
    std::fs::write(
        skill.join("scripts/mark.sh"),
        "#!/bin/sh\necho ran >> \"$1\"\necho marked\n",
    )
    .unwrap();
}

#[tokio::test]
async fn a_changed_script_or_skill_md_voids_a_grant() {
    let skills = crate::common::tempdir().unwrap();
    script_skill(skills.path());
    mark_skill(skills.path(), "writer", "");
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::User)]))
        .start()
        .await;
    let api = Api::of(&server);
    let out = crate::common::marks_dir();
    let file = out.path().join("m");
    let call_script = || {
        api.post(
            "/tools/scribe_mark/invoke",
            json!({"arguments": {"args": [file]}}),
        )
    };

    // Approve always: a grant for this version of each.
    let (status, body) = call_script().await;
    let body = held(status, &body);
    assert_eq!(api.approve(&body["approval_id"], "always").await.0, 200);
    assert_eq!(api.finished_run(&body["run_id"]).await["status"], "succeeded");
    let (status, body) = api.call("writer", &file).await;
    let body = held(status, &body);
    assert_eq!(api.approve(&body["approval_id"], "always").await.0, 200);
    assert_eq!(api.finished_run(&body["run_id"]).await["status"], "succeeded");
    let (_, grants) = api.get("/grants").await;
    assert_eq!(grants["grants"].as_array().unwrap().len(), 2, "{grants}");
    assert!(
        grants["grants"]
            .as_array()
            .unwrap()
            .iter()
            .all(|g| g["decision"] == "allow")
    );

    // Granted: both run without asking.
    ran_now(call_script().await);
    ran_now(api.call("writer", &file).await);
    assert_eq!(marks(&file), 4);

    // Only the script changes: its grant is void, the other's holds.
    let script = skills.path().join("scribe/scripts/mark.sh");
    let text = std::fs::read_to_string(&script).unwrap() + "# a comment\n";
    std::fs::write(&script, text).unwrap();
    server.catalog.reload();
    let (status, body) = call_script().await;
    held(status, &body);
    ran_now(api.call("writer", &file).await);

    // Only the SKILL.md changes: void too.
    let md = skills.path().join("writer/SKILL.md");
    let text = std::fs::read_to_string(&md)
        .unwrap()
        .replace("Appends a line", "Adds a line");
    std::fs::write(&md, text).unwrap();
    server.catalog.reload();
    let (status, body) = api.call("writer", &file).await;
    held(status, &body);
    assert_eq!(marks(&file), 5, "nothing ran under a void grant");
}

/// The approver sees the permissions the skill declares, and an approval
/// covers that set: a skill that declares more is another version, asked
/// again.
#[tokio::test]
async fn a_request_shows_the_declared_permissions_and_a_changed_set_asks_again() {
    let f = fixture("scoped", "permissions: [git:read]\n", Trust::User).await;
    let (status, body) = f.api.call("scoped", &f.file).await;
    let first = held(status, &body);
    let (_, approval) = f
        .api
        .get(&format!("/approvals/{}", first["approval_id"].as_str().unwrap()))
        .await;
    assert_eq!(approval["permissions"], json!(["git:read"]), "{approval}");
    assert_eq!(f.api.approve(&first["approval_id"], "always").await.0, 200);
    assert_eq!(f.api.finished_run(&first["run_id"]).await["status"], "succeeded");
    ran_now(f.api.call("scoped", &f.file).await);

    let md = f.skills.path().join("scoped/SKILL.md");
    let text = std::fs::read_to_string(&md)
        .unwrap()
        .replace("permissions: [git:read]", "permissions: [git:read, env:read]");
    std::fs::write(&md, text).unwrap();
    f.server.catalog.reload();
    let (status, body) = f.api.call("scoped", &f.file).await;
    let second = held(status, &body);
    let (_, again) = f
        .api
        .get(&format!("/approvals/{}", second["approval_id"].as_str().unwrap()))
        .await;
    assert_eq!(again["permissions"], json!(["git:read", "env:read"]), "{again}");
    assert_ne!(again["skill_hash"], approval["skill_hash"]);
    assert_eq!(marks(&f.file), 2, "nothing ran under the old set's grant");
}

fn ran_now((status, body): (u16, Value)) {
    ran(status, &body);
}

#[tokio::test]
async fn a_request_for_a_skill_that_changed_meanwhile_cannot_be_approved() {
    let f = fixture("shifty", "", Trust::Bundled).await;
    let (api, file) = (f.api.clone(), f.file.clone());
    let (status, body) = api.call("shifty", &file).await;
    let body = held(status, &body);
    let md = f.skills.path().join("shifty/SKILL.md");
    let text = std::fs::read_to_string(&md)
        .unwrap()
        .replace("echo marked", "echo changed");
    std::fs::write(&md, text).unwrap();
    f.server.catalog.reload();
    let (status, problem) = api.approve(&body["approval_id"], "once").await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (409, Some("skill_changed")),
        "{problem}"
    );
    let run = api.finished_run(&body["run_id"]).await;
    assert_eq!(run["status"], "expired");
    assert_eq!(marks(&file), 0);
}

// ---- untrusted, deny, expiry ------------------------------------------------------

#[tokio::test]
async fn untrusted_always_asks_even_after_an_approval() {
    let f = fixture("stranger", "read_only: true\n", Trust::Untrusted).await;
    let (api, file) = (f.api.clone(), f.file.clone());
    for round in 1..=2 {
        let (status, body) = api.call("stranger", &file).await;
        let body = held(status, &body);
        assert_eq!(api.approve(&body["approval_id"], "once").await.0, 200);
        assert_eq!(api.finished_run(&body["run_id"]).await["status"], "succeeded");
        assert_eq!(marks(&file), round);
    }
}

#[tokio::test]
async fn deny_once_asks_again_deny_always_refuses_until_revoked() {
    let f = fixture("risky", "", Trust::Bundled).await;
    let (api, file) = (f.api.clone(), f.file.clone());

    // A caller waiting on the call learns of the denial: 403.
    let waiting = call_waiting(&api, "risky", &file);
    let approval = pending_one(&api).await;
    let (status, decided) = api.deny(&approval["id"], "once").await;
    assert_eq!(
        (status, decided["status"].as_str()),
        (200, Some("denied")),
        "{decided}"
    );
    assert_eq!(decided["note"], "no");
    let (status, problem) = waiting.await.unwrap();
    assert_eq!(
        (status, problem["code"].as_str()),
        (403, Some("denied")),
        "{problem}"
    );
    assert_eq!(api.finished_run(&approval["run_id"]).await["status"], "denied");
    // Deciding again is refused.
    let (status, problem) = api.approve(&approval["id"], "once").await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (409, Some("already_decided")),
        "{problem}"
    );

    // Denied once: the next call asks again. Deny always: the next is refused at once.
    let (status, body) = api.call("risky", &file).await;
    let body = held(status, &body);
    assert_eq!(api.deny(&body["approval_id"], "always").await.0, 200);
    let (status, problem) = api.call("risky", &file).await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (403, Some("denied")),
        "{problem}"
    );
    assert_eq!(marks(&file), 0, "nothing ran");
    let (_, runs) = api.get("/runs?tool=risky&status=denied").await;
    assert_eq!(
        runs["runs"].as_array().unwrap().len(),
        3,
        "every denial is on record: {runs}"
    );

    // Revoked: it asks again.
    let (_, grants) = api.get("/grants").await;
    let grant = &grants["grants"][0];
    assert_eq!(
        (grant["decision"].as_str(), grant["tool"].as_str()),
        (Some("deny"), Some("risky"))
    );
    let res = api
        .req(
            reqwest::Method::DELETE,
            &format!("/grants/{}", grant["id"].as_str().unwrap()),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 204);
    let res = api
        .req(
            reqwest::Method::DELETE,
            &format!("/grants/{}", grant["id"].as_str().unwrap()),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
    let (status, body) = api.call("risky", &file).await;
    held(status, &body);
    assert_eq!(marks(&file), 0);
}

/// The one pending request, once it exists (at most 10 s).
async fn pending_one(api: &Api) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, list) = api.get("/approvals?status=pending").await;
        assert_eq!(status, 200, "{list}");
        if let Some(first) = list["approvals"].as_array().and_then(|a| a.first()) {
            return first.clone();
        }
        assert!(Instant::now() < deadline, "no pending approval appeared");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn pending_requests_expire_and_their_runs_with_them() {
    let skills = crate::common::tempdir().unwrap();
    mark_skill(skills.path(), "slowpoke", "");
    let settings = RunSettings {
        approval_ttl: Duration::from_secs(1),
        ..RunSettings::default()
    };
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::Bundled)]))
        .settings(settings)
        .start()
        .await;
    let api = Api::of(&server);
    let out = crate::common::marks_dir();
    let file = out.path().join("m");
    let (status, body) = api.call("slowpoke", &file).await;
    let body = held(status, &body);
    let (_, approval) = api
        .get(&format!("/approvals/{}", body["approval_id"].as_str().unwrap()))
        .await;
    let created = chrono::DateTime::parse_from_rfc3339(approval["created_at"].as_str().unwrap()).unwrap();
    let expires = chrono::DateTime::parse_from_rfc3339(approval["expires_at"].as_str().unwrap()).unwrap();
    assert_eq!(expires - created, chrono::Duration::seconds(1));

    // The housekeeping sweep ends it without anyone asking.
    let run = api.finished_run(&body["run_id"]).await;
    assert_eq!(run["status"], "expired", "{run}");
    let (_, approval) = api
        .get(&format!("/approvals/{}", body["approval_id"].as_str().unwrap()))
        .await;
    assert_eq!(approval["status"], "expired");
    let (status, problem) = api.approve(&body["approval_id"], "once").await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (409, Some("already_decided")),
        "{problem}"
    );
    assert_eq!(marks(&file), 0);
    let (_, pending) = api.get("/approvals?status=pending").await;
    assert_eq!(pending["approvals"], json!([]));
}

#[tokio::test]
async fn cancelling_a_held_call_withdraws_its_request() {
    let f = fixture("withdrawn", "", Trust::Bundled).await;
    let (api, file) = (f.api.clone(), f.file.clone());
    let (status, body) = api.call("withdrawn", &file).await;
    let body = held(status, &body);
    let (status, cancel) = api
        .post(
            &format!("/runs/{}/cancel", body["run_id"].as_str().unwrap()),
            json!({}),
        )
        .await;
    assert_eq!(
        (status, cancel["status"].as_str()),
        (202, Some("cancelled")),
        "{cancel}"
    );
    let (status, problem) = api.approve(&body["approval_id"], "once").await;
    assert_eq!(status, 409, "{problem}");
    assert_eq!(api.finished_run(&body["run_id"]).await["status"], "cancelled");
    assert_eq!(marks(&file), 0);
}

// ---- streams and waits ------------------------------------------------------------

#[tokio::test]
async fn a_held_call_streams_its_status_then_output_and_result() {
    let f = fixture("streamed", "", Trust::Bundled).await;
    let (api, file) = (f.api.clone(), f.file.clone());
    let res = api
        .req(reqwest::Method::POST, "/tools/streamed/invoke")
        .header("accept", "text/event-stream")
        .json(&json!({"arguments": {"path": file}}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let reader = tokio::spawn(async move { res.text().await.unwrap() });
    let approval = pending_one(&api).await;
    assert_eq!(api.approve(&approval["id"], "once").await.0, 200);
    let text = tokio::time::timeout(Duration::from_secs(30), reader)
        .await
        .unwrap()
        .unwrap();
    let events: Vec<(&str, Value)> = text
        .split("\n\n")
        .filter_map(|block| {
            let name = block.lines().find_map(|l| l.strip_prefix("event: "))?;
            let data = block.lines().find_map(|l| l.strip_prefix("data: "))?;
            Some((name, serde_json::from_str(data).unwrap()))
        })
        .collect();
    assert_eq!(events[0].0, "status");
    assert_eq!(events[0].1["status"], "pending_approval");
    assert_eq!(events[0].1["approval_id"], approval["id"]);
    let (last, result) = events.last().unwrap();
    assert_eq!(*last, "result", "{text}");
    assert_eq!(
        (result["success"].as_bool(), result["output"].as_str()),
        (Some(true), Some("marked\n"))
    );
    assert!(
        events
            .iter()
            .any(|(n, d)| *n == "status" && d["status"] == "running"),
        "{text}"
    );
    assert_eq!(marks(&file), 1);
}

/// A denied call's stream ends with the approver's note, and so does its
/// run: an agent following it learns why.
#[tokio::test]
async fn a_denial_reaches_the_stream_and_the_run_with_its_note() {
    let f = fixture("refused", "", Trust::Bundled).await;
    let (api, file) = (f.api.clone(), f.file.clone());
    let res = api
        .req(reqwest::Method::POST, "/tools/refused/invoke")
        .header("accept", "text/event-stream")
        .json(&json!({"arguments": {"path": file}}))
        .send()
        .await
        .unwrap();
    let reader = tokio::spawn(async move { res.text().await.unwrap() });
    let approval = pending_one(&api).await;
    let (status, _) = api
        .post(
            &format!("/approvals/{}/deny", approval["id"].as_str().unwrap()),
            json!({"scope": "once", "note": "not on a Friday"}),
        )
        .await;
    assert_eq!(status, 200);
    let text = tokio::time::timeout(Duration::from_secs(30), reader)
        .await
        .unwrap()
        .unwrap();
    let last = text
        .split("\n\n")
        .filter_map(|block| block.lines().find_map(|l| l.strip_prefix("data: ")))
        .last()
        .unwrap();
    let last: Value = serde_json::from_str(last).unwrap();
    assert_eq!(
        last,
        json!({"status": "denied", "note": "not on a Friday"}),
        "{text}"
    );
    let run = api.finished_run(&approval["run_id"]).await;
    assert_eq!(
        (run["status"].as_str(), run["note"].as_str()),
        (Some("denied"), Some("not on a Friday"))
    );
    assert_eq!(marks(&file), 0);
}

#[tokio::test]
async fn a_waiting_caller_gets_the_envelope_once_approved() {
    let f = fixture("patient", "", Trust::Bundled).await;
    let (api, file) = (f.api.clone(), f.file.clone());
    let waiting = call_waiting(&api, "patient", &file);
    let approval = pending_one(&api).await;
    assert_eq!(api.approve(&approval["id"], "once").await.0, 200);
    let (status, env) = waiting.await.unwrap();
    ran(status, &env);
    assert_eq!(env["run_id"], approval["run_id"]);
    assert_eq!(marks(&file), 1);
    // A bounded wait that passes answers 202, still pending.
    let (status, body) = api
        .post(
            "/tools/patient/invoke?wait=1",
            json!({"arguments": {"path": file}}),
        )
        .await;
    held(status, &body);
    let (status, problem) = api
        .post(
            "/tools/patient/invoke?wait=301",
            json!({"arguments": {"path": file}}),
        )
        .await;
    assert_eq!(status, 400, "{problem}");
}

/// The approver learns when nobody waits for the answer any more: the
/// caller's wait ran out, or it went away mid-wait. A caller that got its
/// answer is not marked.
#[tokio::test]
async fn requests_whose_caller_gave_up_are_marked() {
    let f = fixture("abandoned", "", Trust::Bundled).await;
    let (api, file) = (f.api.clone(), f.file.clone());
    let left = |approval: &Value| approval["caller_left_at"].as_str().map(str::to_owned);
    let request_of = |run: &Value| {
        let api = api.clone();
        let run = run.clone();
        async move {
            let (_, run) = api.get(&format!("/runs/{}", run.as_str().unwrap())).await;
            api.get(&format!("/approvals/{}", run["approval_id"].as_str().unwrap()))
                .await
                .1
        }
    };
    // Its wait ran out.
    let (status, body) = api
        .post(
            "/tools/abandoned/invoke?wait=1",
            json!({"arguments": {"path": file}}),
        )
        .await;
    held(status, &body);
    let mut approval = request_of(&body["run_id"]).await;
    for _ in 0..100 {
        if left(&approval).is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        approval = request_of(&body["run_id"]).await;
    }
    assert!(left(&approval).is_some(), "{approval}");
    assert_eq!(approval["status"], "pending", "still decidable");

    // It hung up mid-wait.
    let hasty = reqwest::Client::builder()
        .timeout(std::time::Duration::from_millis(500))
        .build()
        .unwrap();
    let url = format!(
        "{}/tools/abandoned/invoke?wait=60",
        f.server.url("").trim_end_matches('/')
    );
    // Each call here differs (its own path): the same call again would
    // join the request that still waits.
    let gone = hasty
        .post(url)
        .json(&json!({"arguments": {"path": file.with_extension("2")}}))
        .send()
        .await;
    assert!(gone.is_err(), "the client gave up first");
    let (_, list) = api.get("/approvals?status=pending").await;
    let newest = list["approvals"].as_array().unwrap().last().unwrap().clone();
    let mut approval = newest;
    for _ in 0..100 {
        if left(&approval).is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        approval = api
            .get(&format!("/approvals/{}", approval["id"].as_str().unwrap()))
            .await
            .1;
    }
    assert!(left(&approval).is_some(), "{approval}");

    an_answered_caller_is_not_marked(&api, &file).await;
}

/// A caller that waited for, and got, its answer is not marked.
async fn an_answered_caller_is_not_marked(api: &Api, file: &Path) {
    // One that waited for, and got, its answer is not marked.
    let left = |approval: &Value| approval["caller_left_at"].as_str().map(str::to_owned);
    let waiting = call_waiting(api, "abandoned", &file.with_extension("3"));
    let mut pending = Vec::new();
    for _ in 0..100 {
        let (_, list) = api.get("/approvals?status=pending").await;
        pending = list["approvals"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| left(a).is_none())
            .cloned()
            .collect();
        if !pending.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let approval = pending.first().unwrap().clone();
    assert_eq!(api.approve(&approval["id"], "once").await.0, 200);
    let (status, env) = waiting.await.unwrap();
    ran(status, &env);
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let (_, approval) = api
        .get(&format!("/approvals/{}", approval["id"].as_str().unwrap()))
        .await;
    assert_eq!(left(&approval), None, "{approval}");
}

// ---- who may decide ---------------------------------------------------------------

#[tokio::test]
async fn an_invoke_token_cannot_approve_and_nobody_approves_their_own_call() {
    let skills = crate::common::tempdir().unwrap();
    mark_skill(skills.path(), "guarded", "");
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::Bundled)]))
        .auth(tokens())
        .start()
        .await;
    let base = Api::of(&server);
    let (agent, boss, carol) = (base.as_(AGENT), base.as_(BOSS), base.as_(CAROL));
    let out = crate::common::marks_dir();
    let file = out.path().join("m");

    assert_eq!(base.get("/approvals").await.0, 401);
    let (status, body) = agent.call("guarded", &file).await;
    let body = held(status, &body);
    let (_, approval) = agent
        .get(&format!("/approvals/{}", body["approval_id"].as_str().unwrap()))
        .await;
    assert_eq!(approval["requested_by"], "agent");
    // The invoke role may not decide, its own call or any.
    for (status, problem) in [
        agent.approve(&body["approval_id"], "once").await,
        agent.deny(&body["approval_id"], "once").await,
    ] {
        assert_eq!(
            (status, problem["code"].as_str()),
            (403, Some("forbidden")),
            "{problem}"
        );
    }
    // An approver who made the call may not decide it either.
    let (status, own) = boss.call("guarded", &file).await;
    let own = held(status, &own);
    for (status, problem) in [
        boss.approve(&own["approval_id"], "once").await,
        boss.deny(&own["approval_id"], "always").await,
    ] {
        assert_eq!(
            (status, problem["code"].as_str()),
            (403, Some("self_approval")),
            "{problem}"
        );
    }
    assert_eq!(marks(&file), 0);
    // Someone else may.
    let (status, decided) = carol.approve(&own["approval_id"], "once").await;
    assert_eq!(
        (status, decided["decided_by"].as_str()),
        (200, Some("carol")),
        "{decided}"
    );
    let run = carol.finished_run(&own["run_id"]).await;
    assert_eq!(
        (run["status"].as_str(), run["requested_by"].as_str()),
        (Some("succeeded"), Some("boss"))
    );
    assert_eq!(marks(&file), 1);
    let (status, decided) = boss.approve(&body["approval_id"], "once").await;
    assert_eq!(status, 200, "{decided}");
    assert_eq!(boss.finished_run(&body["run_id"]).await["status"], "succeeded");
    assert_eq!(marks(&file), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_approvers_run_the_call_exactly_once() {
    let skills = crate::common::tempdir().unwrap();
    mark_skill(skills.path(), "contended", "");
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::Bundled)]))
        .auth(tokens())
        .start()
        .await;
    let base = Api::of(&server);
    let out = crate::common::marks_dir();
    for round in 0..5 {
        let file = out.path().join(format!("m{round}"));
        let (status, body) = base.as_(AGENT).call("contended", &file).await;
        let body = held(status, &body);
        let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(4));
        let racers: Vec<_> = [BOSS, CAROL, BOSS, CAROL]
            .into_iter()
            .enumerate()
            .map(|(i, token)| {
                let api = base.as_(token);
                let id = body["approval_id"].clone();
                let barrier = barrier.clone();
                tokio::spawn(async move {
                    barrier.wait().await;
                    if i % 2 == 0 {
                        api.approve(&id, "once").await
                    } else {
                        api.deny(&id, "once").await
                    }
                })
            })
            .collect();
        let mut outcomes = Vec::new();
        for racer in racers {
            outcomes.push(racer.await.unwrap());
        }
        let winners: Vec<_> = outcomes.iter().filter(|(s, _)| *s == 200).collect();
        assert_eq!(winners.len(), 1, "round {round}: {outcomes:?}");
        for (status, problem) in outcomes.iter().filter(|(s, _)| *s != 200) {
            assert_eq!(
                (*status, problem["code"].as_str()),
                (409, Some("already_decided")),
                "{problem}"
            );
        }
        let run = base.as_(AGENT).finished_run(&body["run_id"]).await;
        let expected = if winners[0].1["status"] == "approved" {
            1
        } else {
            0
        };
        assert_eq!(marks(&file), expected, "round {round}: {run}");
        assert_eq!(run["status"], if expected == 1 { "succeeded" } else { "denied" });
    }
}

// ---- two instances on one PostgreSQL -----------------------------------------------

/// A real `skilld serve` process.
struct Instance {
    child: Child,
    url: String,
    _data: tempfile::TempDir,
}

impl Instance {
    fn start(name: &str, database: &str, skills: &Path) -> Self {
        let data = crate::common::tempdir().unwrap();
        let mut child = crate::common::serve_command(data.path(), skills)
            .args(["--instance", name, "--database", database])
            .env("SKILLD_SANDBOX_WRITE_PATHS", crate::common::marks_root())
            .env(
                "SKILLD_TOKENS",
                format!("agent:invoke:{AGENT},boss:approve:{BOSS},carol:approve:{CAROL}"),
            )
            .env_remove("SKILLD_CONFIG")
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let url = crate::common::announced_url(&mut child)
            .unwrap_or_else(|first| panic!("{name} did not start: {first:?}"));
        Self {
            child,
            url,
            _data: data,
        }
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        crate::common::terminate(&mut self.child);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_instances_share_approvals_and_run_each_call_once() {
    on_postgres(|url| async move {
        let skills = crate::common::tempdir().unwrap();
        mark_skill(skills.path(), "shared", "");
        let (a, b) = (
            Instance::start("instance-a", &url, skills.path()),
            Instance::start("instance-b", &url, skills.path()),
        );
        let out = crate::common::marks_dir();
        let file = out.path().join("m");

        // Called on A, waiting there; approved on B.
        let waiting = {
            let agent = Api::new(a.url.clone(), Some(AGENT));
            let file = file.clone();
            tokio::spawn(async move {
                agent
                    .post(
                        "/tools/shared/invoke?wait=60",
                        json!({"arguments": {"path": file}}),
                    )
                    .await
            })
        };
        let on_b = Api::new(b.url.clone(), Some(BOSS));
        let approval = pending_one(&on_b).await;
        let approved_at = Instant::now();
        let (status, decided) = on_b.approve(&approval["id"], "once").await;
        assert_eq!(status, 200, "{decided}");
        let (status, env) = waiting.await.unwrap();
        let latency = approved_at.elapsed();
        ran(status, &env);
        assert_eq!(env["run_id"], approval["run_id"]);
        // Woken by NOTIFY, not by the 5 s re-read.
        assert!(
            latency < Duration::from_secs(4),
            "the caller on A waited {latency:?}"
        );
        eprintln!("approve on B → envelope on A: {latency:?}");
        let run = Api::new(a.url.clone(), Some(AGENT))
            .finished_run(&approval["run_id"])
            .await;
        assert_eq!(run["status"], "succeeded");
        assert_eq!(marks(&file), 1, "executed once, by the instance that approved");

        // Both instances see the same request; deciding on both at once runs it once.
        let (status, body) = Api::new(a.url.clone(), Some(AGENT)).call("shared", &file).await;
        let body = held(status, &body);
        let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(2));
        let racers: Vec<_> = [(a.url.clone(), BOSS), (b.url.clone(), CAROL)]
            .into_iter()
            .map(|(base, token)| {
                let api = Api::new(base, Some(token));
                let id = body["approval_id"].clone();
                let barrier = barrier.clone();
                tokio::spawn(async move {
                    barrier.wait().await;
                    api.approve(&id, "once").await
                })
            })
            .collect();
        let mut statuses = Vec::new();
        for racer in racers {
            statuses.push(racer.await.unwrap().0);
        }
        statuses.sort_unstable();
        assert_eq!(statuses, [200, 409]);
        let run = Api::new(b.url.clone(), Some(AGENT))
            .finished_run(&body["run_id"])
            .await;
        assert_eq!(run["status"], "succeeded", "{run}");
        assert_eq!(marks(&file), 2);
        drop((a, b));
    })
    .await;
}

/// An approved call that waits for a slot is `queued`; cancelling it ends it
/// at once, and a stream following it ends too (it once waited forever for
/// a result that a run cancelled before its start never has).
#[tokio::test]
async fn an_approved_call_waiting_for_a_slot_is_queued_and_can_be_cancelled() {
    let skills = crate::common::tempdir().unwrap();
    let skill = skills.path().join("single");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: single\nversion: 1.0.0\ndescription: One at a time.\n---\n\n### single\n\nSleeps.\n\n\
         #### Parameters\n\nNone.\n\n#### Command\n\n```\nsleep 30\n```\n",
    )
    .unwrap();
    let settings = RunSettings {
        max_concurrent_per_tool: 1,
        ..RunSettings::default()
    };
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::Bundled)]))
        .settings(settings)
        .start()
        .await;
    let api = Api::of(&server);
    let mut held_calls = Vec::new();
    for _ in 0..2 {
        let (status, body) = api.post("/tools/single/invoke", json!({})).await;
        let body = held(status, &body);
        assert_eq!(api.approve(&body["approval_id"], "once").await.0, 200);
        held_calls.push(body);
    }
    let (first, second) = (&held_calls[0]["run_id"], &held_calls[1]["run_id"]);
    let status_of = |run: Value| {
        let api = api.clone();
        async move { api.get(&format!("/runs/{}", run.as_str().unwrap())).await.1["status"].clone() }
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while status_of(first.clone()).await != "running" {
        assert!(Instant::now() < deadline, "the first approved call never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(status_of(second.clone()).await, "queued");

    let res = api
        .req(
            reqwest::Method::GET,
            &format!("/runs/{}/events", second.as_str().unwrap()),
        )
        .send()
        .await
        .unwrap();
    let stream = tokio::spawn(async move { res.text().await.unwrap() });
    let (status, cancel) = api
        .post(&format!("/runs/{}/cancel", second.as_str().unwrap()), json!({}))
        .await;
    assert_eq!(status, 202, "{cancel}");
    let text = tokio::time::timeout(Duration::from_secs(10), stream)
        .await
        .expect("the stream of a cancelled queued run ends")
        .unwrap();
    assert!(
        text.contains("\"queued\"") && text.contains("\"cancelled\""),
        "{text}"
    );
    assert_eq!(api.finished_run(second).await["status"], "cancelled");
    // The first is untouched until cancelled in turn.
    assert_eq!(status_of(first.clone()).await, "running");
    api.post(&format!("/runs/{}/cancel", first.as_str().unwrap()), json!({}))
        .await;
    assert_eq!(api.finished_run(first).await["status"], "cancelled");
}
