//! Effects on the server process itself, measured from outside it: memory
//! while a tool floods its output, and what 200 concurrent calls leave.

use serde_json::{Value, json};
use std::path::Path;
use std::process::{Child, Command, Stdio};

struct Server {
    child: Child,
    url: String,
    _data: tempfile::TempDir,
}

impl Server {
    fn start(skills: &Path) -> Self {
        let data = crate::common::tempdir().unwrap();
        let mut child = crate::common::serve_command(data.path(), skills)
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let url = crate::common::announced_url(&mut child).unwrap();
        Self {
            child,
            url,
            _data: data,
        }
    }

    /// A field of /proc/<pid>/status, in kB.
    fn status_kb(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }

    fn fd_targets(&self) -> Vec<String> {
        let mut t: Vec<String> = std::fs::read_dir(format!("/proc/{}/fd", self.child.id()))
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::read_link(e.path()).ok())
            .map(|p| p.display().to_string())
            .collect();
        t.sort();
        t
    }

    fn fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.child.id()))
            .unwrap()
            .count()
    }

    /// Children of the server that are zombies.
    fn zombie_children(&self) -> usize {
        let me = self.child.id().to_string();
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
            .filter(|stat| {
                let fields: Vec<&str> = stat
                    .rsplit_once(')')
                    .map_or("", |(_, r)| r)
                    .split_whitespace()
                    .collect();
                fields.first() == Some(&"Z") && fields.get(1) == Some(&me.as_str())
            })
            .count()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        crate::common::terminate(&mut self.child);
    }
}

fn skill(dir: &Path, name: &str, tool: &str, command: &str) {
    std::fs::create_dir_all(dir.join(name)).unwrap();
    std::fs::write(
        dir.join(name).join("SKILL.md"),
        format!(
            "---\nname: {name}\nversion: 1.0.0\ndescription: Test.\nread_only: true\ntimeout: 120\n---\n\n\
             ### {tool}\n\nTest.\n\n#### Parameters\n\nNone.\n\n#### Command\n\n```\n{command}\n```\n"
        ),
    )
    .unwrap();
}

#[tokio::test]
async fn a_gigabyte_of_output_keeps_the_server_flat() {
    let dir = crate::common::tempdir().unwrap();
    skill(
        dir.path(),
        "flood",
        "flood",
        "sh -c 'head -c 1073741824 /dev/zero | tr \"\\\\0\" a; echo; echo LAST LINE'",
    );
    let server = Server::start(dir.path());
    // Warm the paths a call takes, then take the high-water mark as idle.
    let client = reqwest::Client::new();
    let _ = client.get(format!("{}/readyz", server.url)).send().await.unwrap();
    let idle = server.status_kb("VmHWM:");
    let env: Value = client
        .post(format!("{}/tools/flood/invoke", server.url))
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let peak = server.status_kb("VmHWM:");
    assert_eq!(env["exit_code"], 0, "{env}");
    assert_eq!(env["truncated"], true);
    assert!(env["output_bytes"].as_u64().unwrap() > 1 << 30);
    let output = env["output"].as_str().unwrap();
    assert!(
        output.ends_with("\nLAST LINE\n"),
        "{}",
        &output[output.len() - 40..]
    );
    assert!(
        output.contains("\n... [truncated "),
        "head and tail around the marker"
    );
    assert!(output.len() < 4200);
    eprintln!(
        "server peak RSS: idle {idle} kB, after 1 GiB {peak} kB (+{} kB)",
        peak - idle
    );
    assert!(
        peak - idle < 16 * 1024,
        "the server's memory grew by {} kB",
        peak - idle
    );
}

#[tokio::test]
async fn two_hundred_concurrent_calls_leave_no_zombie_or_descriptor() {
    let dir = crate::common::tempdir().unwrap();
    skill(
        dir.path(),
        "hello",
        "say_hello",
        "sh -c 'echo hello; sleep 0.05 & echo bye >&2'",
    );
    let server = Server::start(dir.path());
    let client = reqwest::Client::new();
    // One call first, so lazily opened descriptors (the database's) exist.
    let warm = client
        .post(format!("{}/tools/say_hello/invoke", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(warm.status(), 200);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    // The first batch may open pooled resources (database connections up to
    // the pool's size); a leak shows as growth from one batch to the next.
    let batch = |client: reqwest::Client| {
        let url = format!("{}/tools/say_hello/invoke", server.url);
        async move {
            let mut calls = tokio::task::JoinSet::new();
            for _ in 0..200 {
                let (client, url) = (client.clone(), url.clone());
                calls.spawn(async move {
                    let res = client.post(url).send().await.unwrap();
                    (res.status().as_u16(), res.json::<Value>().await.unwrap())
                });
            }
            while let Some(done) = calls.join_next().await {
                let (status, env) = done.unwrap();
                assert_eq!(status, 200, "{env}");
                assert_eq!(env["success"], true, "{env}");
            }
        }
    };
    batch(client.clone()).await;
    let settle = || tokio::time::sleep(std::time::Duration::from_millis(500));
    settle().await;
    let (fds_first, targets_first) = (server.fds(), server.fd_targets());
    batch(client.clone()).await;
    settle().await;
    let (fds_second, targets_second) = (server.fds(), server.fd_targets());
    drop(client);
    assert_eq!(server.zombie_children(), 0);
    assert!(
        fds_second <= fds_first,
        "descriptors grew from {fds_first} to {fds_second}:\n{targets_first:?}\n{targets_second:?}"
    );
}

/// A supervisor that signals as soon as the server says it is listening
/// (or right after its first answer) finds the handlers in place: the
/// server stops cleanly rather than dying of the signal's default action.
#[tokio::test]
async fn a_sigterm_right_after_the_announcement_stops_cleanly() {
    let skills = crate::common::tempdir().unwrap();
    skill(skills.path(), "echoer", "echo_json", "printf '{}'");
    for round in 0..6 {
        let mut server = Server::start(skills.path());
        if round % 2 == 1 {
            let ready = reqwest::get(format!("{}/healthz", server.url)).await.unwrap();
            assert_eq!(ready.status(), 200);
        }
        Command::new("kill")
            .arg("-TERM")
            .arg(server.child.id().to_string())
            .status()
            .unwrap();
        let status = server.child.wait().unwrap();
        assert!(status.success(), "round {round}: {status}");
    }
}
