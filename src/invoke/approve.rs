//! Calls that wait for a person (`docs/design.md` §4): holding them, deciding them,
//! running the approved ones on the instance that decided, and waiting for
//! any run to end, whichever instance ends it.

use super::{Approver, Asked, InvokeError, Invoker, Prepared, Target};
use crate::catalog::Catalog;
use crate::policy;
use crate::store::{
    Approval, ApprovalStatus, Decide, NewApproval, PolicyFacts, RunStatus, SameCall, Scope, Undecidable,
};
use chrono::Utc;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// Notes longer than this are refused rather than stored.
pub const MAX_NOTE_CHARS: usize = 4096;

/// A call held for approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    pub run_id: Uuid,
    pub approval_id: Uuid,
}

/// A person's decision on a request.
#[derive(Debug, Clone)]
pub struct Ruling {
    pub approve: bool,
    pub scope: Scope,
    /// The deciding token's name; `None` on a server without tokens.
    pub decided_by: Option<String>,
    pub note: Option<String>,
    /// The caller decides its own call, in its client, where the
    /// configuration lets it (`docs/mcp.md`, in-client approval).
    pub own: bool,
}

impl Invoker {
    /// Records a call for approval: its run as `pending_approval` and a
    /// request holding everything an approver needs, in one transaction.
    pub async fn hold(&self, p: &Prepared, facts: &PolicyFacts, asked: Asked) -> Result<Held, InvokeError> {
        let approval_id = Uuid::now_v7();
        let run = self.new_run(p, RunStatus::PendingApproval, asked, Some(approval_id));
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
            permissions: p.skill.permissions.clone(),
            expires_at: run.created_at + ttl,
        };
        self.holds.insert_pending(run, approval).await?;
        Ok(held)
    }

    /// The request of the same call by the same caller that still waits
    /// for a person (see [`crate::store::SameCall`]), for a retry to join
    /// rather than file another. Bounded: a caller holds at most
    /// `max_pending_per_caller` requests.
    pub(super) async fn pending_like(
        &self,
        p: &Prepared,
        asked: &Asked,
    ) -> Result<Option<Held>, InvokeError> {
        let arguments = serde_json::Value::Object(p.arguments.clone());
        let same = SameCall {
            requested_by: asked.by.as_deref(),
            skill: &p.skill.name,
            tool: &p.tool().name,
            skill_hash: &p.skill.hash,
            mode: Some(&p.mode),
            arguments: &arguments,
        };
        let limit = u32::try_from(self.settings.max_pending_per_caller)
            .unwrap_or(u32::MAX)
            .clamp(1, crate::store::MAX_APPROVALS);
        let found = self.holds.pending_like(&same, Utc::now(), limit).await?;
        Ok(found.map(|request| Held {
            run_id: request.run_id,
            approval_id: request.id,
        }))
    }

    /// Records a call that a standing deny refused: nothing runs, but the
    /// attempt is on record as `denied`.
    pub async fn refuse(&self, p: &Prepared, asked: Asked) -> Result<Uuid, InvokeError> {
        let run = self.new_run(p, RunStatus::Denied, asked, None);
        let id = run.id;
        self.run_log.insert_run(run).await?;
        Ok(id)
    }

    /// The call behind a request about to be approved; when it can no
    /// longer be made as shown, its run ends (only while it still waits: a
    /// run someone else has just approved goes on) and the request is void.
    pub(super) async fn prepare_or_void(
        &self,
        catalog: &Arc<Catalog>,
        request: &Approval,
    ) -> Result<Prepared, InvokeError> {
        match self.prepare_again(catalog, request).await {
            Ok(p) => Ok(p),
            Err(why) => {
                self.run_log
                    .end_waiting(request.run_id, RunStatus::Expired, Utc::now())
                    .await?;
                Err(InvokeError::SkillChanged(why))
            }
        }
    }

    /// The call behind a request, prepared again from the current catalog
    /// and checked to be exactly what the approver was shown.
    async fn prepare_again(&self, catalog: &Arc<Catalog>, request: &Approval) -> Result<Prepared, String> {
        let run = self
            .run_log
            .get_run(request.run_id)
            .await
            .map_err(|e| format!("cannot read run {}: {e}", request.run_id))?;
        // The version the call named, which need not be the one serving now.
        let skill = match &run.skill_version {
            Some(v) => format!("{}@{v}", request.skill),
            None => request.skill.clone(),
        };
        let target = Target::SkillTool {
            skill,
            tool: request.tool.clone(),
        };
        let (skill, tool) = super::locate(catalog, &target)
            .await
            .map_err(|_| format!("tool {}/{} is no longer loaded", request.skill, request.tool))?;
        let mut p = self
            .prepare(skill, tool, &request.arguments, run.mode.as_deref())
            .map_err(|e| format!("the arguments no longer fit the tool: {e}"))?;
        p.asked = Asked {
            by: run.requested_by.clone(),
            request_id: run.request_id.clone(),
        };
        p.approved = true;
        // A call made in a session runs in it, if it is still there and
        // its skill still active: else what was approved cannot run as
        // shown.
        if let Some(session) = run.session {
            let bound = self
                .bind(
                    &super::CallSession::within(session),
                    run.requested_by.as_deref(),
                    &p.skill,
                )
                .await
                .map_err(|e| format!("its session: {e}"))?;
            p.session = Some(bound);
        }
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
    pub(super) fn run_claimed(self: &Arc<Self>, run_id: Uuid, p: Prepared) {
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
                    if let Err(e) = this.run_log.end_waiting(run_id, RunStatus::Cancelled, Utc::now()).await {
                        tracing::warn!(run = %run_id, error = %e, "cannot record the cancel of a queued run");
                    }
                    this.runs.finish(&live, None);
                    return;
                }
            };
            if permits.is_none() || this.runs.is_closed() {
                let envelope = not_run("the server is shutting down; the approved call was not run");
                this.end(&live, RunStatus::Interrupted, envelope).await;
                return;
            }
            match this
                .run_log
                .start_run(run_id, None, &this.settings.instance, Utc::now())
                .await
            {
                Ok(Some(_)) => this.execute(live, p).await,
                // Cancelled while it waited: nothing runs.
                Ok(None) => this.runs.finish(&live, None),
                Err(e) => {
                    tracing::error!(run = %run_id, error = %e, "cannot start the approved run");
                    let envelope = not_run("the run log is unavailable; the approved call was not run");
                    this.end(&live, RunStatus::Failed, envelope).await;
                }
            }
            drop(permits);
        });
    }

    /// Sweeps expired run directories (`expire_artifacts`) until `stop`;
    /// the approvals' side is [`Approver::housekeeping`].
    pub async fn housekeeping(self: Arc<Self>, stop: CancellationToken) {
        self.expire_artifacts(stop).await;
    }
}

impl Approver {
    /// Decides pending request `id`, exactly once. An approval claims the
    /// run for this instance and starts it here, in the background.
    ///
    /// With tokens, the token that asked can never decide its own request
    /// (nor deny it, which would let it plant a standing deny through its
    /// own call): an agent must not approve itself.
    ///
    /// Approving a request whose skill is no longer loaded as it was when
    /// the call was made would run something other than what the approver
    /// saw: the request is voided instead (its run ends `expired`).
    pub async fn decide_request(
        &self,
        catalog: &Arc<Catalog>,
        id: Uuid,
        ruling: Ruling,
    ) -> Result<Approval, InvokeError> {
        if let Some(note) = &ruling.note {
            if note.chars().count() > MAX_NOTE_CHARS {
                return Err(InvokeError::NoteTooLong { max: MAX_NOTE_CHARS });
            }
            if note.contains('\0') {
                return Err(InvokeError::NoteHasNul);
            }
        }
        let request = self.approvals.get_approval(id).await?;
        if let Some(name) = &ruling.decided_by
            && !ruling.own
            && request.requested_by.as_deref() == Some(name.as_str())
        {
            return Err(InvokeError::SelfApproval(name.clone()));
        }
        let prepared = if ruling.approve && request.status == ApprovalStatus::Pending {
            Some(self.pipeline.prepare_or_void(catalog, &request).await?)
        } else {
            None
        };
        let approval = self
            .approvals
            .decide(decision(&request, ruling, &self.pipeline.settings.instance))
            .await?;
        let approval = approval.map_err(|why| match why {
            Undecidable::AlreadyDecided(status) => InvokeError::AlreadyDecided { id, status },
            Undecidable::Expired => InvokeError::RequestExpired(id),
        })?;
        if let Some(p) = prepared {
            self.pipeline.run_claimed(approval.run_id, p);
        }
        Ok(approval)
    }

    /// Expires requests past their time (their runs end `expired`) and
    /// keeps the pending-approvals gauge current, until `stop`. Every
    /// instance may run this: the updates are conditional.
    pub async fn housekeeping(self, stop: CancellationToken) {
        let every = (self.pipeline.settings.approval_ttl / 4)
            .clamp(Duration::from_millis(100), Duration::from_secs(5));
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(every) => {}
            }
            match self.approvals.expire_approvals(Utc::now()).await {
                Ok(runs) if !runs.is_empty() => {
                    tracing::info!(count = runs.len(), "approval requests expired")
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "cannot expire approval requests"),
            }
            if let Ok(n) = self.approvals.count_pending().await {
                crate::metrics::set_approvals_pending(n);
            }
        }
    }
}

/// The store's form of a ruling on `request`, taken now by `instance`.
fn decision(request: &Approval, ruling: Ruling, instance: &str) -> Decide {
    Decide {
        approval_id: request.id,
        approve: ruling.approve,
        scope: ruling.scope,
        decided_by: ruling.decided_by,
        note: ruling.note,
        instance: instance.to_owned(),
        at: Utc::now(),
    }
}
