//! Telling people outside the page (`[[notify]]`): each new request and
//! each decision is posted to webhooks, signed, retried with backoff off
//! the request path, and recorded (`GET /notifications`).
//!
//! Events come from the same feed as the inbox stream (the store's change
//! notifications), so every instance sees every event; the store keeps
//! one delivery per event and target, and one instance at a time claims
//! it, so each is delivered once.

mod send;
mod target;

pub mod payload;

pub use target::{Event, Format, NotifyConfig, Target};

use crate::invoke::{Approver, InboxEvent, first_page};
use crate::session::PendingActivation;
use crate::store::{
    Approval, ApprovalFilter, ApprovalPage, ApprovalStatus, EgressRequest, NewNotification, Outbox,
};
use chrono::Utc;
use futures_util::StreamExt;
use serde_json::Value;
use std::sync::Arc;
use tokio::sync::Notify;
use tokio::sync::broadcast::{self, error::RecvError};
use uuid::Uuid;

/// The running notifier: its tasks stop when this is dropped.
pub struct Notifier {
    shared: Arc<Shared>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Notifier {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// What the tasks share.
struct Shared {
    /// Whose inbox feed tells of requests and decisions, and whose store
    /// keeps the deliveries.
    approver: Approver,
    targets: Vec<Target>,
    /// The deliveries, recorded once per event and target.
    outbox: Arc<dyn Outbox>,
    /// The instance whose name the deliveries are claimed in.
    instance: String,
    /// Where links in payloads point.
    public_url: String,
    /// Rung when a delivery is recorded, so the sender need not wait for
    /// its next look.
    recorded: Notify,
}

/// Starts notifying `targets` of the requests `approver` sees, through
/// `outbox`; `None` when there are none.
pub fn spawn(
    approver: Approver,
    outbox: Arc<dyn Outbox>,
    targets: Vec<Target>,
    instance: String,
    public_url: String,
) -> Option<Notifier> {
    if targets.is_empty() {
        return None;
    }
    let shared = Arc::new(Shared {
        outbox,
        instance,
        approver,
        targets,
        public_url,
        recorded: Notify::new(),
    });
    let mut tasks = vec![tokio::spawn(record_events(shared.clone()))];
    match send::Sender::new(shared.clone()) {
        Ok(sender) => tasks.push(tokio::spawn(sender.run())),
        // Recorded, not sent: `GET /notifications` shows them pending.
        Err(e) => tracing::error!(error = %e, "cannot start sending webhooks: no TLS roots"),
    }
    Some(Notifier { shared, tasks })
}

impl Notifier {
    /// Also tells the targets that want it of each activation request a
    /// session of this instance makes ([`crate::session::Sessions::activation_requests`]).
    /// Every instance tells of its own sessions' requests.
    pub fn follow_activations(&mut self, requests: broadcast::Receiver<PendingActivation>) {
        let shared = self.shared.clone();
        self.tasks
            .push(tokio::spawn(follow(requests, "activation requests", move |r| {
                let shared = shared.clone();
                async move { record_activation(&shared, &r).await }
            })));
    }

    /// Also tells the targets that want it of each destination held on
    /// this instance for a person ([`crate::egress::Asking::held`]).
    pub fn follow_egress(&mut self, held: broadcast::Receiver<EgressRequest>) {
        let shared = self.shared.clone();
        self.tasks
            .push(tokio::spawn(follow(held, "egress requests", move |r| {
                let shared = shared.clone();
                async move { record_egress(&shared, &r).await }
            })));
    }
}

/// Records each of `what` as it comes, until its sender is gone.
async fn follow<T, F, Fut>(mut requests: broadcast::Receiver<T>, what: &'static str, record: F)
where
    T: Clone,
    F: Fn(T) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    loop {
        match requests.recv().await {
            Ok(request) => record(request).await,
            Err(RecvError::Lagged(missed)) => {
                tracing::warn!(
                    missed,
                    "{what} came faster than they were recorded; some are not notified"
                );
            }
            Err(RecvError::Closed) => return,
        }
    }
}

async fn record_activation(shared: &Shared, request: &PendingActivation) {
    record_event(shared, Event::ActivationRequested, request.id, |format, now| {
        payload::activation_body(format, request, &shared.public_url, now)
    })
    .await;
}

async fn record_egress(shared: &Shared, request: &EgressRequest) {
    record_event(shared, Event::EgressRequested, request.id, |format, now| {
        payload::egress_body(format, request, &shared.public_url, now)
    })
    .await;
}

/// One delivery of `event` about request `id` for each target that wants
/// it, its body made in the target's format at one time for all.
async fn record_event(
    shared: &Shared,
    event: Event,
    id: Uuid,
    body: impl Fn(Format, chrono::DateTime<Utc>) -> Value,
) {
    let now = Utc::now();
    for target in shared.targets.iter().filter(|t| t.wants(event)) {
        let new = NewNotification {
            id: Uuid::now_v7(),
            event: event.name().to_owned(),
            // The request's id: one delivery per request and target.
            approval_id: id,
            target: target.name.clone(),
            payload: body(target.format, now),
            created_at: now,
        };
        enqueue(shared, new).await;
    }
}

async fn enqueue(shared: &Shared, new: NewNotification) {
    let target = new.target.clone();
    match shared.outbox.enqueue_notification(new).await {
        Ok(true) => shared.recorded.notify_one(),
        Ok(false) => {}
        Err(e) => tracing::warn!(target = %target, error = %e, "cannot record a notification"),
    }
}

/// Records a delivery for each event the inbox feed shows, for every
/// target that wants it. A request seen in a snapshot may be one already
/// recorded; the store keeps the first.
async fn record_events(shared: Arc<Shared>) {
    loop {
        let mut events = shared.approver.watch_inbox();
        while let Some(event) = events.next().await {
            match event {
                InboxEvent::Snapshot(page) => record_inbox(&shared, page).await,
                InboxEvent::Changed(approval) => record_all(&shared, std::slice::from_ref(&*approval)).await,
            }
        }
        // The store failed; the feed starts again from a snapshot.
        tracing::warn!("the notifier lost its event feed; following it again");
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}

/// Records the requests of a snapshot: its first page, then each later
/// page, so that a request past the first is not missed. A page that
/// cannot be read ends it; the next snapshot starts over.
async fn record_inbox(shared: &Shared, mut page: ApprovalPage) {
    loop {
        record_all(shared, &page.approvals).await;
        let Some(cursor) = page.next_cursor else {
            return;
        };
        let next = ApprovalFilter {
            cursor: Some(cursor),
            ..first_page()
        };
        page = match shared.approver.reader().list_approvals(next).await {
            Ok(page) => page,
            Err(e) => return tracing::warn!(error = %e, "cannot read the rest of the inbox"),
        };
    }
}

async fn record_all(shared: &Shared, approvals: &[Approval]) {
    for approval in approvals {
        if let Some(event) = event_of(approval) {
            record(shared, event, approval).await;
        }
    }
}

/// The event an approval's state stands for: a request, a person's
/// decision, or (expired, withdrawn) none.
fn event_of(approval: &Approval) -> Option<Event> {
    match approval.status {
        ApprovalStatus::Pending => Some(Event::Requested),
        ApprovalStatus::Approved | ApprovalStatus::Denied => Some(Event::Decided),
        ApprovalStatus::Expired => None,
    }
}

async fn record(shared: &Shared, event: Event, approval: &Approval) {
    let now = Utc::now();
    for target in shared.targets.iter().filter(|t| t.wants(event)) {
        let new = NewNotification {
            id: Uuid::now_v7(),
            event: event.name().to_owned(),
            approval_id: approval.id,
            target: target.name.clone(),
            payload: payload::body(target.format, event, approval, &shared.public_url, now),
            created_at: now,
        };
        enqueue(shared, new).await;
    }
}
