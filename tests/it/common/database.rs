//! The run log of test servers: SQLite in a data directory, or a fresh
//! PostgreSQL schema when the environment asks for one.

use skilld::store::Stores;
use sqlx::Connection;
use std::path::Path;
use uuid::Uuid;

/// The run log of a test server: SQLite in its data directory, or, with
/// `SKILLD_TEST_STORE=postgres` (CI runs the attack suite a second time
/// so), a fresh schema of `SKILLD_TEST_POSTGRES_URL`'s database.
pub async fn test_store(data: &Path) -> Stores {
    let url = match test_postgres() {
        Some(base) => fresh_schema(base),
        None => format!("sqlite://{}", data.join("skilld.db").display()),
    };
    skilld::store::connect(&url).await.unwrap()
}

/// The PostgreSQL database test servers use instead of SQLite, when
/// `SKILLD_TEST_STORE=postgres` asks for it.
pub fn test_postgres() -> Option<&'static str> {
    static BASE: std::sync::LazyLock<Option<String>> = std::sync::LazyLock::new(|| {
        let wanted = std::env::var("SKILLD_TEST_STORE").is_ok_and(|s| s == "postgres");
        wanted.then(|| {
            std::env::var("SKILLD_TEST_POSTGRES_URL")
                .ok()
                .filter(|u| !u.is_empty())
                .expect("SKILLD_TEST_STORE=postgres needs SKILLD_TEST_POSTGRES_URL")
        })
    });
    BASE.as_deref()
}

/// A URL of `base` whose connections use a schema of their own, made now
/// (blocking: it runs on a thread of its own). Schemas of test processes
/// that are gone are dropped first.
pub fn fresh_schema(base: &str) -> String {
    static MADE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let schema = format!("skilld_run_{}_{n}", std::process::id());
    let (base_owned, made) = (base.to_owned(), schema.clone());
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let mut admin = sqlx::PgConnection::connect(&base_owned).await.unwrap();
            if n == 0 {
                drop_schemas_of_gone_processes(&mut admin).await;
            }
            sqlx::query(sqlx::AssertSqlSafe(format!("create schema {made}")))
                .execute(&mut admin)
                .await
                .unwrap();
        });
    })
    .join()
    .unwrap();
    let sep = if base.contains('?') { '&' } else { '?' };
    format!("{base}{sep}options=-c%20search_path%3D{schema}")
}

async fn drop_schemas_of_gone_processes(admin: &mut sqlx::PgConnection) {
    let schemas: Vec<(String,)> =
        sqlx::query_as("select nspname::text from pg_namespace where nspname like 'skilld_run_%'")
            .fetch_all(&mut *admin)
            .await
            .unwrap();
    for (schema,) in schemas {
        let pid = schema.split('_').nth(2).unwrap_or_default();
        if !Path::new("/proc").join(pid).exists() {
            let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                "drop schema if exists {schema} cascade"
            )))
            .execute(&mut *admin)
            .await;
        }
    }
}

/// Runs `body` with the URL of a fresh schema in the test PostgreSQL, dropped
/// afterwards even when `body` panics, so tests running at the same time (in
/// this binary or another checkout's) never see each other's rows.
pub async fn on_postgres<F, Fut>(body: F)
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let Some(base) = postgres_url() else { return };
    let schema = format!("skilld_test_{}", Uuid::now_v7().simple());
    let mut admin = sqlx::PgConnection::connect(&base)
        .await
        .unwrap_or_else(|err| panic!("cannot connect to SKILLD_TEST_POSTGRES_URL: {err}"));
    sqlx::query(sqlx::AssertSqlSafe(format!("create schema {schema}")))
        .execute(&mut admin)
        .await
        .unwrap();

    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}options=-c%20search_path%3D{schema}");
    // On its own task, so that a failed assertion comes back as a JoinError
    // and the schema is still dropped.
    let outcome = tokio::spawn(body(url)).await;

    sqlx::query(sqlx::AssertSqlSafe(format!("drop schema {schema} cascade")))
        .execute(&mut admin)
        .await
        .unwrap();
    if let Err(err) = outcome {
        std::panic::resume_unwind(err.into_panic());
    }
}

/// `SKILLD_TEST_POSTGRES_URL`, which CI always sets. Unset outside CI, the
/// PostgreSQL half of the suite is skipped with a notice; unset in CI, it
/// fails, so the backend can never go untested there by accident.
pub fn postgres_url() -> Option<String> {
    match std::env::var("SKILLD_TEST_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var_os("CI").is_some() => panic!(
            "SKILLD_TEST_POSTGRES_URL is not set but CI is: the PostgreSQL store tests must run in CI \
             (e.g. SKILLD_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test)"
        ),
        _ => {
            eprintln!(
                "skipping a PostgreSQL store test: SKILLD_TEST_POSTGRES_URL is not set \
                 (e.g. postgres://postgres@127.0.0.1:5432/test)"
            );
            None
        }
    }
}
