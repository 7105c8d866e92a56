//! What a new user trips over: the first page, wrong paths, misspelt
//! query parameters, bodies of the wrong shape, the logs, and the command
//! line's messages.

use crate::common::{
    Api, TestServer, bundled_dir, corpus_dir, options, plain, redacted, root, serve, serve_logging_to,
    skilld, stop,
};
use insta::assert_json_snapshot;
use reqwest::Method;
use serde_json::{Value, json};
use skilld::skill::Trust;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// A skill whose one tool, `mark`, appends a line to `path`.
fn mark_skill(dir: &Path) {
    let skill = dir.join("marker");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: marker\nversion: 1.0.0\ndescription: Leaves a mark.\nread_only: true\n---\n\n### mark\n\n\
         Appends a line to a file.\n\n#### Parameters\n\n| Name | Type | Required | Description |\n\
         |---|---|---|---|\n| path | string | yes | The file. |\n\n#### Command\n\n\
         ```\nsh -c 'echo ran >> \"$0\"' {{path}}\n```\n",
    )
    .unwrap();
}

async fn problem(res: reqwest::Response) -> (u16, Value) {
    let status = res.status().as_u16();
    let ct = res.headers()["content-type"].to_str().unwrap().to_owned();
    assert_eq!(ct, "application/problem+json");
    (status, res.json().await.unwrap())
}

#[tokio::test]
async fn the_root_leads_to_the_docs_and_unknown_routes_name_the_path() {
    let server = TestServer::builder(options(vec![root(bundled_dir(), Trust::Bundled)]))
        .start()
        .await;
    // A client that does not follow redirects, to see the redirect.
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let res = client.get(server.url("/")).send().await.unwrap();
    assert_eq!(res.status(), 307);
    assert_eq!(res.headers()["location"], "/docs/");

    let caller = Api::anonymous(&server);
    let res = caller.raw(Method::GET, "/skils/git", &[], None).await;
    let (status, p) = problem(res).await;
    assert_eq!(status, 404);
    // The whole problem: not_found, its detail naming the path.
    redacted().bind(|| assert_json_snapshot!("misspelt_route_problem", plain(&p)));
}

#[tokio::test]
async fn an_unknown_query_parameter_is_refused_by_name_and_nothing_runs() {
    let skills = crate::common::tempdir().unwrap();
    mark_skill(skills.path());
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::User)]))
        .allowed()
        .start()
        .await;
    let marker = skills.path().join("ran");
    let caller = Api::anonymous(&server);
    let body = json!({"arguments": {"path": marker}});

    // A misspelt dry_run must not run the tool: the whole problem names
    // the parameter and the ones the operation takes.
    let path = "/tools/mark/invoke?dryRun=true";
    let res = caller.raw(Method::POST, path, &[], Some(body.clone())).await;
    let (status, p) = problem(res).await;
    assert_eq!(status, 400);
    redacted().bind(|| assert_json_snapshot!("misspelt_query_problem", plain(&p)));
    assert!(!marker.exists(), "the tool ran");
    let (_, runs) = Api::of(&server).get("/runs").await;
    assert_eq!(runs["runs"], json!([]), "a refused call left a run");

    // The right spelling is a dry run: still nothing runs.
    let (status, _) = caller.post("/tools/mark/invoke?dry_run=true", body).await;
    assert_eq!(status, 200);
    assert!(!marker.exists());

    let res = caller.raw(Method::GET, "/healthz?verbose=1", &[], None).await;
    let (status, p) = problem(res).await;
    assert_eq!(status, 400);
    redacted().bind(|| assert_json_snapshot!("query_where_none_is_taken_problem", plain(&p)));
}

#[tokio::test]
async fn bodies_of_the_wrong_shape_are_explained_by_field() {
    let server = TestServer::builder(options(vec![root(bundled_dir(), Trust::Bundled)]))
        .start()
        .await;
    // The person, who may decide approvals.
    let client = server.person();
    let detail = |path: String, body: &'static str| {
        let request = client
            .post(server.url(&path))
            .header("content-type", "application/json")
            .body(body);
        async move {
            let (status, p) = problem(request.send().await.unwrap()).await;
            assert_eq!(status, 400, "{p}");
            p["detail"].as_str().unwrap().to_owned()
        }
    };
    let invoke = || "/tools/git_log/invoke".to_owned();
    assert_eq!(
        detail(invoke(), r#"{"args": {}}"#).await,
        "field 'args' is not one this request takes (it takes 'arguments', 'mode', 'session')"
    );
    assert_eq!(
        detail(invoke(), r#"{"mode": 5}"#).await,
        "field 'mode' must be a string, not number"
    );
    let approve = format!("/approvals/{}/approve", uuid::Uuid::now_v7());
    assert_eq!(
        detail(approve, r#"{"scope": "forever"}"#).await,
        "field 'scope' must be 'once' or 'always', not 'forever'"
    );
    assert_eq!(
        detail(invoke(), r#"{"arguments": {"#).await,
        "the body is not valid JSON: EOF while parsing an object (line 1, column 15)"
    );
    assert_eq!(
        detail(invoke(), r#"{"arguments": {}} {}"#).await,
        "the body is not valid JSON: trailing characters"
    );
}

#[tokio::test]
async fn a_run_records_its_request_id_and_starts_after_it_was_created() {
    let skills = crate::common::tempdir().unwrap();
    mark_skill(skills.path());
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::User)]))
        .allowed()
        .start()
        .await;
    let caller = Api::anonymous(&server);
    let body = json!({"arguments": {"path": skills.path().join("ran")}});
    let invoke = "/tools/mark/invoke";
    let res = caller.raw(Method::POST, invoke, &[], Some(body.clone())).await;
    let given = res.headers()["x-request-id"].to_str().unwrap().to_owned();
    let envelope: Value = res.json().await.unwrap();
    let (_, run) = caller
        .get(&format!("/runs/{}", envelope["run_id"].as_str().unwrap()))
        .await;
    assert_eq!(run["request_id"], given.as_str());
    let time = |field: &str| chrono::DateTime::parse_from_rfc3339(run[field].as_str().unwrap()).unwrap();
    assert!(time("started_at") >= time("created_at"), "{run}");
    assert!(time("finished_at") >= time("started_at"), "{run}");

    // A caller's own request id is kept, so it can find its run.
    let res = caller
        .raw(
            Method::POST,
            invoke,
            &[("x-request-id", "caller-chosen-7")],
            Some(body),
        )
        .await;
    assert_eq!(res.headers()["x-request-id"], "caller-chosen-7");
    let envelope: Value = res.json().await.unwrap();
    let (_, run) = caller
        .get(&format!("/runs/{}", envelope["run_id"].as_str().unwrap()))
        .await;
    assert_eq!(run["request_id"], "caller-chosen-7");
}

/// `skilld serve` with the marker skill, its stderr piped.
fn serve_logging(skills: &Path, data: &Path, format: Option<&str>) -> (std::process::Child, String) {
    let mut cmd = skilld();
    cmd.args(["serve", "--bind", "127.0.0.1:0", "--no-watch", "--data-dir"])
        .arg(data)
        .arg("--skills")
        .arg(format!("bundled={}", skills.display()))
        .env("SKILLD_LOG", "info")
        .env_remove("SKILLD_DATABASE_URL");
    if let Some(f) = format {
        cmd.env("SKILLD_LOG_FORMAT", f);
    }
    serve_logging_to(&mut cmd, Stdio::piped())
}

#[tokio::test]
async fn logs_are_plain_off_a_terminal_json_on_request_and_name_each_finished_run() {
    let skills = crate::common::tempdir().unwrap();
    mark_skill(skills.path());
    let out = crate::common::marks_dir();
    let marker = out.path().join("ran");
    for format in [None, Some("json")] {
        let data = crate::common::tempdir().unwrap();
        let (mut child, addr) = serve_logging(skills.path(), data.path(), format);
        let envelope = crate::common::invoke_envelope(&addr, "mark", None, json!({"path": marker})).await;
        assert_eq!(envelope["success"], true, "{envelope}");
        let run_id = envelope["run_id"].as_str().unwrap().to_owned();
        let mut stderr = child.stderr.take().unwrap();
        assert!(stop(child).success());
        let mut log = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut log).unwrap();
        assert!(!log.contains('\u{1b}'), "ANSI escapes in a piped log: {log}");
        let finished: Vec<&str> = log.lines().filter(|l| l.contains("run finished")).collect();
        assert_eq!(finished.len(), 1, "{log}");
        let line = finished[0];
        if format == Some("json") {
            for l in log.lines() {
                serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("{e}: {l}"));
            }
            let v: Value = serde_json::from_str(line).unwrap();
            assert_eq!(v["level"], "INFO");
            assert_eq!(v["fields"]["run"], run_id.as_str());
            assert_eq!(v["fields"]["tool"], "mark");
            assert_eq!(v["fields"]["status"], "succeeded");
            assert!(v["fields"]["duration_ms"].is_u64(), "{v}");
        } else {
            for part in [
                format!("run={run_id}"),
                "tool=mark".into(),
                "status=succeeded".into(),
            ] {
                assert!(line.contains(&part), "{part} not in {line}");
            }
            assert!(line.contains("duration_ms="), "{line}");
        }
    }
    let out = skilld()
        .args(["tools", "--skills"])
        .arg(skills.path())
        .env("SKILLD_LOG_FORMAT", "xml")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("SKILLD_LOG_FORMAT is 'xml'; it takes text"));
}

#[tokio::test]
async fn a_stream_waiting_for_a_person_does_not_hold_the_shutdown() {
    let skills = crate::common::tempdir().unwrap();
    mark_skill(skills.path());
    let data = crate::common::tempdir().unwrap();
    let mut cmd = skilld();
    cmd.args(["serve", "--bind", "127.0.0.1:0", "--no-watch", "--data-dir"])
        .arg(data.path())
        .arg("--skills")
        .arg(format!("untrusted={}", skills.path().display()))
        .env_remove("SKILLD_DATABASE_URL");
    let (child, addr) = serve(&mut cmd);
    // Untrusted: the call is held, and the stream follows it.
    let res = reqwest::Client::new()
        .post(format!("http://{addr}/tools/mark/invoke"))
        .header("accept", "text/event-stream")
        .json(&json!({"arguments": {"path": data.path().join("m")}}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let mut res = res;
    let first = res.chunk().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("pending_approval"));
    let started = Instant::now();
    let status = tokio::task::spawn_blocking(move || stop(child)).await.unwrap();
    assert!(status.success());
    // The shutdown grace is 10 s; a stream held open would take as long
    // as the approval's hour.
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn the_command_line_says_what_is_wrong() {
    let help = skilld().args(["tools", "--help"]).output().unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    assert!(
        help.contains("[possible values: native, openai, openai-responses, anthropic, gemini, mcp, prompt]"),
        "{help}"
    );

    let empty = crate::common::tempdir().unwrap();
    let out = skilld().arg("check").arg(empty.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().trim(),
        format!(
            "{}: error[not_a_skill]: no skills here: a skill is a directory holding a SKILL.md",
            empty.path().display()
        )
    );
    let out = skilld().args(["check", "/no/such/skills"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().trim(),
        "/no/such/skills: error[root_missing]: no such file or directory"
    );
    let file = corpus_dir().join("README.md");
    let out = skilld().arg("check").arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8(out.stdout)
            .unwrap()
            .contains("error[not_a_skill]: a file, not a skill: give the skill's directory"),
    );
    // A SKILL.md stands for its skill.
    let out = skilld()
        .arg("check")
        .arg(bundled_dir().join("git/SKILL.md"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stderr).contains("1 skills loaded, 0 errors"));
}

#[test]
fn run_names_the_candidates_of_an_ambiguous_tool() {
    let data = crate::common::tempdir().unwrap();
    let out = skilld()
        .args(["run", "say_hi", "--skills"])
        .arg(corpus_dir().join("warn"))
        .arg("--data-dir")
        .arg(data.path())
        .env_remove("SKILLD_DATABASE_URL")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains(
            "tool 'say_hi' is defined by several skills (long-description, unknown-field); \
             call it as long_description__say_hi or unknown_field__say_hi"
        ),
        "{stderr}"
    );
}

#[test]
fn a_relative_skills_root_runs_its_scripts() {
    let data = crate::common::tempdir().unwrap();
    let cwd = bundled_dir().join("..");
    let out = skilld()
        .current_dir(&cwd)
        .args([
            "run",
            "text_tools_upper",
            "--skills",
            "skills",
            "--args",
            r#"{"args": ["hi"]}"#,
        ])
        .arg("--data-dir")
        .arg(data.path())
        .arg("--workspace")
        .arg(data.path())
        .env_remove("SKILLD_DATABASE_URL")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let envelope: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(envelope["output"], "HI\n", "{envelope}");
}
