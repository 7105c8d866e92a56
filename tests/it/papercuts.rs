//! Small things a user trips over (issue 25, point 8), each as the user
//! meets it: `check` and `serve` agree on a shadowed skill; a skill's
//! `metadata` is in its detail; a skill of another root has no versions
//! (`not_installed`, not `forbidden`); a backend the sandbox's user cannot
//! read says why; `skilld mcp`'s held call gives absolute links and says
//! whether a server is there to decide; an unknown `format` is explained
//! in our words; `skilld mcp --help` lists only its own flags; `skilld
//! install` takes its tokens from the environment.

use crate::common::{
    Api, McpStdio, TestServer, assert_exit, greet_skill, options, plain, redacted, root, serve, skilld,
    stamp_skill, stop, tempdir, write_file,
};
use insta::assert_json_snapshot;
use serde_json::{Value, json};
use skilld::skill::Trust;
use std::path::Path;

/// `name` in `dir`: a read-only skill with one tool, `<name>_say`.
fn small_skill(dir: &Path, name: &str, front: &str) {
    let tool = name.replace('-', "_");
    write_file(
        &dir.join(name).join("SKILL.md"),
        &format!(
            "---\nname: {name}\nversion: 1.0.0\ndescription: Says a word.\nread_only: true\n{front}---\n\n\
             ### {tool}_say\n\nSays a word.\n\n#### Parameters\n\nNone.\n\n#### Command\n\n```\necho {name}\n```\n"
        ),
    );
}

#[tokio::test]
async fn check_and_serve_agree_on_what_two_roots_serve() {
    let (first, second, data) = (tempdir().unwrap(), tempdir().unwrap(), tempdir().unwrap());
    small_skill(first.path(), "shared", "");
    small_skill(first.path(), "alpha", "");
    small_skill(second.path(), "shared", "");
    small_skill(second.path(), "beta", "");

    let out = skilld()
        .args(["check", "--format", "json"])
        .arg(first.path())
        .arg(second.path())
        .output()
        .unwrap();
    assert_exit(&out, 0, "");
    let checked: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(checked["skills"], 3, "{checked}");
    let shadowed: Vec<&Value> = checked["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["code"] == "shadowed")
        .collect();
    assert_eq!(shadowed.len(), 1, "{checked}");
    let shadowed_path = second.path().join("shared/SKILL.md");
    assert_eq!(shadowed[0]["path"], shadowed_path.display().to_string());

    let (child, addr) = serve(
        skilld()
            .args(["serve", "--bind", "127.0.0.1:0", "--no-watch", "--skills"])
            .arg(first.path())
            .arg("--skills")
            .arg(second.path())
            .arg("--data-dir")
            .arg(data.path()),
    );
    let ready: Value = reqwest::get(format!("http://{addr}/readyz"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let served: Value = reqwest::get(format!("http://{addr}/diagnostics"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    stop(child);
    assert_eq!(ready["skills"], checked["skills"], "{ready}");
    let served_shadowed: Vec<&Value> = served["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["code"] == "shadowed")
        .collect();
    assert_eq!(served_shadowed.len(), 1, "{served}");
    assert_eq!(served_shadowed[0]["skill"], "shared");
}

#[tokio::test]
async fn a_skills_detail_carries_its_metadata() {
    let dir = tempdir().unwrap();
    small_skill(
        dir.path(),
        "tagged",
        "metadata:\n  owner: platform-team\n  revision: 7\n  internal: true\n",
    );
    small_skill(dir.path(), "plain", "");
    let server = TestServer::builder(options(vec![root(dir.path(), Trust::User)]))
        .start()
        .await;
    let detail = server.get_json("/skills/tagged").await;
    assert_eq!(
        detail["metadata"],
        json!({"owner": "platform-team", "revision": "7", "internal": "true"}),
        "{detail}"
    );
    assert_eq!(server.get_json("/skills/plain").await["metadata"], json!({}));
}

#[tokio::test]
async fn a_skill_of_another_root_has_no_versions_rather_than_a_forbidden_route() {
    let (user, installed) = (tempdir().unwrap(), tempdir().unwrap());
    greet_skill(user.path());
    let server = TestServer::builder(options(vec![
        root(user.path(), Trust::User),
        crate::common::installed_root(installed.path()),
    ]))
    .start()
    .await;
    // Each problem whole: its code and a detail that says what to do.
    let person = Api::of(&server);
    let (status, problem) = person.get("/skills/greet/versions").await;
    assert_eq!(status, 404, "{problem}");
    redacted().bind(|| assert_json_snapshot!("versions_of_a_user_skill_problem", plain(&problem)));
    let (status, problem) = person.delete("/skills/greet").await;
    assert_eq!(status, 403, "{problem}");
    redacted().bind(|| assert_json_snapshot!("removing_a_user_skill_problem", plain(&problem)));
    let (status, problem) = person.get("/skills/nothing/versions").await;
    assert_eq!(status, 404, "{problem}");
    redacted().bind(|| assert_json_snapshot!("versions_of_no_skill_problem", plain(&problem)));
}

/// A process backend whose skill lies where the sandbox's user cannot go
/// (a private directory in root's home, as a checkout there is): the
/// error says how to fix that, not just "Permission denied".
#[tokio::test]
async fn a_backend_the_sandbox_user_cannot_read_says_why() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: tools run as another user only when the server is root");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    // Not under `/tmp`, which confined runs see as a file system of their
    // own, where the skill's directory is reachable.
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
    let private = tempfile::tempdir_in(home).unwrap();
    std::fs::set_permissions(private.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    write_file(
        &private.path().join("keeper/SKILL.yaml"),
        "name: keeper\nversion: 1.0.0\ndescription: Keeps notes.\ntypes: [tool]\n\
         permissions: [shell:exec]\nimplementation:\n  backend: process\n  entrypoint: main.py\n",
    );
    std::fs::copy(
        crate::common::corpus_dir().join("valid/notes/main.py"),
        private.path().join("keeper/main.py"),
    )
    .unwrap();
    let server = TestServer::builder(options(vec![root(private.path(), Trust::Bundled)]))
        .allowed()
        .start()
        .await;
    let catalog = server.catalog.current();
    let said: Vec<String> = catalog
        .diagnostics
        .iter()
        .map(|d| d.message.clone())
        .chain(
            catalog
                .skills
                .iter()
                .flat_map(|s| s.warnings.iter().map(|d| d.message.clone())),
        )
        .collect();
    let (status, answer) = server.invoke("note_list", json!({})).await;
    let text = format!("{said:?} {status} {answer}");
    assert!(
        text.contains("cannot reach the skill directory") && text.contains("o+x"),
        "{text}"
    );
    assert!(!text.contains("Permission denied"), "{text}");
}

#[tokio::test]
async fn skilld_mcp_says_where_a_held_call_is_decided_and_whether_anyone_can() {
    let (dir, data) = (tempdir().unwrap(), tempdir().unwrap());
    stamp_skill(dir.path());
    let marks = crate::common::marks_dir();
    let mark = marks.path().join("stamp").display().to_string();

    // No server uses the run log: nobody can decide yet, and it says so.
    let mut mcp = McpStdio::start(&[], data.path(), dir.path());
    let held = mcp.request(
        "tools/call",
        json!({"name": "stamp", "arguments": {"path": mark}}),
    );
    let text = held["content"][0]["text"].as_str().unwrap().to_owned();
    assert_eq!(held["isError"], false, "waiting is not a failure: {held}");
    assert!(text.contains("No skilld serve uses this run log now"), "{text}");
    let approval = held["structuredContent"]["approval_id"].as_str().unwrap();
    assert_eq!(
        held["structuredContent"]["approval_url"],
        format!("http://127.0.0.1:8080/approvals/{approval}"),
        "absolute, where `skilld serve` would listen with this configuration"
    );
    drop(mcp);

    // With a server on the same data directory: its own address.
    let (child, addr) = serve(
        skilld()
            .args(["serve", "--bind", "127.0.0.1:0", "--no-watch", "--skills"])
            .arg(format!("bundled={}", dir.path().display()))
            .arg("--data-dir")
            .arg(data.path())
            .env_remove("SKILLD_DATABASE_URL"),
    );
    let mut mcp = McpStdio::start(&[], data.path(), dir.path());
    let held = mcp.request(
        "tools/call",
        json!({"name": "stamp", "arguments": {"path": mark}}),
    );
    drop(mcp);
    stop(child);
    let text = held["content"][0]["text"].as_str().unwrap().to_owned();
    let approval = held["structuredContent"]["approval_id"].as_str().unwrap();
    assert!(
        text.contains(&format!("http://{addr}/ui"))
            && text.contains(&format!("http://{addr}/approvals/{approval}")),
        "{text}"
    );
    assert!(!text.contains("No skilld serve"), "{text}");
    assert_eq!(
        held["structuredContent"]["run_url"],
        format!(
            "http://{addr}/runs/{}",
            held["structuredContent"]["run_id"].as_str().unwrap()
        )
    );
}

#[tokio::test]
async fn an_unknown_format_is_explained_in_our_words() {
    let dir = tempdir().unwrap();
    greet_skill(dir.path());
    let server = TestServer::builder(options(vec![root(dir.path(), Trust::User)]))
        .start()
        .await;
    for (query, expected) in [
        (
            "/tools?format=xml",
            "query parameter 'format' must be 'native', 'openai', 'openai-responses', 'anthropic', 'gemini', 'mcp', 'prompt', not 'xml'",
        ),
        (
            "/runs?limit=ten",
            "query parameter 'limit' must be a whole number",
        ),
    ] {
        let res = Api::of(&server)
            .req(reqwest::Method::GET, query)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 400, "{query}");
        let problem: Value = res.json().await.unwrap();
        assert_eq!(problem["code"], "bad_request");
        assert_eq!(problem["detail"], expected, "{problem}");
    }
}

#[test]
fn skilld_mcp_help_lists_only_its_own_flags() {
    let help = |command: &str| {
        let out = skilld().args([command, "--help"]).output().unwrap();
        assert_eq!(out.status.code(), Some(0));
        String::from_utf8(out.stdout).unwrap()
    };
    let mcp = help("mcp");
    for flag in [
        "--skills",
        "--workspace",
        "--data-dir",
        "--database",
        "--config",
        "--mode",
    ] {
        assert!(mcp.contains(flag), "mcp lacks {flag}: {mcp}");
    }
    for flag in ["--bind", "--insecure", "--allowed-origin"] {
        assert!(!mcp.contains(flag), "mcp lists the serve-only {flag}: {mcp}");
    }
    let serve = help("serve");
    for flag in [
        "--bind",
        "--insecure",
        "--allowed-origin",
        "--skills",
        "--public-url",
    ] {
        assert!(serve.contains(flag), "serve lacks {flag}: {serve}");
    }
    let install = help("install");
    for variable in ["SKILLD_INSTALL_TOKEN", "SKILLD_INSTALL_TO_TOKEN"] {
        assert!(
            install.contains(variable),
            "install --help names {variable}: {install}"
        );
    }
}

#[tokio::test]
async fn skilld_install_takes_its_tokens_from_the_environment() {
    use skilld::auth::{Auth, Role, Token};
    let (user, installed) = (tempdir().unwrap(), tempdir().unwrap());
    greet_skill(user.path());
    let reader = "papercut-reader-secret-0123456789";
    let admin = "papercut-admin-secret-0123456789";
    let auth = |name: &str, role, secret| {
        Auth::new(vec![Token::with_secret(name, role, secret, "test").unwrap()]).unwrap()
    };
    let source = TestServer::builder(options(vec![root(user.path(), Trust::User)]))
        .auth(auth("reader", Role::Read, reader))
        .start()
        .await;
    let target = TestServer::builder(options(vec![crate::common::installed_root(installed.path())]))
        .auth(auth("ops", Role::Admin, admin))
        .start()
        .await;
    let install = |env: Vec<(&'static str, &'static str)>| {
        let mut cmd = skilld();
        cmd.args(["install", &source.url("/skills/greet"), "--to", &target.url("")])
            .env_remove("SKILLD_INSTALL_TOKEN")
            .env_remove("SKILLD_INSTALL_TO_TOKEN");
        for (k, v) in env {
            cmd.env(k, v);
        }
        tokio::task::spawn_blocking(move || cmd.output().unwrap())
    };
    let out = install(vec![("SKILLD_INSTALL_TO_TOKEN", admin)]).await.unwrap();
    assert_eq!(out.status.code(), Some(1), "the source wants its token");
    let out = install(vec![("SKILLD_INSTALL_TOKEN", reader)]).await.unwrap();
    assert_eq!(out.status.code(), Some(1), "the target wants its token");
    let out = install(vec![
        ("SKILLD_INSTALL_TOKEN", reader),
        ("SKILLD_INSTALL_TO_TOKEN", admin),
    ])
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_exit(&out, 0, &format!("{stdout} "));
    assert!(stdout.starts_with("greet@1.0.0 ready "), "{stdout}");
    let res = reqwest::Client::new()
        .get(target.url("/skills/greet"))
        .bearer_auth(admin)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
}
