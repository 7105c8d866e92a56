//! Approvals benchmark: what holding a call for a person and acting on the
//! decision cost, on SQLite and on PostgreSQL.
//!
//! For a tool that always asks (bundled, not read-only, running `true`),
//! over HTTP on an in-process server:
//! - invoke → 202: the call decided, its run and request recorded;
//! - approve → 200: the decision recorded, the run claimed for this
//!   instance and its execution started (the child is spawned right after
//!   the answer, on the task the handler started);
//! - approve → result: until the run's record is final, for context.
//!
//! The baseline, in the same run and on the same connection, is
//! `GET /healthz`: the HTTP floor every call pays.
//!
//! Then the inbox at scale (issue 30): 10,000 calls held through
//! `POST /tools/{tool}/invoke` (the real HTTP API, one caller, each with
//! its own arguments), the inbox read (`GET /approvals?status=pending`,
//! its first page of 500, and the first `snapshot` of
//! `GET /approvals/events`), the whole inbox walked page by page with
//! `next_cursor` (what `/ui` does after the snapshot: every request
//! reached, the newest included), then drained as a person would: read the
//! oldest page, decide each request on it (approve and deny in turn),
//! read the next page, until none is pending; then the decisions paged
//! through `GET /approvals/history`, and every approved run awaited. The
//! baseline is the same with 100 pending, on a fresh database, in the
//! same run. `SKILLD_BENCH_QUICK=1` shrinks 10,000 to 1,000.
//!
//! PostgreSQL runs when `SKILLD_BENCH_POSTGRES_URL` is set, in a fresh
//! schema dropped afterwards. Run with `cargo bench --bench approvals`.
//! Nothing asserts on time; every answer's status is asserted, so the
//! figures cannot silently describe errors.

#![expect(
    clippy::expect_used,
    reason = "a benchmark that cannot measure should stop and say why"
)]

use serde_json::{Value, json};
use skilld::AppState;
use skilld::auth::Auth;
use skilld::catalog::{CatalogHandle, CatalogOptions, Root};
use skilld::invoke::{Invoker, RunSettings};
use skilld::skill::Runtimes;
use skilld::skill::Trust;
use sqlx::Connection;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "support/stats.rs"]
mod stats;

const WARMUP: usize = 30;
const N: usize = 300;
const GOAL: Duration = Duration::from_millis(2);
/// The local secret of the benched server, which the deciding client sends.
const SECRET: &str = "bench-local-secret-0123456789abcdef";

fn write_skill(root: &Path) {
    let dir = root.join("bench-ask");
    std::fs::create_dir_all(&dir).expect("skill dir");
    std::fs::write(
        dir.join("SKILL.md"),
        "---\nname: bench-ask\nversion: 1.0.0\ndescription: Asks before every call.\n---\n\n\
         ### bench_ask\n\nDoes nothing, after asking.\n\n#### Parameters\n\nNone.\n\n#### Command\n\n```\ntrue\n```\n",
    )
    .expect("SKILL.md");
    // For the scale run: every call with its own arguments, so none joins
    // another's pending request.
    let dir = root.join("bench-ask-n");
    std::fs::create_dir_all(&dir).expect("skill dir");
    std::fs::write(
        dir.join("SKILL.md"),
        "---\nname: bench-ask-n\nversion: 1.0.0\ndescription: Asks before every call.\n---\n\n\
         ### bench_ask_n\n\nDoes nothing with n, after asking.\n\n#### Parameters\n\n\
         | Name | Type | Required | Description |\n|------|------|----------|-------------|\n\
         | n | integer | yes | Which call |\n\n#### Command\n\n```\ntrue {{n}}\n```\n",
    )
    .expect("SKILL.md");
}

struct Figures {
    healthz: Vec<Duration>,
    held: Vec<Duration>,
    approved: Vec<Duration>,
    finished: Vec<Duration>,
}

/// An in-process server on a fresh store, and a client holding the
/// local secret.
struct Server {
    base: String,
    client: reqwest::Client,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
    _data: tempfile::TempDir,
}

impl Server {
    async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.expect("server task").expect("server");
    }
}

async fn start(root: &Path, database_url: &str, max_pending: u64) -> Server {
    let data = tempfile::tempdir().expect("data dir");
    let store = skilld::store::connect(database_url).await.expect("store");
    let catalog = Arc::new(CatalogHandle::new(CatalogOptions {
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
    }));
    let invoker = Arc::new(Invoker::new(
        store.clone(),
        RunSettings {
            data_dir: data.path().to_path_buf(),
            workspace: data.path().to_path_buf(),
            max_pending_per_caller: max_pending,
            ..RunSettings::default()
        },
    ));
    let state = AppState {
        sessions: skilld::session::Sessions::shared(&invoker, &store, catalog.clone(), Default::default()),
        approver: skilld::invoke::Approver::new(&invoker, &store),
        installer: skilld::install::Installer::shared(&catalog, &invoker),
        catalog,
        invoker,
        auth: Arc::new(Auth::open_with_secret(SECRET).expect("secret")),
        limits: skilld::http::ServerLimits::default(),
        web: Arc::new(skilld::http::kit::guard::WebGuard {
            loopback_only: true,
            allowed_origins: Vec::new(),
        }),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(skilld::serve(
        state,
        listener,
        async {
            let _ = stopped.await;
        },
        Duration::from_secs(5),
    ));

    // The person deciding holds the server's local secret.
    let mut person = reqwest::header::HeaderMap::new();
    let bearer = format!("Bearer {SECRET}").parse().expect("header");
    person.insert(reqwest::header::AUTHORIZATION, bearer);
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(1)
        .no_proxy()
        .default_headers(person)
        .build()
        .expect("client");
    Server {
        base,
        client,
        stop,
        task,
        _data: data,
    }
}

async fn bench(root: &Path, database_url: &str) -> Figures {
    let server = start(root, database_url, 20).await;
    let (base, client) = (&server.base, &server.client);
    let mut f = Figures {
        healthz: Vec::new(),
        held: Vec::new(),
        approved: Vec::new(),
        finished: Vec::new(),
    };
    for i in 0..WARMUP + N {
        let start = Instant::now();
        let res = client
            .get(format!("{base}/healthz"))
            .send()
            .await
            .expect("healthz");
        assert_eq!(res.status(), 200);
        res.bytes().await.expect("body");
        let healthz = start.elapsed();

        let start = Instant::now();
        let res = client
            .post(format!("{base}/tools/bench_ask/invoke"))
            .json(&json!({"arguments": {}}))
            .send()
            .await
            .expect("invoke");
        let status = res.status();
        let body: Value = res.json().await.expect("202 body");
        let held = start.elapsed();
        assert_eq!(status, 202, "{body}");

        let start = Instant::now();
        let res = client
            .post(format!(
                "{base}/approvals/{}/approve",
                body["approval_id"].as_str().expect("approval id")
            ))
            .json(&json!({"scope": "once"}))
            .send()
            .await
            .expect("approve");
        let status = res.status();
        let decided: Value = res.json().await.expect("approval");
        let approved = start.elapsed();
        assert_eq!(status, 200, "{decided}");

        let res = client
            .get(format!(
                "{base}/runs/{}?wait=30",
                body["run_id"].as_str().expect("run id")
            ))
            .send()
            .await
            .expect("run");
        let run: Value = res.json().await.expect("run");
        let finished = start.elapsed();
        assert_eq!(run["status"], "succeeded", "{run}");

        if i >= WARMUP {
            f.healthz.push(healthz);
            f.held.push(held);
            f.approved.push(approved);
            f.finished.push(finished);
        }
    }
    server.stop().await;
    f
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

fn p90(v: &mut [Duration]) -> Duration {
    v.sort_unstable();
    v[v.len() * 9 / 10]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

fn report(backend: &str, mut f: Figures) -> Vec<(String, Duration)> {
    let floor = median(&mut f.healthz);
    println!();
    println!("== {backend}: {N} cycles after {WARMUP} warm-up ==");
    println!(
        "{:<46} median {:>10}   p90 {:>10}",
        "baseline: GET /healthz",
        ms(floor),
        ms(p90(&mut f.healthz))
    );
    let mut goals = Vec::new();
    for (label, v) in [
        ("invoke → 202 (held, recorded)", &mut f.held),
        ("approve → 200 (decided, claimed, started)", &mut f.approved),
        ("approve → run final (`true` ran)", &mut f.finished),
    ] {
        let m = median(v);
        println!(
            "{label:<46} median {:>10}   p90 {:>10}   {:>5.1}× baseline",
            ms(m),
            ms(p90(v)),
            m.as_secs_f64() / floor.as_secs_f64()
        );
        goals.push((format!("{backend}: {label}"), m));
    }
    goals.truncate(2);
    goals
}

/// The inbox's page: what `GET /approvals` and the inbox's snapshot hold
/// at most (`store::MAX_APPROVALS`).
const PAGE: usize = 500;

/// The inbox at scale, one store and one size.
struct Scale {
    n: usize,
    /// Each invoke → 202, in order (the last ones with n - 1 pending).
    hold: Vec<Duration>,
    /// `GET /approvals?status=pending&limit=500` with all n pending.
    page: Vec<Duration>,
    /// The first `snapshot` event of `GET /approvals/events`.
    snapshot: Vec<Duration>,
    /// Each walk through every pending request, page by page with the cursor.
    walk: Vec<Duration>,
    /// Each page of those walks.
    walk_pages: Vec<Duration>,
    /// Each page read while draining.
    drain_pages: Vec<Duration>,
    /// Each approve or deny → 200.
    decide: Vec<Duration>,
    drain_wall: Duration,
    /// Each page of `GET /approvals/history?limit=500`.
    history: Vec<Duration>,
    /// From the last decision until every approved run had succeeded.
    runs_wait: Duration,
}

async fn get_json(client: &reqwest::Client, url: &str) -> Value {
    let res = client.get(url).send().await.expect("GET");
    let status = res.status();
    let body: Value = res.json().await.expect("JSON body");
    assert_eq!(status, 200, "{url}: {body}");
    body
}

/// The first `snapshot` event of the inbox's stream: its approvals and
/// `next_cursor`.
async fn first_snapshot(client: &reqwest::Client, base: &str) -> Value {
    let mut res = client
        .get(format!("{base}/approvals/events"))
        .send()
        .await
        .expect("events");
    assert_eq!(res.status(), 200);
    let mut text = String::new();
    loop {
        let chunk = res.chunk().await.expect("chunk").expect("the stream ended first");
        text.push_str(&String::from_utf8_lossy(&chunk));
        if let Some(at) = text.find("event: snapshot\n") {
            let rest = &text[at..];
            if let Some(end) = rest.find("\n\n") {
                let data: String = rest[..end]
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect();
                return serde_json::from_str(&data).expect("snapshot JSON");
            }
        }
    }
}

/// Reads every pending request, oldest first, page by page with the
/// cursor; checks each of the n calls was reached once, in order.
async fn walk(client: &reqwest::Client, base: &str, n: usize, pages: &mut Vec<Duration>) {
    let mut cursor = String::new();
    let mut next_n = 0;
    loop {
        let start = Instant::now();
        let page = get_json(
            client,
            &format!("{base}/approvals?status=pending&limit={PAGE}{cursor}"),
        )
        .await;
        pages.push(start.elapsed());
        for a in page["approvals"].as_array().expect("approvals") {
            assert_eq!(a["arguments"]["n"], next_n, "oldest first, each once");
            next_n += 1;
        }
        match page["next_cursor"].as_str() {
            Some(c) => cursor = format!("&cursor={c}"),
            None => break,
        }
    }
    assert_eq!(next_n, n, "every pending request reached");
}

async fn scale(root: &Path, database_url: &str, n: usize) -> Scale {
    let server = start(root, database_url, n as u64 + 1).await;
    let (base, client) = (&server.base, &server.client);
    let mut f = Scale {
        n,
        hold: Vec::with_capacity(n),
        page: Vec::new(),
        snapshot: Vec::new(),
        walk: Vec::new(),
        walk_pages: Vec::new(),
        drain_pages: Vec::new(),
        decide: Vec::with_capacity(n),
        drain_wall: Duration::ZERO,
        history: Vec::new(),
        runs_wait: Duration::ZERO,
    };
    hold(client, base, &mut f).await;
    read_inbox(client, base, &mut f).await;
    let approved = drain(client, base, &mut f).await;
    f.runs_wait = await_runs(client, base, &approved).await;
    page_history(client, base, &mut f).await;
    server.stop().await;
    f
}

/// Holds `f.n` calls, each with its own arguments.
async fn hold(client: &reqwest::Client, base: &str, f: &mut Scale) {
    for i in 0..f.n {
        let start = Instant::now();
        let res = client
            .post(format!("{base}/tools/bench_ask_n/invoke"))
            .json(&json!({"arguments": {"n": i}}))
            .send()
            .await
            .expect("invoke");
        let status = res.status();
        let body: Value = res.json().await.expect("202 body");
        f.hold.push(start.elapsed());
        assert_eq!(status, 202, "call {i}: {body}");
    }
}

/// With every call pending: the first page, the inbox's snapshot, and
/// walks through all of it.
async fn read_inbox(client: &reqwest::Client, base: &str, f: &mut Scale) {
    let n = f.n;
    let first = n.min(PAGE);
    for _ in 0..30 {
        let start = Instant::now();
        let page = get_json(client, &format!("{base}/approvals?status=pending&limit={PAGE}")).await;
        f.page.push(start.elapsed());
        assert_eq!(page["approvals"].as_array().map(Vec::len), Some(first));
    }
    for _ in 0..10 {
        let start = Instant::now();
        let snapshot = first_snapshot(client, base).await;
        f.snapshot.push(start.elapsed());
        let shown = snapshot["approvals"].as_array().map(Vec::len);
        assert_eq!(shown, Some(first), "the inbox's snapshot");
        assert_eq!(
            snapshot["next_cursor"].is_string(),
            n > PAGE,
            "where the rest start"
        );
    }
    for _ in 0..3 {
        let start = Instant::now();
        walk(client, base, n, &mut f.walk_pages).await;
        f.walk.push(start.elapsed());
    }
}

/// Drains as a person would: the oldest page, each decided (approve and
/// deny in turn), the next. The runs approved.
async fn drain(client: &reqwest::Client, base: &str, f: &mut Scale) -> Vec<String> {
    let mut approved = Vec::new();
    let mut decided = 0;
    let drain = Instant::now();
    loop {
        let start = Instant::now();
        let page = get_json(client, &format!("{base}/approvals?status=pending&limit={PAGE}")).await;
        f.drain_pages.push(start.elapsed());
        let page = page["approvals"].as_array().expect("approvals").clone();
        if page.is_empty() {
            break;
        }
        for a in page {
            let approve = decided % 2 == 0;
            let id = a["id"].as_str().expect("approval id");
            f.decide.push(decide(client, base, id, approve).await);
            if approve {
                approved.push(a["run_id"].as_str().expect("run id").to_owned());
            }
            decided += 1;
        }
    }
    f.drain_wall = drain.elapsed();
    assert_eq!(decided, f.n, "every held call decided");
    approved
}

/// Approves or denies one request; how long its 200 took.
async fn decide(client: &reqwest::Client, base: &str, id: &str, approve: bool) -> Duration {
    let start = Instant::now();
    let res = client
        .post(format!(
            "{base}/approvals/{id}/{}",
            if approve { "approve" } else { "deny" }
        ))
        .json(&json!({"scope": "once"}))
        .send()
        .await
        .expect("decide");
    let status = res.status();
    let body: Value = res.json().await.expect("approval");
    let took = start.elapsed();
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["status"],
        if approve { "approved" } else { "denied" },
        "{body}"
    );
    took
}

/// Until every approved run has succeeded; how long that took.
async fn await_runs(client: &reqwest::Client, base: &str, approved: &[String]) -> Duration {
    let start = Instant::now();
    for run in approved {
        let run = get_json(client, &format!("{base}/runs/{run}?wait=60")).await;
        assert_eq!(run["status"], "succeeded", "{run}");
    }
    start.elapsed()
}

/// Every decision, through `GET /approvals/history` page by page.
async fn page_history(client: &reqwest::Client, base: &str, f: &mut Scale) {
    let mut cursor: Option<String> = None;
    let mut seen = 0;
    loop {
        let url = match &cursor {
            Some(c) => format!("{base}/approvals/history?limit={PAGE}&cursor={c}"),
            None => format!("{base}/approvals/history?limit={PAGE}"),
        };
        let start = Instant::now();
        let page = get_json(client, &url).await;
        f.history.push(start.elapsed());
        seen += page["decisions"].as_array().map_or(0, Vec::len);
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen, f.n, "every decision in the history");
}

fn report_scale(backend: &str, mut base: Scale, mut big: Scale) {
    use stats::{line, ms, quantile};
    println!();
    println!(
        "== {backend}: the inbox at scale, {} pending against {} (baseline, same run) ==",
        big.n, base.n
    );
    let tenth = |v: &[Duration]| v.len().div_ceil(10);
    for f in [&mut base, &mut big] {
        let n = f.n;
        let k = tenth(&f.hold);
        let mut early = f.hold[..k].to_vec();
        let mut late = f.hold[f.hold.len() - k..].to_vec();
        println!("-- {n} pending --");
        println!("  invoke → 202 (held)                 {}", line(&mut f.hold));
        println!(
            "    first 10% median {}   last 10% median {}   (the cost as the inbox fills)",
            ms(quantile(&mut early, 0.5)),
            ms(quantile(&mut late, 0.5))
        );
        println!(
            "  GET /approvals?status=pending&limit={PAGE}  {}",
            line(&mut f.page)
        );
        println!("  /approvals/events first snapshot    {}", line(&mut f.snapshot));
        println!("  walk: every request, {PAGE} a page    {}", line(&mut f.walk));
        println!(
            "  walk: each page (cursor)            {}",
            line(&mut f.walk_pages)
        );
        println!(
            "  drain: page read                    {}",
            line(&mut f.drain_pages)
        );
        println!("  drain: approve/deny → 200           {}", line(&mut f.decide));
        println!(
            "  drain: all {n} decided in {:.2} s = {:.0} decisions/s (page reads included)",
            f.drain_wall.as_secs_f64(),
            n as f64 / f.drain_wall.as_secs_f64()
        );
        println!(
            "  GET /approvals/history page ({PAGE})   {}",
            line(&mut f.history)
        );
        println!(
            "  approved runs all succeeded {} after the last decision",
            ms(f.runs_wait)
        );
    }
    let r = |a: &mut Vec<Duration>, b: &mut Vec<Duration>| {
        quantile(b, 0.5).as_secs_f64() / quantile(a, 0.5).as_secs_f64().max(1e-9)
    };
    println!(
        "  growth {}→{} (median ratio): hold ×{:.2}, page ×{:.2}, snapshot ×{:.2}, decide ×{:.2}, history page ×{:.2}",
        base.n,
        big.n,
        r(&mut base.hold, &mut big.hold),
        r(&mut base.page, &mut big.page),
        r(&mut base.snapshot, &mut big.snapshot),
        r(&mut base.decide, &mut big.decide),
        r(&mut base.history, &mut big.history),
    );
}

/// A fresh schema of the PostgreSQL database at `base`, the URL that
/// selects it, and a connection to drop it with.
async fn pg_schema(base: &str) -> (String, String, sqlx::PgConnection) {
    let schema = format!("skilld_bench_{}", uuid::Uuid::now_v7().simple());
    let mut admin = sqlx::PgConnection::connect(base).await.expect("PostgreSQL");
    sqlx::query(sqlx::AssertSqlSafe(format!("create schema {schema}")))
        .execute(&mut admin)
        .await
        .expect("create schema");
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}options=-c%20search_path%3D{schema}");
    (schema, url, admin)
}

async fn drop_schema(schema: &str, mut admin: sqlx::PgConnection) {
    sqlx::query(sqlx::AssertSqlSafe(format!("drop schema {schema} cascade")))
        .execute(&mut admin)
        .await
        .expect("drop schema");
}

fn main() {
    let started = Instant::now();
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("skills");
    write_skill(&root);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");

    let sqlite = format!("sqlite://{}", tmp.path().join("bench.db").display());
    let mut goals = report("SQLite", rt.block_on(bench(&root, &sqlite)));

    let big = if stats::quick() { 1_000 } else { 10_000 };
    let sqlite_at = |name: &str| format!("sqlite://{}", tmp.path().join(name).display());
    let base = rt.block_on(scale(&root, &sqlite_at("scale-base.db"), 100));
    let scaled = rt.block_on(scale(&root, &sqlite_at("scale.db"), big));
    report_scale("SQLite", base, scaled);

    match std::env::var("SKILLD_BENCH_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => {
            let (figures, base, scaled) = rt.block_on(async {
                let (schema, at, admin) = pg_schema(&url).await;
                let figures = bench(&root, &at).await;
                drop_schema(&schema, admin).await;
                let (schema, at, admin) = pg_schema(&url).await;
                let base = scale(&root, &at, 100).await;
                drop_schema(&schema, admin).await;
                let (schema, at, admin) = pg_schema(&url).await;
                let scaled = scale(&root, &at, big).await;
                drop_schema(&schema, admin).await;
                (figures, base, scaled)
            });
            report("PostgreSQL", figures);
            report_scale("PostgreSQL", base, scaled);
        }
        _ => println!("\n(PostgreSQL skipped: SKILLD_BENCH_POSTGRES_URL is not set)"),
    }

    println!();
    println!("== summary: goals (SQLite) ==");
    for (label, got) in goals.drain(..) {
        println!(
            "  {label:<56} goal <= {}   got {:>10}   {}",
            ms(GOAL),
            ms(got),
            if got <= GOAL { "met" } else { "NOT MET" }
        );
    }
    println!(
        "every answer was checked (202, 200, succeeded); bench took {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
