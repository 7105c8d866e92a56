//! `[[notify]]` webhooks against a real local HTTP receiver: the payload
//! and its Standard Webhooks signature, retries until a delivery arrives,
//! a receiver that never answers (the call is not slowed), Slack's shape,
//! one delivery per event across two instances on PostgreSQL, the record
//! at `GET /notifications`, and the config wiring of a real `skilld serve`.

use crate::common::{
    Api, Received, Receiver, SECRET, TestServer, on_postgres, options, root, stamp_skill, target, tempdir,
};
use axum::http::StatusCode;
use serde_json::{Value, json};
use skilld::notify::{NotifyConfig, Target};
use skilld::skill::Trust;
use std::time::{Duration, Instant};

/// A server of `stamp` (every call held) and a notifier beside it, as
/// `skilld serve` starts them.
async fn server_with(
    targets: Vec<Target>,
    url: Option<&str>,
) -> (TestServer, skilld::notify::Notifier, tempfile::TempDir) {
    let dir = tempdir().unwrap();
    stamp_skill(dir.path());
    let opts = options(vec![root(dir.path(), Trust::Bundled)]);
    let server = match url {
        Some(url) => TestServer::builder(opts).database(url).start().await,
        None => TestServer::builder(opts).start().await,
    };
    let notifier = notifier(&server, targets, "instance-a");
    (server, notifier, dir)
}

fn notifier(server: &TestServer, targets: Vec<Target>, instance: &str) -> skilld::notify::Notifier {
    skilld::notify::spawn(
        skilld::invoke::Approver::new(&server.invoker, &server.store),
        server.store.outbox.clone(),
        targets,
        instance.to_owned(),
        "https://skilld.example".to_owned(),
    )
    .unwrap()
}

/// A held call of `stamp` writing to `/dev/null`, each spelt its own way
/// (`/dev//null`, …) after the first: the same call again would join the
/// request that still waits.
async fn hold(server: &TestServer) -> Value {
    let runs = server.get_json("/runs?tool=stamp&limit=500").await;
    let n = runs["runs"].as_array().map_or(0, Vec::len);
    let path = format!("/dev/{}null", "/".repeat(n));
    let (status, held) = server.invoke("stamp", json!({"path": path})).await;
    assert_eq!(status, 202, "{held}");
    held
}

async fn decide(server: &TestServer, held: &Value, verb: &str) {
    let path = format!("/approvals/{}/{verb}", held["approval_id"].as_str().unwrap());
    let (status, body) = Api::of(server).post(&path, json!({"note": "ok by me"})).await;
    assert_eq!(status, 200, "{body}");
}

/// Checks the Standard Webhooks headers of `r` against the secret.
fn assert_signed(r: &Received) {
    use base64::Engine;
    use hmac::{KeyInit, Mac};
    let header = |name: &str| r.headers[name].to_str().unwrap().to_owned();
    let (id, ts) = (header("webhook-id"), header("webhook-timestamp"));
    let age = chrono::Utc::now().timestamp() - ts.parse::<i64>().unwrap();
    assert!((0..300).contains(&age), "timestamp {ts} is not recent");
    let key = base64::engine::general_purpose::STANDARD
        .decode(SECRET.strip_prefix("whsec_").unwrap())
        .unwrap();
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key).unwrap();
    mac.update(format!("{id}.{ts}.").as_bytes());
    mac.update(&r.raw);
    let expected = format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
    );
    assert_eq!(header("webhook-signature"), expected);
}

#[tokio::test]
async fn each_request_and_decision_is_posted_signed() {
    let receiver = Receiver::start(vec![]).await;
    let (server, _notifier, _dir) =
        server_with(vec![target(&receiver.url, NotifyConfig::default())], None).await;
    let held = hold(&server).await;
    let got = receiver.wait_for(1).await;
    let request = &got[0];
    assert_signed(request);
    assert_eq!(request.headers["content-type"], "application/json");
    assert_eq!(request.body["type"], "approval.requested");
    let data = &request.body["data"];
    assert_eq!(data["approval_id"], held["approval_id"]);
    assert_eq!(
        (data["skill"].as_str(), data["tool"].as_str()),
        (Some("stamp"), Some("stamp"))
    );
    assert_eq!(
        data["argv_preview"],
        r#"sh -c 'echo ran >> "$0"; echo stamped' /dev/null"#
    );
    assert_eq!(data["trust"], "bundled");
    assert_eq!(data["status"], "pending");
    let approval_url = format!(
        "https://skilld.example/approvals/{}",
        held["approval_id"].as_str().unwrap()
    );
    assert_eq!(data["approval_url"], approval_url.as_str());
    assert_eq!(data["inbox_url"], "https://skilld.example/ui");
    assert!(data.as_object().unwrap().contains_key("warning"));
    assert!(data.as_object().unwrap().contains_key("requested_by"));

    decide(&server, &held, "deny").await;
    let got = receiver.wait_for(2).await;
    assert_signed(&got[1]);
    assert_eq!(got[1].body["type"], "approval.decided");
    assert_eq!(got[1].body["data"]["status"], "denied");
    assert_eq!(got[1].body["data"]["note"], "ok by me");
    // Each delivery has its own id, kept across its retries.
    assert_ne!(got[0].headers["webhook-id"], got[1].headers["webhook-id"]);

    let record = server.get_json("/notifications").await;
    let statuses: Vec<&str> = record["notifications"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["delivered", "delivered"], "{record}");
}

#[tokio::test]
async fn a_receiver_that_fails_twice_gets_one_delivery_and_the_retries_are_recorded() {
    let receiver = Receiver::start(vec![StatusCode::INTERNAL_SERVER_ERROR, StatusCode::BAD_GATEWAY]).await;
    let only_requests = NotifyConfig {
        events: Some(vec!["requested".into()]),
        ..NotifyConfig::default()
    };
    let (server, _notifier, _dir) = server_with(vec![target(&receiver.url, only_requests)], None).await;
    hold(&server).await;
    let got = receiver.wait_for(3).await;
    // The same delivery each time: one id, one body.
    assert!(
        got.iter()
            .all(|r| r.headers["webhook-id"] == got[0].headers["webhook-id"])
    );
    assert!(got.iter().all(|r| r.raw == got[0].raw));
    let deadline = Instant::now() + Duration::from_secs(20);
    let delivered = loop {
        let record = server.get_json("/notifications").await;
        let n = record["notifications"][0].clone();
        if n["status"] == "delivered" {
            break n;
        }
        assert!(Instant::now() < deadline, "{record}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(delivered["attempts"], 3);
    assert_eq!(delivered["last_status"], 200);
    // Nothing more is sent once it arrived.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(receiver.got().len(), 3);
}

#[tokio::test]
async fn a_receiver_that_never_answers_does_not_slow_the_call_and_its_failure_is_recorded() {
    // Accepts connections and never answers.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", silent.local_addr().unwrap());
    let held_open = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((conn, _)) = silent.accept().await {
            open.push(conn);
        }
    });
    let slow = NotifyConfig {
        max_attempts: Some(1),
        timeout_secs: Some(2),
        ..NotifyConfig::default()
    };
    let (server, _notifier, _dir) = server_with(vec![target(&url, slow)], None).await;
    // Several calls while deliveries hang: each is answered at once.
    for _ in 0..3 {
        let started = Instant::now();
        hold(&server).await;
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let failed = server.get_json("/notifications?status=failed").await;
        let list = failed["notifications"].as_array().unwrap();
        if list.len() == 3 {
            assert!(
                list.iter()
                    .all(|n| n["attempts"] == 1 && n["last_status"].is_null()),
                "{failed}"
            );
            assert!(
                list[0]["last_error"].as_str().unwrap().contains("timed out"),
                "{failed}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "{failed}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    held_open.abort();
}

#[tokio::test]
async fn slack_gets_text_and_blocks() {
    let receiver = Receiver::start(vec![]).await;
    let slack = NotifyConfig {
        format: Some("slack".into()),
        ..NotifyConfig::default()
    };
    let (server, _notifier, _dir) = server_with(vec![target(&receiver.url, slack)], None).await;
    let held = hold(&server).await;
    let body = receiver.wait_for(1).await[0].body.clone();
    assert!(body["text"].as_str().unwrap().contains("stamp / stamp"), "{body}");
    let blocks = body["blocks"].as_array().unwrap();
    let text = blocks[0]["text"]["text"].as_str().unwrap();
    // Slack's `<`, `>` and `&` are escaped: the command cannot make links.
    assert!(text.contains("echo ran &gt;&gt;"), "{text}");
    let links = blocks[2]["text"]["text"].as_str().unwrap();
    assert!(links.contains(held["approval_id"].as_str().unwrap()), "{links}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_deliver_each_event_once() {
    on_postgres(|url| async move {
        let receiver = Receiver::start(vec![]).await;
        let targets = vec![target(&receiver.url, NotifyConfig::default())];
        let (a, _on_a, dir) = server_with(targets.clone(), Some(&url)).await;
        let b = TestServer::builder(options(vec![root(dir.path(), Trust::Bundled)]))
            .database(&url)
            .start()
            .await;
        let _on_b = notifier(&b, targets, "instance-b");
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(hold(&a).await);
        }
        for h in &held {
            decide(&b, h, "approve").await;
        }
        receiver.wait_for(6).await;
        // Both instances saw every event; give a duplicate time to show.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let got = receiver.got();
        let mut events: Vec<(String, String)> = got
            .iter()
            .map(|r| {
                (
                    r.body["type"].as_str().unwrap().to_owned(),
                    r.body["data"]["approval_id"].to_string(),
                )
            })
            .collect();
        events.sort();
        events.dedup();
        assert_eq!((got.len(), events.len()), (6, 6), "{got:?}");
    })
    .await;
}

/// `skilld serve` as an operator runs it: `[[notify]]` in the config file
/// with its secret in the environment (wiped from the process's block once
/// read), links at `--public-url`, and the record for admins only.
#[tokio::test]
async fn a_configured_server_notifies_and_keeps_its_secret_out_of_proc() {
    let receiver = Receiver::start(vec![]).await;
    let dir = tempdir().unwrap();
    stamp_skill(dir.path());
    let data = tempdir().unwrap();
    let config = data.path().join("skilld.toml");
    std::fs::write(
        &config,
        format!(
            "[[tokens]]\nname = \"agent\"\nrole = \"invoke\"\nsecret = \"agent-secret-0123456789\"\n\n\
             [[tokens]]\nname = \"boss\"\nrole = \"admin\"\nsecret = \"boss-secret-0123456789\"\n\n\
             [[notify]]\nname = \"team\"\nurl = \"{}\"\nsecret_env = \"TEAM_HOOK_SECRET\"\n",
            receiver.url
        ),
    )
    .unwrap();
    let mut cmd = crate::common::skilld();
    cmd.args([
        "serve",
        "--bind",
        "127.0.0.1:0",
        "--no-watch",
        "--public-url",
        "https://inbox.example/",
    ])
    .arg("--config")
    .arg(&config)
    .arg("--data-dir")
    .arg(data.path())
    .arg("--skills")
    .arg(format!("bundled={}", dir.path().display()))
    .env_remove("SKILLD_DATABASE_URL")
    .env("TEAM_HOOK_SECRET", SECRET);
    let (child, addr) = crate::common::serve(&mut cmd);
    if nix::unistd::geteuid().is_root() {
        let environ = std::fs::read(format!("/proc/{}/environ", child.id())).unwrap();
        assert!(!String::from_utf8_lossy(&environ).contains(SECRET));
    }
    let client = reqwest::Client::new();
    let res = client
        .post(format!("http://{addr}/tools/stamp/invoke"))
        .bearer_auth("agent-secret-0123456789")
        .json(&json!({"arguments": {"path": "/dev/null"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 202);
    let got = receiver.wait_for(1).await;
    assert_signed(&got[0]);
    assert_eq!(got[0].body["data"]["requested_by"], "agent");
    let url = got[0].body["data"]["approval_url"].as_str().unwrap();
    assert!(url.starts_with("https://inbox.example/approvals/"), "{url}");

    let list = |token: &'static str| {
        client
            .get(format!("http://{addr}/notifications?status=delivered"))
            .bearer_auth(token)
            .send()
    };
    assert_eq!(list("agent-secret-0123456789").await.unwrap().status(), 403);
    let res = list("boss-secret-0123456789").await.unwrap();
    assert_eq!(res.status(), 200);
    let record: Value = res.json().await.unwrap();
    assert_eq!(record["notifications"][0]["target"], "team");
    crate::common::stop(child);
}

/// A skill a session's trigger chose waits for a person, and each target
/// that wants it is told once, signed, with what allowing it grants (JSON
/// and Slack); a target that wants only approvals is not told. The
/// delivery is recorded under the request's id.
#[tokio::test]
async fn a_skill_asking_to_activate_is_posted() {
    let (json_hook, slack_hook, quiet_hook) = (
        Receiver::start(vec![]).await,
        Receiver::start(vec![]).await,
        Receiver::start(vec![]).await,
    );
    let targets = activation_targets(&json_hook, &slack_hook, &quiet_hook);
    let dir = tempdir().unwrap();
    let examples = crate::common::checkout().join("examples/seed002/kubernetes");
    crate::common::copy_tree(&examples, &dir.path().join("kubernetes"));
    let server = TestServer::builder(options(vec![root(dir.path(), Trust::Bundled)]))
        .start()
        .await;
    let mut notifier = notifier(&server, targets, "instance-a");
    notifier.follow_activations(server.sessions.activation_requests());

    let res = Api::of(&server)
        .req(reqwest::Method::POST, "/sessions")
        .json(&json!({"files": ["deploy/deployment.yaml"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let session: Value = res.json().await.unwrap();
    let request = &session["skills"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "kubernetes")
        .unwrap()["approval"];
    assert!(request["id"].is_string(), "{session}");

    let got = json_hook.wait_for(1).await;
    assert_signed(&got[0]);
    assert_activation_body(&got[0].body, &session, request);

    let chat = slack_hook.wait_for(1).await[0].body.clone();
    assert!(
        chat["text"]
            .as_str()
            .unwrap()
            .contains("wants to activate kubernetes"),
        "{chat}"
    );
    let text = chat["blocks"][0]["text"]["text"].as_str().unwrap();
    assert!(text.contains("Permissions: file:read"), "{chat}");

    // A turn that asks nothing new tells nobody again.
    let res = Api::of(&server)
        .req(
            reqwest::Method::POST,
            &format!("/sessions/{}/turns", session["id"].as_str().unwrap()),
        )
        .header("Skilld-Session-Secret", session["secret"].as_str().unwrap())
        .json(&json!({"message": "kubectl apply"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let record = server.get_json("/notifications").await;
    let events: Vec<(&str, &str, &Value)> = record["notifications"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["event"].as_str().unwrap(),
                n["target"].as_str().unwrap(),
                &n["approval_id"],
            )
        })
        .collect();
    assert_eq!(events.len(), 2, "{record}");
    for (event, _, id) in &events {
        assert_eq!(
            (*event, *id),
            ("activation.requested", &request["id"]),
            "{record}"
        );
    }
    assert!(quiet_hook.got().is_empty(), "a target of approvals only was told");
    assert_eq!(json_hook.got().len(), 1);
}

/// Three targets: JSON and Slack of every event, and one of approvals only.
fn activation_targets(json_hook: &Receiver, slack_hook: &Receiver, quiet_hook: &Receiver) -> Vec<Target> {
    let named = |name: &str, url: &str, extra: NotifyConfig| {
        let config = NotifyConfig {
            name: Some(name.into()),
            url: url.to_owned(),
            secret: Some(SECRET.into()),
            ..extra
        };
        Target::resolve(0, &config, |_| None).unwrap()
    };
    let slack = NotifyConfig {
        format: Some("slack".into()),
        ..NotifyConfig::default()
    };
    let approvals_only = NotifyConfig {
        events: Some(vec!["requested".into(), "decided".into()]),
        ..NotifyConfig::default()
    };
    vec![
        named("team", &json_hook.url, NotifyConfig::default()),
        named("chat", &slack_hook.url, slack),
        named("quiet", &quiet_hook.url, approvals_only),
    ]
}

/// The JSON body of `session`'s activation `request` for kubernetes.
fn assert_activation_body(body: &Value, session: &Value, request: &Value) {
    assert_eq!(body["type"], "activation.requested", "{body}");
    let data = &body["data"];
    assert_eq!(data["request_id"], request["id"], "{body}");
    assert_eq!(data["session"], session["id"], "{body}");
    assert_eq!(data["skill"], "kubernetes");
    assert_eq!(data["permissions"], json!(["file:read"]));
    assert!(data["hash"].as_str().is_some_and(|h| !h.is_empty()), "{body}");
    assert_eq!(
        data["trigger"],
        json!({"kind": "file", "value": "**/deployment.yaml"})
    );
    let decide = format!(
        "https://skilld.example/sessions/{}/activations/kubernetes",
        session["id"].as_str().unwrap()
    );
    assert_eq!(data["decide_url"], decide.as_str(), "{body}");
}
