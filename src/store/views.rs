//! Narrow views of the store for the code outside the pipeline: a
//! read-only one for the handlers, and the notifier's outbox. Past start-up
//! only the pipeline (`crate::invoke::Invoker`) and retention hold the
//! whole `Arc<dyn Store>`, so the types say what each caller may touch.

use super::{
    Approval, ApprovalFilter, ApprovalPage, Attempt, DecisionFilter, DecisionPage, Grant, NewNotification,
    Notification, NotificationStatus, Run, RunFilter, RunPage, SkillApproval, Store, StoreError,
};
use chrono::{DateTime, Utc};
use std::sync::Arc;
use uuid::Uuid;

type Result<T, E = StoreError> = std::result::Result<T, E>;

/// What handlers may read of the store, and nothing they could write.
#[derive(Clone)]
pub struct StoreReader(Arc<dyn Store>);

impl StoreReader {
    /// A read-only view of `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self(store)
    }

    /// Which database this is (`sqlite`, `postgres`).
    pub fn backend(&self) -> &'static str {
        self.0.backend()
    }

    /// Whether the database answers.
    pub async fn ping(&self) -> Result<()> {
        self.0.ping().await
    }

    pub async fn get_run(&self, id: Uuid) -> Result<Run> {
        self.0.get_run(id).await
    }

    pub async fn list_runs(&self, filter: RunFilter) -> Result<RunPage> {
        self.0.list_runs(filter).await
    }

    pub async fn get_approval(&self, id: Uuid) -> Result<Approval> {
        self.0.get_approval(id).await
    }

    pub async fn approval_of_run(&self, run_id: Uuid) -> Result<Option<Approval>> {
        self.0.approval_of_run(run_id).await
    }

    pub async fn list_approvals(&self, filter: ApprovalFilter) -> Result<ApprovalPage> {
        self.0.list_approvals(filter).await
    }

    pub async fn list_decisions(&self, filter: DecisionFilter) -> Result<DecisionPage> {
        self.0.list_decisions(filter).await
    }

    pub async fn list_grants(&self, skill: Option<&str>) -> Result<Vec<Grant>> {
        self.0.list_grants(skill).await
    }

    pub async fn list_skill_approvals(&self, skill: Option<&str>) -> Result<Vec<SkillApproval>> {
        self.0.list_skill_approvals(skill).await
    }

    pub async fn list_notifications(
        &self,
        status: Option<NotificationStatus>,
        limit: u32,
    ) -> Result<Vec<Notification>> {
        self.0.list_notifications(status, limit).await
    }
}

/// The deliveries of `[[notify]]` webhooks, as one instance's notifier
/// records them, claims them in its name and settles them.
#[derive(Clone)]
pub struct Outbox {
    store: Arc<dyn Store>,
    /// The instance whose claims these are.
    instance: String,
}

impl Outbox {
    /// The outbox kept in `store`, worked by `instance`.
    pub fn new(store: Arc<dyn Store>, instance: String) -> Self {
        Self { store, instance }
    }

    /// Records a delivery to make; `false` when it was recorded before.
    pub async fn enqueue(&self, n: NewNotification) -> Result<bool> {
        self.store.enqueue_notification(n).await
    }

    /// Leases up to `max` deliveries that are due now, until `until`.
    pub async fn claim(
        &self,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        max: u32,
    ) -> Result<Vec<Notification>> {
        self.store
            .claim_notifications(&self.instance, now, until, max)
            .await
    }

    /// Records how an attempt at delivery `id` went.
    pub async fn settle(&self, id: Uuid, attempt: Attempt, at: DateTime<Utc>) -> Result<()> {
        self.store.record_attempt(id, &self.instance, attempt, at).await
    }
}
