//! The committed `openapi/openapi.json` makes a working client: a Python
//! package generated from it by openapi-python-client lists skills, fetches
//! one and exports tools, runs a tool and tries one (typed `Envelope` and
//! `DryRun`), has a held call approved by a second token, waits for its run
//! and reads its typed result, follows its events and downloads a skill
//! file, on a real server with tokens (`tests/python/use_client.py`).
//!
//! The generator comes from the venv named by `SKILLD_PYTHON_VENV` (used as
//! it is), else from `target/python-venv`, made and filled from PyPI on first
//! use under a lock file. Its command is
//! `openapi-python-client generate --path openapi/openapi.json
//! --output-path <tmp>/skilld_client --meta none --fail-on-warning
//! --config <tmp>/config.yaml`, the config being `post_hooks: []` (no ruff)
//! with `application/zip` read as octet-stream (bytes):
//! any warning it prints about the document fails the test.

use crate::common::{TestServer, bundled_dir, options, root};
use skilld::auth::{Auth, Role, Token};
use skilld::skill::Trust;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

/// What the venv holds: the generator, and the generated client's runtime
/// dependencies. `.ci/run` installs the same list; keep the two in step.
const REQUIREMENTS: [&str; 9] = [
    "openapi-python-client==0.29.1",
    "httpx==0.28.1",
    "attrs==26.1.0",
    "python-dateutil==2.9.0.post0",
    "mcp==2.3.0",
    "openai==3.54.0",
    "anthropic==2.12.0",
    "google-genai==3.4.0",
    "schemathesis==4.32.5",
];

/// Written into a venv once `REQUIREMENTS` are installed in it.
const MARKER: &str = ".skilld-requirements";

pub(crate) fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

pub(crate) fn show(output: &Output) -> String {
    format!(
        "{}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn run(what: &str, cmd: &mut Command) -> Output {
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
fn usable(venv: &Path) -> Result<(), String> {
    let generator = venv.join("bin/openapi-python-client");
    if !generator.is_file() {
        return Err(format!("{} is missing", generator.display()));
    }
    let python = venv.join("bin/python");
    let check = Command::new(&python)
        .args([
            "-c",
            "import httpx, attrs, dateutil, mcp, openai, anthropic, google.genai, schemathesis",
        ])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    if !check.status.success() {
        return Err(format!(
            "the generated client's dependencies (httpx, attrs, python-dateutil) or the MCP, provider and schemathesis packages do not import: {}",
            show(&check)
        ));
    }
    Ok(())
}

/// The venv to use, made if need be.
pub(crate) fn venv() -> PathBuf {
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

/// Generates the package `skilld_client` into `into` from the committed spec.
fn generate(venv: &Path, into: &Path) {
    let config = into.join("config.yaml");
    // A zip archive is bytes to this generator, as octet-stream is.
    fs::write(
        &config,
        "post_hooks: []\ncontent_type_overrides:\n  application/zip: application/octet-stream\n",
    )
    .unwrap();
    let spec = manifest_dir().join("openapi/openapi.json");
    let output = Command::new(venv.join("bin/openapi-python-client"))
        .current_dir(into)
        .args(["generate", "--path"])
        .arg(&spec)
        .arg("--output-path")
        .arg(into.join("skilld_client"))
        .args(["--meta", "none", "--fail-on-warning", "--config"])
        .arg(&config)
        .output()
        .expect("cannot run openapi-python-client");
    assert!(
        output.status.success(),
        "openapi-python-client could not generate a clean client from {}:\n{}",
        spec.display(),
        show(&output)
    );
}

const AGENT: &str = "client-agent-secret-0123456789";
const BOSS: &str = "client-boss-secret-0123456789";

/// `agent` calls, `boss` approves: nobody decides their own call.
fn tokens() -> Auth {
    Auth::new(vec![
        Token::with_secret("agent", Role::Invoke, AGENT, "test").unwrap(),
        Token::with_secret("boss", Role::Approve, BOSS, "test").unwrap(),
    ])
    .unwrap()
}

/// Runs `tests/python/<script>` with the venv's Python, `args` and `env`
/// (loopback never proxied); fails the test with its output unless it
/// succeeds within `limit`, and prints what it printed.
pub(crate) async fn run_script(script: &str, args: &[&str], env: &[(&str, &str)], limit: Duration) {
    let venv = venv();
    let script = manifest_dir().join("tests/python").join(script);
    let mut cmd = tokio::process::Command::new(venv.join("bin/python"));
    cmd.arg(&script)
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_python_client_works() {
    let venv = venv();
    let tmp = crate::common::tempdir().unwrap();
    generate(&venv, tmp.path());

    let fixtures = crate::common::tempdir().unwrap();
    crate::common::greet_skill(fixtures.path());
    crate::common::stamp_skill(fixtures.path());
    let marks = crate::common::marks_dir();
    let marker = marks.path().join("stamped");
    let roots = vec![
        root(bundled_dir(), Trust::Bundled),
        root(fixtures.path(), Trust::Bundled),
    ];
    let server = TestServer::start_with_auth(options(roots), tokens()).await;
    let (marker, pythonpath) = (marker.display().to_string(), tmp.path().display().to_string());
    let env = [
        ("SKILLD_TEST_AGENT", AGENT),
        ("SKILLD_TEST_BOSS", BOSS),
        ("SKILLD_TEST_MARKER", marker.as_str()),
        ("PYTHONPATH", pythonpath.as_str()),
    ];
    run_script(
        "use_client.py",
        &[&server.url("")],
        &env,
        Duration::from_secs(120),
    )
    .await;
}
