//! The approvers' inbox over HTTP: the live stream (`GET
//! /approvals/events`), across instances on PostgreSQL, and the history
//! of decisions (`GET /approvals/history`).

use crate::common::{Api, TestServer, on_postgres, options, root, stamp_skill, tempdir};
use reqwest::Method;
use serde_json::{Value, json};
use skilld::skill::Trust;
use std::time::Duration;

/// An open event stream, read an event at a time.
struct Events {
    res: reqwest::Response,
    buffer: String,
}

impl Events {
    async fn open(server: &TestServer) -> Self {
        let res = Api::of(server)
            .raw(Method::GET, "/approvals/events", &[], None)
            .await;
        assert_eq!(res.status(), 200);
        let kind = res.headers()["content-type"].to_str().unwrap();
        assert!(kind.starts_with("text/event-stream"), "{kind}");
        Self {
            res,
            buffer: String::new(),
        }
    }

    /// The next event, its name and data, within a generous time.
    async fn next(&mut self) -> (String, Value) {
        tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                if let Some(end) = self.buffer.find("\n\n") {
                    let block: String = self.buffer.drain(..end + 2).collect();
                    let name = block.lines().find_map(|l| l.strip_prefix("event: "));
                    let data: String = block.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
                    if let Some(name) = name {
                        return (name.to_owned(), serde_json::from_str(&data).unwrap());
                    }
                    continue; // a keep-alive comment
                }
                let chunk = self.res.chunk().await.unwrap().expect("the stream ended");
                self.buffer.push_str(std::str::from_utf8(&chunk).unwrap());
            }
        })
        .await
        .expect("no event within 20 s")
    }

    /// The next `approval` event.
    async fn approval(&mut self) -> Value {
        let (name, data) = self.next().await;
        assert_eq!(name, "approval", "{data}");
        data
    }
}

/// A held call of `stamp`, each to a path of its own beside `marks`:
/// the same call again would join the request that still waits.
async fn hold_stamp(server: &TestServer, marks: &std::path::Path) -> Value {
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let (status, held) = server
        .invoke("stamp", json!({"path": format!("{}.{n}", marks.display())}))
        .await;
    assert_eq!(status, 202, "{held}");
    held
}

async fn decide(server: &TestServer, approval: &Value, verb: &str, note: &str) {
    let path = format!("/approvals/{}/{verb}", approval.as_str().unwrap());
    let (status, body) = Api::of(server).post(&path, json!({"note": note})).await;
    assert_eq!(status, 200, "{body}");
}

/// A stream opened on `watcher` sees, live, a request made on `maker` and
/// its decision made there: one server, or two instances sharing a store.
async fn requests_and_decisions_arrive_live(
    maker: &TestServer,
    watcher: &TestServer,
    marks: &std::path::Path,
) {
    let before = hold_stamp(maker, marks).await;
    let mut events = Events::open(watcher).await;
    let (name, snapshot) = events.next().await;
    assert_eq!(name, "snapshot");
    let ids: Vec<&Value> = snapshot["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| &a["id"])
        .collect();
    assert_eq!(ids, [&before["approval_id"]], "{snapshot}");

    let held = hold_stamp(maker, marks).await;
    let arrived = events.approval().await;
    assert_eq!(arrived["id"], held["approval_id"]);
    assert_eq!(arrived["status"], "pending");
    assert_eq!(arrived["argv"][0], "sh");

    decide(maker, &held["approval_id"], "approve", "go").await;
    let decided = events.approval().await;
    assert_eq!(decided["id"], held["approval_id"]);
    assert_eq!(
        (decided["status"].as_str(), decided["note"].as_str()),
        (Some("approved"), Some("go"))
    );

    // The run going on to finish is no news to the inbox; the next
    // event is the next decision.
    decide(maker, &before["approval_id"], "deny", "no").await;
    let denied = events.approval().await;
    assert_eq!(denied["id"], before["approval_id"]);
    assert_eq!(denied["status"], "denied");
}

fn skills() -> tempfile::TempDir {
    let dir = tempdir().unwrap();
    stamp_skill(dir.path());
    dir
}

#[tokio::test]
async fn the_inbox_stream_carries_requests_and_decisions() {
    let dir = skills();
    let server = TestServer::builder(options(vec![root(dir.path(), Trust::Bundled)]))
        .start()
        .await;
    let marks = tempdir().unwrap();
    requests_and_decisions_arrive_live(&server, &server, &marks.path().join("marks")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inbox_stream_follows_another_instance_on_postgres() {
    on_postgres(|url| async move {
        let dir = skills();
        let a = TestServer::builder(options(vec![root(dir.path(), Trust::Bundled)]))
            .database(&url)
            .start()
            .await;
        let b = TestServer::builder(options(vec![root(dir.path(), Trust::Bundled)]))
            .database(&url)
            .start()
            .await;
        let marks = tempdir().unwrap();
        requests_and_decisions_arrive_live(&a, &b, &marks.path().join("marks")).await;
    })
    .await;
}

#[tokio::test]
async fn the_history_says_who_decided_what_and_how_it_ended() {
    let dir = skills();
    let server = TestServer::builder(options(vec![root(dir.path(), Trust::Bundled)]))
        .start()
        .await;
    let marks = tempdir().unwrap();
    let marks = marks.path().join("marks");
    let first = hold_stamp(&server, &marks).await;
    let second = hold_stamp(&server, &marks).await;
    hold_stamp(&server, &marks).await; // still pending: not history
    decide(&server, &first["approval_id"], "approve", "fine").await;
    decide(&server, &second["approval_id"], "deny", "not today").await;
    // The approved run ends; its outcome is part of the history.
    let run = server
        .get_json(&format!("/runs/{}?wait=30", first["run_id"].as_str().unwrap()))
        .await;
    assert_eq!(run["status"], "succeeded");

    let page = server.get_json("/approvals/history?limit=1").await;
    let newest = &page["decisions"][0];
    assert_eq!(newest["id"], second["approval_id"]);
    assert_eq!(
        (newest["status"].as_str(), newest["run_status"].as_str()),
        (Some("denied"), Some("denied"))
    );
    assert_eq!(newest["note"], "not today");
    let cursor = page["next_cursor"].as_str().unwrap();
    let older = server
        .get_json(&format!("/approvals/history?limit=1&cursor={cursor}"))
        .await;
    let oldest = &older["decisions"][0];
    assert_eq!(oldest["id"], first["approval_id"]);
    assert_eq!(
        (oldest["status"].as_str(), oldest["run_status"].as_str()),
        (Some("approved"), Some("succeeded"))
    );
    assert_eq!(older["next_cursor"], Value::Null);

    let none = server.get_json("/approvals/history?skill=other").await;
    assert_eq!(none["decisions"], json!([]));
    let (status, problem) = Api::of(&server).get("/approvals/history?limit=0").await;
    assert_eq!(status, 400, "{problem}");
}

/// More requests wait than one page holds: `GET /approvals` pages through
/// all of them, oldest first, and the stream's snapshot (the first page)
/// says where the rest start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_pending_request_is_reached_a_page_at_a_time() {
    let dir = skills();
    let settings = skilld::invoke::RunSettings {
        max_pending_per_caller: 1000,
        ..skilld::invoke::RunSettings::default()
    };
    let server = TestServer::builder(options(vec![root(dir.path(), Trust::Bundled)]))
        .settings(settings)
        .start()
        .await;
    let marks = tempdir().unwrap();
    let marks = marks.path().join("marks");
    let mut held = Vec::new();
    for _ in 0..503 {
        held.push(hold_stamp(&server, &marks).await["approval_id"].clone());
    }

    let (mut paged, mut sizes, mut cursor) = (Vec::new(), Vec::new(), String::new());
    loop {
        let page = server
            .get_json(&format!("/approvals?status=pending&limit=200{cursor}"))
            .await;
        let approvals = page["approvals"].as_array().unwrap();
        sizes.push(approvals.len());
        paged.extend(approvals.iter().map(|a| a["id"].clone()));
        match page["next_cursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => break,
        }
    }
    assert_eq!(sizes, [200, 200, 103]);
    assert_eq!(paged, held, "every request, oldest first, once");

    let mut events = Events::open(&server).await;
    let (name, snapshot) = events.next().await;
    assert_eq!(name, "snapshot");
    let first: Vec<Value> = snapshot["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].clone())
        .collect();
    assert_eq!(first, held[..500]);
    let next = snapshot["next_cursor"].as_str().expect("where the rest start");
    let rest = server
        .get_json(&format!("/approvals?status=pending&limit=500&cursor={next}"))
        .await;
    let rest: Vec<Value> = rest["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].clone())
        .collect();
    assert_eq!(rest, held[500..]);

    // A cursor this server did not hand out is the caller's mistake.
    let res = Api::of(&server)
        .raw(Method::GET, "/approvals?status=pending&cursor=12_nope", &[], None)
        .await;
    assert_eq!(res.status(), 400);
    assert_eq!(res.headers()["content-type"], "application/problem+json");
}
