//! Catalog benchmark: 10,000 generated skills (30,000 tools).
//!
//! Measures loading the catalog from disk against merely reading every
//! `SKILL.md`, and the latency of `/tools?format=openai` and
//! `/skills/{skill}` against `/healthz` on an in-process server.
//!
//! Run with `cargo bench --bench catalog`. Nothing here asserts on time;
//! it only asserts the catalog holds what was generated, so the figures
//! cannot silently describe an empty catalog.

#![expect(
    clippy::expect_used,
    reason = "a benchmark that cannot measure should stop and say why"
)]

use skilld::AppState;
use skilld::catalog::{Catalog, CatalogHandle, CatalogOptions, Root};
use skilld::export::Exports;
use skilld::skill::{LoadOptions, PathCache, Runtimes, load_skill};
use skilld::skill::{Loaded, Trust};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const SKILLS: usize = 10_000;
const TOOLS_PER_SKILL: usize = 3;
const LOAD_RUNS: usize = 5;
const WARMUP: usize = 20;
const REQUESTS: usize = 300;
const PROBE_SKILL: &str = "skill-05000";

const GOAL_LOAD: Duration = Duration::from_secs(1);
const GOAL_TOOLS: Duration = Duration::from_millis(20);
const GOAL_SKILL: Duration = Duration::from_millis(1);

fn skill_md(i: usize) -> String {
    let name = format!("skill-{i:05}");
    let p = format!("s{i:05}");
    let fence = "```";
    format!(
        "---
name: {name}
version: 1.0.0
description: Generated skill {i} for the catalog benchmark.
read_only: true
---

### {p}_status

Show status.

#### Parameters

None.

#### Command

{fence}bash
echo status
{fence}

### {p}_log

Show recent commit history.

#### Parameters

| Name | Type | Required | Description |
|------|------|----------|-------------|
| count | integer | no | Number of commits (default: 10) |

#### Command

{fence}bash
echo log -n {{{{count}}}}
{fence}

### {p}_grep

Search for a pattern.

#### Parameters

| Name | Type | Required | Description |
|------|------|----------|-------------|
| pattern | string | yes | The pattern to search for |
| paths | array | no | Paths to search in |

#### Command

{fence}bash
echo {{{{pattern}}}} {{{{paths}}}}
{fence}
"
    )
}

/// Writes the skills; returns the paths of their `SKILL.md` files.
fn generate(root: &Path) -> Vec<PathBuf> {
    (0..SKILLS)
        .map(|i| {
            let dir = root.join(format!("skill-{i:05}"));
            std::fs::create_dir(&dir).expect("create skill dir");
            let file = dir.join("SKILL.md");
            std::fs::write(&file, skill_md(i)).expect("write SKILL.md");
            file
        })
        .collect()
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

fn workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Reads every file on `workers()` threads, handing out work the way the
/// loader does (one shared counter). Returns the total bytes read.
fn read_all(paths: &[PathBuf]) -> usize {
    let next = AtomicUsize::new(0);
    let total = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..workers().min(paths.len().max(1)) {
            scope.spawn(|| {
                let mut bytes = 0;
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(p) = paths.get(i) else { break };
                    bytes += std::fs::read(p).expect("read SKILL.md").len();
                }
                total.fetch_add(bytes, Ordering::Relaxed);
            });
        }
    });
    total.into_inner()
}

/// User + system CPU time of this process so far (every thread, live or
/// exited), from `/proc/self/stat`; `None` off Linux. Ticks are assumed to
/// be the usual 100 Hz, so this is good to about 10 ms.
fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command: state is field 3, utime 14, stime 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

/// The 1-minute load average, to tell a busy machine from a slow build.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "n/a".to_owned())
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

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64().max(1e-9)
}

fn check(catalog: &Catalog) {
    assert_eq!(
        catalog.skills.len(),
        SKILLS,
        "skills loaded; diagnostics: {:?}",
        catalog.diagnostics.first()
    );
    assert_eq!(catalog.tools.len(), SKILLS * TOOLS_PER_SKILL, "tools indexed");
}

/// What `Catalog::build` does first: the root's subdirectories that hold a
/// `SKILL.md` (or `SKILL.yaml`), sorted.
fn scan(root: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .expect("read root")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.is_dir() && (p.join("SKILL.md").is_file() || p.join("SKILL.yaml").is_file()))
        .collect();
    dirs.sort();
    dirs
}

/// `load_skill` over every directory on `workers()` threads, as the loader
/// hands the work out. Returns what loaded (for the caller to drop untimed).
fn load_all(dirs: &[PathBuf], opts: &CatalogOptions) -> Vec<Loaded> {
    let cache = PathCache::new(std::env::var_os("PATH"));
    let root = &opts.roots[0];
    let next = AtomicUsize::new(0);
    let all = std::sync::Mutex::new(Vec::with_capacity(dirs.len()));
    std::thread::scope(|scope| {
        for _ in 0..workers().min(dirs.len().max(1)) {
            scope.spawn(|| {
                let lo = LoadOptions {
                    source: &root.name,
                    trust: root.trust,
                    max_timeout_secs: opts.max_timeout_secs,
                    runtimes: &opts.runtimes,
                    installed: false,
                    path: &cache,
                    launcher: None,
                    rules: &opts.rules,
                };
                let mut local: Vec<Loaded> = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(dir) = dirs.get(i) else { break };
                    local.push(load_skill(dir, &lo));
                }
                all.lock().expect("results").extend(local);
            });
        }
    });
    all.into_inner().expect("results")
}

/// Times one closure `LOAD_RUNS` times; the medians of wall-clock and of
/// process CPU time (every thread), the latter `None` off Linux. What the
/// closure returns is dropped after the clock stops.
fn time_median<T>(mut f: impl FnMut() -> T) -> (Duration, Option<Duration>) {
    let mut times = Vec::with_capacity(LOAD_RUNS);
    let mut cpus = Vec::with_capacity(LOAD_RUNS);
    for _ in 0..LOAD_RUNS {
        let (start, cpu) = (Instant::now(), cpu_time());
        let out = f();
        times.push(start.elapsed());
        cpus.push(
            cpu_time()
                .zip(cpu)
                .map(|(after, before)| after.saturating_sub(before)),
        );
        drop(out);
    }
    let cpus: Option<Vec<Duration>> = cpus.into_iter().collect();
    (median(&sorted(times)), cpus.map(|c| median(&sorted(c))))
}

struct Latency {
    median: Duration,
    p90: Duration,
    bytes: usize,
}

async fn measure(client: &reqwest::Client, url: &str) -> Latency {
    let mut bytes = 0;
    for _ in 0..WARMUP {
        let r = client.get(url).send().await.expect("request");
        assert!(r.status().is_success(), "{url}: {}", r.status());
        bytes = r.bytes().await.expect("body").len();
    }
    let mut times = Vec::with_capacity(REQUESTS);
    for _ in 0..REQUESTS {
        let start = Instant::now();
        let r = client.get(url).send().await.expect("request");
        let status = r.status();
        let body = r.bytes().await.expect("body");
        times.push(start.elapsed());
        assert!(status.is_success(), "{url}: {status}");
        assert_eq!(body.len(), bytes, "{url}: body size changed");
    }
    let times = sorted(times);
    Latency {
        median: median(&times),
        p90: p90(&times),
        bytes,
    }
}

fn main() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("skills");
    std::fs::create_dir(&root).expect("create root");
    let gen_start = Instant::now();
    let paths = generate(&root);
    println!(
        "generated {SKILLS} skills ({} tools) in {} under {}",
        SKILLS * TOOLS_PER_SKILL,
        ms(gen_start.elapsed()),
        root.display()
    );
    println!("workers (available_parallelism): {}", workers());
    let opts = options(&root);

    // Warm the page cache once, so both sides read from memory.
    let bytes = read_all(&paths);
    check(&Catalog::build(&opts, None));

    // Interleave the two so drift on a noisy machine hits both alike.
    let mut loads = Vec::with_capacity(LOAD_RUNS);
    let mut reads = Vec::with_capacity(LOAD_RUNS);
    let mut build_cpu = Vec::with_capacity(LOAD_RUNS);
    for _ in 0..LOAD_RUNS {
        let start = Instant::now();
        let n = read_all(&paths);
        reads.push(start.elapsed());
        assert_eq!(n, bytes);

        let (start, cpu) = (Instant::now(), cpu_time());
        let catalog = Catalog::build(&opts, None);
        loads.push(start.elapsed());
        build_cpu.push(
            cpu_time()
                .zip(cpu)
                .map(|(after, before)| after.saturating_sub(before)),
        );
        check(&catalog);
        drop(catalog);
    }
    let (loads, reads) = (sorted(loads), sorted(reads));
    let (load_min, load_med) = (loads[0], median(&loads));
    let (read_min, read_med) = (reads[0], median(&reads));
    let build_cpu: Option<Vec<Duration>> = build_cpu.into_iter().collect();

    println!();
    println!("== catalog load ({LOAD_RUNS} runs, {bytes} bytes of SKILL.md) ==");
    println!(
        "Catalog::build      min {:>12}   median {:>12}",
        ms(load_min),
        ms(load_med)
    );
    println!(
        "read-only baseline  min {:>12}   median {:>12}",
        ms(read_min),
        ms(read_med)
    );
    println!(
        "ratio build/read    min {:>10.1}x   median {:>10.1}x",
        ratio(load_min, read_min),
        ratio(load_med, read_med)
    );
    if let Some(cpu) = build_cpu {
        let cpu = median(&sorted(cpu));
        println!(
            "Catalog::build CPU (all threads, median) {} = {:.2} cores busy of {}; load average {}",
            ms(cpu),
            ratio(cpu, load_med),
            workers(),
            load_average()
        );
    }

    // Where the build's time goes, phase by phase, through public APIs.
    // CPU time is shown beside wall time: on a busy machine wall time
    // stretches, CPU time much less.
    let catalog = Catalog::build(&opts, None);
    let dirs = scan(&root);
    assert_eq!(dirs.len(), SKILLS, "skill directories found");
    let phases = [
        ("scan root (read_dir + is_file)", time_median(|| scan(&root))),
        (
            "load_skill x each dir (parallel)",
            time_median(|| {
                let loaded = load_all(&dirs, &opts);
                assert_eq!(loaded.iter().filter(|l| l.skill.is_some()).count(), SKILLS);
                loaded
            }),
        ),
        (
            "Exports::build (6 formats)",
            time_median(|| Exports::build(&catalog.skills, &catalog.tools)),
        ),
    ];
    drop(catalog);
    let accounted: Duration = phases.iter().map(|(_, (wall, _))| *wall).sum();
    println!("-- phases of Catalog::build (medians of {LOAD_RUNS}; % of the build's median wall time) --");
    let cpu_ms = |c: Option<Duration>| c.map_or_else(|| "n/a".to_owned(), ms);
    for (label, (wall, cpu)) in &phases {
        println!(
            "  {label:<36} wall {:>12} {:>5.1}%   cpu {:>12}",
            ms(*wall),
            100.0 * ratio(*wall, load_med),
            cpu_ms(*cpu)
        );
    }
    println!(
        "  {:<36} wall {:>12} {:>5.1}%   (by difference; noisy)",
        "rest (clone, assemble, cross_check)",
        ms(load_med.saturating_sub(accounted)),
        100.0 * ratio(load_med.saturating_sub(accounted), load_med)
    );

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let (health, tools, skill) = rt.block_on(async {
        let handle_opts = opts.clone();
        let catalog = Arc::new(
            tokio::task::spawn_blocking(move || CatalogHandle::new(handle_opts))
                .await
                .expect("build catalog"),
        );
        check(&catalog.current());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let data = tempfile::tempdir().expect("data dir");
        let store = skilld::store::connect(&format!("sqlite://{}", data.path().join("skilld.db").display()))
            .await
            .expect("run log");
        let invoker = Arc::new(skilld::invoke::Invoker::new(
            store,
            skilld::invoke::RunSettings::default(),
        ));
        let state = AppState {
            installer: skilld::install::Installer::shared(&catalog, &invoker),
            catalog,
            invoker,
            auth: Default::default(),
            limits: skilld::http::ServerLimits::default(),
            web: Default::default(),
        };
        let signal = async {
            let _ = stopped.await;
        };
        let server = tokio::spawn(skilld::serve(
            state,
            listener,
            signal,
            std::time::Duration::from_secs(1),
        ));

        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(1)
            .build()
            .expect("client");
        let url = |p: &str| format!("http://{addr}{p}");
        let health = measure(&client, &url("/healthz")).await;
        let tools = measure(&client, &url("/tools?format=openai")).await;
        let skill = measure(&client, &url(&format!("/skills/{PROBE_SKILL}"))).await;

        // The body must really list every tool.
        let body: serde_json::Value = client
            .get(url("/tools?format=openai"))
            .send()
            .await
            .expect("request")
            .json()
            .await
            .expect("json");
        let listed = body["tools"].as_array().map_or(0, Vec::len);
        assert_eq!(listed, SKILLS * TOOLS_PER_SKILL, "tools in /tools?format=openai");

        let _ = stop.send(());
        server.await.expect("server task").expect("serve");
        (health, tools, skill)
    });

    println!();
    println!(
        "== HTTP latency ({REQUESTS} sequential requests after {WARMUP} warm-up, one keep-alive client) =="
    );
    let row = |label: &str, l: &Latency| {
        println!(
            "{label:<28} median {:>11} ({:>7.1}x)   p90 {:>11} ({:>7.1}x)   body {} bytes",
            ms(l.median),
            ratio(l.median, health.median),
            ms(l.p90),
            ratio(l.p90, health.p90),
            l.bytes
        );
    };
    row("GET /healthz (baseline)", &health);
    row("GET /tools?format=openai", &tools);
    row(&format!("GET /skills/{PROBE_SKILL}"), &skill);
    println!(
        "/tools?format=openai body: {} bytes ({:.2} MiB)",
        tools.bytes,
        tools.bytes as f64 / (1024.0 * 1024.0)
    );

    let mut summary = String::new();
    let mut goal = |what: &str, got: Duration, limit: Duration| {
        let verdict = if got <= limit { "met" } else { "NOT MET" };
        let _ = writeln!(
            summary,
            "  {what:<36} goal <= {:>10}   got {:>12}   {verdict}",
            ms(limit),
            ms(got)
        );
    };
    goal("catalog load (median)", load_med, GOAL_LOAD);
    goal("GET /tools?format=openai (median)", tools.median, GOAL_TOOLS);
    goal("GET /skills/{skill} (median)", skill.median, GOAL_SKILL);
    println!();
    println!("== summary: goals ==");
    print!("{summary}");
}
