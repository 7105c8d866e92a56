//! The stage before anything runs: a call checked, rendered and judged
//! into a [`Prepared`], then a slot taken and its run recorded as started.

use super::{Call, InvokeError, Invoker, LiveRun, MAX_WAIT, RunEvent, args};
use crate::policy::{self, Decision};
use crate::runner;
use crate::skill::template::RenderError;
use crate::skill::{Action, Skill, Tool};
use crate::store::{GrantDecision, NewRun, PolicyFacts, RunStatus};
use chrono::Utc;
use serde_json::{Map, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, broadcast};
use tracing::Instrument as _;
use uuid::Uuid;

/// A call, fully checked and rendered, ready to be recorded and run.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub skill: Arc<Skill>,
    pub tool: usize,
    pub arguments: Map<String, Value>,
    /// The program first, then its arguments, exactly as they will run.
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    pub env: Vec<(String, String)>,
    pub timeout: Duration,
    pub mode: String,
    /// The caller's `Idempotency-Key`, recorded on the call's run.
    pub idempotency_key: Option<String>,
    /// The session the call was made in: its skills' hooks wrap it.
    pub session: Option<Arc<super::session::Bound>>,
    /// Who asked for the call.
    pub asked: Asked,
    /// A person approved this very input: a hook that changes it sends
    /// the call back for approval.
    pub approved: bool,
    /// The caller's model, for the SDK's `llm`.
    pub sampler: Option<Arc<dyn crate::skill::context::Sampler>>,
    /// The outer call's turn, for an inner call ([`super::Call::budget`]).
    pub budget: Option<Arc<crate::skill::context::TurnBudget>>,
}

impl Prepared {
    pub fn tool(&self) -> &Tool {
        &self.skill.tools[self.tool]
    }
}

impl Invoker {
    /// Checks and renders a call of tool `tool` of `skill` as `call` asks
    /// (in its mode, when it names one). Nothing is decided, recorded or
    /// started.
    pub(super) fn prepare_call(
        &self,
        skill: Arc<Skill>,
        tool: usize,
        call: &Call,
    ) -> Result<Prepared, InvokeError> {
        if let Some(mode) = &call.mode {
            in_mode(&skill, tool, mode)?;
        }
        let mut p = self.prepare(skill, tool, &call.arguments, call.mode.as_deref())?;
        p.asked = call.asked.clone();
        p.sampler = call.sampler.clone();
        p.budget = call.budget.clone();
        Ok(p)
    }

    /// Validates and renders a call of tool `tool` of `skill`. Nothing is
    /// decided, recorded or started.
    pub fn prepare(
        &self,
        skill: Arc<Skill>,
        tool: usize,
        arguments: &Value,
        mode: Option<&str>,
    ) -> Result<Prepared, InvokeError> {
        let index = tool;
        let tool = &skill.tools[index];
        if let Some(wait) = &skill.deps_wait {
            return Err(InvokeError::DependenciesNotReady {
                skill: skill.name.clone(),
                why: wait.why.clone(),
            });
        }
        if let Some(need) = skill.undeclared_need() {
            return Err(InvokeError::PermissionNotDeclared {
                skill: skill.name.clone(),
                tool: tool.name.clone(),
                permission: need.permission,
                why: need.why,
            });
        }
        let empty = Map::new();
        let args = arguments_of(arguments)?.unwrap_or(&empty);
        let arguments = args::validate(tool, args).map_err(|errors| InvokeError::InvalidArguments {
            tool: tool.name.clone(),
            errors,
        })?;
        let mode = valid_mode(mode.unwrap_or("Global"))?.to_owned();
        let (argv, cwd) = self.command_line(&skill, tool, &arguments)?;
        // A backend's child got its environment when it started; a call
        // sets none.
        let env = if matches!(tool.action, Action::Backend | Action::Workflow) {
            Vec::new()
        } else {
            let mut env = runner::child_env(&skill.name, &skill.dir, &mode, &self.settings.extra_env);
            if let Some(deps) = &skill.deps {
                runner::with_deps(&mut env, deps);
            }
            env
        };
        Ok(Prepared {
            timeout: Duration::from_secs(skill.timeout_secs),
            tool: index,
            skill,
            arguments,
            argv,
            cwd,
            env,
            mode,
            idempotency_key: None,
            session: None,
            asked: Asked::default(),
            approved: false,
            sampler: None,
            budget: None,
        })
    }

    /// The exact argv and working directory of a call of `tool`.
    fn command_line(
        &self,
        skill: &Skill,
        tool: &Tool,
        arguments: &Map<String, Value>,
    ) -> Result<(Vec<String>, PathBuf), InvokeError> {
        Ok(match &tool.action {
            Action::Command { template, program } => {
                let mut argv = vec![program.clone()];
                argv.extend(
                    template
                        .render(arguments)
                        .map_err(|e| render_error(&tool.name, e))?,
                );
                (argv, self.settings.workspace.clone())
            }
            Action::Script { path, runtime } => {
                let mut argv = runner::deps_command(runtime.clone(), skill.deps.as_deref());
                argv.push(path.display().to_string());
                if let Some(Value::Array(items)) = arguments.get("args") {
                    argv.extend(items.iter().filter_map(|v| v.as_str().map(str::to_owned)));
                }
                (argv, self.settings.workspace.clone())
            }
            Action::Entrypoint { path, runtime } => {
                let mut argv = runner::deps_command(runtime.clone(), skill.deps.as_deref());
                argv.push(path.display().to_string());
                // The run directory is made when the run starts.
                (argv, self.settings.scratch_dir.clone())
            }
            // The record names the child that runs it; the tool and its
            // input are the run's own fields.
            Action::Backend | Action::Workflow => (
                skill
                    .backend
                    .as_ref()
                    .map(|b| b.command_line())
                    .unwrap_or_default(),
                self.settings.workspace.clone(),
            ),
        })
    }

    /// The policy's decision for a prepared call (`docs/design.md` §4),
    /// with the store's facts it rests on. Fails closed: without the
    /// store, nothing is decided and nothing runs.
    ///
    /// An allow grant that caller `by`'s own token made is not a person's
    /// decision on its calls (an agent must not approve itself, ahead of
    /// time either): the call is judged as if there were none.
    pub async fn judge(
        &self,
        p: &Prepared,
        by: Option<&str>,
    ) -> Result<(Decision, PolicyFacts), InvokeError> {
        let mut facts = self
            .holds
            .policy_facts(&p.skill.name, &p.tool().name, &p.skill.hash)
            .await?;
        if by.is_some() && facts.grant == Some(GrantDecision::Allow) && facts.grant_by.as_deref() == by {
            facts.grant = None;
            facts.hash_approved = false;
        }
        Ok((policy::decide(&p.skill, p.tool(), &facts), facts))
    }

    /// Takes a slot for a run of `tool`, waiting a bounded time.
    async fn slot(&self, tool: &str) -> Result<(OwnedSemaphorePermit, OwnedSemaphorePermit), InvokeError> {
        let per_tool = self.per_tool_semaphore(tool);
        let wait = self.settings.queue_timeout;
        let busy = || InvokeError::Busy {
            retry_after_secs: wait.as_secs().max(1),
        };
        let tool_permit = tokio::time::timeout(wait, per_tool.acquire_owned())
            .await
            .map_err(|_| busy())?
            .map_err(|_| InvokeError::ShuttingDown)?;
        let global_permit = tokio::time::timeout(wait, self.global.clone().acquire_owned())
            .await
            .map_err(|_| busy())?
            .map_err(|_| InvokeError::ShuttingDown)?;
        Ok((global_permit, tool_permit))
    }

    /// Records the call as running and starts it in the background (one
    /// write before the spawn). The returned live run says when it is
    /// done; the receiver sees every event of the run.
    pub async fn start(
        self: &Arc<Self>,
        prepared: Prepared,
        asked: Asked,
    ) -> Result<(Arc<LiveRun>, broadcast::Receiver<RunEvent>), InvokeError> {
        if self.runs.is_closed() {
            return Err(InvokeError::ShuttingDown);
        }
        let permits = self
            .slot(&prepared.tool().name)
            .instrument(tracing::trace_span!("invoke.slot"))
            .await?;
        let mut record = self.new_run(&prepared, RunStatus::Running, asked, None);
        record.started_at = Some(record.created_at);
        record.instance = Some(self.settings.instance.clone());
        let id = record.id;
        // Fail closed: what cannot be recorded does not run.
        self.run_log
            .insert_run(record)
            .instrument(tracing::trace_span!("invoke.insert_run"))
            .await?;
        let (live, events) = self.runs.register(id);
        let this = self.clone();
        let task_live = live.clone();
        // From here to the task's first poll: the hand-off between tasks.
        let handoff = tracing::trace_span!("invoke.handoff");
        tokio::spawn(async move {
            drop(handoff);
            let _permits = permits;
            this.execute(task_live, prepared).await;
        });
        Ok((live, events))
    }

    /// A new run record for `p`, created now.
    pub(super) fn new_run(
        &self,
        p: &Prepared,
        status: RunStatus,
        asked: Asked,
        approval_id: Option<Uuid>,
    ) -> NewRun {
        NewRun {
            id: Uuid::now_v7(),
            skill: p.skill.name.clone(),
            tool: p.tool().name.clone(),
            skill_hash: p.skill.hash.clone(),
            arguments: Value::Object(p.arguments.clone()),
            argv: p.argv.clone(),
            cwd: p.cwd.display().to_string(),
            status,
            requested_by: asked.by,
            approval_id,
            created_at: Utc::now(),
            started_at: None,
            instance: None,
            mode: Some(p.mode.clone()),
            request_id: asked.request_id,
            skill_version: p.skill.version.clone(),
            idempotency_key: p.idempotency_key.clone(),
            session: p.session.as_ref().map(|bound| bound.session),
        }
    }

    /// Waits as long as it takes for a slot; `None` when the server is
    /// shutting down.
    pub(super) async fn slot_waiting(
        &self,
        tool: &str,
    ) -> Option<(OwnedSemaphorePermit, OwnedSemaphorePermit)> {
        let per_tool = self.per_tool_semaphore(tool);
        let tool_permit = per_tool.acquire_owned().await.ok()?;
        let global_permit = self.global.clone().acquire_owned().await.ok()?;
        Some((global_permit, tool_permit))
    }

    pub(super) fn per_tool_semaphore(&self, tool: &str) -> Arc<Semaphore> {
        let mut map = self
            .per_tool
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.entry(tool.to_owned())
            .or_insert_with(|| Arc::new(Semaphore::new(self.settings.max_concurrent_per_tool.max(1))))
            .clone()
    }
}

/// Who asked for a call, for the record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Asked {
    /// The token's name (`requested_by`), or who is at the terminal.
    pub by: Option<String>,
    /// The `x-request-id` of the request that made it.
    pub request_id: Option<String>,
}

/// The longest `mode` taken.
const MAX_MODE_CHARS: usize = 32;

/// A mode reaches the tool as `SKILL_MODE` and the approver's screen: a
/// short name (`Global`, `Dev`), not a place to smuggle text.
pub(super) fn valid_mode(mode: &str) -> Result<&str, InvokeError> {
    let ok = (1..=MAX_MODE_CHARS).contains(&mode.len())
        && mode
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if ok {
        Ok(mode)
    } else {
        Err(InvokeError::InvalidMode { max: MAX_MODE_CHARS })
    }
}

/// The arguments of a call as an object (`None` for `null`, which reads
/// as none); anything else is refused.
fn arguments_of(arguments: &Value) -> Result<Option<&Map<String, Value>>, InvokeError> {
    let kind = match arguments {
        Value::Object(map) => return Ok(Some(map)),
        Value::Null => return Ok(None),
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
    };
    Err(InvokeError::NotAnObject(kind))
}

/// A caller may wait at most [`MAX_WAIT`] for a held call or a run.
pub(super) fn check_wait(wait: Duration) -> Result<(), InvokeError> {
    if wait > MAX_WAIT {
        return Err(InvokeError::WaitTooLong);
    }
    Ok(())
}

/// The checks the pipeline makes of every call that need no tool (its
/// wait, its arguments' kind and its mode), for the answers that do not
/// reach the pipeline, so that a request one route refuses is refused by
/// all.
pub fn check_request(arguments: &Value, mode: Option<&str>, wait: Duration) -> Result<(), InvokeError> {
    check_wait(wait)?;
    arguments_of(arguments)?;
    if let Some(mode) = mode {
        valid_mode(mode)?;
    }
    Ok(())
}

/// Refuses a call made in a mode its tool's skill does not serve in (seed
/// 000 §7.2): what a listing in that mode hides cannot be called in it.
/// A call that names no mode is not checked, as a listing without one
/// shows every tool.
fn in_mode(skill: &Skill, tool: usize, mode: &str) -> Result<(), InvokeError> {
    let mode = valid_mode(mode)?;
    if skill.in_mode(mode) {
        return Ok(());
    }
    Err(InvokeError::NotInMode {
        tool: skill.tools[tool].name.clone(),
        skill: skill.name.clone(),
        mode: mode.to_owned(),
        modes: skill.modes.clone(),
    })
}

fn render_error(tool: &str, e: RenderError) -> InvokeError {
    match e {
        RenderError::ArgumentInjection { param } => InvokeError::ArgumentInjection {
            tool: tool.to_owned(),
            param,
        },
        RenderError::Nul { param } => InvokeError::Nul {
            tool: tool.to_owned(),
            param,
        },
        RenderError::MissingInWord { param, word } => InvokeError::MissingInWord {
            tool: tool.to_owned(),
            param,
            word,
        },
    }
}
