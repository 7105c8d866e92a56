//! Invoke benchmark: the cost skilld adds to running a tool.
//!
//! Runs `true` through `POST /tools/{tool}/invoke` on an in-process server
//! (SQLite run log) and compares it with spawning `true` directly from
//! Tokio: latency one call at a time, throughput with 8 concurrent
//! callers, and CPU per call (this process's utime and stime from
//! `/proc/self/stat`, and its reaped children's), in three rounds that
//! print issue 30's table each, with a bubblewrap spawn of `/bin/true`
//! (user, pid, ipc, uts and network namespaces) as a second baseline.
//! Then runs a tool that writes 1 GiB and watches this process's
//! resident memory, which must not grow with the tool's output. Last, a
//! breakdown of a call through public APIs, so a missed goal points
//! somewhere: the invoke pipeline without HTTP (also for a `network: true`
//! skill with no limits, whose child sets no rlimits and enters no namespace), the
//! runner alone with and without its network namespace and rlimits, the
//! run log's four writes alone, and peak RSS by layer.
//!
//! Run with `cargo bench --bench invoke`; with `SKILLD_BENCH_POSTGRES_URL`
//! set, the run log is that PostgreSQL database instead of SQLite. The
//! bubblewrap row needs `bwrap` on the PATH (Debian's `bubblewrap`); where
//! it is missing or cannot make namespaces, the row is skipped with a
//! message. The process-backend and Starlark rows of the table are
//! `cargo bench --bench backends`'s. Nothing here asserts on time; it
//! asserts every call returned 200 with `"success": true` (and every
//! bubblewrap run exited 0) and that the 1 GiB tool really wrote 1 GiB,
//! so the figures cannot silently describe errors.

#![expect(
    clippy::expect_used,
    reason = "a benchmark that cannot measure should stop and say why"
)]

use serde_json::Value;
use skilld::AppState;
use skilld::catalog::{CatalogHandle, CatalogOptions, Root};
use skilld::invoke::{Invoker, RunSettings, Runs};
use skilld::runner::{self, Limits, Spec};
use skilld::skill::Runtimes;
use skilld::skill::Trust;
use skilld::store::{NewRun, RunStatus, Stores};
use std::fmt::Write as _;
use std::future::Future;
use std::path::Path;
use std::process::Stdio;
#[path = "support/rss.rs"]
mod rss;

#[path = "support/cpu.rs"]
mod cpu;

use cpu::{Cpu, Stats, added_ms};
use rss::{RssSampler, SAMPLE_EVERY, vm_rss_kib};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use tokio_util::sync::CancellationToken;

/// Sequential calls (c=1), per side.
const N_SEQ: usize = 400;
/// The breakdown rows of the pipeline with the sandbox on (the default)
/// and off, which the summary compares.
const SANDBOXED: &str = "Invoker pipeline without HTTP (prepare/start/finished)";
const UNSANDBOXED: &str = "Invoker pipeline, sandbox off";

/// Calls at c=8, per side.
const N_CONC: usize = 800;
/// Calls of bubblewrap per round of the table, at c=1: each costs ten
/// of the others.
const N_BWRAP: usize = 80;
/// Rounds of the issue's table, each measured and printed on its own.
const TABLE_ROUNDS: usize = 3;
const WORKERS: usize = 8;
/// Both sides alternate in this many blocks, so drift on a shared machine
/// hits both alike.
const ROUNDS: usize = 8;
const WARMUP: usize = 50;
/// Calls per measurement of the breakdown.
const N_PHASE: usize = 200;

const TRUE_TOOL: &str = "bench_true";
const NET_TOOL: &str = "bench_net";
const BIG_TOOL: &str = "bench_gib";
const GIB: u64 = 1 << 30;
const BODY: &str = r#"{"arguments":{}}"#;

const GOAL_ADDED: Duration = Duration::from_micros(500);
const GOAL_THROUGHPUT: f64 = 0.90;
const GOAL_RSS_KIB: u64 = 1024;

/// A markdown skill with one tool running `command`.
fn write_skill(root: &Path, name: &str, front: &str, command: &str) {
    let dir = root.join(name);
    std::fs::create_dir(&dir).expect("create skill dir");
    let tool = name.replace('-', "_");
    let fence = "```";
    std::fs::write(
        dir.join("SKILL.md"),
        format!(
            "---
name: {name}
version: 1.0.0
description: Invoke benchmark skill {name}.
read_only: true
{front}---

### {tool}

Benchmark tool.

#### Parameters

None.

#### Command

{fence}bash
{command}
{fence}
"
        ),
    )
    .expect("write SKILL.md");
}

fn options(root: &Path) -> CatalogOptions {
    CatalogOptions {
        roots: vec![Root {
            name: root.display().to_string(),
            path: root.to_path_buf(),
            trust: Trust::Bundled,
            explicit: true,
            installed: false,
        }],
        max_timeout_secs: 600,
        runtimes: Runtimes::default(),
        launcher: None,
        rules: Default::default(),
    }
}

fn sorted(mut v: Vec<Duration>) -> Vec<Duration> {
    v.sort();
    v
}

fn median(sorted: &[Duration]) -> Duration {
    sorted[sorted.len() / 2]
}

fn p90(sorted: &[Duration]) -> Duration {
    sorted[(sorted.len() * 9 / 10).min(sorted.len() - 1)]
}

fn p99(sorted: &[Duration]) -> Duration {
    sorted[(sorted.len() * 99 / 100).min(sorted.len() - 1)]
}

fn max(sorted: &[Duration]) -> Duration {
    sorted[sorted.len() - 1]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

fn signed_ms(a: Duration, b: Duration) -> String {
    format!("{:+.3} ms", (a.as_secs_f64() - b.as_secs_f64()) * 1e3)
}

fn rate(calls: usize, d: Duration) -> f64 {
    calls as f64 / d.as_secs_f64().max(1e-9)
}

fn mib(kib: u64) -> String {
    format!("{:.2} MiB", kib as f64 / 1024.0)
}

// ---------------------------------------------------------------- baseline

/// What any runner must do at least: spawn `true` in a new process group
/// with stdin null and both outputs piped, read both to the end, wait.
async fn spawn_true() {
    let (status, _) = run_piped(&mut tokio::process::Command::new("true")).await;
    assert!(status.success(), "true failed: {status}");
}

/// Runs `command` as [`spawn_true`] describes; its status and stderr.
async fn run_piped(command: &mut tokio::process::Command) -> (std::process::ExitStatus, Vec<u8>) {
    let mut child = command
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let (a, b) = tokio::join!(stdout.read_to_end(&mut out), stderr.read_to_end(&mut err));
    a.expect("read stdout");
    b.expect("read stderr");
    (child.wait().await.expect("wait"), err)
}

// --------------------------------------------------------------- bubblewrap

/// Bubblewrap's namespaces for one `/bin/true`, as close to a skilld run
/// as its options go: user, pid, ipc, uts and network namespaces, the
/// system read-only, its own `/proc`, `/dev` and `/tmp`, a session of its
/// own, dying with its parent.
const BWRAP_ARGS: &[&str] = &[
    "--unshare-user",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-net",
    "--die-with-parent",
    "--new-session",
    "--ro-bind",
    "/usr",
    "/usr",
    "--ro-bind-try",
    "/etc",
    "/etc",
    "--symlink",
    "usr/bin",
    "/bin",
    "--symlink",
    "usr/sbin",
    "/sbin",
    "--symlink",
    "usr/lib",
    "/lib",
    "--symlink",
    "usr/lib64",
    "/lib64",
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    "--tmpfs",
    "/tmp",
    "/bin/true",
];

/// Whether `bwrap` runs here (and can make its namespaces).
fn bwrap_available() -> bool {
    let ok = std::process::Command::new("bwrap")
        .args(BWRAP_ARGS)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        println!("bwrap: not installed or cannot make its namespaces here; its row is left out");
    }
    ok
}

/// [`spawn_true`], inside bubblewrap.
async fn bwrap_true() {
    let (status, err) = run_piped(tokio::process::Command::new("bwrap").args(BWRAP_ARGS)).await;
    assert!(
        status.success(),
        "bwrap true failed: {status}: {}",
        String::from_utf8_lossy(&err)
    );
}

// -------------------------------------------------------------------- HTTP

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(1)
        .no_proxy()
        .build()
        .expect("client")
}

/// One invoke over HTTP; the time covers the request and reading the whole
/// body. The envelope is checked afterwards, outside the timing.
async fn invoke(client: &reqwest::Client, url: &str) -> (Duration, Value) {
    let start = Instant::now();
    let res = client
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(BODY)
        .send()
        .await
        .expect("request");
    let status = res.status();
    let body = res.bytes().await.expect("body");
    let took = start.elapsed();
    let text = String::from_utf8_lossy(&body);
    assert_eq!(status.as_u16(), 200, "{url}: {text}");
    let env: Value = serde_json::from_slice(&body).expect("envelope is JSON");
    assert_eq!(env["success"], true, "{url}: {text}");
    (took, env)
}

/// Counts the calls that were checked, so the report can say so.
static CHECKED: AtomicUsize = AtomicUsize::new(0);

async fn invoke_checked(client: &reqwest::Client, url: &str) -> Duration {
    let (took, _) = invoke(client, url).await;
    CHECKED.fetch_add(1, Ordering::Relaxed);
    took
}

// ------------------------------------------------------------ measurement

/// One kind of call, timed by [`latencies`] and [`throughput`].
#[derive(Clone)]
enum Call {
    /// [`spawn_true`].
    Baseline,
    /// `POST` to the URL with this client.
    Http(Arc<reqwest::Client>, Arc<String>),
    /// `runner::run` alone.
    Runner(Arc<Spec>),
    /// The invoke pipeline without HTTP: `Invoker::call` on catalog tool
    /// `index`, waiting for its envelope.
    Pipeline(Arc<Invoker>, Arc<CatalogHandle>, usize),
    /// [`store_writes`] with this result.
    Store(Stores, Arc<Value>),
    /// [`bwrap_true`].
    Bwrap,
}

impl Call {
    async fn run(&self) -> Duration {
        let start = Instant::now();
        match self {
            Call::Baseline => spawn_true().await,
            Call::Http(client, url) => return invoke_checked(client, url).await,
            Call::Runner(spec) => run_spec(spec).await,
            Call::Pipeline(invoker, catalog, index) => {
                let catalog = catalog.current();
                let call = skilld::invoke::Call {
                    target: skilld::invoke::Target::Tool(catalog.tools[*index].export_name.clone()),
                    arguments: serde_json::json!({}),
                    mode: None,
                    dry_run: false,
                    wait: Duration::ZERO,
                    delivery: skilld::invoke::Delivery::Result,
                    gate: skilld::invoke::Gate::Policy,
                    asked: skilld::invoke::Asked::default(),
                    session: None,
                    sampler: None,
                    budget: None,
                };
                match invoker.call(&catalog, call).await.expect("call") {
                    skilld::invoke::Called::Finished(env) => assert!(env.success, "pipeline: {env:?}"),
                    _ => panic!("pipeline: the call did not run at once"),
                }
            }
            Call::Store(store, result) => return store_writes(store, result).await,
            Call::Bwrap => bwrap_true().await,
        }
        start.elapsed()
    }
}

/// `n` calls spread over `calls.len()` workers pulling from one counter;
/// the wall time of all of them, and the time of each.
async fn throughput(n: usize, calls: &[Call]) -> (Duration, Vec<Duration>) {
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let tasks: Vec<_> = calls
        .iter()
        .cloned()
        .map(|call| {
            let next = next.clone();
            tokio::spawn(async move {
                let mut times = Vec::new();
                while next.fetch_add(1, Ordering::Relaxed) < n {
                    times.push(call.run().await);
                }
                times
            })
        })
        .collect();
    let mut times = Vec::with_capacity(n);
    for t in tasks {
        times.extend(t.await.expect("worker"));
    }
    (start.elapsed(), times)
}

/// CPU time used so far by this process (every thread: server, clients,
/// run log) and by its children that have been reaped.
fn cpu_time() -> Duration {
    use nix::sys::resource::{UsageWho, getrusage};
    let of = |who| {
        let Ok(usage) = getrusage(who) else {
            return Duration::ZERO;
        };
        let tv = |t: nix::sys::time::TimeVal| {
            Duration::from_secs(u64::try_from(t.tv_sec()).unwrap_or(0))
                + Duration::from_micros(u64::try_from(t.tv_usec()).unwrap_or(0))
        };
        tv(usage.user_time()) + tv(usage.system_time())
    };
    of(UsageWho::RUSAGE_SELF) + of(UsageWho::RUSAGE_CHILDREN)
}

/// Idle and total CPU ticks of the whole machine (`/proc/stat`), or
/// their sums over several phases.
#[derive(Debug, Default, Clone, Copy)]
struct MachineTicks {
    idle: u64,
    total: u64,
}

impl MachineTicks {
    fn now() -> Self {
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let ticks: Vec<u64> = stat
            .lines()
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .skip(1)
            .filter_map(|t| t.parse().ok())
            .collect();
        // user nice system idle iowait irq softirq steal …
        Self {
            idle: ticks.get(3).copied().unwrap_or(0) + ticks.get(4).copied().unwrap_or(0),
            total: ticks.iter().take(8).sum(),
        }
    }

    /// Adds the ticks between two readings.
    fn add(&mut self, from: &Self, to: &Self) {
        self.idle += to.idle.saturating_sub(from.idle);
        self.total += to.total.saturating_sub(from.total);
    }

    fn idle_share(&self) -> f64 {
        self.idle as f64 / self.total.max(1) as f64
    }
}

/// `n` calls one after another; the time of each.
async fn latencies(n: usize, call: &Call) -> Vec<Duration> {
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        times.push(call.run().await);
    }
    times
}

// ------------------------------------------------------------ issue table

/// One side of a round of the table: its c=1 and c=8 call times, the
/// c=8 wall time, and the CPU time of each phase.
#[derive(Default)]
struct Side {
    seq: Vec<Duration>,
    seq_cpu: Cpu,
    conc: Vec<Duration>,
    conc_wall: Duration,
    conc_cpu: Cpu,
}

impl Side {
    async fn seq(&mut self, n: usize, call: &Call) {
        let before = Cpu::now();
        self.seq.extend(latencies(n, call).await);
        self.seq_cpu.add(Cpu::since(before));
    }

    async fn conc(&mut self, n: usize, calls: &[Call]) {
        let before = Cpu::now();
        let (wall, times) = throughput(n, calls).await;
        self.conc_cpu.add(Cpu::since(before));
        self.conc_wall += wall;
        self.conc.extend(times);
    }

    fn rate(&self) -> f64 {
        rate(self.conc.len(), self.conc_wall)
    }

    /// CPU per call over both phases.
    fn cpu_per_call(&self) -> String {
        let mut cpu = self.seq_cpu;
        cpu.add(self.conc_cpu);
        cpu.per_call(self.seq.len() + self.conc.len())
    }
}

/// One of the table's [`TABLE_ROUNDS`]: the bare spawn, skilld over HTTP
/// and (where it runs) bubblewrap, each phase interleaved in [`ROUNDS`]
/// blocks so drift on a shared machine hits every side alike.
#[derive(Default)]
struct TableRound {
    base: Side,
    http: Side,
    bwrap: Option<Vec<Duration>>,
}

/// Measures one round; the machine's ticks around the HTTP c=8 phases
/// come back too.
async fn table_round(
    seq_http: &Call,
    conc_base: &[Call],
    conc_http: &[Call],
    bwrap: bool,
) -> (TableRound, MachineTicks) {
    let mut round = TableRound {
        bwrap: bwrap.then(Vec::new),
        ..TableRound::default()
    };
    let mut idle = MachineTicks::default();
    for _ in 0..ROUNDS {
        round.base.seq(N_SEQ / ROUNDS, &Call::Baseline).await;
        round.http.seq(N_SEQ / ROUNDS, seq_http).await;
        if let Some(times) = &mut round.bwrap {
            times.extend(latencies(N_BWRAP / ROUNDS, &Call::Bwrap).await);
        }
        round.base.conc(N_CONC / ROUNDS, conc_base).await;
        let machine = MachineTicks::now();
        round.http.conc(N_CONC / ROUNDS, conc_http).await;
        idle.add(&machine, &MachineTicks::now());
    }
    (round, idle)
}

/// Prints one round of the table.
fn print_round(i: usize, r: &TableRound) {
    let (base, http) = (Stats::of(&r.base.seq), Stats::of(&r.http.seq));
    println!("-- round {} of {TABLE_ROUNDS} --", i + 1);
    println!(
        "  {:<52} {}",
        "c=1 baseline: spawn `true` from tokio",
        base.shown()
    );
    println!(
        "  {:<52} {}",
        "c=1 skilld: POST /tools/bench_true/invoke",
        http.shown()
    );
    println!(
        "  {:<52} median {:>+8.3} ms  p99 {:>+8.3} ms   [goal median <= 0.3 ms]",
        "c=1 added by skilld",
        added_ms(http.median, base.median),
        added_ms(http.p99, base.p99)
    );
    let (bc, hc) = (Stats::of(&r.base.conc), Stats::of(&r.http.conc));
    println!(
        "  {:<52} baseline {:>7.1}/s ({})   skilld {:>7.1}/s ({})",
        format!("c={WORKERS} throughput"),
        r.base.rate(),
        bc.shown(),
        r.http.rate(),
        hc.shown()
    );
    println!(
        "  {:<52} {:>7.1}%   [goal >= 75%]",
        format!("c={WORKERS} skilld as a share of the baseline"),
        100.0 * r.http.rate() / r.base.rate()
    );
    println!("  {:<52} {}", "CPU per call, baseline", r.base.cpu_per_call());
    println!("  {:<52} {}", "CPU per call, skilld", r.http.cpu_per_call());
    match &r.bwrap {
        Some(times) => {
            let b = Stats::of(times);
            println!(
                "  {:<52} {}",
                "c=1 bubblewrap: `bwrap ... /bin/true` from tokio",
                b.shown()
            );
            println!(
                "  {:<52} x{:.2} (bwrap median / skilld median)   [goal >= x5]",
                "skilld's sandboxed call against bubblewrap",
                b.median.as_secs_f64() / http.median.as_secs_f64()
            );
        }
        None => println!("  bubblewrap: skipped (bwrap is not installed or cannot run here)"),
    }
}

// ------------------------------------------------------------- statements

/// Statements sqlx ran during some calls, by its one-line summary.
struct Statements {
    calls: usize,
    by_summary: std::collections::BTreeMap<String, u64>,
}

/// Counts sqlx's `sqlx::query` events (one per statement it runs) and the
/// SQLite hot path's `skilld::run_log` events (one per write and one per
/// transaction, which may hold several calls' writes); off
/// until the timed phases are over, since formatting them costs time.
#[derive(Clone, Default)]
struct StatementCounter(Arc<std::sync::Mutex<std::collections::BTreeMap<String, u64>>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for StatementCounter {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        struct Summary(String);
        impl tracing::field::Visit for Summary {
            fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
                if field.name() == "summary" {
                    value.clone_into(&mut self.0);
                }
            }
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "summary" {
                    self.0 = format!("{value:?}");
                }
            }
        }
        if !matches!(event.metadata().target(), "sqlx::query" | "skilld::run_log") {
            return;
        }
        let mut summary = Summary(String::new());
        event.record(&mut summary);
        let mut counts = self.0.lock().expect("counter");
        *counts.entry(summary.0).or_default() += 1;
    }
}

/// `CALLS` sequential HTTP calls with sqlx's statement events counted.
/// The background checkpoints run meanwhile and are counted too, as the
/// `PRAGMA` lines show.
async fn count_statements(client: &reqwest::Client, url: &str) -> Statements {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt;
    const CALLS: usize = 200;
    let counter = StatementCounter::default();
    let subscriber = tracing_subscriber::registry().with(
        counter.clone().with_filter(
            tracing_subscriber::filter::Targets::new()
                .with_target("sqlx::query", tracing::Level::TRACE)
                .with_target("skilld::run_log", tracing::Level::TRACE),
        ),
    );
    tracing::subscriber::set_global_default(subscriber).expect("no subscriber yet");
    for _ in 0..CALLS {
        invoke_checked(client, url).await;
    }
    let by_summary = std::mem::take(&mut *counter.0.lock().expect("counter"));
    Statements {
        calls: CALLS,
        by_summary,
    }
}

// -------------------------------------------------------------- breakdown

async fn run_spec(spec: &Spec) {
    let out = runner::run(spec.clone(), CancellationToken::new(), None, |_| {}).await;
    assert_eq!(out.exit_code, Some(0), "runner: {out:?}");
}

/// What a call that runs at once asks of the run log, in order: the
/// policy's read, the insert as running, the process group, the result.
async fn store_writes(store: &Stores, result: &Value) -> Duration {
    let start = Instant::now();
    let id = uuid::Uuid::now_v7();
    let hash = "0".repeat(64);
    store
        .holds
        .policy_facts("bench-true", TRUE_TOOL, &hash)
        .await
        .expect("policy_facts");
    let now = chrono::Utc::now();
    store
        .runs
        .insert_run(NewRun {
            id,
            skill: "bench-true".to_owned(),
            tool: TRUE_TOOL.to_owned(),
            skill_hash: hash,
            arguments: serde_json::json!({}),
            argv: vec!["true".to_owned()],
            cwd: "/tmp".to_owned(),
            status: RunStatus::Running,
            requested_by: None,
            approval_id: None,
            created_at: now,
            started_at: Some(now),
            instance: Some("bench".to_owned()),
            mode: Some("Global".to_owned()),
            request_id: None,
            skill_version: None,
            idempotency_key: None,
            session: None,
        })
        .await
        .expect("insert_run");
    store.runs.set_pgid(id, 1).await.expect("set_pgid");
    store
        .runs
        .finish_run(id, RunStatus::Succeeded, Some(result.clone()), chrono::Utc::now())
        .await
        .expect("finish_run")
        .expect("finished");
    start.elapsed()
}

/// One row of the breakdown: c=1 latencies, and the c=8 wall time of
/// `2 * N_PHASE` calls.
struct Row {
    label: &'static str,
    seq: Vec<Duration>,
    conc: Duration,
    /// CPU time (process and reaped children) of the c=8 phases: less
    /// at the mercy of a shared machine's neighbours than wall time.
    cpu: Duration,
}

/// The breakdown's calls, each under its row's label.
type Breakdown = Vec<(&'static str, Call)>;

/// The spec skilld's invoker builds for `bench-true` (src/invoke/mod.rs
/// `Invoker::execute`), so the runner alone runs what a call runs.
fn skilld_spec(catalog: &CatalogHandle, settings: &RunSettings) -> Spec {
    let skill = catalog.current().skill("bench-true").expect("skill").clone();
    Spec {
        program: "true".to_owned(),
        args: Vec::new(),
        cwd: settings.workspace.clone(),
        env: runner::child_env(&skill.name, &skill.dir, "Global", &settings.extra_env),
        timeout: Duration::from_secs(skill.timeout_secs),
        grace: settings.grace,
        limits: settings.limits,
        isolate_network: !skill.network,
        egress_ns: None,
        confinement: None,
    }
}

/// The breakdown's calls: the pipeline without HTTP (sandbox on and off,
/// and with nothing for the child to set), the runner alone with and
/// without its parts, and the run log alone with the envelope of one
/// more HTTP call.
async fn breakdown_calls(
    server: &Server,
    skilld_spec: Spec,
    client: &reqwest::Client,
    url: &str,
) -> Breakdown {
    let no_netns = Spec {
        isolate_network: false,
        egress_ns: None,
        ..skilld_spec.clone()
    };
    let no_hook = Spec {
        limits: Limits::default(),
        ..no_netns.clone()
    };
    // The same pipeline on the same run log, with no limits for the child
    // to set.
    let no_hook_invoker = Arc::new(Invoker::new(
        server.store.clone(),
        RunSettings {
            limits: Limits::default(),
            ..server.settings.clone()
        },
    ));
    // The same pipeline with the sandbox off (`sandbox = "off"`; the
    // bench skills are not untrusted): what the sandbox costs per call.
    let mut unsandboxed = server.settings.clone();
    unsandboxed.sandbox.level = skilld::sandbox::Level::Off;
    let unsandboxed_invoker = Arc::new(Invoker::new(server.store.clone(), unsandboxed));
    let (_, result) = invoke(client, url).await;
    CHECKED.fetch_add(1, Ordering::Relaxed);
    let pipeline = |invoker: Arc<Invoker>, tool: &str| {
        Call::Pipeline(invoker, server.catalog.clone(), tool_index(&server.catalog, tool))
    };
    vec![
        ("baseline again: spawn `true` from tokio", Call::Baseline),
        (SANDBOXED, pipeline(server.invoker.clone(), TRUE_TOOL)),
        (UNSANDBOXED, pipeline(unsandboxed_invoker, TRUE_TOOL)),
        (
            "Invoker pipeline, no limits, network: true",
            pipeline(no_hook_invoker, NET_TOOL),
        ),
        (
            "runner::run as skilld runs it (rlimits + netns)",
            Call::Runner(Arc::new(skilld_spec)),
        ),
        ("runner::run, rlimits, no netns", Call::Runner(Arc::new(no_netns))),
        (
            "runner::run, no rlimits, no netns",
            Call::Runner(Arc::new(no_hook)),
        ),
        (
            "run log: policy read, insert, set_pgid, finish",
            Call::Store(server.store.clone(), Arc::new(result)),
        ),
    ]
}

/// Warms every call up, then measures each row in [`ROUNDS`] interleaved
/// rounds, so drift hits every row alike.
async fn measure_breakdown(calls: &Breakdown) -> Vec<Row> {
    for (_, c) in calls {
        latencies(WARMUP / 2, c).await;
    }
    let mut rows: Vec<Row> = calls
        .iter()
        .map(|(label, _)| Row {
            label,
            seq: Vec::new(),
            conc: Duration::ZERO,
            cpu: Duration::ZERO,
        })
        .collect();
    for _ in 0..ROUNDS {
        for ((_, c), row) in calls.iter().zip(&mut rows) {
            row.seq.extend(latencies(N_PHASE / ROUNDS, c).await);
            let cpu = cpu_time();
            let (wall, _) = throughput(2 * N_PHASE / ROUNDS, &vec![c.clone(); WORKERS]).await;
            row.cpu += cpu_time() - cpu;
            row.conc += wall;
        }
    }
    for row in &mut rows {
        row.seq.sort();
    }
    rows
}

// --------------------------------------------------------------------- RSS

/// Peak RSS above idle during one 1 GiB run.
struct RssRow {
    label: &'static str,
    idle: u64,
    peak: u64,
    samples: u64,
}

/// Measures one 1 GiB run (`run` returns the bytes it saw) on `sampler`.
async fn rss_of<Fut>(label: &'static str, sampler: &RssSampler, run: Fut) -> RssRow
where
    Fut: Future<Output = u64>,
{
    // Let the allocator and the sampler settle first.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let idle = vm_rss_kib();
    sampler.reset(idle);
    let bytes = run.await;
    let (peak, samples) = sampler.read();
    assert!(bytes >= GIB, "{label}: only {bytes} bytes");
    RssRow {
        label,
        idle,
        peak,
        samples,
    }
}

/// `runner::run` of the 1 GiB tool; with `forward`, its output goes to a
/// live run's event sender as `Invoker::execute` does.
async fn gib_through_runner(spec: Spec, forward: bool) -> u64 {
    let runs = Runs::default();
    let (live, first) = runs.register(uuid::Uuid::now_v7());
    // Nobody streams: dropped as the HTTP handler drops it.
    drop(first);
    let (events, forwarder) = forward.then(|| live.output_sender()).unzip();
    let out = runner::run(spec, CancellationToken::new(), events, |_| {}).await;
    if let Some(f) = forwarder {
        f.await.expect("forwarder");
    }
    runs.finish(&live, None);
    assert_eq!(out.exit_code, Some(0), "1 GiB runner: {out:?}");
    assert!(out.truncated);
    out.output_bytes
}

/// The first 1 GiB call over HTTP: this process's RSS during it, its
/// time, and the bytes the tool wrote.
struct GibCall {
    rss: RssRow,
    took: Duration,
    bytes: u64,
}

/// 1 GiB of output through the whole server, watching our own RSS.
async fn gib_over_http(sampler: &RssSampler, client: &reqwest::Client, server: &Server) -> GibCall {
    let mut gib = None;
    let rss = rss_of("HTTP: POST /tools/bench_gib/invoke", sampler, async {
        let (took, env) = invoke(client, &server.url(BIG_TOOL)).await;
        CHECKED.fetch_add(1, Ordering::Relaxed);
        let bytes = env["output_bytes"].as_u64().expect("output_bytes");
        assert!(bytes >= GIB, "1 GiB tool wrote only {bytes} bytes: {env}");
        assert_eq!(env["truncated"], true, "1 GiB tool output not truncated: {env}");
        gib = Some((took, bytes));
        bytes
    })
    .await;
    let (took, bytes) = gib.expect("1 GiB call timed");
    GibCall { rss, took, bytes }
}

/// Peak RSS during 1 GiB of output by layer: the runner alone, with its
/// output forwarded as a live run's events, and the whole server again.
async fn rss_by_layer(
    sampler: &RssSampler,
    skilld_spec: &Spec,
    client: &reqwest::Client,
    server: &Server,
) -> Vec<RssRow> {
    let gib_spec = Spec {
        program: "sh".to_owned(),
        args: vec!["-c".to_owned(), "head -c 1073741824 /dev/zero".to_owned()],
        timeout: Duration::from_secs(120),
        ..skilld_spec.clone()
    };
    vec![
        rss_of(
            "runner::run, no events channel",
            sampler,
            gib_through_runner(gib_spec.clone(), false),
        )
        .await,
        rss_of(
            "runner::run, events to LiveRun::output_sender",
            sampler,
            gib_through_runner(gib_spec, true),
        )
        .await,
        rss_of("HTTP again (second 1 GiB call)", sampler, async {
            let (_, env) = invoke(client, &server.url(BIG_TOOL)).await;
            CHECKED.fetch_add(1, Ordering::Relaxed);
            env["output_bytes"].as_u64().expect("output_bytes")
        })
        .await,
    ]
}

// ------------------------------------------------------------------ server

/// The catalog of the bench skills, all three tools loaded.
async fn load_catalog(root: &Path) -> Arc<CatalogHandle> {
    let opts = options(root);
    let catalog = Arc::new(
        tokio::task::spawn_blocking(move || CatalogHandle::new(opts))
            .await
            .expect("build catalog"),
    );
    let current = catalog.current();
    assert_eq!(
        current.tools.len(),
        3,
        "tools loaded; diagnostics: {:?}",
        current.diagnostics
    );
    catalog
}

/// Where tool `name` sits in the catalog's list of tools.
fn tool_index(catalog: &CatalogHandle, name: &str) -> usize {
    let current = catalog.current();
    current
        .tools
        .iter()
        .position(|e| current.skills[e.skill].tools[e.tool].name == name)
        .expect("tool in catalog")
}

/// The default settings in `data`, with room for every worker's call.
fn run_settings(data: &Path) -> RunSettings {
    let defaults = RunSettings::default();
    RunSettings {
        workspace: data.to_path_buf(),
        data_dir: data.to_path_buf(),
        max_concurrent: defaults.max_concurrent.max(16),
        max_concurrent_per_tool: defaults.max_concurrent_per_tool.max(16),
        ..defaults
    }
}

/// The in-process server, and what the breakdown builds its calls from.
struct Server {
    catalog: Arc<CatalogHandle>,
    store: Stores,
    settings: RunSettings,
    invoker: Arc<Invoker>,
    addr: std::net::SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Server {
    /// Serves `catalog` on a loopback port, its run log in `data` (or at
    /// `SKILLD_BENCH_POSTGRES_URL`).
    async fn start(catalog: Arc<CatalogHandle>, data: &Path) -> Self {
        let url = std::env::var("SKILLD_BENCH_POSTGRES_URL")
            .ok()
            .filter(|url| !url.is_empty())
            .unwrap_or_else(|| format!("sqlite://{}", data.join("skilld.db").display()));
        let store = skilld::store::connect(&url).await.expect("run log");
        println!("run log: {}", store.runs.backend());
        let settings = run_settings(data);
        let invoker = Arc::new(Invoker::new(store.clone(), settings.clone()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let state = AppState {
            sessions: skilld::session::Sessions::shared(
                &invoker,
                &store,
                catalog.clone(),
                Default::default(),
            ),
            approver: skilld::invoke::Approver::new(&invoker, &store),
            installer: skilld::install::Installer::shared(&catalog, &invoker),
            catalog: catalog.clone(),
            invoker: invoker.clone(),
            auth: Default::default(),
            limits: skilld::http::ServerLimits::default(),
            web: Arc::new(skilld::http::kit::guard::WebGuard {
                loopback_only: true,
                allowed_origins: Vec::new(),
            }),
        };
        let task = tokio::spawn(skilld::serve(
            state,
            listener,
            async {
                let _ = stopped.await;
            },
            Duration::from_secs(1),
        ));
        Self {
            catalog,
            store,
            settings,
            invoker,
            addr,
            stop,
            task,
        }
    }

    fn url(&self, tool: &str) -> Arc<String> {
        Arc::new(format!("http://{}/tools/{tool}/invoke", self.addr))
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.expect("server task").expect("serve");
    }
}

// ------------------------------------------------------------------- bench

/// The table's calls: skilld at c=1, and one call per worker at c=8 for
/// the bare spawn and for skilld (each worker its own client).
struct TableCalls {
    seq_http: Call,
    conc_base: Vec<Call>,
    conc_http: Vec<Call>,
}

impl TableCalls {
    fn new(clients: &[Arc<reqwest::Client>], url: &Arc<String>) -> Self {
        Self {
            seq_http: Call::Http(clients[0].clone(), url.clone()),
            conc_http: clients
                .iter()
                .map(|c| Call::Http(c.clone(), url.clone()))
                .collect(),
            conc_base: vec![Call::Baseline; WORKERS],
        }
    }

    /// Warms up both sides, and every worker's connection.
    async fn warm_up(&self) {
        latencies(WARMUP, &Call::Baseline).await;
        latencies(WARMUP, &self.seq_http).await;
        throughput(WARMUP, &self.conc_base).await;
        throughput(WARMUP.max(2 * WORKERS), &self.conc_http).await;
    }
}

/// Warms up, then measures [`TABLE_ROUNDS`] rounds of the table; the
/// machine's ticks over all HTTP c=8 phases come back too.
async fn issue_table(calls: &TableCalls) -> (Vec<TableRound>, MachineTicks) {
    calls.warm_up().await;
    let bwrap = bwrap_available();
    if bwrap {
        latencies(WARMUP / 5, &Call::Bwrap).await;
    }
    let mut table = Vec::with_capacity(TABLE_ROUNDS);
    let mut http_idle = MachineTicks::default();
    for _ in 0..TABLE_ROUNDS {
        let (round, idle) = table_round(&calls.seq_http, &calls.conc_base, &calls.conc_http, bwrap).await;
        http_idle.add(&MachineTicks::default(), &idle);
        table.push(round);
    }
    (table, http_idle)
}

/// All rounds of the table together, call times sorted.
struct Totals {
    base_seq: Vec<Duration>,
    http_seq: Vec<Duration>,
    /// Wall time of the c=8 phases.
    base_conc: Duration,
    http_conc: Duration,
    /// The time of each call at c=8.
    base_conc_calls: Vec<Duration>,
    http_conc_calls: Vec<Duration>,
    /// CPU time (user + system, this process and its reaped children)
    /// spent in the c=8 phases.
    base_cpu: Duration,
    http_cpu: Duration,
}

impl Totals {
    fn of(table: &[TableRound]) -> Self {
        let all = |f: fn(&TableRound) -> &Vec<Duration>| sorted(table.iter().flat_map(f).copied().collect());
        Self {
            base_seq: all(|r| &r.base.seq),
            http_seq: all(|r| &r.http.seq),
            base_conc: table.iter().map(|r| r.base.conc_wall).sum(),
            http_conc: table.iter().map(|r| r.http.conc_wall).sum(),
            base_conc_calls: all(|r| &r.base.conc),
            http_conc_calls: all(|r| &r.http.conc),
            base_cpu: table.iter().map(|r| r.base.conc_cpu.total()).sum(),
            http_cpu: table.iter().map(|r| r.http.conc_cpu.total()).sum(),
        }
    }

    /// The median added by skilld at c=1.
    fn added(&self) -> Duration {
        median(&self.http_seq).saturating_sub(median(&self.base_seq))
    }

    /// Calls per second at c=8: baseline, HTTP.
    fn rates(&self) -> (f64, f64) {
        let calls = self.base_conc_calls.len();
        (rate(calls, self.base_conc), rate(calls, self.http_conc))
    }

    /// HTTP's c=8 throughput as a share of the baseline's.
    fn ratio(&self) -> f64 {
        let (base, http) = self.rates();
        http / base
    }
}

struct Figures {
    /// The issue's table, round by round.
    table: Vec<TableRound>,
    totals: Totals,
    /// The whole machine's CPU ticks during the HTTP c=8 phases.
    http_idle: MachineTicks,
    /// SQL statements per HTTP call, by statement.
    statements: Statements,
    gib: GibCall,
    rows: Vec<Row>,
    rss_rows: Vec<RssRow>,
    netns: bool,
}

async fn bench(root: &Path) -> Figures {
    // Declared first so it goes last, after the server and the run log.
    let data = tempfile::tempdir().expect("data dir");
    let server = Server::start(load_catalog(root).await, data.path()).await;
    let true_url = server.url(TRUE_TOOL);
    let clients: Vec<Arc<reqwest::Client>> = (0..WORKERS).map(|_| Arc::new(client())).collect();
    let (table, http_idle) = issue_table(&TableCalls::new(&clients, &true_url)).await;

    // Sampled from the first 1 GiB call to the last, breakdown included.
    let sampler = RssSampler::start();
    let gib_client = client();
    let gib = gib_over_http(&sampler, &gib_client, &server).await;

    let skilld_spec = skilld_spec(&server.catalog, &server.settings);
    let calls = breakdown_calls(&server, skilld_spec.clone(), &clients[0], &true_url).await;
    let rows = measure_breakdown(&calls).await;
    let rss_rows = rss_by_layer(&sampler, &skilld_spec, &gib_client, &server).await;
    drop(sampler);
    let statements = count_statements(&clients[0], &true_url).await;

    server.stop().await;
    Figures {
        totals: Totals::of(&table),
        table,
        http_idle,
        statements,
        gib,
        rows,
        rss_rows,
        netns: runner::network_isolation_available(),
    }
}

// ------------------------------------------------------------------ report

fn latency_line(label: &str, v: &[Duration]) {
    println!(
        "{label:<44} median {:>10}   p90 {:>10}   p99 {:>10}   max {:>10}",
        ms(median(v)),
        ms(p90(v)),
        ms(p99(v)),
        ms(max(v))
    );
}

fn rss_line(r: &RssRow) {
    let delta = r.peak.saturating_sub(r.idle);
    println!(
        "  {:<48} idle {:>9}   peak {:>9}   delta {:>9} ({delta} KiB, {} samples)",
        r.label,
        mib(r.idle),
        mib(r.peak),
        mib(delta),
        r.samples
    );
}

fn print_table(table: &[TableRound]) {
    println!();
    println!(
        "== issue 30's table, {TABLE_ROUNDS} rounds (c=1: {N_SEQ} calls per side, bubblewrap {N_BWRAP}; \
         c={WORKERS}: {N_CONC}; each in {ROUNDS} interleaved blocks) =="
    );
    for (i, round) in table.iter().enumerate() {
        print_round(i, round);
    }
    println!("  (process backend and Starlark rows: `cargo bench --bench backends`)");
}

fn print_latency(t: &Totals) {
    let (b, h) = (&t.base_seq, &t.http_seq);
    println!();
    println!(
        "== c=1: latency, all {TABLE_ROUNDS} rounds ({} sequential calls per side after {WARMUP} warm-up) ==",
        b.len()
    );
    latency_line("baseline: spawn `true` from tokio", b);
    latency_line(&format!("HTTP: POST /tools/{TRUE_TOOL}/invoke"), h);
    println!(
        "{:<44} median {:>10}   p90 {:>10}   p99 {:>10}   max {:>10}",
        "added by skilld (HTTP - baseline)",
        signed_ms(median(h), median(b)),
        signed_ms(p90(h), p90(b)),
        signed_ms(p99(h), p99(b)),
        signed_ms(max(h), max(b))
    );
}

fn print_throughput(t: &Totals, http_idle: &MachineTicks) {
    let conc_calls = t.base_conc_calls.len();
    let (base_rate, http_rate) = t.rates();
    println!();
    println!("== c={WORKERS}: throughput, all rounds ({conc_calls} calls per side, {WORKERS} workers) ==");
    println!(
        "{:<44} {:>9.1} calls/s   ({} wall)",
        "baseline: spawn `true` from tokio",
        base_rate,
        ms(t.base_conc)
    );
    println!(
        "{:<44} {:>9.1} calls/s   ({} wall)",
        "HTTP: one keep-alive client per worker",
        http_rate,
        ms(t.http_conc)
    );
    println!("{:<44} {:>9.1}%", "ratio HTTP/baseline", 100.0 * t.ratio());
    latency_line("latency per call, baseline", &t.base_conc_calls);
    latency_line("latency per call, HTTP", &t.http_conc_calls);
    println!(
        "{:<44} {:>9.1}%",
        "machine CPU idle during the HTTP phases",
        100.0 * http_idle.idle_share()
    );
    let per_call = |cpu: Duration| cpu / u32::try_from(conc_calls).unwrap_or(u32::MAX);
    println!(
        "{:<44} baseline {}   HTTP {}   ({} cores)",
        "CPU per call (process + children)",
        ms(per_call(t.base_cpu)),
        ms(per_call(t.http_cpu)),
        std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
    );
}

fn print_statements(s: &Statements) {
    println!();
    println!(
        "== SQL statements per HTTP call ({} sequential calls, counted from sqlx's and the hot path's events) ==",
        s.calls
    );
    let per = |n: u64| n as f64 / s.calls as f64;
    println!(
        "{:<44} {:>9.2}",
        "all (sqlx statements, hot-path writes, commits)",
        per(s.by_summary.values().sum())
    );
    for (summary, n) in &s.by_summary {
        println!("  {summary:<60} {:>6.2}", per(*n));
    }
}

fn print_gib(gib: &GibCall) {
    println!();
    println!(
        "== peak RSS of this process during one 1 GiB call over HTTP (sampled every {} ms) ==",
        SAMPLE_EVERY.as_millis()
    );
    println!(
        "tool wrote {} bytes ({:.2} GiB) in {}; envelope says truncated",
        gib.bytes,
        gib.bytes as f64 / GIB as f64,
        ms(gib.took)
    );
    rss_line(&gib.rss);
}

fn print_breakdown(f: &Figures) {
    // Against the baseline measured in the same rounds as the rows.
    let base_row = &f.rows[0];
    let base_med = median(&base_row.seq);
    let base_phase_rate = rate(2 * N_PHASE, base_row.conc);
    println!();
    println!(
        "== breakdown through public APIs (c=1: median of {N_PHASE}; c={WORKERS}: {} calls; {ROUNDS} interleaved rounds) ==",
        2 * N_PHASE
    );
    println!(
        "network namespaces available: {} (skills without `network: true` enter one shared isolated namespace)",
        f.netns
    );
    for row in &f.rows {
        let mut line = format!(
            "  {:<54} median {:>10} ({:>+7.3} ms vs baseline)  p99 {:>10}",
            row.label,
            ms(median(&row.seq)),
            (median(&row.seq).as_secs_f64() - base_med.as_secs_f64()) * 1e3,
            ms(p99(&row.seq)),
        );
        let r = rate(2 * N_PHASE, row.conc);
        let _ = write!(
            line,
            "   c={WORKERS} {r:>7.1}/s ({:>5.1}% of baseline)   CPU/call {}",
            100.0 * r / base_phase_rate,
            ms(row.cpu / u32::try_from(2 * N_PHASE).unwrap_or(u32::MAX))
        );
        println!("{line}");
    }
    println!("-- peak RSS above idle during 1 GiB of output, by layer --");
    for r in &f.rss_rows {
        rss_line(r);
    }
}

// ------------------------------------------------------------------- goals

/// The goals' verdicts, a line each, printed together at the end.
#[derive(Default)]
struct Goals(String);

impl Goals {
    fn check(&mut self, what: &str, limit: &str, got: String, met: bool) {
        let verdict = if met { "met" } else { "NOT MET" };
        let _ = writeln!(
            self.0,
            "  {what:<44} goal {limit:>10}   got {got:>12}   {verdict}"
        );
    }
}

fn latency_goals(t: &Totals, goals: &mut Goals) {
    let added = t.added();
    goals.check(
        "c=1 added latency per call (median)",
        "<= 0.5 ms",
        ms(added),
        added <= GOAL_ADDED,
    );
    goals.check(
        "c=1 added latency per call (median, run log)",
        "<= 0.3 ms",
        ms(added),
        added <= Duration::from_micros(300),
    );
    goals.check(
        "c=1 p99 latency (HTTP)",
        "<= 3 ms",
        ms(p99(&t.http_seq)),
        p99(&t.http_seq) <= Duration::from_millis(3),
    );
    goals.check(
        &format!("c={WORKERS} p99 latency (HTTP)"),
        "<= 15 ms",
        ms(p99(&t.http_conc_calls)),
        p99(&t.http_conc_calls) <= Duration::from_millis(15),
    );
}

fn throughput_goals(t: &Totals, http_idle: &MachineTicks, goals: &mut Goals) {
    let ratio = t.ratio();
    goals.check(
        &format!("c={WORKERS} throughput HTTP/baseline"),
        ">= 90%",
        format!("{:.1}%", 100.0 * ratio),
        ratio >= GOAL_THROUGHPUT,
    );
    goals.check(
        &format!("c={WORKERS} throughput HTTP/baseline (run log)"),
        ">= 75%",
        format!("{:.1}%", 100.0 * ratio),
        ratio >= 0.75,
    );
    goals.check(
        &format!("c={WORKERS} machine CPU idle (HTTP)"),
        "< 5%",
        format!("{:.1}%", 100.0 * http_idle.idle_share()),
        http_idle.idle_share() < 0.05,
    );
}

/// The sandbox's own cost: the pipeline with it on and off, same run.
/// Prints the CPU per call on either side as it goes.
fn sandbox_goals(rows: &[Row], goals: &mut Goals) {
    let row = |label: &str| rows.iter().find(|r| r.label == label).expect("breakdown row");
    let (on, off) = (row(SANDBOXED), row(UNSANDBOXED));
    let sandbox_added = median(&on.seq).saturating_sub(median(&off.seq));
    let sandbox_cost = 1.0 - off.conc.as_secs_f64() / on.conc.as_secs_f64();
    goals.check(
        "sandbox: added median per call at c=1",
        "<= 0.3 ms",
        ms(sandbox_added),
        sandbox_added <= Duration::from_micros(300),
    );
    let per_call = |cpu: Duration| cpu.as_secs_f64() * 1e3 / (2 * N_PHASE) as f64;
    println!(
        "  (sandbox CPU per call at c={WORKERS}: {:.3} ms on, {:.3} ms off, {:+.3} ms)",
        per_call(on.cpu),
        per_call(off.cpu),
        per_call(on.cpu) - per_call(off.cpu)
    );
    goals.check(
        &format!("sandbox: throughput lost at c={WORKERS}"),
        "<= 15%",
        format!("{:.1}%", 100.0 * sandbox_cost),
        sandbox_cost <= 0.15,
    );
}

fn print_goals(f: &Figures, start: Instant) {
    let mut goals = Goals::default();
    latency_goals(&f.totals, &mut goals);
    throughput_goals(&f.totals, &f.http_idle, &mut goals);
    sandbox_goals(&f.rows, &mut goals);
    let delta = f.gib.rss.peak.saturating_sub(f.gib.rss.idle);
    goals.check(
        "peak RSS above idle, 1 GiB output",
        "<= 1 MiB",
        mib(delta),
        delta <= GOAL_RSS_KIB,
    );
    println!();
    println!("== summary: goals ==");
    print!("{}", goals.0);
    println!(
        "all {} HTTP calls returned 200 with \"success\": true; bench took {:.1} s",
        CHECKED.load(Ordering::Relaxed),
        start.elapsed().as_secs_f64()
    );
}

// -------------------------------------------------------------------- main

/// The bench skills under `skills` in `dir`.
fn write_skills(dir: &Path) -> std::path::PathBuf {
    let root = dir.join("skills");
    std::fs::create_dir(&root).expect("create root");
    write_skill(&root, "bench-true", "", "true");
    // For the breakdown only: with `network: true` and no limits, the
    // child neither sets rlimits nor enters the isolated namespace.
    write_skill(&root, "bench-net", "network: true\n", "true");
    write_skill(
        &root,
        "bench-gib",
        "timeout: 120\n",
        "sh -c 'head -c 1073741824 /dev/zero'",
    );
    root
}

fn main() {
    let start = Instant::now();
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = write_skills(tmp.path());
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    println!("skills under {}; {cores} cores available", root.display());

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let f = rt.block_on(bench(&root));
    drop(rt);

    print_table(&f.table);
    print_latency(&f.totals);
    print_throughput(&f.totals, &f.http_idle);
    print_statements(&f.statements);
    print_gib(&f.gib);
    print_breakdown(&f);
    print_goals(&f, start);
}
