//! Persistence: the audit log of runs and what goes with it, one small
//! trait per aggregate ([`RunLog`], [`Pruning`], [`Holds`], [`Approvals`],
//! [`SessionStore`], [`SkillApprovals`], [`Outbox`], [`IndexCache`], [`EgressDecisions`]), each in the file of what
//! it stores, each implemented by a SQLite and a PostgreSQL backend beside
//! its SQL (`docs/design.md` §5).
//!
//! Consumers only ever see the traits they use and [`StoreError`]; which
//! database sits behind them is decided once, by the URL scheme, in
//! [`connect`], which hands out [`Stores`]. Decisions that must happen
//! exactly once (a run starts, a run finishes) are single conditional
//! `update … where status … returning` statements, never a read followed
//! by a write, so two instances sharing one PostgreSQL cannot both win.

/// The most grants listed at once, as a literal for the stores' SQL.
macro_rules! max_grants_listed {
    () => {
        "1000"
    };
}

mod approvals;
mod deferred;
mod egress;
mod index_cache;
mod notifications;
mod postgres;
mod runs;
mod sessions;
mod sqlite;
mod views;

pub use approvals::{
    Approval, ApprovalFilter, ApprovalPage, ApprovalStatus, Approvals, Decide, DecidedApproval,
    DecisionFilter, DecisionPage, Grant, GrantDecision, Holds, NewApproval, PolicyFacts, SameCall, Scope,
    Undecidable,
};
pub use deferred::{Deferred, MAX_COMMIT_INTERVAL};
pub use egress::{
    EgressDecide, EgressDecisions, EgressGrant, EgressRequest, EgressUndecidable, NewEgressRequest,
};
pub use index_cache::{CachedIndex, IndexCache};
pub use notifications::{Attempt, NewNotification, Notification, NotificationStatus, Outbox};
pub use postgres::PgStore;
pub use runs::{
    NewRun, PruneExport, Pruning, Run, RunEnd, RunFilter, RunLog, RunPage, RunPosition, RunStatus,
};
pub use sessions::{
    EXPIRE_BATCH, MAX_SESSIONS_LISTED, MAX_SKILL_APPROVALS_LISTED, NewSession, SessionRecord, SessionStore,
    SkillApproval, SkillApprovals, TooMany,
};
pub use sqlite::{
    Serving, SqliteStore, announce_serving, claim_for_serving, files_of as sqlite_files, who_serves,
};
pub use views::StoreReader;

use chrono::{DateTime, Utc};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

/// What can go wrong at the store boundary: narrow on purpose, mapped once to
/// HTTP elsewhere (404, 409, 400, 503, 500). Messages of `Unavailable` and
/// `Other` are for the log, never for a client.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// No `what` (a run, an approval, a grant) has this id.
    #[error("{what} {id} not found")]
    NotFound { what: &'static str, id: Uuid },
    #[error("conflict: {0}")]
    Conflict(String),
    /// The `cursor` was not one this store handed out: the caller's mistake.
    #[error("invalid cursor")]
    InvalidCursor,
    /// An input no backend can keep (a NUL byte in a text): the caller's
    /// mistake, said in words a client may see.
    #[error("invalid input: {0}")]
    Invalid(String),
    /// The database cannot be reached or is not answering; callers fail
    /// closed, because nothing may run that could not be recorded.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    #[error("store error: {0}")]
    Other(String),
}

/// One database, as the aggregates it keeps, each handed out as its own
/// trait: a consumer takes the one or two it uses, so its type says what
/// it may touch. All are the same backend (one pool), so what spans tables
/// (a held call's run and its request, a decision and its grant, a batch
/// of retention) stays one transaction inside it.
#[derive(Clone)]
pub struct Stores {
    /// The run log; through [`Deferred`] when opened with [`connect`].
    pub runs: Arc<dyn RunLog>,
    /// What retention deletes of the run log.
    pub pruning: Arc<dyn Pruning>,
    /// What the call pipeline holds for a person.
    pub holds: Arc<dyn Holds>,
    /// Approval requests and standing grants.
    pub approvals: Arc<dyn Approvals>,
    /// Sessions.
    pub sessions: Arc<dyn SessionStore>,
    /// Skills allowed "always" into sessions.
    pub skill_approvals: Arc<dyn SkillApprovals>,
    /// Webhook deliveries.
    pub outbox: Arc<dyn Outbox>,
    /// The registries' indexes.
    pub index_cache: Arc<dyn IndexCache>,
    /// Held destinations and egress grants.
    pub egress: Arc<dyn EgressDecisions>,
}

impl Stores {
    /// Every aggregate `backend` keeps, each as its trait.
    fn of<B>(backend: B) -> Self
    where
        B: RunLog
            + Pruning
            + Holds
            + Approvals
            + SessionStore
            + SkillApprovals
            + Outbox
            + IndexCache
            + EgressDecisions,
    {
        let backend = Arc::new(backend);
        Self {
            runs: backend.clone(),
            pruning: backend.clone(),
            holds: backend.clone(),
            approvals: backend.clone(),
            sessions: backend.clone(),
            skill_approvals: backend.clone(),
            outbox: backend.clone(),
            index_cache: backend.clone(),
            egress: backend,
        }
    }
}

/// Opens the store a URL names and applies its migrations: `sqlite://path`
/// (or `sqlite:path`) → [`SqliteStore`], `postgres://` or `postgresql://` →
/// [`PgStore`]; runs' ends commit after the answer, without waiting.
pub async fn connect(url: &str) -> Result<Stores, StoreError> {
    connect_with(url, Duration::ZERO).await
}

/// [`connect`], with runs' ends committed after the answer (see
/// [`Deferred`]), gathered for `commit_interval` before each commit.
pub async fn connect_with(url: &str, commit_interval: Duration) -> Result<Stores, StoreError> {
    let stores = open(url).await?;
    Ok(Stores {
        runs: Deferred::wrap(stores.runs.clone(), commit_interval),
        ..stores
    })
}

/// The store a URL names, writing every end before it answers.
pub async fn open(url: &str) -> Result<Stores, StoreError> {
    if url.starts_with("sqlite:") {
        Ok(Stores::of(SqliteStore::connect(url).await?))
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Stores::of(PgStore::connect(url).await?))
    } else {
        // Only the scheme is echoed: the rest of a URL may hold a password.
        let scheme = url.split_once(':').map_or("(none)", |(scheme, _)| scheme);
        Err(StoreError::Other(format!(
            "unsupported store URL scheme '{scheme}': expected sqlite://, postgres:// or postgresql://"
        )))
    }
}

/// `value` as every backend can keep it: PostgreSQL's jsonb cannot hold
/// the code point U+0000, so a NUL in any string or key of a tool's
/// result (a tool may print anything) becomes U+FFFD, on both backends.
pub fn keepable(value: Value) -> Value {
    match value {
        Value::String(s) => Value::String(keepable_text(s)),
        Value::Array(items) => Value::Array(items.into_iter().map(keepable).collect()),
        Value::Object(fields) => Value::Object(
            fields
                .into_iter()
                .map(|(k, v)| (keepable_text(k), keepable(v)))
                .collect(),
        ),
        other => other,
    }
}

/// A text as [`keepable`] keeps it.
pub fn keepable_text(s: String) -> String {
    if s.contains('\0') {
        s.replace('\0', "\u{fffd}")
    } else {
        s
    }
}

/// Whether a name filter holds a NUL, which no recorded name does.
fn names_hold_nul(names: &[&Option<String>]) -> bool {
    names.iter().copied().flatten().any(|name| name.contains('\0'))
}

/// The page size actually used: never zero, never unbounded.
fn page_size(limit: u32) -> u32 {
    limit.clamp(1, RunFilter::MAX_LIMIT)
}

/// A position in a keyset order: the last row of a page, by its time (a
/// run's creation, a request's decision or creation) and id. The order
/// (newest or oldest first) is the listing's; the cursor only says where
/// its last page ended.
///
/// Rendered as `<time in µs since the epoch>_<id>`, which is URL-safe
/// as it stands and means the same to both backends.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Cursor {
    at: DateTime<Utc>,
    id: Uuid,
}

impl Cursor {
    fn after(run: &Run) -> Self {
        Self {
            at: run.created_at,
            id: run.id,
        }
    }

    fn after_decision(d: &DecidedApproval) -> Self {
        Self {
            at: d.approval.decided_at.unwrap_or(d.approval.created_at),
            id: d.approval.id,
        }
    }

    fn after_request(a: &Approval) -> Self {
        Self {
            at: a.created_at,
            id: a.id,
        }
    }

    fn encode(self) -> String {
        format!("{}_{}", self.at.timestamp_micros(), self.id.as_simple())
    }

    fn decode(s: &str) -> Result<Self, StoreError> {
        let (micros, id) = s.split_once('_').ok_or(StoreError::InvalidCursor)?;
        let micros: i64 = micros.parse().map_err(|_| StoreError::InvalidCursor)?;
        let at = DateTime::from_timestamp_micros(micros).ok_or(StoreError::InvalidCursor)?;
        let id = Uuid::try_parse(id).map_err(|_| StoreError::InvalidCursor)?;
        Ok(Self { at, id })
    }
}

/// Cuts up to `limit + 1` rows to a page: the extra row only says that
/// there is a next page, which starts after the page's last row.
fn next_cursor<T>(rows: &mut Vec<T>, limit: u32, cursor: impl Fn(&T) -> Cursor) -> Option<String> {
    let limit = limit as usize;
    if rows.len() <= limit {
        return None;
    }
    rows.truncate(limit);
    rows.last().map(|row| cursor(row).encode())
}

/// Builds a page of runs (see [`next_cursor`]).
fn into_page(mut runs: Vec<Run>, limit: u32) -> RunPage {
    let next_cursor = next_cursor(&mut runs, limit, Cursor::after);
    RunPage { runs, next_cursor }
}

/// Builds a page of decisions (see [`next_cursor`]).
fn into_decision_page(mut decisions: Vec<DecidedApproval>, limit: u32) -> DecisionPage {
    let next_cursor = next_cursor(&mut decisions, limit, Cursor::after_decision);
    DecisionPage {
        decisions,
        next_cursor,
    }
}

/// Builds a page of approval requests (see [`next_cursor`]).
fn into_approval_page(mut approvals: Vec<Approval>, limit: u32) -> ApprovalPage {
    let next_cursor = next_cursor(&mut approvals, limit, Cursor::after_request);
    ApprovalPage {
        approvals,
        next_cursor,
    }
}

/// The size of each store's channel of run changes. A receiver that falls
/// this far behind is told it lagged and re-reads.
const CHANGES_CAPACITY: usize = 1024;

/// The most approval requests listed at once.
pub const MAX_APPROVALS: u32 = 500;

/// The most grants [`Approvals::list_grants`] gives at once.
pub const MAX_GRANTS_LISTED: usize = 1000;

#[cfg(test)]
mod grants_listed {
    #[test]
    fn the_sql_limit_is_the_constant() {
        assert_eq!(max_grants_listed!(), super::MAX_GRANTS_LISTED.to_string());
    }
}

/// The one mapping from sqlx's errors to ours. Which database errors mean
/// "cannot reach or use the database right now" depends on the backend
/// that raised them.
impl From<sqlx::Error> for StoreError {
    fn from(err: sqlx::Error) -> Self {
        match err {
            sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::WorkerCrashed => StoreError::Unavailable(err.to_string()),
            sqlx::Error::Database(ref db) if db.is_unique_violation() => {
                StoreError::Conflict(db.message().to_owned())
            }
            sqlx::Error::Database(ref db) if transient(db.as_ref()) => {
                StoreError::Unavailable(err.to_string())
            }
            other => StoreError::Other(other.to_string()),
        }
    }
}

fn transient(db: &dyn sqlx::error::DatabaseError) -> bool {
    if db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>().is_some() {
        postgres::transient(db)
    } else {
        sqlite::transient(db)
    }
}

/// Migration failures: unreachable is still `Unavailable`, anything else
/// (a changed or broken migration) is `Other`.
impl From<sqlx::migrate::MigrateError> for StoreError {
    fn from(err: sqlx::migrate::MigrateError) -> Self {
        match err {
            sqlx::migrate::MigrateError::Execute(err)
            | sqlx::migrate::MigrateError::ExecuteMigration(err, _) => err.into(),
            other => StoreError::Other(format!("migration failed: {other}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_spellings_round_trip_and_match_serde() {
        for status in RunStatus::ALL {
            assert_eq!(RunStatus::parse(status.as_str()), Some(status));
            assert_eq!(
                serde_json::to_value(status).unwrap(),
                Value::from(status.as_str())
            );
        }
        assert_eq!(RunStatus::parse("Running"), None);
        let live: Vec<_> = RunStatus::ALL.into_iter().filter(|s| !s.is_final()).collect();
        assert_eq!(
            live,
            [RunStatus::PendingApproval, RunStatus::Queued, RunStatus::Running]
        );
    }

    #[test]
    fn cursor_round_trips_and_rejects_garbage() {
        let cursor = Cursor {
            at: DateTime::from_timestamp_micros(1_732_249_260_123_456).unwrap(),
            id: Uuid::now_v7(),
        };
        assert_eq!(Cursor::decode(&cursor.encode()).unwrap(), cursor);
        for bad in [
            "",
            "x",
            "12_",
            "_0193",
            "abc_0193",
            &format!("1_{}x", cursor.id.as_simple()),
        ] {
            assert!(
                matches!(Cursor::decode(bad), Err(StoreError::InvalidCursor)),
                "{bad}"
            );
        }
    }

    #[test]
    fn page_size_is_bounded() {
        assert_eq!(page_size(0), 1);
        assert_eq!(page_size(20), 20);
        assert_eq!(page_size(100_000), 500);
    }
}
