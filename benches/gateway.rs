//! Gateway benchmark (issue 27): what skilld's `mcp` backend adds to a
//! read-only call of an existing MCP server, against calling that server
//! directly and against mcpo, the OpenAPI proxy, fronting the same server.
//!
//! Two upstreams, each reached three ways in the same run:
//! - `tests/python/upstream.py http` (the official Python SDK's server over
//!   Streamable HTTP), tool `echo`: directly (a JSON-RPC `tools/call` POST
//!   on its session), through skilld (a manifest with `url:`), through mcpo
//!   (`--server-type streamable-http`);
//! - `@modelcontextprotocol/server-everything` on stdio, tool `echo`:
//!   directly over its pipes (JSON-RPC lines, multiplexed by id), through
//!   skilld (a manifest with `command:`), through mcpo (stdio).
//!
//! skilld is driven with `POST /skills/{skill}/tools/{tool}/invoke` (one
//! JSON POST per call, no session to keep), mcpo with `POST /echo`; the
//! HTTP legs share one driver (reqwest, one connection per caller). Each
//! leg is warmed up; at c=1 the legs alternate in rounds so drift on a
//! shared machine hits them alike; at c=8 each leg runs alone. The direct
//! leg is the baseline; `GET /healthz` on the same skilld shows what HTTP
//! alone costs (the stdio baseline has no HTTP hop). Goal: at most +0.5 ms
//! median at c=1 over direct, and at c=8 at least 3x mcpo's calls/s.
//!
//! Needs the test venv (`target/python-venv`, or `SKILLD_PYTHON_VENV`),
//! the npm servers (the kit named by `SKILLD_UPSTREAMS`, else
//! `tests/mcp-upstreams/node_modules`: `npm ci` there) and mcpo's venv
//! (`target/mcpo-venv`, made here from the pins of `.ci/run` if missing).
//! A leg whose piece is missing, or whose manifest skilld rejects, prints
//! `skipped: <why>` and the rest still run.
//!
//! Run with `cargo bench --bench gateway`. Nothing asserts on time; every
//! measured call is checked to have answered the echoed text.

#![expect(
    clippy::expect_used,
    reason = "a benchmark that cannot measure should stop and say why"
)]

use serde_json::{Value, json};
use skilld::AppState;
use skilld::catalog::{CatalogHandle, CatalogOptions, Root};
use skilld::invoke::{Invoker, RunSettings};
use skilld::skill::{Runtimes, Trust};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{Mutex, oneshot};

/// Calls at c=1, per leg.
const N_SEQ: usize = 600;
/// Calls at c=8, per leg.
const N_CONC: usize = 1600;
const WORKERS: usize = 8;
const ROUNDS: usize = 6;
const WARMUP: usize = 50;
const TEXT: &str = "bench";
/// The protocol revision the direct legs speak (the handshake era, which
/// every upstream here and mcpo's mcp 1.x client speak too).
const PROTOCOL: &str = "2025-11-25";

/// mcpo's venv, pinned as `.ci/run` pins it: keep the two in step.
const MCPO_REQUIREMENTS: [&str; 5] = [
    "mcpo==0.0.20",
    "mcp==1.30.0",
    "fastapi==0.144.0",
    "starlette==1.10.0",
    "uvicorn==0.54.0",
];

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A child killed when dropped, with the group it leads.
struct Child(tokio::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        if let Some(pid) = self.0.id() {
            // Its own group (process_group(0)): mcpo's and node's children go too.
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
    }
}

fn spawn(program: &Path, args: &[&str], stdout: Stdio) -> Result<Child, String> {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::null())
        .process_group(0)
        .kill_on_drop(true);
    cmd.spawn()
        .map(Child)
        .map_err(|e| format!("cannot start {}: {e}", program.display()))
}

/// The test venv: `SKILLD_PYTHON_VENV`, else `target/python-venv`.
fn python() -> Result<PathBuf, String> {
    let venv = std::env::var_os("SKILLD_PYTHON_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target/python-venv"));
    let python = venv.join("bin/python");
    let ok = std::process::Command::new(&python)
        .args(["-c", "import mcp"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    ok.then_some(python).ok_or_else(|| {
        format!(
            "no usable test venv at {} (run `bash .ci/run`, or `cargo test --test it python_client`, to make it)",
            venv.display()
        )
    })
}

/// mcpo's own venv, made from `MCPO_REQUIREMENTS` when missing.
fn mcpo() -> Result<PathBuf, String> {
    let venv = repo().join("target/mcpo-venv");
    let bin = venv.join("bin/mcpo");
    let marker = venv.join(".skilld-requirements");
    let wanted = MCPO_REQUIREMENTS.join("\n");
    if bin.is_file() && std::fs::read_to_string(&marker).is_ok_and(|m| m.trim() == wanted) {
        return Ok(bin);
    }
    println!(
        "making mcpo's venv at {} from PyPI ({}); `bash .ci/run` makes the same one",
        venv.display(),
        MCPO_REQUIREMENTS.join(" ")
    );
    let run = |cmd: &mut std::process::Command| -> Result<(), String> {
        let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{cmd:?}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    };
    run(std::process::Command::new("python3")
        .args(["-m", "venv", "--clear"])
        .arg(&venv))?;
    run(std::process::Command::new(venv.join("bin/python"))
        .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check"])
        .args(MCPO_REQUIREMENTS))?;
    std::fs::write(&marker, wanted + "\n").map_err(|e| e.to_string())?;
    Ok(bin)
}

/// The directory holding the npm servers' `node_modules`: the kit of
/// `tests/mcp-upstreams/kit.sh` when `SKILLD_UPSTREAMS` names one (outside
/// the checkout, readable by the sandbox's user), else tests/mcp-upstreams
/// (`npm ci` there).
fn npm_servers() -> PathBuf {
    match std::env::var_os("SKILLD_UPSTREAMS").map(PathBuf::from) {
        Some(kit) if kit.join(".ready").is_file() => kit,
        _ => repo().join("tests/mcp-upstreams"),
    }
}

/// server-everything's entry point.
fn everything() -> Result<PathBuf, String> {
    let dir = npm_servers();
    let js = dir.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    js.is_file().then_some(js).ok_or_else(|| {
        format!(
            "{} is missing (`npm ci` in tests/mcp-upstreams, or SKILLD_UPSTREAMS=$(bash tests/mcp-upstreams/kit.sh))",
            dir.join("node_modules").display()
        )
    })
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(1)
        .no_proxy()
        .build()
        .expect("client")
}

/// The JSON-RPC answer in a Streamable HTTP body: plain JSON, or the
/// `data:` line of an SSE stream that carries it.
fn rpc_answer(body: &[u8]) -> Option<Value> {
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        return Some(v);
    }
    String::from_utf8_lossy(body)
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v.get("id").is_some())
}

fn echoed(answer: &Value) -> Option<&str> {
    answer["result"]["content"][0]["text"].as_str()
}

/// An upstream's Streamable HTTP endpoint, driven directly on one session.
struct DirectHttp {
    url: String,
    session: Option<String>,
    next: AtomicU64,
}

impl DirectHttp {
    async fn connect(url: &str) -> Result<Self, String> {
        let http = client();
        let res = http
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .json(
                &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": PROTOCOL, "capabilities": {},
                "clientInfo": {"name": "skilld-bench", "version": "1"}}}),
            )
            .send()
            .await
            .map_err(|e| format!("initialize: {e}"))?;
        let session = res
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = res.bytes().await.map_err(|e| e.to_string())?;
        rpc_answer(&body)
            .filter(|a| a.get("result").is_some())
            .ok_or_else(|| format!("initialize: {}", String::from_utf8_lossy(&body)))?;
        let direct = Self {
            url: url.to_owned(),
            session,
            next: AtomicU64::new(1),
        };
        direct
            .request(
                &http,
                json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            )
            .send()
            .await
            .map_err(|e| format!("initialized: {e}"))?;
        Ok(direct)
    }

    fn request(&self, http: &reqwest::Client, body: Value) -> reqwest::RequestBuilder {
        let mut req = http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", PROTOCOL)
            .json(&body);
        if let Some(s) = &self.session {
            req = req.header("mcp-session-id", s);
        }
        req
    }

    async fn call(&self, http: &reqwest::Client) -> Result<(), String> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let res = self
            .request(
                http,
                json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                       "params": {"name": "echo", "arguments": {"text": TEXT}}}),
            )
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let body = res.bytes().await.map_err(|e| e.to_string())?;
        match rpc_answer(&body) {
            Some(a) if echoed(&a) == Some(TEXT) => Ok(()),
            _ => Err(format!("direct: {}", String::from_utf8_lossy(&body))),
        }
    }
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Value>>>>;

/// A stdio upstream driven directly over its pipes; concurrent calls are
/// matched to answers by id.
struct DirectStdio {
    _child: Child,
    stdin: Mutex<tokio::process::ChildStdin>,
    pending: Pending,
    next: AtomicU64,
}

impl DirectStdio {
    async fn start(program: &Path, args: &[&str]) -> Result<Self, String> {
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|e| format!("{}: {e}", program.display()))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let pending: Pending = Arc::default();
        let routes = pending.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(msg) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                // Notifications and the server's own requests carry a method.
                if msg.get("method").is_some() {
                    continue;
                }
                if let Some(id) = msg["id"].as_u64()
                    && let Some(tx) = routes.lock().await.remove(&id)
                {
                    let _ = tx.send(msg);
                }
            }
        });
        let direct = Self {
            _child: Child(child),
            stdin: Mutex::new(stdin),
            pending,
            next: AtomicU64::new(1),
        };
        let init = direct
            .request(
                "initialize",
                json!({"protocolVersion": PROTOCOL, "capabilities": {},
                       "clientInfo": {"name": "skilld-bench", "version": "1"}}),
            )
            .await?;
        if init.get("result").is_none() {
            return Err(format!("initialize: {init}"));
        }
        direct
            .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await?;
        Ok(direct)
    }

    async fn send(&self, msg: Value) -> Result<(), String> {
        let mut line = serde_json::to_vec(&msg).map_err(|e| e.to_string())?;
        line.push(b'\n');
        self.stdin
            .lock()
            .await
            .write_all(&line)
            .await
            .map_err(|e| e.to_string())
    }

    async fn request(&self, method: &str, params: Value) -> Result<Value, String> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending.lock().await.insert(id, tx);
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        tokio::time::timeout(Duration::from_secs(10), rx)
            .await
            .map_err(|_| format!("{method}: no answer in 10 s"))?
            .map_err(|_| format!("{method}: the upstream closed its stdout"))
    }

    async fn call(&self, arg: &str, want: &str) -> Result<(), String> {
        let a = self
            .request("tools/call", json!({"name": "echo", "arguments": {arg: TEXT}}))
            .await?;
        (echoed(&a) == Some(want))
            .then_some(())
            .ok_or_else(|| format!("direct stdio: {a}"))
    }
}

/// One way of making the call.
enum Leg {
    Http(Arc<DirectHttp>),
    Stdio(Arc<DirectStdio>, &'static str, &'static str),
    /// skilld's invoke route and body: 200 with `"success": true`.
    Skilld(String, String),
    /// mcpo's `POST /echo`: 200, the echoed text in the body.
    Mcpo(String, Value, &'static str),
    /// skilld's `GET /healthz`: HTTP's own floor on this server.
    Floor(String),
}

impl Leg {
    async fn call(&self, http: &reqwest::Client) -> Result<Duration, String> {
        let start = Instant::now();
        match self {
            Leg::Http(d) => d.call(http).await?,
            Leg::Stdio(d, arg, want) => d.call(arg, want).await?,
            Leg::Skilld(url, body) => {
                let res = http
                    .post(url)
                    .header("content-type", "application/json")
                    .body(body.clone())
                    .send()
                    .await
                    .map_err(|e| e.to_string())?;
                let status = res.status();
                let body = res.bytes().await.map_err(|e| e.to_string())?;
                let ok = status.is_success()
                    && serde_json::from_slice::<Value>(&body).is_ok_and(|v| v["success"] == true);
                if !ok {
                    return Err(format!("skilld: {status} {}", String::from_utf8_lossy(&body)));
                }
            }
            Leg::Mcpo(url, body, want) => {
                let res = http
                    .post(url)
                    .json(body)
                    .send()
                    .await
                    .map_err(|e| e.to_string())?;
                let status = res.status();
                let body = res.bytes().await.map_err(|e| e.to_string())?;
                if !status.is_success() || !String::from_utf8_lossy(&body).contains(want) {
                    return Err(format!("mcpo: {status} {}", String::from_utf8_lossy(&body)));
                }
            }
            Leg::Floor(url) => {
                let res = http.get(url).send().await.map_err(|e| e.to_string())?;
                let status = res.status();
                res.bytes().await.map_err(|e| e.to_string())?;
                if !status.is_success() {
                    return Err(format!("GET /healthz: {status}"));
                }
            }
        }
        Ok(start.elapsed())
    }
}

#[derive(Default, Clone, Copy)]
struct Figures {
    median: f64,
    p99: f64,
    rate: f64,
}

fn figures(mut v: Vec<Duration>, wall: Duration, calls: usize) -> Figures {
    v.sort();
    let at = |q: f64| v[((v.len() as f64 - 1.0) * q).round() as usize].as_secs_f64() * 1000.0;
    Figures {
        median: at(0.5),
        p99: at(0.99),
        rate: calls as f64 / wall.as_secs_f64(),
    }
}

struct Row {
    label: String,
    leg: Result<Arc<Leg>, String>,
    seq: Vec<Duration>,
    seq_wall: Duration,
    c1: Figures,
    c8: Figures,
}

async fn concurrent(leg: Arc<Leg>, n: usize) -> Result<Figures, String> {
    let per = n / WORKERS;
    let start = Instant::now();
    let tasks: Vec<_> = (0..WORKERS)
        .map(|_| {
            let leg = leg.clone();
            tokio::spawn(async move {
                let http = client();
                let mut took = Vec::with_capacity(per);
                for _ in 0..per {
                    took.push(leg.call(&http).await?);
                }
                Ok::<_, String>(took)
            })
        })
        .collect();
    let mut all = Vec::with_capacity(n);
    for t in tasks {
        all.extend(t.await.map_err(|e| e.to_string())??);
    }
    Ok(figures(all, start.elapsed(), per * WORKERS))
}

/// Measures the rows of one upstream and prints its table.
async fn measure(title: &str, mut rows: Vec<Row>) {
    let http = client();
    warm_up(&http, &mut rows).await;
    sequential(&http, &mut rows).await;
    for row in &mut rows {
        concurrent_row(row).await;
    }
    print_table(title, &rows);
}

/// `WARMUP` calls per leg; a leg that fails here is not measured.
async fn warm_up(http: &reqwest::Client, rows: &mut [Row]) {
    for row in rows {
        if let Ok(leg) = &row.leg {
            for _ in 0..WARMUP {
                if let Err(e) = leg.call(http).await {
                    row.leg = Err(format!("warm-up failed: {e}"));
                    break;
                }
            }
        }
    }
}

/// The c=1 calls: the legs take turns in rounds, so drift hits them alike.
async fn sequential(http: &reqwest::Client, rows: &mut [Row]) {
    for _ in 0..ROUNDS {
        for row in rows.iter_mut() {
            let Ok(leg) = row.leg.clone() else { continue };
            let start = Instant::now();
            for _ in 0..N_SEQ / ROUNDS {
                match leg.call(http).await {
                    Ok(d) => row.seq.push(d),
                    Err(e) => {
                        row.leg = Err(e);
                        break;
                    }
                }
            }
            row.seq_wall += start.elapsed();
        }
    }
}

/// One row's c=1 figures, then its c=8 run (the leg alone).
async fn concurrent_row(row: &mut Row) {
    let Ok(leg) = row.leg.clone() else { return };
    row.c1 = figures(
        std::mem::take(&mut row.seq),
        row.seq_wall,
        N_SEQ / ROUNDS * ROUNDS,
    );
    // A short warm-up of the 8 connections first.
    if let Err(e) = concurrent(leg.clone(), WORKERS * 4).await {
        row.leg = Err(e);
        return;
    }
    match concurrent(leg, N_CONC).await {
        Ok(f) => row.c8 = f,
        Err(e) => row.leg = Err(e),
    }
}

/// The table, then skilld against the goals.
fn print_table(title: &str, rows: &[Row]) {
    println!("\n== {title} ==");
    println!(
        "{:<44} {:>9} {:>9} {:>9} | {:>9} {:>9} {:>9}",
        "", "c=1 med", "p99", "calls/s", "c=8 med", "p99", "calls/s"
    );
    for row in rows {
        match &row.leg {
            Ok(_) => println!(
                "{:<44} {:>6.3} ms {:>6.3} ms {:>9.0} | {:>6.3} ms {:>6.3} ms {:>9.0}",
                row.label, row.c1.median, row.c1.p99, row.c1.rate, row.c8.median, row.c8.p99, row.c8.rate
            ),
            Err(why) => println!("{:<44} skipped: {why}", row.label),
        }
    }
    // rows: direct (the baseline), skilld, mcpo, the HTTP floor.
    if let (Ok(_), Ok(_)) = (&rows[0].leg, &rows[1].leg) {
        let added = rows[1].c1.median - rows[0].c1.median;
        println!(
            "skilld over direct at c=1: {added:+.3} ms median [goal <= +0.5 ms: {}]",
            if added <= 0.5 { "met" } else { "missed" }
        );
        if let Ok(Leg::Stdio(..)) = rows[0].leg.as_deref()
            && rows[3].leg.is_ok()
        {
            println!(
                "  of which the caller's own HTTP round trip (the floor): {:.3} ms",
                rows[3].c1.median
            );
        }
    }
    if let (Ok(_), Ok(_)) = (&rows[1].leg, &rows[2].leg) {
        let ratio = rows[1].c8.rate / rows[2].c8.rate;
        println!(
            "skilld / mcpo calls/s at c={WORKERS}: x{ratio:.2} [goal >= x3: {}]",
            if ratio >= 3.0 { "met" } else { "missed" }
        );
    }
}

fn row(label: &str, leg: Result<Leg, String>) -> Row {
    Row {
        label: label.to_owned(),
        leg: leg.map(Arc::new),
        seq: Vec::with_capacity(N_SEQ),
        seq_wall: Duration::ZERO,
        c1: Figures::default(),
        c8: Figures::default(),
    }
}

/// The HTTP upstream: upstream.py, its URL read from its first stdout line.
async fn start_upstream(python: &Path) -> Result<(Child, String), String> {
    let script = repo().join("tests/python/upstream.py");
    let script = script.to_str().ok_or("non-UTF-8 path")?;
    let mut child = spawn(python, &[script, "http", "--port", "0"], Stdio::piped())?;
    let stdout = child.0.stdout.take().ok_or("no stdout")?;
    let mut line = String::new();
    tokio::time::timeout(
        Duration::from_secs(30),
        BufReader::new(stdout).read_line(&mut line),
    )
    .await
    .map_err(|_| "upstream.py printed no URL in 30 s".to_owned())?
    .map_err(|e| e.to_string())?;
    Ok((child, line.trim().to_owned()))
}

/// mcpo in front of `target` (after `--`), ready when its OpenAPI document answers.
async fn start_mcpo(bin: &Path, server_type: &str, target: &[&str]) -> Result<(Child, String), String> {
    let port = free_port().to_string();
    let mut args = vec![
        "--host",
        "127.0.0.1",
        "--port",
        &port,
        "--server-type",
        server_type,
        "--log-level",
        "WARNING",
        "--",
    ];
    args.extend_from_slice(target);
    let child = spawn(bin, &args, Stdio::null())?;
    let base = format!("http://127.0.0.1:{port}");
    let http = client();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(r) = http.get(format!("{base}/openapi.json")).send().await
            && r.status().is_success()
            && r.text().await.is_ok_and(|t| t.contains("/echo"))
        {
            return Ok((child, format!("{base}/echo")));
        }
        if Instant::now() > deadline {
            return Err("mcpo did not serve /echo within 60 s".to_owned());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A read_only manifest with `backend: mcp` (issue 27's format), so calls
/// run without approval; a stdio upstream is a child process, so it takes
/// `shell:exec`.
fn write_skill(root: &Path, name: &str, stdio: bool, implementation: &str) {
    let permissions = if stdio { "permissions: [shell:exec]\n" } else { "" };
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).expect("skill dir");
    std::fs::write(
        dir.join("SKILL.yaml"),
        format!(
            "name: {name}\nversion: 1.0.0\ndescription: An MCP upstream, gated by skilld (bench).\n\
             types: [tool]\n{permissions}read_only: true\nimplementation:\n  backend: mcp\n{implementation}"
        ),
    )
    .expect("manifest");
}

/// skilld in-process on port 0 with `root`'s skills; its base URL.
async fn start_skilld(root: &Path, data: &Path) -> (String, Arc<CatalogHandle>) {
    let url = format!("sqlite://{}", data.join("skilld.db").display());
    let store = skilld::store::connect(&url).await.expect("run log");
    let settings = RunSettings {
        workspace: data.to_path_buf(),
        data_dir: data.to_path_buf(),
        max_concurrent_per_tool: 16,
        sandbox: skilld::sandbox::Settings {
            // The stdio upstream's program, outside the system directories.
            read_paths: vec![npm_servers()],
            ..Default::default()
        },
        ..RunSettings::default()
    };
    let invoker = Arc::new(Invoker::new(store.clone(), settings));
    let opts = CatalogOptions {
        roots: vec![Root {
            name: "bench".to_owned(),
            path: root.to_path_buf(),
            trust: Trust::Bundled,
            explicit: true,
            installed: false,
        }],
        max_timeout_secs: 600,
        runtimes: Runtimes::default(),
        launcher: invoker.launcher(),
        rules: Default::default(),
    };
    let catalog = Arc::new(
        tokio::task::spawn_blocking(move || CatalogHandle::new(opts))
            .await
            .expect("catalog"),
    );
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
    (format!("http://{addr}"), catalog)
}

/// skilld's invoke URL for the upstream's `echo` under `skill`, once the
/// catalog lists it (an upstream's tools may arrive after loading), or why not.
async fn skilld_leg(catalog: &CatalogHandle, base: &str, skill: &str, arg: &str) -> Result<Leg, String> {
    let body = json!({"arguments": {arg: TEXT}}).to_string();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let current = catalog.current();
        let Some(s) = current.skill(skill) else {
            let why: Vec<&str> = current
                .diagnostics
                .iter()
                .filter(|d| d.skill.as_deref() == Some(skill))
                .map(|d| d.message.as_str())
                .collect();
            return Err(format!("skilld did not load the manifest: {}", why.join("; ")));
        };
        if let Some(tool) = s
            .tools
            .iter()
            .find(|t| t.name == "echo" || t.name.ends_with("echo"))
        {
            let url = format!("{base}/skills/{skill}/tools/{}/invoke", tool.name);
            return Ok(Leg::Skilld(url, body));
        }
        if Instant::now() > deadline {
            let names: Vec<&str> = s.tools.iter().map(|t| t.name.as_str()).collect();
            return Err(format!("skill {skill} lists no echo tool after 20 s: {names:?}"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn bench() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // The stdio upstream runs as the sandbox's user, who must reach its skill.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let root = tmp.path().join("skills");
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&root).expect("skills");
    std::fs::create_dir_all(&data).expect("data");

    let python = python();
    let mcpo = python.as_ref().map_err(Clone::clone).and_then(|_| mcpo());
    let everything = everything();

    // The upstreams, and skilld's manifests for them.
    let upstream = match &python {
        Ok(p) => start_upstream(p).await,
        Err(e) => Err(e.clone()),
    };
    if let Ok((_, url)) = &upstream {
        write_skill(&root, "bench-http", false, &format!("  url: {url}\n"));
    }
    if let Ok(js) = &everything {
        write_skill(
            &root,
            "bench-stdio",
            true,
            &format!("  command: [node, {}, stdio]\n", js.display()),
        );
    }
    let (base, catalog) = start_skilld(&root, &data).await;
    let gateway = Gateway {
        base: &base,
        catalog: &catalog,
        mcpo: &mcpo,
    };

    match &upstream {
        Ok((_, url)) => bench_http(&gateway, url).await,
        Err(e) => println!("\n== upstream.py http, echo ==\nskipped: {e}"),
    }
    match &everything {
        Ok(js) => bench_stdio(&gateway, js).await,
        Err(e) => println!("\n== server-everything stdio, echo ==\nskipped: {e}"),
    }
    drop(upstream);
}

/// What each upstream's legs go through: skilld as started, and mcpo's
/// program (or why there is none).
struct Gateway<'a> {
    base: &'a str,
    catalog: &'a CatalogHandle,
    mcpo: &'a Result<PathBuf, String>,
}

impl Gateway<'_> {
    /// skilld's `GET /healthz`: the HTTP floor of both tables.
    fn floor(&self) -> Row {
        row(
            "floor: skilld GET /healthz",
            Ok(Leg::Floor(format!("{}/healthz", self.base))),
        )
    }
}

/// Through upstream.py over Streamable HTTP.
async fn bench_http(gateway: &Gateway<'_>, url: &str) {
    let direct = DirectHttp::connect(url).await.map(|d| Leg::Http(Arc::new(d)));
    let skilld = skilld_leg(gateway.catalog, gateway.base, "bench-http", "text").await;
    let via_mcpo = match gateway.mcpo {
        Ok(bin) => start_mcpo(bin, "streamable-http", &[url]).await,
        Err(e) => Err(e.clone()),
    };
    let mcpo_leg = via_mcpo
        .as_ref()
        .map(|(_, u)| Leg::Mcpo(u.clone(), json!({"text": TEXT}), TEXT))
        .map_err(Clone::clone);
    let rows = vec![
        row("direct: its Streamable HTTP (baseline)", direct),
        row("skilld: POST /skills/bench-http/…/invoke", skilld),
        row("mcpo: POST /echo", mcpo_leg),
        gateway.floor(),
    ];
    measure("upstream.py http, echo", rows).await;
    // mcpo serves until its table is measured.
    drop(via_mcpo);
}

/// Through server-everything on stdio.
async fn bench_stdio(gateway: &Gateway<'_>, js: &Path) {
    let js_s = js.to_str().expect("UTF-8 path");
    let direct = DirectStdio::start(Path::new("node"), &[js_s, "stdio"])
        .await
        .map(|d| Leg::Stdio(Arc::new(d), "message", "Echo: bench"));
    let skilld = skilld_leg(gateway.catalog, gateway.base, "bench-stdio", "message").await;
    let via_mcpo = match gateway.mcpo {
        Ok(bin) => start_mcpo(bin, "stdio", &["node", js_s, "stdio"]).await,
        Err(e) => Err(e.clone()),
    };
    let mcpo_leg = via_mcpo
        .as_ref()
        .map(|(_, u)| Leg::Mcpo(u.clone(), json!({"message": TEXT}), "Echo: bench"))
        .map_err(Clone::clone);
    let rows = vec![
        row("direct: its pipes (baseline)", direct),
        row("skilld: POST /skills/bench-stdio/…/invoke", skilld),
        row("mcpo: POST /echo", mcpo_leg),
        gateway.floor(),
    ];
    measure("server-everything stdio, echo", rows).await;
    // mcpo serves until its table is measured.
    drop(via_mcpo);
}

fn main() {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    println!("{cores} cores available; {N_SEQ} calls per leg at c=1, {N_CONC} at c={WORKERS}");
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(bench());
}
