//! `skilld install ./DIR` and `skilld install git URL[#REF][//SUBDIR]`
//! (issue 29, seed 002's CLI table): a repository served by a real
//! `git daemon` on loopback and by `file://`, refs and subdirectories,
//! and a clone that runs no hook even where git would.

use crate::common::tempdir;
use std::path::Path;
use std::process::{Command, Output};

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .current_dir(dir)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn probe_md(version: &str) -> String {
    format!(
        "---\nname: probe\nversion: {version}\ndescription: Probes.\nread_only: true\n---\n\n\
         ### probe\n\nProbes.\n\n#### Command\n\n```\necho {version}\n```\n"
    )
}

/// A work repository with `skills/probe` at 1.0.0 (tagged v1), then
/// 1.1.0 on main, and a bare clone of it, `served.git`, under `root`.
fn repositories(root: &Path) -> std::path::PathBuf {
    let work = root.join("work");
    std::fs::create_dir_all(work.join("skills/probe")).unwrap();
    git(&work, &["init", "-q"]);
    std::fs::write(work.join("skills/probe/SKILL.md"), probe_md("1.0.0")).unwrap();
    git(&work, &["add", "."]);
    git(&work, &["commit", "-q", "-m", "one"]);
    git(&work, &["tag", "v1"]);
    std::fs::write(work.join("skills/probe/SKILL.md"), probe_md("1.1.0")).unwrap();
    git(&work, &["commit", "-q", "-am", "two"]);
    git(root, &["clone", "-q", "--bare", "work", "served.git"]);
    work
}

/// `git daemon` serving `root` on a free loopback port, until dropped.
struct Daemon {
    child: std::process::Child,
    port: u16,
}

impl Daemon {
    fn start(root: &Path) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        // `git daemon` would run `git-daemon` as its child, which killing
        // `git` leaves behind, holding the test's output open: run it itself.
        let exec_path = Command::new("git").arg("--exec-path").output().unwrap();
        let exec_path = String::from_utf8(exec_path.stdout).unwrap();
        let child = Command::new(Path::new(exec_path.trim()).join("git-daemon"))
            .args(["--reuseaddr", "--export-all", "--listen=127.0.0.1"])
            .arg(format!("--port={port}"))
            .arg(format!("--base-path={}", root.display()))
            .arg(root)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Self { child, port };
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let mut child = child;
        let _ = child.kill();
        let _ = child.wait();
        panic!("git daemon did not listen on {port}");
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `skilld install ARGS` into `data`, with `templates` as git's template
/// directory in its environment, as a user's setting would be.
fn install(data: &Path, templates: &Path, args: &[&str]) -> Output {
    crate::common::skilld()
        .args(["install", "--trust", "user", "--data-dir"])
        .arg(data)
        .args(args)
        .env("HOME", data)
        .env("GIT_TEMPLATE_DIR", templates)
        .output()
        .unwrap()
}

fn installed(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout.split_whitespace().next().unwrap_or_default().to_owned()
}

/// Git's template directory with a post-checkout hook leaving `marker`.
fn hook_templates(dir: &Path, marker: &Path) -> std::path::PathBuf {
    let templates = dir.join("templates");
    std::fs::create_dir_all(templates.join("hooks")).unwrap();
    let hook = templates.join("hooks/post-checkout");
    std::fs::write(&hook, format!("#!/bin/sh\necho ran >> {}\n", marker.display())).unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    templates
}

#[test]
fn skills_install_from_a_directory_and_from_git_without_running_a_hook() {
    let root = tempdir().unwrap();
    let work = repositories(root.path());
    let marker = root.path().join("hook-ran");
    let templates = hook_templates(root.path(), &marker);
    // The control: a plain clone with these templates runs the hook.
    let control = root.path().join("control");
    let out = Command::new("git")
        .args(["clone", "-q", "served.git"])
        .arg(&control)
        .current_dir(root.path())
        .env("GIT_TEMPLATE_DIR", &templates)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(
        marker.exists(),
        "the control clone ran no hook: the test proves nothing"
    );
    std::fs::remove_file(&marker).unwrap();

    let (dir_data, git_data, file_data) = (tempdir().unwrap(), tempdir().unwrap(), tempdir().unwrap());
    let skill_dir = work.join("skills/probe");
    assert_eq!(
        installed(&install(
            dir_data.path(),
            &templates,
            &[skill_dir.to_str().unwrap()]
        )),
        "probe@1.1.0"
    );

    let daemon = Daemon::start(root.path());
    let repo = format!("git://127.0.0.1:{}/served.git", daemon.port);
    let tagged = format!("{repo}#v1//skills/probe");
    assert_eq!(
        installed(&install(git_data.path(), &templates, &["git", &tagged])),
        "probe@1.0.0"
    );
    let main = format!("{repo}//skills/probe");
    assert_eq!(
        installed(&install(git_data.path(), &templates, &["git", &main])),
        "probe@1.1.0"
    );
    let file = format!(
        "file://{}#v1//skills/probe",
        root.path().join("served.git").display()
    );
    assert_eq!(
        installed(&install(file_data.path(), &templates, &["git", &file])),
        "probe@1.0.0"
    );
    assert!(!marker.exists(), "a hook ran during skilld's clone");
    drop(daemon);
}

#[test]
fn git_sources_are_refused_clearly() {
    let root = tempdir().unwrap();
    repositories(root.path());
    let data = tempdir().unwrap();
    let served = format!("file://{}", root.path().join("served.git").display());
    let pwned = root.path().join("pwned");
    let ext = format!("ext::sh -c touch% {}", pwned.display());
    let cases: Vec<(Vec<String>, i32, &str)> = vec![
        (vec!["git".into()], 1, "give the repository after git"),
        (vec!["git".into(), ext], 1, "give an address starting with"),
        (
            vec!["git".into(), "--".into(), "--upload-pack=touch /tmp/x".into()],
            1,
            "give an address starting with",
        ),
        (
            vec!["git".into(), format!("{served}#nope//skills/probe")],
            1,
            "has no ref nope",
        ),
        (
            vec!["git".into(), format!("{served}//skills/missing")],
            1,
            "has no directory skills/missing",
        ),
        (
            vec!["git".into(), format!("{served}//skills")],
            1,
            "holds no SKILL.md",
        ),
        (
            vec!["git".into(), format!("{served}//../..")],
            1,
            "SUBDIR must be a relative path",
        ),
        (
            vec!["git".into(), "git://127.0.0.1:1/x.git".into()],
            2,
            "cannot reach git://127.0.0.1:1/x.git",
        ),
        (
            vec![root.path().display().to_string(), "extra".into()],
            1,
            "unexpected 'extra'",
        ),
    ];
    for (args, code, says) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = install(data.path(), root.path(), &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    assert!(!pwned.exists(), "the ext transport ran a command");
    assert!(!data.path().join("installed/probe").exists());
}
