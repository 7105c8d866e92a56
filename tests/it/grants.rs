//! Grants given ahead of any call (issue 29, "Pre-approval and grants"):
//! `POST /grants`, `GET /grants?skill=`, `DELETE /grants?skill=`, and the
//! operator's `[[grants]]` and `--approve-skill` at start-up. Each test
//! checks what ran through the marker file the tool appends to.

use crate::common::{
    AGENT, Api, BOSS, CAROL, TestServer, announced_url, held, mark_skill, marks, options, ran, root,
    serve_command, tempdir, terminate, tokens,
};
use serde_json::{Value, json};
use skilld::skill::Trust;
use std::path::Path;

/// A server with tokens (agent: invoke; boss, carol: approve) over two
/// bundled skills that ask: `guarded` and `other`.
async fn server(skills: &Path) -> TestServer {
    mark_skill(skills, "guarded", "");
    mark_skill(skills, "other", "");
    TestServer::builder(options(vec![root(skills, Trust::Bundled)]))
        .auth(tokens())
        .start()
        .await
}

fn skills_of(list: &Value) -> Vec<(String, String, String)> {
    list["grants"]
        .as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .map(|g| {
            let text = |k: &str| g[k].as_str().unwrap_or_default().to_owned();
            (text("skill"), text("tool"), text("decision"))
        })
        .collect()
}

#[tokio::test]
async fn an_approver_grants_ahead_lists_by_skill_and_revokes_a_skills_grants() {
    let skills = tempdir().unwrap();
    let server = server(skills.path()).await;
    let base = Api::of(&server);
    let (agent, carol) = (base.as_(AGENT), base.as_(CAROL));
    let out = crate::common::marks_dir();
    let file = out.path().join("m");
    let hash = agent.get("/skills/guarded").await.1["hash"].clone();
    assert!(hash.is_string(), "{hash}");

    // Without a grant the call waits for a person.
    let (status, body) = agent.call("guarded", &file).await;
    held(status, &body);
    // Carol grants every tool of guarded, at the hash she reviewed.
    let (status, granted) = carol
        .post("/grants", json!({"skill": "guarded", "skill_hash": hash}))
        .await;
    assert_eq!(status, 201, "{granted}");
    assert_eq!(
        skills_of(&granted),
        [("guarded".into(), "guarded".into(), "allow".into())]
    );
    assert_eq!(granted["grants"][0]["created_by"], "carol");
    assert_eq!(granted["grants"][0]["skill_hash"], hash);
    let (status, body) = agent.call("guarded", &file).await;
    ran(status, &body);
    assert_eq!(marks(&file), 1);

    // A deny of other, listed apart.
    let (status, denied) = carol
        .post(
            "/grants",
            json!({"skill": "other", "tool": "other", "decision": "deny"}),
        )
        .await;
    assert_eq!(status, 201, "{denied}");
    let (status, refused) = agent.call("other", &file).await;
    assert_eq!((status, &refused["code"]), (403, &json!("denied")), "{refused}");
    let (_, mine) = agent.get("/grants?skill=guarded").await;
    assert_eq!(skills_of(&mine).len(), 1, "{mine}");
    assert_eq!(skills_of(&mine)[0].0, "guarded");
    let (_, all) = agent.get("/grants").await;
    assert_eq!(skills_of(&all).len(), 2, "{all}");
    let (_, none) = agent.get("/grants?skill=nothing").await;
    assert_eq!(none["grants"], json!([]));

    // Revoking guarded's grants takes back that one only; it asks again.
    let revoke = |skill: &str| carol.req(reqwest::Method::DELETE, &format!("/grants?skill={skill}"));
    let (status, revoked) = Api::send(revoke("guarded")).await;
    assert_eq!((status, &revoked["revoked"]), (200, &json!(1)), "{revoked}");
    let (status, again) = Api::send(revoke("guarded")).await;
    assert_eq!((status, &again["revoked"]), (200, &json!(0)), "{again}");
    let (_, left) = agent.get("/grants").await;
    assert_eq!(
        skills_of(&left),
        [("other".into(), "other".into(), "deny".into())]
    );
    let (status, body) = agent.call("guarded", &file).await;
    held(status, &body);
    assert_eq!(marks(&file), 1);
}

#[tokio::test]
async fn a_grant_is_refused_clearly_and_nothing_is_half_recorded() {
    let skills = tempdir().unwrap();
    let server = server(skills.path()).await;
    let base = Api::of(&server);
    let (agent, carol) = (base.as_(AGENT), base.as_(CAROL));
    let refused = |(status, problem): (u16, Value)| (status, problem["code"].as_str().map(str::to_owned));

    // The invoke role may not grant, nor revoke.
    assert_eq!(
        refused(agent.post("/grants", json!({"skill": "guarded"})).await),
        (403, Some("forbidden".to_owned()))
    );
    let (status, _) = Api::send(agent.req(reqwest::Method::DELETE, "/grants?skill=guarded")).await;
    assert_eq!(status, 403);
    for (body, want) in [
        (json!({"skill": "nope"}), (404, "not_found")),
        (json!({"skill": "guarded", "tool": "nope"}), (404, "not_found")),
        (
            json!({"skill": "guarded", "skill_hash": "0".repeat(64)}),
            (409, "hash_mismatch"),
        ),
        (
            json!({"skill": "guarded", "decision": "maybe"}),
            (400, "bad_request"),
        ),
        (
            json!({"skill": "guarded", "scope": "always"}),
            (400, "bad_request"),
        ),
        (json!({"tool": "guarded"}), (400, "bad_request")),
    ] {
        let (status, problem) = carol.post("/grants", body.clone()).await;
        assert_eq!(
            (status, problem["code"].as_str().unwrap_or_default()),
            want,
            "{body}: {problem}"
        );
    }
    let (status, problem) = Api::send(carol.req(reqwest::Method::DELETE, "/grants")).await;
    assert_eq!(status, 400, "{problem}");
    assert!(
        problem["detail"].as_str().unwrap().contains("'skill'"),
        "{problem}"
    );
    let long = "a".repeat(65);
    assert_eq!(agent.get(&format!("/grants?skill={long}")).await.0, 400);
    let (status, _) = Api::send(carol.req(reqwest::Method::DELETE, &format!("/grants?skill={long}"))).await;
    assert_eq!(status, 400);
    let (_, all) = agent.get("/grants").await;
    assert_eq!(all["grants"], json!([]), "a refused grant left {all}");
}

/// The attack: an approver token that is also an agent grants its own
/// tool ahead of time, then calls it. Its own grant does not stand in for
/// a person; another approver's does.
#[tokio::test]
async fn an_approvers_own_grant_does_not_cover_its_own_calls() {
    let skills = tempdir().unwrap();
    let server = server(skills.path()).await;
    let base = Api::of(&server);
    let (boss, carol) = (base.as_(BOSS), base.as_(CAROL));
    let out = crate::common::marks_dir();
    let file = out.path().join("m");

    let (status, granted) = boss.post("/grants", json!({"skill": "guarded"})).await;
    assert_eq!(status, 201, "{granted}");
    let (status, body) = boss.call("guarded", &file).await;
    let body = held(status, &body);
    assert_eq!(marks(&file), 0, "its own grant ran its call");
    // The grant still covers everyone else's calls.
    let (status, body2) = carol.call("guarded", &file).await;
    ran(status, &body2);
    assert_eq!(marks(&file), 1);
    // Carol's grant (replacing boss's) covers boss.
    let (status, _) = carol.post("/grants", json!({"skill": "guarded"})).await;
    assert_eq!(status, 201);
    let (status, body3) = boss.call("guarded", &file).await;
    ran(status, &body3);
    assert_eq!(marks(&file), 2);
    // The held call still waits for a person other than boss.
    let (status, problem) = boss.approve(&body["approval_id"], "once").await;
    assert_eq!((status, &problem["code"]), (403, &json!("self_approval")));
}

#[tokio::test]
async fn a_grant_binds_to_the_hash_it_was_given_for() {
    let skills = tempdir().unwrap();
    let server = server(skills.path()).await;
    let base = Api::of(&server);
    let (agent, carol) = (base.as_(AGENT), base.as_(CAROL));
    let out = crate::common::marks_dir();
    let file = out.path().join("m");
    let (status, _) = carol.post("/grants", json!({"skill": "guarded"})).await;
    assert_eq!(status, 201);
    let (status, body) = agent.call("guarded", &file).await;
    ran(status, &body);

    // The skill changes: the grant was of the old version.
    let md = skills.path().join("guarded/SKILL.md");
    let text = std::fs::read_to_string(&md).unwrap();
    std::fs::write(&md, text.replace("Leaves a mark.", "Leaves a mark, and more.")).unwrap();
    server.catalog.reload();
    let (status, body) = agent.call("guarded", &file).await;
    held(status, &body);
    assert_eq!(marks(&file), 1);
}

/// `skilld serve` with `--approve-skill` and `[[grants]]`: the calls they
/// cover run without a person, the grants say who gave them, and the log
/// says which bound to the version loaded at start-up.
#[tokio::test]
async fn pre_approvals_of_the_config_and_the_flag_bind_at_start_up() {
    let (skills, data) = (tempdir().unwrap(), tempdir().unwrap());
    mark_skill(skills.path(), "guarded", "");
    mark_skill(skills.path(), "other", "");
    mark_skill(skills.path(), "third", "");
    let config = data.path().join("skilld.toml");
    std::fs::write(
        &config,
        "[[grants]]\nskill = \"other\"\ntool = \"other\"\ndecision = \"deny\"\n",
    )
    .unwrap();
    let mut child = serve_command(data.path(), skills.path())
        .arg("--config")
        .arg(&config)
        .args(["--approve-skill", "guarded"])
        .env("SKILLD_LOG", "info")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let url = announced_url(&mut child).unwrap();
    let secret = std::fs::read_to_string(data.path().join("local-secret")).unwrap();
    let api = Api::new(url, Some(secret.trim()));
    let out = crate::common::marks_dir();
    let file = out.path().join("m");

    let (status, body) = api.call("guarded", &file).await;
    ran(status, &body);
    let (status, refused) = api.call("other", &file).await;
    assert_eq!((status, &refused["code"]), (403, &json!("denied")), "{refused}");
    let (status, body) = api.call("third", &file).await;
    held(status, &body);
    let (_, grants) = api.get("/grants").await;
    let by: Vec<(&str, &str)> = grants["grants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| (g["skill"].as_str().unwrap(), g["created_by"].as_str().unwrap()))
        .collect();
    assert!(by.contains(&("guarded", "config:--approve-skill")), "{grants}");
    assert!(by.contains(&("other", "config:[[grants]]")), "{grants}");
    terminate(&mut child);
    let mut log = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut log).unwrap();
    assert!(
        log.contains(
            "pre-approval guarded (--approve-skill) gave no hash: it binds to the version loaded now"
        ),
        "{log}"
    );
}

/// A pre-approval that names nothing loaded stops the server at start-up,
/// saying which: a headless server would hold calls nobody decides.
#[test]
fn a_pre_approval_of_nothing_loaded_stops_start_up() {
    let (skills, data) = (tempdir().unwrap(), tempdir().unwrap());
    mark_skill(skills.path(), "guarded", "");
    for (flag, says) in [
        ("gaurded", "pre-approval gaurded (--approve-skill)"),
        (
            "guarded:nope",
            "pre-approval guarded:nope (--approve-skill): tool 'guarded/nope' not found",
        ),
        (
            "guarded:",
            "--approve-skill 'guarded:': expected NAME or NAME:TOOL",
        ),
    ] {
        let output = serve_command(data.path(), skills.path())
            .args(["--approve-skill", flag])
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        assert!(!output.status.success(), "{flag}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(says), "{flag}: {stderr}");
    }
}
