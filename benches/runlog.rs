//! Run log benchmark: `GET /runs` at 10 million rows, and what retention
//! costs the calls running while it prunes.
//!
//! Each backend's run log is filled with `SKILLD_BENCH_RUNS` runs (default
//! 10,000,000) by SQL (a recursive CTE on SQLite, `generate_series` on
//! PostgreSQL), spread evenly over the last 120 days, over 100 tools of 20
//! skills; 2% failed, a few timed out, denied or still queued. A filled log
//! is kept (`target/bench-runlog/`, the database `skilld_bench_runlog`)
//! and used again by the next run while it holds as many runs.
//!
//! Then, for each filter of `GET /runs` (none, tool, skill, a rare and a
//! common status, tool and status together): `list_runs` of the first page
//! and of a deep page (a cursor 100 days back), median and p99 of many
//! calls, against a baseline measured in the same run: `get_run` of one
//! id, the primary key's lookup. The plan of each query is printed
//! (`explain query plan`; `explain analyze` on PostgreSQL).
//!
//! Retention's cost while calls run: the run log's writes of a call
//! (`insert_run` as running, then `finish_run`), as the hot path makes
//! them, at c=1 and c=4, without pruning (the baseline), then with
//! retention pruning the runs past 90 days in the background (batches of
//! 500 with an export file; with the default 100 ms pause, and with none).
//!
//! PostgreSQL runs when `SKILLD_BENCH_POSTGRES_URL` names a server; the
//! bench uses (and creates) its database `skilld_bench_runlog` there.
//! Run with `nice -n 10 cargo bench --bench runlog`. Nothing asserts on
//! time.

#![expect(
    clippy::expect_used,
    reason = "a benchmark that cannot measure should stop and say why"
)]

use chrono::{DateTime, Utc};
use serde_json::json;
use skilld::retention::ExportFile;
use skilld::store::{NewRun, PruneExport, RunFilter, RunPosition, RunStatus, Stores};
use sqlx::{Connection, Row};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use uuid::Uuid;

/// Calls per listing figure, after a few to warm up.
const CALLS: usize = 200;
const WARMUP: usize = 10;
/// The run log's writes per retention figure.
const WRITES: usize = 2000;
/// Days the fill spans, and the age retention prunes past.
const SPAN_DAYS: i64 = 120;
const KEEP_DAYS: i64 = 90;
/// Rows per fill statement.
const FILL_CHUNK: u64 = 1_000_000;
const DATABASE: &str = "skilld_bench_runlog";

#[derive(Clone, Copy, PartialEq)]
enum Backend {
    Sqlite,
    Postgres,
}

/// A `GET /runs` filter the bench times, by name.
struct Case {
    name: &'static str,
    filter: RunFilter,
}

fn cases() -> Vec<Case> {
    let with = |tool: Option<&str>, skill: Option<&str>, status: Option<RunStatus>| RunFilter {
        tool: tool.map(str::to_owned),
        skill: skill.map(str::to_owned),
        status,
        ..RunFilter::default()
    };
    vec![
        Case {
            name: "none",
            filter: with(None, None, None),
        },
        Case {
            name: "tool",
            filter: with(Some("tool_7"), None, None),
        },
        Case {
            name: "skill",
            filter: with(None, Some("skill_3"), None),
        },
        Case {
            name: "status=failed (2%)",
            filter: with(None, None, Some(RunStatus::Failed)),
        },
        Case {
            name: "status=succeeded",
            filter: with(None, None, Some(RunStatus::Succeeded)),
        },
        Case {
            name: "tool+status=failed",
            filter: with(Some("tool_7"), None, Some(RunStatus::Failed)),
        },
    ]
}

fn main() {
    let runs: u64 = std::env::var("SKILLD_BENCH_RUNS")
        .ok()
        .and_then(|n| n.replace('_', "").parse().ok())
        .unwrap_or(10_000_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("runtime");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-runlog");
    std::fs::create_dir_all(&dir).expect("bench dir");
    let sqlite = format!("sqlite://{}", dir.join(format!("runlog-{runs}.db")).display());
    rt.block_on(bench(Backend::Sqlite, &sqlite, runs, &dir));
    match std::env::var("SKILLD_BENCH_POSTGRES_URL") {
        Ok(base) if !base.is_empty() => {
            let url = rt.block_on(bench_database(&base));
            rt.block_on(bench(Backend::Postgres, &url, runs, &dir));
        }
        _ => println!("\n(PostgreSQL skipped: set SKILLD_BENCH_POSTGRES_URL)"),
    }
}

async fn bench(backend: Backend, url: &str, runs: u64, dir: &Path) {
    let name = match backend {
        Backend::Sqlite => "sqlite",
        Backend::Postgres => "postgres",
    };
    println!("\n==== {name}: {runs} runs ====");
    let store = filled(backend, url, runs).await;
    listings(backend, url, &store).await;
    let export = dir.join(format!("pruned-{name}.jsonl"));
    let _ = std::fs::remove_file(&export);
    retention_cost(&store, &export).await;
}

// ---- the fill ----------------------------------------------------------------

/// The store at `url`, holding at least 99% of `runs` runs (a log used
/// before, pruned a little by its retention figures) or filled afresh.
async fn filled(backend: Backend, url: &str, runs: u64) -> Stores {
    let store = skilld::store::connect(url).await.expect("store");
    let have = count(url).await;
    if have >= runs - runs / 100 && have <= runs + runs / 100 {
        println!("using the run log filled before: {have} runs");
        return store;
    }
    drop(store);
    let started = Instant::now();
    match backend {
        Backend::Sqlite => fill_sqlite(url, runs).await,
        Backend::Postgres => fill_postgres(url, runs).await,
    }
    println!("filled {runs} runs in {:.1} s", started.elapsed().as_secs_f64());
    skilld::store::connect(url).await.expect("store")
}

async fn count(url: &str) -> u64 {
    let n: i64 = if url.starts_with("sqlite:") {
        let mut conn = sqlx::SqliteConnection::connect(url).await.expect("sqlite");
        sqlx::query_scalar("select count(*) from runs")
            .fetch_one(&mut conn)
            .await
            .expect("count")
    } else {
        let mut conn = sqlx::PgConnection::connect(url).await.expect("postgres");
        sqlx::query_scalar("select count(*) from runs")
            .fetch_one(&mut conn)
            .await
            .expect("count")
    };
    u64::try_from(n).unwrap_or(0)
}

/// The fill's first instant and its step between runs, in µs.
fn span(runs: u64) -> (i64, i64) {
    let span = SPAN_DAYS * 86_400 * 1_000_000;
    let start = Utc::now().timestamp_micros() - span;
    (start, span / i64::try_from(runs.max(1)).unwrap_or(i64::MAX))
}

/// What a run of number `j` is: oldest first, ids rising with time.
const SQLITE_FILL: &str = "with recursive seq(j) as (select ?1 union all select j + 1 from seq where j < ?2), \
     timed(j, at) as (select j, strftime('%Y-%m-%dT%H:%M:%S', (?3 + j * ?4) / 1000000, 'unixepoch') \
       || printf('.%06dZ', (?3 + j * ?4) % 1000000) from seq), \
     shaped(j, at, status) as (select j, at, case when j % 100000 = 3 then 'queued' \
       when j % 10000 = 2 then 'denied' when j % 1000 = 1 then 'timed_out' \
       when j % 50 = 0 then 'failed' else 'succeeded' end from timed) \
     insert into runs (id, skill, tool, skill_hash, arguments, argv, cwd, status, created_at, started_at, \
       finished_at, result, instance) \
     select printf('0193%04x-%04x-7000-8000-%012x', j / 65536, j % 65536, j), 'skill_' || ((j % 100) / 5), \
       'tool_' || (j % 100), 'sha256:bench', '{}', '[\"true\"]', '/srv', status, at, \
       iif(status = 'denied', null, at), iif(status = 'queued', null, at), \
       iif(status in ('queued', 'denied'), null, \
         '{\"success\":true,\"exit_code\":0,\"output\":\"ok\\n\",\"duration_ms\":3}'), 'bench' \
     from shaped where true";

async fn fill_sqlite(url: &str, runs: u64) {
    let mut conn = sqlx::SqliteConnection::connect(url).await.expect("sqlite");
    sqlx::query("delete from notifications; delete from approvals; delete from runs")
        .execute(&mut conn)
        .await
        .expect("empty");
    // The listing indexes are built once after the rows, by sorting,
    // rather than grown row by row.
    let indexes: Vec<(String, String)> = sqlx::query_as(
        "select name, sql from sqlite_master where type = 'index' and tbl_name = 'runs' and sql is not null",
    )
    .fetch_all(&mut conn)
    .await
    .expect("indexes");
    for (name, _) in &indexes {
        sqlx::query(sqlx::AssertSqlSafe(format!("drop index {name}")))
            .execute(&mut conn)
            .await
            .expect("drop index");
    }
    let (start, step) = span(runs);
    for lo in (0..runs).step_by(usize::try_from(FILL_CHUNK).unwrap_or(usize::MAX)) {
        let hi = (lo + FILL_CHUNK).min(runs) - 1;
        sqlx::query(SQLITE_FILL)
            .bind(i64::try_from(lo).unwrap_or(0))
            .bind(i64::try_from(hi).unwrap_or(0))
            .bind(start)
            .bind(step)
            .execute(&mut conn)
            .await
            .expect("fill");
        eprint!(".");
    }
    for (_, sql) in &indexes {
        sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
            .execute(&mut conn)
            .await
            .expect("index");
    }
    sqlx::query("pragma wal_checkpoint(truncate)")
        .execute(&mut conn)
        .await
        .expect("checkpoint");
    eprintln!();
}

const POSTGRES_FILL: &str = "insert into runs (id, skill, tool, skill_hash, arguments, argv, cwd, status, \
       created_at, started_at, finished_at, result, instance) \
     select ('0193' || lpad(to_hex(j / 65536), 4, '0') || '-' || lpad(to_hex(j % 65536), 4, '0') \
       || '-7000-8000-' || lpad(to_hex(j), 12, '0'))::uuid, 'skill_' || ((j % 100) / 5), 'tool_' || (j % 100), \
       'sha256:bench', '{}', '[\"true\"]', '/srv', status, at, \
       case when status = 'denied' then null else at end, case when status = 'queued' then null else at end, \
       case when status in ('queued', 'denied') then null else \
         '{\"success\":true,\"exit_code\":0,\"output\":\"ok\\n\",\"duration_ms\":3}'::jsonb end, 'bench' \
     from (select j, to_timestamp(0) + ($3 + j * $4) * interval '1 microsecond' as at, \
       case when j % 100000 = 3 then 'queued' when j % 10000 = 2 then 'denied' \
       when j % 1000 = 1 then 'timed_out' when j % 50 = 0 then 'failed' else 'succeeded' end as status \
       from generate_series($1::bigint, $2::bigint) as j) as shaped";

async fn fill_postgres(url: &str, runs: u64) {
    let mut conn = sqlx::PgConnection::connect(url).await.expect("postgres");
    sqlx::query("truncate runs, approvals, notifications")
        .execute(&mut conn)
        .await
        .expect("empty");
    sqlx::query("set synchronous_commit = off")
        .execute(&mut conn)
        .await
        .expect("set");
    let indexes: Vec<(String, String)> = sqlx::query_as(
        "select indexname::text, indexdef from pg_indexes where tablename = 'runs' \
         and schemaname = current_schema() and indexname <> 'runs_pkey'",
    )
    .fetch_all(&mut conn)
    .await
    .expect("indexes");
    for (name, _) in &indexes {
        sqlx::query(sqlx::AssertSqlSafe(format!("drop index {name}")))
            .execute(&mut conn)
            .await
            .expect("drop index");
    }
    let (start, step) = span(runs);
    for lo in (0..runs).step_by(usize::try_from(FILL_CHUNK).unwrap_or(usize::MAX)) {
        let hi = (lo + FILL_CHUNK).min(runs) - 1;
        sqlx::query(POSTGRES_FILL)
            .bind(i64::try_from(lo).unwrap_or(0))
            .bind(i64::try_from(hi).unwrap_or(0))
            .bind(start)
            .bind(step)
            .execute(&mut conn)
            .await
            .expect("fill");
        eprint!(".");
    }
    sqlx::query("set maintenance_work_mem = '512MB'")
        .execute(&mut conn)
        .await
        .expect("set");
    for (_, sql) in &indexes {
        sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
            .execute(&mut conn)
            .await
            .expect("index");
    }
    sqlx::query("vacuum analyze runs")
        .execute(&mut conn)
        .await
        .expect("analyze");
    eprintln!();
}

/// The bench's own database on the server `base` names, made if missing.
async fn bench_database(base: &str) -> String {
    let mut admin = sqlx::PgConnection::connect(base).await.expect("PostgreSQL");
    let exists: bool = sqlx::query_scalar("select exists (select 1 from pg_database where datname = $1)")
        .bind(DATABASE)
        .fetch_one(&mut admin)
        .await
        .expect("pg_database");
    if !exists {
        sqlx::query(sqlx::AssertSqlSafe(format!("create database {DATABASE}")))
            .execute(&mut admin)
            .await
            .expect("create database");
    }
    let (before_query, query) = base.split_once('?').map_or((base, ""), |(b, q)| (b, q));
    let (server, _) = before_query.rsplit_once('/').expect("a database in the URL");
    let query = if query.is_empty() {
        String::new()
    } else {
        format!("?{query}")
    };
    format!("{server}/{DATABASE}{query}")
}

// ---- listings ------------------------------------------------------------------

async fn listings(backend: Backend, url: &str, store: &Stores) {
    let first = store.runs.list_runs(RunFilter::default()).await.expect("list");
    let some_id = first.runs.first().map(|run| run.id).expect("a run");
    let baseline = timed(CALLS, || async {
        store.runs.get_run(some_id).await.expect("get_run");
    })
    .await;
    println!("\nbaseline  get_run by id: {}", stats(baseline));
    let deep_at = Utc::now() - chrono::Duration::days(100);
    let deep = format!("{}_{}", deep_at.timestamp_micros(), "f".repeat(32));
    println!(
        "{:<22} {:>30} {:>30}",
        "GET /runs filter", "first page (50)", "deep page (100 days back)"
    );
    let mut plans = Vec::new();
    for case in cases() {
        let at_first = time_list(store, &case.filter).await;
        let deep_filter = RunFilter {
            cursor: Some(deep.clone()),
            ..case.filter.clone()
        };
        let at_deep = time_list(store, &deep_filter).await;
        println!("{:<22} {:>30} {:>30}", case.name, stats(at_first), stats(at_deep));
        for (page, cursor) in [("first", None), ("deep", Some(deep_at))] {
            let sql = listing_sql(backend, &case.filter, cursor);
            plans.push((
                format!("{} / {page}", case.name),
                explain(url, backend, &sql).await,
            ));
        }
    }
    println!("\nquery plans:");
    for (name, plan) in plans {
        println!("-- {name}\n{plan}");
    }
}

async fn time_list(store: &Stores, filter: &RunFilter) -> Vec<Duration> {
    timed(CALLS, || async {
        let page = store.runs.list_runs(filter.clone()).await.expect("list_runs");
        assert!(page.runs.len() <= 50);
    })
    .await
}

/// The query `list_runs` makes for `filter`, with its values inline.
fn listing_sql(backend: Backend, filter: &RunFilter, cursor: Option<DateTime<Utc>>) -> String {
    let mut sql = String::from("select * from runs where true");
    for (column, value) in [("tool", &filter.tool), ("skill", &filter.skill)] {
        if let Some(value) = value {
            sql.push_str(&format!(" and {column} = '{value}'"));
        }
    }
    if let Some(status) = filter.status {
        sql.push_str(&format!(" and status = '{status}'"));
    }
    if let Some(at) = cursor {
        let max_id = "ffffffff-ffff-ffff-ffff-ffffffffffff";
        match backend {
            Backend::Sqlite => sql.push_str(&format!(
                " and (created_at, id) < ('{}', '{max_id}')",
                at.format("%Y-%m-%dT%H:%M:%S%.6fZ")
            )),
            Backend::Postgres => sql.push_str(&format!(
                " and (created_at, id) < ('{}'::timestamptz, '{max_id}'::uuid)",
                at.to_rfc3339()
            )),
        }
    }
    sql.push_str(" order by created_at desc, id desc limit 51");
    sql
}

async fn explain(url: &str, backend: Backend, sql: &str) -> String {
    let lines: Vec<String> = match backend {
        Backend::Sqlite => {
            let mut conn = sqlx::SqliteConnection::connect(url).await.expect("sqlite");
            let rows = sqlx::query(sqlx::AssertSqlSafe(format!("explain query plan {sql}")))
                .fetch_all(&mut conn)
                .await
                .expect("explain");
            rows.iter()
                .map(|row| format!("   {}", row.get::<String, _>("detail")))
                .collect()
        }
        Backend::Postgres => {
            let mut conn = sqlx::PgConnection::connect(url).await.expect("postgres");
            let rows = sqlx::query(sqlx::AssertSqlSafe(format!("explain (analyze, buffers) {sql}")))
                .fetch_all(&mut conn)
                .await
                .expect("explain");
            rows.iter()
                .map(|row| format!("   {}", row.get::<String, _>(0)))
                .collect()
        }
    };
    lines.join("\n")
}

// ---- retention's cost ------------------------------------------------------------

async fn retention_cost(store: &Stores, export: &Path) {
    println!("\nthe run log's writes of one call (insert_run + finish_run), while retention prunes:");
    for concurrency in [1, 4] {
        let baseline = writes(store, concurrency).await;
        println!("c={concurrency} baseline, no pruning:      {}", stats(baseline));
        for pause in [Duration::from_millis(100), Duration::ZERO] {
            let pruner = Pruner::start(store.clone(), export.to_path_buf(), pause);
            let during = writes(store, concurrency).await;
            let (pruned, batches) = pruner.stop().await;
            println!(
                "c={concurrency} pruning, pause {:>3} ms:    {}   ({pruned} runs pruned; a batch: {})",
                pause.as_millis(),
                stats(during),
                stats(batches)
            );
        }
    }
    let lines = std::fs::read_to_string(export).map_or(0, |text| text.lines().count());
    println!("export file: {lines} lines, {}", export.display());
}

/// `WRITES` calls' run log writes, `concurrency` at a time: the latency of
/// each call's two writes.
async fn writes(store: &Stores, concurrency: usize) -> Vec<Duration> {
    let tasks: Vec<_> = (0..concurrency)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut took = Vec::new();
                for _ in 0..WRITES / concurrency {
                    let started = Instant::now();
                    one_call(&store).await;
                    took.push(started.elapsed());
                }
                took
            })
        })
        .collect();
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.expect("writer task"));
    }
    all
}

async fn one_call(store: &Stores) {
    let now = Utc::now();
    let id = Uuid::now_v7();
    store
        .runs
        .insert_run(NewRun {
            id,
            skill: "skill_1".to_owned(),
            tool: "tool_5".to_owned(),
            skill_hash: "sha256:bench".to_owned(),
            arguments: json!({}),
            argv: vec!["true".to_owned()],
            cwd: "/srv".to_owned(),
            status: RunStatus::Running,
            requested_by: None,
            approval_id: None,
            created_at: now,
            started_at: Some(now),
            instance: Some("bench".to_owned()),
            mode: None,
            request_id: None,
            skill_version: None,
            idempotency_key: None,
            session: None,
        })
        .await
        .expect("insert_run");
    let envelope = json!({"run_id": id, "success": true, "exit_code": 0, "output": "", "duration_ms": 1});
    store
        .runs
        .finish_run(id, RunStatus::Succeeded, Some(envelope), Utc::now())
        .await
        .expect("finish_run")
        .expect("finished");
}

/// Retention's batches in the background, as `skilld::retention::prune`
/// makes them, each batch timed.
struct Pruner {
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<(u64, Vec<Duration>)>,
}

impl Pruner {
    fn start(store: Stores, export: PathBuf, pause: Duration) -> Self {
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let before = RunPosition::created_before(Utc::now() - chrono::Duration::days(KEEP_DAYS));
        let task = tokio::spawn(async move {
            let export = ExportFile::new(export);
            let (mut pruned, mut batches) = (0, Vec::new());
            while !*stopped.borrow() {
                let started = Instant::now();
                let n = store
                    .pruning
                    .prune_runs(before, 500, Some(&export as &dyn PruneExport))
                    .await
                    .expect("prune_runs");
                batches.push(started.elapsed());
                pruned += n;
                if n < 500 {
                    break;
                }
                tokio::time::sleep(pause).await;
            }
            (pruned, batches)
        });
        Self { stop, task }
    }

    async fn stop(self) -> (u64, Vec<Duration>) {
        let _ = self.stop.send(true);
        self.task.await.expect("pruner")
    }
}

// ---- figures ---------------------------------------------------------------------

async fn timed<F, Fut>(n: usize, mut call: F) -> Vec<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for _ in 0..WARMUP {
        call().await;
    }
    let mut took = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        call().await;
        took.push(started.elapsed());
    }
    took
}

fn stats(mut took: Vec<Duration>) -> String {
    if took.is_empty() {
        return "-".to_owned();
    }
    took.sort();
    let at = |q: f64| took[((took.len() - 1) as f64 * q).round() as usize];
    format!(
        "median {:.3} ms, p99 {:.3} ms",
        at(0.5).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3
    )
}
