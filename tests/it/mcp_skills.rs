//! Skills as skills, and held calls as tasks, as the official MCP Python
//! SDK (`mcp`, pinned with the other Python requirements) meets them over
//! Streamable HTTP and stdio, in both protocol eras:
//! `tests/python/mcp_skills.py` lists and gets skills through the Skills
//! extension (SEP-2640), reads every file by its `skill://` URI and checks
//! its digest and size, walks the directories, shows that a grant binds to
//! the digests it saw, and drives held calls as tasks (approved, denied
//! with a note, cancelled, another caller's) and as plain waiting results.

use crate::common::{TestServer, options, root, run_script, write_file, write_tree};
use skilld::auth::{Auth, Role, Token};
use skilld::skill::Trust;
use std::path::Path;
use std::time::Duration;

const AGENT: &str = "skills-agent-secret-0123456789";
const OTHER: &str = "skills-other-secret-0123456789";
const BOSS: &str = "skills-boss-secret-0123456789";
const ADMIN: &str = "skills-admin-secret-0123456789";

fn tokens() -> Auth {
    Auth::new(vec![
        Token::with_secret("agent", Role::Invoke, AGENT, "test").unwrap(),
        Token::with_secret("other", Role::Invoke, OTHER, "test").unwrap(),
        Token::with_secret("boss", Role::Approve, BOSS, "test").unwrap(),
        Token::with_secret("admin", Role::Admin, ADMIN, "test").unwrap(),
    ])
    .unwrap()
}

/// `greet` (its SKILL.md stands as written, a reference under
/// `references/`), `stamp` (held for a person), `slow` (`tasks:
/// optional`, sleeps), `summary-only` (a prompt skill with no `name`: its
/// SKILL.md is made), `Bad_Name` (outside the Agent Skills naming rule),
/// and a manifest skill.
fn skills(dir: &Path) {
    crate::common::greet_skill(dir);
    write_file(&dir.join("greet/references/deep/more.md"), "More on greeting.\n");
    write_file(
        &dir.join("greet/assets/template.json"),
        "{\"greeting\": \"hello\"}\n",
    );
    crate::common::stamp_skill(dir);
    write_tree(
        dir,
        &[
            ("stamp/references/policy.md", "Stamp once.\n"),
            (
                "slow/SKILL.md",
                "---\nname: slow\nversion: 1.0.0\ndescription: Sleeps, then says so.\nread_only: true\n\
         tasks: optional\n---\n\nUse {baseDir}/notes.md.\n\n### slow\n\nSleeps a while.\n\n#### Parameters\n\n\
         | Name | Type | Required | Description |\n|---|---|---|---|\n\
         | seconds | string | yes | How long. |\n\n#### Command\n\n```\nsh -c 'sleep \"$0\"; echo slept' {{seconds}}\n```\n",
            ),
            (
                "summary-only/SKILL.md",
                "---\nsummary: Review a change, risks first.\ncommand: review-it\n---\n\nLook at the diff.\n",
            ),
            (
                "echo-manifest/SKILL.yaml",
                "name: echo-manifest\nversion: 1.0.0\ndescription: Echoes, from a manifest.\ntypes: [tool]\n\
         prompt:\n  system_prompt_file: system.md\n\
         implementation:\n  backend: starlark\n  entrypoint: skill.star\n\
         tools:\n  - name: echo_back\n    description: Echoes its text.\n    input_schema:\n\
         \x20     type: object\n      properties:\n        text: {type: string}\n",
            ),
            (
                "echo-manifest/skill.star",
                "def echo_back(args):\n    return args.get(\"text\", \"\")\n\n\
         register_tool(name = \"echo_back\", description = \"Echoes its text.\", \
         parameters = {\"type\": \"object\"}, handler = echo_back)\n",
            ),
            (
                "echo-manifest/system.md",
                "Echo what you are given; see {baseDir}/notes.md.\n",
            ),
            ("echo-manifest/notes.md", "Echo exactly.\n"),
            (
                "Bad_Name/SKILL.md",
                "---\nname: Bad_Name\ndescription: Not an Agent Skills name.\n---\n\nNothing.\n",
            ),
        ],
    );
}

async fn python(args: &[&str], env: &[(&str, String)]) {
    let mut all: Vec<(&str, &str)> = vec![
        ("SKILLD_TEST_AGENT", AGENT),
        ("SKILLD_TEST_OTHER", OTHER),
        ("SKILLD_TEST_BOSS", BOSS),
        ("SKILLD_TEST_ADMIN", ADMIN),
    ];
    all.extend(env.iter().map(|(k, v)| (*k, v.as_str())));
    run_script("mcp_skills.py", args, &all, Duration::from_secs(300)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skills_and_tasks_over_streamable_http() {
    let root_dir = crate::common::tempdir().unwrap();
    skills(root_dir.path());
    let out = crate::common::marks_dir();
    let server = TestServer::builder(options(vec![root(root_dir.path(), Trust::Bundled)]))
        .auth(tokens())
        .start()
        .await;
    let env = [
        (
            "SKILLD_TEST_MARKER",
            out.path().join("stamps").display().to_string(),
        ),
        ("SKILLD_TEST_SKILLS", root_dir.path().display().to_string()),
    ];
    python(&["http", server.url("").trim_end_matches('/')], &env).await;
}

/// `skilld mcp` on stdio serves the same extension, from the same files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skills_over_stdio() {
    let root_dir = crate::common::tempdir().unwrap();
    skills(root_dir.path());
    let data = crate::common::tempdir().unwrap();
    let args = [
        "stdio",
        env!("CARGO_BIN_EXE_skilld"),
        &root_dir.path().display().to_string(),
        &data.path().display().to_string(),
    ];
    let args: Vec<&str> = args.iter().map(std::convert::AsRef::as_ref).collect();
    python(&args, &[]).await;
}

/// `skilld mcp --client-approval`: the person at the client decides their
/// own held calls there (an elicitation answered by the SDK's callback, on
/// 2025-11-25 and through `input_required` on 2026-07-28), recorded as
/// theirs; without the flag, nobody asks them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_local_user_decides_in_their_client() {
    let root_dir = crate::common::tempdir().unwrap();
    skills(root_dir.path());
    let data = crate::common::tempdir().unwrap();
    let out = crate::common::marks_dir();
    let args = [
        "in-client",
        env!("CARGO_BIN_EXE_skilld"),
        &root_dir.path().display().to_string(),
        &data.path().display().to_string(),
        &out.path().join("stamps").display().to_string(),
    ];
    let args: Vec<&str> = args.iter().map(std::convert::AsRef::as_ref).collect();
    python(&args, &[]).await;
}

/// Over HTTP: a token named in `client_approval` decides its own held
/// calls in its client (another token's wait for the inbox), and
/// `mcp_load_skill_tool` offers `load_skill`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_marked_token_decides_in_its_client_and_load_skill_loads() {
    let root_dir = crate::common::tempdir().unwrap();
    skills(root_dir.path());
    let out = crate::common::marks_dir();
    let settings = skilld::invoke::RunSettings {
        client_approval: vec!["agent".to_owned()],
        mcp_load_skill_tool: true,
        ..Default::default()
    };
    let data = crate::common::tempdir().unwrap();
    let store = crate::common::test_store(data.path()).await;
    let opts = options(vec![root(root_dir.path(), Trust::Bundled)]);
    let server = TestServer::builder(opts)
        .settings(settings)
        .store(store, data)
        .auth(tokens())
        .start()
        .await;
    let env = [(
        "SKILLD_TEST_MARKER",
        out.path().join("stamps").display().to_string(),
    )];
    python(&["marked", server.url("").trim_end_matches('/')], &env).await;
}
