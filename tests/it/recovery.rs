//! The run log under stress: a restart on PostgreSQL, an unreachable store
//! (fail closed: 503, nothing runs), and runs a crash left `running`.

use crate::common::{Api, TestServer, corpus_dir, on_postgres, options, root};
use serde_json::json;
use skilld::skill::Trust;
use skilld::store::{NewRun, RunStatus};
use std::path::Path;
use std::time::Duration;
use tokio::task::JoinSet;

/// A skill whose tool creates the file named by its argument.
fn touch_skill(dir: &Path) {
    let skill = dir.join("marker");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: marker\nversion: 1.0.0\ndescription: Create a marker file.\n---\n\n### touch_marker\n\nCreate a file.\n\n\
         #### Parameters\n\n| Name | Type | Required | Description |\n|---|---|---|---|\n| path | string | yes | The file. |\n\n\
         #### Command\n\n```\ntouch {{path}}\n```\n",
    )
    .unwrap();
}

#[tokio::test]
async fn the_run_log_survives_a_restart_on_postgres() {
    on_postgres(|url| async move {
        let skills = crate::common::tempdir().unwrap();
        touch_skill(skills.path());
        let work = crate::common::marks_dir();
        let marker = work.path().join("one");
        let id = {
            let server = TestServer::builder(options(vec![root(skills.path(), Trust::User)]))
                .database(&url)
                .allowed()
                .start()
                .await;
            let (status, env) = server.invoke("touch_marker", json!({"path": marker})).await;
            assert_eq!((status, env["success"].as_bool()), (200, Some(true)), "{env}");
            env["run_id"].as_str().unwrap().to_owned()
        };
        assert!(marker.exists());
        let server = TestServer::builder(options(vec![root(skills.path(), Trust::User)]))
            .database(&url)
            .allowed()
            .start()
            .await;
        let (_, run) = Api::anonymous(&server).get(&format!("/runs/{id}")).await;
        assert_eq!(run["status"], "succeeded");
        assert_eq!(run["argv"], json!(["touch", marker]));
        let ready = server.get_json("/readyz").await;
        assert_eq!(ready["store"], "postgres");
    })
    .await;
}

/// A TCP forwarder to PostgreSQL that can be cut, connections and all.
struct Proxy {
    addr: std::net::SocketAddr,
    tasks: JoinSet<()>,
}

impl Proxy {
    async fn start(target: String) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut tasks = JoinSet::new();
        tasks.spawn(async move {
            let mut conns = JoinSet::new();
            while let Ok((mut inbound, _)) = listener.accept().await {
                let target = target.clone();
                conns.spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(&target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        Self { addr, tasks }
    }

    /// Stops listening and drops every forwarded connection.
    async fn cut(mut self) {
        self.tasks.abort_all();
        while self.tasks.join_next().await.is_some() {}
    }
}

#[tokio::test]
async fn an_unreachable_store_fails_closed() {
    on_postgres(|url| async move {
        // postgres://user@HOST:PORT/db?… → the same through the proxy.
        let (scheme_user, rest) = url.split_once('@').unwrap();
        let (host_port, tail) = rest.split_once('/').unwrap();
        let proxy = Proxy::start(host_port.to_owned()).await;
        let proxied = format!("{scheme_user}@{}/{tail}", proxy.addr);

        let skills = crate::common::tempdir().unwrap();
        touch_skill(skills.path());
        let work = crate::common::marks_dir();
        let server = TestServer::builder(options(vec![root(skills.path(), Trust::User)]))
            .database(&proxied)
            .allowed()
            .start()
            .await;
        let (status, _) = server
            .invoke("touch_marker", json!({"path": work.path().join("before")}))
            .await;
        assert_eq!(status, 200);
        assert!(work.path().join("before").exists());

        proxy.cut().await;
        let after = work.path().join("after");
        let (status, problem) = server.invoke("touch_marker", json!({"path": after})).await;
        assert_eq!(status, 503, "{problem}");
        assert_eq!(problem["code"], "unavailable");
        assert!(
            !problem["detail"].as_str().unwrap().contains("postgres"),
            "no internals leak: {problem}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!after.exists(), "nothing ran that could not be recorded");
        let (status, _) = Api::anonymous(&server).get("/readyz").await;
        assert_eq!(status, 503);
    })
    .await;
}

#[tokio::test]
async fn runs_a_crash_left_running_are_interrupted_at_start() {
    let data = crate::common::tempdir().unwrap();
    let url = format!("sqlite://{}", data.path().join("skilld.db").display());
    let id = uuid::Uuid::now_v7();
    {
        let store = skilld::store::connect(&url).await.unwrap();
        store
            .runs
            .insert_run(NewRun {
                id,
                skill: "echo".into(),
                tool: "echo_json".into(),
                skill_hash: "0".repeat(64),
                arguments: json!({}),
                argv: vec!["printf".into()],
                cwd: "/".into(),
                status: RunStatus::Queued,
                requested_by: None,
                approval_id: None,
                created_at: chrono::Utc::now(),
                started_at: None,
                instance: None,
                mode: None,
                request_id: None,
                skill_version: None,
                idempotency_key: None,
                session: None,
            })
            .await
            .unwrap();
        store
            .runs
            .start_run(id, Some(1), "crashed", chrono::Utc::now())
            .await
            .unwrap()
            .unwrap();
    }
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_skilld"))
        .args(["serve", "--bind", "127.0.0.1:0", "--data-dir"])
        .arg(data.path())
        .arg("--skills")
        .arg(corpus_dir().join("valid"))
        .env("SKILLD_LOG", "warn")
        .env_remove("SKILLD_DATABASE_URL")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let addr = crate::common::announced_url(&mut child).unwrap();
    let (_, run) = Api::new(addr, None).get(&format!("/runs/{id}")).await;
    std::process::Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(run["status"], "interrupted", "{run}");
    assert!(run["finished_at"].is_string());
}
