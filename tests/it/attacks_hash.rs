//! Approvals bind to a skill's content hash; these attacks changed what
//! runs without changing the hash the approval was given for: an edit
//! deeper than the hash looked, an edit through a hard link the watcher
//! never sees, and an edit while an approved call waited. Each is shown
//! to fail: the changed code never runs under the old decision.

use crate::common::{TestServer, options, root};
use serde_json::{Value, json};
use skilld::skill::Trust;
use std::path::{Path, PathBuf};

/// A scripts skill `name` whose `scripts/run.sh` sources `helper` (a path
/// under `scripts/`), which says `approved code` and leaves that word in
/// `mark`.
fn skill_with_helper(dir: &Path, name: &str, helper: &str, mark: &Path) -> PathBuf {
    let skill = dir.join(name);
    crate::common::write_file(
        &skill.join("SKILL.md"),
        &format!("---\nname: {name}\ndescription: Runs a script.\n---\n\nRuns scripts/run.sh.\n"),
    );
    crate::common::write_file(
        &skill.join("scripts/run.sh"),
        &format!("#!/bin/sh\n# Says what its helper says.\n. \"$(dirname \"$0\")/{helper}\"\n"),
    );
    crate::common::write_file(&skill.join("scripts").join(helper), &says("approved", mark));
    skill
}

/// A helper that says `word code` and appends `word` to `mark`.
fn says(word: &str, mark: &Path) -> String {
    format!("echo {word} code\necho {word} >> '{}'\n", mark.display())
}

fn marked(mark: &Path) -> String {
    std::fs::read_to_string(mark).unwrap_or_default()
}

/// The refusal of a call whose skill changed under it: failed, nothing
/// ran, and it says why.
fn assert_refused_as_changed(envelope: &Value) {
    assert_eq!(envelope["success"], false, "{envelope}");
    assert_eq!(envelope["exit_code"], Value::Null, "{envelope}");
    let error = envelope["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("changed since this call was prepared"),
        "{envelope}"
    );
}

/// The hash stopped 8 directories deep under `scripts/`: an edit at the
/// ninth level kept the grant. Now it reaches 16 levels, the edit is
/// caught at the next call even before a reload, and after the reload
/// the call asks again.
#[tokio::test]
async fn an_edit_deep_under_scripts_voids_the_grant() {
    let skills = crate::common::tempdir().unwrap();
    let marks = crate::common::marks_dir();
    let mark = marks.path().join("deep");
    let helper = "a/b/c/d/e/f/g/h/i/j/helper.sh";
    let skill = skill_with_helper(skills.path(), "deep", helper, &mark);
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::User)]))
        .allowed()
        .start()
        .await;
    let (status, envelope) = server.invoke("deep_run", json!({})).await;
    assert_eq!(
        (status, envelope["output"].as_str()),
        (200, Some("approved code\n"))
    );
    let before = server.catalog.current().skill("deep").unwrap().hash.clone();

    std::fs::write(skill.join("scripts").join(helper), says("changed", &mark)).unwrap();
    let (status, envelope) = server.invoke("deep_run", json!({})).await;
    assert_eq!(status, 200, "{envelope}");
    assert_refused_as_changed(&envelope);
    assert_eq!(
        marked(&mark),
        "approved\n",
        "changed code ran under the old grant"
    );

    server.reload().await;
    let after = server.catalog.current().skill("deep").unwrap().hash.clone();
    assert_ne!(before, after, "the hash does not reach the deep helper");
    let (status, held) = server.invoke("deep_run", json!({})).await;
    assert_eq!(status, 202, "changed code ran under the old grant: {held}");
}

/// Past what can be hashed, a skill is not loaded at all, rather than
/// loaded with a hash that leaves part of it out.
#[tokio::test]
async fn a_skill_too_deep_to_hash_is_not_loaded() {
    let skills = crate::common::tempdir().unwrap();
    let marks = crate::common::marks_dir();
    let helper = format!("{}helper.sh", "d/".repeat(18));
    skill_with_helper(skills.path(), "abyss", &helper, &marks.path().join("abyss"));
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::User)]))
        .start()
        .await;
    assert!(server.catalog.current().skill("abyss").is_none());
    let (status, problem) = server.invoke("abyss_run", json!({})).await;
    assert_eq!(status, 404, "{problem}");
    let listed = server.get_json("/diagnostics").await;
    assert!(listed.to_string().contains("too_large"), "{listed}");
}

/// A script that is a hard link to a file outside the skill: an edit made
/// through the other name was never seen, until a manual reload. The next
/// call now notices the file changed, and refuses before anything runs.
#[tokio::test]
async fn an_edit_through_a_hard_link_is_caught_before_anything_runs() {
    let skills = crate::common::tempdir().unwrap();
    let outside = crate::common::tempdir().unwrap();
    let marks = crate::common::marks_dir();
    let mark = marks.path().join("linked");
    let skill = skill_with_helper(skills.path(), "linked", "helper.sh", &mark);
    let elsewhere = outside.path().join("helper.sh");
    std::fs::rename(skill.join("scripts/helper.sh"), &elsewhere).unwrap();
    std::fs::hard_link(&elsewhere, skill.join("scripts/helper.sh")).unwrap();
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::User)]))
        .allowed()
        .start()
        .await;
    let (status, envelope) = server.invoke("linked_run", json!({})).await;
    assert_eq!(
        (status, envelope["output"].as_str()),
        (200, Some("approved code\n"))
    );

    // Written in place through the other name: same inode, no event in
    // the skill's directory.
    std::fs::write(&elsewhere, says("changed", &mark)).unwrap();
    let (status, envelope) = server.invoke("linked_run", json!({})).await;
    assert_eq!(status, 200, "{envelope}");
    assert_refused_as_changed(&envelope);
    assert_eq!(marked(&mark), "approved\n", "the edit ran under the old grant");
}

/// A call approved for one version of a skill ran whatever the files held
/// by the time it started. Edited between the request and the decision,
/// it now fails without running.
#[tokio::test]
async fn an_approved_call_runs_only_what_was_approved() {
    let skills = crate::common::tempdir().unwrap();
    let marks = crate::common::marks_dir();
    let mark = marks.path().join("held");
    let skill = skill_with_helper(skills.path(), "held", "helper.sh", &mark);
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::User)]))
        .start()
        .await;
    let (status, held) = server.invoke("held_run", json!({})).await;
    assert_eq!(status, 202, "{held}");

    std::fs::write(skill.join("scripts/helper.sh"), says("changed", &mark)).unwrap();
    let run = server.approve_once_and_wait(&held).await;
    assert_eq!(run["status"], "failed", "{run}");
    assert_refused_as_changed(&run["result"]);
    assert_eq!(
        marked(&mark),
        "",
        "changed code ran under an approval for other code"
    );
}
