//! The connections a server holds, bounded before any request is read:
//! how many at once, and how long one may go with no request in flight
//! (silent since it was accepted, or idle between requests).
//!
//! A connection costs a descriptor and a task before it has said anything,
//! so a client that opens thousands and sends nothing (from anywhere, or
//! from a `network: true` tool) would otherwise run the server out of
//! descriptors. hyper's own header timeout never fires for a connection
//! that sends nothing: its HTTP/1-or-2 detection waits for the first bytes
//! without a timer, and HTTP/2 has no idle timeout at all.
//!
//! At the cap, a new connection replaces the one that has idled longest
//! (silent since accepted, or between requests, for at least a moment:
//! the newest must have had time to write): none of those is doing
//! anything, and the newcomer most likely is, so a flood of silent
//! connections cannot keep `/healthz` or anyone else out. Only when every
//! connection has a request in flight does the newcomer wait (in the
//! listen backlog), rather than be refused: those requests end on their
//! own bounds, and a client that waits a moment is better served than one
//! that is reset.

use axum::Router;
use axum::body::{Body, HttpBody};
use axum::extract::{ConnectInfo, Request};
use hyper::body::{Frame, Incoming, SizeHint};
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// What clients may hold of a server at once, and for how long.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerLimits {
    /// Connections open at once (see the module's note for what happens
    /// at the cap).
    pub max_connections: usize,
    /// A connection with no request in flight for this long is closed: one
    /// that has sent no complete request head since it was accepted, or a
    /// kept-alive one idle between requests (HTTP/1.1 or 2). Also hyper's
    /// bound on an HTTP/1.1 head once it has begun.
    pub header_timeout: Duration,
    /// MCP sessions open at once (`/mcp`, handshake-era clients).
    pub max_mcp_sessions: usize,
    /// MCP sessions one caller may hold at once: its fair share.
    pub max_mcp_sessions_per_caller: usize,
}

impl Default for ServerLimits {
    fn default() -> Self {
        Self {
            max_connections: 1024,
            header_timeout: Duration::from_secs(10),
            max_mcp_sessions: crate::http::mcp::MAX_SESSIONS,
            max_mcp_sessions_per_caller: 100,
        }
    }
}

/// Raises this process's soft limit of open descriptors to its hard
/// limit, where it is lower, and returns the limit now in force (`None`
/// when it cannot be read). Children do not inherit it: each run gets its
/// own (`runner::Limits::open_files`).
pub fn raise_open_files_limit() -> Option<u64> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    if soft >= hard {
        return Some(soft);
    }
    match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
        Ok(()) => Some(hard),
        Err(e) => {
            tracing::warn!(soft, hard, error = %e, "cannot raise the open files limit");
            Some(soft)
        }
    }
}

/// The open connections, and room for more.
pub(in crate::http) struct Connections {
    limits: ServerLimits,
    open: Mutex<HashMap<u64, Arc<Activity>>>,
    next_id: std::sync::atomic::AtomicU64,
    /// Rung when a connection ends.
    freed: Notify,
}

/// What one connection is doing, as its requests come and go.
struct Activity {
    id: u64,
    state: Mutex<State>,
    /// Cancelled to close the connection.
    close: CancellationToken,
}

struct State {
    in_flight: usize,
    /// Since when no request has been in flight.
    idle_since: Instant,
}

/// A connection's place among the open ones, given back when dropped.
pub(in crate::http) struct Slot {
    activity: Arc<Activity>,
    owner: Arc<Connections>,
}

/// A request in flight on a connection, until dropped with its response.
struct Busy(Arc<Activity>);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Connections {
    pub(in crate::http) fn new(limits: ServerLimits) -> Arc<Self> {
        Arc::new(Self {
            limits,
            open: Mutex::default(),
            next_id: std::sync::atomic::AtomicU64::new(0),
            freed: Notify::new(),
        })
    }

    /// A place for a connection just accepted: at once below the cap; at
    /// it, the place of the connection idle the longest (and not young),
    /// which is closed; else once a connection ends or grows old enough.
    pub(in crate::http) async fn admit(self: &Arc<Self>) -> Slot {
        loop {
            let freed = self.freed.notified();
            if let Some(slot) = self.try_admit() {
                return slot;
            }
            // A young connection may be replaced once it has had its time.
            tokio::select! {
                () = freed => {}
                () = tokio::time::sleep(YOUNG) => {}
            }
        }
    }

    fn try_admit(self: &Arc<Self>) -> Option<Slot> {
        let mut open = lock(&self.open);
        if open.len() >= self.limits.max_connections.max(1) {
            let victim = longest_idle(&open)?;
            if let Some(evicted) = open.remove(&victim) {
                tracing::debug!("connection limit reached; closing the connection idle the longest");
                evicted.close.cancel();
            }
        }
        let id = self.next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let activity = Arc::new(Activity {
            id,
            state: Mutex::new(State {
                in_flight: 0,
                idle_since: Instant::now(),
            }),
            close: CancellationToken::new(),
        });
        open.insert(id, activity.clone());
        Some(Slot {
            activity,
            owner: self.clone(),
        })
    }
}

/// How long a connection accepted (or done with a request) is left to
/// send one before it may be replaced: under a flood of silent ones, the
/// newest would otherwise be replaced before its client could write, and
/// `/healthz` be reset (seen once in CI, 1 call of 70).
const YOUNG: Duration = Duration::from_millis(100);

/// The connection with no request in flight that has been so the longest,
/// and for at least [`YOUNG`].
fn longest_idle(open: &HashMap<u64, Arc<Activity>>) -> Option<u64> {
    open.values()
        .filter_map(|a| {
            let state = lock(&a.state);
            (state.in_flight == 0 && state.idle_since.elapsed() >= YOUNG).then_some((state.idle_since, a.id))
        })
        .min()
        .map(|(_, id)| id)
}

impl Drop for Slot {
    fn drop(&mut self) {
        lock(&self.owner.open).remove(&self.activity.id);
        self.owner.freed.notify_one();
    }
}

impl Slot {
    /// Serves `connection` until it ends, is replaced at the cap, or has
    /// had no request in flight for longer than the header timeout; then
    /// the connection is dropped, which closes it.
    pub(in crate::http) async fn serve<F: std::future::Future>(self, connection: F) {
        let bound = self.owner.limits.header_timeout;
        tokio::select! {
            _ = connection => {}
            () = self.activity.close.cancelled() => {}
            () = self.activity.idled_out(bound) => {}
        }
    }

    /// The service for this connection's requests: `app`, told the peer's
    /// address, with each request counted in flight until its response
    /// has been sent (or dropped).
    pub(in crate::http) fn service(&self, app: Router, peer: SocketAddr) -> ConnService {
        ConnService {
            app,
            peer,
            activity: self.activity.clone(),
        }
    }
}

/// One connection's service (see [`Slot::service`]).
pub(in crate::http) struct ConnService {
    app: Router,
    peer: SocketAddr,
    activity: Arc<Activity>,
}

impl hyper::service::Service<Request<Incoming>> for ConnService {
    type Response = axum::response::Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn std::future::Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn call(&self, req: Request<Incoming>) -> Self::Future {
        let busy = self.activity.begin();
        let mut req = req.map(Body::new);
        req.extensions_mut().insert(ConnectInfo(self.peer));
        let app = self.app.clone();
        Box::pin(async move {
            let res = tower::ServiceExt::oneshot(app, req).await?;
            Ok(res.map(|body| Body::new(Counted { body, _busy: busy })))
        })
    }
}

impl Activity {
    fn begin(self: &Arc<Self>) -> Busy {
        lock(&self.state).in_flight += 1;
        Busy(self.clone())
    }

    /// Completes once the connection has had no request in flight for
    /// longer than `bound`.
    async fn idled_out(&self, bound: Duration) {
        loop {
            let idle_since = {
                let state = lock(&self.state);
                (state.in_flight == 0).then_some(state.idle_since)
            };
            match idle_since {
                // Busy: look again later; the request has bounds of its own.
                None => tokio::time::sleep(bound).await,
                Some(since) if since.elapsed() >= bound => return,
                Some(since) => tokio::time::sleep_until(since + bound).await,
            }
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let mut state = lock(&self.0.state);
        state.in_flight = state.in_flight.saturating_sub(1);
        if state.in_flight == 0 {
            state.idle_since = Instant::now();
        }
    }
}

/// A response body that keeps its request counted in flight until hyper
/// has sent it (or dropped it).
struct Counted {
    body: Body,
    _busy: Busy,
}

impl HttpBody for Counted {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
