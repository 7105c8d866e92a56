//! A call made in a session (`docs/sessions.md`): the session names the
//! skills active in it, and the `before_tool_call` and
//! `after_tool_result` hooks of every one of them wrap the call, in seed
//! 002's priority order. The session runtime lives above this module; it
//! hands the pipeline a [`SessionSeats`] that binds a call to its session.

use super::hooks::Step;
use super::{Envelope, InvokeError, Prepared};
use crate::skill::backend::{Backend, BoxFuture, HookCall};
use crate::skill::context::CallContext;
use crate::skill::phases::Phase;
use crate::store::RunStatus;
use serde_json::{Map, Value, json};
use std::sync::Arc;
use uuid::Uuid;

/// The session a call names, and what shows that it may steer it: a
/// session is a capability (`docs/sessions.md`).
#[derive(Clone)]
pub struct CallSession {
    pub id: Uuid,
    pub proof: SessionProof,
}

/// What shows a call may be made in its session.
#[derive(Clone)]
pub enum SessionProof {
    /// The session's secret, as the caller sent it (if it did).
    Secret(Option<String>),
    /// Made by skilld itself in the session (a workflow's or an SDK's
    /// `invoke_tool`, a held call a person approved): the request that
    /// began it showed its right.
    Within,
}

impl CallSession {
    /// Session `id`, named by the caller with `secret`.
    pub fn named(id: Uuid, secret: Option<String>) -> Self {
        Self {
            id,
            proof: SessionProof::Secret(secret),
        }
    }

    /// Session `id`, from within it.
    pub fn within(id: Uuid) -> Self {
        Self {
            id,
            proof: SessionProof::Within,
        }
    }
}

/// Never the secret itself: a call is logged with `{:?}`.
impl std::fmt::Debug for CallSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let proof = match &self.proof {
            SessionProof::Secret(Some(_)) => "secret",
            SessionProof::Secret(None) => "none",
            SessionProof::Within => "within",
        };
        f.debug_struct("CallSession")
            .field("id", &self.id)
            .field("proof", &proof)
            .finish()
    }
}

/// Binds calls to the sessions they name.
pub trait SessionSeats: Send + Sync {
    /// The session a call of `skill` by `caller` names, as it sees it;
    /// refuses a session that is over or another caller's (as not found),
    /// one its proof does not open, and a skill that is not active in it
    /// as it was allowed in.
    fn bind<'a>(
        &'a self,
        session: &'a CallSession,
        caller: Option<&'a str>,
        skill: &'a crate::skill::Skill,
    ) -> BoxFuture<'a, Result<Arc<Bound>, InvokeError>>;

    /// The context of a call made outside any session by `asked`: a turn
    /// of its own, and other tools called as that caller.
    fn alone(&self, asked: &super::Asked) -> CallContext;
}

/// A call's session: the hooks around it and its context.
#[derive(Debug, Clone)]
pub struct Bound {
    pub session: Uuid,
    /// The active skills with a tool phase, in priority order.
    pub seats: Vec<Seat>,
    pub context: CallContext,
}

/// An active skill whose hooks wrap the session's calls.
#[derive(Debug, Clone)]
pub struct Seat {
    pub skill: String,
    pub backend: Arc<dyn Backend>,
    pub before: bool,
    pub after: bool,
}

/// What one skill's hook did to a call, for the envelope.
fn effect(seat: &Seat, phase: Phase, effect: &str, detail: Option<Value>) -> super::HookEffect {
    super::HookEffect {
        phase: phase.as_str().to_owned(),
        effect: effect.to_owned(),
        detail,
        skill: Some(seat.skill.clone()),
    }
}

/// How the call goes on after the session's `before_tool_call` hooks.
pub(super) enum Before {
    /// With this input (changed or not).
    Go(Map<String, Value>),
    Cancel {
        skill: String,
        reason: String,
    },
    Failed(crate::skill::backend::BackendError),
}

/// Runs every seat's `before_tool_call` in order, each seeing the input
/// the one before it left.
pub(super) async fn before(p: &Prepared, bound: &Bound, effects: &mut Vec<super::HookEffect>) -> Before {
    let mut input = p.arguments.clone();
    for seat in bound.seats.iter().filter(|s| s.before) {
        let payload = json!({
            "input": input, "tool": p.tool().name, "skill": p.skill.name, "session": bound.session,
        });
        let answer = seat
            .backend
            .hook(call(Phase::BeforeToolCall, p, payload, bound))
            .await;
        let (mut done, step) = super::hooks::read_before(p, answer);
        done.skill = Some(seat.skill.clone());
        effects.push(done);
        match step {
            Step::Keep => {}
            Step::Input(changed) => input = changed,
            Step::Cancel(reason) => {
                let skill = seat.skill.clone();
                return Before::Cancel { skill, reason };
            }
            Step::Failed(why) => {
                let skill = &seat.skill;
                return Before::Failed(
                    why.reworded(|w| format!("{skill}'s before_tool_call hook failed: {w}")),
                );
            }
        }
    }
    Before::Go(input)
}

/// Runs every seat's `after_tool_result` in order, each seeing the result
/// the one before it left. A failing hook fails the call; the result so
/// far is kept for the record.
pub(super) async fn after(
    p: &Prepared,
    bound: &Bound,
    envelope: &mut Envelope,
    effects: &mut Vec<super::HookEffect>,
) {
    for seat in bound.seats.iter().filter(|s| s.after) {
        let payload = json!({
            "input": p.arguments, "result": envelope, "tool": p.tool().name, "skill": p.skill.name,
            "session": bound.session,
        });
        let outcome = seat
            .backend
            .hook(call(Phase::AfterToolResult, p, payload, bound))
            .await
            .and_then(|answer| super::hooks::apply(answer, envelope));
        match outcome {
            Ok(mut e) => {
                e.skill = Some(seat.skill.clone());
                effects.push(e);
            }
            Err(why) => {
                let detail = Some(Value::String(why.to_string()));
                effects.push(effect(seat, Phase::AfterToolResult, "failed", detail));
                let skill = &seat.skill;
                envelope.fail_for_backend(
                    &why.reworded(|w| format!("{skill}'s after_tool_result hook failed: {w}")),
                );
                return;
            }
        }
    }
}

fn call(phase: Phase, p: &Prepared, payload: Value, bound: &Bound) -> HookCall {
    HookCall {
        phase,
        tool: Some(p.tool().name.clone()),
        payload,
        timeout: super::hooks::HOOK_TIMEOUT,
        context: bound.context.clone(),
    }
}

impl super::Invoker {
    /// Runs the session's `before_tool_call` hooks of a recorded call: the
    /// call as it goes on, with what the hooks did, or `None` when they
    /// ended it (a cancel, a failure, or a changed input that a person
    /// must see again).
    pub(super) async fn session_before(
        &self,
        live: &Arc<super::LiveRun>,
        p: Prepared,
    ) -> Option<(Prepared, Vec<super::HookEffect>)> {
        let mut effects = Vec::new();
        let Some(bound) = p.session.clone() else {
            return Some((p, effects));
        };
        let end = |why: &str| Envelope::not_started(live.id, &p.skill.name, &p.tool().name, why);
        let (status, mut envelope) = match before(&p, &bound, &mut effects).await {
            Before::Go(input) if input == p.arguments => return Some((p, effects)),
            Before::Go(input) if p.approved => self.hold_again(live, &p, input, &mut effects).await,
            Before::Go(input) => match self.with_input(&p, input) {
                Ok(changed) => return Some((changed, effects)),
                Err(why) => (RunStatus::Failed, end(&why)),
            },
            Before::Cancel { skill, reason } => {
                let why = format!("cancelled by {skill}'s before_tool_call hook: {reason}");
                (RunStatus::Cancelled, end(&why))
            }
            Before::Failed(why) => {
                let envelope = Envelope::backend_failed(live.id, &p.skill.name, &p.tool().name, &why);
                (RunStatus::Failed, envelope)
            }
        };
        envelope.hooks = Some(effects);
        self.end(live, status, envelope).await;
        None
    }

    /// The context a backend's call of `p` runs in.
    pub(super) fn context_of(&self, p: &Prepared) -> CallContext {
        let mut context = match (&p.session, self.sessions.get()) {
            (Some(bound), _) => bound.context.clone(),
            (None, Some(seats)) => seats.alone(&p.asked),
            (None, None) => CallContext::alone(self.settings.turn_limits),
        };
        if p.sampler.is_some() {
            context.sampler = p.sampler.clone();
        }
        if let Some(budget) = &p.budget {
            context.budget = budget.clone();
        }
        context
    }

    /// `p` with the input a hook gave, rendered again (a command's words
    /// come from its input).
    fn with_input(&self, p: &Prepared, input: Map<String, Value>) -> Result<Prepared, String> {
        let mut changed = self
            .prepare(p.skill.clone(), p.tool, &Value::Object(input), Some(&p.mode))
            .map_err(|e| format!("the input a before_tool_call hook gave cannot run: {e}"))?;
        changed.idempotency_key = p.idempotency_key.clone();
        changed.session = p.session.clone();
        changed.asked = p.asked.clone();
        changed.sampler = p.sampler.clone();
        changed.budget = p.budget.clone();
        Ok(changed)
    }

    /// A call a person approved whose input a hook changed: the person
    /// approved other input, so the changed call is held for approval
    /// again (in the same session), and this run ends saying where.
    async fn hold_again(
        &self,
        live: &Arc<super::LiveRun>,
        p: &Prepared,
        input: Map<String, Value>,
        effects: &mut Vec<super::HookEffect>,
    ) -> (RunStatus, Envelope) {
        let end = |why: &str| Envelope::not_started(live.id, &p.skill.name, &p.tool().name, why);
        let changed = match self.with_input(p, input) {
            Ok(changed) => changed,
            Err(why) => return (RunStatus::Failed, end(&why)),
        };
        let held = match self.judge(&changed, p.asked.by.as_deref()).await {
            Ok((_, facts)) => self.hold(&changed, &facts, p.asked.clone()).await,
            Err(e) => Err(e),
        };
        match held {
            Ok(held) => {
                effects.push(super::HookEffect {
                    phase: Phase::BeforeToolCall.as_str().to_owned(),
                    effect: HELD_AGAIN.to_owned(),
                    detail: Some(json!({"run_id": held.run_id, "approval_id": held.approval_id})),
                    skill: None,
                });
                let why = format!(
                    "a before_tool_call hook changed the input a person approved; the changed call \
                     waits for approval as run {}",
                    held.run_id
                );
                (RunStatus::Cancelled, end(&why))
            }
            Err(e) => {
                let why = format!("a hook changed the approved input, and it cannot be held again: {e}");
                (RunStatus::Failed, end(&why))
            }
        }
    }
}

/// The effect of a changed input sent back for approval.
pub(super) const HELD_AGAIN: &str = "held_again";

/// The call an envelope says was held again, if it was.
pub(super) fn held_again(envelope: &Envelope) -> Option<super::Held> {
    let effect = envelope.hooks.iter().flatten().find(|h| h.effect == HELD_AGAIN)?;
    let detail = effect.detail.as_ref()?;
    let id = |key: &str| detail.get(key)?.as_str()?.parse::<Uuid>().ok();
    Some(super::Held {
        run_id: id("run_id")?,
        approval_id: id("approval_id")?,
    })
}
