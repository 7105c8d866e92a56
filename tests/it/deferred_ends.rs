//! Issue 30's write path, against real `skilld serve` processes: the answer
//! goes out before the run's end commits. The instance that ran the call
//! shows the result at once; another instance reads `running` until the
//! commit; a crash in that window leaves the run `interrupted`, its start
//! intact; a graceful stop commits what was queued.

use crate::common::{Api, greet_skill, on_postgres, tempdir, write_file};
use serde_json::{Value, json};
use skilld::store::RunStatus;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Long enough to act inside the window on a loaded machine.
const INTERVAL_MS: u64 = 4000;

/// A `skilld serve` process with the `greet` skill (read-only: it runs at
/// once) and a run log whose ends wait `interval_ms` before they commit.
struct Server {
    child: Child,
    url: String,
}

impl Server {
    fn start(data: &Path, database: &str, interval_ms: u64, instance: &str) -> Self {
        let skills = data.join("skills");
        greet_skill(&skills);
        let config = data.join(format!("{instance}.toml"));
        write_file(&config, &format!("run_log_commit_interval_ms = {interval_ms}\n"));
        let mut child = crate::common::serve_command(&data.join(instance), &skills)
            .args(["--instance", instance, "--database", database])
            .arg("--config")
            .arg(&config)
            .env_remove("SKILLD_CONFIG")
            .env_remove("SKILLD_TOKENS")
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let url = crate::common::announced_url(&mut child)
            .unwrap_or_else(|first| panic!("{instance} did not start: {first:?}"));
        Self { child, url }
    }

    async fn greet(&self) -> Value {
        let (status, envelope) = self.api().invoke("greet", json!({"name": "ada"})).await;
        assert_eq!(status, 200, "{envelope}");
        assert_eq!(envelope["success"], true, "{envelope}");
        envelope
    }

    async fn run(&self, id: &str) -> Value {
        self.api().get(&format!("/runs/{id}")).await.1
    }

    /// A caller of this instance, without a token.
    fn api(&self) -> Api {
        Api::new(self.url.clone(), None)
    }

    fn signal(&mut self, signal: &str) {
        Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        crate::common::kill(&mut self.child);
    }
}

/// What the run log holds for run `id`, read as another process would.
async fn stored(database: &str, id: &str) -> skilld::store::Run {
    let store = skilld::store::open(database).await.unwrap();
    store.runs.get_run(id.parse().unwrap()).await.unwrap()
}

/// The run's fields its start recorded, which nothing after may change.
fn start_of(run: &Value) -> Value {
    json!([
        run["id"],
        run["argv"],
        run["arguments"],
        run["created_at"],
        run["started_at"],
        run["cwd"]
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_after_the_answer_leaves_the_run_interrupted_with_its_start() {
    let data = tempdir().unwrap();
    let database = format!("sqlite://{}", data.path().join("skilld.db").display());
    let mut server = Server::start(data.path(), &database, INTERVAL_MS, "a");
    let envelope = server.greet().await;
    let id = envelope["run_id"].as_str().unwrap().to_owned();
    // Right after the answer, this instance shows the result...
    let served = server.run(&id).await;
    assert_eq!(served["status"], "succeeded");
    assert_eq!(served["result"]["output"], envelope["output"]);
    // ...which the run log does not hold yet: only the start is durable.
    let before = stored(&database, &id).await;
    assert_eq!((before.status, before.finished_at), (RunStatus::Running, None));
    server.signal("-KILL");

    let server = Server::start(data.path(), &database, INTERVAL_MS, "a");
    let after = server.run(&id).await;
    assert_eq!(after["status"], "interrupted", "{after}");
    assert_eq!(after["result"], Value::Null);
    assert!(after["finished_at"].is_string());
    assert_eq!(start_of(&after), start_of(&served));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_stop_commits_the_ends_still_queued() {
    let data = tempdir().unwrap();
    let database = format!("sqlite://{}", data.path().join("skilld.db").display());
    let mut server = Server::start(data.path(), &database, INTERVAL_MS, "a");
    let envelope = server.greet().await;
    let id = envelope["run_id"].as_str().unwrap().to_owned();
    let served = server.run(&id).await;
    assert_eq!(stored(&database, &id).await.status, RunStatus::Running);
    server.signal("-TERM");

    let kept = stored(&database, &id).await;
    assert_eq!(kept.status, RunStatus::Succeeded);
    let server = Server::start(data.path(), &database, INTERVAL_MS, "a");
    assert_eq!(server.run(&id).await, served);
}

/// Two instances on one PostgreSQL: the one that ran the call answers for
/// it at once; the other reads `running` until the commit, then the same
/// run, woken by the commit's notification.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_instance_reads_running_until_the_commit_then_the_same_run() {
    on_postgres(|url| async move {
        let data = tempdir().unwrap();
        let a = Server::start(data.path(), &url, INTERVAL_MS, "a");
        let b = Server::start(data.path(), &url, 0, "b");
        let envelope = a.greet().await;
        let answered = Instant::now();
        let id = envelope["run_id"].as_str().unwrap().to_owned();
        let served = a.run(&id).await;
        assert_eq!(served["status"], "succeeded");
        assert_eq!(b.run(&id).await["status"], "running");
        let (_, waited) = b.api().get(&format!("/runs/{id}?wait=30")).await;
        let stale_for = answered.elapsed();
        eprintln!("the other instance read running for {stale_for:?} (interval {INTERVAL_MS} ms)");
        assert_eq!(waited, served);
        // One commit interval, and room for a loaded machine's commit and wake-up.
        assert!(stale_for < Duration::from_millis(INTERVAL_MS) + Duration::from_secs(5));
    })
    .await;
}
