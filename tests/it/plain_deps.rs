//! A skill in a plain skills directory (not uploaded) with a
//! `package.json` or a `requirements.txt`: the server prepares its
//! dependencies as it installs an upload's (checked first, in the sandbox,
//! as the sandbox's user, no package's code run), once per content, under
//! `<data dir>/deps`; until then the skill loads with a
//! `dependencies_not_ready` finding and its calls answer 409 with that
//! code, and afterwards they run with them. The packages come from the
//! registries (npm, PyPI), as the upload tests' do.

use crate::common::{TestServer, marks_dir, options, root, tempdir, write_file};
use serde_json::{Value, json};
use skilld::skill::Trust;
use std::path::Path;
use std::time::{Duration, Instant};

/// A read-only scripts skill `name` with `files` (path, text).
fn skill(root: &Path, name: &str, files: &[(&str, &str)]) {
    write_file(
        &root.join(name).join("SKILL.md"),
        &format!("---\nname: {name}\ndescription: Uses a package.\nread_only: true\n---\n\n# {name}\n"),
    );
    for (path, text) in files {
        write_file(&root.join(name).join(path), text);
    }
}

/// The `dependencies_not_ready` findings of skill `name`.
async fn waiting(server: &TestServer, name: &str) -> Vec<Value> {
    let all = server.get_json("/diagnostics").await;
    all["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["code"] == "dependencies_not_ready" && d["skill"] == name)
        .cloned()
        .collect()
}

/// Waits until skill `name` waits for nothing, or fails the test.
async fn until_ready(server: &TestServer, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let found = waiting(server, name).await;
        if found.is_empty() {
            return;
        }
        let failed = found
            .iter()
            .any(|d| d["message"].as_str().unwrap().contains("could not be prepared"));
        assert!(!failed && Instant::now() < deadline, "not prepared: {found:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The preparations under the server's `deps/`.
fn prepared(server: &TestServer) -> Vec<std::path::PathBuf> {
    let deps = server.data_dir().join("deps");
    std::fs::read_dir(&deps)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect()
}

/// The one preparation under the server's `deps/`.
fn the_preparation(server: &TestServer) -> std::path::PathBuf {
    let found = prepared(server);
    assert_eq!(found.len(), 1, "{found:?}");
    found[0].clone()
}

#[tokio::test]
async fn a_plain_skill_with_a_package_json_runs_once_its_dependencies_are_prepared() {
    let skills = tempdir().unwrap();
    let marks = marks_dir();
    let marker = marks.path().join("postinstall-ran");
    let package = format!(
        r#"{{"name": "numbers", "version": "1.0.0", "private": true,
            "scripts": {{"postinstall": "touch {}"}},
            "dependencies": {{"is-number": "7.0.0"}}}}"#,
        marker.display()
    );
    skill(
        skills.path(),
        "numbers",
        &[
            (
                "scripts/check.js",
                "// Says whether 5 is a number, by a package.\nconst isNumber = require('is-number');\n\
                 console.log(isNumber(5), require.resolve('is-number').includes('/deps/'));\n",
            ),
            ("package.json", &package),
        ],
    );
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::Bundled)]))
        .start()
        .await;

    // The first load found them missing: said so, and calls wait.
    let found = waiting(&server, "numbers").await;
    let message = found.first().map(|d| d["message"].as_str().unwrap().to_owned());
    if let Some(message) = &message {
        assert!(message.contains("not prepared yet"), "{message}");
        assert_eq!(found[0]["severity"], "warning", "{found:?}");
        let (status, problem) = server.invoke("numbers_check", json!({})).await;
        // Unless the preparation was quicker than this call.
        if status != 200 {
            assert_eq!(
                (status, problem["code"].as_str()),
                (409, Some("dependencies_not_ready")),
                "{problem}"
            );
            assert!(
                problem["detail"].as_str().unwrap().contains("nothing ran"),
                "{problem}"
            );
        }
    }
    until_ready(&server, "numbers").await;
    let (status, envelope) = server.invoke("numbers_check", json!({})).await;
    assert_eq!(status, 200, "{envelope}");
    assert_eq!(envelope["output"], "true true\n", "{envelope}");

    let place = the_preparation(&server);
    assert!(place.join("env/node_modules/is-number/package.json").is_file());
    assert!(place.join("ready").is_file());
    let log = std::fs::read_to_string(place.join("install.log")).unwrap();
    assert!(log.contains("--ignore-scripts"), "{log}");
    assert!(!marker.exists(), "a lifecycle script ran");
    assert!(
        !skills.path().join("numbers/node_modules").exists(),
        "nothing is written into the skill"
    );
}

#[tokio::test]
async fn a_plain_skill_with_a_requirements_txt_runs_with_its_virtualenv() {
    let skills = tempdir().unwrap();
    skill(
        skills.path(),
        "sixer",
        &[
            (
                "scripts/idna_version.py",
                "\"\"\"Prints idna's version and whether it is the prepared one.\"\"\"\nimport idna\n\
                 print(idna.__version__, '/deps/' in idna.__file__)\n",
            ),
            ("requirements.txt", "idna==3.7\n"),
        ],
    );
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::Bundled)]))
        .start()
        .await;
    until_ready(&server, "sixer").await;
    let (status, envelope) = server.invoke("sixer_idna_version", json!({})).await;
    assert_eq!(status, 200, "{envelope}");
    assert_eq!(envelope["output"], "3.7 True\n", "{envelope}");
    let place = the_preparation(&server);
    assert!(place.join("env/venv/bin/python").exists());

    // The same files elsewhere share the preparation: nothing installs again.
    skill(
        skills.path(),
        "sixer-two",
        &[
            (
                "scripts/idna_version.py",
                "import idna\nprint(idna.__version__)\n",
            ),
            ("requirements.txt", "idna==3.7\n"),
        ],
    );
    server.reload().await;
    assert_eq!(waiting(&server, "sixer-two").await, Vec::<Value>::new());
    assert_eq!(the_preparation(&server), place);
    let (_, two) = server.invoke("sixer_two_idna_version", json!({})).await;
    assert_eq!(two["output"], "3.7\n", "{two}");

    // Editing the file is a change of what the skill runs: a new hash
    // (approvals of the old one do not carry over) and a new preparation.
    let before = server.get_json("/skills/sixer-two").await["hash"].clone();
    std::fs::write(
        skills.path().join("sixer-two/requirements.txt"),
        "# the same package, said otherwise\nidna==3.7\n",
    )
    .unwrap();
    server.reload().await;
    assert_ne!(server.get_json("/skills/sixer-two").await["hash"], before);
    until_ready(&server, "sixer-two").await;
    let (_, two) = server.invoke("sixer_two_idna_version", json!({})).await;
    assert_eq!(two["output"], "3.7\n", "{two}");
}

#[tokio::test]
async fn a_dependency_an_upload_could_not_have_is_refused_and_nothing_installs() {
    let skills = tempdir().unwrap();
    let marks = marks_dir();
    let marker = marks.path().join("built");
    // `./hostile` would make pip build that folder, running its setup.py.
    let setup = format!("open({:?}, 'w').write('built')\n", marker.display().to_string());
    skill(
        skills.path(),
        "builder",
        &[
            ("scripts/go.py", "print('ran')\n"),
            ("requirements.txt", "idna==3.7\n./hostile\n"),
            ("hostile/setup.py", &setup),
        ],
    );
    skill(
        skills.path(),
        "fetcher",
        &[
            ("scripts/go.js", "console.log('ran')\n"),
            (
                "package.json",
                r#"{"dependencies": {"evil": "https://example.com/evil.tgz"}}"#,
            ),
        ],
    );
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::Bundled)]))
        .start()
        .await;
    for (name, line) in [
        ("builder", "requirements.txt line 2"),
        ("fetcher", "package.json line 1"),
    ] {
        let found = waiting(&server, name).await;
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0]["severity"], "error", "{found:?}");
        let message = found[0]["message"].as_str().unwrap();
        assert!(
            message.contains(line) && message.contains("never installed"),
            "{message}"
        );
        let (status, _) = server.invoke(&format!("{name}_go"), json!({})).await;
        assert_eq!(status, 404, "an excluded skill serves no tool");
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!server.data_dir().join("deps").exists(), "an installer ran");
    assert!(!marker.exists(), "the build backend ran");

    // `skilld check` says the same, as an error.
    let out = crate::common::skilld()
        .arg("check")
        .arg(skills.path())
        .env("SKILLD_DATA_DIR", server.data_dir())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert_eq!(
        stdout.matches("error[dependencies_not_ready]").count(),
        2,
        "{stdout}"
    );
}

#[tokio::test]
async fn a_preparation_that_fails_says_why_and_is_not_retried_at_each_load() {
    let skills = tempdir().unwrap();
    skill(
        skills.path(),
        "missing",
        &[
            ("scripts/go.py", "print('ran')\n"),
            ("requirements.txt", "skilld-no-such-package-0f3a9==0.0.1\n"),
        ],
    );
    // Before any server: `skilld check` says they are not prepared.
    let data = tempdir().unwrap();
    let out = crate::common::skilld()
        .arg("check")
        .arg(skills.path())
        .env("SKILLD_DATA_DIR", data.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("warning[dependencies_not_ready]") && stdout.contains("not prepared yet"),
        "{stdout}"
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}");

    let server = TestServer::builder(options(vec![root(skills.path(), Trust::Bundled)]))
        .start()
        .await;
    let deadline = Instant::now() + Duration::from_secs(300);
    let message = loop {
        let found = waiting(&server, "missing").await;
        let message = found[0]["message"].as_str().unwrap().to_owned();
        if message.contains("could not be prepared") {
            break message;
        }
        assert!(Instant::now() < deadline, "{message}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert!(message.contains("install.log"), "{message}");
    let (status, problem) = server.invoke("missing_go", json!({})).await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (409, Some("dependencies_not_ready")),
        "{problem}"
    );
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("could not be prepared"),
        "{problem}"
    );
    let place = the_preparation(&server);
    let log = std::fs::read_to_string(place.join("install.log")).unwrap();
    assert!(log.contains("skilld-no-such-package-0f3a9"), "{log}");
    assert!(!place.join("env").exists(), "a failed environment is removed");

    // Another load does not start it again.
    let failed_at = std::fs::metadata(place.join("failed"))
        .unwrap()
        .modified()
        .unwrap();
    server.reload().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let again = std::fs::metadata(place.join("failed"))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(failed_at, again, "tried again");
}
