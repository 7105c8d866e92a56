//! The real `skilld` binary (the one `cargo bench` builds) started as a
//! server for a bench (`#[path]`-included), stopped when dropped.

#![allow(dead_code, reason = "each bench uses its own part of this module")]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Skilld {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// From the spawn until it printed where it listens (the catalog is
    /// loaded by then).
    pub started_in: Duration,
}

impl Skilld {
    /// `skilld serve --bind 127.0.0.1:0 ARGS…`; returns once it printed
    /// where it listens. Logs (stderr) go to `log`.
    pub fn start(args: &[&str], log: &Path) -> Self {
        let log = std::fs::File::create(log).expect("log file");
        let start = Instant::now();
        let mut child = Command::new(env!("CARGO_BIN_EXE_skilld"))
            .arg("serve")
            .args(["--bind", "127.0.0.1:0"])
            .args(args)
            .env_remove("SKILLD_CONFIG")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("start skilld");
        let stdout = child.stdout.take().expect("stdout");
        let mut stdout = BufReader::new(stdout);
        let mut line = String::new();
        stdout.read_line(&mut line).expect("first line");
        let started_in = start.elapsed();
        let base = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("skilld said {line:?}"))
            .to_owned();
        // Read on, so what it prints next never meets a closed pipe.
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        Self {
            child,
            base,
            started_in,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits until `/readyz` answers ready with at least `skills` skills.
    pub async fn ready(&self, client: &reqwest::Client, skills: u64, within: Duration) -> Duration {
        let start = Instant::now();
        loop {
            if let Ok(r) = client.get(format!("{}/readyz", self.base)).send().await
                && r.status().is_success()
                && let Ok(v) = r.json::<serde_json::Value>().await
                && v["skills"].as_u64().is_some_and(|n| n >= skills)
            {
                return start.elapsed();
            }
            assert!(
                start.elapsed() < within,
                "skilld not ready with {skills} skills in {within:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Skilld {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
