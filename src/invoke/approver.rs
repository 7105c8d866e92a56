//! A person's side of the pipeline: deciding held calls, the inbox,
//! standing grants (`grants.rs`, `inbox.rs`). A handler that approves
//! holds an [`Approver`], which makes no calls of its own.

use super::{InvokeError, Invoker, Ruling};
use crate::catalog::Catalog;
use crate::store::{Approval, StoreError};
use std::sync::Arc;
use uuid::Uuid;

/// Deciding what the pipeline held, and granting ahead: see
/// [`Invoker::approver`].
#[derive(Clone)]
pub struct Approver {
    /// An approved call runs through the pipeline that held it.
    pub(super) pipeline: Arc<Invoker>,
}

impl Approver {
    /// Decides request `id` (see [`Invoker::decide_request`]).
    pub async fn decide_request(
        &self,
        catalog: &Arc<Catalog>,
        id: Uuid,
        ruling: Ruling,
    ) -> Result<Approval, InvokeError> {
        self.pipeline.decide_request(catalog, id, ruling).await
    }

    /// Revokes a standing decision: calls it covered are judged again.
    pub async fn revoke_grant(&self, id: Uuid) -> Result<(), StoreError> {
        self.pipeline.approvals.revoke_grant(id).await
    }
}
