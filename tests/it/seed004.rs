//! Seed 004's definition of done (§8), performed against a real server
//! with the seed's canonical example (§7) verbatim: the loader parses
//! frontmatter deterministically, eligibility filters, command dispatch is
//! deterministic, malformed skills are excluded safely, the canonical
//! example loads and executes, and `/skills`, `/skill` and `/plan` behave
//! as defined.

use crate::common::{Api, TestServer, copy_tree, corpus_dir, options, root, write_file, write_tree};
use serde_json::{Value, json};
use skilld::skill::Trust;
use std::path::Path;

/// The seed's canonical example, as §7 gives it.
fn canonical() -> std::path::PathBuf {
    corpus_dir().join("valid/plan_compiler")
}

/// The instructions the canonical example must answer: its body, whole.
fn canonical_body() -> String {
    let text = std::fs::read_to_string(canonical().join("SKILL.md")).unwrap();
    let body = text.splitn(3, "---\n").nth(2).unwrap();
    body.trim_start_matches('\n').to_owned()
}

/// `skills/` as the seed lays it out, with the canonical example, a
/// `tool_dispatch` skill and its tool (`say`, read-only, so it runs without
/// asking), and one skill for each reason §6 gives to exclude one.
fn seed_root(dir: &Path) {
    copy_tree(&canonical(), &dir.join("plan_compiler"));
    write_file(
        &dir.join("speaker/SKILL.md"),
        "---\nname: speaker\nversion: 1.0.0\ndescription: Says things.\nread_only: true\n---\n\n\
         ### say\n\nPrints its text.\n\n#### Parameters\n\n| Name | Type | Required | Description |\n\
         |---|---|---|---|\n| text | string | yes | What to say. |\n\n#### Command\n\n```\necho {{text}}\n```\n",
    );
    write_file(
        &dir.join("announce/SKILL.md"),
        "---\nsummary: Announces deterministically.\ninvocation_mode: tool_dispatch\ncommand: announce\n\
         command_tool: say\nrequires_tools: [say]\nignored_key: anything\n---\n\n# Announce\n\nNever read.\n",
    );
    // §6, one each: no SKILL.md, invalid YAML, tool_dispatch without
    // command_tool, a command_tool no skill has, a command that is a
    // built-in, and each eligibility condition failing.
    write_tree(
        dir,
        &[
            ("no-definition/assets/readme.txt", "not a skill\n"),
            (
                "bad-yaml/SKILL.md",
                "---\nsummary: [unclosed\ncommand: bad\n---\n\n# Bad\n",
            ),
            (
                "no-tool/SKILL.md",
                "---\nsummary: Dispatches nothing.\ninvocation_mode: tool_dispatch\ncommand: notool\n---\n\n# No tool\n",
            ),
            (
                "ghost-tool/SKILL.md",
                "---\nsummary: Dispatches a ghost.\ninvocation_mode: tool_dispatch\ncommand: ghost\ncommand_tool: no_such_tool\n---\n\n# Ghost\n",
            ),
            (
                "takes-builtin/SKILL.md",
                "---\nsummary: Takes a built-in.\ncommand: skills\n---\n\n# Takes /skills\n",
            ),
            (
                "windows-only/SKILL.md",
                "---\nsummary: Windows only.\ncommand: win\neligibility:\n  os: [win32]\n---\n\n# Windows\n",
            ),
            (
                "needs-env/SKILL.md",
                "---\nsummary: Needs a variable.\neligibility:\n  env: [SKILLD_SEED004_NEVER_SET]\n---\n\n# Env\n",
            ),
            (
                "needs-binary/SKILL.md",
                "---\nsummary: Needs a program.\neligibility:\n  binaries: [skilld-seed004-no-such-program]\n---\n\n# Binary\n",
            ),
        ],
    );
}

async fn start(dir: &Path) -> TestServer {
    TestServer::builder(options(vec![root(dir, Trust::Bundled)]))
        .start()
        .await
}

async fn command(server: &TestServer, path: &str, body: Value) -> (u16, Value) {
    Api::anonymous(server).post(path, body).await
}

fn names(list: &Value) -> Vec<&str> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().or(s["skill"].as_str()).unwrap())
        .collect()
}

#[tokio::test]
async fn the_canonical_example_loads_and_executes() {
    let dir = crate::common::tempdir().unwrap();
    seed_root(dir.path());
    let server = start(dir.path()).await;

    let detail = server.get_json("/skills/plan_compiler").await;
    assert_eq!(
        detail["description"],
        "Convert conversation into a structured implementation plan."
    );
    assert_eq!(detail["invocation_mode"], "prompt_rewrite");
    assert_eq!(detail["command"], "plan");
    assert_eq!(detail["requires_tools"], json!(["read", "write"]));
    assert_eq!(
        detail["eligibility"],
        json!({"os": ["darwin", "linux", "win32"], "env": [], "binaries": []})
    );
    let body = canonical_body();
    assert!(body.starts_with("# Plan Compiler\n\nYou are the Plan Compiler skill."));
    assert!(body.contains("5. Do not execute filesystem changes unless explicitly requested."));
    assert!(
        body.ends_with("- [ ] Step 2\n```\n"),
        "the whole example, to its last fence"
    );
    assert_eq!(detail["instructions"], body);

    // `/plan` executes it: prompt_rewrite answers its instructions, and
    // nothing runs.
    let (status, plan) = command(&server, "/commands/plan", json!({})).await;
    assert_eq!(status, 200, "{plan}");
    assert_eq!(
        plan,
        json!({"skill": "plan_compiler", "instructions": body, "references": []})
    );
    // `/plan` is `/skill plan_compiler`.
    let (status, by_name) = command(
        &server,
        "/commands/skill",
        json!({"arguments": {"name": "plan_compiler"}}),
    )
    .await;
    assert_eq!((status, &by_name), (200, &plan));
    assert_eq!(server.get_json("/runs").await["runs"], json!([]));

    // `/skills` is the available skills index: what loaded, with its
    // summary and what it requires.
    let (status, index) = command(&server, "/commands/skills", json!({})).await;
    assert_eq!(status, 200, "{index}");
    assert_eq!(names(&index["skills"]), ["announce", "plan_compiler", "speaker"]);
    let entry = &index["skills"][1];
    assert_eq!(entry["description"], detail["description"]);
    assert_eq!(entry["requires_tools"], json!(["read", "write"]));
    assert_eq!(index["excluded"], json!([]));
    assert_eq!(
        index,
        server.get_json("/skills").await,
        "the same index as GET /skills"
    );
}

#[tokio::test]
async fn malformed_and_ineligible_skills_are_excluded_with_their_reasons() {
    let dir = crate::common::tempdir().unwrap();
    seed_root(dir.path());
    let server = start(dir.path()).await;
    assert_eq!(
        server.get_json("/healthz").await["status"],
        "ok",
        "the loader did not crash"
    );
    let listed = server.get_json("/skills").await;
    assert_eq!(names(&listed["skills"]), ["announce", "plan_compiler", "speaker"]);

    let diagnostics = server.get_json("/diagnostics").await;
    let reason = |skill: &str| -> Vec<(String, String)> {
        diagnostics["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["skill"] == skill)
            .map(|d| {
                (
                    d["severity"].as_str().unwrap().to_owned(),
                    d["code"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    let error = |code: &str| vec![("error".to_owned(), code.to_owned())];
    assert_eq!(
        reason("no-definition"),
        [("warning".to_owned(), "not_a_skill".to_owned())]
    );
    assert_eq!(reason("bad-yaml"), error("invalid_yaml"));
    assert_eq!(reason("no-tool"), error("missing_command_tool"));
    assert_eq!(reason("ghost-tool"), error("unknown_command_tool"));
    assert_eq!(reason("takes-builtin"), error("command_collision"));
    assert_eq!(reason("windows-only"), error("ineligible"));
    assert_eq!(reason("needs-env"), error("ineligible"));
    assert_eq!(reason("needs-binary"), error("ineligible"));
    // Unknown keys are ignored: the skill loads, with a warning.
    assert_eq!(
        reason("announce"),
        [("warning".to_owned(), "unknown_field".to_owned())]
    );

    // None of them is reachable as a command, by alias or by name, and
    // none takes a built-in's place.
    let commands = server.get_json("/commands").await;
    let aliases: Vec<&str> = commands["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["command"].as_str().unwrap())
        .collect();
    assert_eq!(aliases, ["announce", "plan"]);
    assert_eq!(commands["builtin"], json!(["help", "skill", "skills"]));
    for alias in ["bad", "notool", "ghost", "win"] {
        let (status, problem) = command(&server, &format!("/commands/{alias}"), json!({})).await;
        assert_eq!(
            (status, problem["code"].as_str()),
            (404, Some("not_found")),
            "/{alias}"
        );
    }
    // `/skill NAME` of an excluded skill fails, saying why.
    for (name, why) in [
        ("windows-only", "(ineligible)"),
        ("bad-yaml", "(invalid_yaml)"),
        ("no-definition", "not found"),
    ] {
        let (status, problem) =
            command(&server, "/commands/skill", json!({"arguments": {"name": name}})).await;
        assert_eq!(
            (status, problem["code"].as_str()),
            (404, Some("not_found")),
            "/skill {name}"
        );
        let detail = problem["detail"].as_str().unwrap();
        assert!(
            detail.contains(&format!("'{name}'")) && detail.contains(why),
            "{problem}"
        );
    }
    let (status, index) = command(&server, "/commands/skills", json!({})).await;
    assert_eq!(status, 200);
    assert_eq!(names(&index["skills"]), ["announce", "plan_compiler", "speaker"]);
}

#[tokio::test]
async fn commands_dispatch_deterministically() {
    let dir = crate::common::tempdir().unwrap();
    seed_root(dir.path());
    let server = start(dir.path()).await;

    // tool_dispatch: `/announce` invokes `say` itself, not the model.
    let (status, envelope) = command(
        &server,
        "/commands/announce",
        json!({"arguments": {"text": "hello"}}),
    )
    .await;
    assert_eq!(status, 200, "{envelope}");
    assert_eq!(
        (&envelope["skill"], &envelope["tool"], &envelope["output"]),
        (&json!("speaker"), &json!("say"), &json!("hello\n"))
    );
    let run = server
        .get_json(&format!("/runs/{}", envelope["run_id"].as_str().unwrap()))
        .await;
    assert_eq!(
        (&run["tool"], &run["arguments"]),
        (&json!("say"), &json!({"text": "hello"}))
    );
    // `/skill announce` is the same command, its arguments under `arguments`.
    let (status, by_name) = command(
        &server,
        "/commands/skill",
        json!({"arguments": {"name": "announce", "arguments": {"text": "again"}}}),
    )
    .await;
    assert_eq!(
        (status, &by_name["tool"], &by_name["output"]),
        (200, &json!("say"), &json!("again\n"))
    );

    // Exact names only: no prefix, no case folding, no alias for a name.
    for path in ["/commands/pla", "/commands/Plan", "/commands/plan_compiler"] {
        let (status, problem) = command(&server, path, json!({})).await;
        assert_eq!(
            (status, problem["code"].as_str()),
            (404, Some("not_found")),
            "{path}"
        );
    }
    for name in ["plan", "Plan_Compiler", "plan-compiler"] {
        let (status, _) = command(&server, "/commands/skill", json!({"arguments": {"name": name}})).await;
        assert_eq!(status, 404, "/skill {name}");
    }

    // Each built-in says clearly what it takes.
    let (status, problem) = command(&server, "/commands/skill", json!({})).await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (422, Some("invalid_arguments"))
    );
    assert_eq!(problem["errors"][0]["field"], "name");
    let (status, problem) = command(
        &server,
        "/commands/skill",
        json!({"arguments": {"name": "plan_compiler", "extra": 1}}),
    )
    .await;
    assert_eq!((status, &problem["errors"][0]["field"]), (422, &json!("extra")));
    let (status, problem) = command(&server, "/commands/skills", json!({"arguments": {"q": "x"}})).await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (422, Some("invalid_arguments"))
    );

    // `/help` lists the commands, as GET /commands does.
    let (status, help) = command(&server, "/commands/help", json!({})).await;
    assert_eq!(status, 200);
    assert_eq!(help, server.get_json("/commands").await);
}

#[tokio::test]
async fn the_loader_gives_the_same_skill_every_time() {
    let dir = crate::common::tempdir().unwrap();
    seed_root(dir.path());
    let server = start(dir.path()).await;
    let first = server.get_json("/skills/plan_compiler").await;
    let diagnostics = server.get_json("/diagnostics").await;
    for _ in 0..3 {
        server.reload().await;
        assert_eq!(server.get_json("/skills/plan_compiler").await, first);
        assert_eq!(server.get_json("/diagnostics").await, diagnostics);
    }
    // A second loader over the same files agrees.
    let other = start(dir.path()).await;
    assert_eq!(other.get_json("/skills/plan_compiler").await, first);
}
