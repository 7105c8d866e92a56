//! A NUL byte, which PostgreSQL can hold neither in text nor in jsonb,
//! from every side a client or a tool can send one: each is refused with
//! a clear answer or recorded as U+FFFD, the same on both backends, and
//! never a 500 or a run left unrecorded.

use crate::common::{Api, TestServer, on_postgres, options, root, stamp_skill, tempdir, write_tree};
use serde_json::{Value, json};
use skilld::skill::Trust;
use std::path::Path;

/// `nul`: two read-only script tools, one printing NUL bytes and one
/// printing JSON that holds `\u0000` in a key and a value.
fn nul_skill(dir: &Path) {
    write_tree(
        dir,
        &[
            (
                "nul/SKILL.md",
                "---\nname: nul\nversion: 1.0.0\ndescription: Prints NUL bytes.\nread_only: true\n---\n\nPrints NULs.\n",
            ),
            (
                "nul/scripts/bytes.sh",
                "#!/bin/sh\n# Prints two NUL bytes.\nprintf 'a\\000b\\000'\n",
            ),
            (
                "nul/scripts/json.sh",
                "#!/bin/sh\n# Prints JSON holding NUL escapes.\nprintf '{\"k\\\\u0000\": [\"x\\\\u0000\"]}'\n",
            ),
        ],
    );
}

async fn post(server: &TestServer, path: &str, body: Value) -> (u16, Value) {
    Api::of(server).post(path, body).await
}

async fn every_side(server: &TestServer, skills: &Path) {
    // From a tool: its output and parsed JSON are kept with U+FFFD, and
    // the caller is answered with exactly what the run log holds.
    let (status, env) = server.invoke("nul_bytes", json!({})).await;
    assert_eq!(status, 200, "{env}");
    assert_eq!(env["output"], "a\u{fffd}b\u{fffd}");
    let (status, env_json) = server.invoke("nul_json", json!({})).await;
    assert_eq!(status, 200, "{env_json}");
    assert_eq!(env_json["parsed"], json!({"k\u{fffd}": ["x\u{fffd}"]}));
    for env in [&env, &env_json] {
        let run = server
            .get_json(&format!("/runs/{}", env["run_id"].as_str().unwrap()))
            .await;
        assert_eq!(run["status"], "succeeded");
        assert_eq!(&run["result"], env);
    }

    // From a client: a filter that no name can match finds nothing.
    for query in ["/runs?skill=%00", "/runs?tool=nul%00bytes"] {
        let page = server.get_json(query).await;
        assert_eq!(page["runs"], json!([]), "{query}: {page}");
    }

    // From an approver: a note with a NUL is refused, and the request
    // stays pending for a proper decision. `stamp` arrives after the test
    // grants, so its call is held.
    stamp_skill(skills);
    server.catalog.reload();
    let (status, held) = server.invoke("stamp", json!({"path": "/dev/null"})).await;
    assert_eq!(status, 202, "{held}");
    let approve = format!("/approvals/{}/approve", held["approval_id"].as_str().unwrap());
    let (status, problem) = post(server, &approve, json!({"note": "fine\u{0}"})).await;
    assert_eq!(status, 400, "{problem}");
    assert!(problem["detail"].as_str().unwrap().contains("NUL"), "{problem}");
    let (status, decided) = post(server, &approve, json!({"note": "fine"})).await;
    assert_eq!(status, 200, "{decided}");

    // From a caller of an entrypoint: a NUL deep inside the open object.
    let (status, problem) = server
        .invoke("csv_stats", json!({"rows": [{"city\u{0}": "Oslo"}]}))
        .await;
    assert_eq!(status, 422, "{problem}");
    assert_eq!(problem["errors"][0]["field"], "rows");
}

fn skills() -> tempfile::TempDir {
    let dir = tempdir().unwrap();
    nul_skill(dir.path());
    crate::common::copy_tree(
        &crate::common::bundled_dir().join("csv-stats"),
        &dir.path().join("csv-stats"),
    );
    dir
}

#[tokio::test]
async fn nul_bytes_on_sqlite() {
    let dir = skills();
    let server = TestServer::builder(options(vec![root(dir.path(), Trust::User)]))
        .allowed()
        .start()
        .await;
    every_side(&server, dir.path()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nul_bytes_on_postgres() {
    on_postgres(|url| async move {
        let dir = skills();
        let server = TestServer::builder(options(vec![root(dir.path(), Trust::User)]))
            .database(&url)
            .allowed()
            .start()
            .await;
        every_side(&server, dir.path()).await;
    })
    .await;
}
