//! Child processes of the tests (a real `skilld serve`, a helper server):
//! reading what they announce, and ending them so none outlives its test.

use std::path::Path;
use std::process::{Child, Command, Stdio};

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
