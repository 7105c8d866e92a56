//! The committed `openapi/openapi.json` makes a working client: a Python
//! package generated from it by openapi-python-client lists skills, fetches
//! one and exports tools, runs a tool and tries one (typed `Envelope` and
//! `DryRun`), has a held call approved by a second token, waits for its run
//! and reads its typed result, follows its events and downloads a skill
//! file, on a real server with tokens (`tests/python/use_client.py`). A
//! second script (`INSTALL_SCRIPT`, below) installs two versions of a skill
//! from zip archives, lists them, switches the active one back, diffs them,
//! reads the install log and removes a version then the skill, with an admin
//! token, and sees a read token refused.
//!
//! The generator comes from the venv named by `SKILLD_PYTHON_VENV` (used as
//! it is), else from `target/python-venv`, made and filled from PyPI on first
//! use under a lock file. Its command is
//! `openapi-python-client generate --path openapi/openapi.json
//! --output-path <tmp>/skilld_client --meta none --fail-on-warning
//! --config <tmp>/config.yaml`, the config being `post_hooks: []` (no ruff)
//! with `application/zip` read as octet-stream (bytes):
//! any warning it prints about the document fails the test.

use crate::common::{
    ClientInstalls, TestServer, bundled_dir, manifest_dir, options, root, run_python, run_script, show, venv,
};
use skilld::auth::{Auth, Role, Token};
use skilld::skill::Trust;
use std::fs::{self};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

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
    let server = TestServer::builder(options(roots)).auth(tokens()).start().await;
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

const ADMIN: &str = "client-admin-secret-0123456789";
const READER: &str = "client-reader-secret-0123456789";

/// Installs, switches, diffs and removes a skill through the generated
/// client: `install_skill` (an `application/zip` body, given as a
/// `File`), `list_versions`, `set_active`, `diff_versions`, `install_log`,
/// `remove_skill`. The script is here rather than in `tests/python/` so
/// that this test is one file.
const INSTALL_SCRIPT: &str = r#"
import io
import json
import sys

import httpx

from skilld_client import AuthenticatedClient
from skilld_client.api.skills import (
    diff_versions,
    get_skill,
    install_log,
    install_skill,
    list_versions,
    remove_skill,
    set_active,
)
from skilld_client.models import ActiveBody, DirDiff, Problem, SkillDetail, Trust, VersionList, VersionStatus
from skilld_client.types import File


def expect(ok: bool, message: str) -> None:
    if not ok:
        print(f"install_client.py: FAIL: {message}", file=sys.stderr)
        sys.exit(1)


def same_as_wire(what: str, r) -> None:
    """The model, serialised again, equals the JSON on the wire: the
    document describes every field the server sent, as it sent it. Times
    are left out: Python keeps microseconds and writes `+00:00`, the
    server sends nanoseconds and `Z`."""

    def untimed(value):
        if isinstance(value, dict):
            return {k: untimed(v) for k, v in value.items() if k != "installed_at"}
        if isinstance(value, list):
            return [untimed(v) for v in value]
        return value

    parsed, wire = untimed(r.parsed.to_dict()), untimed(json.loads(r.content))
    expect(parsed == wire, f"{what}: the model does not round-trip: {parsed} != {wire}")


def problem(what: str, r, status: int, code: str) -> None:
    expect(r.status_code == status, f"{what}: status {r.status_code}, expected {status}: {r.content!r}")
    expect(isinstance(r.parsed, Problem), f"{what}: parsed as {type(r.parsed).__name__}, expected Problem")
    expect(r.parsed.code == code, f"{what}: code {r.parsed.code!r}, expected {code!r}")


def upload(client, path: str):
    with open(path, "rb") as f:
        archive = File(payload=io.BytesIO(f.read()), file_name="hello.zip", mime_type="application/zip")
    return install_skill.sync_detailed(client=client, body=archive, trust=Trust.USER)


def installed(r, version: str) -> SkillDetail:
    what = f"POST /skills (hello {version})"
    expect(r.status_code == 201, f"{what}: status {r.status_code}, expected 201: {r.content!r}")
    expect(isinstance(r.parsed, SkillDetail), f"{what}: parsed as {type(r.parsed).__name__}, expected SkillDetail")
    detail = r.parsed
    same_as_wire(what, r)
    got = (detail.name, detail.version, detail.source, detail.trust)
    expect(got == ("hello", version, "installed", Trust.USER), f"{what}: {got}")
    expect(r.headers.get("location") == f"/skills/hello@{version}", f"{what}: Location {r.headers.get('location')!r}")
    expect(r.headers.get("x-skill-status") == "ready", f"{what}: X-Skill-Status {r.headers.get('x-skill-status')!r}")
    return detail


def versions_of(client, what: str) -> VersionList:
    r = list_versions.sync_detailed("hello", client=client)
    expect(r.status_code == 200, f"{what}: status {r.status_code}, expected 200: {r.content!r}")
    expect(isinstance(r.parsed, VersionList), f"{what}: parsed as {type(r.parsed).__name__}, expected VersionList")
    same_as_wire(what, r)
    return r.parsed


def rows(listed: VersionList) -> list:
    for v in listed.versions:
        expect(v.installed_at.tzinfo is not None, f"{v.version}: installed_at {v.installed_at!r} has no zone")
    return [(v.version, v.active, v.status, v.hash_) for v in listed.versions]


def main() -> None:
    base_url, admin_token, reader_token, v1_zip, v2_zip = sys.argv[1:]
    admin = AuthenticatedClient(base_url=base_url, token=admin_token, timeout=httpx.Timeout(60.0))
    reader = AuthenticatedClient(base_url=base_url, token=reader_token, timeout=httpx.Timeout(60.0))
    with admin, reader:
        problem("POST /skills with a read token", upload(reader, v1_zip), 403, "forbidden")
        one = installed(upload(admin, v1_zip), "1.0.0")
        problem("POST /skills (1.0.0 again)", upload(admin, v1_zip), 409, "version_exists")
        two = installed(upload(admin, v2_zip), "2.0.0")
        expect(one.hash_ != two.hash_, "the two versions have one hash")

        listed = versions_of(admin, "GET /skills/hello/versions")
        expect(listed.skill == "hello" and listed.active == "2.0.0", f"versions: {listed.to_dict()}")
        want = [("1.0.0", False, VersionStatus.READY, one.hash_), ("2.0.0", True, VersionStatus.READY, two.hash_)]
        expect(rows(listed) == want, f"versions: {rows(listed)}, expected {want}")

        r = set_active.sync_detailed("hello", client=admin, body=ActiveBody(version="1.0.0"))
        expect(r.status_code == 200, f"PUT /skills/hello/active: status {r.status_code}: {r.content!r}")
        expect(isinstance(r.parsed, VersionList), f"PUT /skills/hello/active: parsed as {type(r.parsed).__name__}")
        want = [("1.0.0", True, VersionStatus.READY, one.hash_), ("2.0.0", False, VersionStatus.READY, two.hash_)]
        expect(r.parsed.active == "1.0.0" and rows(r.parsed) == want, f"after PUT active: {r.parsed.to_dict()}")
        r = get_skill.sync_detailed("hello", client=reader)
        expect(r.status_code == 200 and r.parsed.version == "1.0.0", f"GET /skills/hello after PUT active: {r.content!r}")
        problem(
            "PUT /skills/hello/active 9.9.9",
            set_active.sync_detailed("hello", client=admin, body=ActiveBody(version="9.9.9")),
            404,
            "not_found",
        )

        r = diff_versions.sync_detailed("hello", client=reader, from_="1.0.0", to="2.0.0")
        expect(r.status_code == 200, f"GET /skills/hello/diff: status {r.status_code}: {r.content!r}")
        diff = r.parsed
        expect(isinstance(diff, DirDiff), f"GET /skills/hello/diff: parsed as {type(diff).__name__}, expected DirDiff")
        same_as_wire("GET /skills/hello/diff", r)
        expect("-echo one" in diff.text and "+echo two" in diff.text, f"the diff: {diff.text!r}")
        expect(diff.binary_changed == [] and diff.truncated is False, f"the diff: {diff.to_dict()}")

        r = install_log.sync_detailed("hello", client=reader, version="2.0.0")
        expect(r.status_code == 403, f"GET /skills/hello/install-log with a read token: status {r.status_code}")
        r = install_log.sync_detailed("hello", client=admin, version="2.0.0")
        expect(r.status_code == 200, f"GET /skills/hello/install-log: status {r.status_code}: {r.content!r}")
        expect(isinstance(r.parsed, str) and "no dependencies" in r.parsed, f"the install log: {r.parsed!r}")

        problem("DELETE /skills/hello with a read token", remove_skill.sync_detailed("hello", client=reader), 403, "forbidden")
        r = remove_skill.sync_detailed("hello@2.0.0", client=admin)
        expect(r.status_code == 204, f"DELETE /skills/hello@2.0.0: status {r.status_code}: {r.content!r}")
        listed = versions_of(admin, "GET /skills/hello/versions after deleting 2.0.0")
        want = [("1.0.0", True, VersionStatus.READY, one.hash_)]
        expect(listed.active == "1.0.0" and rows(listed) == want, f"after deleting 2.0.0: {listed.to_dict()}")
        r = remove_skill.sync_detailed("hello", client=admin, force=False)
        expect(r.status_code == 204, f"DELETE /skills/hello: status {r.status_code}: {r.content!r}")
        problem("GET /skills/hello/versions when it is gone", list_versions.sync_detailed("hello", client=admin), 404, "not_found")
        problem("DELETE /skills/hello when it is gone", remove_skill.sync_detailed("hello", client=admin), 404, "not_found")
    print("install_client.py: ok")


main()
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_python_client_installs_switches_and_removes_a_skill() {
    let venv = venv();
    let tmp = crate::common::tempdir().unwrap();
    generate(&venv, tmp.path());
    let script = tmp.path().join("install_client.py");
    fs::write(&script, INSTALL_SCRIPT).unwrap();
    let fixture = ClientInstalls::start(tmp.path(), ADMIN, READER).await;
    let server = &fixture.server;
    let pythonpath = tmp.path().display().to_string();
    let (v1, v2) = (fixture.v1.display().to_string(), fixture.v2.display().to_string());
    run_python(
        &script,
        &[&server.url(""), ADMIN, READER, &v1, &v2],
        &[("PYTHONPATH", pythonpath.as_str())],
        Duration::from_secs(120),
    )
    .await;
    fixture.assert_removed();
}
