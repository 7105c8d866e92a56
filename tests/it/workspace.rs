//! The workspace as the README's quick start and the documented set-ups
//! have it: with a protected place inside (the repository's own
//! `skills/`, `<workspace>/.agent/skills`, or a home directory holding the
//! data directory). Tools list it and run `git status` there without
//! "Permission denied"; only the protected entries' contents stay closed.

use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;

/// Runs `git` in `dir`, expecting success.
fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A repository with one tracked and one untracked file.
fn repository(dir: &Path) {
    git(dir, &["init", "-q"]);
    std::fs::write(dir.join("tracked.txt"), "tracked\n").unwrap();
    git(dir, &["add", "tracked.txt"]);
    git(dir, &["commit", "-q", "-m", "first"]);
    std::fs::write(dir.join("new.txt"), "untracked\n").unwrap();
}

/// The bundled `git` skill and a `lister` whose `list_workspace` runs
/// `ls -la`, in the skills root `dir`.
fn skills_in(dir: &Path) {
    crate::common::copy_tree(&crate::common::bundled_dir().join("git"), &dir.join("git"));
    crate::common::write_file(
        &dir.join("lister/SKILL.md"),
        "---\nname: lister\nversion: 1.0.0\ndescription: Lists the workspace.\nread_only: true\n---\n\n\
         ### list_workspace\n\nLists the workspace.\n\n#### Command\n\n```\nls -la\n```\n",
    );
}

/// The output of a call that must succeed.
fn output(envelope: &Value) -> &str {
    assert_eq!(envelope["success"], true, "{envelope}");
    envelope["output"].as_str().unwrap()
}

/// `skilld serve` with `skills` in the workspace `repo`, as the command
/// line would start it (the config marks the skills root protected):
/// `git_status` and `list_workspace` both clean.
async fn lists_and_status(repo: &Path, skills: &Path, expected: &[&str]) {
    let data = crate::common::tempdir().unwrap();
    let mut cmd = crate::common::skilld();
    cmd.args(["serve", "--bind", "127.0.0.1:0", "--no-watch", "--data-dir"])
        .arg(data.path())
        .arg("--workspace")
        .arg(repo)
        .arg("--skills")
        .arg(format!("bundled={}", skills.display()));
    let (child, addr) = crate::common::serve(&mut cmd);
    let status = crate::common::invoke_envelope(&addr, "git_status", None, json!({})).await;
    let listed = crate::common::invoke_envelope(&addr, "list_workspace", None, json!({})).await;
    crate::common::stop(child);
    let said = output(&status);
    assert!(
        said.contains("?? new.txt"),
        "git missed the untracked file: {said}"
    );
    assert!(!said.contains("warning") && !said.contains("denied"), "{said}");
    let listed = output(&listed);
    for name in expected {
        assert!(listed.contains(name), "{name} not in {listed}");
    }
    assert!(!listed.contains("denied"), "{listed}");
}

/// The repository's own `skills/` inside its git root, the README's
/// quick start: the root lost the right to be listed.
#[tokio::test]
async fn the_repositorys_own_skills_inside_its_git_root() {
    let repo = crate::common::tempdir().unwrap();
    repository(repo.path());
    let skills = repo.path().join("skills");
    skills_in(&skills);
    lists_and_status(
        repo.path(),
        &skills,
        &["tracked.txt", "new.txt", "skills", ".git"],
    )
    .await;
}

/// The documented `<workspace>/.agent/skills`.
#[tokio::test]
async fn the_agent_skills_inside_the_workspace() {
    let repo = crate::common::tempdir().unwrap();
    repository(repo.path());
    let skills = repo.path().join(".agent/skills");
    skills_in(&skills);
    lists_and_status(repo.path(), &skills, &["tracked.txt", "new.txt", ".agent"]).await;
}

/// Started from a directory that is no repository, the workspace is the
/// home directory, which holds the data directory: the server, as a user
/// that is not root, with every default. The home lists and its status
/// shows; the run log's name may show, its content may not be read.
#[tokio::test]
async fn a_home_workspace_that_holds_the_data_directory() {
    use std::os::unix::fs::chown;
    if !nix::unistd::geteuid().is_root() {
        assert!(std::env::var_os("CI").is_none(), "CI runs as root");
        eprintln!("skipped: needs root to run the server as another user");
        return;
    }
    let home = crate::common::tempdir().unwrap();
    repository(home.path());
    let elsewhere = crate::common::tempdir().unwrap();
    let skills = crate::common::tempdir().unwrap();
    skills_in(skills.path());
    crate::common::one_tool_skill(skills.path(), "peek", "", "path", "cat {{path}}");
    crate::common::one_tool_skill(skills.path(), "look", "", "path", "ls {{path}}");
    for entry in walk(home.path()) {
        chown(&entry, Some(65534), Some(65534)).unwrap();
    }
    let mut cmd = Command::new("/usr/bin/setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(env!("CARGO_BIN_EXE_skilld"))
        .args(["serve", "--bind", "127.0.0.1:0", "--no-watch", "--skills"])
        .arg(format!("bundled={}", skills.path().display()))
        .current_dir(elsewhere.path())
        .env("HOME", home.path())
        .env_remove("XDG_DATA_HOME")
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("SKILLD_DATA_DIR")
        .env_remove("SKILLD_WORKSPACE")
        .env_remove("SKILLD_TOKENS")
        .env_remove("SKILLD_DATABASE_URL")
        .env("SKILLD_LOG", "warn");
    let (child, addr) = crate::common::serve(&mut cmd);
    let data = home.path().join(".local/share/skilld");
    let call = |tool: &'static str, args: Value| crate::common::invoke_envelope(&addr, tool, None, args);
    let status = call("git_status", json!({})).await;
    let listed = call("list_workspace", json!({})).await;
    let names = call("look", json!({"path": data.display().to_string()})).await;
    let db = call(
        "peek",
        json!({"path": data.join("skilld.db").display().to_string()}),
    )
    .await;
    crate::common::stop(child);
    let said = output(&status);
    assert!(said.contains("?? new.txt") && !said.contains("warning"), "{said}");
    let listed = output(&listed);
    assert!(
        listed.contains(".local") && listed.contains("new.txt"),
        "{listed}"
    );
    assert!(!listed.contains("denied"), "{listed}");
    assert!(output(&names).contains("skilld.db"), "{names}");
    assert!(
        db["output"]
            .as_str()
            .unwrap_or_default()
            .contains("Permission denied"),
        "the run log was read: {db}"
    );
}

/// Every path under `dir`, `dir` included.
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if entry.file_type().unwrap().is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}
