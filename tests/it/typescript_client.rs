//! TypeScript types generated from the committed OpenAPI document by
//! openapi-typescript, used through openapi-fetch by a script that
//! `tsc --strict` type-checks and node then runs against a live server
//! (`tests/typescript/invoke.ts`). The packages are pinned in
//! `tests/typescript/package-lock.json`; this test runs `npm ci` when they
//! are missing. Without node it is skipped loudly, and fails in CI.
//!
//! A second script (`INSTALL_TS`, below) installs, switches, diffs and
//! removes a skill. Its types come from openapi-typescript's Node API with
//! `format: binary` as `Blob` (`GENERATE`), since the CLI's `string`
//! cannot carry a zip archive; it is built in a temporary directory that
//! borrows `tests/typescript/node_modules`.

use crate::common::{ClientInstalls, TestServer, bundled_dir, manifest_dir, options, root, show};
use skilld::auth::{Auth, Role, Token};
use skilld::skill::Trust;
use std::fs::{self, File};
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
    let server = TestServer::builder(options(vec![root(bundled_dir(), Trust::Bundled)]))
        .auth(auth)
        .start()
        .await;
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

const ADMIN: &str = "ts-admin-secret-0123456789";
const READER: &str = "ts-reader-secret-0123456789";

/// Writes `skilld.d.ts` with openapi-typescript's Node API, where the CLI
/// cannot: `format: binary` becomes `Blob` (the CLI's `string` cannot hold
/// a zip archive's bytes), as openapi-typescript's documentation advises
/// for file uploads. Everything else is as the CLI makes it.
const GENERATE: &str = r#"
import fs from "node:fs";
import { pathToFileURL } from "node:url";
import ts from "typescript";
import openapiTS, { astToString } from "openapi-typescript";

const [spec, out] = process.argv.slice(2);
const BLOB = ts.factory.createTypeReferenceNode(ts.factory.createIdentifier("Blob"));
const ast = await openapiTS(pathToFileURL(spec), {
  transform(schema) {
    if (schema.format === "binary") return BLOB;
  },
});
fs.writeFileSync(out, astToString(ast));
"#;

/// Installs, switches, diffs and removes a skill through openapi-fetch,
/// type-checked against those types. Here rather than in
/// `tests/typescript/` so that this test is one file.
const INSTALL_TS: &str = r#"
import { readFile } from "node:fs/promises";
import createClient from "openapi-fetch";
import type { components, paths } from "./skilld.js";

type VersionList = components["schemas"]["VersionList"];
type Client = ReturnType<typeof clientFor>;

function clientFor(baseUrl: string, token: string) {
  return createClient<paths, "application/json" | "application/problem+json">({
    baseUrl,
    headers: { Authorization: `Bearer ${token}` },
  });
}

function expect(ok: boolean, what: string, detail?: unknown): asserts ok {
  if (!ok) throw new Error(`${what}: ${JSON.stringify(detail)}`);
}

const [base, adminToken, readerToken, v1, v2] = process.argv.slice(2);
if (!base || !adminToken || !readerToken || !v1 || !v2) {
  throw new Error("usage: install.js BASE_URL ADMIN_TOKEN READER_TOKEN V1_ZIP V2_ZIP");
}
const admin = clientFor(base, adminToken);
const reader = clientFor(base, readerToken);

async function upload(client: Client, path: string) {
  return client.POST("/skills", {
    params: { query: { trust: "user" } },
    body: new Blob([new Uint8Array(await readFile(path))]),
    // The archive goes as it is: the default serializer writes JSON.
    bodySerializer: (body) => body,
    headers: { "Content-Type": "application/zip" },
  });
}

function problem(what: string, got: { error?: { code: string }; response: Response }, status: number, code: string) {
  expect(got.response.status === status && got.error?.code === code, what, [got.response.status, got.error]);
}

async function installed(path: string, version: string) {
  const what = `POST /skills (hello ${version})`;
  const r = await upload(admin, path);
  expect(r.response.status === 201 && r.data !== undefined, what, [r.response.status, r.error]);
  // 200 is the event stream of an `Accept: text/event-stream` upload.
  expect("name" in r.data, `${what}: a SkillDetail`, r.data);
  const detail = r.data;
  const got = [detail.name, detail.version, detail.source, detail.trust];
  expect(JSON.stringify(got) === JSON.stringify(["hello", version, "installed", "user"]), what, got);
  const headers = [r.response.headers.get("location"), r.response.headers.get("x-skill-status")];
  expect(headers[0] === `/skills/hello@${version}` && headers[1] === "ready", `${what}: headers`, headers);
  return detail;
}

function rows(listed: VersionList) {
  return JSON.stringify(listed.versions.map((v) => [v.version, v.active, v.status, v.hash]));
}

async function versions(what: string): Promise<VersionList> {
  const r = await admin.GET("/skills/{skill}/versions", { params: { path: { skill: "hello" } } });
  expect(r.data !== undefined, what, [r.response.status, r.error]);
  return r.data;
}

problem("POST /skills with a read token", await upload(reader, v1), 403, "forbidden");
const one = await installed(v1, "1.0.0");
problem("POST /skills (1.0.0 again)", await upload(admin, v1), 409, "version_exists");
const two = await installed(v2, "2.0.0");
expect(one.hash !== two.hash, "the two versions have one hash", one.hash);

let listed = await versions("GET /skills/hello/versions");
let want = JSON.stringify([["1.0.0", false, "ready", one.hash], ["2.0.0", true, "ready", two.hash]]);
expect(listed.active === "2.0.0" && rows(listed) === want, "versions", listed);

const switched = await admin.PUT("/skills/{skill}/active", {
  params: { path: { skill: "hello" } },
  body: { version: "1.0.0" },
});
expect(switched.data !== undefined, "PUT /skills/hello/active", [switched.response.status, switched.error]);
want = JSON.stringify([["1.0.0", true, "ready", one.hash], ["2.0.0", false, "ready", two.hash]]);
expect(switched.data.active === "1.0.0" && rows(switched.data) === want, "after PUT active", switched.data);
problem(
  "PUT /skills/hello/active 9.9.9",
  await admin.PUT("/skills/{skill}/active", { params: { path: { skill: "hello" } }, body: { version: "9.9.9" } }),
  404,
  "not_found",
);

const diff = await reader.GET("/skills/{skill}/diff", {
  params: { path: { skill: "hello" }, query: { from: "1.0.0", to: "2.0.0" } },
});
expect(diff.data !== undefined, "GET /skills/hello/diff", [diff.response.status, diff.error]);
const { text, binary_changed, truncated } = diff.data;
expect(text.includes("-echo one") && text.includes("+echo two"), "the diff", text);
expect(binary_changed.length === 0 && !truncated, "the diff", diff.data);

const logOfReader = await reader.GET("/skills/{skill}/install-log", {
  params: { path: { skill: "hello" }, query: { version: "2.0.0" } },
  parseAs: "text",
});
expect(logOfReader.response.status === 403, "the install log is admin-only", logOfReader.response.status);
const log = await admin.GET("/skills/{skill}/install-log", {
  params: { path: { skill: "hello" }, query: { version: "2.0.0" } },
  parseAs: "text",
});
expect(log.data !== undefined && log.data.includes("no dependencies"), "the install log", [log.response.status, log.data]);

const path = (skill: string) => ({ params: { path: { skill } } });
problem("DELETE /skills/hello with a read token", await reader.DELETE("/skills/{skill}", path("hello")), 403, "forbidden");
const removed = await admin.DELETE("/skills/{skill}", path("hello@2.0.0"));
expect(removed.response.status === 204, "DELETE /skills/hello@2.0.0", [removed.response.status, removed.error]);
listed = await versions("GET /skills/hello/versions after deleting 2.0.0");
want = JSON.stringify([["1.0.0", true, "ready", one.hash]]);
expect(listed.active === "1.0.0" && rows(listed) === want, "after deleting 2.0.0", listed);
const gone = await admin.DELETE("/skills/{skill}", { params: { path: { skill: "hello" }, query: { force: false } } });
expect(gone.response.status === 204, "DELETE /skills/hello", [gone.response.status, gone.error]);
problem("GET /skills/hello/versions when it is gone", await admin.GET("/skills/{skill}/versions", path("hello")), 404, "not_found");
problem("DELETE /skills/hello when it is gone", await admin.DELETE("/skills/{skill}", path("hello")), 404, "not_found");

console.log("typescript install client: ok");
"#;

#[tokio::test]
async fn typed_typescript_client_installs_switches_and_removes_a_skill() {
    let Some(dir) = harness() else { return };
    // Its own directory, borrowing the installed packages, so that it
    // neither races the other test over `skilld.d.ts` and `dist/` nor
    // leaves files in the tree.
    let tmp = crate::common::tempdir().unwrap();
    let work = tmp.path();
    std::os::unix::fs::symlink(dir.join("node_modules"), work.join("node_modules")).unwrap();
    let tsconfig = serde_json::json!({
        "extends": dir.join("tsconfig.json"),
        "compilerOptions": { "outDir": "dist" },
        "files": ["install.ts"],
    });
    for (name, text) in [
        (
            "package.json",
            r#"{ "private": true, "type": "module" }"#.to_owned(),
        ),
        ("tsconfig.json", tsconfig.to_string()),
        ("generate.mjs", GENERATE.to_owned()),
        ("install.ts", INSTALL_TS.to_owned()),
    ] {
        fs::write(work.join(name), text).unwrap();
    }
    let spec = manifest_dir().join("openapi/openapi.json");
    run(
        "openapi-typescript (Node API, binary as Blob)",
        Command::new("node")
            .current_dir(work)
            .arg("generate.mjs")
            .arg(&spec)
            .arg("skilld.d.ts"),
    );
    run(
        "tsc --strict",
        Command::new(bin(&dir, "tsc"))
            .current_dir(work)
            .args(["-p", "tsconfig.json"]),
    );
    let fixture = ClientInstalls::start(work, ADMIN, READER).await;
    let server = &fixture.server;
    let output = tokio::process::Command::new("node")
        .current_dir(work)
        .arg("dist/install.js")
        .arg(server.url("").trim_end_matches('/'))
        .args([ADMIN, READER])
        .args([&fixture.v1, &fixture.v2])
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "node dist/install.js:\n{}",
        show(&output)
    );
    print!("{}", String::from_utf8_lossy(&output.stdout));
    fixture.assert_removed();
}
