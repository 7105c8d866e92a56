//! Seed 002's skill CLI table, run line by line with skilld's names
//! (issue 29's "done when"): each row against a data directory, over a
//! static registry served by a real HTTP server, a git repository and a
//! local directory.
//!
//! | seed 002                                   | skilld                                  |
//! |--------------------------------------------|-----------------------------------------|
//! | `skill list`                               | `skilld list`                           |
//! | `skill list --available`                   | `skilld list --available`               |
//! | `skill search "kubernetes"`                | `skilld search kubernetes`              |
//! | `skill install kubernetes`                 | `skilld install kubernetes`             |
//! | `skill install kubernetes@1.2.0`           | `skilld install kubernetes@1.2.0`       |
//! | `skill install github.com/user/my-skill`   | `skilld install git URL`                |
//! | `skill install ./local-skill`              | `skilld install ./local-skill`          |
//! | `skill add kubernetes`                     | `skilld add kubernetes`                 |
//! | `skill remove kubernetes`                  | `skilld remove kubernetes`              |
//! | `skill info kubernetes`                    | `skilld info kubernetes`                |
//! | `skill create my-skill --type=tool`        | `skilld new my-skill [--dialect D]`     |
//! | `skill test ./my-skill`                    | `skilld test ./my-skill`                |
//! | `skill permissions kubernetes [--revoke]`  | `skilld permissions NAME [--revoke]`    |

use crate::common::tempdir;
use std::path::Path;
use std::process::{Command, Output};

/// `skilld ARGS` in `cwd`, on `data`, with no bundled skills.
fn skilld(cwd: &Path, data: &Path, args: &[&str]) -> Output {
    let empty = data.join("no-skills");
    std::fs::create_dir_all(&empty).unwrap();
    crate::common::skilld()
        .args(args)
        .current_dir(cwd)
        .env("SKILLD_DATA_DIR", data)
        .env("HOME", data)
        .env("SKILLD_SKILLS", format!("bundled={}", empty.display()))
        .env_remove("SKILLD_DATABASE_URL")
        .env_remove("SKILLD_REGISTRIES")
        .output()
        .unwrap()
}

fn says(out: &Output, what: &str) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(what), "{what} in {stdout}");
}

/// `skilld new NAME` in `parent`, at `version`, with `permissions`.
fn made(parent: &Path, name: &str, version: &str, permissions: &str) -> std::path::PathBuf {
    let out = crate::common::skilld()
        .args(["new", name, "--dir"])
        .arg(parent)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let md = parent.join(name).join("SKILL.md");
    let text = std::fs::read_to_string(&md).unwrap().replacen(
        "version: 0.1.0",
        &format!("version: {version}\npermissions: [{permissions}]"),
        1,
    );
    std::fs::write(&md, text).unwrap();
    parent.join(name)
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// A static registry of kubernetes 1.2.0 and 1.3.0, written by `skilld
/// package` and `skilld index`.
fn registry_site(site: &Path, work: &Path) {
    for version in ["1.2.0", "1.3.0"] {
        let dir = work.join(version);
        std::fs::create_dir(&dir).unwrap();
        let skill = made(&dir, "kubernetes", version, "file:read");
        let zip = site.join(format!("kubernetes-{version}.zip"));
        let out = crate::common::skilld()
            .arg("package")
            .arg(&skill)
            .arg("-o")
            .arg(&zip)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    let out = crate::common::skilld().arg("index").arg(site).output().unwrap();
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn seed_002s_cli_table_runs_line_by_line() {
    let (site, work, data, cwd) = (
        tempdir().unwrap(),
        tempdir().unwrap(),
        tempdir().unwrap(),
        tempdir().unwrap(),
    );
    registry_site(site.path(), work.path());
    let server = crate::common::Static::start(site.path());
    let (data, cwd, r) = (data.path(), cwd.path(), server.url.as_str());
    let run = |args: &[&str]| skilld(cwd, data, args);

    says(&run(&["list"]), "no skills");
    says(
        &run(&["list", "--available", "--registry", r]),
        "kubernetes@1.3.0\t",
    );
    says(
        &run(&["search", "kubernetes", "--registry", r]),
        "kubernetes@1.3.0\t",
    );
    says(
        &run(&["install", "kubernetes", "--registry", r]),
        "kubernetes@1.3.0 ready ",
    );
    says(
        &run(&["install", "kubernetes@1.2.0", "--registry", r]),
        "kubernetes@1.2.0 ready ",
    );
    says(&run(&["list"]), "kubernetes@1.3.0\tinstalled\tuntrusted\t");

    // From a git repository (a file:// URL; git daemon in install_sources).
    let repo = work.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    made(&repo, "my-skill", "1.0.0", "file:read, net:fetch");
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "my-skill"]);
    let url = format!("file://{}//my-skill", repo.display());
    says(&run(&["install", "git", &url]), "my-skill@1.0.0 ready ");
    made(cwd, "local-skill", "0.3.0", "");
    says(&run(&["install", "./local-skill"]), "local-skill@0.3.0 ready ");

    let project = work.path().join("project");
    let ws = project.to_str().unwrap();
    says(
        &run(&["add", "kubernetes", "--registry", r, "--workspace", ws]),
        "kubernetes@1.3.0 ",
    );
    assert!(project.join(".agent/skills/kubernetes/SKILL.md").is_file());
    says(&run(&["remove", "kubernetes"]), "removed kubernetes");
    says(&run(&["info", "my-skill"]), "permissions  file:read, net:fetch");

    made(cwd, "my-tool", "0.1.0", "");
    says(&run(&["test", "./my-tool"]), "passed");
    says(
        &run(&["permissions", "my-skill"]),
        "my-skill declares file:read, net:fetch",
    );
    says(
        &run(&["permissions", "my-skill", "--revoke"]),
        "grants       none",
    );
}
