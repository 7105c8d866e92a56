//! The fourth review's first finding: `git:read` ran any program. `git
//! grep -O<cmd>` ran `<cmd>` through a shell; `set_env("XDG_CONFIG_HOME")`
//! made a planted `git/config` git's global one, whose textconv driver ran
//! on a plain `git show`, and `PAGER` did the same with a bare `-O`. Now
//! each reading subcommand takes only the options it lists, git runs with
//! no pager, no external diff or textconv, no system or global
//! configuration and every program of the repository's own configuration
//! emptied, and `set_env` sets only what its allowlist names.

use crate::common::{TestServer, call, fails_with, marks_dir, options, root, star_skill, tempdir};
use serde_json::json;
use skilld::invoke::RunSettings;
use skilld::skill::Trust;
use std::path::Path;
use std::process::Command;

fn git(workspace: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(workspace)
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {out:?}");
}

/// A repository whose own configuration and attributes name programs that
/// leave a mark in `marks` when they run, with a change in its work tree
/// (so `status` and `diff` would clean it).
fn booby_trapped(marks: &Path) -> tempfile::TempDir {
    let workspace = tempdir().unwrap();
    let dir = workspace.path();
    git(dir, &["init", "-q"]);
    std::fs::write(dir.join("notes.md"), "hello\n").unwrap();
    std::fs::write(dir.join(".gitattributes"), "*.md diff=evil filter=evil\n").unwrap();
    git(dir, &["add", "."]);
    git(dir, &["commit", "-q", "-m", "the first commit"]);
    let mark = |name: &str| format!("sh -c 'touch {}/{name}; cat'", marks.display());
    for (key, what) in [
        ("filter.evil.clean", "clean"),
        ("filter.evil.smudge", "smudge"),
        ("diff.evil.textconv", "textconv"),
        ("diff.evil.command", "command"),
        ("core.pager", "pager"),
        ("gpg.program", "gpg"),
    ] {
        git(dir, &["config", key, &mark(what)]);
    }
    std::fs::write(dir.join("notes.md"), "hello\nworld\n").unwrap();
    workspace
}

/// An `XDG_CONFIG_HOME` holding a `git/config` of the attacker's.
fn planted_config(marks: &Path) -> tempfile::TempDir {
    let xdg = marks_dir();
    let config = format!(
        "[core]\n\tpager = sh -c 'touch {m}/xdg-pager; cat'\n[diff \"evil\"]\n\ttextconv = sh -c 'touch {m}/xdg-textconv; cat'\n",
        m = marks.display()
    );
    std::fs::create_dir_all(xdg.path().join("git")).unwrap();
    std::fs::write(xdg.path().join("git/config"), config).unwrap();
    xdg
}

const READER: &str = r#"
def run_git(args):
    return git(args["args"])

def planted(args):
    set_env(args["name"], args["value"])
    return git(["show"])

register_tool("rgit", "Runs git.", {"type": "object"}, run_git)
register_tool("planted", "Sets a variable, then shows.", {"type": "object"}, planted)
"#;

async fn reader_over(workspace: &Path) -> (TestServer, tempfile::TempDir) {
    let skills = tempdir().unwrap();
    star_skill(
        skills.path(),
        "reader",
        "permissions: [git:read, env:write]\n",
        READER,
    );
    let settings = RunSettings {
        workspace: workspace.to_path_buf(),
        ..RunSettings::default()
    };
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::Bundled)]))
        .settings(settings)
        .allowed()
        .start()
        .await;
    (server, skills)
}

fn marks_left(marks: &Path) -> Vec<String> {
    let mut left: Vec<String> = std::fs::read_dir(marks)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    left
}

#[tokio::test]
async fn git_read_runs_no_program() {
    let marks = marks_dir();
    let workspace = booby_trapped(marks.path());
    let xdg = planted_config(marks.path());
    // The traps are real: git on the host runs them.
    let host = Command::new("git")
        .args(["diff"])
        .current_dir(workspace.path())
        .output()
        .unwrap();
    assert!(host.status.success(), "{host:?}");
    assert!(
        marks_left(marks.path()).contains(&"command".to_owned()),
        "{:?}",
        marks_left(marks.path())
    );
    for mark in marks_left(marks.path()) {
        std::fs::remove_file(marks.path().join(mark)).unwrap();
    }
    let (server, _skills) = reader_over(workspace.path()).await;
    refused_options(&server, marks.path(), xdg.path()).await;
    // What reads still reads, and runs none of the repository's programs.
    for args in [
        json!(["show"]),
        json!(["diff"]),
        json!(["status", "--short"]),
        json!(["log", "-p", "-1"]),
        json!(["blame", "notes.md"]),
        json!(["grep", "-n", "hello"]),
        json!(["diff", "--stat"]),
    ] {
        let out = call(&server, "rgit", json!({"args": args})).await;
        assert_eq!(out["parsed"]["success"], true, "{args}: {out}");
    }
    let diff = call(&server, "rgit", json!({"args": ["diff"]})).await;
    let text = diff["parsed"]["output"].as_str().unwrap_or_default();
    assert!(text.contains("+world"), "{diff}");
    assert!(
        marks_left(marks.path()).is_empty(),
        "programs ran: {:?}",
        marks_left(marks.path())
    );
    assert_eq!(
        std::fs::read_to_string(workspace.path().join("notes.md")).unwrap(),
        "hello\nworld\n"
    );
}

/// Every way the review found (and its kin) is refused, naming the option.
async fn refused_options(server: &TestServer, marks: &Path, xdg: &Path) {
    let cmd = format!("touch {}/grep-o", marks.display());
    for (args, option) in [
        (json!(["grep", format!("-O{cmd}"), "hello"]), format!("'-O{cmd}'")),
        (json!(["grep", "-O", "hello"]), "'-O'".to_owned()),
        (
            json!(["grep", "--open-files-in-pager", "hello"]),
            "'--open-files-in-pager'".to_owned(),
        ),
        (json!(["grep", "--open", "hello"]), "'--open'".to_owned()),
        (json!(["grep", "-iO", "hello"]), "'-iO'".to_owned()),
        (json!(["show", "--ext-diff"]), "'--ext-diff'".to_owned()),
        (json!(["log", "-p", "--textconv"]), "'--textconv'".to_owned()),
        (
            json!(["cat-file", "--filters", "HEAD:notes.md"]),
            "'--filters'".to_owned(),
        ),
        (json!(["log", "--format=%G?"]), "'--format=%G?'".to_owned()),
    ] {
        let says =
            format!("git needs the permission 'git:write', which skill 'reader' does not declare: {option}");
        fails_with(server, "rgit", json!({"args": args}), &says).await;
    }
    for name in [
        "XDG_CONFIG_HOME",
        "PAGER",
        "GIT_PAGER",
        "EDITOR",
        "GNUPGHOME",
        "GIT_CONFIG_GLOBAL",
    ] {
        let args = json!({"name": name, "value": xdg});
        fails_with(
            server,
            "planted",
            args,
            &format!("set_env: '{name}' may not be set"),
        )
        .await;
    }
}
