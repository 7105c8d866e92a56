//! Run directories are kept and handed to the next run of the same skill
//! (issue 30): each test has a run leave something behind in its
//! directory (a file, a process that writes later, its mode, an extended
//! attribute, its times) and shows that the next run sees none of it; a
//! control shows that a run that leaves nothing does hand its directory
//! on, so the attacks are made against a directory that would be reused,
//! and that another skill never gets it.

use crate::common::{TestServer, options, root};
use serde_json::{Value, json};
use skilld::invoke::RunSettings;
use skilld::skill::Trust;
use std::path::Path;
use std::time::Duration;

/// What a run shows of its directory: inode and birth time (together, one
/// directory), mode, entries, extended attributes and modification year.
const LOOK: &str = "echo dir=$(stat -c %i@%w \"$TMPDIR\" | tr ' ' _); \
     echo mode=$(stat -c %a \"$TMPDIR\"); \
     echo year=$(stat -c %y \"$TMPDIR\" | cut -c1-10); \
     echo entries=$(ls -A \"$TMPDIR\" | tr '\\n' ,); \
     python3 -c 'import os; print(\"xattrs=\" + \",\".join(os.listxattr(os.environ[\"TMPDIR\"])))'";

fn shell_skill(dir: &Path, name: &str) {
    crate::common::one_tool_skill(dir, name, "", "s", "sh -c {{s}}");
}

async fn server(dir: &Path) -> TestServer {
    TestServer::builder(options(vec![root(dir, Trust::User)]))
        .settings(RunSettings::default())
        .allowed()
        .start()
        .await
}

/// Runs `script` with `tool`: its output.
async fn run(server: &TestServer, tool: &str, script: &str) -> String {
    let (status, envelope): (u16, Value) = server.invoke(tool, json!({ "s": script })).await;
    assert_eq!(status, 200, "{tool}: {envelope}");
    assert_eq!(envelope["success"], true, "{tool}: {envelope}");
    envelope["output"].as_str().unwrap_or_default().to_owned()
}

/// The value of `key=` in a run's output.
fn field<'a>(output: &'a str, key: &str) -> &'a str {
    output
        .split_whitespace()
        .find_map(|w| w.strip_prefix(key).and_then(|w| w.strip_prefix('=')))
        .unwrap_or_else(|| panic!("no {key}= in {output}"))
}

/// Whether runs here have cgroups, without which no directory is reused
/// (nothing proves that a run's processes are gone).
fn reuses(server: &TestServer) -> bool {
    nix::unistd::geteuid().is_root() && server.invoker.sandbox().report(false).pids != "unavailable"
}

/// A clean run's directory goes to the skill's next run, never to another
/// skill's.
#[tokio::test]
async fn a_kept_directory_serves_only_its_own_skill_again() {
    let skills = crate::common::tempdir().unwrap();
    shell_skill(skills.path(), "one");
    shell_skill(skills.path(), "two");
    let server = server(skills.path()).await;
    let first = run(&server, "one", LOOK).await;
    let other = run(&server, "two", LOOK).await;
    let again = run(&server, "one", LOOK).await;
    assert_ne!(field(&first, "dir"), field(&other, "dir"), "{first}\n{other}");
    if reuses(&server) {
        assert_eq!(field(&first, "dir"), field(&again, "dir"), "{first}\n{again}");
    }
    for seen in [&first, &other, &again] {
        assert_eq!(field(seen, "mode"), "700", "{seen}");
        assert_eq!(field(seen, "entries"), "", "{seen}");
        assert_eq!(field(seen, "xattrs"), "", "{seen}");
    }
}

/// Whatever a run leaves in or on its directory, the next run of the same
/// skill sees nothing of it.
#[tokio::test]
async fn the_next_run_sees_nothing_a_run_left() {
    let skills = crate::common::tempdir().unwrap();
    shell_skill(skills.path(), "leaver");
    let server = server(skills.path()).await;
    let leave = [
        "echo secret > \"$TMPDIR/left\"",
        "mkdir \"$TMPDIR/sub\" && echo secret > \"$TMPDIR/sub/left\"",
        "echo secret > \"$TMPDIR/.hidden\"",
        "ln -s /etc/passwd \"$TMPDIR/link\"",
        "mkfifo \"$TMPDIR/fifo\"",
        "chmod 0755 \"$TMPDIR\"",
        "chmod 0700 \"$TMPDIR\" && chmod g+s \"$TMPDIR\"",
        "python3 -c 'import os; os.setxattr(os.environ[\"TMPDIR\"], \"user.left\", b\"secret\")' || true",
        "touch -d 2001-01-01 \"$TMPDIR\"",
    ];
    for script in leave {
        run(&server, "leaver", &format!("{script}; true")).await;
        let seen = run(&server, "leaver", LOOK).await;
        assert_eq!(field(&seen, "entries"), "", "after `{script}`: {seen}");
        assert_eq!(field(&seen, "mode"), "700", "after `{script}`: {seen}");
        assert_eq!(field(&seen, "xattrs"), "", "after `{script}`: {seen}");
        assert_ne!(field(&seen, "year"), "2001-01-01", "after `{script}`: {seen}");
    }
}

/// A process that outlives its run (out of its group, writing later) does
/// not write into the directory the next run gets.
#[tokio::test]
async fn a_process_left_behind_cannot_write_into_the_next_run() {
    let skills = crate::common::tempdir().unwrap();
    shell_skill(skills.path(), "lingerer");
    let server = server(skills.path()).await;
    run(
        &server,
        "lingerer",
        "setsid sh -c 'sleep 1; echo late > \"$TMPDIR/late\"' >/dev/null 2>&1 < /dev/null & echo started",
    )
    .await;
    let during = run(
        &server,
        "lingerer",
        &format!("{LOOK}; sleep 2; ls -A \"$TMPDIR\""),
    )
    .await;
    assert_eq!(field(&during, "entries"), "", "{during}");
    assert!(!during.contains("late"), "{during}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let after = run(&server, "lingerer", LOOK).await;
    assert_eq!(field(&after, "entries"), "", "{after}");
}
