//! The read-only view of the store that handlers hold: what they may show
//! of each aggregate, and nothing they could write. A handler that changes
//! anything goes through the pipeline (`crate::invoke::Invoker`).

use super::{
    Approval, ApprovalFilter, ApprovalPage, Approvals, DecisionFilter, DecisionPage, Grant, Notification,
    NotificationStatus, Outbox, Run, RunFilter, RunLog, RunPage, SkillApproval, SkillApprovals, StoreError,
    Stores,
};
use std::sync::Arc;
use uuid::Uuid;

type Result<T, E = StoreError> = std::result::Result<T, E>;

/// What handlers may read of the store, and nothing they could write.
#[derive(Clone)]
pub struct StoreReader {
    runs: Arc<dyn RunLog>,
    approvals: Arc<dyn Approvals>,
    skill_approvals: Arc<dyn SkillApprovals>,
    outbox: Arc<dyn Outbox>,
}

impl StoreReader {
    /// A read-only view of `stores`.
    pub fn new(stores: &Stores) -> Self {
        Self {
            runs: stores.runs.clone(),
            approvals: stores.approvals.clone(),
            skill_approvals: stores.skill_approvals.clone(),
            outbox: stores.outbox.clone(),
        }
    }

    /// Which database this is (`sqlite`, `postgres`).
    pub fn backend(&self) -> &'static str {
        self.runs.backend()
    }

    /// Whether the database answers.
    pub async fn ping(&self) -> Result<()> {
        self.runs.ping().await
    }

    pub async fn get_run(&self, id: Uuid) -> Result<Run> {
        self.runs.get_run(id).await
    }

    pub async fn list_runs(&self, filter: RunFilter) -> Result<RunPage> {
        self.runs.list_runs(filter).await
    }

    pub async fn get_approval(&self, id: Uuid) -> Result<Approval> {
        self.approvals.get_approval(id).await
    }

    pub async fn approval_of_run(&self, run_id: Uuid) -> Result<Option<Approval>> {
        self.approvals.approval_of_run(run_id).await
    }

    pub async fn list_approvals(&self, filter: ApprovalFilter) -> Result<ApprovalPage> {
        self.approvals.list_approvals(filter).await
    }

    pub async fn list_decisions(&self, filter: DecisionFilter) -> Result<DecisionPage> {
        self.approvals.list_decisions(filter).await
    }

    pub async fn list_grants(&self, skill: Option<&str>) -> Result<Vec<Grant>> {
        self.approvals.list_grants(skill).await
    }

    pub async fn list_skill_approvals(&self, skill: Option<&str>) -> Result<Vec<SkillApproval>> {
        self.skill_approvals.list_skill_approvals(skill).await
    }

    pub async fn list_notifications(
        &self,
        status: Option<NotificationStatus>,
        limit: u32,
    ) -> Result<Vec<Notification>> {
        self.outbox.list_notifications(status, limit).await
    }
}
