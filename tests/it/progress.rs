//! The long verbs' progress: drawn on a terminal (here a pseudo-terminal
//! that util-linux's `script` gives `skilld install`), and nothing of it
//! where stderr is captured, as every other test captures it.

use crate::common::{announced_url, assert_exit, serve_command, skilld, tempdir, terminate};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// What starts every terminal control sequence a bar draws with.
const CSI: &str = "\u{1b}[";

/// A skill made by `skilld new` in `parent`.
fn hello(parent: &Path) -> PathBuf {
    let out = skilld()
        .args(["new", "--dir"])
        .arg(parent)
        .arg("hello")
        .output()
        .unwrap();
    assert_exit(&out, 0, "new: ");
    parent.join("hello")
}

/// `word` as one word of `sh`, whatever it holds.
fn quoted(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// `skilld install ARGS…` with its stdout and stderr on a pseudo-terminal:
/// everything the terminal was sent, control sequences included, then a
/// line `exit=N` with its exit code.
fn install_on_a_terminal(args: &[&str]) -> String {
    let words: Vec<String> = args.iter().map(|a| quoted(a)).collect();
    let command = format!(
        "{} install {}; echo \"exit=$?\"",
        quoted(env!("CARGO_BIN_EXE_skilld")),
        words.join(" ")
    );
    let out = Command::new("script")
        .args(["-qfec", &command, "/dev/null"])
        .env("SHELL", "/bin/sh")
        .env("TERM", "xterm")
        .env("SKILLD_LOG", "warn")
        .env_remove("SKILLD_CONFIG")
        .env_remove("SKILLD_DATA_DIR")
        .env_remove("SKILLD_INSTALL_TO_TOKEN")
        .output()
        .unwrap_or_else(|e| panic!("util-linux `script` is needed to test on a terminal: {e}"));
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `skilld install ARGS…` with stdout and stderr captured, as a pipe or a
/// log would take them.
fn install_captured(args: &[&str]) -> Output {
    skilld()
        .arg("install")
        .args(args)
        .env_remove("SKILLD_DATA_DIR")
        .env_remove("SKILLD_INSTALL_TO_TOKEN")
        .output()
        .unwrap()
}

/// The terminal's text as a person reads it at the end: each line as the
/// last `\r` or erase-line left it.
fn last_lines(screen: &str) -> Vec<String> {
    screen
        .split('\n')
        .map(|line| {
            let line = line.trim_end_matches('\r');
            let line = line.rsplit('\r').next().unwrap_or(line);
            line.rsplit("\u{1b}[2K").next().unwrap_or(line).to_owned()
        })
        .filter(|line| !line.is_empty())
        .collect()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn installing_here_shows_the_installers_lines_on_a_terminal_only() {
    let (skills, data, quiet) = (tempdir().unwrap(), tempdir().unwrap(), tempdir().unwrap());
    let dir = hello(skills.path());
    let (dir, data_dir) = (dir.to_str().unwrap(), data.path().to_str().unwrap());

    let screen = install_on_a_terminal(&[dir, "--data-dir", data_dir, "--trust", "user"]);
    // The spinner said what the installer said, then was cleared.
    for said in [
        "installing",
        "unpacked 1 files",
        "review: 0 finding(s)",
        "no dependencies",
    ] {
        assert!(screen.contains(said), "{said} in {screen:?}");
    }
    assert!(screen.contains("\r\u{1b}[2K"), "cleared: {screen:?}");
    let lines = last_lines(&screen);
    assert_eq!(lines.len(), 2, "only the outcome stays: {lines:?}");
    assert!(lines[0].starts_with("hello@0.1.0 ready "), "{lines:?}");
    assert_eq!(lines[1], "exit=0");

    // Captured, stderr has nothing drawn, and stdout the same line.
    let quiet_dir = quiet.path().to_str().unwrap();
    let out = install_captured(&[dir, "--data-dir", quiet_dir, "--trust", "user"]);
    assert_exit(&out, 0, "captured: ");
    assert!(!stderr(&out).contains(CSI), "{:?}", stderr(&out));
    assert!(!stderr(&out).contains("installing"), "{:?}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{}\n", lines[0]));
}

#[test]
fn installing_to_a_server_shows_the_upload_and_its_events() {
    let (skills, served, data) = (tempdir().unwrap(), tempdir().unwrap(), tempdir().unwrap());
    let dir = hello(skills.path());
    let mut child = serve_command(data.path(), served.path())
        .env("HOME", data.path())
        .spawn()
        .unwrap();
    let url = announced_url(&mut child).unwrap();
    let (dir, data_dir) = (dir.to_str().unwrap(), data.path().to_str().unwrap());
    let to = [
        dir,
        "--to",
        url.as_str(),
        "--data-dir",
        data_dir,
        "--trust",
        "user",
    ];

    let screen = install_on_a_terminal(&to);
    // The bytes sent, then the server's `progress` events.
    for said in [
        "uploading",
        "B/",
        "unpacked 1 files",
        "installed hello@0.1.0 (ready)",
    ] {
        assert!(screen.contains(said), "{said} in {screen:?}");
    }
    let lines = last_lines(&screen);
    assert_eq!(lines.len(), 2, "only the outcome stays: {lines:?}");
    assert!(lines[0].starts_with("hello@0.1.0 ready "), "{lines:?}");
    assert_eq!(lines[1], "exit=0");

    // A refusal streamed as an `error` event reads as the answer would.
    let screen = install_on_a_terminal(&to);
    let lines = last_lines(&screen);
    let captured = install_captured(&to);
    assert_exit(&captured, 1, "installed already: ");
    assert!(!stderr(&captured).contains(CSI), "{:?}", stderr(&captured));
    assert!(captured.stdout.is_empty());
    assert_eq!(
        lines,
        [stderr(&captured).trim_end().to_owned(), "exit=1".to_owned()],
        "{screen:?}"
    );
    assert!(lines[0].contains("answered 409"), "{lines:?}");
    terminate(&mut child);
}
