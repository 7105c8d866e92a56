//! Reloading: the watcher picks changes up, a reload swaps whole snapshots,
//! and a root that cannot be read keeps what it had.

use crate::common::{copy_tree, corpus_dir, options, root};
use skilld::catalog::CatalogHandle;
use skilld::export::Format;
use skilld::skill::{Code, Trust};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watcher_reloads_on_change() {
    let dir = crate::common::tempdir().unwrap();
    copy_tree(&corpus_dir().join("valid/git"), &dir.path().join("git"));
    let handle = Arc::new(CatalogHandle::new(options(vec![root(dir.path(), Trust::User)])));
    let _watcher = skilld::watch::spawn(handle.clone()).unwrap();
    assert_eq!(handle.current().tools.len(), 3);

    // A new tool in an existing skill.
    let def = dir.path().join("git/SKILL.md");
    let mut text = std::fs::read_to_string(&def).unwrap();
    text.push_str("\n### git_tags\n\nList tags.\n\n#### Parameters\n\nNone.\n\n#### Command\n\n```bash\ngit tag --list\n```\n");
    std::fs::write(&def, text).unwrap();
    eventually("the new tool", || {
        handle.current().skill("git").is_some_and(|s| s.tools.len() == 4)
    })
    .await;

    // A new skill, then a broken edit, then removal.
    copy_tree(&corpus_dir().join("valid/echo"), &dir.path().join("echo"));
    eventually("the new skill", || handle.current().skill("echo").is_some()).await;
    std::fs::write(dir.path().join("echo/SKILL.md"), "---\nname: echo\n").unwrap();
    eventually("the broken skill to be excluded", || {
        let c = handle.current();
        c.skill("echo").is_none() && c.diagnostics.iter().any(|d| d.code == Code::InvalidFrontmatter)
    })
    .await;
    std::fs::remove_dir_all(dir.path().join("echo")).unwrap();
    eventually("the diagnostics to clear", || {
        handle.current().diagnostics.is_empty()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_root_created_after_start_is_watched() {
    let dir = crate::common::tempdir().unwrap();
    let later = dir.path().join("later");
    let handle = Arc::new(CatalogHandle::new(options(vec![root(&later, Trust::User)])));
    let _watcher = skilld::watch::spawn(handle.clone()).unwrap();
    assert!(handle.current().skills.is_empty());
    copy_tree(&corpus_dir().join("valid/git"), &later.join("git"));
    eventually("the new root's skill", || handle.current().skill("git").is_some()).await;
    // Changes inside the new root are now seen too.
    copy_tree(&corpus_dir().join("valid/echo"), &later.join("echo"));
    eventually("a second skill in the new root", || {
        handle.current().skill("echo").is_some()
    })
    .await;
}

#[test]
fn an_unreadable_root_keeps_its_previous_skills() {
    let dir = crate::common::tempdir().unwrap();
    let skills = dir.path().join("skills");
    copy_tree(&corpus_dir().join("valid/git"), &skills.join("git"));
    let handle = CatalogHandle::new(options(vec![root(&skills, Trust::User)]));
    let before = handle.current();
    assert!(before.skill("git").is_some());

    // The root's path now names a file: reading it as a directory fails.
    std::fs::rename(&skills, dir.path().join("moved")).unwrap();
    std::fs::write(&skills, "not a directory").unwrap();
    let during = handle.reload();
    assert!(during.skill("git").is_some(), "the previous skills are kept");
    assert_eq!(
        during.skill("git").unwrap().hash,
        before.skill("git").unwrap().hash
    );
    let d = during
        .diagnostics
        .iter()
        .find(|d| d.code == Code::Unreadable)
        .expect("a diagnostic says why");
    assert!(d.is_error() && d.message.contains("keeping"), "{d}");

    std::fs::remove_file(&skills).unwrap();
    std::fs::rename(dir.path().join("moved"), &skills).unwrap();
    let after = handle.reload();
    assert!(after.skill("git").is_some());
    assert!(after.diagnostics.is_empty(), "{:?}", after.diagnostics);
}

/// Readers never see a half-built catalog: every snapshot they get is
/// consistent with itself, while a writer swaps between two states.
#[test]
fn reloads_swap_whole_snapshots() {
    let dir = crate::common::tempdir().unwrap();
    copy_tree(&corpus_dir().join("valid/git"), &dir.path().join("git"));
    let handle = Arc::new(CatalogHandle::new(options(vec![root(dir.path(), Trust::User)])));
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (handle, stop) = (handle.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut seen = std::collections::BTreeSet::new();
                while !stop.load(Ordering::Relaxed) {
                    let c = handle.current();
                    let names: Vec<&str> = c.skills.iter().map(|s| s.name.as_str()).collect();
                    let tools: usize = c.skills.iter().map(|s| s.tools.len()).sum();
                    assert_eq!(tools, c.tools.len());
                    let body: serde_json::Value =
                        serde_json::from_slice(&c.exports.body(Format::Native, None, None)).unwrap();
                    assert_eq!(body["tools"].as_array().unwrap().len(), tools);
                    assert!(names == ["git"] || names == ["echo", "git"], "{names:?}");
                    seen.insert(names.len());
                }
                seen
            })
        })
        .collect();
    for i in 0..40 {
        if i % 2 == 0 {
            copy_tree(&corpus_dir().join("valid/echo"), &dir.path().join("echo"));
        } else {
            std::fs::remove_dir_all(dir.path().join("echo")).unwrap();
        }
        handle.reload();
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        let seen = r.join().unwrap();
        assert!(!seen.is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_neighbours_of_a_missing_root_do_not_reload() {
    // The installed root lives in the data directory beside the run log,
    // whose writes must not rebuild the catalog.
    let dir = crate::common::tempdir().unwrap();
    let handle = Arc::new(CatalogHandle::new(options(vec![root(
        dir.path().join("installed"),
        Trust::Untrusted,
    )])));
    let _watcher = skilld::watch::spawn(handle.clone()).unwrap();
    let before = handle.current();
    for i in 0..10 {
        std::fs::write(dir.path().join("skilld.db-wal"), format!("write {i}")).unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(skilld::watch::DEBOUNCE * 3).await;
    assert!(
        Arc::ptr_eq(&before, &handle.current()),
        "an unrelated file reloaded the catalog"
    );
    // The root itself appearing still does.
    copy_tree(&corpus_dir().join("valid/git"), &dir.path().join("installed/git"));
    eventually("the new root's skill", || handle.current().skill("git").is_some()).await;
}
