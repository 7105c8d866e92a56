//! The browser harness of the UI tests, and scripts it runs.

use super::TestServer;
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// What `tests/browser/inbox.mjs` needs: node, the browser and `npm ci`'s
/// playwright-core. `None` (after a loud message) when something is missing
/// outside CI; a failure in CI, where `.ci/run` installs them.
pub fn browser_harness() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser");
    let chromium = std::env::var_os("CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    let node = std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let mut missing = Vec::new();
    if !node {
        missing.push("node (apt-get install -y nodejs)".to_owned());
    }
    if !chromium.is_file() {
        missing.push(format!("{} (apt-get install -y chromium)", chromium.display()));
    }
    if !dir.join("node_modules/playwright-core/package.json").is_file() {
        missing.push(format!("playwright-core (cd {} && npm ci)", dir.display()));
    }
    if missing.is_empty() {
        return Some(dir);
    }
    let message = format!("the browser test needs: {}", missing.join(", "));
    if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
        panic!("{message}; .ci/run installs them");
    }
    // Straight to stderr: libtest captures `eprintln!` of a passing test.
    let _ = writeln!(std::io::stderr(), "\n!!!!!!!!!! SKIPPED: {message} !!!!!!!!!!\n");
    None
}

/// A script of `tests/browser` driving the page. It says each step as a
/// JSON line on stdout (`{"step": …}`, the last one `done`) and, when it
/// needs the test to act (make a call, decide elsewhere), waits for a line
/// on stdin.
pub struct Script {
    pub name: &'static str,
    pub child: tokio::process::Child,
    pub stdout: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    pub stdin: tokio::process::ChildStdin,
    /// Read all along, so a chatty failure cannot fill the pipe and hang.
    pub stderr: tokio::task::JoinHandle<String>,
    pub shot: PathBuf,
}

impl Script {
    pub fn start(
        harness: &Path,
        name: &'static str,
        screenshot: &str,
        server: &TestServer,
        token: Option<&str>,
        env: &[(&str, &str)],
    ) -> Self {
        let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join(screenshot);
        let mut child = tokio::process::Command::new("node")
            .current_dir(harness)
            .arg(harness.join(name))
            .arg(server.url(""))
            .args(token)
            .envs(env.iter().copied())
            // Without tokens, the page is opened through the start link.
            .envs(server.secret.as_deref().map(|s| ("INBOX_SECRET", s)))
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
        Self {
            name,
            stdout: BufReader::new(child.stdout.take().unwrap()).lines(),
            stdin: child.stdin.take().unwrap(),
            child,
            stderr,
            shot,
        }
    }

    /// The script's next line, which must be `step`.
    pub async fn step(&mut self, step: &str) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(180), self.stdout.next_line()).await;
        let Ok(Ok(Some(line))) = line else {
            let why = self.failure().await;
            panic!("{} ended before {step:?}: {why}", self.name);
        };
        let said: Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("{} printed {line:?}: {e}", self.name));
        assert_eq!(said["step"], step, "{said}");
        said
    }

    /// Tells the script the test has done its part.
    pub async fn tell(&mut self, what: Value) {
        self.stdin
            .write_all(format!("{what}\n").as_bytes())
            .await
            .unwrap();
        self.stdin.flush().await.unwrap();
    }

    /// The last step's report, once the script has exited cleanly.
    pub async fn done(mut self) -> Value {
        let seen = self.step("done").await;
        let status = tokio::time::timeout(Duration::from_secs(60), self.child.wait()).await;
        if !matches!(status, Ok(Ok(s)) if s.success()) {
            let why = self.failure().await;
            panic!("{} reported but did not exit cleanly: {why}", self.name);
        }
        seen
    }

    /// Why the script stopped: its exit status, stderr and screenshot.
    pub async fn failure(&mut self) -> String {
        // A script that fails closes its browser and exits; one that hangs
        // is stopped.
        let status = match tokio::time::timeout(Duration::from_secs(30), self.child.wait()).await {
            Ok(status) => format!("{status:?}"),
            Err(_) => {
                let _ = self.child.kill().await;
                "hung, killed".to_owned()
            }
        };
        let stderr = (&mut self.stderr).await.unwrap_or_default();
        format!(
            "{status}; screenshot at {}\nstderr:\n{stderr}",
            self.shot.display()
        )
    }
}
