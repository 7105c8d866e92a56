//! Stages benchmark: where the time of one call through the invoke
//! pipeline goes, stage by stage.
//!
//! The pipeline marks its stages with `trace`-level spans (`invoke.*` in
//! `src/invoke`, `runner.*` in `src/runner`); a subscriber here times each
//! span from its creation to its close. Runs `true` through
//! `Invoker::call` (SQLite run log, no HTTP) one call at a time, with the
//! sandbox on and then off, after a bare tokio spawn of `true` as the
//! baseline measured in the same run, and prints each stage's median, p90
//! and p99 with its share of the call. What no span covers (handing the
//! end back to the caller's task, the envelope) is the last line.
//!
//! Run with `cargo bench --bench stages`; `SKILLD_BENCH_CALLS` sets the
//! calls per side (default 1000). Nothing here asserts on time; every call
//! must succeed.

#![expect(
    clippy::expect_used,
    reason = "a benchmark that cannot measure should stop and say why"
)]

use skilld::catalog::CatalogHandle;
use skilld::invoke::{Invoker, RunSettings};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::registry::LookupSpan;
#[path = "support/skills.rs"]
mod skills;

/// Spans are timed only while this is set.
static TIMING: AtomicBool = AtomicBool::new(false);

/// Names in the order first seen, and each one's wall and CPU times.
type Timed = (
    Vec<&'static str>,
    BTreeMap<&'static str, Vec<(Duration, Duration)>>,
);

/// Each stage's wall and CPU times, by span name, in the order first seen.
#[derive(Clone, Default)]
struct Stages(Arc<Mutex<Timed>>);

/// When a span was made, and the CPU time of the threads that polled it
/// while inside (so other work on a loaded machine does not count).
struct Born {
    at: Instant,
    cpu: Duration,
    entered: Option<Duration>,
}

/// This thread's CPU time.
fn thread_cpu() -> Duration {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(ts.tv_sec.unsigned_abs(), ts.tv_nsec.unsigned_abs() as u32)
}

impl<S> tracing_subscriber::Layer<S> for Stages
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(
        &self,
        _: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        if !TIMING.load(Ordering::Relaxed) {
            return;
        }
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(Born {
                at: Instant::now(),
                cpu: Duration::ZERO,
                entered: None,
            });
        }
    }

    fn on_enter(&self, id: &tracing::span::Id, ctx: tracing_subscriber::layer::Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(born) = span.extensions_mut().get_mut::<Born>()
        {
            born.entered = Some(thread_cpu());
        }
    }

    fn on_exit(&self, id: &tracing::span::Id, ctx: tracing_subscriber::layer::Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(born) = span.extensions_mut().get_mut::<Born>()
            && let Some(entered) = born.entered.take()
        {
            born.cpu += thread_cpu().saturating_sub(entered);
        }
    }

    fn on_close(&self, id: tracing::span::Id, ctx: tracing_subscriber::layer::Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some((wall, cpu)) = span.extensions().get::<Born>().map(|b| (b.at.elapsed(), b.cpu)) else {
            return;
        };
        let name = span.metadata().name();
        let mut stages = self.0.lock().expect("stages");
        if !stages.1.contains_key(name) {
            stages.0.push(name);
        }
        stages.1.entry(name).or_default().push((wall, cpu));
    }
}

impl Stages {
    fn take(&self) -> Timed {
        std::mem::take(&mut *self.0.lock().expect("stages"))
    }
}

fn write_skills(root: &Path) {
    skills::write_star(root);
    write_skill(root);
}

fn write_skill(root: &Path) {
    let dir = root.join("bench-true");
    std::fs::create_dir_all(&dir).expect("skill dir");
    std::fs::write(
        dir.join("SKILL.md"),
        "---\nname: bench-true\nversion: 1.0.0\ndescription: Stages benchmark skill.\nread_only: true\n---\n\n\
         ### bench_true\n\nBenchmark tool.\n\n#### Parameters\n\nNone.\n\n#### Command\n\n```bash\ntrue\n```\n",
    )
    .expect("SKILL.md");
}

fn catalog(root: &Path, launcher: Option<Arc<dyn skilld::skill::backend::Launch>>) -> CatalogHandle {
    CatalogHandle::new(skills::options(root, launcher))
}

async fn one_call(invoker: &Arc<Invoker>, catalog: &CatalogHandle, tool: &str) -> Duration {
    let current = catalog.current();
    let call = skilld::invoke::Call {
        target: skilld::invoke::Target::Tool(tool.to_owned()),
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
    let start = Instant::now();
    match invoker.call(&current, call).await.expect("call") {
        skilld::invoke::Called::Finished(env) => assert!(env.success, "{env:?}"),
        _ => panic!("the call did not run at once"),
    }
    start.elapsed()
}

async fn bare_spawn() -> Duration {
    let start = Instant::now();
    let status = tokio::process::Command::new("true")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .status()
        .await
        .expect("spawn true");
    assert!(status.success());
    start.elapsed()
}

fn pct(sorted: &[Duration], p: usize) -> Duration {
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1e3)
}

fn print_stages(label: &str, mut calls: Vec<Duration>, base: Duration, stages: &Stages) {
    calls.sort();
    let total = pct(&calls, 50);
    println!(
        "\n== {label}: {} calls, median {} ms (p90 {}, p99 {}); bare spawn median {} ms ==",
        calls.len(),
        ms(total),
        ms(pct(&calls, 90)),
        ms(pct(&calls, 99)),
        ms(base)
    );
    println!(
        "{:<24} {:>6} {:>9} {:>9} {:>9} {:>7} {:>10} {:>9}",
        "stage (ms)", "count", "median", "p90", "p99", "share", "CPU median", "CPU p99"
    );
    let (order, by_name) = stages.take();
    let mut top_level = Duration::ZERO;
    for name in order {
        let both = &by_name[name];
        let mut wall: Vec<Duration> = both.iter().map(|(w, _)| *w).collect();
        let mut cpu: Vec<Duration> = both.iter().map(|(_, c)| *c).collect();
        wall.sort();
        cpu.sort();
        let median = pct(&wall, 50);
        if name.starts_with("invoke.") {
            top_level += median;
        }
        println!(
            "{:<24} {:>6} {:>9} {:>9} {:>9} {:>6.1}% {:>10} {:>9}",
            name,
            wall.len(),
            ms(median),
            ms(pct(&wall, 90)),
            ms(pct(&wall, 99)),
            100.0 * median.as_secs_f64() / total.as_secs_f64(),
            ms(pct(&cpu, 50)),
            ms(pct(&cpu, 99)),
        );
    }
    println!(
        "{:<28} {:>6} {:>9}   (median of the call less the invoke.* medians)",
        "not in a stage",
        "",
        ms(total.saturating_sub(top_level))
    );
}

async fn bench(root: &Path, calls: usize, stages: &Stages) {
    let data = tempfile::tempdir().expect("data dir");
    let url = format!("sqlite://{}", data.path().join("skilld.db").display());
    let store = skilld::store::connect(&url).await.expect("run log");
    let settings = RunSettings {
        workspace: data.path().to_path_buf(),
        data_dir: data.path().to_path_buf(),
        starlark_host: Some(env!("CARGO_BIN_EXE_skilld").into()),
        ..RunSettings::default()
    };
    let mut off = settings.clone();
    off.sandbox.level = skilld::sandbox::Level::Off;
    let on = Arc::new(Invoker::new(store.clone(), settings));
    let catalog = {
        let (root, launcher) = (root.to_path_buf(), on.launcher());
        Arc::new(
            tokio::task::spawn_blocking(move || catalog(&root, launcher))
                .await
                .expect("catalog"),
        )
    };
    assert!(
        catalog.current().skill("bench-star").is_some(),
        "{:?}",
        catalog.current().diagnostics
    );
    let sides = [
        ("`true`, sandbox on (the default)", on.clone(), "bench_true"),
        (
            "`true`, sandbox off",
            Arc::new(Invoker::new(store.clone(), off)),
            "bench_true",
        ),
        ("Starlark value tool, sandbox on", on, "bench_value"),
    ];
    for (_, invoker, tool) in &sides {
        for _ in 0..50 {
            one_call(invoker, &catalog, tool).await;
        }
    }
    for _ in 0..50 {
        bare_spawn().await;
    }
    let mut base = Vec::with_capacity(calls);
    for _ in 0..calls {
        base.push(bare_spawn().await);
    }
    base.sort();
    let base = pct(&base, 50);
    for (label, invoker, tool) in &sides {
        stages.take();
        TIMING.store(true, Ordering::Relaxed);
        let mut took = Vec::with_capacity(calls);
        for _ in 0..calls {
            took.push(one_call(invoker, &catalog, tool).await);
        }
        TIMING.store(false, Ordering::Relaxed);
        print_stages(label, took, base, stages);
    }
    store.runs.flush().await.expect("flush");
}

fn main() {
    let calls = std::env::var("SKILLD_BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let stages = Stages::default();
    let filter =
        tracing_subscriber::filter::filter_fn(|meta| meta.is_span() && meta.target().starts_with("skilld"));
    use tracing_subscriber::Layer as _;
    let subscriber = tracing_subscriber::registry().with(stages.clone().with_filter(filter));
    tracing::subscriber::set_global_default(subscriber).expect("no subscriber yet");
    let tmp = tempfile::tempdir().expect("tempdir");
    write_skills(tmp.path());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(bench(tmp.path(), calls, &stages));
}
