//! Calls that wait for a person (DESIGN §4): holding them, deciding them,
//! running the approved ones on the instance that decided, and waiting for
//! any run to end, whichever instance ends it.

use super::{Invoker, Prepared, store_error};
use crate::catalog::Catalog;
use crate::error::ApiError;
use crate::policy;
use crate::store::{
    Approval, Decide, NewApproval, PolicyFacts, Run, RunStatus, Scope, StoreError, Undecidable,
};
use chrono::Utc;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// A call held for approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    pub run_id: Uuid,
    pub approval_id: Uuid,
}

/// A person's decision, as the approvals route receives it.
#[derive(Debug, Clone)]
pub struct Ruling {
    pub approve: bool,
    pub scope: Scope,
    pub decided_by: Option<String>,
    pub note: Option<String>,
}

impl Invoker {
    /// Records a call for approval: its run as `pending_approval` and a
    /// request holding everything an approver needs, in one transaction.
    pub async fn hold(
        &self,
        p: &Prepared,
        facts: &PolicyFacts,
        requested_by: Option<String>,
    ) -> Result<Held, ApiError> {
        let approval_id = Uuid::now_v7();
        let run = self.new_run(p, RunStatus::PendingApproval, requested_by, Some(approval_id));
        let held = Held {
            run_id: run.id,
            approval_id,
        };
        let ttl =
            chrono::Duration::from_std(self.settings.approval_ttl).unwrap_or(chrono::Duration::hours(1));
        let approval = NewApproval {
            id: approval_id,
            description: p.tool().description.clone(),
            trust: p.skill.trust.as_str().to_owned(),
            warning: policy::warning(&p.skill, facts),
            expires_at: run.created_at + ttl,
        };
        self.store
            .insert_pending(run, approval)
            .await
            .map_err(store_error)?;
        Ok(held)
    }

    /// Records a call that a standing deny refused: nothing runs, but the
    /// attempt is on record as `denied`.
    pub async fn refuse(&self, p: &Prepared, requested_by: Option<String>) -> Result<Uuid, ApiError> {
        let run = self.new_run(p, RunStatus::Denied, requested_by, None);
        let id = run.id;
        self.store.insert_run(run).await.map_err(store_error)?;
        Ok(id)
    }

    /// Decides a pending request, exactly once. An approval claims the run
    /// for this instance and starts it here, in the background.
    ///
    /// Approving a request whose skill is no longer loaded as it was when
    /// the call was made would run something other than what the approver
    /// saw: the request is voided instead (its run ends `expired`) and the
    /// approver gets 409.
    pub async fn decide_request(
        self: &Arc<Self>,
        catalog: &Catalog,
        request: &Approval,
        ruling: Ruling,
    ) -> Result<Approval, ApiError> {
        let prepared = if ruling.approve && request.status == crate::store::ApprovalStatus::Pending {
            match self.prepare_again(catalog, request).await {
                Ok(p) => Some(p),
                Err(why) => {
                    // Only while it still waits: a run someone else has
                    // just approved goes on.
                    self.store
                        .end_waiting(request.run_id, RunStatus::Expired, Utc::now())
                        .await
                        .map_err(store_error)?;
                    return Err(ApiError::Conflict {
                        code: "skill_changed",
                        detail: format!("{why}; the request is void: call the tool again"),
                    });
                }
            }
        } else {
            None
        };
        let decided = self
            .store
            .decide(Decide {
                approval_id: request.id,
                approve: ruling.approve,
                scope: ruling.scope,
                decided_by: ruling.decided_by,
                note: ruling.note,
                instance: self.settings.instance.clone(),
                at: Utc::now(),
            })
            .await
            .map_err(|e| match e {
                StoreError::NotFound => ApiError::not_found("approval", request.id.to_string()),
                other => store_error(other),
            })?;
        let approval = match decided {
            Ok(approval) => approval,
            Err(Undecidable::AlreadyDecided(status)) => {
                return Err(ApiError::Conflict {
                    code: "already_decided",
                    detail: format!("approval {} is already {}", request.id, status.as_str()),
                });
            }
            Err(Undecidable::Expired) => {
                return Err(ApiError::Conflict {
                    code: "approval_expired",
                    detail: format!("approval {} expired before it was decided", request.id),
                });
            }
        };
        if let Some(p) = prepared {
            self.run_claimed(approval.run_id, p);
        }
        Ok(approval)
    }

    /// The call behind a request, prepared again from the current catalog
    /// and checked to be exactly what the approver was shown.
    async fn prepare_again(&self, catalog: &Catalog, request: &Approval) -> Result<Prepared, String> {
        let index = catalog
            .skill_tool(&request.skill, &request.tool)
            .ok_or_else(|| format!("tool {}/{} is no longer loaded", request.skill, request.tool))?;
        let run = self
            .store
            .get_run(request.run_id)
            .await
            .map_err(|e| format!("cannot read run {}: {e}", request.run_id))?;
        let p = self
            .prepare(catalog, index, &request.arguments, run.mode.as_deref())
            .map_err(|e| format!("the arguments no longer fit the tool: {e}"))?;
        if p.skill.hash != request.skill_hash {
            return Err(format!(
                "skill {} changed since this call was requested",
                request.skill
            ));
        }
        if p.argv != request.argv {
            return Err("the command would differ from the one shown for approval".to_owned());
        }
        Ok(p)
    }

    /// Runs a run this instance has claimed (recorded as `queued`): it
    /// waits for a free slot rather than give up (a person has said yes),
    /// then starts it with the same conditional claim as any queued run, so
    /// a cancel that came first wins.
    fn run_claimed(self: &Arc<Self>, run_id: Uuid, p: Prepared) {
        let (live, _) = self.runs.register(run_id);
        let this = self.clone();
        tokio::spawn(async move {
            let not_run =
                |why: &str| super::Envelope::not_started(run_id, &p.skill.name, &p.tool().name, why);
            // A cancel while it waits ends it here and now, not when a
            // slot frees up.
            let permits = tokio::select! {
                permits = this.slot_waiting(&p.tool().name) => permits,
                () = live.cancel.cancelled() => {
                    if let Err(e) = this.store.end_waiting(run_id, RunStatus::Cancelled, Utc::now()).await {
                        tracing::warn!(run = %run_id, error = %e, "cannot record the cancel of a queued run");
                    }
                    this.runs.finish(&live, None);
                    return;
                }
            };
            if permits.is_none() || this.runs.is_closed() {
                let envelope = not_run("the server is shutting down; the approved call was not run");
                this.record(run_id, RunStatus::Interrupted, &envelope).await;
                this.runs.finish(&live, Some(envelope));
                return;
            }
            match this
                .store
                .start_run(run_id, None, &this.settings.instance, Utc::now())
                .await
            {
                Ok(Some(_)) => this.execute(live, p).await,
                // Cancelled while it waited: nothing runs.
                Ok(None) => this.runs.finish(&live, None),
                Err(e) => {
                    tracing::error!(run = %run_id, error = %e, "cannot start the approved run");
                    let envelope = not_run("the run log is unavailable; the approved call was not run");
                    this.record(run_id, RunStatus::Failed, &envelope).await;
                    this.runs.finish(&live, Some(envelope));
                }
            }
            drop(permits);
        });
    }

    /// Reads a run, waiting up to `within` for it to reach a final status.
    /// Woken by the store's change notifications (from any instance on
    /// PostgreSQL), and re-reading at least every `wait_poll`.
    pub async fn wait_final(&self, id: Uuid, within: Duration) -> Result<Run, StoreError> {
        self.wait_until(id, within, |run| run.status.is_final()).await
    }

    /// Reads a run, waiting up to `within` until `done` holds for it (see
    /// [`Invoker::wait_final`]). Returns the last read either way.
    pub async fn wait_until(
        &self,
        id: Uuid,
        within: Duration,
        done: impl Fn(&Run) -> bool,
    ) -> Result<Run, StoreError> {
        let deadline = Instant::now() + within;
        // Subscribed before the first read, so no change can slip between.
        let mut changes = self.store.changes();
        loop {
            let run = self.store.get_run(id).await?;
            if done(&run) || Instant::now() >= deadline {
                return Ok(run);
            }
            let until = deadline.min(Instant::now() + self.settings.wait_poll);
            let _ = tokio::time::timeout_at(until, async {
                loop {
                    match changes.recv().await {
                        Ok(changed) if changed == id => return,
                        Ok(_) => {}
                        Err(RecvError::Lagged(_)) => return,
                        Err(RecvError::Closed) => std::future::pending::<()>().await,
                    }
                }
            })
            .await;
        }
    }

    /// Expires requests past their time (their runs end `expired`) and
    /// keeps the pending-approvals gauge current, until `stop`. Every
    /// instance may run this: the updates are conditional.
    pub async fn housekeeping(self: Arc<Self>, stop: CancellationToken) {
        let every =
            (self.settings.approval_ttl / 4).clamp(Duration::from_millis(100), Duration::from_secs(5));
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(every) => {}
            }
            match self.store.expire_approvals(Utc::now()).await {
                Ok(runs) if !runs.is_empty() => {
                    tracing::info!(count = runs.len(), "approval requests expired")
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "cannot expire approval requests"),
            }
            if let Ok(n) = self.store.count_pending().await {
                crate::metrics::set_approvals_pending(n);
            }
        }
    }
}
