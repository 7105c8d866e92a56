//! `skilld info`, `skilld remove` and `skilld permissions [--revoke]`
//! (issue 29, seed 002's CLI table), each against a data directory and,
//! with `--to`, against a running `skilld serve`.

use crate::common::{announced_url, serve_command, tempdir, terminate, zip_of};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Output;

/// `hello` at `version`, declaring two permissions, zipped.
fn hello_zip(dir: &Path, version: &str) -> std::path::PathBuf {
    let md = format!(
        "---\nname: hello\nversion: {version}\ndescription: Says something.\nread_only: true\n\
         permissions: [file:read, net:fetch]\n---\n\nSays it.\n\n### hello\n\nSays it.\n\n\
         #### Command\n\n```\necho hi\n```\n"
    );
    let zip = dir.join(format!("hello-{version}.zip"));
    std::fs::write(&zip, zip_of(&[("SKILL.md", &md, false)])).unwrap();
    zip
}

/// `skilld ARGS --data-dir DATA`, with HOME there too so that no root
/// of the machine's user joins, and only `skills` as the bundled root.
fn skilld(data: &Path, skills: &Path, args: &[&str]) -> Output {
    crate::common::skilld()
        .args(args)
        .arg("--data-dir")
        .arg(data)
        .env("HOME", data)
        .env("SKILLD_SKILLS", format!("bundled={}", skills.display()))
        .env_remove("SKILLD_DATABASE_URL")
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn json_of(out: &Output) -> Value {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(out)))
}

/// Exit code and stderr.
fn failed(out: &Output) -> (Option<i32>, String) {
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Records an allow grant of hello's tool straight into the data
/// directory's run log, as a decision of a person would.
async fn grant_hello(data: &Path, hash: &str) {
    let url = format!("sqlite://{}/skilld.db", data.display());
    let store = skilld::store::connect(&url).await.unwrap();
    store
        .approvals
        .put_grant(skilld::store::Grant {
            id: uuid::Uuid::now_v7(),
            skill: "hello".into(),
            tool: "hello".into(),
            skill_hash: hash.into(),
            decision: skilld::store::GrantDecision::Allow,
            created_by: Some("carol".into()),
            created_at: chrono::Utc::now(),
        })
        .await
        .unwrap();
}

/// Records a person's "allow always" of hello's permissions at `hash`
/// straight into the data directory's run log, as a session's first
/// activation would; a server running on it reads it too.
async fn approve_hello_always(data: &Path, hash: &str) {
    let url = format!("sqlite://{}/skilld.db", data.display());
    let store = skilld::store::connect(&url).await.unwrap();
    store
        .skill_approvals
        .put_skill_approval(skilld::store::SkillApproval {
            skill: "hello".into(),
            skill_hash: hash.into(),
            permissions: vec!["file:read".into(), "net:fetch".into()],
            decided_by: Some("dana".into()),
            decided_at: chrono::DateTime::from_timestamp(1_795_000_000, 0).unwrap(),
        })
        .await
        .unwrap();
}

/// The line `skilld permissions` shows for [`approve_hello_always`].
fn allowed_always_line(hash: &str) -> String {
    format!(
        "allowed always: file:read, net:fetch ({}…, by dana, 2026-11-18T11:06:40Z)",
        &hash[..12]
    )
}

#[tokio::test]
async fn info_permissions_and_remove_work_on_a_data_directory() {
    let (data, skills, zips) = (tempdir().unwrap(), tempdir().unwrap(), tempdir().unwrap());
    let (data, skills) = (data.path(), skills.path());
    for version in ["1.0.0", "1.2.0"] {
        let zip = hello_zip(zips.path(), version);
        let out = skilld(
            data,
            skills,
            &["install", zip.to_str().unwrap(), "--trust", "user"],
        );
        assert_eq!(out.status.code(), Some(0), "{out:?}");
    }

    let info = json_of(&skilld(data, skills, &["info", "hello", "--format", "json"]));
    assert_eq!(info["skill"]["version"], "1.2.0", "{info}");
    assert_eq!(info["skill"]["permissions"], json!(["file:read", "net:fetch"]));
    assert_eq!(info["versions"]["active"], "1.2.0");
    assert_eq!(info["versions"]["versions"].as_array().unwrap().len(), 2);
    assert_eq!(info["grants"], json!([]));
    let hash = info["skill"]["hash"].as_str().unwrap().to_owned();
    let text = stdout(&skilld(data, skills, &["info", "hello"]));
    for line in [
        "hello 1.2.0 (user, from installed)",
        "permissions  file:read, net:fetch",
        "installed versions: 1.0.0 ready; 1.2.0 ready, serving",
        "grants       none",
    ] {
        assert!(text.contains(line), "{line} in {text}");
    }
    let old = json_of(&skilld(
        data,
        skills,
        &["info", "hello@1.0.0", "--format", "json"],
    ));
    assert_eq!(old["skill"]["version"], "1.0.0");

    grant_hello(data, &hash).await;
    approve_hello_always(data, &hash).await;
    let text = stdout(&skilld(data, skills, &["permissions", "hello"]));
    assert!(text.contains("hello declares file:read, net:fetch"), "{text}");
    assert!(
        text.contains(&format!("hello allow at {} by carol", &hash[..12])),
        "{text}"
    );
    assert!(text.contains(&allowed_always_line(&hash)), "{text}");
    let revoked = json_of(&skilld(
        data,
        skills,
        &["permissions", "hello", "--revoke", "--format", "json"],
    ));
    assert_eq!((&revoked["revoked"], &revoked["grants"]), (&json!(1), &json!([])));
    assert_eq!(
        (&revoked["revoked_skill_approvals"], &revoked["skill_approvals"]),
        (&json!(1), &json!([])),
        "{revoked}"
    );
    let text = stdout(&skilld(data, skills, &["permissions", "hello"]));
    assert!(!text.contains("allowed always"), "revoked: {text}");

    let out = skilld(data, skills, &["remove", "hello@1.2.0"]);
    assert_eq!(stdout(&out), "removed hello@1.2.0\n", "{out:?}");
    let info = json_of(&skilld(data, skills, &["info", "hello", "--format", "json"]));
    assert_eq!(info["skill"]["version"], "1.0.0", "the other version serves");
    assert_eq!(
        stdout(&skilld(data, skills, &["remove", "hello"])),
        "removed hello\n"
    );
    let (code, err) = failed(&skilld(data, skills, &["info", "hello"]));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("hello"), "{err}");
}

#[tokio::test]
async fn the_verbs_refuse_clearly() {
    let (data, skills) = (tempdir().unwrap(), tempdir().unwrap());
    let (data, skills) = (data.path(), skills.path());
    crate::common::mark_skill(skills, "bundled-one", "");
    for (args, code, says) in [
        (&["info", "nope"][..], 1, "nope"),
        (&["remove", "nope"][..], 1, "not installed"),
        (&["remove", "bundled-one"][..], 1, "not the installed one"),
        (&["permissions", "nope"][..], 1, "nope"),
        (&["info", "x?force=true"][..], 1, "is not a skill name"),
        (&["remove", "../etc"][..], 1, "is not a skill name"),
        (
            &["info", "nope", "--to", "http://127.0.0.1:1"][..],
            2,
            "cannot reach",
        ),
    ] {
        let (got, err) = failed(&skilld(data, skills, args));
        assert_eq!(got, Some(code), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let text = stdout(&skilld(data, skills, &["permissions", "bundled-one"]));
    assert!(text.contains("bundled-one declares no permissions"), "{text}");
    assert!(text.contains("grants       none"), "{text}");
}

#[tokio::test]
async fn the_verbs_work_against_a_server_with_its_local_secret() {
    let (data, skills, zips) = (tempdir().unwrap(), tempdir().unwrap(), tempdir().unwrap());
    let (data, skills) = (data.path(), skills.path());
    let zip = hello_zip(zips.path(), "1.2.0");
    let mut child = serve_command(data, skills).env("HOME", data).spawn().unwrap();
    let url = announced_url(&mut child).unwrap();
    let to = ["--to", url.as_str()];
    let with =
        |verb: &[&str]| -> Vec<String> { verb.iter().chain(to.iter()).map(|s| (*s).to_owned()).collect() };
    let cli = |verb: &[&str]| {
        let args = with(verb);
        skilld(data, skills, &args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let out = cli(&["install", zip.to_str().unwrap(), "--trust", "user"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");

    let info = json_of(&cli(&["info", "hello", "--format", "json"]));
    assert_eq!(
        info["skill"]["permissions"],
        json!(["file:read", "net:fetch"]),
        "{info}"
    );
    assert_eq!(info["versions"]["active"], "1.2.0");
    // An approver grants through the API; permissions shows it and revokes it.
    let secret = std::fs::read_to_string(data.join("local-secret")).unwrap();
    let api = crate::common::Api::new(url.clone(), Some(secret.trim()));
    let (status, granted) = api.post("/grants", json!({"skill": "hello"})).await;
    assert_eq!(status, 201, "{granted}");
    let hash = info["skill"]["hash"].as_str().unwrap().to_owned();
    approve_hello_always(data, &hash).await;
    let text = stdout(&cli(&["permissions", "hello"]));
    assert!(text.contains("hello allow at"), "{text}");
    assert!(text.contains(&allowed_always_line(&hash)), "{text}");
    let revoked = json_of(&cli(&["permissions", "hello", "--revoke", "--format", "json"]));
    assert_eq!(revoked["revoked"], 1, "{revoked}");
    assert_eq!(revoked["revoked_skill_approvals"], 1, "{revoked}");
    let standing = api.get("/grants?skill=hello").await.1;
    assert_eq!(
        (&standing["grants"], &standing["skill_approvals"]),
        (&json!([]), &json!([])),
        "{standing}"
    );

    // A wrong token is refused by the server, and nothing is removed.
    let (code, err) = failed(&cli(&["remove", "hello", "--to-token", "wrong"]));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("401"), "{err}");
    assert_eq!(stdout(&cli(&["remove", "hello"])), "removed hello\n");
    assert_eq!(api.get("/skills/hello").await.0, 404);
    terminate(&mut child);
}
