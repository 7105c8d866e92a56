//! The approvers' inbox as a stream: every pending request, then each
//! change to a request as the store announces it (from any instance on
//! PostgreSQL), so an open inbox needs no polling.
//!
//! One feed per process turns run changes into request changes, for every
//! subscriber at once (the open inbox pages, the notifier): a run costs one
//! look-up however many listen, and none while nobody does.

use super::{Approver, InvokeError};
use crate::store::{
    Approval, ApprovalFilter, ApprovalPage, ApprovalStatus, Approvals, MAX_APPROVALS, StoreError,
};
use futures_util::stream::{self, BoxStream, StreamExt};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::sync::mpsc;
use uuid::Uuid;

/// What an inbox is told.
#[derive(Debug, Clone, PartialEq)]
pub enum InboxEvent {
    /// The first page of pending requests, oldest first, and where the
    /// next page starts (read it with [`Approvals::list_approvals`], as
    /// `GET /approvals?status=pending&cursor=` does): the inbox as it is.
    /// Sent first, and again whenever changes may have been missed.
    Snapshot(ApprovalPage),
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
    /// The feed of the run changes `changes` tells, read as requests
    /// from `approvals`.
    fn start(changes: broadcast::Receiver<Uuid>, approvals: Arc<dyn Approvals>) -> Self {
        let news = broadcast::channel(FEED_CAPACITY).0;
        let task = tokio::spawn(follow(changes, approvals, news.clone()));
        Self { news, task }
    }
}

impl Approver {
    /// The inbox's events until the subscriber goes (or the longest
    /// stream time passes; a client reconnects), or the server stops
    /// taking calls (else it would hold the graceful shutdown for as long
    /// as the page stays open). Counts as an open stream of `holder`'s
    /// (see [`crate::share::holder`]).
    pub fn inbox_events(&self, holder: &str) -> Result<BoxStream<'static, InboxEvent>, InvokeError> {
        let permit = self.pipeline.follower.stream_permit(holder)?;
        let runs = self.pipeline.runs.clone();
        let events = self
            .watch_inbox()
            .take_until(async move { runs.closing().await })
            .boxed();
        Ok(self.pipeline.follower.bounded(events, permit))
    }

    /// The inbox's events for as long as they are read: a snapshot, then
    /// each change, and a fresh snapshot after changes were missed. Ends
    /// if the store fails (read it again to start over).
    pub fn watch_inbox(&self) -> BoxStream<'static, InboxEvent> {
        let feed = self
            .inbox
            .get_or_init(|| InboxFeed::start(self.pipeline.run_log.changes(), self.approvals.clone()));
        // Subscribed before the snapshot is read: nothing falls between.
        let news = feed.news.subscribe();
        let (tx, rx) = mpsc::channel(16);
        tokio::spawn(relay(self.approvals.clone(), news, tx));
        stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|e| (e, rx)) }).boxed()
    }
}

/// One subscriber's task: a snapshot, then the feed's news, and a fresh
/// snapshot after a lag. Ends when the subscriber goes or the store fails.
async fn relay(
    approvals: Arc<dyn Approvals>,
    mut news: broadcast::Receiver<News>,
    tx: mpsc::Sender<InboxEvent>,
) {
    loop {
        let pending = match approvals.list_approvals(first_page()).await {
            Ok(pending) => pending,
            Err(e) => return tracing::warn!(error = %e, "cannot read the inbox"),
        };
        // The feed may tell, late, of a request as the snapshot already
        // shows it (another instance's notice arriving after the read):
        // that is no change, and is not told again.
        let mut shown: HashMap<Uuid, Approval> =
            pending.approvals.iter().map(|a| (a.id, a.clone())).collect();
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
                    if shown.remove(&approval.id).is_some_and(|seen| seen == *approval) {
                        continue;
                    }
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

/// The inbox's first page, as big as a page may be: most inboxes fit.
pub fn first_page() -> ApprovalFilter {
    ApprovalFilter {
        status: Some(ApprovalStatus::Pending),
        limit: MAX_APPROVALS,
        cursor: None,
    }
}

/// The feed's task: each run change that is news of a request, told to
/// every subscriber. While nobody listens nothing is looked up.
async fn follow(
    mut changes: broadcast::Receiver<Uuid>,
    approvals: Arc<dyn Approvals>,
    news: broadcast::Sender<News>,
) {
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
        match requests.change(approvals.as_ref(), run).await {
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
    async fn change(&mut self, approvals: &dyn Approvals, run: Uuid) -> Result<Option<Approval>, StoreError> {
        if self.quiet.contains(&run) {
            return Ok(None);
        }
        match approvals.approval_of_run(run).await? {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{NewApproval, NewRun, RunStatus};
    use chrono::Utc;

    async fn one_pending(stores: &crate::store::Stores) -> Approval {
        let at = Utc::now();
        let approval = NewApproval {
            id: Uuid::now_v7(),
            description: "Stamps.".to_owned(),
            trust: "user".to_owned(),
            warning: None,
            permissions: Vec::new(),
            expires_at: at + chrono::Duration::hours(1),
        };
        let run = NewRun {
            id: Uuid::now_v7(),
            skill: "s".to_owned(),
            tool: "t".to_owned(),
            skill_hash: "h".to_owned(),
            arguments: serde_json::json!({}),
            argv: vec!["true".to_owned()],
            cwd: "/".to_owned(),
            status: RunStatus::PendingApproval,
            requested_by: None,
            approval_id: Some(approval.id),
            created_at: at,
            started_at: None,
            instance: None,
            mode: None,
            request_id: None,
            skill_version: None,
            idempotency_key: None,
            session: None,
        };
        let run_id = run.id;
        stores.holds.insert_pending(run, approval).await.expect("held");
        stores
            .approvals
            .approval_of_run(run_id)
            .await
            .expect("read")
            .expect("held")
    }

    /// Another instance's notice of a request can reach this one after a
    /// new inbox read its snapshot: told as it was shown, it is dropped;
    /// a real change to it still goes out.
    #[tokio::test]
    async fn a_late_notice_of_what_the_snapshot_showed_is_not_told_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = format!("sqlite://{}", dir.path().join("log.db").display());
        let stores = crate::store::open(&url).await.expect("store");
        let shown = one_pending(&stores).await;
        let approvals = stores.approvals;
        let (feed, news) = broadcast::channel(8);
        let (tx, mut rx) = mpsc::channel(8);
        tokio::spawn(relay(approvals.clone(), news, tx));
        let Some(InboxEvent::Snapshot(page)) = rx.recv().await else {
            panic!("a snapshot first");
        };
        assert_eq!(page.approvals, std::slice::from_ref(&shown));
        feed.send(News::Changed(Arc::new(shown.clone()))).expect("sent");
        let mut changed = shown.clone();
        changed.status = ApprovalStatus::Denied;
        feed.send(News::Changed(Arc::new(changed.clone()))).expect("sent");
        let Some(InboxEvent::Changed(told)) = rx.recv().await else {
            panic!("the change is told");
        };
        assert_eq!(*told, changed, "the late notice of the shown request was dropped");
    }
}
