//! The stage that runs a recorded call (its child, or its skill's
//! backend between hooks) and records how it ended.

use super::{Envelope, Invoker, LiveRun, Prepared, hooks};
use crate::runner::{self, Spec};
use crate::skill::backend::{Backend, BackendCall, Wake};
use crate::skill::context::CallContext;
use crate::skill::{Action, Skill};
use crate::store::RunStatus;
use chrono::Utc;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument as _;
use uuid::Uuid;

/// How long a run must last before its process group is written to the
/// run log (see `Invoker::execute`).
const PGID_RECORD_DELAY: Duration = Duration::from_millis(100);

impl Invoker {
    /// What the runner gets for a prepared call.
    fn spec(&self, p: &Prepared) -> Spec {
        Spec {
            program: p.argv.first().cloned().unwrap_or_default(),
            args: p.argv.iter().skip(1).cloned().collect(),
            cwd: p.cwd.clone(),
            env: p.env.clone(),
            timeout: p.timeout,
            grace: self.settings.grace,
            limits: self.limits_for(&p.skill),
            isolate_network: !p.skill.unrestricted_network(),
            egress_ns: None,
            confinement: None,
        }
    }

    /// Runs a call recorded as running to its end and records the outcome.
    pub(super) async fn execute(&self, live: Arc<LiveRun>, p: Prepared) {
        let id = live.id;
        let in_flight = crate::metrics::run_started(&p.tool().name);
        live.mark_started();
        if !still_the_same(&p.skill)
            .instrument(tracing::trace_span!("invoke.still_the_same"))
            .await
        {
            let why = "the skill's files changed since this call was prepared, so what was decided (or \
                       approved) is not what would run; nothing ran: call it again";
            tracing::warn!(run = %id, skill = %p.skill.name, "a skill changed on disk under a call; refused");
            let envelope = Envelope::not_started(id, &p.skill.name, &p.tool().name, why);
            self.end(&live, RunStatus::Failed, envelope).await;
            return;
        }
        let Some((p, effects)) = self.session_before(&live, p).await else {
            return;
        };
        if let Action::Backend | Action::Workflow = p.tool().action {
            let Some(backend) = p.skill.backend.clone() else {
                let why = "the skill's backend is not running; reload the skill to start it";
                let envelope = Envelope::not_started(id, &p.skill.name, &p.tool().name, why);
                self.end(&live, RunStatus::Failed, envelope).await;
                return;
            };
            let (status, envelope, took) = self.through_backend(&live, p, backend.as_ref(), effects).await;
            drop(in_flight);
            crate::metrics::run_finished(&envelope.tool, status.as_str(), took);
            self.end(&live, status, envelope).await;
            return;
        }
        let mut spec = self.spec(&p);
        let confined = tracing::trace_span!("invoke.confine").in_scope(|| {
            let dir = self.confine(id, &p, &mut spec)?;
            Ok::<_, std::io::Error>((dir, self.egress(id, &p, &mut spec)?))
        });
        let (run_dir, egress) = match confined {
            Ok(made) => made,
            Err(e) => {
                tracing::error!(run = %id, error = %e, "cannot prepare the run's sandbox");
                let why = format!("cannot prepare the run's directory and sandbox: {e}");
                let envelope = Envelope::not_started(id, &p.skill.name, &p.tool().name, &why);
                self.end(&live, RunStatus::Failed, envelope).await;
                return;
            }
        };
        let outcome = self
            .run_child(&live, spec)
            .instrument(tracing::trace_span!("invoke.run_child"))
            .await;
        let mut envelope = Envelope::from_outcome(id, &p, &outcome);
        envelope.egress = egress.map(|e| super::envelope::egress_lines(e.entries()));
        if let Some(lines) = &envelope.egress {
            crate::metrics::egress(&p.skill.name, super::envelope::egress_totals(lines));
        }
        run_dir
            .finish(&mut envelope, &self.artifacts, outcome.contained)
            .instrument(tracing::trace_span!("invoke.finish_dir"))
            .await;
        let mut status = envelope.status(&outcome);
        if let Some(bound) = &p.session
            && matches!(status, RunStatus::Succeeded | RunStatus::Failed)
        {
            let mut effects = effects;
            super::session::after(&p, bound, &mut envelope, &mut effects).await;
            envelope.hooks = (!effects.is_empty()).then_some(effects);
            if !envelope.success {
                status = RunStatus::Failed;
            }
        } else if !effects.is_empty() {
            envelope.hooks = Some(effects);
        }
        drop(in_flight);
        crate::metrics::run_finished(&p.tool().name, status.as_str(), outcome.duration);
        self.end(&live, status, envelope).await;
    }

    /// Runs a call through its skill's backend, between its hooks
    /// (`before_tool_call`, the call, `after_tool_result`).
    async fn through_backend(
        &self,
        live: &Arc<LiveRun>,
        mut p: Prepared,
        backend: &dyn Backend,
        mut effects: Vec<super::HookEffect>,
    ) -> (RunStatus, Envelope, Duration) {
        // A call outside a session is a turn of its own: its hooks and
        // the call spend one budget.
        let context = self.context_of(&p);
        // An untrusted skill's backend starts here, for a call a person let
        // run, and only then says which hooks it has.
        let hooks = match backend
            .wake(p.timeout)
            .instrument(tracing::trace_span!("invoke.backend_wake"))
            .await
        {
            Ok(Wake::AtLoad) => p.skill.hooks.clone(),
            Ok(Wake::Started { hooks }) => hooks,
            Err(why) => {
                let envelope = Envelope::backend_failed(live.id, &p.skill.name, &p.tool().name, &why);
                return (RunStatus::Failed, envelope, Duration::ZERO);
            }
        };
        // In a session, the skill's own hooks are among the session's, in
        // their place in the order; they run here only when the session
        // could not know them (an untrusted backend says them on waking).
        let hooks = match &p.session {
            Some(bound) if bound.seats.iter().any(|s| s.skill == p.skill.name) => Vec::new(),
            _ => hooks,
        };
        let before = hooks::before(&mut p, backend, &hooks, &context, &mut effects)
            .instrument(tracing::trace_span!("invoke.hooks_before"))
            .await;
        let (skill, tool) = (&p.skill.name, &p.tool().name);
        let stopped = match before {
            hooks::Before::Go => None,
            hooks::Before::Cancel(reason) => {
                let why = format!("cancelled by the skill's before_tool_call hook: {reason}");
                Some((
                    RunStatus::Cancelled,
                    Envelope::not_started(live.id, skill, tool, &why),
                ))
            }
            hooks::Before::Failed(why) => Some((
                RunStatus::Failed,
                Envelope::backend_failed(live.id, skill, tool, &why),
            )),
        };
        let (status, mut envelope, took) = match stopped {
            Some((status, envelope)) => (status, envelope, Duration::ZERO),
            None => {
                let (status, mut envelope, took) = self
                    .call_backend(live, &p, backend, context.clone())
                    .instrument(tracing::trace_span!("invoke.backend_call"))
                    .await;
                // A call that timed out or was cancelled has no result to
                // look at, and its child may just have been killed.
                if matches!(status, RunStatus::Succeeded | RunStatus::Failed) {
                    hooks::after(&p, backend, &hooks, &context, &mut envelope, &mut effects)
                        .instrument(tracing::trace_span!("invoke.hooks_after"))
                        .await;
                    if let Some(bound) = &p.session {
                        super::session::after(&p, bound, &mut envelope, &mut effects).await;
                    }
                }
                (status, envelope, took)
            }
        };
        let status = if status == RunStatus::Succeeded && !envelope.success {
            RunStatus::Failed
        } else {
            status
        };
        envelope.hooks = (!effects.is_empty()).then_some(effects);
        (status, envelope, took)
    }

    /// Runs a call through its skill's backend: a tool, or a workflow.
    async fn call_backend(
        &self,
        live: &Arc<LiveRun>,
        p: &Prepared,
        backend: &dyn Backend,
        context: CallContext,
    ) -> (RunStatus, Envelope, Duration) {
        let started = std::time::Instant::now();
        let call = BackendCall {
            tool: p.tool().name.clone(),
            input: Value::Object(p.arguments.clone()),
            run_id: live.id,
            timeout: p.timeout,
            cancel: live.cancel.clone(),
            progress: Some(live.progress_sink()),
            context,
        };
        let result = match p.tool().action {
            Action::Workflow => backend.workflow(call).await,
            _ => backend.execute(call).await,
        };
        let took = started.elapsed();
        let envelope = Envelope::from_backend(live.id, p, &result, took);
        let status = if result.cancelled {
            RunStatus::Cancelled
        } else {
            envelope.run_status()
        };
        (status, envelope, took)
    }

    /// Runs the child of a live run, forwarding its output as events.
    async fn run_child(&self, live: &Arc<LiveRun>, spec: Spec) -> runner::Outcome {
        let id = live.id;
        let run_log = self.run_log.clone();
        let (events, forwarder) = live.output_sender();
        let watched = live.clone();
        let outcome = runner::run(spec, live.cancel.clone(), Some(events), move |pgid| {
            // The group id goes to the run log for whoever must clean up
            // after a crash; a run over within the delay leaves nothing to
            // clean up, and skipping the write spares the log a statement.
            tokio::spawn(async move {
                tokio::time::sleep(PGID_RECORD_DELAY).await;
                if watched.is_finished() {
                    return;
                }
                if let Err(e) = run_log.set_pgid(id, pgid).await {
                    tracing::warn!(run = %id, error = %e, "cannot record the process group");
                }
            });
        })
        .await;
        // The runner dropped its sender: this ends once every chunk is out
        // (bounded, should a stray clone of the sender linger).
        let _ = tokio::time::timeout(Duration::from_secs(2), forwarder).await;
        outcome
    }

    /// Records how a live run ended, logs it, and wakes its waiters.
    pub(super) async fn end(&self, live: &LiveRun, status: RunStatus, envelope: Envelope) {
        async {
            let envelope = envelope.keepable();
            self.record(live.id, status, &envelope).await;
            tracing::info!(
                run = %live.id, skill = %envelope.skill, tool = %envelope.tool, %status,
                duration_ms = envelope.duration_ms, "run finished"
            );
            self.runs.finish(live, Some(envelope));
        }
        .instrument(tracing::trace_span!("invoke.end"))
        .await;
    }

    /// Hands a run's final state to the run log, which may commit it after
    /// the answer (`docs/design.md` §5), retrying briefly: a result must not
    /// be lost to a momentary database hiccup.
    async fn record(&self, id: Uuid, status: RunStatus, envelope: &Envelope) {
        let value = serde_json::to_value(envelope).ok();
        for attempt in 0..5u32 {
            match self
                .run_log
                .finish_run_soon(id, status, value.clone(), Utc::now())
                .await
            {
                Ok(_) => return,
                Err(e) => {
                    tracing::warn!(run = %id, attempt, error = %e, "cannot record the run's result");
                    tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
                }
            }
        }
        tracing::error!(run = %id, "giving up recording the run's result");
    }
}

/// Whether `skill`'s files still hash to its hash, as the call was decided
/// on: an edit the watcher missed (through a hard link, say), or one made
/// while an approved call waited for a slot, is caught here.
async fn still_the_same(skill: &Arc<Skill>) -> bool {
    if skill.fingerprint.unchanged() {
        return true;
    }
    let (fingerprint, hash) = (skill.fingerprint.clone(), skill.hash.clone());
    tokio::task::spawn_blocking(move || fingerprint.still(&hash))
        .await
        .unwrap_or(false)
}
