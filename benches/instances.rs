//! Several instances on one PostgreSQL (issue 30): 1, then 2, then 4
//! `skilld serve` processes (the real binary `cargo bench` builds), each
//! with its own `--instance` name and data directory, sharing one fresh
//! database (`skilld_bench_scale`, dropped and made again for each count,
//! on the server of `SKILLD_BENCH_POSTGRES_URL`). A load generator in this
//! process (tokio + reqwest) keeps `PER_INSTANCE` calls in flight on each
//! instance: `POST /tools/bench_true/invoke` of a read-only tool running
//! `true` (the sandbox as configured by default), for `SECS` seconds after
//! a warm-up.
//!
//! Printed for each count: calls/s, latency (median, p99), and where the
//! CPU went, from /proc: the skilld processes (with the children they
//! reaped, the tools), the PostgreSQL processes (every backend and
//! background process), this load generator, and the whole machine; and
//! PostgreSQL's own figures from `pg_stat_database` (commits and rows
//! written per second, per call). From these: calls per CPU-second of
//! skilld and of PostgreSQL, and how many calls/s PostgreSQL alone could
//! take on this machine's cores at its measured cost per call.
//!
//! `SKILLD_BENCH_QUICK=1` runs 5 s per count instead of 20. Skipped
//! without `SKILLD_BENCH_POSTGRES_URL` (any database of the server: the
//! bench connects to it to make its own). Run with
//! `cargo bench --bench instances`. Nothing asserts on time; every call
//! must answer 200 with `"success": true`, and the run log must hold as
//! many succeeded runs as calls were counted, spread over the instances.

#![expect(
    clippy::expect_used,
    reason = "a benchmark that cannot measure should stop and say why"
)]

use serde_json::Value;
use sqlx::{Connection, Row};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[path = "support/server.rs"]
mod server;
#[path = "support/stats.rs"]
mod stats;

use stats::{line, ticks_per_sec};

/// Calls in flight on each instance.
const PER_INSTANCE: usize = 4;
const WARMUP: Duration = Duration::from_secs(3);
const DATABASE: &str = "skilld_bench_scale";

fn write_skill(root: &Path) {
    let dir = root.join("bench-true");
    std::fs::create_dir_all(&dir).expect("skill dir");
    std::fs::write(
        dir.join("SKILL.md"),
        "---\nname: bench-true\nversion: 1.0.0\ndescription: Runs true.\nread_only: true\n---\n\n\
         ### bench_true\n\nRuns true.\n\n#### Parameters\n\nNone.\n\n#### Command\n\n```\ntrue\n```\n",
    )
    .expect("SKILL.md");
}

/// `url` with its database replaced by `db`.
fn with_database(url: &str, db: &str) -> String {
    let (head, query) = match url.split_once('?') {
        Some((h, q)) => (h, format!("?{q}")),
        None => (url, String::new()),
    };
    let scheme_end = head.find("://").map_or(0, |i| i + 3);
    let host_end = head[scheme_end..]
        .find('/')
        .map_or(head.len(), |i| scheme_end + i);
    format!("{}/{db}{query}", &head[..host_end])
}

/// CPU ticks of one process, with (`children`) what it reaped.
fn ticks(pid: u32, children: bool) -> u64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0;
    };
    let Some(close) = stat.rfind(')') else { return 0 };
    let f: Vec<u64> = stat[close + 2..]
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // utime, stime, cutime, cstime: fields 14 to 17, 11 to 14 here.
    let own = f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0);
    if children {
        own + f.get(13).copied().unwrap_or(0) + f.get(14).copied().unwrap_or(0)
    } else {
        own
    }
}

/// Every process named `postgres`, and its CPU ticks. Backends come and
/// go; a process that ended between two readings is not counted.
fn postgres_ticks() -> std::collections::HashMap<u32, u64> {
    let mut out = std::collections::HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "postgres") {
            out.insert(pid, ticks(pid, false));
        }
    }
    out
}

/// Busy and total jiffies of the whole machine, from `/proc/stat`.
fn machine() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let f: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    let total: u64 = f.iter().take(8).sum();
    let idle = f.get(3).copied().unwrap_or(0) + f.get(4).copied().unwrap_or(0);
    (total - idle, total)
}

struct PgStats {
    commits: i64,
    inserted: i64,
    updated: i64,
}

async fn pg_stats(admin: &mut sqlx::PgConnection) -> PgStats {
    // The statistics of this transaction are a snapshot: clear it first.
    sqlx::query("select pg_stat_clear_snapshot()")
        .execute(&mut *admin)
        .await
        .expect("clear snapshot");
    let row =
        sqlx::query("select xact_commit, tup_inserted, tup_updated from pg_stat_database where datname = $1")
            .bind(DATABASE)
            .fetch_one(&mut *admin)
            .await
            .expect("pg_stat_database");
    PgStats {
        commits: row.get(0),
        inserted: row.get(1),
        updated: row.get(2),
    }
}

struct Figures {
    instances: usize,
    calls: usize,
    wall: Duration,
    latencies: Vec<Duration>,
    skilld_cores: f64,
    postgres_cores: f64,
    loadgen_cores: f64,
    machine_busy: f64,
    commits: f64,
    inserted: f64,
    updated: f64,
    per_instance: Vec<usize>,
}

async fn recreate(admin: &mut sqlx::PgConnection) {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "drop database if exists {DATABASE} with (force)"
    )))
    .execute(&mut *admin)
    .await
    .expect("drop database");
    sqlx::query(sqlx::AssertSqlSafe(format!("create database {DATABASE}")))
        .execute(&mut *admin)
        .await
        .expect("create database");
}

async fn run(n: usize, secs: u64, url: &str, admin: &mut sqlx::PgConnection, root: &Path) -> Figures {
    recreate(admin).await;
    let db = with_database(url, DATABASE);
    let tmp = tempfile::tempdir().expect("tempdir");
    let servers = start_instances(n, &db, root, tmp.path()).await;
    let load = Load::start(&servers);
    tokio::time::sleep(WARMUP).await;

    let pids: Vec<u32> = servers.iter().map(server::Skilld::pid).collect();
    let before = Sample::take(&pids, admin).await;
    let start = Instant::now();
    load.measuring.store(true, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(secs)).await;
    load.stop.store(true, Ordering::Relaxed);
    let wall = start.elapsed();
    let after = Sample::take(&pids, admin).await;
    let counted = load.finish(n).await;

    let calls = counted.latencies.len();
    let (instances, recorded) = recorded_runs(&db, calls).await;
    drop(servers);
    assert_eq!(instances, n, "succeeded runs from every instance");
    assert!(
        recorded as usize >= calls,
        "{recorded} succeeded runs recorded for {calls} calls counted"
    );
    figures(counted, &before, &after, wall)
}

/// `n` instances of `skilld serve` on the database `db`, each with its own
/// name and data directory under `tmp`, ready.
async fn start_instances(n: usize, db: &str, root: &Path, tmp: &Path) -> Vec<server::Skilld> {
    // Bundled: a read-only tool runs without asking anyone.
    let root_s = format!("bundled={}", root.display());
    let config = tmp.join("skilld.toml");
    std::fs::write(
        &config,
        "max_concurrent_runs = 64\nmax_concurrent_runs_per_tool = 64\nqueue_timeout_secs = 60\n",
    )
    .expect("config");
    let config_s = config.display().to_string();
    let mut servers = Vec::new();
    for i in 0..n {
        let data = tmp.join(format!("data-{i}"));
        std::fs::create_dir_all(&data).expect("data dir");
        let data_s = data.display().to_string();
        let name = format!("bench-{i}");
        // One at a time: the first runs the migrations.
        servers.push(server::Skilld::start(
            &[
                "--config",
                &config_s,
                "--database",
                db,
                "--instance",
                &name,
                "--skills",
                &root_s,
                "--data-dir",
                &data_s,
                "--workspace",
                &data_s,
                "--no-watch",
            ],
            &tmp.join(format!("skilld-{i}.log")),
        ));
    }
    let probe = reqwest::Client::builder().no_proxy().build().expect("client");
    for s in &servers {
        s.ready(&probe, 1, Duration::from_secs(60)).await;
    }
    servers
}

/// The load generator: `PER_INSTANCE` workers per instance, calling until
/// `stop`, keeping the latencies only while `measuring`.
struct Load {
    stop: Arc<AtomicBool>,
    measuring: Arc<AtomicBool>,
    workers: Vec<tokio::task::JoinHandle<(usize, Vec<Duration>)>>,
}

impl Load {
    fn start(servers: &[server::Skilld]) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let measuring = Arc::new(AtomicBool::new(false));
        let mut workers = Vec::new();
        for (i, s) in servers.iter().enumerate() {
            for _ in 0..PER_INSTANCE {
                let url = format!("{}/tools/bench_true/invoke", s.base);
                let (stop, measuring) = (stop.clone(), measuring.clone());
                workers.push(tokio::spawn(
                    async move { (i, worker(&url, &stop, &measuring).await) },
                ));
            }
        }
        Self {
            stop,
            measuring,
            workers,
        }
    }

    /// The calls of the `n` instances, once `stop` is set.
    async fn finish(self, n: usize) -> Counted {
        let mut c = Counted {
            latencies: Vec::new(),
            per_instance: vec![0; n],
        };
        for w in self.workers {
            let (i, took) = w.await.expect("worker");
            c.per_instance[i] += took.len();
            c.latencies.extend(took);
        }
        c
    }
}

/// Each call measured, and how many each instance answered.
struct Counted {
    latencies: Vec<Duration>,
    per_instance: Vec<usize>,
}

/// One call in flight on `url` until `stop`; each checked to have succeeded.
async fn worker(url: &str, stop: &AtomicBool, measuring: &AtomicBool) -> Vec<Duration> {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(1)
        .no_proxy()
        .build()
        .expect("client");
    let mut took = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let start = Instant::now();
        let res = http
            .post(url)
            .header("content-type", "application/json")
            .body(r#"{"arguments": {}}"#)
            .send()
            .await
            .expect("invoke");
        let status = res.status();
        let body = res.bytes().await.expect("body");
        let d = start.elapsed();
        let ok = status == 200 && serde_json::from_slice::<Value>(&body).is_ok_and(|v| v["success"] == true);
        assert!(ok, "{status} {}", String::from_utf8_lossy(&body));
        if measuring.load(Ordering::Relaxed) && !stop.load(Ordering::Relaxed) {
            took.push(d);
        }
    }
    took
}

/// The CPU counters and PostgreSQL's statistics at one moment.
struct Sample {
    skilld: u64,
    postgres: std::collections::HashMap<u32, u64>,
    me: u64,
    machine: (u64, u64),
    stats: PgStats,
}

impl Sample {
    async fn take(pids: &[u32], admin: &mut sqlx::PgConnection) -> Self {
        Self {
            skilld: pids.iter().map(|&p| ticks(p, true)).sum(),
            postgres: postgres_ticks(),
            me: ticks(std::process::id(), false),
            machine: machine(),
            stats: pg_stats(admin).await,
        }
    }
}

/// The calls, where the CPU went between two samples `wall` apart, and
/// PostgreSQL's work per second.
fn figures(counted: Counted, before: &Sample, after: &Sample, wall: Duration) -> Figures {
    let pg_ticks: u64 = after
        .postgres
        .iter()
        .filter_map(|(pid, a)| before.postgres.get(pid).map(|b| a.saturating_sub(*b)))
        .sum();
    // Backends that started during the window count whole.
    let pg_new: u64 = after
        .postgres
        .iter()
        .filter(|(pid, _)| !before.postgres.contains_key(pid))
        .map(|(_, t)| *t)
        .sum();
    let s = wall.as_secs_f64();
    let cores = |t: u64| t as f64 / ticks_per_sec() / s;
    Figures {
        instances: counted.per_instance.len(),
        calls: counted.latencies.len(),
        wall,
        latencies: counted.latencies,
        skilld_cores: cores(after.skilld - before.skilld),
        postgres_cores: cores(pg_ticks + pg_new),
        loadgen_cores: cores(after.me - before.me),
        machine_busy: (after.machine.0 - before.machine.0) as f64
            / (after.machine.1 - before.machine.1).max(1) as f64,
        commits: (after.stats.commits - before.stats.commits) as f64 / s,
        inserted: (after.stats.inserted - before.stats.inserted) as f64 / s,
        updated: (after.stats.updated - before.stats.updated) as f64 / s,
        per_instance: counted.per_instance,
    }
}

/// The run log's succeeded runs: from how many instances, how many in all
/// (an end record may still be on its way: a moment is allowed for it).
async fn recorded_runs(db: &str, calls: usize) -> (usize, i64) {
    let mut conn = sqlx::PgConnection::connect(db).await.expect("bench database");
    let deadline = Instant::now() + Duration::from_secs(10);
    let found = loop {
        let rows =
            sqlx::query("select instance, count(*) from runs where status = 'succeeded' group by instance")
                .fetch_all(&mut conn)
                .await
                .expect("runs by instance");
        let recorded: i64 = rows.iter().map(|r| r.get::<i64, _>(1)).sum();
        if recorded as usize >= calls || Instant::now() > deadline {
            break (rows.len(), recorded);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    conn.close().await.expect("close");
    found
}

async fn bench(url: &str, secs: u64) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("skills");
    write_skill(&root);
    let mut admin = sqlx::PgConnection::connect(url).await.expect("PostgreSQL");
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let mut all = Vec::new();
    for n in [1, 2, 4] {
        let f = run(n, secs, url, &mut admin, &root).await;
        all.push(f);
    }
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "drop database if exists {DATABASE} with (force)"
    )))
    .execute(&mut admin)
    .await
    .expect("drop database");

    println!();
    println!(
        "== instances on one PostgreSQL: {PER_INSTANCE} calls in flight per instance, {secs} s each, {cores} cores =="
    );
    let one = all[0].calls as f64 / all[0].wall.as_secs_f64();
    for f in &mut all {
        let rate = f.calls as f64 / f.wall.as_secs_f64();
        println!(
            "-- {} instance(s), c={} --",
            f.instances,
            f.instances * PER_INSTANCE
        );
        println!(
            "  {rate:.0} calls/s (×{:.2} of 1 instance; per instance {:?})",
            rate / one,
            f.per_instance
        );
        println!("  latency        {}", line(&mut f.latencies));
        println!(
            "  CPU (cores):   skilld {:.2} (tools included)   postgres {:.2}   load generator {:.2}   machine busy {:.0}% of {cores}",
            f.skilld_cores,
            f.postgres_cores,
            f.loadgen_cores,
            100.0 * f.machine_busy
        );
        println!(
            "  PostgreSQL:    {:.0} commits/s ({:.2} per call), {:.0} rows inserted/s, {:.0} updated/s",
            f.commits,
            f.commits / rate.max(1e-9),
            f.inserted,
            f.updated
        );
        println!(
            "  calls per CPU-second: skilld {:.0}, postgres {:.0}; postgres alone on {cores} cores would take ≈{:.0} calls/s",
            rate / f.skilld_cores.max(1e-9),
            rate / f.postgres_cores.max(1e-9),
            cores as f64 * rate / f.postgres_cores.max(1e-9)
        );
    }
}

fn main() {
    let Some(url) = std::env::var("SKILLD_BENCH_POSTGRES_URL")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        println!(
            "skipped: SKILLD_BENCH_POSTGRES_URL is not set (e.g. postgres://postgres@127.0.0.1:5432/postgres)"
        );
        return;
    };
    let secs = if stats::quick() { 5 } else { 20 };
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(bench(&url, secs));
}
