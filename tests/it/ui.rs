//! The web inbox (`/ui`): its files and headers over a real socket, and the
//! whole approval flow driven in a real headless browser (Debian's
//! chromium, through `tests/browser/inbox.mjs` and playwright-core): a call
//! waits for approval, a person clicks "Approve once" and sees it succeed,
//! and the tool ran exactly once; with tokens, the page asks for one and
//! shows the 403 of a token that may not decide; "Deny always" with a note
//! ends the run denied and refuses the next call, which never runs.

use crate::common::{TestServer, options, root};
use reqwest::StatusCode;
use serde_json::{Value, json};
use skilld::auth::{Auth, Role, Token};
use skilld::skill::Trust;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

const INVOKE: &str = "ui-invoke-secret-0123";
const APPROVE: &str = "ui-approve-secret-4567";
/// The second argument of the call: its bidi override and line separator
/// would make the preview read as something else (`…exe.txt` shown as
/// `…txt.exe`) unless they are shown escaped.
const MESSAGE: &str = "hello from the inbox \u{202e}txt.exe\u{2028}";
/// How the preview must show [`MESSAGE`].
const MESSAGE_SHOWN: &str = r"$'hello from the inbox \u202etxt.exe\u2028'";

/// A user skill that is not read-only, so every call asks first; its tool
/// appends a line to a marker file (the effect that shows how many times it
/// ran) and echoes a message (the output the page must show).
fn marker_skill(dir: &Path) {
    let skill = dir.join("inbox-demo");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: inbox-demo\nversion: 1.0.0\ndescription: Leaves a mark and says so.\n---\n\n\
         ### leave_mark\n\nAppends a line to a file and echoes a message.\n\n#### Parameters\n\n\
         | Name | Type | Required | Description |\n|---|---|---|---|\n\
         | path | string | true | The file to append to |\n\
         | message | string | true | What to echo |\n\n\
         #### Command\n\n```\nsh -c 'echo ran >> \"$0\"; echo \"$1\"' {{path}} {{message}}\n```\n",
    )
    .unwrap();
}

fn tokens() -> Auth {
    Auth::new(vec![
        Token::with_secret("agent", Role::Invoke, INVOKE, "test").unwrap(),
        Token::with_secret("boss", Role::Approve, APPROVE, "test").unwrap(),
    ])
    .unwrap()
}

async fn get(url: &str) -> reqwest::Response {
    reqwest::get(url).await.unwrap()
}

#[tokio::test]
async fn the_page_and_its_assets_are_served_with_strict_headers() {
    let skills = crate::common::tempdir().unwrap();
    // With tokens configured: the page itself holds no data and needs none.
    let server = TestServer::start_with_auth(options(vec![root(skills.path(), Trust::User)]), tokens()).await;

    for (path, content_type, needle) in [
        ("/ui", "text/html; charset=utf-8", "<h2 id=\"approvals-heading\">"),
        ("/ui/app.js", "text/javascript; charset=utf-8", "textContent"),
        ("/ui/style.css", "text/css; charset=utf-8", ".badge"),
    ] {
        let res = get(&server.url(path)).await;
        assert_eq!(res.status(), StatusCode::OK, "{path}");
        let h = res.headers().clone();
        assert_eq!(h["content-type"], content_type, "{path}");
        assert_eq!(h["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(h["x-frame-options"], "DENY", "{path}");
        assert_eq!(h["referrer-policy"], "no-referrer", "{path}");
        assert_eq!(h["cache-control"], "no-cache", "{path}");
        let csp = h["content-security-policy"].to_str().unwrap();
        assert!(csp.starts_with("default-src 'self';"), "{csp}");
        for directive in ["script-src 'self'", "frame-ancestors 'none'", "base-uri 'none'"] {
            assert!(csp.contains(directive), "{csp} lacks {directive}");
        }
        assert!(!csp.contains("unsafe"), "{csp}");
        assert!(h.contains_key("x-request-id"), "{path}");
        let body = res.text().await.unwrap();
        assert!(body.contains(needle), "{path} lacks {needle}");
    }

    // Server data never goes through innerHTML, and nothing is fetched from
    // elsewhere (the CSP would block it; this says so before a browser does).
    let js = get(&server.url("/ui/app.js")).await.text().await.unwrap();
    for sink in [
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
    ] {
        assert!(!js.contains(sink), "app.js uses {sink}");
    }
    let html = get(&server.url("/ui")).await.text().await.unwrap();
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "index.html links outside"
    );
    assert!(
        !html.contains("<script>") && !html.contains(" style="),
        "index.html has inline code"
    );

    // `/ui/` leads to `/ui`, whose relative links then resolve.
    let res = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(server.url("/ui/"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::PERMANENT_REDIRECT);
    assert_eq!(res.headers()["location"], "../ui");

    let res = get(&server.url("/ui/secrets.txt")).await;
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    assert_eq!(res.headers()["content-type"], "application/problem+json");
    let res = get(&server.url("/ui/..%2FCargo.toml")).await;
    assert_eq!(res.status(), StatusCode::NOT_FOUND);

    // The API behind the page still wants a token.
    assert_eq!(get(&server.url("/runs")).await.status(), StatusCode::UNAUTHORIZED);
}

/// What `tests/browser/inbox.mjs` needs: node, the browser and `npm ci`'s
/// playwright-core. `None` (after a loud message) when something is missing
/// outside CI; a failure in CI, where `.ci/run` installs them.
fn browser_harness() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser");
    let chromium = std::env::var_os("CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    let node = std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let mut missing = Vec::new();
    if !node {
        missing.push("node (apt-get install -y nodejs)".to_owned());
    }
    if !chromium.is_file() {
        missing.push(format!("{} (apt-get install -y chromium)", chromium.display()));
    }
    if !dir.join("node_modules/playwright-core/package.json").is_file() {
        missing.push(format!("playwright-core (cd {} && npm ci)", dir.display()));
    }
    if missing.is_empty() {
        return Some(dir);
    }
    let message = format!("the browser test needs: {}", missing.join(", "));
    if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
        panic!("{message}; .ci/run installs them");
    }
    // Straight to stderr: libtest captures `eprintln!` of a passing test.
    let _ = writeln!(std::io::stderr(), "\n!!!!!!!!!! SKIPPED: {message} !!!!!!!!!!\n");
    None
}

/// One run of `tests/browser/inbox.mjs`: who uses the page and what they do.
struct Visit<'a> {
    /// The token typed into the page after it showed the 401 (with auth).
    token: Option<&'a str>,
    /// A token that may see the request but not decide it, tried first.
    weak_token: Option<&'a str>,
    action: &'a str,
    note: Option<&'a str>,
    /// The run's status the page must come to show.
    status: &'a str,
    screenshot: &'a str,
}

/// Runs the browser script against `server`; returns what it printed.
async fn drive_inbox(harness: &Path, server: &TestServer, call: &Pending, visit: &Visit<'_>) -> Value {
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join(visit.screenshot);
    let mut cmd = tokio::process::Command::new("node");
    cmd.current_dir(harness)
        .arg(harness.join("inbox.mjs"))
        .arg(server.url(""))
        .args(visit.token)
        .env("INBOX_APPROVAL_ID", &call.approval_id)
        .env("INBOX_PREVIEW", &call.preview)
        .env("INBOX_ACTION", visit.action)
        .env("INBOX_STATUS", visit.status)
        .env("INBOX_SCREENSHOT", &shot)
        .kill_on_drop(true);
    if visit.status == "succeeded" {
        cmd.env("INBOX_OUTPUT", MESSAGE);
    }
    if let Some(note) = visit.note {
        cmd.env("INBOX_NOTE", note);
    }
    if let Some(weak) = visit.weak_token {
        cmd.env("INBOX_WEAK_TOKEN", weak);
    }
    let out = tokio::time::timeout(Duration::from_secs(180), cmd.output())
        .await
        .expect("the browser test took over 3 minutes")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "inbox.mjs failed ({}); screenshot at {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status,
        shot.display()
    );
    let line = stdout.lines().last().unwrap_or_default();
    let seen: Value =
        serde_json::from_str(line).unwrap_or_else(|e| panic!("inbox.mjs printed {stdout:?}: {e}"));
    // The page showed the request for what it is: this run, this command.
    assert_eq!(seen["run_id"], call.run_id.as_str(), "{seen}");
    assert_eq!(seen["preview"], call.preview.as_str(), "{seen}");
    assert_eq!(seen["status"], visit.status, "{seen}");
    seen
}

/// A call of `leave_mark` waiting for a person.
struct Pending {
    run_id: String,
    approval_id: String,
    /// What the page must show as the command.
    preview: String,
    /// The file the tool appends to: its lines count its runs.
    marker: PathBuf,
    _dir: tempfile::TempDir,
}

/// Calls `leave_mark` and checks it waits for approval without running.
async fn pending_call(server: &TestServer, token: Option<&str>) -> Pending {
    let dir = crate::common::marks_dir();
    let marker = dir.path().join("marker");
    let marker_text = marker.to_str().unwrap().to_owned();
    // Plain words need no quoting in the preview; a temp path is one.
    assert!(
        marker_text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-".contains(&b)),
        "{marker_text}"
    );
    let res = api(server, reqwest::Method::POST, "/tools/leave_mark/invoke", token)
        .json(&json!({"arguments": {"path": marker_text, "message": MESSAGE}}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    let location = res.headers()["location"].to_str().unwrap().to_owned();
    let accepted: Value = res.json().await.unwrap();
    assert_eq!(accepted["status"], "pending_approval", "{accepted}");
    let run_id = accepted["run_id"].as_str().unwrap().to_owned();
    assert_eq!(location, format!("/runs/{run_id}"));
    // Nothing runs before a person says yes.
    assert!(!marker.exists());
    Pending {
        run_id,
        approval_id: accepted["approval_id"].as_str().unwrap().to_owned(),
        preview: format!(r#"sh -c 'echo ran >> "$0"; echo "$1"' {marker_text} {MESSAGE_SHOWN}"#),
        marker,
        _dir: dir,
    }
}

fn api(
    server: &TestServer,
    method: reqwest::Method,
    path: &str,
    token: Option<&str>,
) -> reqwest::RequestBuilder {
    let req = reqwest::Client::new().request(method, server.url(path));
    match token {
        Some(t) => req.bearer_auth(t),
        None => req,
    }
}

async fn get_json(server: &TestServer, path: &str, token: Option<&str>) -> Value {
    let res = api(server, reqwest::Method::GET, path, token)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK, "{path}");
    res.json().await.unwrap()
}

/// Starts a server over the `leave_mark` skill, with or without tokens.
async fn marker_server(auth: Option<Auth>) -> (TestServer, tempfile::TempDir) {
    let skills = crate::common::tempdir().unwrap();
    marker_skill(skills.path());
    let opts = options(vec![root(skills.path(), Trust::User)]);
    let server = match auth {
        Some(auth) => TestServer::start_with_auth(opts, auth).await,
        None => TestServer::start(opts).await,
    };
    (server, skills)
}

/// After "Approve once": the run succeeded in the API as on the page, the
/// request is decided, and the tool ran exactly once.
async fn assert_approved_once(server: &TestServer, call: &Pending, token: Option<&str>, seen: &Value) {
    assert_eq!(seen["output"], format!("{MESSAGE}\n"), "{seen}");
    assert_eq!(seen["exit_code"], "0", "{seen}");
    let run = get_json(server, &format!("/runs/{}?wait=10", call.run_id), token).await;
    assert_eq!(run["status"], "succeeded", "{run}");
    assert_eq!(run["approval_id"], call.approval_id.as_str(), "{run}");
    assert_eq!(run["result"]["exit_code"], 0, "{run}");
    assert_eq!(run["result"]["output"], format!("{MESSAGE}\n"), "{run}");
    let approval = get_json(server, &format!("/approvals/{}", call.approval_id), token).await;
    assert_eq!(
        (&approval["status"], &approval["scope"]),
        (&json!("approved"), &json!("once")),
        "{approval}"
    );
    let pending = get_json(server, "/approvals?status=pending", token).await;
    assert_eq!(pending["approvals"], json!([]), "{pending}");
    // Exactly once: one line, and no other run of the tool was recorded.
    assert_eq!(std::fs::read_to_string(&call.marker).unwrap(), "ran\n");
    let runs = get_json(server, "/runs?tool=leave_mark", token).await;
    assert_eq!(runs["runs"].as_array().map(Vec::len), Some(1), "{runs}");
}

#[tokio::test]
async fn a_person_approves_a_pending_call_in_the_browser_and_sees_it_succeed() {
    let Some(harness) = browser_harness() else { return };
    let (server, _skills) = marker_server(None).await;
    let call = pending_call(&server, None).await;
    let visit = Visit {
        token: None,
        weak_token: None,
        action: "Approve once",
        note: None,
        status: "succeeded",
        screenshot: "ui-approve.png",
    };
    let seen = drive_inbox(&harness, &server, &call, &visit).await;
    assert_approved_once(&server, &call, None, &seen).await;
}

#[tokio::test]
async fn with_tokens_the_page_asks_for_one_and_only_an_approve_token_decides() {
    let Some(harness) = browser_harness() else { return };
    let (server, _skills) = marker_server(Some(tokens())).await;
    let call = pending_call(&server, Some(INVOKE)).await;
    // Without a token the page shows the 401; the requester's own invoke
    // token sees the request but its click is refused with the 403's
    // detail (and nothing runs); the approve token then decides it.
    let visit = Visit {
        token: Some(APPROVE),
        weak_token: Some(INVOKE),
        action: "Approve once",
        note: None,
        status: "succeeded",
        screenshot: "ui-approve-tokens.png",
    };
    let seen = drive_inbox(&harness, &server, &call, &visit).await;
    assert_approved_once(&server, &call, Some(APPROVE), &seen).await;
    let approval = get_json(
        &server,
        &format!("/approvals/{}", call.approval_id),
        Some(APPROVE),
    )
    .await;
    assert_eq!(
        (&approval["requested_by"], &approval["decided_by"]),
        (&json!("agent"), &json!("boss")),
        "{approval}"
    );
}

#[tokio::test]
async fn deny_always_with_a_note_in_the_browser_refuses_this_call_and_the_next() {
    let Some(harness) = browser_harness() else { return };
    let (server, _skills) = marker_server(None).await;
    let call = pending_call(&server, None).await;
    let note = "never <b>this</b> one";
    let visit = Visit {
        token: None,
        weak_token: None,
        action: "Deny always",
        note: Some(note),
        status: "denied",
        screenshot: "ui-deny.png",
    };
    drive_inbox(&harness, &server, &call, &visit).await;

    let run = get_json(&server, &format!("/runs/{}", call.run_id), None).await;
    assert_eq!(run["status"], "denied", "{run}");
    let approval = get_json(&server, &format!("/approvals/{}", call.approval_id), None).await;
    assert_eq!(
        (&approval["status"], &approval["scope"], &approval["note"]),
        (&json!("denied"), &json!("always"), &json!(note)),
        "{approval}"
    );
    let grants = get_json(&server, "/grants", None).await;
    let grants = grants["grants"].as_array().unwrap();
    assert_eq!(grants.len(), 1, "{grants:?}");
    assert_eq!(
        (&grants[0]["skill"], &grants[0]["tool"], &grants[0]["decision"]),
        (&json!("inbox-demo"), &json!("leave_mark"), &json!("deny")),
        "{grants:?}"
    );
    // The standing deny refuses the next call outright; neither ran.
    let res = api(&server, reqwest::Method::POST, "/tools/leave_mark/invoke", None)
        .json(&json!({"arguments": {"path": call.marker.to_str().unwrap(), "message": MESSAGE}}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    assert!(!call.marker.exists());
}
