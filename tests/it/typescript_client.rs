//! TypeScript types generated from the committed OpenAPI document by
//! openapi-typescript, used through openapi-fetch by a script that
//! `tsc --strict` type-checks and node then runs against a live server
//! (`tests/typescript/invoke.ts`). The packages are pinned in
//! `tests/typescript/package-lock.json`; this test runs `npm ci` when they
//! are missing. Without node it is skipped loudly, and fails in CI.

use crate::common::{TestServer, bundled_dir, options, root};
use crate::python_client::{manifest_dir, show};
use skilld::auth::{Auth, Role, Token};
use skilld::skill::Trust;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

const AGENT: &str = "ts-agent-secret-0123456789";

fn run(what: &str, cmd: &mut Command) {
    let output = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {cmd:?}: {e}"));
    assert!(output.status.success(), "{what} failed:\n{}", show(&output));
}

/// `tests/typescript` with its packages installed, or `None` without node.
fn harness() -> Option<PathBuf> {
    let dir = manifest_dir().join("tests/typescript");
    let node = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !node {
        let message = "the TypeScript client test needs node and npm (apt-get install -y nodejs npm)";
        if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
            panic!("{message}; .ci/run installs them");
        }
        let _ = writeln!(std::io::stderr(), "\n!!!!!!!!!! SKIPPED: {message} !!!!!!!!!!\n");
        return None;
    }
    // One `npm ci` at a time; the lock goes with `lock`, also on panic.
    let lock = File::create(manifest_dir().join("target/typescript.lock")).unwrap();
    lock.lock().unwrap();
    if !dir.join("node_modules/openapi-fetch/package.json").is_file() {
        run(
            "npm ci in tests/typescript",
            Command::new("npm").current_dir(&dir).args([
                "ci",
                "--prefer-offline",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
            ]),
        );
    }
    Some(dir)
}

fn bin(dir: &Path, name: &str) -> PathBuf {
    dir.join("node_modules/.bin").join(name)
}

#[tokio::test]
async fn typed_typescript_client_invokes_a_tool() {
    let Some(dir) = harness() else { return };
    let spec = manifest_dir().join("openapi/openapi.json");
    run(
        "openapi-typescript",
        Command::new(bin(&dir, "openapi-typescript"))
            .current_dir(&dir)
            .arg(&spec)
            .args(["-o", "skilld.d.ts"]),
    );
    run(
        "tsc --strict",
        Command::new(bin(&dir, "tsc"))
            .current_dir(&dir)
            .args(["-p", "tsconfig.json"]),
    );
    let auth = Auth::new(vec![
        Token::with_secret("agent", Role::Invoke, AGENT, "test").unwrap(),
    ])
    .unwrap();
    let server = TestServer::start_with_auth(options(vec![root(bundled_dir(), Trust::Bundled)]), auth).await;
    let output = tokio::process::Command::new("node")
        .current_dir(&dir)
        .arg("dist/invoke.js")
        .arg(server.url("").trim_end_matches('/'))
        .arg(AGENT)
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    assert!(output.status.success(), "node dist/invoke.js:\n{}", show(&output));
    print!("{}", String::from_utf8_lossy(&output.stdout));
}
