//! The Python side of the tests: a virtual environment with the client
//! and the providers' SDKs, and scripts run in it against a test server.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

/// What the venv holds: the generator, and the generated client's runtime
/// dependencies. `.ci/run` installs the same list; keep the two in step.
pub const REQUIREMENTS: [&str; 12] = [
    "openapi-python-client==0.29.1",
    "httpx==0.28.1",
    "attrs==26.1.0",
    "python-dateutil==2.9.0.post0",
    "mcp==2.3.0",
    "openai==3.54.0",
    "anthropic==2.12.0",
    "google-genai==3.4.0",
    "schemathesis==4.32.5",
    "openai-agents==0.24.0",
    "mcp-server-time==2026.10.19",
    "mcp-server-git==2026.10.19",
];

/// Written into a venv once `REQUIREMENTS` are installed in it.
pub const MARKER: &str = ".skilld-requirements";

pub fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

pub fn show(output: &Output) -> String {
    format!(
        "{}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

pub fn run(what: &str, cmd: &mut Command) -> Output {
    let output = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {cmd:?}: {e}"));
    assert!(
        output.status.success(),
        "{what} failed: {cmd:?}\n{}",
        show(&output)
    );
    output
}

/// Whether `venv` has the generator and the client's runtime dependencies.
pub fn usable(venv: &Path) -> Result<(), String> {
    let generator = venv.join("bin/openapi-python-client");
    if !generator.is_file() {
        return Err(format!("{} is missing", generator.display()));
    }
    let python = venv.join("bin/python");
    let check = Command::new(&python)
        .args([
            "-c",
            "import httpx, attrs, dateutil, mcp, openai, anthropic, google.genai, schemathesis, agents, mcp_server_time, mcp_server_git",
        ])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    if !check.status.success() {
        return Err(format!(
            "the generated client's dependencies (httpx, attrs, python-dateutil) or the MCP, provider, schemathesis and MCP server packages do not import: {}",
            show(&check)
        ));
    }
    Ok(())
}

/// The venv to use, made if need be.
pub fn venv() -> PathBuf {
    if let Some(dir) = std::env::var_os("SKILLD_PYTHON_VENV") {
        let dir = PathBuf::from(dir);
        if let Err(e) = usable(&dir) {
            panic!(
                "SKILLD_PYTHON_VENV={}: {e}; install into it: pip install {}",
                dir.display(),
                REQUIREMENTS.join(" ")
            );
        }
        return dir;
    }
    let target = manifest_dir().join("target");
    let dir = target.join("python-venv");
    fs::create_dir_all(&target).unwrap();
    // Another test process may be making it too: one at a time. The lock is
    // released when `lock` is dropped, also if this panics.
    let lock = File::create(target.join("python-venv.lock")).unwrap();
    lock.lock().unwrap();
    let wanted = REQUIREMENTS.join("\n");
    if fs::read_to_string(dir.join(MARKER)).is_ok_and(|m| m.trim() == wanted) && usable(&dir).is_ok() {
        return dir;
    }
    run(
        "making the python venv (needs python3 with the venv module on PATH)",
        Command::new("python3").args(["-m", "venv", "--clear"]).arg(&dir),
    );
    run(
        "installing openapi-python-client and the client's dependencies from PyPI",
        Command::new(dir.join("bin/python"))
            .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check"])
            .args(REQUIREMENTS),
    );
    if let Err(e) = usable(&dir) {
        panic!("{} after pip install: {e}", dir.display());
    }
    fs::write(dir.join(MARKER), wanted + "\n").unwrap();
    drop(lock);
    dir
}

/// Runs `tests/python/<script>` with the venv's Python, `args` and `env`
/// (loopback never proxied); fails the test with its output unless it
/// succeeds within `limit`, and prints what it printed.
pub async fn run_script(script: &str, args: &[&str], env: &[(&str, &str)], limit: Duration) {
    run_python(
        &manifest_dir().join("tests/python").join(script),
        args,
        env,
        limit,
    )
    .await;
}

/// `run_script` for a script at any path.
pub async fn run_python(script: &Path, args: &[&str], env: &[(&str, &str)], limit: Duration) {
    let venv = venv();
    let mut cmd = tokio::process::Command::new(venv.join("bin/python"));
    cmd.arg(script)
        .args(args)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("no_proxy", "127.0.0.1,localhost")
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let output = tokio::time::timeout(limit, cmd.output())
        .await
        .unwrap_or_else(|_| panic!("{} still running after {limit:?}", script.display()))
        .expect("cannot run python");
    assert!(
        output.status.success(),
        "{} failed:\n{}",
        script.display(),
        show(&output)
    );
    print!("{}", String::from_utf8_lossy(&output.stdout));
}
