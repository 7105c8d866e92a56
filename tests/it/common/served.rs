//! A real `skilld serve` child, configured by TOML, its log kept.

use super::tempdir;
use std::io::Read;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A real `skilld serve` on 127.0.0.1 port 0, over `skills` (bundled),
/// configured by the TOML `config`, its log (stderr) kept; stopped when
/// dropped.
pub struct Served {
    pub child: Option<Child>,
    pub addr: String,
    pub log: Arc<Mutex<Vec<u8>>>,
    pub _data: tempfile::TempDir,
}

impl Served {
    pub fn start(skills: &Path, config: &str) -> Self {
        Self::start_with_files(skills, config, None)
    }

    /// Over `skills` at `trust` (`user`, `untrusted`) rather than bundled.
    pub fn start_at(skills: &Path, config: &str, trust: &str) -> Self {
        Self::start_in(skills, config, None, trust, tempdir().unwrap())
    }

    /// As [`Served::start_at`], keeping its data (the store) in `data`:
    /// a later server over the same `data` finds what this one recorded.
    pub fn start_in_data(skills: &Path, config: &str, trust: &str, data: tempfile::TempDir) -> Self {
        Self::start_in(skills, config, None, trust, data)
    }

    /// With the soft limit of open files at `soft_files`, when given.
    pub fn start_with_files(skills: &Path, config: &str, soft_files: Option<u64>) -> Self {
        Self::start_in(skills, config, soft_files, "bundled", tempdir().unwrap())
    }

    fn start_in(
        skills: &Path,
        config: &str,
        soft_files: Option<u64>,
        trust: &str,
        data: tempfile::TempDir,
    ) -> Self {
        let file = data.path().join("skilld.toml");
        std::fs::write(&file, config).unwrap();
        let mut cmd = super::skilld();
        if let Some(soft) = soft_files {
            // The same environment, run through a shell that lowers the limit.
            let program = cmd.get_program().to_owned();
            cmd = std::process::Command::new("sh");
            cmd.arg("-c")
                .arg(format!("ulimit -Sn {soft} && exec \"$0\" \"$@\""))
                .arg(program)
                .env_remove("SKILLD_BIND")
                .env_remove("SKILLD_SKILLS")
                .env_remove("SKILLD_CONFIG")
                .env_remove("SKILLD_TOKENS");
        }
        cmd.args(["serve", "--bind", "127.0.0.1:0", "--no-watch"])
            .arg("--config")
            .arg(&file)
            .arg("--data-dir")
            .arg(data.path().join("data"))
            .arg("--skills")
            .arg(format!("{trust}={}", skills.display()))
            .env_remove("SKILLD_DATABASE_URL")
            .env("SKILLD_LOG", "info");
        let (mut child, addr) = super::serve_logging_to(&mut cmd, Stdio::piped());
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut stderr = child.stderr.take().unwrap();
        let kept = log.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                kept.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Self {
            child: Some(child),
            addr,
            log,
            _data: data,
        }
    }

    /// A client that sends the server's local secret, as the person who
    /// decides.
    pub fn person(&self) -> reqwest::Client {
        let secret = skilld::local_secret::read(&self._data.path().join("data"))
            .unwrap()
            .expect("an open server keeps its local secret");
        crate::common::bearer_client(Some(&secret))
    }

    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `GET path` as the person who decides, its JSON answer.
    pub async fn get_json(&self, path: &str) -> serde_json::Value {
        self.person()
            .get(format!("{}{path}", self.base()))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// Stops the server as SIGTERM does; fails if it takes over 5 s.
    pub fn stop(mut self) -> std::process::ExitStatus {
        super::stop(self.child.take().unwrap())
    }

    /// Stops the server, handing back its data directory for the next.
    pub fn stop_keeping_data(mut self) -> tempfile::TempDir {
        super::stop(self.child.take().unwrap());
        let data = tempdir().unwrap();
        std::mem::replace(&mut self._data, data)
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// How many descriptors the server has open.
    pub fn fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid()))
            .unwrap()
            .count()
    }

    pub fn log(&self) -> String {
        String::from_utf8_lossy(&self.log.lock().unwrap()).into_owned()
    }

    /// Waits until the log holds `text`.
    pub async fn wait_for_log(&self, text: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let log = self.log();
            if log.contains(text) {
                return log;
            }
            assert!(Instant::now() < deadline, "no {text:?} in the log:\n{log}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(child) = self.child.take() {
            super::stop(child);
        }
    }
}
