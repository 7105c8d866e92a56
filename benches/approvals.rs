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
//! PostgreSQL runs when `SKILLD_TEST_POSTGRES_URL` is set, in a fresh
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
}

struct Figures {
    healthz: Vec<Duration>,
    held: Vec<Duration>,
    approved: Vec<Duration>,
    finished: Vec<Duration>,
}

async fn bench(root: &Path, database_url: &str) -> Figures {
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
        store,
        RunSettings {
            data_dir: data.path().to_path_buf(),
            workspace: data.path().to_path_buf(),
            ..RunSettings::default()
        },
    ));
    let state = AppState {
        installer: skilld::install::Installer::shared(&catalog, &invoker),
        catalog,
        invoker,
        auth: Arc::new(Auth::open_with_secret(SECRET).expect("secret")),
        limits: skilld::http::ServerLimits::default(),
        web: Arc::new(skilld::http::guard::WebGuard {
            loopback_only: true,
            allowed_origins: Vec::new(),
        }),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(skilld::serve(
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
    let _ = stop.send(());
    server.await.expect("server task").expect("server");
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

    match std::env::var("SKILLD_TEST_POSTGRES_URL") {
        Ok(base) if !base.is_empty() => {
            let figures = rt.block_on(async {
                let schema = format!("skilld_bench_{}", uuid::Uuid::now_v7().simple());
                let mut admin = sqlx::PgConnection::connect(&base).await.expect("PostgreSQL");
                sqlx::query(sqlx::AssertSqlSafe(format!("create schema {schema}")))
                    .execute(&mut admin)
                    .await
                    .expect("create schema");
                let sep = if base.contains('?') { '&' } else { '?' };
                let url = format!("{base}{sep}options=-c%20search_path%3D{schema}");
                let figures = bench(&root, &url).await;
                sqlx::query(sqlx::AssertSqlSafe(format!("drop schema {schema} cascade")))
                    .execute(&mut admin)
                    .await
                    .expect("drop schema");
                figures
            });
            report("PostgreSQL", figures);
        }
        _ => println!("\n(PostgreSQL skipped: SKILLD_TEST_POSTGRES_URL is not set)"),
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
