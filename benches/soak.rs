//! Soak: `true` through `POST /tools/{tool}/invoke` at c=8, sandbox on,
//! for a minute (`SKILLD_SOAK_SECS`), on SQLite or, with
//! `SKILLD_BENCH_POSTGRES_URL`, on PostgreSQL. Every 10 s window prints
//! its calls/s and latency (median, p90, p99, max) beside this process's
//! resident memory, open descriptors and, on SQLite, the WAL file's size,
//! so growth in any of them shows as a trend from the first window to the
//! last. A bare spawn of `true` at c=8 runs first, as the baseline.
//! `SKILLD_SOAK_SCRATCH` moves the runs' scratch directories (default:
//! `$TMPDIR/skilld-runs`).
//!
//! Run with `cargo bench --bench soak`. Nothing here asserts on time;
//! every call must return 200 with `"success": true`.

#![expect(
    clippy::expect_used,
    reason = "a benchmark that cannot measure should stop and say why"
)]

use serde_json::Value;
use skilld::AppState;
use skilld::catalog::{CatalogHandle, CatalogOptions, Root};
use skilld::invoke::{Invoker, RunSettings};
use skilld::skill::{Runtimes, Trust};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const WORKERS: usize = 8;
const WINDOW: Duration = Duration::from_secs(10);

fn write_skill(root: &Path) {
    let dir = root.join("soak-true");
    std::fs::create_dir_all(&dir).expect("skill dir");
    std::fs::write(
        dir.join("SKILL.md"),
        "---\nname: soak-true\nversion: 1.0.0\ndescription: Soak benchmark tool.\nread_only: true\n---\n\n\
         ### soak_true\n\nRuns true.\n\n#### Parameters\n\nNone.\n\n#### Command\n\n```\ntrue\n```\n",
    )
    .expect("SKILL.md");
}

/// Latencies of one window, sorted.
fn summary(mut d: Vec<Duration>, over: Duration) -> String {
    d.sort();
    let at = |q: f64| {
        let i = ((d.len() as f64 * q).ceil() as usize).clamp(1, d.len().max(1)) - 1;
        d.get(i).copied().unwrap_or_default()
    };
    let ms = |x: Duration| format!("{:7.3}", x.as_secs_f64() * 1000.0);
    format!(
        "{:7.1}/s  median {} p90 {} p99 {} max {} ms",
        d.len() as f64 / over.as_secs_f64(),
        ms(at(0.5)),
        ms(at(0.9)),
        ms(at(0.99)),
        ms(d.last().copied().unwrap_or_default())
    )
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, Iterator::count)
}

/// Runs `call` on [`WORKERS`] workers for `secs`, printing each window.
async fn soak<F, Fut>(label: &str, secs: u64, wal: Option<PathBuf>, call: F)
where
    F: Fn() -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    println!("== {label}: c={WORKERS} for {secs} s ==");
    let window: Arc<Mutex<Vec<Duration>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (window, stop, call) = (window.clone(), stop.clone(), call.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let start = Instant::now();
                    call().await;
                    window.lock().expect("window").push(start.elapsed());
                }
            })
        })
        .collect();
    let start = Instant::now();
    let mut next = start + WINDOW;
    while start.elapsed() < Duration::from_secs(secs) {
        tokio::time::sleep_until(next.into()).await;
        let taken = std::mem::take(&mut *window.lock().expect("window"));
        let wal_size = wal
            .as_ref()
            .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
            .map_or(String::new(), |b| {
                format!("  WAL {:6.2} MiB", b as f64 / 1048576.0)
            });
        println!(
            "  {:>3} s  {}  RSS {:6.1} MiB  fds {:4}{wal_size}",
            start.elapsed().as_secs(),
            summary(taken, WINDOW),
            rss_kib() as f64 / 1024.0,
            fds()
        );
        next += WINDOW;
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.await.expect("worker");
    }
}

/// The catalog of the soak skill under `root`.
fn catalog(root: &Path) -> Arc<CatalogHandle> {
    Arc::new(CatalogHandle::new(CatalogOptions {
        roots: vec![Root {
            name: "soak".into(),
            path: root.to_path_buf(),
            trust: Trust::Bundled,
            explicit: true,
            installed: false,
        }],
        max_timeout_secs: 60,
        runtimes: Runtimes::default(),
        launcher: None,
        rules: Default::default(),
    }))
}

/// The run log's URL: `SKILLD_BENCH_POSTGRES_URL`, or SQLite in `dir`,
/// whose WAL file each window reports.
fn run_log(dir: &Path) -> (String, Option<PathBuf>) {
    match std::env::var("SKILLD_BENCH_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => (url, None),
        _ => {
            let db = dir.join("skilld.db");
            (
                format!("sqlite://{}", db.display()),
                Some(dir.join("skilld.db-wal")),
            )
        }
    }
}

/// The default settings in `dir`, with room for every worker's call.
fn run_settings(dir: &Path) -> RunSettings {
    let defaults = RunSettings::default();
    RunSettings {
        workspace: dir.to_path_buf(),
        data_dir: dir.to_path_buf(),
        // Runs' scratch directories elsewhere (a tmpfs, say), to tell
        // their filesystem's cost from the run log's.
        scratch_dir: std::env::var_os("SKILLD_SOAK_SCRATCH")
            .map(PathBuf::from)
            .unwrap_or(defaults.scratch_dir.clone()),
        max_concurrent: defaults.max_concurrent.max(16),
        max_concurrent_per_tool: defaults.max_concurrent_per_tool.max(16),
        ..defaults
    }
}

/// The in-process server on a loopback port.
struct Server {
    addr: std::net::SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Server {
    async fn start(
        catalog: Arc<CatalogHandle>,
        invoker: Arc<Invoker>,
        store: &skilld::store::Stores,
    ) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let state = AppState {
            sessions: skilld::session::Sessions::shared(&invoker, store, catalog.clone(), Default::default()),
            approver: skilld::invoke::Approver::new(&invoker, store),
            installer: skilld::install::Installer::shared(&catalog, &invoker),
            catalog,
            invoker,
            auth: Default::default(),
            limits: skilld::http::ServerLimits::default(),
            web: Arc::new(skilld::http::kit::guard::WebGuard {
                loopback_only: true,
                allowed_origins: Vec::new(),
            }),
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(skilld::serve(
            state,
            listener,
            async {
                let _ = stopped.await;
            },
            Duration::from_secs(1),
        ));
        Self { addr, stop, task }
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.expect("server").expect("serve");
    }
}

/// The baseline: a bare spawn of `true`, for two windows.
async fn soak_baseline() {
    soak(
        "baseline: spawn `true` from tokio",
        WINDOW.as_secs() * 2,
        None,
        || async {
            let status = tokio::process::Command::new("true")
                .status()
                .await
                .expect("spawn true");
            assert!(status.success());
        },
    )
    .await;
}

/// `true` through the server for `secs`, each call checked.
async fn soak_http(addr: std::net::SocketAddr, secs: u64, wal: Option<PathBuf>) {
    let url = Arc::new(format!("http://{addr}/tools/soak_true/invoke"));
    let client = reqwest::Client::builder().no_proxy().build().expect("client");
    soak(
        "HTTP: POST /tools/soak_true/invoke, sandbox on",
        secs,
        wal,
        move || {
            let (client, url) = (client.clone(), url.clone());
            async move {
                let res = client
                    .post(url.as_str())
                    .header("content-type", "application/json")
                    .body(r#"{"arguments":{}}"#)
                    .send()
                    .await
                    .expect("request");
                assert_eq!(res.status(), 200);
                let env: Value = res.json().await.expect("envelope");
                assert_eq!(env["success"], true, "{env}");
            }
        },
    )
    .await;
}

async fn run(secs: u64) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("skills");
    write_skill(&root);
    let catalog = catalog(&root);
    let (url, wal) = run_log(tmp.path());
    let store = skilld::store::connect(&url).await.expect("run log");
    println!("run log: {}", store.runs.backend());
    let invoker = Arc::new(Invoker::new(store.clone(), run_settings(tmp.path())));
    let server = Server::start(catalog, invoker, &store).await;
    soak_baseline().await;
    soak_http(server.addr, secs, wal).await;
    server.stop().await;
}

fn main() {
    let secs = std::env::var("SKILLD_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(run(secs));
}
