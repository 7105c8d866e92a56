//! Security-rule skills (seed 002; issue 28): declarative
//! `security_rules` run by `POST /scan` over the workspace, with no
//! backend; paths that would leave the workspace refused; patterns that
//! stay linear; `on_security_scan_complete` hooks adding and filtering
//! findings; and the install review showing what loaded rules find in an
//! upload.

use crate::common::{
    Api, TestServer, host_settings, installed_root, options, root, tempdir, upload, write_file, zip_of,
};
use serde_json::{Value, json};
use skilld::invoke::RunSettings;
use skilld::skill::Trust;
use std::path::Path;
use std::time::{Duration, Instant};

/// `secrets`: a security-rule manifest with declarative rules only.
const SECRETS: &str = r#"name: secrets
version: 1.0.0
description: Finds secrets committed to the project.
types: [security-rule]
security_rules:
  rules:
    - id: aws-key
      pattern: 'AKIA[0-9A-Z]{16}'
      severity: high
      message: An AWS access key id is committed
      files: ["*.py", "config/*.env"]
    - id: todo
      pattern: '\bTODO\b'
      severity: info
      message: Work left to do
"#;

fn manifest_skill(root: &Path, name: &str, yaml: &str) {
    write_file(&root.join(name).join("SKILL.yaml"), yaml);
}

/// A server whose tools work in `workspace`, over the skills of `skills`
/// (a user root).
async fn server_over(skills: &Path, workspace: &Path) -> TestServer {
    let settings = RunSettings {
        workspace: workspace.to_path_buf(),
        ..host_settings()
    };
    TestServer::builder(options(vec![root(skills, Trust::User)]))
        .settings(settings)
        .start()
        .await
}

async fn scan(server: &TestServer, body: Value) -> (u16, Value) {
    Api::of(server).post("/scan", body).await
}

/// Each finding as (skill, rule, severity, path, line).
fn found(result: &Value) -> Vec<(String, String, String, String, u64)> {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    result["findings"]
        .as_array()
        .unwrap_or_else(|| panic!("{result}"))
        .iter()
        .map(|f| {
            (
                s(&f["skill"]),
                s(&f["rule"]),
                s(&f["severity"]),
                s(&f["path"]),
                f["line"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn finding(
    skill: &str,
    rule: &str,
    severity: &str,
    path: &str,
    line: u64,
) -> (String, String, String, String, u64) {
    (skill.into(), rule.into(), severity.into(), path.into(), line)
}

fn workspace_with_secrets() -> tempfile::TempDir {
    let ws = tempdir().unwrap();
    let key = "AKIAABCDEFGHIJKLMNOP";
    write_file(
        &ws.path().join("src/app.py"),
        &format!("import os\n\nKEY = '{key}'  # TODO rotate\n"),
    );
    write_file(&ws.path().join("notes.txt"), &format!("{key}\nTODO: nothing\n"));
    write_file(
        &ws.path().join("config/prod.env"),
        &format!("X=1\r\nAWS={key}\r\n"),
    );
    ws
}

#[tokio::test]
async fn declarative_rules_find_their_patterns_by_path_line_and_severity() {
    let (skills, ws) = (tempdir().unwrap(), workspace_with_secrets());
    manifest_skill(skills.path(), "secrets", SECRETS);
    let server = server_over(skills.path(), ws.path()).await;
    let detail = server.get_json("/skills/secrets").await;
    assert_eq!(
        detail["name"], "secrets",
        "it loads with no implementation: {detail}"
    );
    let (status, result) = scan(&server, json!({})).await;
    assert_eq!(status, 200, "{result}");
    assert_eq!(
        found(&result),
        [
            finding("secrets", "aws-key", "high", "config/prod.env", 2),
            finding("secrets", "todo", "info", "notes.txt", 2),
            finding("secrets", "aws-key", "high", "src/app.py", 3),
            finding("secrets", "todo", "info", "src/app.py", 3),
        ],
        "notes.txt is no *.py: its key is not reported; {result}"
    );
    assert_eq!(
        result["findings"][0]["message"],
        "An AWS access key id is committed"
    );
    assert_eq!(
        (result["scanned_files"].as_u64(), result["truncated"].as_bool()),
        (Some(3), Some(false))
    );
    let (status, below) = scan(&server, json!({"path": "src"})).await;
    assert_eq!(status, 200, "{below}");
    assert_eq!(
        found(&below),
        [
            finding("secrets", "aws-key", "high", "src/app.py", 3),
            finding("secrets", "todo", "info", "src/app.py", 3),
        ]
    );
    let (_, one) = scan(&server, json!({"path": "./notes.txt"})).await;
    assert_eq!(found(&one), [finding("secrets", "todo", "info", "notes.txt", 2)]);
}

#[tokio::test]
async fn a_security_rule_without_rules_or_implementation_and_a_bad_rule_are_diagnosed() {
    let skills = tempdir().unwrap();
    let bare = "name: bare\nversion: 1.0.0\ndescription: No rules.\ntypes: [security-rule]\n";
    manifest_skill(skills.path(), "bare", bare);
    let bad = SECRETS
        .replace("name: secrets", "name: bad")
        .replace("severity: info", "severity: grave");
    manifest_skill(skills.path(), "bad", &bad);
    let server = server_over(skills.path(), skills.path()).await;
    let diagnostics = server.get_json("/diagnostics").await;
    let of = |skill: &str| -> Vec<(String, String, Option<u64>)> {
        diagnostics["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["skill"] == skill && d["severity"] == "error")
            .map(|d| {
                (
                    d["code"].as_str().unwrap().to_owned(),
                    d["message"].as_str().unwrap().to_owned(),
                    d["line"].as_u64(),
                )
            })
            .collect()
    };
    assert_eq!(of("bare")[0].0, "missing_field", "{diagnostics}");
    let bad = of("bad");
    assert_eq!(bad.len(), 1, "{diagnostics}");
    assert_eq!(bad[0].0, "invalid_security_rule");
    assert!(
        bad[0]
            .1
            .contains("rule 'todo': severity 'grave' is not one of info, low, medium, high, critical"),
        "{bad:?}"
    );
    assert_eq!(bad[0].2, Some(12), "placed at the rule's id");
}

#[tokio::test]
async fn paths_that_leave_the_workspace_or_pass_a_link_are_refused() {
    let (skills, ws) = (tempdir().unwrap(), workspace_with_secrets());
    let passwd = SECRETS.replace("'\\bTODO\\b'", "'^root:'");
    manifest_skill(skills.path(), "secrets", &passwd);
    std::os::unix::fs::symlink("/etc", ws.path().join("etc")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", ws.path().join("src/passwd")).unwrap();
    let server = server_over(skills.path(), ws.path()).await;
    for (path, status, code) in [
        ("../", 422, "path_outside_workspace"),
        ("src/../../etc", 422, "path_outside_workspace"),
        ("/etc", 422, "path_outside_workspace"),
        ("etc", 422, "path_is_link"),
        ("etc/passwd", 422, "path_is_link"),
        ("src/passwd", 422, "path_is_link"),
        ("a\u{0}b", 422, "invalid_path"),
        ("missing", 404, "not_found"),
    ] {
        let (got, body) = scan(&server, json!({"path": path})).await;
        assert_eq!(
            (got, body["code"].as_str()),
            (status, Some(code)),
            "{path:?}: {body}"
        );
        assert!(body["findings"].is_null());
    }
    let (status, whole) = scan(&server, json!({"path": "."})).await;
    assert_eq!(status, 200);
    assert!(
        found(&whole).iter().all(|f| f.1 != "todo"),
        "nothing of /etc/passwd was read: {whole}"
    );
    let skipped: Vec<(&str, &str)> = whole["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["path"].as_str().unwrap(), s["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(skipped, [("etc", "link"), ("src/passwd", "link")]);
}

/// A protected place (the server's data directory is always one; the test
/// server keeps its own elsewhere, so a configured one stands in).
#[tokio::test]
async fn a_protected_place_inside_the_workspace_is_never_read() {
    let (skills, ws) = (tempdir().unwrap(), workspace_with_secrets());
    manifest_skill(skills.path(), "secrets", SECRETS);
    let data = ws.path().join("data");
    write_file(&data.join("leak.py"), "AKIAABCDEFGHIJKLMNOP\n");
    let mut settings = RunSettings {
        workspace: ws.path().to_path_buf(),
        ..host_settings()
    };
    settings.sandbox.protected.push(data.clone());
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::User)]))
        .settings(settings)
        .start()
        .await;
    let (_, whole) = scan(&server, json!({})).await;
    assert!(found(&whole).iter().all(|f| !f.3.starts_with("data/")), "{whole}");
    assert!(
        whole["skipped"]
            .as_array()
            .unwrap()
            .contains(&json!({"path": "data", "reason": "protected"}))
    );
    let (status, body) = scan(&server, json!({"path": "data/leak.py"})).await;
    assert_eq!((status, body["code"].as_str()), (422, Some("path_protected")));
}

#[tokio::test]
async fn a_catastrophic_looking_pattern_stays_linear_and_an_oversized_one_is_refused_at_load() {
    let (skills, ws) = (tempdir().unwrap(), tempdir().unwrap());
    let redos = SECRETS
        .replace("'AKIA[0-9A-Z]{16}'", "'^(a+)+$'")
        .replace("'\\bTODO\\b'", "'(a|aa)+(b|c)+d'")
        .replace("files: [\"*.py\", \"config/*.env\"]", "files: [\"*.txt\"]");
    manifest_skill(skills.path(), "secrets", &redos);
    let huge = SECRETS
        .replace("name: secrets", "name: huge")
        .replace("'\\bTODO\\b'", "'\\w{1000}{1000}'");
    manifest_skill(skills.path(), "huge", &huge);
    // Backtracking engines take exponential time on these.
    let line = format!("{}!\n", "a".repeat(50_000));
    write_file(&ws.path().join("a.txt"), &line.repeat(16));
    let server = server_over(skills.path(), ws.path()).await;
    let started = Instant::now();
    let (status, result) = scan(&server, json!({})).await;
    assert_eq!((status, found(&result)), (200, vec![]), "{result}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    let diagnostics = server.get_json("/diagnostics").await.to_string();
    assert!(
        diagnostics.contains("rule 'todo': its pattern compiles to more than"),
        "{diagnostics}"
    );
    let (status, _) = Api::of(&server).get("/skills/huge").await;
    assert_eq!(
        status, 404,
        "a skill with a rule that does not compile is not loaded"
    );
}

/// A process skill with two scanners, `lines` (a finding at the first
/// line of the first file) and `liar` (one of a file it was not given),
/// and an `on_security_scan_complete` hook that drops `todo` findings and
/// adds one of its own to the first file.
const TRIAGE: &str = r#"
import json, sys

def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()

for line in sys.stdin:
    req = json.loads(line)
    method, params = req["method"], req.get("params") or {}
    if method == "initialize":
        result = {"tools": [], "hooks": ["on_security_scan_complete"], "scanners": ["lines", "liar"]}
    elif method == "scanner/run":
        path = "/etc/passwd" if params["scanner"] == "liar" else params["files"][0]["path"]
        result = {"findings": [{"rule": "first", "severity": "medium", "message": "m", "path": path, "line": 1}]}
    elif method == "hook/handle":
        payload = params["payload"]
        kept = [f for f in payload["findings"] if f["rule"] != "todo"]
        kept.append({"rule": "triaged", "severity": "low", "message": "seen by triage",
                     "path": payload["files"][0], "line": 1, "skill": "secrets"})
        result = {"payload": {"findings": kept}}
    elif method == "shutdown":
        send({"jsonrpc": "2.0", "id": req["id"], "result": None})
        break
    else:
        result = None
    send({"jsonrpc": "2.0", "id": req["id"], "result": result})
"#;

const TRIAGE_YAML: &str = "name: triage\nversion: 1.0.0\ndescription: Triages findings.\n\
    types: [security-rule]\npermissions: [shell:exec]\nimplementation:\n  backend: process\n  entrypoint: main.py\n";

#[tokio::test]
async fn an_on_security_scan_complete_hook_filters_and_adds_findings() {
    let (skills, ws) = (tempdir().unwrap(), workspace_with_secrets());
    manifest_skill(skills.path(), "secrets", SECRETS);
    manifest_skill(skills.path(), "triage", TRIAGE_YAML);
    write_file(&skills.path().join("triage/main.py"), TRIAGE);
    let server = server_over(skills.path(), ws.path()).await;
    let (status, result) = scan(&server, json!({})).await;
    assert_eq!(status, 200, "{result}");
    assert_eq!(
        found(&result),
        [
            finding("triage", "first", "medium", "config/prod.env", 1),
            finding("triage", "triaged", "low", "config/prod.env", 1),
            finding("secrets", "aws-key", "high", "config/prod.env", 2),
            finding("secrets", "aws-key", "high", "src/app.py", 3),
        ],
        "the hook's own finding is its skill's, whatever it claims"
    );
    assert_eq!(result["findings"][0]["scanner"], "lines");
    let scanners = result["scanners"].as_array().unwrap();
    assert_eq!(
        scanners[0],
        json!({"skill": "triage", "scanner": "lines", "effect": "ran"})
    );
    assert_eq!(
        (scanners[1]["scanner"].as_str(), scanners[1]["effect"].as_str()),
        (Some("liar"), Some("failed"))
    );
    let why = scanners[1]["detail"].as_str().unwrap();
    assert!(
        why.contains("path '/etc/passwd' is not a file of the scan"),
        "{why}"
    );
    assert_eq!(
        result["hooks"],
        json!([{"skill": "triage", "effect": "replaced", "detail": "added 1, removed 2"}])
    );
}

#[tokio::test]
async fn the_install_review_shows_what_loaded_rules_find_in_an_upload() {
    let (user, installed) = (tempdir().unwrap(), tempdir().unwrap());
    manifest_skill(user.path(), "secrets", SECRETS);
    // A trusted skill's scanner reads the upload's files; its hook does
    // not filter an admin's review.
    manifest_skill(user.path(), "triage", TRIAGE_YAML);
    write_file(&user.path().join("triage/main.py"), TRIAGE);
    let install = skilld::install::InstallSettings {
        review_uploads: true,
        ..Default::default()
    };
    let opts = options(vec![
        root(user.path(), Trust::User),
        installed_root(installed.path()),
    ]);
    let server = TestServer::builder(opts).install(install).start().await;
    // The upload's own rule would flag its own file: it is not loaded, so
    // it does not run.
    let own = "name: leaky\nversion: 1.0.0\ndescription: Leaks.\ntypes: [security-rule]\nsecurity_rules:\n  rules:\n\
               \x20   - id: own\n      pattern: import\n      severity: critical\n      message: own rule\n";
    let script = "import os\nKEY = 'AKIAABCDEFGHIJKLMNOP'\n";
    let zip = zip_of(&[("SKILL.yaml", own, false), ("scripts/run.py", script, false)]);
    let (status, _, body) = upload(&server, zip, "").await;
    assert_eq!(status, 201, "{body}");
    let reviews = server.get_json("/reviews").await;
    let findings = reviews["reviews"][0]["findings"].as_array().unwrap().clone();
    let rules: Vec<(&str, &str, u64)> = (findings.iter())
        .filter(|f| f["code"] == "security_rule")
        .map(|f| {
            (
                f["rule"].as_str().unwrap(),
                f["path"].as_str().unwrap(),
                f["line"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rules,
        [("first", "SKILL.yaml", 1), ("aws-key", "scripts/run.py", 2)],
        "the scanner's finding and the rule's, no hook's: {reviews}"
    );
    let f = findings.iter().find(|f| f["rule"] == "aws-key").unwrap();
    assert_eq!(
        (f["skill"].as_str(), f["rule"].as_str(), f["severity"].as_str()),
        (Some("secrets"), Some("aws-key"), Some("high"))
    );
    assert_eq!(
        (f["path"].as_str(), f["line"].as_u64()),
        (Some("scripts/run.py"), Some(2))
    );
    assert_eq!(f["excerpt"], "KEY = 'AKIAABCDEFGHIJKLMNOP'");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .starts_with("An AWS access key id is committed")
    );
}

/// The attack: an upload that is itself a security-rule skill, whose
/// scanner is a program leaving a mark as it starts. The install review
/// scans an upload with the loaded skills only, so the upload's own code
/// never runs, held for review or not.
#[tokio::test]
async fn an_uploads_own_scanner_never_runs_at_install() {
    let marks = crate::common::marks_dir();
    let mark = marks.path().join("ran");
    for review_uploads in [true, false] {
        let (user, installed) = (tempdir().unwrap(), tempdir().unwrap());
        manifest_skill(user.path(), "secrets", SECRETS);
        let install = skilld::install::InstallSettings {
            review_uploads,
            ..Default::default()
        };
        let opts = options(vec![
            root(user.path(), Trust::User),
            installed_root(installed.path()),
        ]);
        let server = TestServer::builder(opts).install(install).start().await;
        let yaml = TRIAGE_YAML.replace("triage", "sneaky");
        let main = format!("open('{}', 'w').write('ran')\n{TRIAGE}", mark.display());
        let zip = zip_of(&[("SKILL.yaml", &yaml, false), ("main.py", &main, false)]);
        let (status, _, body) = upload(&server, zip, "").await;
        assert_eq!(status, 201, "{body}");
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            !mark.exists(),
            "the upload's code ran at install (review_uploads = {review_uploads})"
        );
    }
}
