//! A call of a tool as [`Invoker::call`] takes it and answers it: the
//! tool it names, and the decision (refuse, hold for a person, or run) and
//! the dispatch, so the HTTP route, the command line and MCP only
//! translate its [`Called`].

use super::{Asked, Envelope, Held, InvokeError, Invoker, LiveRun, Prepared, RunEvent};
use crate::catalog::{Catalog, NotFound, ToolLookup};
use crate::policy::{Decision, Verdict};
use crate::skill::Skill;
use crate::store::{PolicyFacts, Run, RunStatus};
use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast;
use tracing::Instrument as _;
use utoipa::ToSchema;
use uuid::Uuid;

/// A call of a tool, however it arrived.
#[derive(Debug, Clone)]
pub struct Call {
    pub target: Target,
    /// The tool's arguments: a JSON object (or null for none).
    pub arguments: Value,
    /// The caller's mode (`Global`, `Dev`, …), passed to the tool.
    pub mode: Option<String>,
    /// Render and decide only: nothing is recorded or run.
    pub dry_run: bool,
    /// How long a call held for a person may wait for its end before the
    /// answer is [`Called::Held`]; at most [`super::MAX_WAIT`]. Only with
    /// [`Delivery::Result`].
    pub wait: Duration,
    pub delivery: Delivery,
    pub gate: Gate,
    pub asked: Asked,
    /// The session the call is made in (`docs/sessions.md`).
    pub session: Option<super::CallSession>,
    /// The caller's model, for the SDK's `llm` (an MCP client that offers
    /// sampling).
    pub sampler: Option<Arc<dyn crate::skill::context::Sampler>>,
    /// The turn of the call this one is made from (a workflow's or an
    /// SDK's `invoke_tool`): an inner call spends the outer call's
    /// budget, in a session or out of one.
    pub budget: Option<Arc<crate::skill::context::TurnBudget>>,
}

/// The tool a call names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A bare tool name, or the `skill__tool` export name of an ambiguous one.
    Tool(String),
    /// A tool of a named skill.
    SkillTool { skill: String, tool: String },
}

/// What the caller wants once the tool starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Its envelope, once it has run.
    Result,
    /// The live run at once, to follow or to leave running.
    Started,
}

/// Who decides whether the call may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// The policy (`docs/design.md` §4): an agent is asking.
    Policy,
    /// The person at the terminal asked for it, which is their approval
    /// (`skilld run`).
    Operator,
}

/// How a call was answered.
pub enum Called {
    /// What would run and the decision; nothing was recorded. Boxed: it
    /// is the largest by far, and the rare answer.
    DryRun(Box<DryRun>),
    /// A standing deny refused it: nothing ran, the attempt is recorded.
    Refused { run_id: Uuid, reason: String },
    /// It waits for a person.
    Held(Held),
    /// It ran (or could not start): the envelope.
    Finished(Arc<Envelope>),
    /// It runs in the background ([`Delivery::Started`]).
    Started {
        live: Arc<LiveRun>,
        events: broadcast::Receiver<RunEvent>,
    },
}

impl Called {
    /// How a call that waits for its run ends: with the envelope, with a
    /// hook's cancel as an error, or `NotRun` when the run ended without
    /// one.
    pub async fn when_finished(live: &LiveRun) -> Result<Self, InvokeError> {
        match live.finished().await {
            Some(envelope) if let Some(again) = super::session::held_again(&envelope) => {
                Ok(Self::Held(again))
            }
            Some(envelope) => match envelope.cancelled_by_hook() {
                Some(reason) => Err(InvokeError::HookCancelled {
                    run_id: live.id,
                    reason,
                }),
                None => Ok(Self::Finished(envelope)),
            },
            None => Err(InvokeError::NotRun {
                run_id: live.id,
                status: RunStatus::Cancelled,
            }),
        }
    }
}

/// What a dry run would do.
#[derive(Debug, Serialize, ToSchema)]
pub struct DryRun {
    /// The program, then its arguments, exactly as they would run.
    pub argv: Vec<String>,
    pub cwd: String,
    /// Names of the environment variables the tool would get.
    pub env: Vec<String>,
    pub timeout_secs: u64,
    pub decision: Verdict,
    pub reason: String,
    /// What the run would be allowed: identity, files, network, limits.
    pub sandbox: crate::sandbox::Allowance,
}

/// The catalog index of the tool a target names: `NotFound` when there is
/// none, `Ambiguous` (with the candidate skills) when a bare name has
/// several.
pub fn resolve(catalog: &Catalog, target: &Target) -> Result<usize, InvokeError> {
    match target {
        Target::Tool(name) => match catalog.tool(name) {
            ToolLookup::Found(i) => Ok(i),
            ToolLookup::Missing => Err(InvokeError::NotFound {
                what: "tool",
                name: name.clone(),
            }),
            ToolLookup::Ambiguous(entries) => Err(InvokeError::Ambiguous {
                tool: name.clone(),
                candidates: entries
                    .iter()
                    .map(|&i| catalog.skills[catalog.tools[i].skill].name.clone())
                    .collect(),
                names: entries
                    .iter()
                    .map(|&i| catalog.tools[i].export_name.clone())
                    .collect(),
            }),
        },
        Target::SkillTool { skill, tool } => {
            catalog.skill_index(skill).ok_or_else(|| InvokeError::NotFound {
                what: "skill",
                name: skill.clone(),
            })?;
            catalog
                .skill_tool(skill, tool)
                .ok_or_else(|| InvokeError::NotFound {
                    what: "tool",
                    name: format!("{skill}/{tool}"),
                })
        }
    }
}

/// The skill (in the version the target names) and the index of its tool.
/// A target naming a version (`name@1.2.0`) may load it: that happens on a
/// blocking thread.
pub async fn locate(catalog: &Arc<Catalog>, target: &Target) -> Result<(Arc<Skill>, usize), InvokeError> {
    let Target::SkillTool { skill, tool } = target else {
        let entry = &catalog.tools[resolve(catalog, target)?];
        return Ok((catalog.skills[entry.skill].clone(), entry.tool));
    };
    let found = if skill.contains('@') {
        let (catalog, spec) = (catalog.clone(), skill.clone());
        tokio::task::spawn_blocking(move || catalog.find(&spec))
            .await
            .map_err(|e| InvokeError::Internal(format!("loading {skill} stopped: {e}")))?
    } else {
        catalog.find(skill)
    };
    let found = found.map_err(|e| match e {
        NotFound::Skill(name) => InvokeError::NotFound { what: "skill", name },
        NotFound::Version { name, version } => InvokeError::NotFound {
            what: "skill version",
            name: format!("{name}@{version}"),
        },
        broken @ NotFound::Broken { .. } => InvokeError::VersionUnavailable(broken.to_string()),
    })?;
    if !found.runnable() {
        return Err(InvokeError::VersionUnavailable(format!(
            "{skill} is {} and its tools cannot be called",
            found.status.map_or("unavailable", |s| s.as_str())
        )));
    }
    let index = found
        .skill
        .tools
        .iter()
        .position(|t| &t.name == tool)
        .ok_or_else(|| InvokeError::NotFound {
            what: "tool",
            name: format!("{skill}/{tool}"),
        })?;
    Ok((found.skill, index))
}

impl Invoker {
    /// Decides a prepared call, then refuses it, holds it or runs it.
    pub(super) async fn decide_call(
        self: &Arc<Self>,
        prepared: Prepared,
        call: &Call,
    ) -> Result<Called, InvokeError> {
        if call.gate == Gate::Operator {
            return self.run(prepared, call).await;
        }
        let (decision, facts) = self
            .judge(&prepared, call.asked.by.as_deref())
            .instrument(tracing::trace_span!("invoke.judge"))
            .await?;
        if call.dry_run {
            return Ok(Called::DryRun(Box::new(dry_run(
                &prepared,
                decision,
                self.allowance(&prepared),
            ))));
        }
        match decision.decision {
            Verdict::Deny => {
                let run_id = self.refuse(&prepared, call.asked.clone()).await?;
                tracing::info!(run = %run_id, reason = %decision.reason, "call refused by a standing deny");
                Ok(Called::Refused {
                    run_id,
                    reason: decision.reason,
                })
            }
            Verdict::Ask => self.ask(&prepared, &facts, call, &decision.reason).await,
            Verdict::Run => self.run(prepared, call).await,
        }
    }

    /// Holds a call for a person; with a wait, answers with its end if it
    /// comes in time. A retry of a call that still waits (the same caller,
    /// tool, arguments, mode and skill hash) joins its request instead of
    /// filing another.
    async fn ask(
        &self,
        prepared: &Prepared,
        facts: &PolicyFacts,
        call: &Call,
        reason: &str,
    ) -> Result<Called, InvokeError> {
        if let Some(held) = self.pending_like(prepared, &call.asked).await? {
            tracing::info!(run = %held.run_id, approval = %held.approval_id, "a retried call joins its pending request");
            return self.await_held(held, call).await;
        }
        let max = self.settings.max_pending_per_caller;
        let waiting = self
            .holds
            .count_pending_by(call.asked.by.as_deref(), chrono::Utc::now())
            .await?;
        if waiting >= max {
            return Err(InvokeError::TooManyPending { waiting, max });
        }
        let held = self.hold(prepared, facts, call.asked.clone()).await?;
        tracing::info!(run = %held.run_id, approval = %held.approval_id, %reason, "call held for approval");
        self.await_held(held, call).await
    }

    /// The answer to a call held for a person: at once, or with a wait its
    /// end if it comes in time.
    pub(super) async fn await_held(&self, held: Held, call: &Call) -> Result<Called, InvokeError> {
        if call.delivery == Delivery::Started || call.wait.is_zero() {
            return Ok(Called::Held(held));
        }
        // Dropped with this future too: a caller that goes away has also
        // stopped waiting.
        let waiting = Waiting {
            holds: self.holds.clone(),
            approval: held.approval_id,
            decided: false,
        };
        let run = self.follower.wait_final(held.run_id, call.wait).await?;
        if !run.status.is_final() {
            return Ok(Called::Held(held));
        }
        waiting.decided();
        let envelope = self.ended(run).await?;
        Ok(match super::session::held_again(&envelope) {
            Some(again) => Called::Held(again),
            None => Called::Finished(envelope),
        })
    }

    /// The envelope of a held run that ended, or why there is none (a
    /// denial carries the approver's note).
    pub(super) async fn ended(&self, run: Run) -> Result<Arc<Envelope>, InvokeError> {
        if let Some(result) = run.result
            && let Ok(envelope) = serde_json::from_value::<Envelope>(result)
        {
            if let Some(reason) = envelope.cancelled_by_hook() {
                return Err(InvokeError::HookCancelled {
                    run_id: run.id,
                    reason,
                });
            }
            return Ok(Arc::new(envelope));
        }
        Err(match run.status {
            RunStatus::Denied => InvokeError::Denied {
                run_id: run.id,
                note: run.note.filter(|n| !n.is_empty()),
            },
            RunStatus::Expired => InvokeError::ApprovalExpired(run.id),
            status => InvokeError::NotRun {
                run_id: run.id,
                status,
            },
        })
    }

    /// Starts a call that may run, and answers as its delivery asks.
    async fn run(self: &Arc<Self>, prepared: Prepared, call: &Call) -> Result<Called, InvokeError> {
        let (live, events) = self.start(prepared, call.asked.clone()).await?;
        if call.delivery == Delivery::Started {
            return Ok(Called::Started { live, events });
        }
        drop(events);
        Called::when_finished(&live).await
    }
}

/// A caller waiting for a person's decision. Dropped before the decision
/// came (its wait ran out, or the caller went away), it notes on the
/// request that nobody waits for the answer any more, for the approver.
struct Waiting {
    holds: Arc<dyn crate::store::Holds>,
    approval: Uuid,
    decided: bool,
}

impl Waiting {
    fn decided(mut self) {
        self.decided = true;
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if self.decided {
            return;
        }
        let (holds, approval) = (self.holds.clone(), self.approval);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Err(e) = holds.mark_caller_left(approval, chrono::Utc::now()).await {
                    tracing::warn!(%approval, error = %e, "cannot note that the caller stopped waiting");
                }
            });
        }
    }
}

fn dry_run(p: &Prepared, decision: Decision, sandbox: crate::sandbox::Allowance) -> DryRun {
    DryRun {
        argv: p.argv.clone(),
        cwd: p.cwd.display().to_string(),
        env: p.env.iter().map(|(k, _)| k.clone()).collect(),
        timeout_secs: p.timeout.as_secs(),
        decision: decision.decision,
        reason: decision.reason,
        sandbox,
    }
}
