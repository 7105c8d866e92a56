//! Held destinations in the inbox (`tests/browser/egress.mjs` in headless
//! chromium), through a real `skilld serve`: a `network: true` run asks
//! for one host, a person clicks "Allow once" and the run reaches it; its
//! next host is denied with a note, which the program reads in the 403.

use crate::common::{Api, Script, Served, tempdir};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

const NOTE: &str = "the task needs no other host";

/// Skips a test that needs root (network namespaces), except under CI.
fn needs_root() -> bool {
    if nix::unistd::geteuid().is_root() {
        return false;
    }
    assert!(std::env::var_os("CI").is_none(), "CI runs as root");
    eprintln!("skipped: needs root");
    true
}

/// `[egress]` opening only 127.0.0.2, where the upstream listens, under two names.
const CONFIG: &str = "egress_wait_secs = 120\n[egress]\nallow_ranges = [\"127.0.0.2/32\"]\n\
     [egress.hosts]\n\"api.test\" = [\"127.0.0.2\"]\n\"other.test\" = [\"127.0.0.2\"]\n";

/// Python fetching each URL through the proxy (urllib follows the proxy
/// variables), printing `status body` for each.
fn fetch_each(urls: &[String]) -> String {
    let mut code = "import urllib.request, urllib.error\n".to_owned();
    for url in urls {
        code += &format!(
            "try:\n    r = urllib.request.urlopen({url:?}, timeout=150); print(r.status, r.read().decode())\n\
             except urllib.error.HTTPError as e:\n    print(e.code, e.read().decode().strip())\n\
             except Exception as e:\n    print('error', e)\n"
        );
    }
    code
}

fn person(server: &Served) -> Api {
    let secret = secret(server);
    Api::new(server.base(), Some(&secret))
}

fn secret(server: &Served) -> String {
    skilld::local_secret::read(&server._data.path().join("data"))
        .unwrap()
        .unwrap()
}

/// Calls `fetcher` with `code`, approving the call itself through the API
/// (a user's skill's first run asks): its run id.
async fn start(server: &Served, code: &str) -> String {
    let answer = Api::new(server.base(), None)
        .raw(
            reqwest::Method::POST,
            "/tools/fetcher/invoke",
            &[("prefer", "respond-async")],
            Some(json!({"arguments": { "code": code }})),
        )
        .await;
    assert_eq!(answer.status(), 202);
    let started: Value = answer.json().await.unwrap();
    if let Some(approval) = started.get("approval_id").filter(|a| !a.is_null()) {
        let (status, approved) = person(server).approve(approval, "once").await;
        assert_eq!(status, 200, "{approved}");
    }
    started["run_id"].as_str().unwrap().to_owned()
}

/// The pending egress request for `host`, within 30 s.
async fn held(server: &Served, host: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, list) = person(server).get("/egress").await;
        assert_eq!(status, 200, "{list}");
        let items = list["items"].as_array().cloned().unwrap_or_default();
        if let Some(found) = items.into_iter().find(|r| r["host"] == host) {
            return found;
        }
        assert!(Instant::now() < deadline, "{host} was not held: {list}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `tests/browser/<name>` against a real `skilld serve`, opened through its
/// start link: [`Script::start`] as it is, which knows only in-process
/// servers.
fn script(harness: &Path, name: &'static str, server: &Served, env: &[(&str, &str)]) -> Script {
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ui-egress.png");
    let mut child = tokio::process::Command::new("node")
        .current_dir(harness)
        .arg(harness.join(name))
        .arg(server.base())
        .envs(env.iter().copied())
        .env("INBOX_SECRET", secret(server))
        .env("INBOX_SCREENSHOT", &shot)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let stderr = tokio::spawn(async move {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text).await;
        text
    });
    Script {
        name,
        stdout: BufReader::new(child.stdout.take().unwrap()).lines(),
        stdin: child.stdin.take().unwrap(),
        child,
        stderr,
        shot,
    }
}

/// The envelope's egress line for `host`.
fn line<'a>(envelope: &'a Value, host: &str) -> &'a Value {
    envelope["egress"]
        .as_array()
        .and_then(|lines| lines.iter().find(|l| l["host"] == host))
        .unwrap_or_else(|| panic!("no egress line for {host}: {envelope}"))
}

#[tokio::test]
async fn a_person_allows_one_destination_and_denies_the_next_in_the_browser() {
    if needs_root() {
        return;
    }
    let Some(harness) = crate::common::browser_harness() else {
        return;
    };
    let up = crate::common::egress_upstream().await;
    let skills = tempdir().unwrap();
    crate::common::one_tool_skill(
        skills.path(),
        "fetcher",
        "network: true\n",
        "code",
        "python3 -c {{code}}",
    );
    let server = Served::start_at(skills.path(), CONFIG, "user");
    let api = format!("api.test:{}", up.port());
    let other = format!("other.test:{}", up.port());
    // One after the other: the second is held once the first is decided.
    let code = fetch_each(&[format!("http://{api}/hello"), format!("http://{other}/")]);
    let run = start(&server, &code).await;

    let first = held(&server, "api.test").await;
    let first_id = first["id"].as_str().unwrap();
    let env = [("EGRESS_FIRST", first_id), ("EGRESS_DESTINATION", api.as_str())];
    let mut page = script(&harness, "egress.mjs", &server, &env);

    let allowed = page.step("allowed").await;
    assert_eq!(allowed["count"], "(1)", "{allowed}");
    let seen = &allowed["seen"];
    assert_eq!(seen["headline"], first["summary"], "{allowed}");
    assert_eq!(seen["destination"], api.as_str(), "{allowed}");
    let facts = seen["facts"].as_str().unwrap();
    assert!(
        facts.contains("fetcher")
            && facts.contains("1.0.0")
            && facts.contains(&run)
            && facts.contains("anonymous"),
        "{allowed}"
    );
    let countdown = seen["countdown"].as_str().unwrap();
    assert!(
        countdown.starts_with("(in ") && countdown.ends_with(" s)"),
        "{allowed}"
    );
    let confirm = allowed["confirm_text"].as_str().unwrap();
    assert!(confirm.contains("fetcher") && confirm.contains(&api), "{allowed}");

    let second = held(&server, "other.test").await;
    page.tell(json!({"id": second["id"]})).await;
    let seen = page.done().await;
    assert_eq!(seen["second"]["destination"], other.as_str(), "{seen}");
    assert!(seen["flash"].as_str().unwrap().starts_with("Denied"), "{seen}");

    let finished = person(&server).finished_run(&json!(run)).await;
    let envelope = &finished["result"];
    let output = envelope["output"].as_str().unwrap_or_default();
    let printed: Vec<&str> = output.lines().collect();
    assert_eq!(printed.len(), 2, "{envelope}");
    assert_eq!(printed[0], format!("200 host={api}"), "{envelope}");
    assert!(
        printed[1].starts_with("403 ") && printed[1].contains(NOTE),
        "{envelope}"
    );
    let api_line = line(envelope, "api.test");
    assert_eq!(api_line["held"]["status"], "approved", "{envelope}");
    assert_eq!(api_line["held"]["scope"], "once", "{envelope}");
    assert_eq!(
        line(envelope, "other.test")["held"]["status"],
        "denied",
        "{envelope}"
    );
    let (_, left) = person(&server).get("/egress").await;
    assert_eq!(left["items"], json!([]), "{left}");
}
