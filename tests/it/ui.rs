//! The web inbox (`/ui`): its files and headers over a real socket, and the
//! approver's work driven in a real headless browser (Debian's chromium,
//! through the scripts of `tests/browser` and playwright-core):
//! - a call waits for approval, a person clicks "Approve once" and sees it
//!   succeed, and the tool ran exactly once; with tokens, the page asks for
//!   one and shows the 403 of a token that may not decide; "Deny always"
//!   with a note, confirmed in the page, ends the run denied and refuses
//!   the next call, which never runs;
//! - a new request arrives live, without a reload or a poll, counted in the
//!   tab's title and announced by an opt-in notification; decided
//!   elsewhere, it leaves the page;
//! - identical requests make one card whose "Approve all 3" runs the tool
//!   three times; the keyboard moves, approves, denies, and asks before a
//!   standing decision;
//! - standing decisions are listed and revoked after a confirmation; the
//!   history shows who decided what, pages, and filters;
//! - without tokens, the start link's secret (`/ui#secret=…`) leaves the
//!   address bar and stays in the tab's sessionStorage; another port of
//!   the host never receives it, and the old link's cookie is no way in.

use crate::common::{Script, TestServer, browser_harness, options, root};
use futures_util::StreamExt;
use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use skilld::auth::{Auth, Role, Token};
use skilld::invoke::RunSettings;
use skilld::skill::Trust;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

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
        "---\nname: inbox-demo\nversion: 1.0.0\ndescription: Leaves a mark and says so.\n\
         permissions: [shell:exec, git:read]\n---\n\n\
         ### leave_mark\n\nAppends a line to a file and echoes a message.\n\n#### Parameters\n\n\
         | Name | Type | Required | Description |\n|---|---|---|---|\n\
         | path | string | true | The file to append to |\n\
         | message | string | true | What to echo |\n\n\
         #### Command\n\n```\nsh -c 'echo ran >> \"$0\"; echo \"$1\"' {{path}} {{message}}\n```\n",
    )
    .unwrap();
}

/// A second user skill, so the history has two to filter by: its tool
/// echoes a message and leaves no mark.
fn echo_skill(dir: &Path) {
    let skill = dir.join("inbox-echo");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: inbox-echo\nversion: 1.0.0\ndescription: Says something.\n---\n\n\
         ### say_it\n\nEchoes a message.\n\n#### Parameters\n\n\
         | Name | Type | Required | Description |\n|---|---|---|---|\n\
         | message | string | true | What to echo |\n\n\
         #### Command\n\n```\nsh -c 'echo \"$0\"' {{message}}\n```\n",
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
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::User)]))
        .auth(tokens())
        .start()
        .await;

    for (path, content_type, needle) in [
        ("/ui", "text/html; charset=utf-8", "<h2 id=\"approvals-heading\">"),
        ("/ui/app.js", "text/javascript; charset=utf-8", "textContent"),
        ("/ui/style.css", "text/css; charset=utf-8", ".badge"),
    ] {
        let body = strictly_served(&server, path, content_type).await;
        assert!(body.contains(needle), "{path} lacks {needle}");
    }

    // Every module of the page, found from `app.js` by its imports, is served
    // the same way; server data never goes through innerHTML, and nothing is
    // fetched from elsewhere (the CSP would block it; this says so before a
    // browser does).
    let modules = page_modules(&server).await;
    for (name, js) in &modules {
        for sink in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
            "import(",
        ] {
            assert!(!js.contains(sink), "{name} uses {sink}");
        }
    }
    // No file of `ui/` is left out (or served without being checked here).
    let mut on_disk: Vec<String> = std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("ui"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".js"))
        .collect();
    on_disk.sort();
    let served: Vec<String> = modules.keys().cloned().collect();
    assert_eq!(served, on_disk, "the modules app.js imports are not ui/*.js");

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

/// GETs `path` and checks it is served as `content_type` with the headers
/// that keep the page inert to injection, sniffing and framing; its body.
async fn strictly_served(server: &TestServer, path: &str, content_type: &str) -> String {
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
    res.text().await.unwrap()
}

/// The relative names a module imports (`import … from './api.js'`), each
/// checked to be a file beside it: no URL, no path, no bare package name.
fn imports_of(name: &str, js: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in js.lines().map(str::trim_start) {
        // `} from './x.js';` ends an import that names over several lines.
        if !["import ", "export ", "} from "]
            .iter()
            .any(|start| line.starts_with(start))
        {
            continue;
        }
        let Some((_, rest)) = line.split_once(" from '").or_else(|| line.split_once("import '")) else {
            continue;
        };
        let target = rest.split_once('\'').map_or(rest, |(target, _)| target);
        let file = target
            .strip_prefix("./")
            .unwrap_or_else(|| panic!("{name} imports {target}"));
        assert!(
            file.ends_with(".js")
                && file
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b == b'-' || b == b'.'),
            "{name} imports {target}"
        );
        found.push(file.to_owned());
    }
    found
}

/// Every module of the page, by name: `app.js` and what it imports, and so
/// on, each served strictly (`strictly_served`). Fails on an import cycle:
/// the kit imports no part of the page, and no part imports `app.js`.
async fn page_modules(server: &TestServer) -> std::collections::BTreeMap<String, String> {
    let mut modules = std::collections::BTreeMap::new();
    let mut imports = std::collections::BTreeMap::new();
    let mut queue = vec!["app.js".to_owned()];
    while let Some(name) = queue.pop() {
        if modules.contains_key(&name) {
            continue;
        }
        let js = strictly_served(server, &format!("/ui/{name}"), "text/javascript; charset=utf-8").await;
        let wanted = imports_of(&name, &js);
        queue.extend(wanted.iter().cloned());
        imports.insert(name.clone(), wanted);
        modules.insert(name, js);
    }
    // Depth first; a module met again while still on the path closes a cycle.
    fn visit<'a>(
        name: &'a str,
        imports: &'a std::collections::BTreeMap<String, Vec<String>>,
        path: &mut Vec<&'a str>,
        done: &mut std::collections::BTreeSet<&'a str>,
    ) {
        if let Some(at) = path.iter().position(|n| *n == name) {
            panic!("import cycle: {} -> {name}", path[at..].join(" -> "));
        }
        if !done.insert(name) {
            return;
        }
        path.push(name);
        for next in &imports[name] {
            visit(next, imports, path, done);
        }
        path.pop();
    }
    visit(
        "app.js",
        &imports,
        &mut Vec::new(),
        &mut std::collections::BTreeSet::new(),
    );
    modules
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
    /// How many pending requests the page must count before the click.
    pending: Option<&'a str>,
}

/// Runs `inbox.mjs` against `server`; returns what it printed.
async fn drive_inbox(harness: &Path, server: &TestServer, call: &Pending, visit: &Visit<'_>) -> Value {
    let mut env = vec![
        ("INBOX_APPROVAL_ID", call.approval_id.as_str()),
        ("INBOX_PREVIEW", call.preview.as_str()),
        ("INBOX_ACTION", visit.action),
        ("INBOX_STATUS", visit.status),
    ];
    if visit.status == "succeeded" {
        env.push(("INBOX_OUTPUT", MESSAGE));
    }
    if let Some(note) = visit.note {
        env.push(("INBOX_NOTE", note));
    }
    if let Some(weak) = visit.weak_token {
        env.push(("INBOX_WEAK_TOKEN", weak));
    }
    if let Some(pending) = visit.pending {
        env.push(("INBOX_PENDING", pending));
    }
    let page = Script::start(harness, "inbox.mjs", visit.screenshot, server, visit.token, &env);
    let seen = page.done().await;
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
    let held = held_call(
        server,
        "leave_mark",
        json!({"path": marker_text, "message": MESSAGE}),
        token,
    )
    .await;
    // Nothing runs before a person says yes.
    assert!(!marker.exists());
    Pending {
        run_id: held.run_id,
        approval_id: held.approval_id,
        preview: format!(r#"sh -c 'echo ran >> "$0"; echo "$1"' {marker_text} {MESSAGE_SHOWN}"#),
        marker,
        _dir: dir,
    }
}

/// A call answered 202: held for a person's decision.
struct Held {
    run_id: String,
    approval_id: String,
}

/// Calls `tool` and checks the call waits for approval.
async fn held_call(server: &TestServer, tool: &str, arguments: Value, token: Option<&str>) -> Held {
    let res = api(
        server,
        reqwest::Method::POST,
        &format!("/tools/{tool}/invoke"),
        token,
    )
    .json(&json!({ "arguments": arguments }))
    .send()
    .await
    .unwrap();
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    let location = res.headers()["location"].to_str().unwrap().to_owned();
    let accepted: Value = res.json().await.unwrap();
    assert_eq!(accepted["status"], "pending_approval", "{accepted}");
    let run_id = accepted["run_id"].as_str().unwrap().to_owned();
    assert_eq!(location, format!("/runs/{run_id}"));
    Held {
        approval_id: accepted["approval_id"].as_str().unwrap().to_owned(),
        run_id,
    }
}

/// A decision through the API, as another approver (or tab) makes it:
/// `action` is `approve` or `deny`, `body` the scope and note.
async fn decide_elsewhere(
    server: &TestServer,
    approval_id: &str,
    action: &str,
    body: Value,
    token: Option<&str>,
) -> Value {
    let path = format!("/approvals/{approval_id}/{action}");
    let res = api(server, reqwest::Method::POST, &path, token)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK, "{path}");
    res.json().await.unwrap()
}

fn api(
    server: &TestServer,
    method: reqwest::Method,
    path: &str,
    token: Option<&str>,
) -> reqwest::RequestBuilder {
    let req = reqwest::Client::new().request(method, server.url(path));
    // Without tokens, the person holds the server's local secret.
    match token.or(server.secret.as_deref()) {
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
        Some(auth) => TestServer::builder(opts).auth(auth).start().await,
        None => TestServer::builder(opts).start().await,
    };
    (server, skills)
}

/// After "Approve once": the run succeeded in the API as on the page, the
/// request is decided, and the tool ran exactly once.
async fn assert_approved_once(server: &TestServer, call: &Pending, token: Option<&str>, seen: &Value) {
    // The approver saw what the skill declares it may do, on the card and
    // in its details.
    assert_eq!(seen["permissions"], "shell:exec git:read", "{seen}");
    assert_eq!(
        seen["permission_details"],
        json!(["shell:exec", "git:read"]),
        "{seen}"
    );
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
        pending: None,
    };
    let seen = drive_inbox(&harness, &server, &call, &visit).await;
    assert_approved_once(&server, &call, None, &seen).await;
}

/// More requests wait than the stream's snapshot holds (its first page,
/// 500): the page reads the rest, so a person reaches the newest and
/// decides it, and the page counts every one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_past_the_first_page_is_reached_and_approved_in_the_browser() {
    let Some(harness) = browser_harness() else { return };
    let skills = crate::common::tempdir().unwrap();
    marker_skill(skills.path());
    let settings = RunSettings {
        max_pending_per_caller: 1000,
        ..RunSettings::default()
    };
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::User)]))
        .settings(settings)
        .start()
        .await;
    let fillers = crate::common::tempdir().unwrap();
    let never = fillers.path().join("never");
    let path = never.to_str().unwrap();
    let first_page = skilld::store::MAX_APPROVALS;
    futures_util::stream::iter(0..first_page)
        .map(|i| {
            held_call(
                &server,
                "leave_mark",
                json!({"path": path, "message": format!("filler{i}")}),
                None,
            )
        })
        .buffer_unordered(8)
        .collect::<Vec<_>>()
        .await;
    let call = pending_call(&server, None).await;
    let first = get_json(&server, "/approvals?status=pending&limit=500", None).await;
    let on_first: Vec<&Value> = first["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| &a["id"])
        .collect();
    assert_eq!(on_first.len(), 500);
    assert!(
        !on_first.contains(&&json!(call.approval_id)),
        "the newest is past the first page"
    );
    assert!(first["next_cursor"].is_string(), "{}", first["next_cursor"]);

    let visit = Visit {
        token: None,
        weak_token: None,
        action: "Approve once",
        note: None,
        status: "succeeded",
        screenshot: "ui-past-first-page.png",
        pending: Some("501"),
    };
    drive_inbox(&harness, &server, &call, &visit).await;
    let run = get_json(&server, &format!("/runs/{}?wait=10", call.run_id), None).await;
    assert_eq!(run["status"], "succeeded", "{run}");
    assert_eq!(std::fs::read_to_string(&call.marker).unwrap(), "ran\n");
    // Only that one: the others still wait, and none ran.
    assert!(!never.exists());
    let rest = format!(
        "/approvals?status=pending&limit=500&cursor={}",
        first["next_cursor"].as_str().unwrap()
    );
    let rest = get_json(&server, &rest, None).await;
    assert_eq!(rest["approvals"], json!([]), "{rest}");
    assert_eq!(rest["next_cursor"], Value::Null);
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
        pending: None,
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
        pending: None,
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

/// Waits for a run to end; its final status.
async fn finished(server: &TestServer, run_id: &str, token: Option<&str>) -> Value {
    let run = get_json(server, &format!("/runs/{run_id}?wait=30"), token).await;
    assert_ne!(run["status"], "running", "{run}");
    run
}

#[tokio::test]
async fn a_new_request_arrives_live_is_counted_announced_and_leaves_when_decided_elsewhere() {
    let Some(harness) = browser_harness() else { return };
    let (server, _skills) = marker_server(None).await;
    let first = pending_call(&server, None).await;
    let env = [("INBOX_APPROVAL_ID", first.approval_id.as_str())];
    let mut page = Script::start(&harness, "live.mjs", "ui-live.png", &server, None, &env);
    page.step("ready").await;

    // With the page open and following the stream: a new call.
    let second = pending_call(&server, None).await;
    page.tell(json!({ "approval_id": second.approval_id })).await;
    let arrived = page.step("arrived").await;
    // "Within a few seconds": the stream brings it at once; a poll would
    // have taken up to its period, and a loaded machine adds to both.
    assert!(arrived["arrival_ms"].as_u64().unwrap() < 5_000, "{arrived}");

    // Another approver denies it; the page drops it without being asked.
    let body = json!({"scope": "once", "note": "not from this tab"});
    decide_elsewhere(&server, &second.approval_id, "deny", body, None).await;
    page.tell(json!({})).await;
    let seen = page.done().await;

    assert_eq!(seen["same_load"], true, "the page reloaded: {seen}");
    assert_eq!(seen["polls"], json!([]), "the page polled while live: {seen}");
    assert_eq!(seen["title"], "(1) skilld inbox", "{seen}");
    // One notification: the new request's, none for what was waiting.
    let notes = seen["notes"].as_array().unwrap();
    assert_eq!(notes.len(), 1, "{seen}");
    assert_eq!(
        notes[0]["title"], "Approval requested: inbox-demo / leave_mark",
        "{seen}"
    );
    assert_eq!(
        notes[0]["tag"],
        format!("skilld-{}", second.approval_id),
        "{seen}"
    );
    let body = notes[0]["body"].as_str().unwrap();
    assert!(body.contains(second.marker.to_str().unwrap()), "{body}");
    assert!(body.contains(r"\u202e") && !body.contains('\u{202e}'), "{body}");

    let pending = get_json(&server, "/approvals?status=pending", None).await;
    let ids: Vec<&Value> = pending["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| &a["id"])
        .collect();
    assert_eq!(ids, [&json!(first.approval_id)], "{pending}");
    assert!(!first.marker.exists() && !second.marker.exists());
}

#[tokio::test]
async fn identical_requests_make_one_card_whose_approve_all_runs_each_once() {
    let Some(harness) = browser_harness() else { return };
    // Three callers: one caller's identical calls join one request
    // (docs/mcp.md, "Retries"), three callers' are three.
    let callers = ["ui-invoke-one-0123", "ui-invoke-two-0123", "ui-invoke-three-0123"];
    let mut known: Vec<Token> = callers
        .iter()
        .enumerate()
        .map(|(i, secret)| Token::with_secret(&format!("agent{i}"), Role::Invoke, secret, "test").unwrap())
        .collect();
    known.push(Token::with_secret("boss", Role::Approve, APPROVE, "test").unwrap());
    let (server, _skills) = marker_server(Some(Auth::new(known).unwrap())).await;
    let dir = crate::common::marks_dir();
    let marker = dir.path().join("marker");
    let args = json!({"path": marker.to_str().unwrap(), "message": "same again"});
    let mut held = Vec::new();
    for caller in callers {
        held.push(held_call(&server, "leave_mark", args.clone(), Some(caller)).await);
    }
    let ids = held
        .iter()
        .map(|h| h.approval_id.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    let env = [("INBOX_APPROVAL_IDS", ids.as_str())];
    let page = Script::start(
        &harness,
        "group.mjs",
        "ui-group.png",
        &server,
        Some(APPROVE),
        &env,
    );
    let seen = page.done().await;
    assert_eq!(
        (&seen["cards"], &seen["count"], &seen["label"]),
        (&json!(1), &json!("×3"), &json!("Approve all 3")),
        "{seen}"
    );

    for h in &held {
        assert_eq!(
            finished(&server, &h.run_id, Some(APPROVE)).await["status"],
            "succeeded"
        );
        let approval = get_json(&server, &format!("/approvals/{}", h.approval_id), Some(APPROVE)).await;
        assert_eq!(
            (&approval["status"], &approval["scope"]),
            (&json!("approved"), &json!("once")),
            "{approval}"
        );
    }
    // Each ran exactly once, and nothing was granted for later calls.
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "ran\nran\nran\n");
    assert_eq!(
        get_json(&server, "/grants", Some(APPROVE)).await["grants"],
        json!([])
    );
}

#[tokio::test]
async fn the_keyboard_moves_approves_denies_and_asks_before_a_standing_deny() {
    let Some(harness) = browser_harness() else { return };
    let (server, _skills) = marker_server(None).await;
    let calls = [
        pending_call(&server, None).await,
        pending_call(&server, None).await,
        pending_call(&server, None).await,
    ];
    let ids = calls
        .iter()
        .map(|c| c.approval_id.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    let env = [("INBOX_APPROVAL_IDS", ids.as_str())];
    let page = Script::start(&harness, "keys.mjs", "ui-keys.png", &server, None, &env);
    let seen = page.done().await;
    // `a` and `d` made one decision each; saying no to `D` made none.
    assert_eq!(
        seen["decisions"],
        json!([
            format!("/approvals/{}/approve", calls[0].approval_id),
            format!("/approvals/{}/deny", calls[1].approval_id),
        ]),
        "{seen}"
    );

    assert_eq!(
        finished(&server, &calls[0].run_id, None).await["status"],
        "succeeded"
    );
    assert_eq!(std::fs::read_to_string(&calls[0].marker).unwrap(), "ran\n");
    assert_eq!(
        finished(&server, &calls[1].run_id, None).await["status"],
        "denied"
    );
    for (call, status) in calls.iter().zip(["approved", "denied", "pending"]) {
        let approval = get_json(&server, &format!("/approvals/{}", call.approval_id), None).await;
        assert_eq!(approval["status"], status, "{approval}");
        if status != "pending" {
            assert_eq!(approval["scope"], "once", "{approval}");
        }
    }
    assert!(!calls[1].marker.exists() && !calls[2].marker.exists());
    assert_eq!(get_json(&server, "/grants", None).await["grants"], json!([]));
}

#[tokio::test]
async fn standing_decisions_are_listed_and_revoked_only_once_confirmed() {
    let Some(harness) = browser_harness() else { return };
    let (server, _skills) = marker_server(Some(tokens())).await;
    let call = pending_call(&server, Some(INVOKE)).await;
    let body = json!({"scope": "always", "note": "fine from now on"});
    let approval = decide_elsewhere(&server, &call.approval_id, "approve", body, Some(APPROVE)).await;
    // And one an operator recorded ahead, for an older version: it stays.
    let older = skilld::store::Grant {
        id: uuid::Uuid::now_v7(),
        skill: "inbox-demo".to_owned(),
        tool: "leave_mark".to_owned(),
        skill_hash: "0".repeat(64),
        decision: skilld::store::GrantDecision::Deny,
        created_by: Some("ops".to_owned()),
        created_at: chrono::Utc::now(),
    };
    server.store.approvals.put_grant(older.clone()).await.unwrap();
    let grants = get_json(&server, "/grants", Some(INVOKE)).await;
    let grant = grants["grants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["decision"] == "allow")
        .unwrap_or_else(|| panic!("no allow grant: {grants}"))
        .clone();

    let env = [("INBOX_GRANT_ID", grant["id"].as_str().unwrap())];
    let page = Script::start(
        &harness,
        "grants.mjs",
        "ui-grants.png",
        &server,
        Some(APPROVE),
        &env,
    );
    let seen = page.done().await;
    let hash = approval["skill_hash"].as_str().unwrap();
    assert_eq!(
        seen["shown"],
        json!({"skill": "inbox-demo", "tool": "leave_mark", "hash": &hash[..12], "decision": "allow", "by": "boss"}),
        "{seen}"
    );
    assert_eq!((&seen["rows"], &seen["left"]), (&json!(2), &json!(1)), "{seen}");
    // Cancel sent nothing; confirming sent the one DELETE.
    assert_eq!(
        seen["deletes"],
        json!([format!("/grants/{}", grant["id"].as_str().unwrap())]),
        "{seen}"
    );

    let grants = get_json(&server, "/grants", Some(INVOKE)).await;
    let left: Vec<&Value> = grants["grants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| &g["id"])
        .collect();
    assert_eq!(left, [&json!(older.id.to_string())], "{grants}");
}

#[tokio::test]
async fn the_history_shows_who_decided_what_pages_back_and_filters() {
    let Some(harness) = browser_harness() else { return };
    let skills = crate::common::tempdir().unwrap();
    marker_skill(skills.path());
    echo_skill(skills.path());
    let opts = options(vec![root(skills.path(), Trust::User)]);
    let server = TestServer::builder(opts).auth(tokens()).start().await;

    // The oldest decision: approved once with a note, and its run done.
    let old = pending_call(&server, Some(INVOKE)).await;
    let body = json!({"scope": "once", "note": "looked at it: fine"});
    decide_elsewhere(&server, &old.approval_id, "approve", body, Some(APPROVE)).await;
    assert_eq!(
        finished(&server, &old.run_id, Some(INVOKE)).await["status"],
        "succeeded"
    );
    // Then a full page (50) of denials of the other skill, so the oldest is
    // one "Older" away.
    let mut newest = String::new();
    for i in 0..50 {
        let held = held_call(
            &server,
            "say_it",
            json!({"message": format!("n{i}")}),
            Some(INVOKE),
        )
        .await;
        let body = json!({"scope": "once", "note": "not today"});
        decide_elsewhere(&server, &held.approval_id, "deny", body, Some(APPROVE)).await;
        newest = held.approval_id;
    }

    let env = [
        ("INBOX_OLD_ID", old.approval_id.as_str()),
        ("INBOX_NEW_ID", newest.as_str()),
    ];
    let page = Script::start(
        &harness,
        "history.mjs",
        "ui-history.png",
        &server,
        Some(INVOKE),
        &env,
    );
    let seen = page.done().await;
    assert_eq!(
        (&seen["first_page"], &seen["both"]),
        (&json!(50), &json!(51)),
        "{seen}"
    );
    assert_eq!(
        seen["oldest"],
        json!({"skill": "inbox-demo", "tool": "leave_mark", "status": "approved", "scope": "once",
               "approver": "boss", "note": "looked at it: fine", "outcome": "succeeded"}),
        "{seen}"
    );
    assert_eq!(
        seen["newest"],
        json!({"skill": "inbox-echo", "tool": "say_it", "status": "denied", "scope": "once",
               "approver": "boss", "note": "not today", "outcome": "denied"}),
        "{seen}"
    );
    assert_eq!(
        (&seen["by_skill"], &seen["by_tool"]),
        (&json!(old.approval_id), &json!(old.approval_id)),
        "{seen}"
    );
    assert_eq!(seen["none"], "No decisions match this filter.", "{seen}");
}

#[tokio::test]
async fn the_page_reads_the_stream_format_follows_again_and_shows_a_refusal() {
    let Some(harness) = browser_harness() else { return };
    let (server, _skills) = marker_server(None).await;
    let call = pending_call(&server, None).await;
    let env = [("INBOX_APPROVAL_ID", call.approval_id.as_str())];
    let page = Script::start(&harness, "stream.mjs", "ui-stream.png", &server, None, &env);
    let seen = page.done().await;
    assert_eq!(seen["streams"], 3, "{seen}");
    assert_eq!(seen["empty_line"], "Not shown: see the message above.", "{seen}");
    // Followed again after a short wait each time: not at once, not late.
    for gap in seen["gaps"].as_array().unwrap() {
        let gap = gap.as_u64().unwrap();
        assert!((500..20_000).contains(&gap), "{seen}");
    }
}

/// A server without tokens: the page opened without the start link says
/// how to get in and shows nothing to decide; the old link (`?secret=`)
/// sets nothing and the page says to use the new one; a wrong secret
/// changes nothing; the new link (`#secret=`) signs the tab in, its secret
/// gone from the address and kept in sessionStorage alone, which a reload
/// keeps; and the person approves; the call ran once.
#[tokio::test]
async fn without_tokens_the_page_says_how_to_get_in_and_the_start_link_signs_in() {
    let Some(harness) = browser_harness() else { return };
    let (server, _skills) = marker_server(None).await;
    let call = pending_call(&server, None).await;
    let env = [("INBOX_APPROVAL_ID", call.approval_id.as_str())];
    let page = Script::start(&harness, "signin.mjs", "ui-signin.png", &server, None, &env);
    let seen = page.done().await;
    let message = seen["message"].as_str().unwrap();
    assert!(
        message.contains("Not signed in (401)") && message.contains("/ui#secret="),
        "{seen}"
    );
    let old = &seen["old_link"];
    assert_eq!(
        (&old["status"], &old["location"], &old["set_cookie"]),
        (&json!(303), &json!("ui#old-start-link"), &Value::Null),
        "{seen}"
    );
    let text = old["text"].as_str().unwrap();
    assert!(
        text.contains("no longer signs in") && text.contains("/ui#secret="),
        "{seen}"
    );
    let nothing = json!({
        "href_has_secret": false, "session_holds": false, "local_holds": false,
        "document_cookie": "", "cookies": [], "token_state": "No token set.",
    });
    assert_eq!(old["kept"], nothing, "{seen}");
    assert!(seen["wrong"].as_str().unwrap().contains("did not take"), "{seen}");
    let signed_in = json!({
        "href_has_secret": false, "session_holds": true, "local_holds": false,
        "document_cookie": "", "cookies": [],
        "token_state": "Signed in with the local secret of the start link (kept in this tab until it closes).",
    });
    assert_eq!(seen["signed_in"], signed_in, "{seen}");
    assert_eq!(seen["reloaded"], signed_in, "{seen}");
    let run = get_json(&server, &format!("/runs/{}?wait=30", call.run_id), None).await;
    assert_eq!(run["status"], "succeeded", "{run}");
    assert_eq!(std::fs::read_to_string(&call.marker).unwrap(), "ran\n");
}

/// The attack of issue 40, point 7: cookies are not isolated by port, so
/// while the start link set the local secret as a cookie, any listener on
/// the machine that the person's browser visited received it, and replayed
/// it to approve a held call for always. Signed in through the start link,
/// the browser visits another local port: that listener receives no cookie
/// and no secret in any header, and the old cookie replayed is refused;
/// nothing was decided until the person approved in the page.
#[tokio::test]
async fn the_start_links_secret_reaches_no_other_port_and_its_old_cookie_is_refused() {
    let Some(harness) = browser_harness() else { return };
    let (server, _skills) = marker_server(None).await;
    let secret = server.secret.clone().unwrap();
    let call = pending_call(&server, None).await;
    let other = OtherPort::start().await;
    let env = [
        ("INBOX_APPROVAL_ID", call.approval_id.as_str()),
        ("INBOX_FOREIGN", other.url.as_str()),
    ];
    let mut page = Script::start(&harness, "ports.mjs", "ui-ports.png", &server, None, &env);
    let visited = page.step("visited").await;
    assert_eq!(visited["cookies"], 0, "{visited}");
    let sees: Value = serde_json::from_str(visited["foreign_sees"].as_str().unwrap()).unwrap();
    assert_eq!(
        sees,
        json!({"session": {}, "local": {}, "cookie": ""}),
        "{visited}"
    );
    let heads = other.heads();
    let paths: Vec<&str> = heads.iter().filter_map(|h| h.split(' ').nth(1)).collect();
    assert!(
        paths.contains(&"/here") && paths.contains(&"/new-tab"),
        "{heads:?}"
    );
    for head in &heads {
        let lower = head.to_ascii_lowercase();
        assert!(!lower.lines().any(|l| l.starts_with("cookie:")), "{head}");
        assert!(!head.contains(&secret), "{head}");
    }

    let replayed = replay_old_cookie(&server, &secret, &call.approval_id).await;
    for (status, problem) in &replayed {
        assert_eq!(
            (*status, &problem["code"]),
            (StatusCode::UNAUTHORIZED, &json!("local_secret_required")),
            "{problem}"
        );
    }
    let request = get_json(&server, &format!("/approvals/{}", call.approval_id), None).await;
    assert_eq!(request["status"], "pending", "{request}");
    assert!(!call.marker.exists());

    page.tell(json!({})).await;
    page.done().await;
    let run = get_json(&server, &format!("/runs/{}?wait=30", call.run_id), None).await;
    assert_eq!(run["status"], "succeeded", "{run}");
    assert_eq!(std::fs::read_to_string(&call.marker).unwrap(), "ran\n");
    let approval = get_json(&server, &format!("/approvals/{}", call.approval_id), None).await;
    assert_eq!(approval["scope"], "once", "{approval}");
    let grants = get_json(&server, "/grants", None).await;
    assert_eq!(grants["grants"], json!([]), "{grants}");
}

/// What a listener that got the old start link's cookie sent back: the
/// cookie, named as the server named it, to read the run log and to
/// approve the held call for always (from the page's own origin). Each
/// answer's status and body.
async fn replay_old_cookie(server: &TestServer, secret: &str, approval_id: &str) -> Vec<(StatusCode, Value)> {
    let id = hex::encode(&Sha256::digest(Sha256::digest(secret.as_bytes()))[..6]);
    let cookie = format!("skilld-local-{id}={secret}");
    let client = reqwest::Client::new();
    let approve = format!("/approvals/{approval_id}/approve");
    let requests = [
        client.get(server.url("/runs")),
        client
            .post(server.url(&approve))
            .header("origin", server.url(""))
            .json(&json!({"scope": "always"})),
    ];
    let mut answers = Vec::new();
    for req in requests {
        let res = req.header("cookie", &cookie).send().await.unwrap();
        answers.push((res.status(), res.json().await.unwrap()));
    }
    answers
}

/// Another server on this host, as a person's browser may visit one (a
/// dev server, a tool's): it answers every request with a small page and
/// keeps each request's head, all its headers.
struct OtherPort {
    url: String,
    heads: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl OtherPort {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let heads = Arc::new(Mutex::new(Vec::new()));
        let kept = heads.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(Self::serve(stream, kept.clone()));
            }
        });
        Self { url, heads, task }
    }

    /// Every request of one connection (kept alive), answered alike.
    async fn serve(stream: tokio::net::TcpStream, heads: Arc<Mutex<Vec<String>>>) {
        let mut stream = BufReader::new(stream);
        let body = "<!doctype html><title>another server</title><p>Another server on this host.</p>";
        let answer = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        loop {
            let mut head = String::new();
            loop {
                let mut line = String::new();
                if stream.read_line(&mut line).await.unwrap_or(0) == 0 {
                    return;
                }
                if line == "\r\n" {
                    break;
                }
                head.push_str(&line);
            }
            heads.lock().unwrap().push(head);
            if stream.get_mut().write_all(answer.as_bytes()).await.is_err() {
                return;
            }
        }
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}

impl Drop for OtherPort {
    fn drop(&mut self) {
        self.task.abort();
    }
}
