//! Manifest backends benchmark: what skilld adds to a call of a warm
//! process-backend child, and to a Starlark tool that only returns a value.
//!
//! Baselines, measured in the same run and interleaved with the measured
//! sides: the same Python child driven directly over its pipes (its own
//! work plus the pipe round trip), and `GET /healthz` (HTTP's own floor on
//! this server). Then throughput at 8 concurrent callers against one
//! caller, for a child whose tool answers at once and for one whose tool
//! waits 2 ms (threads in the child), so skilld's multiplexing shows.
//!
//! The c=1 figures (issue 30's process-backend and Starlark rows) are
//! measured in three rounds, each printed with its medians, p99s and
//! baselines.
//!
//! Run with `cargo bench --bench backends`. Nothing asserts on time; every
//! call is checked to have succeeded, so the figures cannot describe errors.

#![expect(
    clippy::expect_used,
    reason = "a benchmark that cannot measure should stop and say why"
)]

use serde_json::{Value, json};
use skilld::AppState;
use skilld::catalog::{Catalog, CatalogHandle};
use skilld::invoke::{Invoker, RunSettings};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
#[path = "support/cpu.rs"]
#[expect(dead_code, reason = "shared with the invoke bench, which reads CPU time too")]
mod cpu;

use cpu::{Stats, added_ms};
#[path = "support/skills.rs"]
mod skills;

const CALLS: usize = 1000;
/// Rounds of the c=1 figures, each measured and printed on its own.
const TABLE_ROUNDS: usize = 3;
const ROUNDS: usize = 4;
const WARMUP: usize = 100;
const WORKERS: usize = 8;

const CHILD: &str = r#"
import json, sys, threading, time

TOOLS = [{"name": "bench_echo", "description": "Answers at once.", "input_schema": {"type": "object"}},
         {"name": "bench_wait", "description": "Answers after 2 ms.", "input_schema": {"type": "object"}}]
lock = threading.Lock()

def send(obj):
    line = json.dumps(obj) + "\n"
    with lock:
        sys.stdout.write(line)
        sys.stdout.flush()

def wait_then_answer(rid):
    time.sleep(0.002)
    send({"jsonrpc": "2.0", "id": rid, "result": {"output": "ok", "success": True}})

for line in sys.stdin:
    req = json.loads(line)
    method = req["method"]
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": req["id"], "result": {"tools": TOOLS}})
    elif method == "tool/execute" and req["params"]["name"] == "bench_wait":
        threading.Thread(target=wait_then_answer, args=(req["id"],), daemon=True).start()
    elif method == "tool/execute":
        send({"jsonrpc": "2.0", "id": req["id"], "result": {"output": "ok", "success": True}})
    else:
        send({"jsonrpc": "2.0", "id": req["id"], "result": None})
        break
"#;

fn write_skills(root: &Path) {
    let proc_dir = root.join("bench-proc");
    std::fs::create_dir_all(&proc_dir).expect("skill dir");
    std::fs::write(
        proc_dir.join("SKILL.yaml"),
        "name: bench-proc\nversion: 1.0.0\ndescription: Bench child.\ntypes: [tool]\n\
         permissions: [shell:exec]\nread_only: true\nimplementation:\n  backend: process\n  entrypoint: child.py\n",
    )
    .expect("manifest");
    std::fs::write(proc_dir.join("child.py"), CHILD).expect("child");
    skills::write_star(root);
}

/// The child driven directly: one request at a time over its pipes.
struct Direct {
    _child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: BufReader<tokio::process::ChildStdout>,
    next: u64,
}

impl Direct {
    async fn start(script: &Path) -> Self {
        let mut child = tokio::process::Command::new("python3")
            .arg(script)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("python3");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut direct = Self {
            _child: child,
            stdin,
            stdout,
            next: 0,
        };
        direct.request("initialize", json!({})).await;
        direct
    }

    async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let mut line = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params}),
        )
        .expect("request");
        line.push(b'\n');
        self.stdin.write_all(&line).await.expect("write");
        let mut answer = String::new();
        self.stdout.read_line(&mut answer).await.expect("read");
        serde_json::from_str(&answer).expect("answer")
    }

    async fn call(&mut self) -> Duration {
        let start = Instant::now();
        let answer = self
            .request("tool/execute", json!({"name": "bench_echo", "input": {}}))
            .await;
        let took = start.elapsed();
        assert_eq!(answer["result"]["output"], "ok", "{answer}");
        took
    }
}

/// One round's c=1 call times, by side.
#[derive(Default)]
struct Times {
    base: Vec<Duration>,
    proc_http: Vec<Duration>,
    floor: Vec<Duration>,
    star: Vec<Duration>,
}

impl Times {
    fn print(&self, round: usize) {
        let (b, f, p) = (
            Stats::of(&self.base),
            Stats::of(&self.floor),
            Stats::of(&self.proc_http),
        );
        println!("-- round {} of {TABLE_ROUNDS} --", round + 1);
        println!("  baseline: the child over its pipes      {}", b.shown());
        println!("  baseline: GET /healthz (HTTP floor)     {}", f.shown());
        println!("  process tool over HTTP                  {}", p.shown());
        // The HTTP floor is counted apart: the child's baseline has no HTTP.
        println!(
            "  process backend, added over the child and the floor: median {:+.3} ms  p99 {:+.3} ms   [goal median <= 0.3 ms]",
            added_ms(p.median, b.median) - added_ms(f.median, Duration::ZERO),
            added_ms(p.p99, b.p99) - added_ms(f.p99, Duration::ZERO)
        );
        if self.star.is_empty() {
            return;
        }
        let s = Stats::of(&self.star);
        println!("  starlark value tool over HTTP           {}", s.shown());
        println!(
            "  starlark, added over the HTTP floor: median {:+.3} ms  p99 {:+.3} ms   [goal median <= 0.2 ms]",
            added_ms(s.median, f.median),
            added_ms(s.p99, f.p99)
        );
    }
}

async fn post(client: &reqwest::Client, url: &str) -> Duration {
    let start = Instant::now();
    let res = client
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(r#"{"arguments":{}}"#)
        .send()
        .await
        .expect("request");
    let status = res.status();
    let body = res.bytes().await.expect("body");
    let took = start.elapsed();
    let envelope: Value = serde_json::from_slice(&body).expect("JSON");
    assert!(
        status.is_success() && envelope["success"] == true,
        "{url}: {envelope}"
    );
    took
}

async fn get(client: &reqwest::Client, url: &str) -> Duration {
    let start = Instant::now();
    let res = client.get(url).send().await.expect("request");
    let ok = res.status().is_success();
    res.bytes().await.expect("body");
    let took = start.elapsed();
    assert!(ok, "{url}");
    took
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(1)
        .no_proxy()
        .build()
        .expect("client")
}

/// Calls per second of `WORKERS` callers making `n` calls in all.
async fn throughput(url: Arc<String>, n: usize) -> f64 {
    let start = Instant::now();
    let per = n / WORKERS;
    let tasks: Vec<_> = (0..WORKERS)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move {
                let client = client();
                for _ in 0..per {
                    post(&client, &url).await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("worker");
    }
    (per * WORKERS) as f64 / start.elapsed().as_secs_f64()
}

async fn sequential_rate(client: &reqwest::Client, url: &str, n: usize) -> f64 {
    let start = Instant::now();
    for _ in 0..n {
        post(client, url).await;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

/// Serves the skills under `root` on a loopback port, the run log in
/// `data`; where it listens, and the catalog as it loaded.
async fn start_server(root: &Path, data: &Path) -> (std::net::SocketAddr, Arc<Catalog>) {
    let url = format!("sqlite://{}", data.join("skilld.db").display());
    let store = skilld::store::connect(&url).await.expect("run log");
    let settings = RunSettings {
        workspace: data.to_path_buf(),
        data_dir: data.to_path_buf(),
        max_concurrent_per_tool: 16,
        starlark_host: Some(env!("CARGO_BIN_EXE_skilld").into()),
        ..RunSettings::default()
    };
    let invoker = Arc::new(Invoker::new(store.clone(), settings));
    let opts = skills::options(root, invoker.launcher());
    let catalog = Arc::new(
        tokio::task::spawn_blocking(move || CatalogHandle::new(opts))
            .await
            .expect("catalog"),
    );
    let current = catalog.current();
    assert!(current.skill("bench-proc").is_some(), "{:?}", current.diagnostics);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let state = AppState {
        sessions: skilld::session::Sessions::shared(&invoker, &store, catalog.clone(), Default::default()),
        approver: skilld::invoke::Approver::new(&invoker, &store),
        installer: skilld::install::Installer::shared(&catalog, &invoker),
        catalog: catalog.clone(),
        invoker,
        auth: Default::default(),
        limits: skilld::http::ServerLimits::default(),
        web: Arc::new(skilld::http::kit::guard::WebGuard {
            loopback_only: true,
            allowed_origins: Vec::new(),
        }),
    };
    tokio::spawn(skilld::serve(
        state,
        listener,
        std::future::pending(),
        Duration::from_secs(1),
    ));
    (addr, current)
}

/// The c=1 sides: the child over its pipes, and the server over HTTP.
struct Sides {
    http: reqwest::Client,
    direct: Direct,
    /// The process tool that answers at once.
    echo: String,
    /// `GET /healthz`, HTTP's own floor.
    floor: String,
    /// The Starlark value tool, where Starlark loaded.
    value: Option<String>,
}

impl Sides {
    /// One call of each side in turn, so drift hits every side alike.
    async fn call_each(&mut self, times: &mut Times) {
        times.base.push(self.direct.call().await);
        times.proc_http.push(post(&self.http, &self.echo).await);
        times.floor.push(get(&self.http, &self.floor).await);
        if let Some(value) = &self.value {
            times.star.push(post(&self.http, value).await);
        }
    }
}

/// [`TABLE_ROUNDS`] rounds of [`CALLS`] calls per side, each round in
/// [`ROUNDS`] blocks and printed on its own.
async fn c1_rounds(sides: &mut Sides) {
    println!("== c=1, {TABLE_ROUNDS} rounds of {CALLS} calls each, interleaved in {ROUNDS} blocks ==");
    for round in 0..TABLE_ROUNDS {
        let mut times = Times::default();
        for _ in 0..ROUNDS {
            for _ in 0..CALLS / ROUNDS {
                sides.call_each(&mut times).await;
            }
        }
        times.print(round);
    }
}

/// Throughput at c=8 against c=1, for a tool that answers at once and
/// one that waits 2 ms, so skilld's multiplexing shows.
async fn concurrency(http: &reqwest::Client, echo: Arc<String>, wait: Arc<String>) {
    for (label, url) in [("answers at once", echo), ("waits 2 ms", wait)] {
        throughput(url.clone(), 4 * WORKERS).await;
        let one = sequential_rate(http, &url, 400).await;
        let eight = throughput(url.clone(), 1600).await;
        println!(
            "== {label}: c=1 {one:.0} calls/s, c={WORKERS} {eight:.0} calls/s, x{:.2} ==",
            eight / one
        );
    }
}

async fn bench(root: &Path) {
    let data = tempfile::tempdir().expect("data dir");
    let (addr, catalog) = start_server(root, data.path()).await;
    let starlark = catalog.skill("bench-star").is_some();
    let tool = |name: &str| format!("http://{addr}/tools/{name}/invoke");
    let mut sides = Sides {
        http: client(),
        direct: Direct::start(&root.join("bench-proc/child.py")).await,
        echo: tool("bench_echo"),
        floor: format!("http://{addr}/healthz"),
        value: starlark.then(|| tool("bench_value")),
    };
    // Warm-up: the same calls as a round, their times thrown away.
    let mut warm = Times::default();
    for _ in 0..WARMUP {
        sides.call_each(&mut warm).await;
    }
    if !starlark {
        println!("starlark: not loaded ({:?})", catalog.diagnostics);
    }
    c1_rounds(&mut sides).await;
    let echo = Arc::new(sides.echo.clone());
    concurrency(&sides.http, echo, Arc::new(tool("bench_wait"))).await;
}

fn main() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // The child runs as the sandbox's user, who must reach its files.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let root = tmp.path().join("skills");
    write_skills(&root);
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    println!("{cores} cores available");
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(bench(&root));
}
