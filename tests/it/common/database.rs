//! The run log of test servers: SQLite in a data directory, or a fresh
//! PostgreSQL schema when the environment asks for one.

use skilld::store::Store;
use std::path::Path;
use std::sync::Arc;

/// The run log of a test server: SQLite in its data directory, or, with
/// `SKILLD_TEST_STORE=postgres` (CI runs the attack suite a second time
/// so), a fresh schema of `SKILLD_TEST_POSTGRES_URL`'s database.
pub async fn test_store(data: &Path) -> Arc<dyn Store> {
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
    use sqlx::Connection;
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
