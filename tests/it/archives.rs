//! Skills as zip archives (issue 13, first part): `skilld package` and
//! `GET /skills/{skill}/archive` give the same bytes for the same content,
//! and the archive unpacked is the same skill, with the same hash.

use crate::common::{TestServer, assert_exit, copy_tree, corpus_dir, options, root, skilld, tempdir};
use skilld::skill::Trust;
use std::io::Cursor;
use std::path::Path;

fn package(dir: &Path, output: &Path) -> std::process::Output {
    skilld()
        .arg("package")
        .arg(dir)
        .arg("-o")
        .arg(output)
        .output()
        .unwrap()
}

/// Unpacks `zip` into `into` (the archive's own entries, trusted here).
fn unpack(zip: &[u8], into: &Path) {
    let mut archive = zip::ZipArchive::new(Cursor::new(zip.to_vec())).unwrap();
    archive.extract(into).unwrap();
}

#[tokio::test]
async fn a_package_and_the_served_archive_are_the_same_bytes_and_the_same_skill() {
    let skills = tempdir().unwrap();
    copy_tree(&corpus_dir().join("valid/git"), &skills.path().join("git"));
    let out = tempdir().unwrap();
    let (one, two) = (out.path().join("one.zip"), out.path().join("two.zip"));
    for path in [&one, &two] {
        let done = package(&skills.path().join("git"), path);
        assert_exit(&done, 0, "");
        assert_eq!(
            String::from_utf8_lossy(&done.stdout).trim(),
            path.display().to_string()
        );
    }
    let packaged = std::fs::read(&one).unwrap();
    assert_eq!(packaged, std::fs::read(&two).unwrap(), "two packages differ");

    let server = TestServer::builder(options(vec![root(skills.path(), Trust::User)]))
        .start()
        .await;
    let detail = server.get_json("/skills/git").await;
    let res = reqwest::get(server.url("/skills/git/archive")).await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "application/zip");
    assert_eq!(res.headers()["x-skill-hash"], detail["hash"].as_str().unwrap());
    let disposition = res.headers()["content-disposition"].to_str().unwrap().to_owned();
    assert!(disposition.contains("git-"), "{disposition}");
    let served = res.bytes().await.unwrap();
    assert_eq!(
        served.as_ref(),
        packaged.as_slice(),
        "the server's archive is not the package"
    );

    // Unpacked elsewhere, it is the same skill.
    let copy = tempdir().unwrap();
    unpack(&served, &copy.path().join("git"));
    let again = TestServer::builder(options(vec![root(copy.path(), Trust::User)]))
        .start()
        .await;
    assert_eq!(again.get_json("/skills/git").await["hash"], detail["hash"]);
}

#[tokio::test]
async fn what_cannot_be_archived_is_refused_clearly() {
    let skills = tempdir().unwrap();
    copy_tree(&corpus_dir().join("valid/git"), &skills.path().join("git"));
    std::fs::create_dir_all(skills.path().join("git/references")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", skills.path().join("git/references/passwd")).unwrap();
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::User)]))
        .start()
        .await;
    let res = reqwest::get(server.url("/skills/git/archive")).await.unwrap();
    assert_eq!(res.status(), 422);
    let problem: serde_json::Value = res.json().await.unwrap();
    assert_eq!(problem["code"], "unarchivable", "{problem}");
    assert!(
        problem["detail"].as_str().unwrap().contains("references/passwd"),
        "{problem}"
    );
    let res = reqwest::get(server.url("/skills/nope/archive")).await.unwrap();
    assert_eq!(res.status(), 404);

    // `skilld package` says the same and writes nothing.
    let out = tempdir().unwrap();
    let target = out.path().join("git.zip");
    let done = package(&skills.path().join("git"), &target);
    assert_exit(&done, 2, "");
    assert!(String::from_utf8_lossy(&done.stderr).contains("references/passwd"));
    assert_eq!(
        std::fs::read_dir(out.path()).unwrap().count(),
        0,
        "something was written"
    );
}

#[test]
fn a_skill_that_does_not_lint_is_not_packaged() {
    let out = tempdir().unwrap();
    let target = out.path().join("bad.zip");
    let done = package(&corpus_dir().join("invalid/bad-version"), &target);
    assert_eq!(done.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert!(stderr.contains("does not lint"), "{stderr}");
    assert!(!target.exists());
    let none = package(out.path(), &target);
    assert_eq!(none.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&none.stderr).contains("holds no SKILL.md"));
}
