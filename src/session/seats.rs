//! The session runtime as the pipeline sees it: binding a call to its
//! session's hooks, and other tools called from a backend's SDK
//! (`invoke_tool`) through the same pipeline.

use super::Sessions;
use super::dispatch::handles;
use super::state::{Lifecycle, SessionState};
use crate::invoke::{
    Asked, Bound, Call, CallSession, Called, Delivery, Gate, InvokeError, Seat, SessionSeats, Target,
};
use crate::skill::Skill;
use crate::skill::backend::BoxFuture;
use crate::skill::context::{CallContext, ToolCaller, TurnBudget};
use crate::skill::phases::Phase;
use serde_json::Value;
use std::sync::{Arc, Weak};
use uuid::Uuid;

impl SessionSeats for Sessions {
    fn bind<'a>(
        &'a self,
        session: &'a CallSession,
        caller: Option<&'a str>,
        skill: &'a Skill,
    ) -> BoxFuture<'a, Result<Arc<Bound>, InvokeError>> {
        Box::pin(async move {
            let id = session.id;
            let record = self.store.get_session(id).await?;
            let record = record
                .filter(|r| r.expires_at > chrono::Utc::now() && r.caller.as_deref() == caller)
                .ok_or(InvokeError::SessionNotFound(id))?;
            super::secret::check(&record, &session.proof).map_err(|why| InvokeError::SessionLocked {
                session: id,
                why: why.says(),
            })?;
            let state: SessionState = serde_json::from_value(record.state)
                .map_err(|e| InvokeError::Internal(format!("session {id} cannot be read: {e}")))?;
            seated_target(&state, id, skill)?;
            let catalog = self.catalog();
            let seats = Self::seated(&catalog, &state)
                .into_iter()
                .filter_map(|s| {
                    let (before, after) = (
                        handles(&s, Phase::BeforeToolCall),
                        handles(&s, Phase::AfterToolResult),
                    );
                    let backend = s.backend.clone()?;
                    (before || after).then(|| Seat {
                        skill: s.name.clone(),
                        backend,
                        before,
                        after,
                    })
                })
                .collect();
            let context = self.context_of(id, record.turn, record.caller);
            Ok(Arc::new(Bound {
                session: id,
                seats,
                context,
            }))
        })
    }

    fn alone(&self, asked: &Asked) -> CallContext {
        CallContext {
            session: None,
            budget: Arc::new(TurnBudget::new(self.turn_limits)),
            sampler: None,
            tools: Some(Arc::new(SessionTools {
                sessions: self.me(),
                session: None,
                caller: asked.by.clone(),
            })),
        }
    }
}

impl Sessions {
    /// The context of session `id`'s turn `turn`, whose caller is `caller`.
    pub(super) fn context_of(&self, id: Uuid, turn: u32, caller: Option<String>) -> CallContext {
        CallContext {
            session: Some(id),
            budget: self.budget(id, turn),
            sampler: None,
            tools: Some(Arc::new(SessionTools {
                sessions: self.me(),
                session: Some(id),
                caller,
            })),
        }
    }
}

/// Refuses a call of `skill` in session `id` unless the skill is active
/// there as the version that was allowed in.
fn seated_target(state: &SessionState, id: Uuid, skill: &Skill) -> Result<(), InvokeError> {
    let entry = state
        .skills
        .get(&skill.name)
        .filter(|s| s.state == Lifecycle::Active);
    match entry {
        None => Err(InvokeError::SkillNotActive {
            skill: skill.name.clone(),
            session: id,
        }),
        Some(s) if s.hash != skill.hash => Err(InvokeError::SkillChangedInSession {
            skill: skill.name.clone(),
            session: id,
        }),
        Some(_) => Ok(()),
    }
}

/// Other tools, called by a backend through the pipeline, as the call's
/// caller and in its session.
#[derive(Debug)]
pub(super) struct SessionTools {
    pub sessions: Weak<Sessions>,
    pub session: Option<Uuid>,
    pub caller: Option<String>,
}

impl ToolCaller for SessionTools {
    fn call_tool(
        &self,
        from: &str,
        tool: &str,
        input: Value,
        budget: Arc<TurnBudget>,
    ) -> BoxFuture<'_, Result<Value, String>> {
        let (from, tool) = (from.to_owned(), tool.to_owned());
        Box::pin(async move {
            let sessions = self.sessions.upgrade().ok_or("the server is stopping")?;
            let invoker = sessions.invoker.upgrade().ok_or("the server is stopping")?;
            let call = Call {
                target: Target::Tool(tool.clone()),
                arguments: input,
                mode: None,
                dry_run: false,
                wait: crate::invoke::MAX_WAIT,
                delivery: Delivery::Result,
                gate: Gate::Policy,
                asked: Asked {
                    by: self.caller.clone(),
                    request_id: Some(format!("invoke_tool from {from}")),
                },
                sampler: None,
                budget: Some(budget),
                session: self.session.map(CallSession::within),
            };
            match invoker.call(&sessions.catalog(), call).await {
                Ok(Called::Finished(envelope)) => serde_json::to_value(&*envelope).map_err(|e| e.to_string()),
                Ok(Called::Held(held)) => Err(format!(
                    "{tool} is held for a person's approval (run {}) and was not decided in time",
                    held.run_id
                )),
                Ok(Called::Refused { reason, run_id }) => {
                    Err(format!("{tool} was refused (run {run_id}): {reason}"))
                }
                Ok(_) => Err(format!("{tool} did not finish")),
                Err(e) => Err(e.to_string()),
            }
        })
    }
}
