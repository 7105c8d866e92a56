//! Invoking tools over HTTP with real children and a real run log: what ran,
//! with which argv, what was recorded, and what did not happen.

use crate::common::{Api, TestServer, corpus_dir, corpus_options, options, plain, redacted, root};
use insta::assert_json_snapshot;
use reqwest::Method;
use serde_json::{Value, json};
use skilld::skill::Trust;
use std::path::Path;
use std::time::Duration;

/// `GET path` as the person (who may read approvals), as JSON.
async fn get_json(server: &TestServer, path: &str) -> Value {
    server.get_json(path).await
}

/// A skills root with one markdown skill whose single tool runs `command`.
fn one_tool_skill(dir: &Path, name: &str, front: &str, params: &str, command: &str) {
    let skill = dir.join(name);
    std::fs::create_dir_all(&skill).unwrap();
    let table = if params.is_empty() {
        "None.".to_owned()
    } else {
        format!("| Name | Type | Required | Description |\n|---|---|---|---|\n{params}")
    };
    std::fs::write(
        skill.join("SKILL.md"),
        format!(
            "---\nname: {name}\nversion: 1.0.0\ndescription: Test skill.\n{front}---\n\n### {tool}\n\nTest tool.\n\n#### Parameters\n\n{table}\n\n#### Command\n\n```\n{command}\n```\n",
            tool = name.replace('-', "_")
        ),
    )
    .unwrap();
}

/// Processes whose process group is `pgid` (from /proc/*/stat).
fn group_members(pgid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // Fields after the parenthesised command: state ppid pgrp …
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.get(2).and_then(|g| g.parse::<i32>().ok()) == Some(pgid) && fields[0] != "Z" {
            out.push(pid);
        }
    }
    out
}

#[tokio::test]
async fn arguments_arrive_as_single_literal_words() {
    let server = TestServer::builder(corpus_options()).allowed().start().await;
    let (status, env) = server.invoke("echo_args",
        json!({"text": "; rm -rf /", "words": ["$(id)", "*", "a b", "{{text}}"], "loud": true, "ratio": 0.5}),
    )
    .await;
    assert_eq!(status, 200, "{env}");
    // The whole envelope: success, exit code 0, no signal, not truncated,
    // each argument on its own line, and no error, parsed or files.
    redacted().bind(|| assert_json_snapshot!("echo_args_envelope", plain(&env)));
    assert_eq!(env["output_bytes"], env["output"].as_str().unwrap().len());

    // The run log holds the call exactly: its argv word for word, the
    // defaults as applied (times: 1), the envelope as the result, and
    // its times (each checked as RFC 3339 by the redaction).
    let run = get_json(&server, &format!("/runs/{}", env["run_id"].as_str().unwrap())).await;
    redacted().bind(|| assert_json_snapshot!("echo_args_run", plain(&run)));
    assert_eq!(run["result"], env);
    assert_eq!(
        run["skill_hash"],
        server.catalog.current().skill("echo").unwrap().hash
    );
}

#[tokio::test]
async fn json_stdout_is_parsed() {
    let server = TestServer::builder(corpus_options()).allowed().start().await;
    let (status, env) = server.invoke("echo_json", json!({"value": "x"})).await;
    assert_eq!(status, 200, "{env}");
    // The whole envelope, `parsed` beside the output it was read from.
    redacted().bind(|| assert_json_snapshot!("echo_json_envelope", plain(&env)));
}

#[tokio::test]
async fn bad_arguments_are_422_with_one_error_per_field() {
    let server = TestServer::builder(corpus_options()).allowed().start().await;
    let (status, p) = server
        .invoke(
            "echo_args",
            json!({"times": "ten", "colour": "red", "words": "a"}),
        )
        .await;
    assert_eq!(status, 422);
    // The whole problem: its code, its detail, and one error per field
    // (colour, text, words, times) with its message.
    redacted().bind(|| assert_json_snapshot!("invalid_arguments_problem", plain(&p)));

    let (status, p) = server.invoke("echo_args", json!({"text": "-rf"})).await;
    assert_eq!(status, 422);
    redacted().bind(|| assert_json_snapshot!("argument_injection_problem", plain(&p)));
    let (status, p) = server.invoke("echo_args", json!({"text": "a\u{0}b"})).await;
    assert_eq!(status, 422);
    redacted().bind(|| assert_json_snapshot!("nul_argument_problem", plain(&p)));
    // After a literal `--`, a leading dash is just text.
    let (status, env) = server.invoke("echo_after_dashes", json!({"value": "-rf"})).await;
    assert_eq!((status, env["output"].as_str()), (200, Some("-rf\n")));

    let runs = get_json(&server, "/runs").await;
    assert_eq!(
        runs["runs"].as_array().unwrap().len(),
        1,
        "refused calls are not recorded: {runs}"
    );

    // Bodies that are not an invocation: raw bytes, so the request is
    // built here rather than by `Api::post`.
    let caller = Api::anonymous(&server);
    let path = "/tools/echo_args/invoke";
    let res = caller
        .req(Method::POST, path)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    let (status, _) = caller.post(path, json!({"arguments": [1, 2]})).await;
    assert_eq!(status, 400);
    let res = caller
        .req(Method::POST, path)
        .header("content-type", "application/json")
        .body(vec![b' '; 2 * 1024 * 1024])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 413);
}

#[tokio::test]
async fn dry_run_renders_and_decides_without_running() {
    let server = TestServer::builder(corpus_options()).start().await;
    let caller = Api::anonymous(&server);
    let dry_run = || async {
        let (status, d) = caller
            .post(
                "/tools/git_log/invoke?dry_run=true",
                json!({"arguments": {"count": 3}}),
            )
            .await;
        assert_eq!(status, 200, "{d}");
        d
    };
    let d = dry_run().await;
    assert_eq!(d["argv"], json!(["git", "log", "--oneline", "-n", "3"]));
    assert_eq!(d["timeout_secs"], 10);
    // A read-only user skill never approved: its first run asks.
    assert_eq!(d["decision"], "ask");
    assert!(d["reason"].as_str().unwrap().contains("first run"), "{d}");
    let env: Vec<&str> = d["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(env.contains(&"PATH") && env.contains(&"SKILL_NAME") && env.contains(&"GIBBERISH_SKILL_NAME"));
    // With a standing allow grant, it runs; the reason says why.
    server.allow_every_tool().await;
    let d = dry_run().await;
    assert_eq!(d["decision"], "run");
    assert!(d["reason"].as_str().unwrap().contains("allow grant"), "{d}");
    // Nothing was recorded, nothing asked.
    assert_eq!(get_json(&server, "/runs").await["runs"], json!([]));
    assert_eq!(get_json(&server, "/approvals").await["approvals"], json!([]));
}

#[tokio::test]
async fn a_timeout_kills_the_group_and_is_a_result() {
    let server = TestServer::builder(corpus_options()).allowed().start().await;
    let (status, env) = server.invoke("sleep_for", json!({"seconds": 30})).await;
    assert_eq!(status, 200);
    // Not a success, timed out after 2 s, ended by SIGTERM (exit 143).
    redacted().bind(|| assert_json_snapshot!("timed_out_envelope", plain(&env)));
    let run = get_json(&server, &format!("/runs/{}", env["run_id"].as_str().unwrap())).await;
    assert_eq!(run["status"], "timed_out");
}

#[tokio::test]
async fn missing_programs_are_results_not_errors() {
    let dir = crate::common::tempdir().unwrap();
    one_tool_skill(dir.path(), "ghost", "", "", "definitely-not-a-program-skilld");
    let server = TestServer::builder(options(vec![root(dir.path(), Trust::User)]))
        .allowed()
        .start()
        .await;
    let (status, env) = server.invoke("ghost", json!({})).await;
    assert_eq!(status, 200);
    // Not a success, no exit code, and the error names the program.
    redacted().bind(|| assert_json_snapshot!("command_not_found_envelope", plain(&env)));
    let run = get_json(&server, &format!("/runs/{}", env["run_id"].as_str().unwrap())).await;
    assert_eq!(run["status"], "failed");
}

#[tokio::test]
async fn ambiguous_names_need_the_qualified_route() {
    let server = TestServer::builder(corpus_options()).allowed().start().await;
    let (status, p) = server.invoke("say_hi", json!({})).await;
    assert_eq!(status, 409);
    // The whole problem, its candidates the skills that have the tool.
    redacted().bind(|| assert_json_snapshot!("ambiguous_tool_problem", plain(&p)));
    let caller = Api::anonymous(&server);
    let (status, env) = caller
        .post("/skills/unknown-field/tools/say_hi/invoke", json!({}))
        .await;
    assert_eq!(status, 200, "{env}");
    assert_eq!(
        (env["skill"].as_str(), env["output"].as_str()),
        (Some("unknown-field"), Some("hi\n"))
    );
    // So does the export name.
    let (status, env) = server.invoke("long_description__say_hi", json!({})).await;
    assert_eq!((status, env["skill"].as_str()), (200, Some("long-description")));
    let (status, _) = caller.post_empty("/skills/git/tools/say_hi/invoke").await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn respond_async_then_wait() {
    let server = TestServer::builder(corpus_options()).allowed().start().await;
    let res = Api::anonymous(&server)
        .raw(
            Method::POST,
            "/tools/sleep_for/invoke",
            &[("prefer", "respond-async")],
            Some(json!({"arguments": {"seconds": 0.3}})),
        )
        .await;
    assert_eq!(res.status(), 202);
    let location = res.headers()["location"].to_str().unwrap().to_owned();
    let accepted: Value = res.json().await.unwrap();
    assert_eq!(accepted["status"], "running");
    assert_eq!(
        location,
        format!("/runs/{}", accepted["run_id"].as_str().unwrap())
    );
    assert_eq!(accepted["run_url"], location);
    let run = get_json(&server, &format!("{location}?wait=10")).await;
    assert_eq!(run["status"], "succeeded", "{run}");
    assert_eq!(run["result"]["success"], true);
}

#[tokio::test]
async fn event_streams_carry_status_output_and_result() {
    let server = TestServer::builder(corpus_options()).allowed().start().await;
    let caller = Api::anonymous(&server);
    let res = caller
        .raw(
            Method::POST,
            "/tools/echo_json/invoke",
            &[("accept", "text/event-stream")],
            Some(json!({"arguments": {"value": "streamed"}})),
        )
        .await;
    assert_eq!(res.status(), 200);
    assert!(
        res.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let text = res.text().await.unwrap();
    let events: Vec<(String, Value)> = text
        .split("\n\n")
        .filter_map(|block| {
            let name = block.lines().find_map(|l| l.strip_prefix("event: "))?;
            let data: String = block.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
            Some((name.to_owned(), serde_json::from_str(&data).unwrap()))
        })
        .collect();
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"status"), "{text}");
    assert_eq!(names.last(), Some(&"result"), "{text}");
    let output: String = events
        .iter()
        .filter(|(n, _)| n == "output")
        .map(|(_, d)| d["chunk"].as_str().unwrap())
        .collect();
    assert_eq!(output, "{\"value\": \"streamed\", \"ok\": true}\n");
    assert_eq!(events.last().unwrap().1["parsed"]["value"], "streamed");

    // A finished run's stream replays its end.
    let id = events.last().unwrap().1["run_id"].as_str().unwrap().to_owned();
    let replay = caller
        .raw(Method::GET, &format!("/runs/{id}/events"), &[], None)
        .await
        .text()
        .await
        .unwrap();
    assert!(
        replay.contains("event: status") && replay.contains("event: result"),
        "{replay}"
    );
}

#[tokio::test]
async fn cancel_kills_the_group() {
    let dir = crate::common::tempdir().unwrap();
    one_tool_skill(
        dir.path(),
        "nap",
        "timeout: 60\n",
        "",
        "sh -c 'sleep 1000 & sleep 1000'",
    );
    let server = TestServer::builder(options(vec![root(dir.path(), Trust::User)]))
        .allowed()
        .start()
        .await;
    let caller = Api::anonymous(&server);
    let res = caller
        .raw(
            Method::POST,
            "/tools/nap/invoke",
            &[("prefer", "respond-async")],
            None,
        )
        .await;
    let id = res.json::<Value>().await.unwrap()["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // Wait until the group exists.
    let mut pgid = None;
    for _ in 0..100 {
        let run = get_json(&server, &format!("/runs/{id}")).await;
        if run["status"] == "running" {
            let store = server.store.clone();
            pgid = store.runs.get_run(id.parse().unwrap()).await.unwrap().pgid;
            if pgid.is_some_and(|g| group_members(g).len() >= 2) {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let pgid = pgid.expect("the run recorded its process group");
    assert!(group_members(pgid).len() >= 2);
    let (status, _) = caller.post_empty(&format!("/runs/{id}/cancel")).await;
    assert_eq!(status, 202);
    let run = get_json(&server, &format!("/runs/{id}?wait=20")).await;
    assert_eq!(run["status"], "cancelled", "{run}");
    assert_eq!(run["result"]["error"], "cancelled");
    assert_eq!(
        group_members(pgid),
        Vec::<i32>::new(),
        "no process of the group is left"
    );
    let (status, problem) = caller.post_empty(&format!("/runs/{id}/cancel")).await;
    assert_eq!(status, 409, "a finished run cannot be cancelled");
    redacted().bind(|| assert_json_snapshot!("finished_run_cancel_problem", plain(&problem)));
}

#[tokio::test]
async fn runs_list_filters_and_pages() {
    let server = TestServer::builder(corpus_options()).allowed().start().await;
    let mut ids = Vec::new();
    for i in 0..5 {
        let (_, env) = server
            .invoke("echo_json", json!({"value": format!("v{i}")}))
            .await;
        ids.push(env["run_id"].as_str().unwrap().to_owned());
    }
    server.invoke("git_status", json!({})).await;
    let all = get_json(&server, "/runs?tool=echo_json").await;
    let listed: Vec<&str> = all["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    let mut newest_first = ids.clone();
    newest_first.reverse();
    assert_eq!(listed, newest_first);
    assert_eq!(all["next_cursor"], Value::Null);

    let mut paged = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/runs?skill=echo&limit=2&cursor={c}"),
            None => "/runs?skill=echo&limit=2".to_owned(),
        };
        let page = get_json(&server, &path).await;
        paged.extend(
            page["runs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["id"].as_str().unwrap().to_owned()),
        );
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    assert_eq!(paged, newest_first);
    let succeeded = get_json(&server, "/runs?status=succeeded").await;
    assert_eq!(succeeded["runs"].as_array().unwrap().len(), 6);
    // A call outside any session has no `session`, and no session's
    // listing finds it; a session that is not a UUID is refused.
    assert!(all["runs"][0].get("session").is_none(), "{all}");
    let path = format!("/runs?session={}", uuid::Uuid::now_v7());
    assert_eq!(get_json(&server, &path).await["runs"], json!([]));
    let person = Api::of(&server);
    let (status, problem) = person.get("/runs?session=12").await;
    assert_eq!(status, 400);
    redacted().bind(|| assert_json_snapshot!("bad_session_filter_problem", plain(&problem)));
    let (status, problem) = person.get("/runs?cursor=garbage").await;
    assert_eq!(status, 400);
    redacted().bind(|| assert_json_snapshot!("bad_cursor_problem", plain(&problem)));
    // The log shows every caller's calls: without the person's secret it
    // stays closed, even on a server without tokens.
    let anonymous = Api::anonymous(&server);
    let (status, problem) = anonymous.get("/runs").await;
    assert_eq!(status, 401);
    redacted().bind(|| assert_json_snapshot!("run_log_unauthorized_problem", plain(&problem)));
    let (status, _) = anonymous.get("/runs/not-a-uuid").await;
    assert_eq!(status, 400);
    let (status, problem) = anonymous.get("/runs/0190a0a0-0000-7000-8000-000000000000").await;
    assert_eq!(status, 404);
    redacted().bind(|| assert_json_snapshot!("unknown_run_problem", plain(&problem)));
}

#[tokio::test]
async fn entrypoints_get_input_output_and_artifacts() {
    let server = TestServer::builder(corpus_options()).allowed().start().await;
    let (status, env) = server
        .invoke(
            "data_analysis",
            json!({"data": [{"city": "Oslo", "temp": 4.5}, {"city": "Rome", "temp": 15.5}]}),
        )
        .await;
    assert_eq!(status, 200, "{env}");
    // The whole envelope: the output, the parsed summary, and one file,
    // report.csv, with its expiry and its signed link.
    redacted().bind(|| assert_json_snapshot!("data_analysis_envelope", plain(&env)));
    let files = env["files"].as_array().unwrap();
    // A link that works without a token until the artifact expires.
    let url = files[0]["url"].as_str().unwrap();
    let prefix = format!(
        "/runs/{}/files/report.csv?expires=",
        env["run_id"].as_str().unwrap()
    );
    assert!(url.starts_with(&prefix) && url.contains("&signature="), "{url}");
    assert!(files[0]["expires_at"].is_string(), "{env}");
    let anonymous = Api::anonymous(&server);
    let csv = anonymous
        .raw(Method::GET, url, &[], None)
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(csv, "column,count,mean,min,max\ntemp,2,10.0,4.5,15.5\n");
    let res = anonymous
        .raw(
            Method::GET,
            &format!("/runs/{}/files/../input.json", env["run_id"].as_str().unwrap()),
            &[],
            None,
        )
        .await;
    assert_eq!(res.status(), 404);

    // Bad input is the tool's failure, reported as a result.
    let (status, env) = server.invoke("data_analysis", json!({"rows": 1})).await;
    assert_eq!((status, env["success"].as_bool()), (200, Some(false)));
    assert_eq!(env["error"], "exited with code 1");
    assert!(env["output"].as_str().unwrap().contains("needs a 'data' array"));
}

#[tokio::test]
async fn scripts_run_by_extension_with_their_args() {
    let server = TestServer::builder(corpus_options()).allowed().start().await;
    let (_, env) = server
        .invoke(
            "text_tools_word_count",
            json!({"args": ["--text", "one two three"]}),
        )
        .await;
    assert_eq!(env["parsed"], json!({"words": 3}), "{env}");
    let (_, env) = server
        .invoke("text_tools_upper", json!({"args": ["hi", "there"]}))
        .await;
    assert_eq!(env["output"], "HI\nTHERE\n");
}

#[tokio::test]
async fn too_many_concurrent_runs_get_429_with_retry_after() {
    let dir = crate::common::tempdir().unwrap();
    one_tool_skill(dir.path(), "hold", "timeout: 60\n", "", "sleep 3");
    let settings = skilld::invoke::RunSettings {
        max_concurrent_per_tool: 1,
        queue_timeout: Duration::from_millis(200),
        ..Default::default()
    };
    let server = TestServer::builder(options(vec![root(dir.path(), Trust::User)]))
        .settings(settings)
        .allowed()
        .start()
        .await;
    let caller = Api::anonymous(&server);
    let first = caller
        .raw(
            Method::POST,
            "/tools/hold/invoke",
            &[("prefer", "respond-async")],
            None,
        )
        .await;
    assert_eq!(first.status(), 202);
    let second = caller.raw(Method::POST, "/tools/hold/invoke", &[], None).await;
    assert_eq!(second.status(), 429);
    assert_eq!(second.headers()["retry-after"], "1");
    let p: Value = second.json().await.unwrap();
    redacted().bind(|| assert_json_snapshot!("too_many_requests_problem", plain(&p)));
}

#[tokio::test]
async fn the_run_log_survives_a_restart() {
    let data = crate::common::tempdir().unwrap();
    let url = format!("sqlite://{}", data.path().join("skilld.db").display());
    let id = {
        let server = TestServer::builder(corpus_options())
            .database(&url)
            .allowed()
            .start()
            .await;
        let (_, env) = server.invoke("echo_json", json!({"value": "kept"})).await;
        env["run_id"].as_str().unwrap().to_owned()
    };
    let server = TestServer::builder(corpus_options())
        .database(&url)
        .allowed()
        .start()
        .await;
    let run = get_json(&server, &format!("/runs/{id}")).await;
    assert_eq!(run["status"], "succeeded");
    assert_eq!(run["result"]["parsed"]["value"], "kept");
}

#[tokio::test]
async fn readiness_reports_the_store_and_sandbox() {
    let server = TestServer::builder(corpus_options()).allowed().start().await;
    let ready = get_json(&server, "/readyz").await;
    assert_eq!(ready["store"], "sqlite");
    let network = ready["sandbox"]["network"].as_str().unwrap();
    assert_eq!(
        network,
        if skilld::runner::network_isolation_available() {
            "enforced"
        } else {
            "advisory"
        }
    );
}

#[test]
fn run_prints_the_envelope() {
    let data = crate::common::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_skilld"))
        .args(["run", "--skills"])
        .arg(corpus_dir().join("valid"))
        .args(["--data-dir"])
        .arg(data.path())
        .args(["echo_json", "--args", r#"{"value": "cli"}"#])
        .env("SKILLD_LOG", "warn")
        .env_remove("SKILLD_DATABASE_URL")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let env: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(env["parsed"], json!({"value": "cli", "ok": true}));
    assert!(data.path().join("skilld.db").is_file(), "the run is recorded");

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_skilld"))
        .args(["run", "--skills"])
        .arg(corpus_dir().join("valid"))
        .arg("--data-dir")
        .arg(data.path())
        .args(["echo_json", "--args", r#"{"nope": 1}"#])
        .env("SKILLD_LOG", "warn")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nope"));
}

#[tokio::test]
async fn shutdown_lets_runs_finish_within_the_grace_then_kills_them() {
    let dir = crate::common::tempdir().unwrap();
    one_tool_skill(
        dir.path(),
        "linger",
        "timeout: 60\n",
        "",
        "sh -c 'trap \"\" TERM; sleep 1000 & sleep 1000'",
    );
    one_tool_skill(dir.path(), "quick", "", "", "sleep 0.5");
    let server = TestServer::builder(options(vec![root(dir.path(), Trust::User)]))
        .allowed()
        .start()
        .await;
    let caller = Api::anonymous(&server);
    let start = |tool: &'static str| {
        let (caller, path) = (caller.clone(), format!("/tools/{tool}/invoke"));
        async move {
            let res = caller
                .raw(Method::POST, &path, &[("prefer", "respond-async")], None)
                .await;
            res.json::<Value>().await.unwrap()["run_id"]
                .as_str()
                .unwrap()
                .parse::<uuid::Uuid>()
                .unwrap()
        }
    };
    let (linger, quick) = (start("linger").await, start("quick").await);
    let store = server.store.clone();
    let mut pgid = None;
    for _ in 0..100 {
        pgid = store.runs.get_run(linger).await.unwrap().pgid;
        if pgid.is_some_and(|g| group_members(g).len() >= 2) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let pgid = pgid.expect("the lingering run has a process group");
    // The test server's grace is 2 s; the quick run finishes inside it.
    let _data = tokio::time::timeout(Duration::from_secs(30), server.shutdown())
        .await
        .expect("shutdown completes");
    assert_eq!(
        group_members(pgid),
        Vec::<i32>::new(),
        "no process of a run outlives the server"
    );
    let quick = store.runs.get_run(quick).await.unwrap();
    assert_eq!(quick.status.as_str(), "succeeded");
    let linger = store.runs.get_run(linger).await.unwrap();
    assert_eq!(linger.status.as_str(), "cancelled", "{linger:?}");
    assert_eq!(
        linger.result.unwrap()["signal"],
        "SIGKILL",
        "the TERM-ignoring group was killed"
    );
}

#[tokio::test]
async fn commands_dispatch_or_answer_instructions() {
    let server = TestServer::builder(corpus_options()).allowed().start().await;
    // `status` is tool_dispatch → git_status, run exactly like the invoke route.
    let caller = Api::anonymous(&server);
    let (status, env) = caller.post("/commands/status", json!({"arguments": {}})).await;
    assert_eq!(status, 200, "{env}");
    assert_eq!(
        (env["skill"].as_str(), env["tool"].as_str()),
        (Some("git"), Some("git_status"))
    );
    assert_eq!(env["success"], true, "{env}");
    assert!(
        env["output"].as_str().unwrap().starts_with("## "),
        "git status --short --branch: {env}"
    );
    let run = get_json(&server, &format!("/runs/{}", env["run_id"].as_str().unwrap())).await;
    assert_eq!(run["tool"], "git_status");

    // `plan` is prompt_rewrite: its instructions come back, nothing runs.
    let (status, prompt) = caller.post_empty("/commands/plan").await;
    assert_eq!(status, 200, "{prompt}");
    assert_eq!(prompt["skill"], "plan_compiler");
    assert!(
        prompt["instructions"]
            .as_str()
            .unwrap()
            .starts_with("# Plan Compiler")
    );
    assert_eq!(get_json(&server, "/runs?tool=plan").await["runs"], json!([]));

    let (status, problem) = caller.post_empty("/commands/nope").await;
    assert_eq!(status, 404);
    redacted().bind(|| assert_json_snapshot!("unknown_command_problem", plain(&problem)));
    let (_, dry) = caller.post_empty("/commands/status?dry_run=true").await;
    assert_eq!(dry["argv"], json!(["git", "status", "--short", "--branch"]));
}
