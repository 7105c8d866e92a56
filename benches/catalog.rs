//! Catalog benchmark: 10,000 generated skills (30,000 tools).
//!
//! Measures loading the catalog from disk against merely reading every
//! `SKILL.md`, and the latency of `/tools?format=openai` and
//! `/skills/{skill}` against `/healthz` on an in-process server.
//!
//! Then the catalog at scale (issue 30): 50,000 generated skills, a mix
//! (a quarter prompt-only, the rest with one to three tools, a tenth with
//! triggers), against 500 of the same mix as the baseline, in the same
//! run: `Catalog::build` (medians, CPU, µs per skill), a reload after one
//! `SKILL.md` changed, and the real `skilld serve` binary on each: its
//! start-up until it listens, its resident memory, and the latency of
//! `GET /skills` (whole and filtered), `GET /tools` in the openai,
//! anthropic and mcp formats, `POST /skills/match` and MCP `tools/list`,
//! each against `GET /healthz` on the same server. `SKILLD_BENCH_QUICK=1`
//! shrinks 50,000 to 2,000.
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

#[path = "support/mcp.rs"]
mod mcp;
#[path = "support/server.rs"]
mod server;
#[path = "support/stats.rs"]
mod stats;

const SKILLS: usize = 10_000;
const TOOLS_PER_SKILL: usize = 3;
const LOAD_RUNS: usize = 5;
const WARMUP: usize = 20;
const REQUESTS: usize = 300;
const PROBE_SKILL: &str = "skill-05000";
/// Untimed rounds before each timed series on `skilld serve`.
const SCALE_WARMUP: usize = 3;

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
    std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
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

/// One skill of the scale mix: `i % 4 == 0` prompt-only, else `i % 4`
/// tools; every tenth with triggers. Returns its tool count.
fn scale_skill(root: &Path, i: usize) -> usize {
    let name = format!("scale-{i:06}");
    let tools = i % 4;
    let triggers = if i.is_multiple_of(10) {
        format!("triggers:\n  files: [\"*.ext{i}\"]\n  keywords: [kw{i}]\n")
    } else {
        String::new()
    };
    let mut md = format!(
        "---\nname: {name}\nversion: 1.0.0\ndescription: Scale skill {i}, generated for the catalog benchmark.\n\
         read_only: true\n{triggers}---\n\n# Scale {i}\n\nInstructions for skill {i}: read, then act.\n"
    );
    for t in 0..tools {
        let _ = write!(
            md,
            "\n### t{i}_{t}\n\nTool {t} of skill {i}.\n\n#### Parameters\n\n\
             | Name | Type | Required | Description |\n|------|------|----------|-------------|\n\
             | text | string | yes | What to echo |\n| count | integer | no | How often |\n\n\
             #### Command\n\n```bash\necho {{{{text}}}} {{{{count}}}}\n```\n"
        );
    }
    let dir = root.join(&name);
    std::fs::create_dir(&dir).expect("create skill dir");
    std::fs::write(dir.join("SKILL.md"), md).expect("write SKILL.md");
    tools
}

/// What a served body must hold.
type Check = Box<dyn Fn(&serde_json::Value) -> bool>;

struct ScaleFigures {
    n: usize,
    tools: usize,
    build: Vec<Duration>,
    build_cpu: Vec<Duration>,
    reload: Vec<Duration>,
    started_in: Duration,
    rss_ready_kib: u64,
    rss_served_kib: u64,
    rows: Vec<(String, Vec<Duration>, usize)>,
}

async fn timed_get(client: &reqwest::Client, url: &str) -> (Duration, usize, serde_json::Value) {
    let start = Instant::now();
    let r = client.get(url).send().await.expect("request");
    let status = r.status();
    let body = r.bytes().await.expect("body");
    let took = start.elapsed();
    assert!(status.is_success(), "{url}: {status}");
    let v = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
    (took, body.len(), v)
}

/// The GETs timed on a catalog of `n` skills and `tools` tools: label,
/// path, and what the body must hold.
fn scale_gets(n: usize, tools: usize, probe: &str) -> Vec<(String, String, Check)> {
    vec![
        (
            "GET /healthz (baseline)".into(),
            "/healthz".into(),
            Box::new(|_| true),
        ),
        (
            "GET /skills (all)".into(),
            "/skills".into(),
            Box::new(move |v| v["skills"].as_array().map(Vec::len) == Some(n)),
        ),
        (
            format!("GET /skills?q={probe}"),
            format!("/skills?q={probe}"),
            Box::new(|v| v["skills"].as_array().map(Vec::len) == Some(1)),
        ),
        (
            format!("GET /skills/{probe}"),
            format!("/skills/{probe}"),
            Box::new(|v| v["name"].is_string()),
        ),
        (
            "GET /tools?format=openai".into(),
            "/tools?format=openai".into(),
            Box::new(move |v| v["tools"].as_array().map(Vec::len) == Some(tools)),
        ),
        (
            "GET /tools?format=anthropic".into(),
            "/tools?format=anthropic".into(),
            Box::new(move |v| v["tools"].as_array().map(Vec::len) == Some(tools)),
        ),
        (
            "GET /tools?format=mcp".into(),
            "/tools?format=mcp".into(),
            Box::new(move |v| v["tools"].as_array().map(Vec::len) == Some(tools)),
        ),
    ]
}

/// A row of `reps` timed GETs of `path`, each body checked.
async fn time_get(
    client: &reqwest::Client,
    base: &str,
    reps: usize,
    (label, path, ok): &(String, String, Check),
) -> (String, Vec<Duration>, usize) {
    let url = format!("{base}{path}");
    let mut times = Vec::with_capacity(reps);
    let mut bytes = 0;
    for k in 0..reps + SCALE_WARMUP {
        let (took, len, v) = timed_get(client, &url).await;
        assert!(ok(&v), "{label}: unexpected body");
        bytes = len;
        if k >= SCALE_WARMUP {
            times.push(took);
        }
    }
    (label.clone(), times, bytes)
}

/// A row of `reps` timed `POST /skills/match` of a keyword and a file that
/// only `scale-{kw}` triggers on; it must be matched.
async fn time_match(
    client: &reqwest::Client,
    base: &str,
    reps: usize,
    kw: usize,
) -> (String, Vec<Duration>, usize) {
    let match_body =
        serde_json::json!({"message": format!("please kw{kw} now"), "files": [format!("src/a.ext{kw}")]});
    let mut times = Vec::with_capacity(reps);
    let mut bytes = 0;
    for k in 0..reps + SCALE_WARMUP {
        let start = Instant::now();
        let r = client
            .post(format!("{base}/skills/match"))
            .json(&match_body)
            .send()
            .await
            .expect("match");
        let status = r.status();
        let body = r.bytes().await.expect("body");
        let took = start.elapsed();
        assert!(status.is_success(), "match: {status}");
        let v: serde_json::Value = serde_json::from_slice(&body).expect("match JSON");
        let matched = v["matches"].as_array().expect("matches");
        assert!(
            matched.iter().any(|m| m["skill"] == format!("scale-{kw:06}")),
            "match found scale-{kw:06}: {v}"
        );
        bytes = body.len();
        if k >= SCALE_WARMUP {
            times.push(took);
        }
    }
    ("POST /skills/match (kw + file)".into(), times, bytes)
}

/// A row of `reps` timed MCP `tools/list`, each one page of every tool.
async fn time_tools_list(
    client: &reqwest::Client,
    base: &str,
    reps: usize,
    tools: usize,
) -> (String, Vec<Duration>, usize) {
    let session = mcp::Session::open(client, &format!("{base}/mcp"))
        .await
        .expect("MCP session");
    let mut times = Vec::with_capacity(reps);
    for k in 0..reps + SCALE_WARMUP {
        let start = Instant::now();
        let listed = session
            .request(client, "tools/list", serde_json::json!({}))
            .await
            .expect("tools/list");
        let took = start.elapsed();
        let count = listed["tools"].as_array().map_or(0, Vec::len);
        assert!(count >= tools, "tools/list listed {count} of {tools}");
        assert!(
            listed.get("nextCursor").is_none_or(serde_json::Value::is_null),
            "one page"
        );
        if k >= SCALE_WARMUP {
            times.push(took);
        }
    }
    session.close(client).await;
    ("MCP tools/list (one page)".into(), times, 0)
}

async fn serve_figures(n: usize, root: &Path, tools: usize, f: &mut ScaleFigures) {
    let data = tempfile::tempdir().expect("data dir");
    let root_arg = root.display().to_string();
    let data_arg = data.path().display().to_string();
    let server = server::Skilld::start(
        &[
            "--skills",
            &root_arg,
            "--data-dir",
            &data_arg,
            "--workspace",
            &data_arg,
            "--no-watch",
        ],
        &data.path().join("skilld.log"),
    );
    f.started_in = server.started_in;
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(1)
        .no_proxy()
        .build()
        .expect("client");
    server.ready(&client, n as u64, Duration::from_secs(600)).await;
    f.rss_ready_kib = stats::rss_kib_of(server.pid()).expect("server RSS");
    let base = server.base.clone();
    // Few repetitions of the big bodies: at 50,000 skills each is many MB.
    let reps = if n > 5_000 { 20 } else { 100 };
    let probe = format!("scale-{:06}", n / 2);
    let mut rows = Vec::new();
    for get in &scale_gets(n, tools, &probe) {
        rows.push(time_get(&client, &base, reps, get).await);
    }
    // Every tenth skill has triggers: the one at or just below the middle.
    rows.push(time_match(&client, &base, reps, (n / 2) / 10 * 10).await);
    rows.push(time_tools_list(&client, &base, reps, tools).await);
    f.rss_served_kib = stats::rss_kib_of(server.pid()).expect("server RSS");
    f.rows = rows;
}

fn scale_at(n: usize, tmp: &Path, rt: &tokio::runtime::Runtime) -> ScaleFigures {
    let root = tmp.join(format!("scale-{n}"));
    std::fs::create_dir(&root).expect("scale root");
    let start = Instant::now();
    let tools: usize = (0..n).map(|i| scale_skill(&root, i)).sum();
    println!(
        "generated {n} skills ({tools} tools) in {}",
        stats::ms(start.elapsed())
    );
    let opts = options(&root);
    let check = |c: &Catalog| {
        assert_eq!(c.skills.len(), n, "skills loaded; {:?}", c.diagnostics.first());
        assert_eq!(c.tools.len(), tools, "tools indexed");
    };
    check(&Catalog::build(&opts, None));
    let mut f = ScaleFigures {
        n,
        tools,
        build: Vec::new(),
        build_cpu: Vec::new(),
        reload: Vec::new(),
        started_in: Duration::ZERO,
        rss_ready_kib: 0,
        rss_served_kib: 0,
        rows: Vec::new(),
    };
    let runs = if n > 5_000 { 3 } else { LOAD_RUNS };
    for _ in 0..runs {
        let (start, cpu) = (Instant::now(), cpu_time());
        let c = Catalog::build(&opts, None);
        f.build.push(start.elapsed());
        if let (Some(a), Some(b)) = (cpu_time(), cpu) {
            f.build_cpu.push(a.saturating_sub(b));
        }
        check(&c);
    }
    let handle = CatalogHandle::new(opts);
    let changed = root.join("scale-000001/SKILL.md");
    let original = std::fs::read_to_string(&changed).expect("read");
    for k in 0..runs {
        let marker = format!("Changed {k} for the reload.");
        std::fs::write(
            &changed,
            original.replace("generated for the catalog benchmark.", &marker),
        )
        .expect("change one SKILL.md");
        let start = Instant::now();
        let c = handle.reload();
        f.reload.push(start.elapsed());
        check(&c);
        let s = c.skill("scale-000001").expect("changed skill");
        assert!(s.description.contains(&marker), "the reload saw the change");
    }
    drop(handle);
    rt.block_on(serve_figures(n, &root, tools, &mut f));
    f
}

fn report_scale(base: &mut ScaleFigures, big: &mut ScaleFigures) {
    use stats::{ms, quantile};
    println!();
    println!(
        "== catalog at scale: {} skills against {} (baseline), same run ==",
        big.n, base.n
    );
    for f in [&mut *base, &mut *big] {
        let per = |d: Duration| d.as_secs_f64() * 1e6 / f.n as f64;
        let (b, r) = (quantile(&mut f.build, 0.5), quantile(&mut f.reload, 0.5));
        let cpu = quantile(&mut f.build_cpu, 0.5);
        println!("-- {} skills, {} tools --", f.n, f.tools);
        println!(
            "  Catalog::build        median {:>12}  ({:.1} µs/skill)   CPU {:>12}",
            ms(b),
            per(b),
            ms(cpu)
        );
        println!(
            "  reload, one changed   median {:>12}  ({:.1} µs/skill)   (every root rescanned)",
            ms(r),
            per(r)
        );
        println!(
            "  skilld serve: listening after {:>12};  RSS ready {:.1} MiB, after serving {:.1} MiB",
            ms(f.started_in),
            f.rss_ready_kib as f64 / 1024.0,
            f.rss_served_kib as f64 / 1024.0
        );
        let floor = quantile(&mut f.rows[0].1, 0.5);
        for (label, times, bytes) in &mut f.rows {
            let m = quantile(times, 0.5);
            println!(
                "  {label:<34} median {:>12} p99 {:>12} ({:>8.1}x healthz)  {:>10} bytes  n={}",
                ms(m),
                ms(quantile(times, 0.99)),
                m.as_secs_f64() / floor.as_secs_f64().max(1e-9),
                bytes,
                times.len()
            );
        }
    }
    let grow = |a: Duration, b: Duration| b.as_secs_f64() / a.as_secs_f64().max(1e-9);
    let x = big.n as f64 / base.n as f64;
    println!("-- growth {}→{} skills (×{x:.0}) --", base.n, big.n);
    println!(
        "  build ×{:.1}, reload ×{:.1}; RSS per added skill {:.1} KiB (ready), {:.1} KiB (after serving)",
        grow(quantile(&mut base.build, 0.5), quantile(&mut big.build, 0.5)),
        grow(quantile(&mut base.reload, 0.5), quantile(&mut big.reload, 0.5)),
        (big.rss_ready_kib as f64 - base.rss_ready_kib as f64) / (big.n - base.n) as f64,
        (big.rss_served_kib as f64 - base.rss_served_kib as f64) / (big.n - base.n) as f64,
    );
    for (a, b) in base.rows.iter_mut().zip(big.rows.iter_mut()) {
        println!(
            "  {:<34} median ×{:.1}",
            a.0,
            grow(quantile(&mut a.1, 0.5), quantile(&mut b.1, 0.5))
        );
    }
}

/// `Catalog::build` against merely reading every `SKILL.md`.
struct LoadFigures {
    /// The bytes of `SKILL.md` each read covers.
    bytes: usize,
    /// Sorted.
    loads: Vec<Duration>,
    /// Sorted.
    reads: Vec<Duration>,
    /// Sorted; `None` off Linux.
    build_cpu: Option<Vec<Duration>>,
}

fn time_load(paths: &[PathBuf], opts: &CatalogOptions) -> LoadFigures {
    // Warm the page cache once, so both sides read from memory.
    let bytes = read_all(paths);
    check(&Catalog::build(opts, None));

    // Interleave the two so drift on a noisy machine hits both alike.
    let mut loads = Vec::with_capacity(LOAD_RUNS);
    let mut reads = Vec::with_capacity(LOAD_RUNS);
    let mut build_cpu = Vec::with_capacity(LOAD_RUNS);
    for _ in 0..LOAD_RUNS {
        let start = Instant::now();
        let n = read_all(paths);
        reads.push(start.elapsed());
        assert_eq!(n, bytes);

        let (start, cpu) = (Instant::now(), cpu_time());
        let catalog = Catalog::build(opts, None);
        loads.push(start.elapsed());
        build_cpu.push(
            cpu_time()
                .zip(cpu)
                .map(|(after, before)| after.saturating_sub(before)),
        );
        check(&catalog);
        drop(catalog);
    }
    LoadFigures {
        bytes,
        loads: sorted(loads),
        reads: sorted(reads),
        build_cpu: build_cpu.into_iter().collect::<Option<_>>().map(sorted),
    }
}

fn report_load(l: &LoadFigures) {
    let (load_min, load_med) = (l.loads[0], median(&l.loads));
    let (read_min, read_med) = (l.reads[0], median(&l.reads));
    println!();
    println!(
        "== catalog load ({LOAD_RUNS} runs, {} bytes of SKILL.md) ==",
        l.bytes
    );
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
    if let Some(cpu) = &l.build_cpu {
        let cpu = median(cpu);
        println!(
            "Catalog::build CPU (all threads, median) {} = {:.2} cores busy of {}; load average {}",
            ms(cpu),
            ratio(cpu, load_med),
            workers(),
            load_average()
        );
    }
}

/// A phase's label and its medians of wall and CPU time.
type Phase = (&'static str, (Duration, Option<Duration>));

/// Where the build's time goes, phase by phase, through public APIs.
fn build_phases(root: &Path, opts: &CatalogOptions) -> [Phase; 3] {
    let catalog = Catalog::build(opts, None);
    let dirs = scan(root);
    assert_eq!(dirs.len(), SKILLS, "skill directories found");
    let phases = [
        ("scan root (read_dir + is_file)", time_median(|| scan(root))),
        (
            "load_skill x each dir (parallel)",
            time_median(|| {
                let loaded = load_all(&dirs, opts);
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
    phases
}

/// Each phase as a share of the build's median `load_med`. CPU time is
/// shown beside wall time: on a busy machine wall time stretches, CPU time
/// much less.
fn report_build_phases(phases: &[Phase], load_med: Duration) {
    let accounted: Duration = phases.iter().map(|(_, (wall, _))| *wall).sum();
    println!("-- phases of Catalog::build (medians of {LOAD_RUNS}; % of the build's median wall time) --");
    let cpu_ms = |c: Option<Duration>| c.map_or_else(|| "n/a".to_owned(), ms);
    for (label, (wall, cpu)) in phases {
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
}

/// An in-process server on the catalog, with the run log's directory,
/// which must outlive it.
struct InProcess {
    addr: std::net::SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
    _data: tempfile::TempDir,
}

impl InProcess {
    async fn start(opts: CatalogOptions) -> Self {
        let catalog = Arc::new(
            tokio::task::spawn_blocking(move || CatalogHandle::new(opts))
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
            store.clone(),
            skilld::invoke::RunSettings::default(),
        ));
        let state = AppState {
            sessions: skilld::session::Sessions::shared(
                &invoker,
                &store,
                catalog.clone(),
                Default::default(),
            ),
            approver: skilld::invoke::Approver::new(&invoker, &store),
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
        let task = tokio::spawn(skilld::serve(
            state,
            listener,
            signal,
            std::time::Duration::from_secs(1),
        ));
        Self {
            addr,
            stop,
            task,
            _data: data,
        }
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.expect("server task").expect("serve");
    }
}

/// The latency of each route on the in-process server.
struct Http {
    health: Latency,
    tools: Latency,
    skill: Latency,
}

async fn time_http(opts: CatalogOptions) -> Http {
    let server = InProcess::start(opts).await;
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(1)
        .build()
        .expect("client");
    let url = |p: &str| format!("http://{}{p}", server.addr);
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

    server.stop().await;
    Http { health, tools, skill }
}

fn report_http(h: &Http) {
    println!();
    println!(
        "== HTTP latency ({REQUESTS} sequential requests after {WARMUP} warm-up, one keep-alive client) =="
    );
    let row = |label: &str, l: &Latency| {
        println!(
            "{label:<28} median {:>11} ({:>7.1}x)   p90 {:>11} ({:>7.1}x)   body {} bytes",
            ms(l.median),
            ratio(l.median, h.health.median),
            ms(l.p90),
            ratio(l.p90, h.health.p90),
            l.bytes
        );
    };
    row("GET /healthz (baseline)", &h.health);
    row("GET /tools?format=openai", &h.tools);
    row(&format!("GET /skills/{PROBE_SKILL}"), &h.skill);
    println!(
        "/tools?format=openai body: {} bytes ({:.2} MiB)",
        h.tools.bytes,
        h.tools.bytes as f64 / (1024.0 * 1024.0)
    );
}

fn report_goals(load_med: Duration, h: &Http) {
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
    goal("GET /tools?format=openai (median)", h.tools.median, GOAL_TOOLS);
    goal("GET /skills/{skill} (median)", h.skill.median, GOAL_SKILL);
    println!();
    println!("== summary: goals ==");
    print!("{summary}");
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

    let load = time_load(&paths, &opts);
    report_load(&load);
    let load_med = median(&load.loads);
    report_build_phases(&build_phases(&root, &opts), load_med);

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let http = rt.block_on(time_http(opts));
    report_http(&http);
    report_goals(load_med, &http);

    let big = if stats::quick() { 2_000 } else { 50_000 };
    let mut base = scale_at(500, tmp.path(), &rt);
    let mut scaled = scale_at(big, tmp.path(), &rt);
    report_scale(&mut base, &mut scaled);
}
