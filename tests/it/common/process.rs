//! Child processes of the tests (a real `skilld serve`, a helper server):
//! reading what they announce, and ending them so none outlives its test.

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The URL a `skilld serve` child announces on the first line of its
/// stdout (`listening on URL`), or that line when it announced none.
pub fn announced_url(child: &mut std::process::Child) -> Result<String, String> {
    use std::io::BufRead;
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut first)
        .unwrap();
    match first.trim().strip_prefix("listening on ") {
        Some(url) => Ok(url.to_owned()),
        None => Err(first),
    }
}

/// Stops `child` as an operator would (SIGTERM), and reaps it.
pub fn terminate(child: &mut Child) {
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    let _ = child.wait();
}

/// Kills `child` outright (SIGKILL), and reaps it.
pub fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// `skilld serve` on 127.0.0.1 port 0, not watching, its data in `data`
/// and `skills` its bundled root, logging warnings only, its stdout
/// (where it announces its address) piped, and no database URL taken
/// from the environment. Callers add what their test needs.
pub fn serve_command(data: &Path, skills: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_skilld"));
    command
        .args(["serve", "--bind", "127.0.0.1:0", "--no-watch", "--data-dir"])
        .arg(data)
        .arg("--skills")
        .arg(format!("bundled={}", skills.display()))
        .env("SKILLD_LOG", "warn")
        .env_remove("SKILLD_DATABASE_URL")
        .stdout(Stdio::piped());
    command
}

/// `skilld serve` on port 0 as user and group 65534 (nobody), through
/// `setpriv`: a server that is not root, serving `skills` (bundled trust)
/// with the data directory `data` (which that user must own) and the
/// workspace `workspace`.
pub fn serve_as_nobody(skills: &Path, data: &Path, workspace: &Path) -> Command {
    let mut c = Command::new("/usr/bin/setpriv");
    c.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--",
        env!("CARGO_BIN_EXE_skilld"),
        "serve",
        "--bind",
        "127.0.0.1:0",
        "--no-watch",
    ])
    .arg("--skills")
    .arg(format!("bundled={}", skills.display()))
    .arg("--data-dir")
    .arg(data)
    .arg("--workspace")
    .arg(workspace)
    .env_remove("SKILLD_TOKENS")
    .env_remove("SKILLD_DATABASE_URL")
    .env("SKILLD_LOG", "warn");
    c
}

pub fn skilld() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_skilld"));
    c.env_remove("SKILLD_BIND")
        .env_remove("SKILLD_SKILLS")
        .env_remove("SKILLD_CONFIG")
        .env_remove("SKILLD_TOKENS")
        .env_remove("SKILLD_AGENT_TOOLS")
        .env("SKILLD_LOG", "warn");
    c
}

/// Starts `skilld serve …`, returning the child and the address it printed.
pub fn serve(cmd: &mut Command) -> (std::process::Child, String) {
    serve_logging_to(cmd, Stdio::null())
}

/// [`serve`], with the server's stderr (its log) going to `log`.
pub fn serve_logging_to(cmd: &mut Command, log: Stdio) -> (std::process::Child, String) {
    // The same server on PostgreSQL when the suite runs so, unless the
    // test chose its run log itself.
    let chosen = cmd.get_args().any(|a| a == "--database")
        || cmd
            .get_envs()
            .any(|(k, v)| k == "SKILLD_DATABASE_URL" && v.is_some());
    if let Some(base) = crate::common::test_postgres()
        && !chosen
    {
        cmd.arg("--database").arg(crate::common::fresh_schema(base));
    }
    let mut child = cmd
        .env("SKILLD_SANDBOX_WRITE_PATHS", crate::common::marks_root())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut first)
        .unwrap();
    let addr = first
        .trim_end()
        .strip_prefix("listening on http://")
        .unwrap_or_else(|| panic!("first line was {first:?}"))
        .to_owned();
    (child, addr)
}

/// Invokes `tool` on a `skilld serve` at `addr` and expects 200: the
/// envelope.
pub async fn invoke_envelope(addr: &str, tool: &str, token: Option<&str>, arguments: Value) -> Value {
    let api = super::Api::new(format!("http://{addr}"), token);
    let (status, envelope) = api.invoke(tool, arguments).await;
    assert_eq!(status, 200, "{tool}: {envelope}");
    envelope
}

pub fn stop(mut child: std::process::Child) -> std::process::ExitStatus {
    Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    for _ in 0..100 {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    panic!("skilld did not stop on SIGTERM");
}
