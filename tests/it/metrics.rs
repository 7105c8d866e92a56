//! `GET /metrics` over a real socket. Every server of this test process
//! shares one recorder (the `metrics` crate allows one per process) and
//! other tests make requests at the same time, so counts are compared
//! before and after, and made-up paths and tool names are unique to this
//! file.

use crate::common::{Api, TestServer, corpus_options, options, root};
use reqwest::Method;
use serde_json::{Value, json};
use skilld::skill::Trust;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// The body of `/metrics`, after checking its status and content type.
async fn scrape(server: &TestServer) -> String {
    let res = get(server, "/metrics").await;
    assert_eq!(res.status(), 200);
    let content_type = res.headers()["content-type"].to_str().unwrap().to_owned();
    assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
    res.text().await.unwrap()
}

/// `GET path` as a caller without a token, the response as it came.
async fn get(server: &TestServer, path: &str) -> reqwest::Response {
    Api::anonymous(server).raw(Method::GET, path, &[], None).await
}

/// Every sample of `name` as (labels, value).
fn samples(text: &str, name: &str) -> Vec<(BTreeMap<String, String>, f64)> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (n, rest) = series.split_once('{').unwrap_or((series, "}"));
            if n != name {
                return None;
            }
            let labels = rest
                .strip_suffix('}')
                .unwrap()
                .split(',')
                .filter(|kv| !kv.is_empty())
                .map(|kv| {
                    let (k, v) = kv.split_once('=').unwrap();
                    (k.to_owned(), v.trim_matches('"').to_owned())
                })
                .collect();
            Some((labels, value.parse().unwrap()))
        })
        .collect()
}

/// The value of the sample of `name` with exactly `labels`; 0 when absent.
fn value(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    let want: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    samples(text, name)
        .into_iter()
        .find(|(got, _)| *got == want)
        .map_or(0.0, |(_, v)| v)
}

#[tokio::test]
async fn metrics_are_prometheus_text_with_help_and_type() {
    let server = TestServer::builder(corpus_options()).start().await;
    // The first scrape of a process may come before any request was counted.
    get(&server, "/healthz").await;
    let text = scrape(&server).await;
    for name in [
        "skilld_http_requests_total",
        "skilld_http_request_duration_seconds",
    ] {
        assert!(text.contains(&format!("# HELP {name} ")), "{name} in {text}");
    }
    assert!(
        text.contains("# TYPE skilld_http_requests_total counter"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE skilld_http_request_duration_seconds histogram"),
        "{text}"
    );
    // Every line is a comment, a sample `name{labels} value`, or blank.
    for line in text.lines().filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let (series, value) = line.rsplit_once(' ').unwrap();
        assert!(series.starts_with("skilld_"), "{line}");
        assert!(value.parse::<f64>().is_ok(), "{line}");
    }
}

#[tokio::test]
async fn requests_are_counted_by_route_template_and_status() {
    let server = TestServer::builder(corpus_options()).start().await;
    let ok = [("method", "GET"), ("route", "/skills"), ("status", "200")];
    let missing_skill = [("method", "GET"), ("route", "/skills/{skill}"), ("status", "404")];
    let unmatched = [("method", "GET"), ("route", "unmatched"), ("status", "404")];
    let before = scrape(&server).await;

    for _ in 0..3 {
        let res = get(&server, "/skills").await;
        assert_eq!(res.status(), 200);
    }
    let res = get(&server, "/skills/no-such-skill-metrics-test").await;
    assert_eq!(res.status(), 404);
    for i in 0..2 {
        let res = get(&server, &format!("/metrics-test-made-up-{i}/x")).await;
        assert_eq!(res.status(), 404);
    }
    let after = scrape(&server).await;

    let counted = |labels: &[(&str, &str)]| {
        let name = "skilld_http_requests_total";
        value(&after, name, labels) - value(&before, name, labels)
    };
    // Other tests' servers count into the same series, so at least.
    assert!(counted(&ok) >= 3.0, "{after}");
    assert!(counted(&missing_skill) >= 1.0, "{after}");
    assert!(counted(&unmatched) >= 2.0, "{after}");
    // Clients' paths never become labels.
    assert!(!after.contains("metrics-test-made-up"), "{after}");
    assert!(!after.contains("no-such-skill-metrics-test"), "{after}");
    // Every route label is a template or `unmatched`.
    for (labels, _) in samples(&after, "skilld_http_requests_total") {
        let route = &labels["route"];
        assert!(route == "unmatched" || route.starts_with('/'), "{route}");
    }

    let timed = value(
        &after,
        "skilld_http_request_duration_seconds_count",
        &[("method", "GET"), ("route", "/skills")],
    );
    assert!(timed >= 3.0, "{after}");
    let bucket = value(
        &after,
        "skilld_http_request_duration_seconds_bucket",
        &[("method", "GET"), ("route", "/skills"), ("le", "+Inf")],
    );
    assert_eq!(bucket, timed);
}

/// A bundled-trust skill whose read-only tools run without approval:
/// `metrics_probe_ok` succeeds, `metrics_probe_fail` exits 3, and
/// `metrics_probe_hold` runs until `release` exists.
fn probe_skill(dir: &Path, release: &Path) {
    let skill = dir.join("metrics-probe");
    std::fs::create_dir_all(&skill).unwrap();
    let tool = |name: &str, command: &str| {
        format!(
            "### {name}\n\nA probe.\n\n#### Parameters\n\nNone.\n\n#### Command\n\n```bash\n{command}\n```\n\n"
        )
    };
    let body = [
        tool("metrics_probe_ok", "true"),
        tool("metrics_probe_fail", "sh -c 'exit 3'"),
        tool(
            "metrics_probe_hold",
            &format!("sh -c 'until [ -e {} ]; do sleep 0.02; done'", release.display()),
        ),
    ]
    .concat();
    std::fs::write(
        skill.join("SKILL.md"),
        format!(
            "---\nname: metrics-probe\nversion: 1.0.0\ndescription: Probes for the metrics tests.\nread_only: true\ntimeout: 30\n---\n\n# Probe\n\n{body}"
        ),
    )
    .unwrap();
}

async fn invoke(server: &TestServer, tool: &str) -> Value {
    let (status, env) = Api::anonymous(server).invoke(tool, json!({})).await;
    assert_eq!(status, 200, "{tool}: {env}");
    env
}

#[tokio::test]
async fn runs_are_counted_by_tool_and_status_timed_and_in_flight() {
    let skills = crate::common::tempdir().unwrap();
    // Where the tool can see it: runs see only what they are granted of
    // the host's /tmp.
    let marks = crate::common::marks_dir();
    let release = marks.path().join("release");
    probe_skill(skills.path(), &release);
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::Bundled)]))
        .start()
        .await;

    for _ in 0..2 {
        assert_eq!(invoke(&server, "metrics_probe_ok").await["success"], true);
    }
    let failed = invoke(&server, "metrics_probe_fail").await;
    assert_eq!(failed["exit_code"], 3);
    let text = scrape(&server).await;
    // The pipeline labels runs with the tool's name.
    let (ok, fail) = ("metrics_probe_ok", "metrics_probe_fail");
    let runs =
        |tool: &str, status: &str| value(&text, "skilld_runs_total", &[("tool", tool), ("status", status)]);
    assert_eq!(runs(ok, "succeeded"), 2.0, "{text}");
    assert_eq!(runs(ok, "failed"), 0.0, "{text}");
    assert_eq!(runs(fail, "failed"), 1.0, "{text}");
    let timed = |tool: &str| value(&text, "skilld_run_duration_seconds_count", &[("tool", tool)]);
    assert_eq!((timed(ok), timed(fail)), (2.0, 1.0), "{text}");
    let in_all = value(
        &text,
        "skilld_run_duration_seconds_bucket",
        &[("tool", ok), ("le", "600")],
    );
    assert_eq!(in_all, 2.0, "{text}");
    assert!(text.contains("# HELP skilld_runs_total "), "{text}");
    assert!(
        text.contains("# TYPE skilld_run_duration_seconds histogram"),
        "{text}"
    );

    // A run is in flight from its start to its end.
    let held = {
        let caller = Api::anonymous(&server);
        tokio::spawn(async move { caller.invoke("metrics_probe_hold", json!({})).await.1 })
    };
    let hold = "metrics_probe_hold";
    let mut in_flight = 0.0;
    for _ in 0..500 {
        let text = scrape(&server).await;
        in_flight = value(&text, "skilld_runs_in_flight", &[("tool", hold)]);
        if in_flight > 0.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(in_flight, 1.0);
    std::fs::write(&release, "").unwrap();
    assert_eq!(held.await.unwrap()["success"], true);
    let text = scrape(&server).await;
    assert_eq!(
        value(&text, "skilld_runs_in_flight", &[("tool", hold)]),
        0.0,
        "{text}"
    );
    let held_runs = value(
        &text,
        "skilld_runs_total",
        &[("tool", hold), ("status", "succeeded")],
    );
    assert_eq!(held_runs, 1.0, "{text}");
}
