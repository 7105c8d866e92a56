//! Seed 002's SDK permissions and per-turn limits, through a real server
//! and real Starlark skills: `exec` and `fetch` stop at the turn's limit
//! (`[limits]`), `git` needs `git:read` or `git:write` by subcommand and
//! `exec` of git needs them too, `set_env` reaches only the evaluation's
//! own children, and `llm` and `invoke_tool` fail clearly outside a
//! session.

use crate::common::{TestServer, call, fails_with, marks_dir, options, root, star_skill, tempdir};
use serde_json::json;
use skilld::invoke::RunSettings;
use skilld::skill::Trust;
use std::path::Path;
use std::process::Command;

async fn server_with(settings: RunSettings, write: impl FnOnce(&Path)) -> (TestServer, tempfile::TempDir) {
    let skills = tempdir().unwrap();
    write(skills.path());
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::Bundled)]))
        .settings(settings)
        .allowed()
        .start()
        .await;
    (server, skills)
}

/// The run settings a config file with `toml` gives.
fn configured(toml: &str) -> RunSettings {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("skilld.toml");
    std::fs::write(&file, toml).unwrap();
    let args = skilld::config::ServeArgs {
        local: skilld::config::LocalArgs {
            config: Some(file),
            ..Default::default()
        },
        ..Default::default()
    };
    let config = skilld::config::Config::resolve(&args).unwrap();
    RunSettings {
        turn_limits: config.run.turn_limits,
        ..RunSettings::default()
    }
}

#[tokio::test]
async fn exec_and_fetch_stop_at_the_turns_limit_and_the_next_call_has_its_own() {
    let settings = configured("[limits]\nshell_execs_per_turn = 2\nnet_fetches_per_turn = 0\n");
    assert_eq!(settings.turn_limits.shell_execs_per_turn, 2);
    let marks = marks_dir();
    let dir = marks.path().display().to_string();
    let script = format!(
        r#"
def touches(args):
    for i in range(args["n"]):
        exec("touch", ["{dir}/" + args["prefix"] + str(i)])
    return "touched"

def get(args):
    return fetch("http://127.0.0.1:9/")

register_tool("touches", "Touches n files.", {{"type": "object"}}, touches)
register_tool("get", "Fetches.", {{"type": "object"}}, get)
"#
    );
    let (server, _skills) = server_with(settings, |root| {
        star_skill(
            root,
            "busy",
            "permissions: [shell:exec, net:fetch]\nnetwork: true\n",
            &script,
        );
    })
    .await;
    fails_with(
        &server,
        "touches",
        json!({"n": 3, "prefix": "a"}),
        "exec is refused: the turn's limit of 2 is spent (shell_execs_per_turn)",
    )
    .await;
    let made = |p: &str| marks.path().join(p).exists();
    assert!(made("a0") && made("a1"), "the first two ran");
    assert!(!made("a2"), "the third ran past the limit");
    // A call outside a session is a turn of its own.
    let again = call(&server, "touches", json!({"n": 2, "prefix": "b"})).await;
    assert_eq!(again["output"], "touched", "{again}");
    fails_with(
        &server,
        "get",
        json!({}),
        "fetch is refused: the turn's limit of 0 is spent (net_fetches_per_turn)",
    )
    .await;
}

/// A git repository in a fresh workspace, with one commit.
fn repository() -> tempfile::TempDir {
    let workspace = tempdir().unwrap();
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .current_dir(workspace.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
    };
    git(&["init", "-q"]);
    std::fs::write(workspace.path().join("readme.md"), "hello\n").unwrap();
    git(&["add", "readme.md"]);
    git(&["commit", "-q", "-m", "the first commit"]);
    workspace
}

fn commits(workspace: &Path) -> String {
    let out = Command::new("git")
        .args(["rev-list", "--all", "--count"])
        .current_dir(workspace)
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

const GIT: &str = r#"
def log(args):
    return git(["log", "--oneline"])

def commit(args):
    return git(["commit", "--allow-empty", "-m", "sneaky"])

def branch(args):
    return git(["branch", "sneaky"])

def option(args):
    return git(["-c", "alias.x=!true", "x"])

def climb(args):
    return git(["status"], cwd = args["cwd"])

def exec_git(args):
    return exec(args["program"], args["args"])

register_tool("glog", "Logs.", {"type": "object"}, log)
register_tool("gcommit", "Commits.", {"type": "object"}, commit)
register_tool("gbranch", "Branches.", {"type": "object"}, branch)
register_tool("goption", "Passes git an option.", {"type": "object"}, option)
register_tool("gexec", "Runs a program.", {"type": "object"}, exec_git)
register_tool("gclimb", "Runs git elsewhere.", {"type": "object"}, climb)
"#;

#[tokio::test]
async fn git_reads_with_git_read_and_writes_nothing_without_git_write() {
    let workspace = repository();
    let settings = RunSettings {
        workspace: workspace.path().to_path_buf(),
        ..RunSettings::default()
    };
    let (server, _skills) = server_with(settings, |root| {
        star_skill(root, "reader", "permissions: [git:read]\n", GIT);
        star_skill(
            root,
            "sheller",
            "permissions: [shell:exec]\n",
            &GIT.replace("\"g", "\"s"),
        );
    })
    .await;
    let log = call(&server, "glog", json!({})).await;
    assert_eq!(log["parsed"]["success"], true, "{log}");
    assert!(
        log["parsed"]["output"]
            .as_str()
            .unwrap()
            .contains("the first commit"),
        "{log}"
    );
    let refused = "git needs the permission 'git:write', which skill 'reader' does not declare";
    fails_with(&server, "gcommit", json!({}), refused).await;
    fails_with(&server, "gbranch", json!({}), refused).await;
    fails_with(&server, "goption", json!({}), "is not a subcommand").await;
    for cwd in ["..", "/", "a/../.."] {
        let says = format!("git: cwd '{cwd}' must be a directory inside the workspace");
        fails_with(&server, "gclimb", json!({"cwd": cwd}), &says).await;
    }
    // `exec` of git needs git's permissions, whatever else it has.
    for (program, args, permission) in [
        ("git", json!(["log"]), "git:read"),
        ("git", json!(["commit", "--allow-empty", "-m", "x"]), "git:write"),
        ("/usr/bin/git", json!(["status"]), "git:read"),
    ] {
        let says = format!("exec of git needs the permission '{permission}', which skill 'sheller'");
        fails_with(&server, "sexec", json!({"program": program, "args": args}), &says).await;
    }
    assert_eq!(commits(workspace.path()), "1", "a commit was made");
    let branches = Command::new("git")
        .args(["branch", "--list", "sneaky"])
        .current_dir(workspace.path())
        .output()
        .unwrap();
    assert!(branches.stdout.is_empty(), "a branch was made");
}

const ENV: &str = r#"
def set_and_run(args):
    set_env("SKILL_VAR_GREETING", "hello from set_env")
    return {"child": exec("printenv", ["SKILL_VAR_GREETING"])["output"], "env": env("SKILL_VAR_GREETING")}

def run(args):
    return exec("printenv", ["SKILL_VAR_GREETING"])

def set_bad(args):
    set_env(args["name"], "/tmp/x")
    return exec("printenv", [args["name"]])

register_tool("set_and_run", "Sets, then runs.", {"type": "object"}, set_and_run)
register_tool("run_only", "Runs.", {"type": "object"}, run)
register_tool("set_bad", "Sets a refused name.", {"type": "object"}, set_bad)
"#;

#[tokio::test]
async fn set_env_reaches_the_evaluations_children_only() {
    let (server, _skills) = server_with(RunSettings::default(), |root| {
        star_skill(
            root,
            "setter",
            "permissions: [shell:exec, env:read, env:write]\n",
            ENV,
        );
        star_skill(
            root,
            "nosetter",
            "permissions: [shell:exec, env:read]\n",
            &ENV.replace("\"set", "\"no_set")
                .replace("\"run_only", "\"no_run_only"),
        );
    })
    .await;
    let set = call(&server, "set_and_run", json!({})).await;
    assert_eq!(
        set["parsed"],
        json!({"child": "hello from set_env\n", "env": "hello from set_env"}),
        "{set}"
    );
    // Not the next call's, and never the server's own.
    let next = call(&server, "run_only", json!({})).await;
    assert_eq!(next["parsed"]["output"], "", "{next}");
    assert_eq!(next["parsed"]["success"], false, "{next}");
    assert!(std::env::var_os("SKILL_VAR_GREETING").is_none());
    for name in [
        "LD_PRELOAD",
        "PATH",
        "GIT_DIR",
        "SKILL_DIR",
        "ld_audit",
        "XDG_CONFIG_HOME",
        "PYTHONPATH",
        "NODE_OPTIONS",
        "VISUAL",
        "GREETING",
        "SKILL_VAR_",
    ] {
        fails_with(&server, "set_bad", json!({"name": name}), "may not be set").await;
    }
    fails_with(
        &server,
        "set_bad",
        json!({"name": "1X"}),
        "is not a variable name",
    )
    .await;
    fails_with(
        &server,
        "no_set_and_run",
        json!({}),
        "set_env needs the permission 'env:write', which skill 'nosetter' does not declare",
    )
    .await;
}

const REACH: &str = r#"
def ask(args):
    return llm("Say hi.", system = "Be brief.", max_tokens = 20)

def other(args):
    return invoke_tool("ask", {})

register_tool("ask", "Asks the model.", {"type": "object"}, ask)
register_tool("other", "Calls another tool.", {"type": "object"}, other)
"#;

#[tokio::test]
async fn llm_and_invoke_tool_fail_clearly_outside_a_session_or_without_permission() {
    let (server, _skills) = server_with(RunSettings::default(), |root| {
        star_skill(root, "reacher", "permissions: [llm:call, skill:invoke]\n", REACH);
        star_skill(
            root,
            "bare",
            "",
            &REACH
                .replace("\"ask\", \"Asks", "\"bare_ask\", \"Asks")
                .replace("\"other\"", "\"bare_other\""),
        );
    })
    .await;
    fails_with(
        &server,
        "ask",
        json!({}),
        "llm: no model: this call's session has no client that offers sampling",
    )
    .await;
    // Outside a session, invoke_tool calls as the caller: here `ask`,
    // which fails for want of a model.
    let other = crate::common::call(&server, "other", json!({})).await;
    assert_eq!(other["parsed"]["tool"], "ask", "{other}");
    assert_eq!(other["parsed"]["success"], false, "{other}");
    fails_with(
        &server,
        "bare_ask",
        json!({}),
        "llm needs the permission 'llm:call', which skill 'bare' does not declare",
    )
    .await;
    fails_with(
        &server,
        "bare_other",
        json!({}),
        "invoke_tool needs the permission 'skill:invoke', which skill 'bare' does not declare",
    )
    .await;
}
