//! The caller's tool policy (seed 004 §3.5, `requires_tools`): without
//! one every skill is listed with what it requires; a caller states its
//! tools (`?agent_tools=`, MCP `_meta` or `/mcp?agent_tools=`), or the
//! server's `agent_tools` setting does for it, and a skill needing a tool
//! that neither the policy names nor skilld serves is left out, saying why.

use crate::common::{Api, TestServer, copy_tree, corpus_dir, options, root, write_tree};
use reqwest::Method;
use serde_json::{Value, json};
use skilld::skill::Trust;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

/// The canonical `plan_compiler` (requires read, write), `shell-runner`
/// (requires shell, command `/sh`), and `speaker` whose tool `say` is
/// what `uses-say` requires: a tool skilld serves itself.
fn skills(dir: &Path) {
    copy_tree(
        &corpus_dir().join("valid/plan_compiler"),
        &dir.join("plan_compiler"),
    );
    write_tree(
        dir,
        &[
            (
                "shell-runner/SKILL.md",
                "---\nsummary: Runs shell commands for the user.\ncommand: sh\nrequires_tools: [shell]\n\
         triggers:\n  keywords: [terminal]\n---\n\n# Shell runner\n\nUse the shell tool.\n",
            ),
            (
                "speaker/SKILL.md",
                "---\nname: speaker\nversion: 1.0.0\ndescription: Says things.\nread_only: true\n---\n\n\
         ### say\n\nPrints its text.\n\n#### Parameters\n\n| Name | Type | Required | Description |\n\
         |---|---|---|---|\n| text | string | yes | What to say. |\n\n#### Command\n\n```\necho {{text}}\n```\n",
            ),
            (
                "uses-say/SKILL.md",
                "---\nsummary: Speaks through skilld's own tool.\nrequires_tools: [say]\n---\n\n# Uses say\n",
            ),
        ],
    );
}

async fn server() -> (TestServer, tempfile::TempDir) {
    let dir = crate::common::tempdir().unwrap();
    skills(dir.path());
    let server = TestServer::builder(options(vec![root(dir.path(), Trust::Bundled)]))
        .start()
        .await;
    (server, dir)
}

fn names<'a>(list: &'a Value, key: &str) -> Vec<&'a str> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|s| s[key].as_str().unwrap())
        .collect()
}

async fn get(server: &TestServer, path: &str) -> (u16, Value) {
    Api::anonymous(server).get(path).await
}

async fn post(server: &TestServer, path: &str, body: Value) -> (u16, Value) {
    Api::anonymous(server).post(path, body).await
}

#[tokio::test]
async fn without_a_policy_every_skill_is_listed_with_what_it_requires() {
    let (server, _dir) = server().await;
    let (status, list) = get(&server, "/skills").await;
    assert_eq!(status, 200);
    assert_eq!(
        names(&list["skills"], "name"),
        ["plan_compiler", "shell-runner", "speaker", "uses-say"]
    );
    let requires: Vec<&Value> = list["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["requires_tools"])
        .collect();
    assert_eq!(
        requires,
        [
            &json!(["read", "write"]),
            &json!(["shell"]),
            &json!([]),
            &json!(["say"])
        ]
    );
    assert_eq!(list["excluded"], json!([]));
    let (status, plan) = post(&server, "/commands/plan", json!({})).await;
    assert_eq!((status, &plan["skill"]), (200, &json!("plan_compiler")));
    let (status, sh) = post(&server, "/commands/sh", json!({})).await;
    assert_eq!((status, &sh["skill"]), (200, &json!("shell-runner")));
    assert!(
        server.get_json("/diagnostics").await["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["code"] != "missing_required_tool")
    );
}

#[tokio::test]
async fn a_stated_policy_leaves_out_what_it_lacks_and_says_why() {
    let (server, _dir) = server().await;

    // The seed's own policy keeps the canonical example; skilld's `say`
    // counts as a tool the agent has.
    let (_, list) = get(&server, "/skills?agent_tools=read,write").await;
    assert_eq!(
        names(&list["skills"], "name"),
        ["plan_compiler", "speaker", "uses-say"]
    );
    assert_eq!(
        list["excluded"],
        json!([{"skill": "shell-runner", "code": "missing_required_tool", "missing": ["shell"],
                "message": "skill 'shell-runner' requires shell, which the agent's tools (read, write) do not include and no loaded skill provides"}])
    );
    // An empty policy is an agent with no tools: only what skilld serves counts.
    let (_, list) = get(&server, "/skills?agent_tools=").await;
    assert_eq!(names(&list["skills"], "name"), ["speaker", "uses-say"]);
    assert_eq!(
        names(&list["excluded"], "skill"),
        ["plan_compiler", "shell-runner"]
    );
    assert_eq!(list["excluded"][0]["missing"], json!(["read", "write"]));
    // Repeated, the lists join; filters still apply.
    let (_, list) = get(&server, "/skills?agent_tools=read&agent_tools=write&q=plan").await;
    assert_eq!(names(&list["skills"], "name"), ["plan_compiler"]);
    assert_eq!(list["excluded"], json!([]));
    // A misspelt parameter is refused, not ignored.
    let (status, problem) = get(&server, "/skills?agent_tool=read").await;
    assert_eq!((status, problem["code"].as_str()), (400, Some("bad_request")));

    // Match: a skill whose trigger fired but that the policy leaves out.
    let context = json!({"message": "open a terminal", "explicit": ["plan_compiler"]});
    let (status, matched) = post(&server, "/skills/match?agent_tools=read,write", context.clone()).await;
    assert_eq!(status, 200, "{matched}");
    assert_eq!(names(&matched["matches"], "skill"), ["plan_compiler"]);
    assert_eq!(names(&matched["excluded"], "skill"), ["shell-runner"]);
    let (_, matched) = post(&server, "/skills/match", context).await;
    assert_eq!(
        names(&matched["matches"], "skill"),
        ["plan_compiler", "shell-runner"]
    );

    // Prompt: 409, in JSON and in Markdown alike.
    let (status, problem) = get(&server, "/skills/plan_compiler/prompt?agent_tools=read").await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (409, Some("missing_required_tool"))
    );
    assert!(
        problem["detail"].as_str().unwrap().contains("requires write"),
        "{problem}"
    );
    let res = Api::anonymous(&server)
        .raw(
            Method::GET,
            "/skills/plan_compiler/prompt?agent_tools=read",
            &[("Accept", "text/markdown")],
            None,
        )
        .await;
    assert_eq!(res.status(), 409);
    assert_eq!(res.headers()["content-type"], "application/problem+json");
    let (status, prompt) = get(
        &server,
        "/skills/plan_compiler/prompt?agent_tools=read,write,shell",
    )
    .await;
    assert_eq!((status, &prompt["skill"]), (200, &json!("plan_compiler")));

    commands_are_left_out_too(&server).await;
}

/// Commands under a policy: listed apart, and refused by alias, by name
/// and in the index.
async fn commands_are_left_out_too(server: &TestServer) {
    // Commands: listed apart, and refused by alias, by name and in the index.
    let (_, commands) = get(server, "/commands?agent_tools=read,write").await;
    assert_eq!(names(&commands["commands"], "command"), ["plan"]);
    assert_eq!(names(&commands["excluded"], "skill"), ["shell-runner"]);
    let (status, problem) = post(server, "/commands/plan?agent_tools=read", json!({})).await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (409, Some("missing_required_tool"))
    );
    let (status, problem) = post(
        server,
        "/commands/skill?agent_tools=read",
        json!({"arguments": {"name": "plan_compiler"}}),
    )
    .await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (409, Some("missing_required_tool"))
    );
    let (status, index) = post(server, "/commands/skills?agent_tools=read,write", json!({})).await;
    assert_eq!(status, 200);
    assert_eq!(
        names(&index["skills"], "name"),
        ["plan_compiler", "speaker", "uses-say"]
    );
    assert_eq!(names(&index["excluded"], "skill"), ["shell-runner"]);
    let (status, plan) = post(server, "/commands/plan?agent_tools=write,read", json!({})).await;
    assert_eq!((status, &plan["skill"]), (200, &json!("plan_compiler")));
    assert_eq!(server.get_json("/runs").await["runs"], json!([]), "nothing ran");
}

/// `skilld serve` with `args` (and `env`) over the skills of `dir`: its
/// answer to `GET path`.
async fn served(dir: &Path, args: &[&str], env: &[(&str, &str)], paths: &[&str]) -> Vec<Value> {
    let data = crate::common::tempdir().unwrap();
    let mut cmd = crate::common::skilld();
    cmd.args(["serve", "--bind", "127.0.0.1:0", "--no-watch", "--data-dir"])
        .arg(data.path())
        .arg("--skills")
        .arg(format!("bundled={}", dir.display()))
        .args(args)
        .env_remove("SKILLD_AGENT_TOOLS");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let (child, addr) = crate::common::serve(&mut cmd);
    let mut answers = Vec::new();
    for path in paths {
        let (_, body) = Api::new(format!("http://{addr}"), None).get(path).await;
        answers.push(body);
    }
    assert!(crate::common::stop(child).success());
    answers
}

#[tokio::test]
async fn the_configured_policy_applies_to_callers_that_state_none() {
    let dir = crate::common::tempdir().unwrap();
    skills(dir.path());
    let paths = ["/skills", "/skills?agent_tools=read,write,shell", "/commands"];
    let excluded = |v: &Value| {
        names(&v["excluded"], "skill")
            .iter()
            .map(std::string::ToString::to_string)
            .collect::<Vec<_>>()
    };

    // The flag: callers that state nothing get it; a stated policy wins.
    let got = served(dir.path(), &["--agent-tools", "read"], &[], &paths).await;
    assert_eq!(excluded(&got[0]), ["plan_compiler", "shell-runner"]);
    assert_eq!(excluded(&got[1]), Vec::<String>::new());
    assert_eq!(names(&got[2]["commands"], "command"), Vec::<&str>::new());
    assert_eq!(excluded(&got[2]), ["plan_compiler", "shell-runner"]);

    // The environment, then the file, as every serve setting.
    let got = served(dir.path(), &[], &[("SKILLD_AGENT_TOOLS", "read,write")], &paths).await;
    assert_eq!(excluded(&got[0]), ["shell-runner"]);
    let config = dir.path().join("skilld.toml");
    std::fs::write(&config, "agent_tools = [\"read\", \"write\", \"shell\"]\n").unwrap();
    let config_arg = config.display().to_string();
    let got = served(dir.path(), &["--config", &config_arg], &[], &paths).await;
    assert_eq!(excluded(&got[0]), Vec::<String>::new());
    let got = served(
        dir.path(),
        &["--config", &config_arg],
        &[("SKILLD_AGENT_TOOLS", "write")],
        &paths,
    )
    .await;
    assert_eq!(
        excluded(&got[0]),
        ["plan_compiler", "shell-runner"],
        "the environment beats the file"
    );

    // Unset, nothing is left out.
    let got = served(dir.path(), &[], &[], &paths).await;
    assert_eq!(excluded(&got[0]), Vec::<String>::new());
}

/// One JSON-RPC exchange with `/mcp` at `url`: the response whose id is
/// `body`'s, and the session id the server gave.
async fn mcp(url: &str, session: Option<&str>, body: Value) -> (Option<String>, Value) {
    let mut req = reqwest::Client::new()
        .post(url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2025-11-25")
        .body(body.to_string());
    if let Some(id) = session {
        req = req.header("Mcp-Session-Id", id);
    }
    let mut res = req.send().await.unwrap();
    assert!(res.status().is_success(), "{}", res.status());
    let session = res
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_owned());
    if body.get("id").is_none() {
        return (session, Value::Null);
    }
    let mut text = String::new();
    let found = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(chunk) = res.chunk().await.unwrap() {
            text.push_str(&String::from_utf8_lossy(&chunk));
            let answer = text
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .chain(std::iter::once(text.as_str()))
                .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
                .find(|m| m.get("id") == body.get("id"));
            if answer.is_some() {
                return answer;
            }
        }
        None
    })
    .await
    .unwrap();
    (
        session,
        found.unwrap_or_else(|| panic!("no answer to {body} in {text}")),
    )
}

fn prompt_names(answer: &Value) -> Vec<&str> {
    names(&answer["result"]["prompts"], "name")
}

#[tokio::test]
async fn mcp_callers_state_their_tools_in_meta_or_in_the_url() {
    let (server, _dir) = server().await;
    let session = |url: String| async move {
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
        let (id, answer) = mcp(&url, None, init).await;
        assert!(answer.get("result").is_some(), "{answer}");
        let id = id.unwrap();
        mcp(
            &url,
            Some(&id),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        )
        .await;
        (url, id)
    };
    let list =
        |meta: Value| json!({"jsonrpc": "2.0", "id": 2, "method": "prompts/list", "params": {"_meta": meta}});
    let get_plan = |meta: Value| json!({"jsonrpc": "2.0", "id": 3, "method": "prompts/get", "params": {"name": "plan", "_meta": meta}});

    let (url, id) = session(server.url("/mcp")).await;
    let (_, all) = mcp(&url, Some(&id), list(json!({}))).await;
    let all = prompt_names(&all);
    assert!(
        all.contains(&"plan") && all.contains(&"plan_compiler") && all.contains(&"shell-runner"),
        "{all:?}"
    );

    let (_, some) = mcp(&url, Some(&id), list(json!({"skilld/agent_tools": ["read"]}))).await;
    let some = prompt_names(&some);
    assert!(
        !some.contains(&"plan") && !some.contains(&"plan_compiler") && !some.contains(&"sh"),
        "{some:?}"
    );
    assert!(
        some.contains(&"speaker") && some.contains(&"uses-say"),
        "{some:?}"
    );
    let (_, refused) = mcp(&url, Some(&id), get_plan(json!({"skilld/agent_tools": "read"}))).await;
    let error = &refused["error"];
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .starts_with("missing_required_tool: "),
        "{refused}"
    );
    assert_eq!(
        error["data"],
        json!({"code": "missing_required_tool", "skill": "plan_compiler", "missing": ["write"]})
    );
    let (_, plan) = mcp(
        &url,
        Some(&id),
        get_plan(json!({"skilld/agent_tools": "read,write"})),
    )
    .await;
    let text = plan["result"]["messages"][0]["content"]["text"].as_str().unwrap();
    assert!(text.starts_with("# Plan Compiler"), "{plan}");
    let (_, bad) = mcp(&url, Some(&id), list(json!({"skilld/agent_tools": 3}))).await;
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap()
            .contains("skilld/agent_tools"),
        "{bad}"
    );

    // A client given `/mcp?agent_tools=…` states it on every request;
    // `_meta` still wins.
    let (url, id) = session(server.url("/mcp?agent_tools=read")).await;
    let (_, some) = mcp(&url, Some(&id), list(json!({}))).await;
    assert!(!prompt_names(&some).contains(&"plan"), "{some}");
    let (_, refused) = mcp(&url, Some(&id), get_plan(json!({}))).await;
    assert_eq!(refused["error"]["data"]["code"], "missing_required_tool");
    let (_, all) = mcp(
        &url,
        Some(&id),
        list(json!({"skilld/agent_tools": ["read", "write"]})),
    )
    .await;
    assert!(prompt_names(&all).contains(&"plan"), "{all}");
}

/// `skilld mcp --agent-tools` on stdio: the configured policy holds for a
/// desktop client, which states none.
#[test]
fn skilld_mcp_takes_the_configured_policy() {
    let dir = crate::common::tempdir().unwrap();
    skills(dir.path());
    let data = crate::common::tempdir().unwrap();
    let mut child = crate::common::skilld()
        .args(["mcp", "--no-watch", "--agent-tools", "read", "--skills"])
        .arg(format!("bundled={}", dir.path().display()))
        .arg("--data-dir")
        .arg(data.path())
        .env_remove("SKILLD_DATABASE_URL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut send = |message: Value| writeln!(stdin, "{message}").unwrap();
    let mut answer = || {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        serde_json::from_str::<Value>(&line).unwrap()
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}),
    );
    assert!(answer().get("result").is_some());
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "prompts/list"}));
    let listed = answer();
    let names = prompt_names(&listed);
    assert!(
        !names.contains(&"plan_compiler") && !names.contains(&"plan"),
        "{listed}"
    );
    assert!(names.contains(&"uses-say"), "{listed}");
    send(json!({"jsonrpc": "2.0", "id": 3, "method": "prompts/list",
        "params": {"_meta": {"skilld/agent_tools": ["read", "write"]}}}));
    let listed = answer();
    assert!(prompt_names(&listed).contains(&"plan"), "{listed}");
    crate::common::stop(child);
}
