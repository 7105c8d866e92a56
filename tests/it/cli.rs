//! The command line of `docs/api.md`, run as a script would run it.

use crate::common::{bundled_dir, corpus_dir, serve, skilld, stop};
use serde_json::Value;
use std::process::Command;

#[test]
fn check_prints_compiler_style_and_fails_on_errors() {
    let out = skilld()
        .arg("check")
        .arg(corpus_dir().join("invalid"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let line = stdout.lines().find(|l| l.contains("bad-version")).unwrap();
    let path = corpus_dir().join("invalid/bad-version/SKILL.md");
    assert_eq!(
        line,
        format!(
            "{}:3:1: error[invalid_version]: version '1.0' is not a semantic version such as 1.0.0",
            path.display()
        )
    );
    assert!(
        stdout
            .lines()
            .all(|l| l.contains(": error[") || l.contains(": warning[")),
        "{stdout}"
    );
    assert!(String::from_utf8(out.stderr).unwrap().contains("errors"));
}

#[test]
fn check_json_and_clean_skills() {
    let out = skilld()
        .args(["check", "--format", "json"])
        .arg(corpus_dir().join("invalid/unknown-placeholder"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["errors"], 1);
    assert_eq!(v["diagnostics"][0]["code"], "unknown_parameter");
    assert_eq!(v["diagnostics"][0]["line"], 20);

    let out = skilld().arg("check").arg(bundled_dir()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(out.stdout.is_empty());
    let out = skilld()
        .arg("check")
        .arg(corpus_dir().join("valid/git"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let out = skilld()
        .arg("check")
        .arg("/definitely/not/here")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn tools_exports_without_a_server() {
    let out = skilld()
        .args(["tools", "--format", "openai", "--skills"])
        .arg(format!("bundled={}", corpus_dir().join("valid").display()))
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["function"]["name"] == "git_log")
    );

    let out = skilld()
        .args(["tools", "--format", "prompt", "--mode", "Meeting", "--skills"])
        .arg(corpus_dir().join("valid"))
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("- git_status: "), "{text}");
    assert!(!text.contains("deploy_preview"));

    let out = skilld().args(["tools", "--format", "yaml"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[tokio::test]
async fn serve_on_port_zero_answers_and_stops_on_sigterm() {
    let data = crate::common::tempdir().unwrap();
    let (child, addr) = serve(
        skilld()
            .args(["serve", "--bind", "127.0.0.1:0", "--data-dir"])
            .arg(data.path())
            .arg("--skills")
            .arg(format!("bundled={}", bundled_dir().display())),
    );
    let skills: Value = reqwest::get(format!("http://{addr}/skills"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        skills["skills"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == "git" && s["trust"] == "bundled")
    );
    assert!(stop(child).success());
}

#[tokio::test]
async fn flags_beat_environment_beats_file() {
    let dir = crate::common::tempdir().unwrap();
    let config = dir.path().join("skilld.toml");
    std::fs::write(
        &config,
        format!(
            "bind = \"256.0.0.1:1\"\nskills = [\"untrusted={}\"]\ndata_dir = \"{}\"\n",
            bundled_dir().display(),
            dir.path().display()
        ),
    )
    .unwrap();
    // The environment's bind beats the file's (which is not even valid).
    let (child, addr) = serve(
        skilld()
            .arg("serve")
            .arg("--config")
            .arg(&config)
            .env("SKILLD_BIND", "127.0.0.1:0"),
    );
    let git: Value = reqwest::get(format!("http://{addr}/skills/git"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(git["trust"], "untrusted", "the file's skills apply");
    assert!(stop(child).success());

    // The flag beats the environment.
    let (child, addr) = serve(
        skilld()
            .args(["serve", "--bind", "127.0.0.1:0", "--config"])
            .arg(&config)
            .env("SKILLD_BIND", "not an address")
            .env("SKILLD_SKILLS", format!("user={}", bundled_dir().display())),
    );
    let git: Value = reqwest::get(format!("http://{addr}/skills/git"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(git["trust"], "user", "the environment's skills beat the file's");
    assert!(stop(child).success());
}

#[test]
fn a_public_bind_without_tokens_refuses_to_start() {
    let out = skilld()
        .args(["serve", "--bind", "0.0.0.0:0", "--skills"])
        .arg(bundled_dir())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--insecure"));
}

/// A bundled read-only skill whose tool sleeps, in a fresh root.
fn sleeper(dir: &std::path::Path) {
    let skill = dir.join("sleeper");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: sleeper\nversion: 1.0.0\ndescription: Sleeps.\nread_only: true\n---\n\n### nap\n\nSleeps a while.\n\n\
         #### Parameters\n\nNone.\n\n#### Command\n\n```\nsleep 3\n```\n\n### quick\n\nAnswers at once.\n\n\
         #### Parameters\n\nNone.\n\n#### Command\n\n```\necho done\n```\n",
    )
    .unwrap();
}

/// One server per SQLite file: a second is refused with a sentence, and
/// `skilld run` beside a server neither needs the claim nor marks the
/// server's live runs interrupted.
#[tokio::test]
async fn one_server_per_sqlite_file_and_run_beside_it() {
    let data = crate::common::tempdir().unwrap();
    let skills = crate::common::tempdir().unwrap();
    sleeper(skills.path());
    let with_data = |cmd: &mut Command| {
        cmd.arg("--data-dir")
            .arg(data.path())
            .arg("--skills")
            .arg(format!("bundled={}", skills.path().display()));
    };
    let mut first = skilld();
    first.args(["serve", "--bind", "127.0.0.1:0", "--no-watch"]);
    with_data(&mut first);
    let (child, addr) = serve(&mut first);

    let mut second = skilld();
    second.args(["serve", "--bind", "127.0.0.1:0", "--no-watch"]);
    with_data(&mut second);
    let out = second.output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("another skilld serve already uses"), "{stderr}");

    // A long run on the server, then `skilld run` on the same run log.
    let accepted: Value = reqwest::Client::new()
        .post(format!("http://{addr}/tools/nap/invoke"))
        .header("prefer", "respond-async")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let run_id = accepted["run_id"].as_str().unwrap().to_owned();
    let mut run = skilld();
    run.args(["run", "quick"]);
    with_data(&mut run);
    let out = run.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let envelope: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(envelope["output"], "done\n");

    let finished: Value = reqwest::get(format!("http://{addr}/runs/{run_id}?wait=30"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        finished["status"], "succeeded",
        "the server's run was left alone: {finished}"
    );
    assert!(stop(child).success());
}
