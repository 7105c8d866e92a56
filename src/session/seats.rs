//! The session runtime as the pipeline sees it: binding a call to its
//! session's hooks, and other tools called from a backend's SDK
//! (`invoke_tool`) through the same pipeline.

use super::Sessions;
use super::dispatch::handles;
use crate::invoke::{Asked, Bound, Call, Called, Delivery, Gate, InvokeError, Seat, SessionSeats, Target};
use crate::skill::backend::BoxFuture;
use crate::skill::context::{CallContext, ToolCaller, TurnBudget};
use crate::skill::phases::Phase;
use serde_json::Value;
use std::sync::{Arc, Weak};
use uuid::Uuid;

impl SessionSeats for Sessions {
    fn bind<'a>(
        &'a self,
        session: Uuid,
        caller: Option<&'a str>,
        skill: &'a str,
    ) -> BoxFuture<'a, Result<Arc<Bound>, InvokeError>> {
        Box::pin(async move {
            let record = self.store.get_session(session).await?;
            let record = record
                .filter(|r| r.expires_at > chrono::Utc::now() && r.caller.as_deref() == caller)
                .ok_or(InvokeError::SessionNotFound(session))?;
            let state: super::state::SessionState = serde_json::from_value(record.state)
                .map_err(|e| InvokeError::Internal(format!("session {session} cannot be read: {e}")))?;
            if !state.is_active(skill) {
                return Err(InvokeError::SkillNotActive {
                    skill: skill.to_owned(),
                    session,
                });
            }
            let catalog = self.catalog();
            let seats = Self::ordered(&catalog, state.active())
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
            let context = self.context_of(session, record.turn, record.caller);
            Ok(Arc::new(Bound {
                session,
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

/// Other tools, called by a backend through the pipeline, as the call's
/// caller and in its session.
#[derive(Debug)]
pub(super) struct SessionTools {
    pub sessions: Weak<Sessions>,
    pub session: Option<Uuid>,
    pub caller: Option<String>,
}

impl ToolCaller for SessionTools {
    fn call_tool(&self, from: &str, tool: &str, input: Value) -> BoxFuture<'_, Result<Value, String>> {
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
                session: self.session,
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
