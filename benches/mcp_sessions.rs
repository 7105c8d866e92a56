//! MCP sessions at scale (issue 30): 1,000 sessions open at once on one
//! `skilld serve` (the real binary, Streamable HTTP at `/mcp`, protocol
//! 2025-11-25: every session is held by the server until it is deleted or
//! idles out).
//!
//! - Baseline: one session open; `tools/call` of a trivial read-only tool
//!   (`echo`) and `tools/list`, one at a time, with `GET /healthz` on the
//!   same server for the HTTP floor; the server's RSS.
//! - Setup: 1,000 sessions opened by 64 concurrent clients, each
//!   `initialize` + `notifications/initialized`, then `tools/list` and one
//!   `tools/call`: the latency of each step under that load, and the wall
//!   time until all are open.
//! - With 1,000 open: the same sequential calls as the baseline, on one
//!   of them, and the server's RSS; RSS per session is the difference over
//!   999. Then every session is deleted and the RSS read again.
//!
//! The server's `max_mcp_sessions` and `max_mcp_sessions_per_caller` are
//! raised for the bench (every local caller without a token is one caller).
//! `SKILLD_BENCH_QUICK=1` opens 100 sessions instead. Run with
//! `cargo bench --bench mcp_sessions`. Nothing asserts on time; every call
//! must answer (`tools/call` without `isError`, `tools/list` with the
//! tool), and every session must open.

#![expect(
    clippy::expect_used,
    reason = "a benchmark that cannot measure should stop and say why"
)]

use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "support/mcp.rs"]
mod mcp;
#[path = "support/server.rs"]
mod server;
#[path = "support/stats.rs"]
mod stats;

use stats::{line, ms, quantile};

/// Clients opening sessions at once.
const OPENERS: usize = 64;
/// Sequential calls per measured series.
const CALLS: usize = 300;
const WARMUP: usize = 30;

fn write_skill(root: &Path) {
    let dir = root.join("bench-noop");
    std::fs::create_dir_all(&dir).expect("skill dir");
    std::fs::write(
        dir.join("SKILL.md"),
        "---\nname: bench-noop\nversion: 1.0.0\ndescription: Says ok.\nread_only: true\n---\n\n\
         ### bench_noop\n\nEchoes a word.\n\n#### Parameters\n\nNone.\n\n#### Command\n\n```\necho bench-ok\n```\n",
    )
    .expect("SKILL.md");
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(OPENERS)
        .no_proxy()
        .build()
        .expect("client")
}

async fn call(http: &reqwest::Client, s: &mcp::Session) -> Duration {
    let start = Instant::now();
    let r = s
        .request(http, "tools/call", json!({"name": "bench_noop", "arguments": {}}))
        .await
        .expect("tools/call");
    let took = start.elapsed();
    // It ran (a call held for a person answers too, with other text).
    let text = r["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        r["isError"] != true && text.contains("bench-ok"),
        "tools/call: {r}"
    );
    took
}

async fn list(http: &reqwest::Client, s: &mcp::Session) -> Duration {
    let start = Instant::now();
    let r = s
        .request(http, "tools/list", json!({}))
        .await
        .expect("tools/list");
    let took = start.elapsed();
    let tools = r["tools"].as_array().expect("tools");
    assert!(tools.iter().any(|t| t["name"] == "bench_noop"), "{r}");
    took
}

struct Series {
    healthz: Vec<Duration>,
    call: Vec<Duration>,
    list: Vec<Duration>,
}

/// Sequential calls on one session, alternating with the floor.
async fn series(http: &reqwest::Client, base: &str, s: &mcp::Session) -> Series {
    let mut out = Series {
        healthz: Vec::new(),
        call: Vec::new(),
        list: Vec::new(),
    };
    for i in 0..WARMUP + CALLS {
        let start = Instant::now();
        let r = http.get(format!("{base}/healthz")).send().await.expect("healthz");
        assert!(r.status().is_success());
        r.bytes().await.expect("body");
        let h = start.elapsed();
        let c = call(http, s).await;
        let l = list(http, s).await;
        if i >= WARMUP {
            out.healthz.push(h);
            out.call.push(c);
            out.list.push(l);
        }
    }
    out
}

fn print_series(label: &str, s: &mut Series) {
    println!("-- {label} --");
    println!("  GET /healthz (floor)   {}", line(&mut s.healthz));
    println!("  tools/call bench_noop  {}", line(&mut s.call));
    println!("  tools/list             {}", line(&mut s.list));
}

/// `skilld serve` on `tmp` with one skill, room for `sessions` sessions.
fn start(tmp: &Path, sessions: usize) -> server::Skilld {
    let root = tmp.join("skills");
    write_skill(&root);
    let data = tmp.join("data");
    std::fs::create_dir_all(&data).expect("data");
    let config = tmp.join("skilld.toml");
    let cap = sessions + 100;
    std::fs::write(
        &config,
        format!(
            "max_mcp_sessions = {cap}\nmax_mcp_sessions_per_caller = {cap}\nmax_connections = 4096\n\
             max_concurrent_runs = 64\nmax_concurrent_runs_per_tool = 64\nqueue_timeout_secs = 120\n"
        ),
    )
    .expect("config");
    // Bundled: a read-only tool runs without asking anyone.
    let (root_s, data_s, config_s) = (
        format!("bundled={}", root.display()),
        data.display().to_string(),
        config.display().to_string(),
    );
    server::Skilld::start(
        &[
            "--config",
            &config_s,
            "--skills",
            &root_s,
            "--data-dir",
            &data_s,
            "--workspace",
            &data_s,
            "--no-watch",
        ],
        &tmp.join("skilld.log"),
    )
}

/// The sessions opened under load, and what each step took.
struct Opening {
    all: Vec<mcp::Session>,
    setup: Vec<Duration>,
    lists: Vec<Duration>,
    calls: Vec<Duration>,
    wall: Duration,
}

/// Opens the sessions after `one`, `OPENERS` at a time, each listed and
/// called once.
async fn open_rest(url: &str, sessions: usize, one: mcp::Session) -> Opening {
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(1));
    let wall = Instant::now();
    let tasks: Vec<_> = (0..OPENERS)
        .map(|_| {
            let (next, url) = (next.clone(), url.to_owned());
            tokio::spawn(async move {
                let http = client();
                let mut opened = Vec::new();
                let (mut setup, mut lists, mut calls) = (Vec::new(), Vec::new(), Vec::new());
                while next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < sessions {
                    let start = Instant::now();
                    let s = mcp::Session::open(&http, &url).await.expect("open a session");
                    setup.push(start.elapsed());
                    lists.push(list(&http, &s).await);
                    calls.push(call(&http, &s).await);
                    opened.push(s);
                }
                (opened, setup, lists, calls)
            })
        })
        .collect();
    let mut out = Opening {
        all: vec![one],
        setup: Vec::new(),
        lists: Vec::new(),
        calls: Vec::new(),
        wall: Duration::ZERO,
    };
    for t in tasks {
        let (o, s, l, c) = t.await.expect("opener");
        out.all.extend(o);
        out.setup.extend(s);
        out.lists.extend(l);
        out.calls.extend(c);
    }
    out.wall = wall.elapsed();
    assert_eq!(out.all.len(), sessions, "every session opened");
    let ids: std::collections::HashSet<&str> = out.all.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids.len(), sessions, "distinct sessions");
    out
}

/// Deletes every session; how long that took.
async fn close_all(http: &reqwest::Client, all: &[mcp::Session]) -> Duration {
    let close = Instant::now();
    for s in all {
        s.close(http).await;
    }
    close.elapsed()
}

/// A new session opens and lists after the others were deleted; the
/// server's `/readyz`.
async fn reopen(http: &reqwest::Client, base: &str, url: &str) -> Value {
    let again = mcp::Session::open(http, url)
        .await
        .expect("a session after closing");
    list(http, &again).await;
    http.get(format!("{base}/readyz"))
        .send()
        .await
        .expect("readyz")
        .json()
        .await
        .expect("readyz JSON")
}

/// The server's RSS (KiB) at each step.
struct Rss {
    one: u64,
    all: u64,
    after: u64,
    closed: u64,
}

async fn bench(sessions: usize) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let skilld = start(tmp.path(), sessions);
    let http = client();
    skilld.ready(&http, 1, Duration::from_secs(60)).await;
    let base = skilld.base.clone();
    let url = format!("{base}/mcp");
    let pid = skilld.pid();

    // Baseline: one session.
    let one = mcp::Session::open(&http, &url).await.expect("first session");
    let mut alone = series(&http, &base, &one).await;
    let rss_one = stats::rss_kib_of(pid).expect("RSS");

    let mut opening = open_rest(&url, sessions, one).await;
    let rss_all = stats::rss_kib_of(pid).expect("RSS");

    // Every session still answers.
    for s in opening.all.iter().step_by((sessions / 20).max(1)) {
        list(&http, s).await;
    }
    let mut crowded = series(&http, &base, &opening.all[sessions / 2]).await;
    let rss_after = stats::rss_kib_of(pid).expect("RSS");

    let closed_in = close_all(&http, &opening.all).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss = Rss {
        one: rss_one,
        all: rss_all,
        after: rss_after,
        closed: stats::rss_kib_of(pid).expect("RSS"),
    };
    let status = reopen(&http, &base, &url).await;
    drop(skilld);

    println!();
    println!("== MCP sessions: {sessions} open at once against 1 (baseline), same server, same run ==");
    print_series("1 session open (baseline)", &mut alone);
    print_opening(sessions, &mut opening);
    print_series(&format!("{sessions} sessions open"), &mut crowded);
    print_against_one(sessions, &mut alone, &mut crowded);
    print_memory(sessions, &rss);
    println!(
        "  {sessions} sessions deleted in {} ({} each); a new one opened after; readyz {}",
        ms(closed_in),
        ms(closed_in / sessions as u32),
        status["status"]
    );
}

fn print_opening(sessions: usize, o: &mut Opening) {
    println!("-- opening {sessions} sessions, {OPENERS} clients at once --");
    println!("  initialize + initialized {}", line(&mut o.setup));
    println!("  first tools/list         {}", line(&mut o.lists));
    println!("  first tools/call         {}", line(&mut o.calls));
    println!(
        "  all {sessions} open (each listed and called once) in {:.2} s = {:.0} sessions/s",
        o.wall.as_secs_f64(),
        sessions as f64 / o.wall.as_secs_f64()
    );
}

/// The crowded series against the baseline's.
fn print_against_one(sessions: usize, alone: &mut Series, crowded: &mut Series) {
    let r = |a: &mut Vec<Duration>, b: &mut Vec<Duration>| {
        quantile(b, 0.5).as_secs_f64() / quantile(a, 0.5).as_secs_f64().max(1e-9)
    };
    println!(
        "  {sessions} open vs 1: tools/call median ×{:.2}, p99 {} vs {}; tools/list median ×{:.2}",
        r(&mut alone.call, &mut crowded.call),
        ms(quantile(&mut crowded.call, 0.99)),
        ms(quantile(&mut alone.call, 0.99)),
        r(&mut alone.list, &mut crowded.list),
    );
}

fn print_memory(sessions: usize, rss: &Rss) {
    println!("-- server memory (VmRSS of skilld) --");
    println!(
        "  1 open {:.1} MiB; {sessions} open {:.1} MiB (after the series {:.1} MiB); all deleted {:.1} MiB",
        rss.one as f64 / 1024.0,
        rss.all as f64 / 1024.0,
        rss.after as f64 / 1024.0,
        rss.closed as f64 / 1024.0
    );
    println!(
        "  per session: {:.1} KiB ((RSS with {sessions} − RSS with 1) / {})",
        (rss.all as f64 - rss.one as f64) / (sessions - 1) as f64,
        sessions - 1
    );
}

fn main() {
    let sessions = if stats::quick() { 100 } else { 1_000 };
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    println!("{cores} cores; {sessions} sessions; {CALLS} sequential calls per series");
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(bench(sessions));
}
