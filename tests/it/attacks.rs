//! The trust boundary, tried as an attacker would against a real server:
//! each test performs one attack and shows that it fails, and that nothing
//! ran, leaked or changed.

use crate::common::{TestServer, options, root};
use serde_json::{Value, json};
use skilld::skill::Trust;
use std::path::Path;
use std::time::Duration;

/// A markdown skill with one read-only tool `name` running `command`.
fn skill(dir: &Path, name: &str, params: &[&str], command: &str) {
    let skill = dir.join(name.replace('_', "-"));
    std::fs::create_dir_all(&skill).unwrap();
    let rows: String = params
        .iter()
        .map(|p| format!("| {p} | string | yes | A value. |\n"))
        .collect();
    std::fs::write(
        skill.join("SKILL.md"),
        format!(
            "---\nname: {}\nversion: 1.0.0\ndescription: An attack surface.\nread_only: true\n---\n\n\
             ### {name}\n\nRuns a command.\n\n#### Parameters\n\n| Name | Type | Required | Description |\n\
             |---|---|---|---|\n{rows}\n#### Command\n\n```\n{command}\n```\n",
            name.replace('_', "-")
        ),
    )
    .unwrap();
}

/// The `mark` tool, which appends a line to the file it is given, and a
/// fresh marker file in a directory sandboxed tools may write.
fn mark_skill(dir: &Path) -> (tempfile::TempDir, std::path::PathBuf) {
    skill(dir, "mark", &["path"], "sh -c 'echo ran >> \"$0\"' {{path}}");
    let out = crate::common::marks_dir();
    let marker = out.path().join("ran");
    (out, marker)
}

/// Header names and values to send.
type Headers<'a> = &'a [(&'a str, &'a str)];

/// `echo {{v}}.txt` with `v = --output=/tmp/pwn` rendered an option.
#[tokio::test]
async fn a_value_that_begins_a_word_cannot_become_an_option() {
    let skills = crate::common::tempdir().unwrap();
    let out = crate::common::marks_dir();
    let target = out.path().join("pwn");
    // `touch` would create the file named by an `--` option-like value,
    // if it were ever passed through as one word of its own.
    skill(skills.path(), "make_file", &["v"], "touch {{v}}.txt");
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::User)]))
        .allowed()
        .start()
        .await;
    let (status, problem) = server
        .invoke(
            "make_file",
            json!({"v": format!("--reference={}", target.display())}),
        )
        .await;
    assert_eq!(status, 422, "{problem}");
    assert_eq!(problem["code"], "argument_injection");
    assert_eq!(problem["errors"][0]["field"], "v");
    let runs = server.get_json("/runs").await;
    assert_eq!(runs["runs"], json!([]), "a refused call ran or was recorded");
}

/// `q={{query}}` with `rust lang&x=1` added a query parameter.
#[tokio::test]
async fn a_value_in_a_url_cannot_add_a_parameter_segment_or_fragment() {
    let skills = crate::common::tempdir().unwrap();
    skill(
        skills.path(),
        "show_url",
        &["path", "query"],
        "printf %s \"https://api.example.com/{{path}}/search?q={{query}}&n=5\"",
    );
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::User)]))
        .allowed()
        .start()
        .await;
    let (status, envelope) = server
        .invoke(
            "show_url",
            json!({"path": "../admin?x=1#", "query": "rust lang&x=1#top"}),
        )
        .await;
    assert_eq!(status, 200, "{envelope}");
    assert_eq!(
        envelope["output"],
        "https://api.example.com/..%2Fadmin%3Fx%3D1%23/search?q=rust%20lang%26x%3D1%23top&n=5"
    );
}

/// `tr '\0' '\n' </proc/$PPID/environ` printed `SKILLD_TOKENS=…` to a tool
/// running as the server's own (non-root) user.
#[tokio::test]
async fn a_tool_of_the_same_user_cannot_read_the_servers_environment() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt, chown};
    let setpriv = Path::new("/usr/bin/setpriv");
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    if !root || !setpriv.exists() {
        assert!(std::env::var_os("CI").is_none(), "CI runs as root with setpriv");
        eprintln!("skipped: needs root and setpriv to run the server as another user");
        return;
    }
    let (uid, gid) = (65534, 65534);
    let skills = crate::common::tempdir().unwrap();
    std::fs::set_permissions(skills.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    skill(
        skills.path(),
        "peek",
        &[],
        "sh -c 'tr \"\\\\0\" \"\\\\n\" </proc/$PPID/environ; echo exit=$?'",
    );
    let data = crate::common::tempdir().unwrap();
    chown(data.path(), Some(uid), Some(gid)).unwrap();
    let secret = "s3cret-token-never-leaks";
    let mut cmd = crate::common::serve_as_nobody(skills.path(), data.path(), data.path());
    cmd.env("SKILLD_TOKENS", format!("agent:invoke:{secret}"));
    let (child, addr) = crate::common::serve(&mut cmd);
    let envelope = crate::common::invoke_envelope(&addr, "peek", Some(secret), json!({})).await;
    assert!(crate::common::stop(child).success());
    let output = envelope["output"].as_str().unwrap();
    assert!(!output.contains(secret), "the tool read the token: {output}");
    assert!(!output.contains("SKILLD_TOKENS"), "{output}");
    assert!(output.contains("Permission denied"), "{envelope}");
}

/// What a page on another site can make a browser send to a server
/// without tokens: `text/plain` bodies, foreign `Origin`s, and (after DNS
/// rebinding) a foreign `Host`.
#[tokio::test]
async fn a_web_page_cannot_drive_a_server_without_tokens() {
    let skills = crate::common::tempdir().unwrap();
    let (_out, marker) = mark_skill(skills.path());
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::User)]))
        .allowed()
        .start()
        .await;
    let client = reqwest::Client::new();
    let body = json!({"arguments": {"path": marker}}).to_string();
    let invoke = || client.post(server.url("/tools/mark/invoke"));
    let refused = |res: reqwest::Response, status: u16, code: &'static str| async move {
        assert_eq!(res.status().as_u16(), status);
        let p: Value = res.json().await.unwrap();
        assert_eq!(p["code"], code, "{p}");
    };

    let foreign = "http://attacker.example";
    let attempts: [(Headers, u16, &str); 5] = [
        // A cross-site "simple" request: text/plain, with or without Origin.
        (
            &[("content-type", "text/plain"), ("origin", foreign)],
            403,
            "foreign_origin",
        ),
        (&[("content-type", "text/plain")], 415, "unsupported_media_type"),
        (&[], 415, "unsupported_media_type"),
        // Even JSON, from a foreign page (after a CORS preflight it would not get).
        (
            &[("content-type", "application/json"), ("origin", foreign)],
            403,
            "foreign_origin",
        ),
        // DNS rebinding: the page's own name, resolved to 127.0.0.1.
        (
            &[
                ("content-type", "application/json"),
                ("host", "attacker.example:8080"),
            ],
            403,
            "foreign_host",
        ),
    ];
    for (headers, status, code) in attempts {
        let mut request = invoke().body(body.clone());
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        refused(request.send().await.unwrap(), status, code).await;
    }
    let res = client
        .get(server.url("/approvals"))
        .header("host", "attacker.example")
        .send()
        .await
        .unwrap();
    refused(res, 403, "foreign_host").await;
    assert!(!marker.exists(), "a refused call ran");
    let runs = server.get_json("/runs").await;
    assert_eq!(runs["runs"], json!([]), "a refused call was recorded");

    // The server's own page (same origin) and plain clients still work.
    let own = format!("http://{}", server.addr);
    let res = invoke()
        .header("content-type", "application/json")
        .header("origin", &own)
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "ran\n");
}

/// A decision is the most valuable thing to forge: a foreign page must not
/// approve (or plant a standing allow) on a server without tokens.
#[tokio::test]
async fn a_web_page_cannot_approve_and_allowed_origins_open_the_door_deliberately() {
    let skills = crate::common::tempdir().unwrap();
    let (_out, marker) = mark_skill(skills.path());
    let trusted = "https://inbox.example".to_owned();
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::Untrusted)]))
        .origins(vec![trusted.clone()])
        .start()
        .await;
    // Even with the local secret, a foreign page is refused.
    let client = server.person();
    let held: Value = client
        .post(server.url("/tools/mark/invoke"))
        .json(&json!({"arguments": {"path": marker}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(held["status"], "pending_approval", "{held}");
    let approve = server.url(&format!(
        "/approvals/{}/approve",
        held["approval_id"].as_str().unwrap()
    ));
    for origin in [
        "http://attacker.example",
        "null",
        "https://inbox.example.attacker.example",
    ] {
        let res = client
            .post(&approve)
            .header("origin", origin)
            .json(&json!({"scope": "always"}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 403, "{origin}");
    }
    let grants = server.get_json("/grants").await;
    assert_eq!(grants["grants"], json!([]), "a forged decision left a grant");
    let run = server.get_json(held["run_url"].as_str().unwrap()).await;
    assert_eq!(run["status"], "pending_approval");
    assert!(!marker.exists());

    // The origin the operator allowed may decide.
    let res = client
        .post(&approve)
        .header("origin", &trusted)
        .json(&json!({"scope": "once"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let run = server
        .get_json(&format!("{}?wait=30", held["run_url"].as_str().unwrap()))
        .await;
    assert_eq!(run["status"], "succeeded", "{run}");
}

/// A scripts skill whose tool `<name>_run` sources a hidden helper.
fn scripts_skill(dir: &Path, name: &str) -> std::path::PathBuf {
    let skill = dir.join(name);
    std::fs::create_dir_all(skill.join("scripts")).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        format!("---\nname: {name}\ndescription: Runs a script.\n---\n\nRuns scripts/run.sh.\n"),
    )
    .unwrap();
    std::fs::write(
        skill.join("scripts/run.sh"),
        "#!/bin/sh\n# Says what its helper says.\n. \"$(dirname \"$0\")/.helper.sh\"\n",
    )
    .unwrap();
    std::fs::write(skill.join("scripts/.helper.sh"), "echo approved code\n").unwrap();
    skill
}

/// A hidden `scripts/.helper.sh` was not hashed: editing it kept the
/// approval of the skill, so changed code ran under an old grant.
#[tokio::test]
async fn editing_a_hidden_helper_voids_the_approval() {
    let skills = crate::common::tempdir().unwrap();
    let skill = scripts_skill(skills.path(), "helped");
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::User)]))
        .allowed()
        .start()
        .await;
    let (status, envelope) = server.invoke("helped_run", json!({})).await;
    assert_eq!(
        (status, envelope["output"].as_str()),
        (200, Some("approved code\n"))
    );
    let before = server.catalog.current().skill("helped").unwrap().hash.clone();

    std::fs::write(skill.join("scripts/.helper.sh"), "echo changed code\n").unwrap();
    server.reload().await;
    let after = server.catalog.current().skill("helped").unwrap().hash.clone();
    assert_ne!(before, after, "the hash does not cover the hidden helper");
    let (status, held) = server.invoke("helped_run", json!({})).await;
    assert_eq!(status, 202, "changed code ran under the old grant: {held}");
    assert_eq!(held["status"], "pending_approval");
}

/// A script that is a symlink to a file outside the skill could be edited
/// (or swapped) without changing the skill at all.
#[tokio::test]
async fn a_script_that_leads_outside_the_skill_is_refused() {
    let skills = crate::common::tempdir().unwrap();
    let outside = crate::common::tempdir().unwrap();
    let skill = scripts_skill(skills.path(), "linked");
    let target = outside.path().join("payload.sh");
    std::fs::write(&target, "#!/bin/sh\necho from outside\n").unwrap();
    std::os::unix::fs::symlink(&target, skill.join("scripts/payload.sh")).unwrap();
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::User)]))
        .allowed()
        .start()
        .await;
    let catalog = server.catalog.current();
    assert!(catalog.skill("linked").is_none(), "the skill loaded");
    let d = catalog
        .diagnostics
        .iter()
        .find(|d| d.code == skilld::skill::Code::ProgramOutsideSkill)
        .expect("no program_outside_skill diagnostic");
    assert!(d.path.ends_with("scripts/payload.sh"), "{d:?}");
    let (status, _) = server.invoke("linked_payload", json!({})).await;
    assert_eq!(status, 404);
    // A symlinked directory leading out is refused the same way.
    std::fs::remove_file(skill.join("scripts/payload.sh")).unwrap();
    std::os::unix::fs::symlink(outside.path(), skill.join("scripts/lib")).unwrap();
    server.reload().await;
    assert!(server.catalog.current().skill("linked").is_none());
    // Inside the skill, a symlink is fine, and hashed through.
    std::fs::remove_file(skill.join("scripts/lib")).unwrap();
    std::fs::write(skill.join("shared.sh"), "echo shared\n").unwrap();
    std::os::unix::fs::symlink(skill.join("shared.sh"), skill.join("scripts/.helper.sh.link")).unwrap();
    server.reload().await;
    let before = server
        .catalog
        .current()
        .skill("linked")
        .expect("a symlink inside is fine")
        .hash
        .clone();
    std::fs::write(skill.join("shared.sh"), "echo changed\n").unwrap();
    server.reload().await;
    assert_ne!(server.catalog.current().skill("linked").unwrap().hash, before);
}

/// `npx --no-install ts-node` ran a `node_modules/.bin/ts-node` planted in
/// the workspace; a relative `PATH` entry would do the same for any
/// runtime. Runtimes are absolute paths found at start-up, and a tool's
/// program is never looked up in a relative `PATH` directory.
#[tokio::test]
async fn the_workspace_cannot_choose_a_runtime() {
    let skills = crate::common::tempdir().unwrap();
    let skill = skills.path().join("typed");
    std::fs::create_dir_all(skill.join("scripts")).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: typed\ndescription: Scripts in two languages.\nread_only: true\n---\n\nRuns scripts.\n",
    )
    .unwrap();
    std::fs::write(skill.join("scripts/hello.ts"), "console.log('hi')\n").unwrap();
    std::fs::write(skill.join("scripts/hello_py.py"), "print('real python')\n").unwrap();
    // A command tool runs a bare program name, looked up on the tool's PATH.
    self::skill(skills.path(), "bare", &[], "python3 -c \"print('real')\"");
    let workspace = crate::common::tempdir().unwrap();
    let marker = workspace.path().join("planted-ran");
    let plant = |path: &Path| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, format!("#!/bin/sh\necho planted >> {}\n", marker.display())).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    plant(&workspace.path().join("node_modules/.bin/ts-node"));
    plant(&workspace.path().join("python3"));
    plant(&workspace.path().join("npx"));
    let data = crate::common::tempdir().unwrap();
    let mut cmd = crate::common::skilld();
    cmd.current_dir(workspace.path())
        .args(["serve", "--bind", "127.0.0.1:0", "--no-watch", "--skills"])
        .arg(format!("bundled={}", skills.path().display()))
        .arg("--data-dir")
        .arg(data.path())
        .arg("--workspace")
        .arg(workspace.path())
        .env("PATH", "node_modules/.bin:.::/usr/local/bin:/usr/bin:/bin")
        .env_remove("SKILLD_DATABASE_URL");
    let (child, addr) = crate::common::serve(&mut cmd);
    let call = |tool: &'static str| crate::common::invoke_envelope(&addr, tool, None, json!({}));
    let py = call("typed_hello_py").await;
    let ts = call("typed_hello").await;
    let bare = call("bare").await;
    assert!(crate::common::stop(child).success());
    assert!(!marker.exists(), "a planted program ran: {py} {ts} {bare}");
    assert_eq!(bare["output"], "real\n", "{bare}");
    assert_eq!(py["output"], "real python\n", "{py}");
    assert_eq!(ts["success"], false, "{ts}");
}

/// `SKILLD_*`, `*_TOKENS` and `*_URL` variables reached a tool when an
/// operator listed them in `env_allow`.
#[tokio::test]
async fn the_servers_secrets_never_reach_a_tool_even_when_allowed() {
    let skills = crate::common::tempdir().unwrap();
    skill(skills.path(), "show_env", &[], "env");
    let data = crate::common::tempdir().unwrap();
    let config = data.path().join("skilld.toml");
    std::fs::write(
        &config,
        "env_allow = [\"SKILLD_TOKENS\", \"SKILLD_CONFIG\", \"CI_TOKENS\", \"DATABASE_URL\", \"HARMLESS\"]\n",
    )
    .unwrap();
    let secret = "agent-secret-0f0f";
    let mut cmd = crate::common::skilld();
    cmd.args(["serve", "--bind", "127.0.0.1:0", "--no-watch", "--config"])
        .arg(&config)
        .arg("--skills")
        .arg(format!("bundled={}", skills.path().display()))
        .arg("--data-dir")
        .arg(data.path())
        .env("SKILLD_TOKENS", format!("agent:invoke:{secret}"))
        .env("CI_TOKENS", "ci-secret")
        .env("DATABASE_URL", "postgres://app:db-password@db/app")
        .env("HARMLESS", "visible")
        .env_remove("SKILLD_DATABASE_URL");
    let (child, addr) = crate::common::serve(&mut cmd);
    let envelope = crate::common::invoke_envelope(&addr, "show_env", Some(secret), json!({})).await;
    assert!(crate::common::stop(child).success());
    let output = envelope["output"].as_str().unwrap();
    assert!(output.contains("HARMLESS=visible"), "{envelope}");
    for leaked in [
        secret,
        "SKILLD_",
        "ci-secret",
        "db-password",
        "CI_TOKENS",
        "DATABASE_URL",
    ] {
        assert!(!output.contains(leaked), "{leaked} reached the tool: {output}");
    }
}

/// Any invoke token could cancel anyone's run.
#[tokio::test]
async fn only_the_requester_or_an_approver_may_cancel_a_run() {
    use skilld::auth::{Auth, Role, Token};
    let skills = crate::common::tempdir().unwrap();
    skill(skills.path(), "nap", &[], "sleep 30");
    let auth = Auth::new(vec![
        Token::with_secret("alice", Role::Invoke, "alice-secret", "test").unwrap(),
        Token::with_secret("mallory", Role::Invoke, "mallory-secret", "test").unwrap(),
        Token::with_secret("boss", Role::Approve, "boss-secret", "test").unwrap(),
    ])
    .unwrap();
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::User)]))
        .auth(auth)
        .allowed()
        .start()
        .await;
    let client = reqwest::Client::new();
    let start = || async {
        let accepted: Value = client
            .post(server.url("/tools/nap/invoke"))
            .bearer_auth("alice-secret")
            .header("prefer", "respond-async")
            .json(&json!({}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        accepted["run_id"].as_str().unwrap().to_owned()
    };
    let cancel = |id: String, secret: &'static str| {
        let request = client
            .post(server.url(&format!("/runs/{id}/cancel")))
            .bearer_auth(secret);
        async move { request.send().await.unwrap() }
    };
    let id = start().await;
    let res = cancel(id.clone(), "mallory-secret").await;
    assert_eq!(res.status(), 403);
    let p: Value = res.json().await.unwrap();
    assert_eq!(p["code"], "not_requester", "{p}");
    let run: Value = client
        .get(server.url(&format!("/runs/{id}")))
        .bearer_auth("alice-secret")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(run["status"], "running", "mallory stopped alice's run: {run}");
    // The approver may, and so may alice herself.
    assert_eq!(cancel(id, "boss-secret").await.status(), 202);
    assert_eq!(cancel(start().await, "alice-secret").await.status(), 202);
}

/// A problem's detail never carries the database's own words.
#[test]
fn store_errors_keep_the_databases_words_out_of_responses() {
    let db_text = "duplicate key value violates unique constraint \"runs_pkey\"";
    for e in [
        skilld::store::StoreError::Conflict(db_text.to_owned()),
        skilld::store::StoreError::Other(db_text.to_owned()),
        skilld::store::StoreError::Unavailable(db_text.to_owned()),
    ] {
        let problem = skilld::http::kit::error::ApiError::from(e).problem();
        assert!(!problem.detail.contains("runs_pkey"), "{problem:?}");
    }
}

/// `mode` was unbounded (900 kB values were stored), reached the tool as
/// `SKILL_MODE`, and was not shown to the approver.
#[tokio::test]
async fn mode_is_a_short_name_and_the_approver_sees_it() {
    let skills = crate::common::tempdir().unwrap();
    let (_out, marker) = mark_skill(skills.path());
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::Untrusted)]))
        .start()
        .await;
    let client = reqwest::Client::new();
    for mode in [
        "x".repeat(900_000),
        "Dev\nSKILLD_TOKENS=x".to_owned(),
        String::new(),
        "Dév".to_owned(),
    ] {
        let res = client
            .post(server.url("/tools/mark/invoke"))
            .json(&json!({"arguments": {"path": marker}, "mode": mode}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 400, "{} chars", mode.len());
    }
    let runs = server.get_json("/runs").await;
    assert_eq!(runs["runs"], json!([]), "a refused mode was recorded");
    let held: Value = client
        .post(server.url("/tools/mark/invoke"))
        .json(&json!({"arguments": {"path": marker}, "mode": "Dev"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let approval = server.get_json(held["approval_url"].as_str().unwrap()).await;
    assert_eq!(approval["mode"], "Dev", "{approval}");
    assert!(!marker.exists());
}

/// One invoke token created 200 pending approvals in 1.2 s.
#[tokio::test]
async fn one_caller_cannot_bury_the_inbox() {
    use skilld::auth::{Auth, Role, Token};
    let skills = crate::common::tempdir().unwrap();
    let (_out, marker) = mark_skill(skills.path());
    let auth = Auth::new(vec![
        Token::with_secret("flooder", Role::Invoke, "flooder-secret", "test").unwrap(),
        Token::with_secret("other", Role::Invoke, "other-secret", "test").unwrap(),
    ])
    .unwrap();
    let data = crate::common::tempdir().unwrap();
    let url = format!("sqlite://{}", data.path().join("skilld.db").display());
    let store = skilld::store::connect(&url).await.unwrap();
    let settings = skilld::invoke::RunSettings {
        max_pending_per_caller: 3,
        ..Default::default()
    };
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::Untrusted)]))
        .settings(settings)
        .store(store, data)
        .auth(auth)
        .start()
        .await;
    let client = reqwest::Client::new();
    // Each call differs (its own path): a repeat of a pending call would
    // join its request rather than file another.
    let call = |secret: &'static str, n: usize| {
        client
            .post(server.url("/tools/mark/invoke"))
            .bearer_auth(secret)
            .json(&json!({"arguments": {"path": format!("{}.{n}", marker.display())}}))
            .send()
    };
    for n in 0..3 {
        assert_eq!(call("flooder-secret", n).await.unwrap().status(), 202);
    }
    let res = call("flooder-secret", 3).await.unwrap();
    assert_eq!(res.status(), 429);
    assert!(res.headers().contains_key("retry-after"));
    let p: Value = res.json().await.unwrap();
    assert!(p["detail"].as_str().unwrap().contains("at most 3"), "{p}");
    // Another caller still gets through; the refused call left nothing.
    assert_eq!(call("other-secret", 0).await.unwrap().status(), 202);
    let pending: Value = client
        .get(server.url("/approvals?status=pending"))
        .bearer_auth("other-secret")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(pending["approvals"].as_array().unwrap().len(), 4, "{pending}");
}

/// A client that never finishes its headers, or trickles its body, held a
/// connection and a task for as long as it liked.
#[tokio::test]
async fn slow_clients_are_cut_off() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let skills = crate::common::tempdir().unwrap();
    skill(skills.path(), "echo_it", &["v"], "echo {{v}}");
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::User)]))
        .allowed()
        .start()
        .await;
    let started = std::time::Instant::now();
    let headers = async {
        let mut tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
        tcp.write_all(b"POST /tools/echo_it/invoke HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            .await
            .unwrap();
        let mut buf = Vec::new();
        // The server closes the connection (it may say 408 first).
        tokio::time::timeout(Duration::from_secs(25), tcp.read_to_end(&mut buf))
            .await
            .expect("the server kept a connection whose headers never ended")
            .ok();
        started.elapsed()
    };
    let body = async {
        let mut tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
        tcp.write_all(
            b"POST /tools/echo_it/invoke HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n\
              content-length: 100\r\n\r\n{\"arguments\"",
        )
        .await
        .unwrap();
        let mut buf = Vec::new();
        tokio::time::timeout(Duration::from_secs(45), tcp.read_to_end(&mut buf))
            .await
            .expect("the server waited for a body that never came")
            .ok();
        String::from_utf8_lossy(&buf).into_owned()
    };
    let (headers_cut, answer) = tokio::join!(headers, body);
    assert!(headers_cut < Duration::from_secs(20), "{headers_cut:?}");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("request_timeout"), "{answer}");
    let runs = server.get_json("/runs").await;
    assert_eq!(runs["runs"], json!([]));
}

/// Event streams were unbounded in number and in time.
#[tokio::test]
async fn event_streams_are_bounded_in_number_and_lifetime() {
    let skills = crate::common::tempdir().unwrap();
    let (_out, marker) = mark_skill(skills.path());
    let settings = skilld::invoke::RunSettings {
        max_streams: 2,
        max_stream: Duration::from_secs(2),
        ..Default::default()
    };
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::Untrusted)]))
        .settings(settings)
        .start()
        .await;
    let client = reqwest::Client::new();
    // Three different calls (their own paths): the same call again would
    // join the first's request.
    let stream = |n: usize| {
        client
            .post(server.url("/tools/mark/invoke"))
            .header("accept", "text/event-stream")
            .json(&json!({"arguments": {"path": format!("{}.{n}", marker.display())}}))
            .send()
    };
    let mut first = stream(1).await.unwrap();
    let _second = stream(2).await.unwrap();
    assert_eq!(first.status(), 200);
    let third = stream(3).await.unwrap();
    assert_eq!(third.status(), 503);
    let p: Value = third.json().await.unwrap();
    assert!(
        p["detail"].as_str().unwrap().contains("event streams are open"),
        "{p}"
    );
    let pending = server.get_json("/approvals?status=pending").await;
    assert_eq!(
        pending["approvals"].as_array().unwrap().len(),
        2,
        "the refused stream's call was held"
    );
    // The first stream ends after its lifetime, though its call still waits.
    let started = std::time::Instant::now();
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(_chunk) = first.chunk().await.unwrap() {}
    })
    .await;
    assert!(ended.is_ok(), "a stream outlived its lifetime");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // Its room is given back.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(stream(4).await.unwrap().status(), 200);
    assert!(!marker.exists());
}

/// `/proc/<pid>/environ` shows the environment block as it was at exec,
/// whatever `std::env` removes: the server overwrites its secrets there
/// once it has read them. Read here as root, who can read a non-dumpable
/// process's entries; the tokens still work.
#[tokio::test]
async fn the_servers_environment_block_no_longer_holds_its_secrets() {
    if !nix::unistd::geteuid().is_root() {
        assert!(std::env::var_os("CI").is_none(), "CI runs as root");
        eprintln!("skipped: only root reads a non-dumpable process's environment");
        return;
    }
    let data = crate::common::tempdir().unwrap();
    let db = format!("sqlite://{}/db-secret-path.db", data.path().display());
    let mut cmd = crate::common::skilld();
    cmd.args(["serve", "--bind", "127.0.0.1:0", "--no-watch", "--data-dir"])
        .arg(data.path())
        .env("SKILLD_TOKENS", "boss:admin:env-secret-never-in-proc")
        .env("SKILLD_DATABASE_URL", &db);
    let (child, addr) = crate::common::serve(&mut cmd);
    let environ = std::fs::read(format!("/proc/{}/environ", child.id())).unwrap();
    let environ = String::from_utf8_lossy(&environ);
    assert!(
        environ.contains("SKILLD_LOG="),
        "not the server's block: {environ}"
    );
    assert!(!environ.contains("env-secret-never-in-proc"), "{environ}");
    assert!(!environ.contains("db-secret-path"), "{environ}");
    let res = reqwest::Client::new()
        .get(format!("http://{addr}/grants"))
        .bearer_auth("env-secret-never-in-proc")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert!(data.path().join("db-secret-path.db").exists());
    crate::common::stop(child);
}
