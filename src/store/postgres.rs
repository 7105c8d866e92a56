//! The store on PostgreSQL: what several skilld instances share
//! (`docs/design.md` §6). One [`PgStore`] keeps every aggregate, each
//! implemented beside its SQL (`runs`, `approvals`, `sessions`,
//! `notifications`, `index_cache`, `egress`). Every state change is a
//! conditional `update … returning` (in a transaction where two tables
//! change together), so of two instances racing for the same run or
//! request exactly one gets it. A trigger notifies `skilld_runs` of every
//! run status change; each store listens, so a caller waiting on one
//! instance wakes when another decides or finishes its run.

mod approvals;
mod egress;
mod index_cache;
mod notifications;
mod runs;
mod sessions;

use crate::store::StoreError;
use sqlx::error::DatabaseError;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPool, PgPoolOptions, PgRow};
use sqlx::{Postgres, Row};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast;
use uuid::Uuid;

/// The channel the `runs` trigger notifies (see migrations/postgres/0002).
const CHANNEL: &str = "skilld_runs";

/// Enough for the concurrent runs and readers of one instance, while several
/// instances stay well under PostgreSQL's default of 100 connections.
const MAX_CONNECTIONS: u32 = 16;
/// How long a request waits for a connection before the store counts as
/// unavailable (and the invocation fails closed).
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// The PostgreSQL backend of every store trait.
#[derive(Debug, Clone)]
pub struct PgStore {
    pool: PgPool,
    changes: broadcast::Sender<Uuid>,
    /// Stops the listener when the last clone of the store goes.
    _listener: Arc<ListenerTask>,
}

/// The task that forwards notifications into `changes`.
#[derive(Debug)]
struct ListenerTask(tokio::task::JoinHandle<()>);

impl Drop for ListenerTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl PgStore {
    /// Connects to a `postgres://` or `postgresql://` URL (libpq's query
    /// parameters, such as `options=-c search_path=…`, apply) and applies the
    /// migrations in `migrations/postgres`.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        // sqlx's parse errors never include the password; pass them on.
        let options = PgConnectOptions::from_str(url)
            .map_err(|err| StoreError::Other(format!("invalid PostgreSQL URL: {err}")))?;
        let pool = PgPoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            // No ping before each statement: it was a second round trip
            // per statement, and a connection the server has closed (a
            // restart, a failover, an idle timeout) is found out and
            // replaced without it (`cut_postgres_connections_are_replaced`).
            .test_before_acquire(false)
            .connect_with(options)
            .await?;
        sqlx::migrate!("./migrations/postgres").run(&pool).await?;
        let changes = broadcast::channel(super::CHANGES_CAPACITY).0;
        let mut listener = PgListener::connect_with(&pool).await?;
        listener.listen(CHANNEL).await?;
        let task = tokio::spawn(forward_notifications(listener, changes.clone()));
        Ok(Self {
            pool,
            changes,
            _listener: Arc::new(ListenerTask(task)),
        })
    }

    fn changed(&self, id: Uuid) {
        let _ = self.changes.send(id);
    }
}

/// Forwards every notified run id. `PgListener::recv` reconnects after a
/// lost connection, but notifications sent meanwhile are gone; waiters also
/// re-read on a timer, so a lost one only delays them.
async fn forward_notifications(mut listener: PgListener, changes: broadcast::Sender<Uuid>) {
    loop {
        match listener.recv().await {
            Ok(note) => {
                if let Ok(id) = Uuid::try_parse(note.payload()) {
                    let _ = changes.send(id);
                }
            }
            Err(err) => {
                tracing::warn!(%err, "lost the PostgreSQL notification channel; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

fn get<'r, T>(row: &'r PgRow, column: &str) -> Result<T, StoreError>
where
    T: sqlx::Decode<'r, Postgres> + sqlx::Type<Postgres>,
{
    row.try_get(column).map_err(StoreError::from)
}

/// SQLSTATEs that mean the server cannot serve us right now rather than that
/// the statement was wrong: connection exceptions (08), insufficient
/// resources (53, e.g. too many connections), operator intervention (57P,
/// shutting down or starting up), and a read-only server (25006, a standby
/// after a failover).
pub(super) fn transient(err: &dyn DatabaseError) -> bool {
    err.code().is_some_and(|code| {
        code.starts_with("08") || code.starts_with("53") || code.starts_with("57P") || code == "25006"
    })
}
