//! Starlark skills written for a test, a server over them, and their calls.

use super::{TestServer, options, root, tempdir};
use serde_json::Value;
use skilld::invoke::RunSettings;
use skilld::skill::Trust;
use std::path::Path;

/// Writes skill `name`: a manifest with `extra` lines, and `script`.
pub fn star_skill(root: &Path, name: &str, extra: &str, script: &str) {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("SKILL.yaml"),
        format!(
            "name: {name}\nversion: 1.0.0\ndescription: A Starlark skill for tests.\ntypes: [tool]\n\
             implementation:\n  backend: starlark\n  entrypoint: skill.star\n{extra}"
        ),
    )
    .unwrap();
    std::fs::write(dir.join("skill.star"), script).unwrap();
}

/// A server over the skills `write` puts in a fresh root, every call
/// allowed ahead of time.
pub async fn server_over(write: impl FnOnce(&Path)) -> (TestServer, tempfile::TempDir) {
    let skills = tempdir().unwrap();
    write(skills.path());
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::Bundled)]))
        .settings(RunSettings::default())
        .allowed()
        .start()
        .await;
    (server, skills)
}

pub async fn call(server: &TestServer, tool: &str, args: Value) -> Value {
    let (status, body) = server.invoke(tool, args).await;
    assert_eq!(status, 200, "{body}");
    body
}

/// A failed call's error, checked to contain `says`.
pub async fn fails_with(server: &TestServer, tool: &str, args: Value, says: &str) -> Value {
    let envelope = call(server, tool, args).await;
    assert_eq!(envelope["success"], false, "{envelope}");
    let error = envelope["error"].as_str().unwrap_or_default();
    assert!(error.contains(says), "{tool}: {says:?} not in {envelope}");
    envelope
}
