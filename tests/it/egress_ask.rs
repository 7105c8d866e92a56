//! Egress approvals through a real `skilld serve` (issue 42): a `network:
//! true` tool of a user's skill reaches nothing until a person allows a
//! destination, once or always; a denial reads as a model needs it; a
//! hold no one answers fails; an `always` outlives a restart and falls
//! with the skill's content; instances sharing PostgreSQL share
//! decisions. Upstreams listen on 127.0.0.2, the one range opened.

use crate::common::{Api, Served, tempdir};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

/// Skips a test that needs root (network namespaces), except under CI.
fn needs_root() -> bool {
    if nix::unistd::geteuid().is_root() {
        return false;
    }
    assert!(std::env::var_os("CI").is_none(), "CI runs as root");
    eprintln!("skipped: needs root");
    true
}

/// `[egress]` as the tests set it, holding destinations `wait` seconds.
fn config(wait: u64, more: &str) -> String {
    format!(
        "{more}egress_wait_secs = {wait}\n[egress]\nallow_ranges = [\"127.0.0.2/32\"]\n\
         [egress.hosts]\n\"api.test\" = [\"127.0.0.2\"]\n\"other.test\" = [\"127.0.0.2\"]\n"
    )
}

/// A user's skill `fetcher` with `network: true`, whose tool runs the
/// Python it is given.
fn fetcher(dir: &Path, front: &str) {
    crate::common::one_tool_skill(
        dir,
        "fetcher",
        &format!("network: true\n{front}"),
        "code",
        "python3 -c {{code}}",
    );
}

/// Python that fetches each URL as any HTTP client would (urllib follows
/// the proxy variables), printing `status body` for each.
fn fetch_each(urls: &[String]) -> String {
    let mut code = "import urllib.request, urllib.error\n".to_owned();
    for url in urls {
        code += &format!(
            "try:\n    r = urllib.request.urlopen({url:?}, timeout=60); print(r.status, r.read().decode())\n\
             except urllib.error.HTTPError as e:\n    print(e.code, e.read().decode().strip())\n\
             except Exception as e:\n    print('error', e)\n"
        );
    }
    code
}

/// Calls `fetcher` with `code` and has the person approve the call (a
/// user's skill's first run asks): its run id.
async fn start(server: &Served, code: &str) -> String {
    let caller = Api::new(server.base(), None);
    start_as(&caller, &person(server), "fetcher", json!({ "code": code })).await
}

/// `caller` calls `tool` with `arguments` in the background, and
/// `approver` approves the call if it is held: its run id.
async fn start_as(caller: &Api, approver: &Api, tool: &str, arguments: Value) -> String {
    let answer = caller
        .raw(
            reqwest::Method::POST,
            &format!("/tools/{tool}/invoke"),
            &[("prefer", "respond-async")],
            Some(json!({ "arguments": arguments })),
        )
        .await;
    assert_eq!(answer.status(), 202);
    let started: Value = answer.json().await.unwrap();
    if let Some(approval) = started.get("approval_id").filter(|a| !a.is_null()) {
        let (status, approved) = approver.approve(approval, "always").await;
        assert_eq!(status, 200, "{approved}");
    }
    started["run_id"].as_str().unwrap().to_owned()
}

fn person(server: &Served) -> Api {
    let secret = skilld::local_secret::read(&server._data.path().join("data"))
        .unwrap()
        .unwrap();
    Api::new(server.base(), Some(&secret))
}

/// The first pending egress request on `server`, within 30 s.
async fn held(server: &Served) -> Value {
    held_as(&person(server)).await
}

/// The first pending egress request `reader` sees, within 30 s.
async fn held_as(reader: &Api) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, list) = reader.get("/egress").await;
        assert_eq!(status, 200, "{list}");
        if let Some(first) = list["items"].as_array().and_then(|items| items.first()) {
            return first.clone();
        }
        assert!(Instant::now() < deadline, "nothing was held");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn pending_count(server: &Served) -> usize {
    let (_, list) = person(server).get("/egress").await;
    list["items"].as_array().map_or(0, Vec::len)
}

/// The run's envelope once it has ended.
async fn finished(server: &Served, run: &str) -> Value {
    let run = person(server).finished_run(&json!(run)).await;
    run["result"].clone()
}

fn output(envelope: &Value) -> &str {
    envelope["output"].as_str().unwrap_or_default()
}

/// The envelope's egress line for `host`.
fn line<'a>(envelope: &'a Value, host: &str) -> &'a Value {
    envelope["egress"]
        .as_array()
        .and_then(|lines| lines.iter().find(|l| l["host"] == host))
        .unwrap_or_else(|| panic!("no egress line for {host}: {envelope}"))
}

#[tokio::test]
async fn a_destination_is_held_until_a_person_allows_or_denies_it() {
    if needs_root() {
        return;
    }
    let up = crate::common::egress_upstream().await;
    let skills = tempdir().unwrap();
    fetcher(skills.path(), "");
    let server = Served::start_at(skills.path(), &config(60, ""), "user");
    let (api, other) = (
        format!("http://api.test:{}/hello", up.port()),
        format!("http://other.test:{}/", up.port()),
    );
    // The second destination twice: the run's later connection to a
    // denied destination gets the same answer without a second hold.
    let run = start(&server, &fetch_each(&[api, other.clone(), other])).await;

    let first = held(&server).await;
    assert_eq!(first["host"], "api.test");
    assert_eq!(first["port"], up.port());
    assert_eq!(first["run_id"], run.as_str());
    let summary = first["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("fetcher 1.0.0 (call ")
            && summary.ends_with(&format!("wants api.test:{}", up.port())),
        "{summary}"
    );
    let id = first["id"].as_str().unwrap();
    let (status, allowed) = person(&server)
        .post(&format!("/egress/{id}/allow"), json!({"scope": "once"}))
        .await;
    assert_eq!(
        (status, allowed["status"].as_str()),
        (200, Some("approved")),
        "{allowed}"
    );
    // Decided once: a second decision is a conflict.
    let (status, again) = person(&server)
        .post(&format!("/egress/{id}/deny"), json!({}))
        .await;
    assert_eq!(status, 409, "{again}");

    let second = held(&server).await;
    assert_eq!(second["host"], "other.test", "{second}");
    let id = second["id"].as_str().unwrap();
    let (status, _) = person(&server)
        .post(
            &format!("/egress/{id}/deny"),
            json!({"note": "the task needs no other host"}),
        )
        .await;
    assert_eq!(status, 200);

    let envelope = finished(&server, &run).await;
    let printed: Vec<&str> = output(&envelope).lines().collect();
    assert_eq!(
        printed[0],
        format!("200 host=api.test:{}", up.port()),
        "{envelope}"
    );
    for denial in &printed[1..] {
        assert!(denial.starts_with("403 "), "{envelope}");
        assert!(
            denial.contains("other.test")
                && denial.contains("the task needs no other host")
                && denial.contains("will not help"),
            "{denial}"
        );
    }
    assert_eq!(printed.len(), 3, "{envelope}");
    let api_line = line(&envelope, "api.test");
    assert_eq!(api_line["held"]["status"], "approved", "{envelope}");
    assert_eq!(api_line["held"]["scope"], "once", "{envelope}");
    let other_line = line(&envelope, "other.test");
    assert_eq!(other_line["held"]["status"], "denied", "{envelope}");
    assert_eq!(other_line["denied"], 2, "{envelope}");
    assert_eq!(pending_count(&server).await, 0);
}

#[tokio::test]
async fn a_hold_no_one_answers_fails_after_egress_wait_secs() {
    if needs_root() {
        return;
    }
    let up = crate::common::egress_upstream().await;
    let skills = tempdir().unwrap();
    fetcher(skills.path(), "");
    // A webhook that wants only egress holds is told of it.
    let receiver = crate::common::Receiver::start(Vec::new()).await;
    let hooked = format!(
        "{}[[notify]]\nname = \"team\"\nurl = \"{}\"\nevents = [\"egress\"]\n",
        config(1, ""),
        receiver.url
    );
    let server = Served::start_at(skills.path(), &hooked, "user");
    let run = start(&server, &fetch_each(&[format!("http://api.test:{}/", up.port())])).await;
    let envelope = finished(&server, &run).await;
    let told = receiver.wait_for(1).await;
    let body = &told[0].body;
    assert_eq!(body["type"], "egress.requested", "{body}");
    assert_eq!(
        (
            &body["data"]["host"],
            &body["data"]["port"],
            &body["data"]["run_id"]
        ),
        (&json!("api.test"), &json!(up.port()), &json!(run)),
        "{body}"
    );
    let allow_url = body["data"]["allow_url"].as_str().unwrap();
    assert!(
        allow_url.ends_with("/allow") && allow_url.contains("/egress/"),
        "{body}"
    );
    let text = output(&envelope);
    assert!(
        text.starts_with("403 ") && text.contains("waited 1 s") && text.contains("no one"),
        "{envelope}"
    );
    let request = line(&envelope, "api.test")["held"]["request_id"].clone();
    let (status, kept) = person(&server)
        .get(&format!("/egress/{}", request.as_str().unwrap()))
        .await;
    assert_eq!(
        (status, kept["status"].as_str()),
        (200, Some("expired")),
        "{kept}"
    );
    // An expired request is decided by no one later.
    let (status, late) = person(&server)
        .post(&format!("/egress/{}/allow", request.as_str().unwrap()), json!({}))
        .await;
    assert_eq!(status, 409, "{late}");
}

#[tokio::test]
async fn an_always_outlives_a_restart_and_falls_with_a_new_content_hash() {
    if needs_root() {
        return;
    }
    let up = crate::common::egress_upstream().await;
    let skills = tempdir().unwrap();
    fetcher(skills.path(), "");
    let url = format!("http://api.test:{}/", up.port());
    let code = fetch_each(std::slice::from_ref(&url));
    let server = Served::start_at(skills.path(), &config(60, ""), "user");
    let run = start(&server, &code).await;
    let id = held(&server).await["id"].as_str().unwrap().to_owned();
    let (status, _) = person(&server)
        .post(
            &format!("/egress/{id}/allow"),
            json!({"scope": "always", "note": "its API"}),
        )
        .await;
    assert_eq!(status, 200);
    assert!(output(&finished(&server, &run).await).starts_with("200 "));

    // Restarted on the same store: the grant lets it through, no one asked.
    let data = server.stop_keeping_data();
    let server = Served::start_in_data(skills.path(), &config(60, ""), "user", data);
    let (_, grants) = person(&server).get("/egress/grants?skill=fetcher").await;
    assert_eq!(grants["items"][0]["host"], "api.test", "{grants}");
    let run = start(&server, &code).await;
    let envelope = finished(&server, &run).await;
    assert!(output(&envelope).starts_with("200 "), "{envelope}");
    assert_eq!(line(&envelope, "api.test")["granted"], true, "{envelope}");
    // `skilld info` suggests the list an author would commit.
    let info = cli(&server, &["info", "fetcher", "--format", "json"]);
    let suggested = format!("network: {{allow: [\"api.test:{}\"]}}", up.port());
    assert_eq!(info["suggested_network_allow"], suggested.as_str(), "{info}");
    assert_eq!(info["egress_grants"][0]["note"], "its API", "{info}");

    // A new version of the skill is asked about again.
    let data = server.stop_keeping_data();
    let skill_md = skills.path().join("fetcher/SKILL.md");
    let text = std::fs::read_to_string(&skill_md).unwrap() + "\nNow it also posts.\n";
    std::fs::write(&skill_md, text).unwrap();
    let server = Served::start_in_data(skills.path(), &config(60, ""), "user", data);
    let run = start(&server, &code).await;
    let again = held(&server).await;
    assert_eq!(again["run_id"], run.as_str(), "{again}");
    let id = again["id"].as_str().unwrap();
    person(&server)
        .post(&format!("/egress/{id}/deny"), json!({}))
        .await;
    assert!(output(&finished(&server, &run).await).starts_with("403 "));
    // `skilld permissions --revoke` takes the grant back.
    let revoked = cli(
        &server,
        &["permissions", "fetcher", "--revoke", "--format", "json"],
    );
    assert_eq!(revoked["egress_grants"], json!([]), "{revoked}");
}

/// `skilld ARGS --to` the server, as its person: the JSON it prints.
fn cli(server: &Served, args: &[&str]) -> Value {
    let secret = skilld::local_secret::read(&server._data.path().join("data"))
        .unwrap()
        .unwrap();
    let out = crate::common::skilld()
        .args(args)
        .args(["--to", &server.base(), "--to-token", &secret])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Issue 40, point 8: in open mode a `network: true` tool was one caller
/// with the agent: it filed 20 held calls and opened 16 sessions, and the
/// agent then got 429. Now it reaches neither skilld's API (by address,
/// by `localhost`) nor the host's other services, no person is asked to
/// let it, and the agent's caps are untouched. On SQLite and PostgreSQL.
#[tokio::test]
async fn a_network_true_tool_cannot_fill_its_callers_caps_through_the_api() {
    if needs_root() {
        return;
    }
    cannot_reach_the_api("").await;
    crate::common::on_postgres(|url| async move {
        cannot_reach_the_api(&format!("database = {url:?}\n")).await;
    })
    .await;
}

async fn cannot_reach_the_api(store: &str) {
    let skills = tempdir().unwrap();
    fetcher(skills.path(), "");
    let server = Served::start_at(skills.path(), &config(60, store), "user");
    let port = server.addr.rsplit(':').next().unwrap().to_owned();
    let urls = [
        format!("http://localhost:{port}/approvals"),
        format!("http://app.localhost:{port}/approvals"),
        "http://127.0.0.1:5432/".to_owned(),
        "http://169.254.169.254/latest/meta-data/".to_owned(),
        "http://[::1]:80/".to_owned(),
    ];
    // The first attack, as it was: 20 held calls, 16 sessions.
    let flood = format!(
        "import urllib.request, urllib.error\n\
         def post(path, body):\n\
         \x20   req = urllib.request.Request('http://{addr}' + path, data=body.encode(), method='POST', \
         headers={{'content-type': 'application/json'}})\n\
         \x20   try:\n\
         \x20       print(urllib.request.urlopen(req, timeout=10).status, path)\n\
         \x20   except urllib.error.HTTPError as e:\n\
         \x20       print(e.code, path)\n\
         \x20   except Exception as e:\n\
         \x20       print('error', e)\n\
         for i in range(20):\n\
         \x20   post('/tools/fetcher/invoke', '{{\"arguments\": {{\"code\": \"print(%d)\"}}}}' % i)\n\
         for i in range(16):\n\
         \x20   post('/sessions', '{{}}')\n",
        addr = server.addr
    );
    let direct = format!(
        "import socket\nfor a in [('127.0.0.1', {port}), ('127.0.0.1', 5432), ('::1', {port})]:\n\
         \x20   try:\n\
         \x20       socket.create_connection(a, timeout=3); print('reached', a)\n\
         \x20   except OSError as e:\n\
         \x20       print('no', a)\n"
    );
    let run = start(&server, &(fetch_each(&urls) + &flood + &direct)).await;
    let envelope = finished(&server, &run).await;
    let text = output(&envelope);
    assert!(!text.contains("reached"), "{envelope}");
    let refused = text.lines().filter(|l| l.starts_with("403")).count();
    assert_eq!(refused, urls.len() + 36, "{envelope}");
    assert_eq!(pending_count(&server).await, 0, "a person was asked");
    let (_, approvals) = person(&server).get("/approvals?status=pending").await;
    assert_eq!(
        approvals["approvals"],
        json!([]),
        "the tool filed a call: {approvals}"
    );
    // The agent, the same caller in open mode, is not held back.
    let agent = Api::new(server.base(), None);
    let (status, session) = agent.post("/sessions", json!({})).await;
    assert_eq!(status, 201, "{session}");
}

#[tokio::test]
async fn an_operators_unrestricted_skill_keeps_the_hosts_network() {
    if needs_root() {
        return;
    }
    let up = crate::common::egress_upstream().await;
    let skills = tempdir().unwrap();
    fetcher(skills.path(), "");
    let config = "[egress]\nunrestricted = [\"fetcher\"]\n";
    let server = Served::start_at(skills.path(), config, "user");
    let code = format!(
        "import os, socket\nprint(sorted(k for k in os.environ if k.lower().endswith('_proxy')))\n\
         socket.create_connection(({:?}, {}), timeout=3); print('reached')\n",
        up.ip().to_string(),
        up.port()
    );
    let run = start(&server, &code).await;
    let envelope = finished(&server, &run).await;
    assert_eq!(output(&envelope), "[]\nreached\n", "{envelope}");
    assert!(envelope.get("egress").is_none_or(Value::is_null), "{envelope}");
    let (_, detail) = person(&server).get("/skills/fetcher").await;
    assert_eq!(detail["network"], true, "{detail}");
}

/// Two instances sharing PostgreSQL: a hold made on one is listed and
/// allowed on the other, and the other's `always` lets the first's next
/// run through.
#[tokio::test]
async fn two_instances_on_postgresql_share_egress_decisions() {
    if needs_root() {
        return;
    }
    crate::common::on_postgres(|url| async move {
        let up = crate::common::egress_upstream().await;
        let skills = tempdir().unwrap();
        fetcher(skills.path(), "");
        let shared = config(60, &format!("database = {url:?}\n"));
        let a = Served::start_at(skills.path(), &shared, "user");
        let b = Served::start_at(skills.path(), &shared, "user");
        let code = fetch_each(&[format!("http://api.test:{}/", up.port())]);
        let run = start(&a, &code).await;
        let seen_on_b = held(&b).await;
        assert_eq!(seen_on_b["run_id"], run.as_str(), "{seen_on_b}");
        let id = seen_on_b["id"].as_str().unwrap();
        let (status, _) = person(&b)
            .post(&format!("/egress/{id}/allow"), json!({"scope": "always"}))
            .await;
        assert_eq!(status, 200);
        assert!(output(&finished(&a, &run).await).starts_with("200 "));
        let run = start(&a, &code).await;
        let envelope = finished(&a, &run).await;
        assert_eq!(line(&envelope, "api.test")["granted"], true, "{envelope}");
    })
    .await;
}

/// With tokens, the agent whose call asks for a destination cannot allow
/// it itself, even holding the approve role: the person does.
#[tokio::test]
async fn the_caller_whose_tool_asks_cannot_allow_its_own_destination() {
    if needs_root() {
        return;
    }
    let up = crate::common::egress_upstream().await;
    let skills = tempdir().unwrap();
    fetcher(skills.path(), "");
    let tokens = "[[tokens]]\nname = \"agent\"\nrole = \"approve\"\nsecret = \"agent-secret-0123456789\"\n\
                  [[tokens]]\nname = \"boss\"\nrole = \"approve\"\nsecret = \"boss-secret-0123456789\"\n";
    let server = Served::start_at(skills.path(), &format!("{}{tokens}", config(60, "")), "user");
    let agent = Api::new(server.base(), Some("agent-secret-0123456789"));
    let boss = Api::new(server.base(), Some("boss-secret-0123456789"));
    let code = fetch_each(&[format!("http://api.test:{}/", up.port())]);
    let run = start_as(&agent, &boss, "fetcher", json!({ "code": code })).await;
    let request = held_as(&boss).await;
    assert_eq!(request["requested_by"], "agent", "{request}");
    let id = request["id"].as_str().unwrap();
    for scope in ["once", "always"] {
        let (status, refused) = agent
            .post(&format!("/egress/{id}/allow"), json!({ "scope": scope }))
            .await;
        assert_eq!(
            (status, refused["code"].as_str()),
            (403, Some("self_approval")),
            "{refused}"
        );
    }
    let (status, allowed) = boss.post(&format!("/egress/{id}/allow"), json!({})).await;
    assert_eq!(status, 200, "{allowed}");
    assert_eq!(allowed["decided_by"], "boss", "{allowed}");
    let run = agent.finished_run(&json!(run)).await;
    assert!(output(&run["result"]).starts_with("200 "), "{run}");
}

/// A Starlark `fetch()` of a `network: true` skill asks as a run's
/// program does: a name is held for a person and reached once allowed;
/// the host itself is refused without asking anyone.
#[tokio::test]
async fn a_starlark_fetch_asks_and_never_for_the_host() {
    let up = crate::common::egress_upstream().await;
    let skills = tempdir().unwrap();
    let script = "def get(args):\n    return fetch(args[\"url\"])\n\
                  register_tool(\"get\", \"Fetches.\", {\"type\": \"object\"}, get)\n";
    crate::common::star_skill(
        skills.path(),
        "web",
        "read_only: true\npermissions: [net:fetch]\nnetwork: true\n",
        script,
    );
    let server = Served::start_at(skills.path(), &config(60, ""), "user");
    let caller = Api::new(server.base(), None);
    let port = server.addr.rsplit(':').next().unwrap().to_owned();
    let host = format!("http://localhost:{port}/approvals");
    let run = start_as(&caller, &person(&server), "get", json!({ "url": host })).await;
    let refused = finished(&server, &run).await;
    assert_eq!(refused["success"], false, "{refused}");
    assert!(refused.to_string().contains("loopback"), "{refused}");
    assert_eq!(
        pending_count(&server).await,
        0,
        "a person was asked about the host"
    );

    let url = format!("http://api.test:{}/hello", up.port());
    let run = start_as(&caller, &person(&server), "get", json!({ "url": url })).await;
    let request = held(&server).await;
    assert_eq!(request["host"], "api.test", "{request}");
    let id = request["id"].as_str().unwrap();
    let (status, _) = person(&server)
        .post(&format!("/egress/{id}/allow"), json!({"scope": "once"}))
        .await;
    assert_eq!(status, 200);
    let got = finished(&server, &run).await;
    assert_eq!(got["parsed"]["status"], 200, "{got}");
}
