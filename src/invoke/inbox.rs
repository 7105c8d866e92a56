//! The approvers' inbox as a stream: every pending request, then each
//! change to a request as the store announces it (from any instance on
//! PostgreSQL), so an open inbox needs no polling.
//!
//! One feed per process turns run changes into request changes, for every
//! subscriber at once (the open inbox pages, the notifier): a run costs one
//! look-up however many listen, and none while nobody does.

use super::{InvokeError, Invoker};
use crate::store::{Approval, ApprovalStatus, MAX_APPROVALS, Store, StoreError};
use futures_util::stream::{self, BoxStream, StreamExt};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::sync::mpsc;
use uuid::Uuid;

/// What an inbox is told.
#[derive(Debug, Clone, PartialEq)]
pub enum InboxEvent {
    /// Every pending request, oldest first: the inbox as it is. Sent first,
    /// and again whenever changes may have been missed.
    Snapshot(Vec<Approval>),
    /// A request made, or changed (decided, expired, withdrawn, its caller
    /// gone); one no longer pending leaves the inbox.
    Changed(Arc<Approval>),
}

/// How many quiet runs (see [`Requests`]) are remembered, so that an
/// ordinary run costs one look-up, not one per status change.
const QUIET_MEMORY: usize = 4096;
/// Changes buffered for a slow subscriber before it must start over.
const FEED_CAPACITY: usize = 256;

/// What the feed tells its subscribers.
#[derive(Debug, Clone)]
enum News {
    Changed(Arc<Approval>),
    /// The feed itself missed changes: read the inbox afresh.
    Resync,
}

/// The process's one feed of request changes; its task stops with it.
pub(super) struct InboxFeed {
    news: broadcast::Sender<News>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for InboxFeed {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl InboxFeed {
    fn start(store: Arc<dyn Store>) -> Self {
        let news = broadcast::channel(FEED_CAPACITY).0;
        let task = tokio::spawn(follow(store, news.clone()));
        Self { news, task }
    }
}

impl Invoker {
    /// The inbox's events until the subscriber goes (or the longest
    /// stream time passes; a client reconnects), or the server stops
    /// taking calls (else it would hold the graceful shutdown for as long
    /// as the page stays open). Counts as an open stream of `holder`'s
    /// (see [`crate::share::holder`]).
    pub fn inbox_events(&self, holder: &str) -> Result<BoxStream<'static, InboxEvent>, InvokeError> {
        let permit = self.stream_permit(holder)?;
        let runs = self.runs.clone();
        let events = self
            .watch_inbox()
            .take_until(async move { runs.closing().await })
            .boxed();
        Ok(self.bounded(events, permit))
    }

    /// The inbox's events for as long as they are read: a snapshot, then
    /// each change, and a fresh snapshot after changes were missed. Ends
    /// if the store fails (read it again to start over).
    pub fn watch_inbox(&self) -> BoxStream<'static, InboxEvent> {
        let feed = self.inbox.get_or_init(|| InboxFeed::start(self.store.clone()));
        // Subscribed before the snapshot is read: nothing falls between.
        let news = feed.news.subscribe();
        let (tx, rx) = mpsc::channel(16);
        tokio::spawn(relay(self.store.clone(), news, tx));
        stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|e| (e, rx)) }).boxed()
    }
}

/// One subscriber's task: a snapshot, then the feed's news, and a fresh
/// snapshot after a lag. Ends when the subscriber goes or the store fails.
async fn relay(store: Arc<dyn Store>, mut news: broadcast::Receiver<News>, tx: mpsc::Sender<InboxEvent>) {
    loop {
        let pending = match store
            .list_approvals(Some(ApprovalStatus::Pending), MAX_APPROVALS)
            .await
        {
            Ok(pending) => pending,
            Err(e) => return tracing::warn!(error = %e, "cannot read the inbox"),
        };
        if tx.send(InboxEvent::Snapshot(pending)).await.is_err() {
            return;
        }
        loop {
            let item = tokio::select! {
                () = tx.closed() => return,
                item = news.recv() => item,
            };
            match item {
                Ok(News::Changed(approval)) => {
                    if tx.send(InboxEvent::Changed(approval)).await.is_err() {
                        return;
                    }
                }
                Ok(News::Resync) | Err(RecvError::Lagged(_)) => break,
                Err(RecvError::Closed) => return,
            }
        }
    }
}

/// The feed's task: each run change that is news of a request, told to
/// every subscriber. While nobody listens nothing is looked up.
async fn follow(store: Arc<dyn Store>, news: broadcast::Sender<News>) {
    let mut changes = store.changes();
    let mut requests = Requests::default();
    loop {
        let run = match changes.recv().await {
            Ok(run) => run,
            Err(RecvError::Lagged(_)) => {
                requests = Requests::default();
                let _ = news.send(News::Resync);
                continue;
            }
            Err(RecvError::Closed) => return,
        };
        if news.receiver_count() == 0 {
            requests = Requests::default();
            continue;
        }
        match requests.change(store.as_ref(), run).await {
            Ok(Some(approval)) => {
                let _ = news.send(News::Changed(Arc::new(approval)));
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(error = %e, "cannot follow the inbox");
                requests = Requests::default();
                let _ = news.send(News::Resync);
            }
        }
    }
}

/// What the feed has told: the pending requests as last told, by run (so
/// a change is told once, however often it is announced), and the quiet
/// runs, whose changes are no news: never held, or their request's end
/// already told.
#[derive(Default)]
struct Requests {
    pending: HashMap<Uuid, Approval>,
    quiet: HashSet<Uuid>,
}

impl Requests {
    /// The request of changed run `run`, if there is news of it.
    async fn change(&mut self, store: &dyn Store, run: Uuid) -> Result<Option<Approval>, StoreError> {
        if self.quiet.contains(&run) {
            return Ok(None);
        }
        match store.approval_of_run(run).await? {
            Some(a) if a.status == ApprovalStatus::Pending => {
                if self.pending.get(&run) == Some(&a) {
                    return Ok(None);
                }
                self.pending.insert(run, a.clone());
                Ok(Some(a))
            }
            // Decided, or never held (a run is held, or not, from the
            // moment it is recorded): nothing more to tell of this run.
            other => {
                self.pending.remove(&run);
                if self.quiet.len() >= QUIET_MEMORY {
                    self.quiet.clear();
                }
                self.quiet.insert(run);
                Ok(other)
            }
        }
    }
}
