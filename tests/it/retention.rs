//! Retention through a real `skilld serve` and its config file: runs past
//! their age leave `GET /runs` and land in the export file, each line the
//! run as the API showed it; bad settings stop the server at start-up.

use serde_json::{Value, json};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Server {
    child: Child,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        crate::common::terminate(&mut self.child);
    }
}

fn serve(data: &Path, config: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_skilld"));
    command
        .args(["serve", "--bind", "127.0.0.1:0", "--no-watch", "--data-dir"])
        .arg(data)
        .arg("--config")
        .arg(config)
        .arg("--skills")
        .arg(format!("bundled={}", data.join("skills").display()))
        .env("SKILLD_LOG", "warn")
        .env_remove("SKILLD_DATABASE_URL");
    command
}

fn start(data: &Path, config: &Path) -> Server {
    let mut child = serve(data, config)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let url = crate::common::announced_url(&mut child).unwrap();
    Server { child, url }
}

async fn listed(client: &reqwest::Client, url: &str) -> Vec<Value> {
    let page: Value = client
        .get(format!("{url}/runs?limit=500"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    page["runs"].as_array().unwrap().clone()
}

#[tokio::test]
async fn runs_past_their_age_leave_the_log_for_the_export() {
    let data = crate::common::tempdir().unwrap();
    crate::common::write_file(
        &data.path().join("skills/noop/SKILL.md"),
        "---\nname: noop\nversion: 1.0.0\ndescription: Test.\nread_only: true\n---\n\n\
         ### noop\n\nTest.\n\n#### Parameters\n\nNone.\n\n#### Command\n\n```\ntrue\n```\n",
    );
    let export = data.path().join("pruned.jsonl");
    let config = data.path().join("skilld.toml");
    std::fs::write(
        &config,
        format!(
            "[retention]\nmax_age = \"2s\"\ninterval_secs = 1\nbatch_size = 2\npause_ms = 0\nexport = {:?}\n",
            export.display().to_string()
        ),
    )
    .unwrap();
    let server = start(data.path(), &config);
    // The run log is a person's to read: the server's local secret.
    let secret = skilld::local_secret::read(data.path()).unwrap().unwrap();
    let mut headers = reqwest::header::HeaderMap::new();
    let bearer = format!("Bearer {secret}");
    headers.insert(reqwest::header::AUTHORIZATION, bearer.parse().unwrap());
    let client = reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .unwrap();
    let mut shown = Vec::new();
    for _ in 0..3 {
        let envelope: Value = client
            .post(format!("{}/tools/noop/invoke", server.url))
            .json(&json!({}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(envelope["exit_code"], 0, "{envelope}");
        let run = envelope["run_id"].as_str().unwrap();
        let shown_run: Value = client
            .get(format!("{}/runs/{run}", server.url))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        shown.push(shown_run);
    }
    assert_eq!(listed(&client, &server.url).await.len(), 3);

    let deadline = Instant::now() + Duration::from_secs(20);
    while !listed(&client, &server.url).await.is_empty() {
        assert!(Instant::now() < deadline, "the runs were never pruned");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for run in &shown {
        let gone = client
            .get(format!("{}/runs/{}", server.url, run["id"].as_str().unwrap()))
            .send()
            .await
            .unwrap();
        assert_eq!(gone.status(), 404);
    }
    let lines: Vec<Value> = std::fs::read_to_string(&export)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(
        lines, shown,
        "each pruned run, once, as GET /runs/{{id}} showed it"
    );
}

#[test]
fn bad_retention_settings_stop_the_server_at_start_up() {
    let data = crate::common::tempdir().unwrap();
    let config = data.path().join("skilld.toml");
    for (section, says) in [
        ("max_age = \"90 days\"", "is not an age such as 90d"),
        ("max_age = \"0s\"", "is not an age"),
        ("max_runs = 0", "max_runs '0' must be a count of at least 1"),
        ("max_runs = \"many\"", "max_runs 'many'"),
        ("batch_size = 0", "batch_size must be 1 to 10000"),
        ("interval_secs = 0", "interval_secs must be at least 1"),
        (
            "export = \"/nonexistent/dir/pruned.jsonl\"",
            "its directory does not exist",
        ),
        ("keep = \"all\"", "unknown field `keep`"),
    ] {
        std::fs::write(&config, format!("[retention]\n{section}\n")).unwrap();
        let output = serve(data.path(), &config).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{section}");
        assert!(stderr.contains(says), "{section}: {stderr}");
    }
    std::fs::write(&config, "[retention]\nmax_age = \"90d\"\n").unwrap();
    let output = serve(data.path(), &config)
        .args(["--retention-max-age", "5x"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&output.stderr).contains("'5x' is not an age"));
}
