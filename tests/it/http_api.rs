//! The read routes of `docs/api.md`, exercised over a real socket as a client
//! would (and through `app()` where a client library would rewrite paths).

use crate::common::{Api, TestServer, corpus_dir, corpus_options, options, plain, redacted, root};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use insta::assert_json_snapshot;
use reqwest::Method;
use serde_json::{Value, json};
use skilld::skill::Trust;
use tower::ServiceExt;

/// `GET path` as a caller without a token, the response as it came
/// (its headers are part of what these tests check).
async fn get(server: &TestServer, path: &str) -> reqwest::Response {
    Api::anonymous(server).raw(Method::GET, path, &[], None).await
}

async fn get_json(server: &TestServer, path: &str) -> (StatusCode, Value) {
    let res = get(server, path).await;
    let status = StatusCode::from_u16(res.status().as_u16()).unwrap();
    (status, res.json().await.unwrap())
}

fn content_type(res: &reqwest::Response) -> String {
    res.headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

/// A 4xx/5xx problem document with its code, served as one, and the
/// same as its snapshot `name` whole (type, title, detail and what else
/// it says).
async fn assert_problem(res: reqwest::Response, status: u16, code: &str, name: &str) -> Value {
    assert_eq!(res.status().as_u16(), status);
    assert_eq!(content_type(&res), "application/problem+json");
    assert!(res.headers().contains_key("x-request-id"));
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["status"], status);
    assert_eq!(body["code"], code, "{body}");
    assert!(body["type"].as_str().unwrap().starts_with("/problems/"));
    assert!(body["title"].is_string() && body["detail"].is_string(), "{body}");
    redacted().bind(|| assert_json_snapshot!(name, plain(&body)));
    body
}

#[tokio::test]
async fn health_and_readiness() {
    let server = TestServer::builder(corpus_options()).start().await;
    let res = get(&server, "/healthz").await;
    assert_eq!(res.status(), 200);
    let id = res.headers()["x-request-id"].to_str().unwrap().to_owned();
    assert_eq!(uuid::Uuid::parse_str(&id).unwrap().get_version_num(), 7);
    assert_eq!(res.json::<Value>().await.unwrap(), json!({"status": "ok"}));

    let (status, ready) = get_json(&server, "/readyz").await;
    assert_eq!(status, 200);
    assert_eq!(ready["status"], "ready");
    let catalog = server.catalog.current();
    assert_eq!(ready["skills"], catalog.skills.len());
    assert_eq!(ready["tools"], catalog.tools.len());
    assert_eq!(ready["store"], "sqlite");
    let network = if skilld::runner::network_isolation_available() {
        "enforced"
    } else {
        "advisory"
    };
    assert_eq!(ready["sandbox"]["network"], network);
}

#[tokio::test]
async fn request_ids_are_propagated() {
    let server = TestServer::builder(corpus_options()).start().await;
    let res = Api::anonymous(&server)
        .raw(Method::GET, "/healthz", &[("x-request-id", "trace-me-42")], None)
        .await;
    assert_eq!(res.headers()["x-request-id"], "trace-me-42");
}

#[tokio::test]
async fn skills_list_sorted_and_filtered() {
    let server = TestServer::builder(corpus_options()).start().await;
    let (status, body) = get_json(&server, "/skills").await;
    assert_eq!(status, 200);
    let names: Vec<&str> = body["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted);
    assert!(names.contains(&"git") && names.contains(&"plan_compiler") && !names.contains(&"Bad_Name"));

    let git = body["skills"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "git")
        .unwrap();
    assert_eq!(git["version"], "1.0.0");
    assert_eq!(git["dialect"], "markdown");
    assert_eq!(git["trust"], "user");
    assert_eq!(git["modes"], json!(["Dev", "Global"]));
    assert_eq!(git["tools"], json!(["git_status", "git_log", "git_diff"]));
    assert_eq!(git["hash"].as_str().unwrap().len(), 64);
    assert_eq!(git["source"], corpus_dir().join("valid").display().to_string());

    // `deploy` is Dev-only: in Meeting mode only Global skills remain.
    let (_, dev) = get_json(&server, "/skills?mode=Dev").await;
    let (_, meeting) = get_json(&server, "/skills?mode=Meeting").await;
    let has = |v: &Value, n: &str| v["skills"].as_array().unwrap().iter().any(|s| s["name"] == n);
    assert!(has(&dev, "deploy") && has(&dev, "git"));
    assert!(!has(&meeting, "deploy") && has(&meeting, "git"));

    let (_, q) = get_json(&server, "/skills?q=TIMEOUTS").await;
    assert_eq!(q["skills"].as_array().unwrap().len(), 1);
    assert_eq!(q["skills"][0]["name"], "slow");
    // By name too, and the same answer again once the lowered text is kept.
    for _ in 0..2 {
        let (_, by_name) = get_json(&server, "/skills?q=SLo").await;
        assert!(has(&by_name, "slow"), "{by_name}");
        assert!(!has(&by_name, "git"), "{by_name}");
    }

    let (_, untrusted) = get_json(&server, "/skills?trust=untrusted").await;
    assert_eq!(untrusted, json!({"skills": [], "excluded": []}));
    assert_problem(
        get(&server, "/skills?trust=divine").await,
        400,
        "bad_request",
        "skills_bad_trust_problem",
    )
    .await;
}

#[tokio::test]
async fn skill_detail() {
    let server = TestServer::builder(corpus_options()).start().await;
    let (status, d) = get_json(&server, "/skills/echo").await;
    assert_eq!(status, 200);
    assert_eq!(d["name"], "echo");
    assert_eq!(d["version"], "0.3.1");
    assert_eq!(d["read_only"], true);
    assert_eq!(d["always_ask"], false);
    assert_eq!(d["timeout_secs"], 5);
    assert_eq!(d["network"], false);
    assert_eq!(d["invocation_mode"], "prompt_rewrite");
    assert!(d["instructions"].as_str().unwrap().starts_with("# Echo"));
    assert_eq!(
        d["files"],
        json!([{"path": "SKILL.md", "size": std::fs::metadata(corpus_dir().join("valid/echo/SKILL.md")).unwrap().len()}])
    );
    assert_eq!(d["warnings"], json!([]));
    let tools = d["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 3);
    let args = tools.iter().find(|t| t["name"] == "echo_args").unwrap();
    assert_eq!(args["skill"], "echo");
    assert_eq!(args["trust"], "user");
    assert_eq!(args["requires_approval"], "first_run");
    assert_eq!(args["parameters"]["required"], json!(["text"]));
    assert_eq!(args["parameters"]["properties"]["times"]["default"], 1);

    let (_, data) = get_json(&server, "/skills/data-analysis").await;
    assert_eq!(data["dialect"], "entrypoint");
    assert_eq!(data["timeout_secs"], 60);
    assert_eq!(
        data["resources"],
        json!({"memory_bytes": 268435456u64, "cpu": 0.5})
    );

    let (_, plan) = get_json(&server, "/skills/plan_compiler").await;
    assert_eq!(plan["version"], Value::Null);
    assert_eq!(plan["command"], "plan");
    assert_eq!(plan["requires_tools"], json!(["read", "write"]));
    assert_eq!(plan["eligibility"]["os"], json!(["darwin", "linux", "win32"]));
    assert_eq!(plan["warnings"][0]["code"], "name_style");

    let (_, status_skill) = get_json(&server, "/skills/status").await;
    assert_eq!(status_skill["invocation_mode"], "tool_dispatch");
    assert_eq!(status_skill["command_tool"], "git_status");

    let body = assert_problem(
        get(&server, "/skills/Bad_Name").await,
        404,
        "not_found",
        "skill_bad_name_problem",
    )
    .await;
    assert!(body["detail"].as_str().unwrap().contains("Bad_Name"));
}

#[tokio::test]
async fn skill_prompt_as_json_and_markdown() {
    let server = TestServer::builder(corpus_options()).start().await;
    let (status, p) = get_json(&server, "/skills/text-tools/prompt").await;
    assert_eq!(status, 200);
    assert_eq!(p["skill"], "text-tools");
    assert_eq!(p["references"], json!(["references/usage.md"]));
    assert!(p["instructions"].as_str().unwrap().starts_with("# Text tools"));

    let res = Api::anonymous(&server)
        .raw(
            Method::GET,
            "/skills/no-frontmatter/prompt",
            &[("accept", "text/markdown")],
            None,
        )
        .await;
    assert_eq!(content_type(&res), "text/markdown; charset=utf-8");
    assert_eq!(
        res.text().await.unwrap(),
        std::fs::read_to_string(corpus_dir().join("valid/no-frontmatter/SKILL.md")).unwrap()
    );
    assert_problem(
        get(&server, "/skills/nope/prompt").await,
        404,
        "not_found",
        "skill_prompt_not_found_problem",
    )
    .await;
}

/// Requests with raw paths, which HTTP client libraries would normalise.
async fn raw(app: &axum::Router, path: &str) -> (StatusCode, Vec<u8>, String) {
    let res = app
        .clone()
        .oneshot(Request::get(path).body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = res.status();
    let ct = res
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let body = axum::body::to_bytes(res.into_body(), usize::MAX).await.unwrap();
    (status, body.to_vec(), ct)
}

#[tokio::test]
async fn skill_files_stay_inside_the_skill() {
    let dir = crate::common::tempdir().unwrap();
    let skill = dir.path().join("docs");
    std::fs::create_dir_all(skill.join("references")).unwrap();
    std::fs::create_dir_all(skill.join("assets")).unwrap();
    std::fs::write(skill.join("SKILL.md"), "# Docs\n\nRead the references.\n").unwrap();
    std::fs::write(skill.join("references/guide.md"), "# Guide\n").unwrap();
    std::fs::write(skill.join("assets/data.csv"), "a,b\n1,2\n").unwrap();
    std::fs::write(skill.join("assets/tool.exe"), "MZ").unwrap();
    std::fs::write(skill.join("assets/big.txt"), vec![b'x'; 1024 * 1024 + 1]).unwrap();
    std::fs::write(dir.path().join("secret.md"), "outside\n").unwrap();
    std::os::unix::fs::symlink(dir.path().join("secret.md"), skill.join("references/escape.md")).unwrap();
    std::os::unix::fs::symlink(
        skill.join("references/guide.md"),
        skill.join("references/alias.md"),
    )
    .unwrap();

    let server = TestServer::builder(options(vec![root(dir.path(), Trust::User)]))
        .start()
        .await;
    let app = skilld::app(skilld::AppState {
        sessions: skilld::session::Sessions::shared(
            &server.invoker,
            &server.store,
            server.catalog.clone(),
            Default::default(),
        ),
        approver: skilld::invoke::Approver::new(&server.invoker, &server.store),
        installer: skilld::install::Installer::shared(&server.catalog, &server.invoker),
        catalog: server.catalog.clone(),
        invoker: server.invoker.clone(),
        auth: std::sync::Arc::default(),
        // In-process requests carry no Host header.
        limits: skilld::http::ServerLimits::default(),
        web: std::sync::Arc::default(),
    });

    let (s, body, ct) = raw(&app, "/skills/docs/files/references/guide.md").await;
    assert_eq!(
        (s, body.as_slice(), ct.as_str()),
        (StatusCode::OK, &b"# Guide\n"[..], "text/markdown; charset=utf-8")
    );
    let (s, _, ct) = raw(&app, "/skills/docs/files/assets/data.csv").await;
    assert_eq!((s, ct.as_str()), (StatusCode::OK, "text/csv; charset=utf-8"));
    for path in [
        // A symlink is not served even when it stays inside the skill: a
        // tool that may write the skill could point one anywhere.
        "/skills/docs/files/references/alias.md",
        "/skills/docs/files/../secret.md",
        "/skills/docs/files/references/../../secret.md",
        "/skills/docs/files/%2e%2e/secret.md",
        "/skills/docs/files/references/escape.md",
        "/skills/docs/files//etc/passwd.txt",
        "/skills/docs/files/assets/missing.exe",
        "/skills/docs/files/assets",
        "/skills/docs/files/missing.md",
        "/skills/nope/files/SKILL.md",
    ] {
        let (s, body, ct) = raw(&app, path).await;
        assert_eq!(
            s,
            StatusCode::NOT_FOUND,
            "{path}: {}",
            String::from_utf8_lossy(&body)
        );
        assert_eq!(ct, "application/problem+json", "{path}");
        assert!(!String::from_utf8_lossy(&body).contains("outside"), "{path}");
    }
    // A file that exists, of a kind not served, is not "not found".
    let (s, body, _) = raw(&app, "/skills/docs/files/assets/tool.exe").await;
    let problem: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        (s, problem["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("file_type_not_served")),
        "{problem}"
    );
    assert!(problem["detail"].as_str().unwrap().contains(".md"), "{problem}");
    let (s, _, _) = raw(&app, "/skills/docs/files/references/escape.exe").await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, body, _) = raw(&app, "/skills/docs/files/assets/big.txt").await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(
        serde_json::from_slice::<Value>(&body).unwrap()["code"],
        "too_large"
    );
}

#[tokio::test]
async fn diagnostics_and_commands() {
    let server = TestServer::builder(corpus_options()).start().await;
    let (status, d) = get_json(&server, "/diagnostics").await;
    assert_eq!(status, 200);
    let diags = d["diagnostics"].as_array().unwrap();
    let find = |skill: &str, code: &str| {
        diags
            .iter()
            .find(|x| x["skill"] == skill && x["code"] == code)
            .cloned()
    };
    let bad = find("bad-version", "invalid_version").unwrap();
    assert_eq!(bad["severity"], "error");
    assert_eq!(bad["line"], 3);
    assert_eq!(bad["column"], 1);
    assert!(
        bad["path"]
            .as_str()
            .unwrap()
            .ends_with("invalid/bad-version/SKILL.md")
    );
    assert!(find("unknown-field", "unknown_field").is_some_and(|w| w["severity"] == "warning"));
    assert!(find("ineligible-os", "ineligible").is_some());

    let (_, c) = get_json(&server, "/commands").await;
    assert_eq!(
        c,
        json!({"commands": [
            {"command": "plan", "skill": "plan_compiler",
             "description": "Convert conversation into a structured implementation plan.",
             "invocation_mode": "prompt_rewrite", "command_tool": null},
            {"command": "status", "skill": "status",
             "description": "Show repository status deterministically.",
             "invocation_mode": "tool_dispatch", "command_tool": "git_status"},
        ],
        "builtin": ["help", "skill", "skills"],
        "excluded": []})
    );
}

#[tokio::test]
async fn tool_exports_in_every_format() {
    let server = TestServer::builder(corpus_options()).start().await;
    let (status, native) = get_json(&server, "/tools").await;
    assert_eq!(status, 200);
    let tools = native["tools"].as_array().unwrap();
    let git_log = tools.iter().find(|t| t["name"] == "git_log").unwrap();
    assert_eq!(
        git_log,
        &json!({
            "name": "git_log", "skill": "git", "description": "Show recent commit history.",
            "parameters": {"type": "object", "properties": {"count": {"type": "integer", "description": "Number of commits (default: 10)", "default": 10}},
                           "required": [], "additionalProperties": false},
            "read_only": true, "always_ask": false, "timeout_secs": 10, "trust": "user", "requires_approval": "first_run"
        })
    );
    let deploy = tools.iter().find(|t| t["name"] == "deploy_preview").unwrap();
    assert_eq!(deploy["requires_approval"], "always");

    let (_, openai) = get_json(&server, "/tools?format=openai").await;
    let status_tool = openai["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "git_status")
        .unwrap();
    assert_eq!(
        status_tool,
        &json!({"type": "function", "function": {"name": "git_status", "description": "Show the current git status with short format.",
            "parameters": {"type": "object", "properties": {}, "required": [], "additionalProperties": false}, "strict": true}})
    );

    let (_, anthropic) = get_json(&server, "/tools?format=anthropic&skill=slow").await;
    assert_eq!(
        anthropic,
        json!({"tools": [{"name": "sleep_for", "description": "Sleep for the given number of seconds.",
            "input_schema": {"type": "object", "properties": {"seconds": {"type": "number", "description": "How long to sleep."}},
                             "required": ["seconds"], "additionalProperties": false}, "strict": true}]})
    );

    let (_, gemini) = get_json(&server, "/tools?format=gemini&skill=git").await;
    assert_eq!(
        gemini,
        json!({"function_declarations": [
            {"name": "git_diff", "description": "Show uncommitted changes.",
             "parameters": {"type": "object", "properties": {"staged": {"type": "boolean", "description": "Show only staged changes"}}}},
            {"name": "git_log", "description": "Show recent commit history.",
             "parameters": {"type": "object", "properties": {"count": {"type": "integer", "description": "Number of commits (default: 10)"}}}},
            {"name": "git_status", "description": "Show the current git status with short format."},
        ]})
    );

    let (_, mcp) = get_json(&server, "/tools?format=mcp").await;
    let by_name = |n: &str| {
        mcp["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == n)
            .unwrap()
            .clone()
    };
    assert_eq!(
        by_name("git_status")["annotations"],
        json!({"readOnlyHint": true, "destructiveHint": false, "openWorldHint": false})
    );
    assert_eq!(
        by_name("deploy_preview")["annotations"],
        json!({"readOnlyHint": false, "destructiveHint": true, "openWorldHint": true})
    );
    assert_eq!(by_name("data_analysis")["inputSchema"]["type"], "object");
    assert_eq!(by_name("git_status")["title"], "Git status");

    prompt_export_and_bad_requests(&server).await;
}

/// The prompt export, alone and as a format, and the refused requests.
async fn prompt_export_and_bad_requests(server: &TestServer) {
    let res = get(server, "/tools?format=prompt&mode=Meeting").await;
    assert_eq!(content_type(&res), "text/plain; charset=utf-8");
    let text = res.text().await.unwrap();
    assert!(text.starts_with(
        "You are a model that can do function calling with the following functions:\n\n[Skills]\n"
    ));
    assert!(text.contains("\n- git_status: Show the current git status with short format.\n"));
    assert!(!text.contains("deploy_preview"), "deploy is Dev-only:\n{text}");
    let manifest = get(server, "/tools/prompt?mode=Meeting")
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(manifest, text);

    assert_problem(
        get(server, "/tools?format=xml").await,
        400,
        "bad_request",
        "tools_bad_format_problem",
    )
    .await;
    assert_problem(
        get(server, "/tools?skill=nope").await,
        404,
        "not_found",
        "tools_unknown_skill_problem",
    )
    .await;
}

#[tokio::test]
async fn mode_filter_applies_to_every_format() {
    let server = TestServer::builder(corpus_options()).start().await;
    for format in [
        "native",
        "openai",
        "openai-responses",
        "anthropic",
        "gemini",
        "mcp",
    ] {
        let (_, dev) = get_json(&server, &format!("/tools?format={format}&mode=dev")).await;
        let (_, meeting) = get_json(&server, &format!("/tools?format={format}&mode=Meeting")).await;
        let (_, unknown) = get_json(&server, &format!("/tools?format={format}&mode=Nowhere")).await;
        let text = |v: &Value| v.to_string();
        assert!(text(&dev).contains("deploy_preview"), "{format}");
        assert!(!text(&meeting).contains("deploy_preview"), "{format}");
        assert_eq!(
            meeting, unknown,
            "{format}: a mode no skill names serves the Global skills"
        );
        assert!(text(&meeting).contains("git_status"), "{format}");
    }
}

#[tokio::test]
async fn single_tools_and_ambiguous_names() {
    let server = TestServer::builder(corpus_options()).start().await;
    let (status, t) = get_json(&server, "/tools/git_diff").await;
    assert_eq!(status, 200);
    assert_eq!(t["skill"], "git");
    assert_eq!(t["parameters"]["properties"]["staged"]["type"], "boolean");

    // `say_hi` is defined by two warn skills: 409 names both (its
    // candidates, in the snapshot).
    assert_problem(
        get(&server, "/tools/say_hi").await,
        409,
        "ambiguous_tool",
        "tool_ambiguous_problem",
    )
    .await;
    // Provider exports give each a unique, addressable name.
    let (_, openai) = get_json(&server, "/tools?format=openai").await;
    let names: Vec<&str> = openai["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"long_description__say_hi") && names.contains(&"unknown_field__say_hi"),
        "{names:?}"
    );
    assert!(!names.contains(&"say_hi"));
    let (status, q) = get_json(&server, "/tools/unknown_field__say_hi").await;
    assert_eq!(status, 200);
    assert_eq!(
        (q["name"].as_str(), q["skill"].as_str()),
        (Some("say_hi"), Some("unknown-field"))
    );

    assert_problem(
        get(&server, "/tools/nope").await,
        404,
        "not_found",
        "tool_not_found_problem",
    )
    .await;
}

#[tokio::test]
async fn unknown_routes_and_methods_are_problems() {
    let server = TestServer::builder(corpus_options()).start().await;
    assert_problem(
        get(&server, "/nowhere").await,
        404,
        "not_found",
        "route_not_found_problem",
    )
    .await;
    let res = Api::anonymous(&server)
        .raw(Method::DELETE, "/healthz", &[], None)
        .await;
    assert_problem(res, 405, "method_not_allowed", "method_not_allowed_problem").await;
}

#[tokio::test]
async fn openapi_and_docs_are_served() {
    let server = TestServer::builder(corpus_options()).start().await;
    let (status, doc) = get_json(&server, "/openapi.json").await;
    assert_eq!(status, 200);
    assert_eq!(doc, serde_json::to_value(skilld::openapi()).unwrap());
    let res = get(&server, "/docs/").await;
    assert_eq!(res.status(), 200);
    assert!(content_type(&res).starts_with("text/html"));
    assert!(res.text().await.unwrap().contains("swagger"));
}

#[tokio::test]
async fn reload_on_demand() {
    let dir = crate::common::tempdir().unwrap();
    crate::common::copy_tree(&corpus_dir().join("valid/git"), &dir.path().join("git"));
    let server = TestServer::builder(options(vec![root(dir.path(), Trust::User)]))
        .start()
        .await;
    let (_, before) = get_json(&server, "/skills").await;
    assert_eq!(before["skills"].as_array().unwrap().len(), 1);

    crate::common::copy_tree(&corpus_dir().join("valid/echo"), &dir.path().join("echo"));
    crate::common::copy_tree(
        &corpus_dir().join("invalid/bad-version"),
        &dir.path().join("bad-version"),
    );
    let res = Api::of(&server)
        .req(reqwest::Method::POST, "/skills/reload")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(
        res.json::<Value>().await.unwrap(),
        json!({"skills": 2, "errors": 1})
    );
    let (status, _) = get_json(&server, "/tools/echo_json").await;
    assert_eq!(status, 200);
}
