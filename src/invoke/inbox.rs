//! The approvers' inbox as a stream: every pending request, then each
//! change to a request as the store announces it (from any instance on
//! PostgreSQL), so an open inbox needs no polling.

use super::{InvokeError, Invoker};
use crate::store::{Approval, ApprovalStatus, MAX_APPROVALS, Store, StoreError};
use futures_util::stream::{self, BoxStream, StreamExt};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use tokio::sync::broadcast::error::RecvError;
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
    Changed(Box<Approval>),
}

/// How many quiet runs (see [`Inbox`]) are remembered, so that an ordinary
/// run costs the inbox one look-up, not one per status change.
const QUIET_MEMORY: usize = 4096;

impl Invoker {
    /// The inbox's events until the subscriber goes (or the longest
    /// stream time passes; a client reconnects). Counts as an open stream.
    pub fn inbox_events(&self) -> Result<BoxStream<'static, InboxEvent>, InvokeError> {
        let permit = self.stream_permit()?;
        Ok(self.bounded(watch_inbox(self.store.clone()), permit))
    }
}

/// The inbox's events for as long as they are read: a task feeds them and
/// stops when the stream is dropped (or the store fails: the stream ends).
pub fn watch_inbox(store: Arc<dyn Store>) -> BoxStream<'static, InboxEvent> {
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(feed(store, tx));
    stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|e| (e, rx)) }).boxed()
}

/// The task behind [`Invoker::inbox_events`]: a snapshot, then changes,
/// and a fresh snapshot after a lag. Ends when the subscriber goes or the
/// store fails (the client reconnects and starts from a snapshot).
async fn feed(store: Arc<dyn Store>, tx: mpsc::Sender<InboxEvent>) {
    // Subscribed before the snapshot is read: nothing falls between.
    let mut changes = store.changes();
    loop {
        let mut inbox = match Inbox::read(store.as_ref()).await {
            Ok(inbox) => inbox,
            Err(e) => return tracing::warn!(error = %e, "cannot read the inbox"),
        };
        if tx.send(InboxEvent::Snapshot(inbox.snapshot())).await.is_err() {
            return;
        }
        loop {
            let run = tokio::select! {
                () = tx.closed() => return,
                change = changes.recv() => match change {
                    Ok(run) => run,
                    Err(RecvError::Lagged(_)) => break,
                    Err(RecvError::Closed) => return,
                },
            };
            match inbox.change(store.as_ref(), run).await {
                Ok(Some(approval)) => {
                    if tx.send(InboxEvent::Changed(Box::new(approval))).await.is_err() {
                        return;
                    }
                }
                Ok(None) => {}
                Err(e) => return tracing::warn!(error = %e, "cannot follow the inbox"),
            }
        }
    }
}

/// What one subscriber has been told: the pending requests as last sent,
/// by run (so a change is sent once, however often it is announced), and
/// the quiet runs, whose changes are no news to an inbox: never held, or
/// their request's end already sent.
struct Inbox {
    pending: HashMap<Uuid, Approval>,
    quiet: HashSet<Uuid>,
}

impl Inbox {
    async fn read(store: &dyn Store) -> Result<Self, StoreError> {
        let pending = store
            .list_approvals(Some(ApprovalStatus::Pending), MAX_APPROVALS)
            .await?;
        Ok(Self {
            pending: pending.into_iter().map(|a| (a.run_id, a)).collect(),
            quiet: HashSet::new(),
        })
    }

    fn snapshot(&self) -> Vec<Approval> {
        let mut all: Vec<Approval> = self.pending.values().cloned().collect();
        all.sort_by_key(|a| (a.created_at, a.id));
        all
    }

    /// The request of changed run `run`, if there is news of it.
    async fn change(&mut self, store: &dyn Store, run: Uuid) -> Result<Option<Approval>, StoreError> {
        if self.quiet.contains(&run) {
            return Ok(None);
        }
        let approval = store.approval_of_run(run).await?;
        match approval {
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
