//! A person's side of the pipeline: deciding held calls, the inbox,
//! standing grants (`grants.rs`, `inbox.rs`). A handler that approves
//! holds an [`Approver`], which makes no calls of its own.

use super::Invoker;
use super::inbox::InboxFeed;
use crate::store::{Approvals, SkillApprovals, StoreError, StoreReader, Stores};
use std::sync::{Arc, OnceLock};
use uuid::Uuid;

/// Deciding what the pipeline held, the inbox, and granting ahead. It
/// holds the approvals and skill approvals, which the pipeline does not;
/// made once beside the pipeline ([`Approver::new`]) and cloned freely.
#[derive(Clone)]
pub struct Approver {
    /// An approved call runs through the pipeline that held it.
    pub(super) pipeline: Arc<Invoker>,
    pub(super) approvals: Arc<dyn Approvals>,
    pub(super) skill_approvals: Arc<dyn SkillApprovals>,
    /// Request changes for the inbox and the notifier, once asked for.
    pub(super) inbox: Arc<OnceLock<InboxFeed>>,
    /// What the people's side may read of the store.
    reader: StoreReader,
}

impl Approver {
    /// A person's side of `pipeline`, over the approvals of `stores`.
    pub fn new(pipeline: &Arc<Invoker>, stores: &Stores) -> Self {
        Self {
            pipeline: pipeline.clone(),
            approvals: stores.approvals.clone(),
            skill_approvals: stores.skill_approvals.clone(),
            inbox: Arc::default(),
            reader: StoreReader::new(stores),
        }
    }

    /// The store, read-only: what handlers (HTTP, MCP) may look at.
    pub fn reader(&self) -> &StoreReader {
        &self.reader
    }

    /// The pipeline whose held calls this decides.
    pub fn pipeline(&self) -> &Arc<Invoker> {
        &self.pipeline
    }

    /// Revokes a standing decision: calls it covered are judged again.
    pub async fn revoke_grant(&self, id: Uuid) -> Result<(), StoreError> {
        self.approvals.revoke_grant(id).await
    }
}
