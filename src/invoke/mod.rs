//! The invoke pipeline: resolve → validate → render → decide → record →
//! run → record. HTTP, the command line (and later MCP) all call
//! [`Invoker::call`], so a call behaves the same whichever way it arrives;
//! approvals, following a run and cancelling it live here too, so that the
//! adapters only translate.

mod approve;
pub mod args;
mod call;
mod cancel;
mod confine;
mod envelope;
mod error;
mod follow;
mod hooks;
mod inbox;
mod live;
mod retry;
mod rundir;

pub use crate::artifacts::Artifact;
pub use approve::{Held, Ruling};
pub use call::{Call, Called, Delivery, DryRun, Gate, Target, locate, resolve};
pub use cancel::{Cancelled, Canceller};
pub use confine::WORKSPACE_WRITE;
pub use envelope::Envelope;
pub use error::{FieldError, InvokeError};
pub use follow::StreamPermit;
pub use hooks::HookEffect;
pub use inbox::InboxEvent;
pub use live::{LiveRun, RunEvent, Runs};
pub use retry::{IdempotencyKey, KEY_KEPT};

use crate::backend::{ChildSettings, Launcher};
use crate::policy::{self, Decision};
use crate::runner::{self, Limits, Spec};
use crate::sandbox::Sandbox;
use crate::skill::backend::{Backend, BackendCall, Launch};
use crate::skill::template::RenderError;
use crate::skill::{Action, Skill, Tool};
use crate::store::{NewRun, PolicyFacts, RunStatus, Store};
use chrono::Utc;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, broadcast};
use uuid::Uuid;

/// The longest a caller may wait for a held call or a run to end.
pub const MAX_WAIT: Duration = Duration::from_secs(300);

/// How long a run must last before its process group is written to the
/// run log (see `Invoker::execute`).
const PGID_RECORD_DELAY: Duration = Duration::from_millis(100);

/// How runs are carried out on this server.
#[derive(Debug, Clone)]
pub struct RunSettings {
    /// Working directory of command and script tools.
    pub workspace: PathBuf,
    /// Where the server keeps its database; no tool may read it.
    pub data_dir: PathBuf,
    /// Each run gets `<scratch_dir>/<run id>`, its only writable place
    /// besides a workspace it declared it writes (`file:write`); an
    /// entrypoint's artifacts stay there, in `out/files`.
    pub scratch_dir: PathBuf,
    /// How long a finished run's directory (an entrypoint's artifacts)
    /// is kept.
    pub artifact_ttl: Duration,
    /// Where an entrypoint's artifacts go when its run ends.
    pub artifacts: crate::artifacts::ArtifactStore,
    /// How tools are confined (`docs/design.md` §9).
    pub sandbox: crate::sandbox::Settings,
    /// SIGTERM → SIGKILL delay.
    pub grace: Duration,
    /// Limits applied to every child unless its skill sets tighter ones.
    pub limits: Limits,
    /// Runs at once, over all tools.
    pub max_concurrent: usize,
    /// Runs at once of any one tool.
    pub max_concurrent_per_tool: usize,
    /// How long a call waits for a free slot before 429.
    pub queue_timeout: Duration,
    /// Names of this instance, recorded on the runs it executes.
    pub instance: String,
    /// Extra environment variables passed through to children.
    pub extra_env: Vec<String>,
    /// How long an approval request waits for a decision.
    pub approval_ttl: Duration,
    /// Requests one caller may have waiting at once (then 429), so one
    /// token cannot bury the approvers' inbox.
    pub max_pending_per_caller: u64,
    /// Callers (token names, `sub@issuer` of OAuth) who decide their own
    /// held calls in their MCP client (`client_approval`, `docs/mcp.md`).
    pub client_approval: Vec<String>,
    /// MCP offers `load_skill`, a tool that loads a skill's instructions,
    /// for clients that reach neither resources nor the Skills extension.
    pub mcp_load_skill_tool: bool,
    /// Event streams open at once (then 503): each holds a task and a
    /// connection.
    pub max_streams: usize,
    /// Event streams one caller may hold at once (then 429), so one
    /// caller cannot take them all (see [`crate::share`]).
    pub max_streams_per_caller: usize,
    /// The longest an event stream stays open; a client that still wants
    /// to follow the run connects again.
    pub max_stream: Duration,
    /// Waiters re-read a run at least this often, should a notification
    /// be lost (PostgreSQL reconnecting).
    pub wait_poll: Duration,
    /// A manifest's child with no call for this long is stopped; the next
    /// call starts it again.
    pub backend_idle: Duration,
    /// The program run as `starlark-host` for Starlark skills; `None` is
    /// this program.
    pub starlark_host: Option<PathBuf>,
}

impl Default for RunSettings {
    fn default() -> Self {
        Self {
            workspace: PathBuf::from("."),
            data_dir: PathBuf::from("."),
            scratch_dir: std::env::temp_dir().join("skilld-runs"),
            artifact_ttl: Duration::from_secs(3600),
            artifacts: crate::artifacts::ArtifactStore::Local,
            sandbox: crate::sandbox::Settings::default(),
            grace: Duration::from_secs(5),
            limits: Limits {
                memory_bytes: None,
                cpu_secs: None,
                open_files: Some(1024),
                file_size_bytes: Some(1024 * 1024 * 1024),
            },
            max_concurrent: 64,
            max_concurrent_per_tool: 16,
            queue_timeout: Duration::from_secs(10),
            instance: format!("skilld-{}", std::process::id()),
            extra_env: Vec::new(),
            approval_ttl: Duration::from_secs(3600),
            max_pending_per_caller: 20,
            client_approval: Vec::new(),
            mcp_load_skill_tool: false,
            max_streams: 256,
            max_streams_per_caller: 32,
            max_stream: Duration::from_secs(3600),
            wait_poll: Duration::from_secs(5),
            backend_idle: Duration::from_secs(600),
            starlark_host: None,
        }
    }
}

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
}

impl Prepared {
    pub fn tool(&self) -> &Tool {
        &self.skill.tools[self.tool]
    }
}

/// Owns the pipeline's shared state: the store, the live runs and the
/// concurrency limits.
pub struct Invoker {
    pub store: Arc<dyn Store>,
    pub runs: Arc<Runs>,
    pub settings: RunSettings,
    /// Entrypoints' artifacts: keeping them, linking and handing them over.
    pub artifacts: Arc<crate::artifacts::Artifacts>,
    global: Arc<Semaphore>,
    per_tool: Mutex<HashMap<String, Arc<Semaphore>>>,
    /// One share per open event stream.
    streams: Arc<crate::share::Pool>,
    /// What confines each run, as this host allows.
    pub sandbox: Arc<Sandbox>,
    /// The scratch root has been made and checked.
    scratch_ready: AtomicBool,
    /// Request changes for the inbox and the notifier, once asked for.
    inbox: std::sync::OnceLock<inbox::InboxFeed>,
}

impl Invoker {
    pub fn new(store: Arc<dyn Store>, settings: RunSettings) -> Self {
        Self {
            store,
            runs: Arc::new(Runs::default()),
            global: Arc::new(Semaphore::new(settings.max_concurrent.max(1))),
            per_tool: Mutex::default(),
            streams: crate::share::Pool::new(settings.max_streams, settings.max_streams_per_caller),
            sandbox: Arc::new(Sandbox::detect(sandbox_settings(&settings))),
            scratch_ready: AtomicBool::new(false),
            inbox: std::sync::OnceLock::new(),
            artifacts: Arc::new(crate::artifacts::Artifacts::new(
                settings.artifacts.clone(),
                settings.scratch_dir.clone(),
                settings.data_dir.clone(),
                settings.instance.clone(),
                settings.artifact_ttl,
            )),
            settings,
        }
    }

    /// What starts the backends of manifest skills, in this invoker's
    /// sandbox; `None` outside a Tokio runtime.
    pub fn launcher(&self) -> Option<Arc<dyn Launch>> {
        launcher(&self.settings, self.sandbox.clone())
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
        let args = match arguments {
            Value::Object(map) => map,
            Value::Null => &Map::new(),
            other => return Err(InvokeError::NotAnObject(json_kind(other))),
        };
        let arguments = args::validate(tool, args).map_err(|errors| InvokeError::InvalidArguments {
            tool: tool.name.clone(),
            errors,
        })?;
        let mode = valid_mode(mode.unwrap_or("Global"))?.to_owned();
        let (argv, cwd) = self.command_line(&skill, tool, &arguments)?;
        // A backend's child got its environment when it started; a call
        // sets none.
        let env = if matches!(tool.action, Action::Backend) {
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
            Action::Backend => (
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
    pub async fn judge(&self, p: &Prepared) -> Result<(Decision, PolicyFacts), InvokeError> {
        let facts = self
            .store
            .policy_facts(&p.skill.name, &p.tool().name, &p.skill.hash)
            .await?;
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
        let permits = self.slot(&prepared.tool().name).await?;
        let mut record = self.new_run(&prepared, RunStatus::Running, asked, None);
        record.started_at = Some(record.created_at);
        record.instance = Some(self.settings.instance.clone());
        let id = record.id;
        // Fail closed: what cannot be recorded does not run.
        self.store.insert_run(record).await?;
        let (live, events) = self.runs.register(id);
        let this = self.clone();
        let task_live = live.clone();
        tokio::spawn(async move {
            let _permits = permits;
            this.execute(task_live, prepared).await;
        });
        Ok((live, events))
    }

    /// A new run record for `p`, created now.
    fn new_run(&self, p: &Prepared, status: RunStatus, asked: Asked, approval_id: Option<Uuid>) -> NewRun {
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
        }
    }

    /// Waits as long as it takes for a slot; `None` when the server is
    /// shutting down.
    async fn slot_waiting(&self, tool: &str) -> Option<(OwnedSemaphorePermit, OwnedSemaphorePermit)> {
        let per_tool = self.per_tool_semaphore(tool);
        let tool_permit = per_tool.acquire_owned().await.ok()?;
        let global_permit = self.global.clone().acquire_owned().await.ok()?;
        Some((global_permit, tool_permit))
    }

    fn per_tool_semaphore(&self, tool: &str) -> Arc<Semaphore> {
        let mut map = self.per_tool.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(tool.to_owned())
            .or_insert_with(|| Arc::new(Semaphore::new(self.settings.max_concurrent_per_tool.max(1))))
            .clone()
    }

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
            isolate_network: !p.skill.network,
            confinement: None,
        }
    }

    /// Runs a call recorded as running to its end and records the outcome.
    async fn execute(&self, live: Arc<LiveRun>, p: Prepared) {
        let id = live.id;
        let in_flight = crate::metrics::run_started(&p.tool().name);
        live.mark_started();
        if !still_the_same(&p.skill).await {
            let why = "the skill's files changed since this call was prepared, so what was decided (or \
                       approved) is not what would run; nothing ran: call it again";
            tracing::warn!(run = %id, skill = %p.skill.name, "a skill changed on disk under a call; refused");
            let envelope = Envelope::not_started(id, &p.skill.name, &p.tool().name, why);
            self.end(&live, RunStatus::Failed, envelope).await;
            return;
        }
        if let Action::Backend = p.tool().action {
            let Some(backend) = p.skill.backend.clone() else {
                let why = "the skill's backend is not running; reload the skill to start it";
                let envelope = Envelope::not_started(id, &p.skill.name, &p.tool().name, why);
                self.end(&live, RunStatus::Failed, envelope).await;
                return;
            };
            let (status, envelope, took) = self.through_backend(&live, p, backend.as_ref()).await;
            drop(in_flight);
            crate::metrics::run_finished(&envelope.tool, status.as_str(), took);
            self.end(&live, status, envelope).await;
            return;
        }
        let mut spec = self.spec(&p);
        let run_dir = match self.confine(id, &p, &mut spec) {
            Ok(dir) => dir,
            Err(e) => {
                tracing::error!(run = %id, error = %e, "cannot prepare the run's sandbox");
                let why = format!("cannot prepare the run's directory and sandbox: {e}");
                let envelope = Envelope::not_started(id, &p.skill.name, &p.tool().name, &why);
                self.end(&live, RunStatus::Failed, envelope).await;
                return;
            }
        };
        let outcome = self.run_child(&live, spec).await;
        let mut envelope = Envelope::from_outcome(id, &p, &outcome);
        run_dir.finish(&mut envelope, &self.artifacts).await;
        let status = envelope.status(&outcome);
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
    ) -> (RunStatus, Envelope, Duration) {
        let mut effects = Vec::new();
        // An untrusted skill's backend starts here, for a call a person let
        // run, and only then says which hooks it has.
        let hooks = match backend.wake(p.timeout).await {
            None => p.skill.hooks.clone(),
            Some(Ok(hooks)) => hooks,
            Some(Err(why)) => {
                let envelope = Envelope::not_started(live.id, &p.skill.name, &p.tool().name, &why);
                return (RunStatus::Failed, envelope, Duration::ZERO);
            }
        };
        let stopped = match hooks::before(&mut p, backend, &hooks, &mut effects).await {
            hooks::Before::Go => None,
            hooks::Before::Cancel(reason) => Some((
                RunStatus::Denied,
                format!("cancelled by the skill's before_tool_call hook: {reason}"),
            )),
            hooks::Before::Failed(why) => Some((RunStatus::Failed, why)),
        };
        let (status, mut envelope, took) = match stopped {
            Some((status, why)) => {
                let envelope = Envelope::not_started(live.id, &p.skill.name, &p.tool().name, &why);
                (status, envelope, Duration::ZERO)
            }
            None => {
                let (status, mut envelope, took) = self.call_backend(live, &p, backend).await;
                // A call that timed out or was cancelled has no result to
                // look at, and its child may just have been killed.
                if matches!(status, RunStatus::Succeeded | RunStatus::Failed) {
                    hooks::after(&p, backend, &hooks, &mut envelope, &mut effects).await;
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

    /// Runs a call through its skill's backend.
    async fn call_backend(
        &self,
        live: &Arc<LiveRun>,
        p: &Prepared,
        backend: &dyn Backend,
    ) -> (RunStatus, Envelope, Duration) {
        let started = std::time::Instant::now();
        let result = backend
            .execute(BackendCall {
                tool: p.tool().name.clone(),
                input: Value::Object(p.arguments.clone()),
                run_id: live.id,
                timeout: p.timeout,
                cancel: live.cancel.clone(),
                progress: Some(live.progress_sink()),
            })
            .await;
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
        let store = self.store.clone();
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
                if let Err(e) = store.set_pgid(id, pgid).await {
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
    async fn end(&self, live: &LiveRun, status: RunStatus, envelope: Envelope) {
        let envelope = envelope.keepable();
        self.record(live.id, status, &envelope).await;
        tracing::info!(
            run = %live.id, skill = %envelope.skill, tool = %envelope.tool, %status,
            duration_ms = envelope.duration_ms, "run finished"
        );
        self.runs.finish(live, Some(envelope));
    }

    /// Writes a run's final state, retrying briefly: a result must not be
    /// lost to a momentary database hiccup.
    async fn record(&self, id: Uuid, status: RunStatus, envelope: &Envelope) {
        let value = serde_json::to_value(envelope).ok();
        for attempt in 0..5u32 {
            match self.store.finish_run(id, status, value.clone(), Utc::now()).await {
                Ok(_) => return,
                Err(e) => {
                    tracing::warn!(run = %id, attempt, error = %e, "cannot record the run's result");
                    tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
                }
            }
        }
        tracing::error!(run = %id, "giving up recording the run's result");
    }

    /// The rlimits of a run of `skill`. A memory size the skill did not
    /// set itself (seed 003's default) is no address-space limit: it
    /// bounds the run's cgroup ([`Invoker::cgroup_memory_for`]).
    fn limits_for(&self, skill: &Skill) -> Limits {
        let d = &self.settings.limits;
        let own = skill
            .resources
            .memory_bytes
            .filter(|_| !skill.resources.memory_is_default);
        Limits {
            memory_bytes: own.or(d.memory_bytes),
            cpu_secs: d.cpu_secs,
            open_files: d.open_files,
            file_size_bytes: d.file_size_bytes,
        }
    }

    /// The `memory.max` of a run of `skill`'s cgroup, where a memory
    /// controller exists: its own, or the default it got, or the server's.
    fn cgroup_memory_for(&self, skill: &Skill) -> Option<u64> {
        skill.resources.memory_bytes.or(self.settings.limits.memory_bytes)
    }

    /// Stops taking calls, lets running ones finish within `grace`, then
    /// cancels the rest (their groups get SIGTERM, then SIGKILL) and waits.
    pub async fn shutdown(&self, grace: Duration) {
        self.runs.close();
        if tokio::time::timeout(grace, self.runs.idle()).await.is_err() {
            tracing::warn!(
                running = self.runs.len(),
                "cancelling runs still going after the shutdown grace"
            );
            self.runs.cancel_all();
            self.runs.idle().await;
        }
    }
}

/// A launcher of backends run as `settings` say, in `sandbox`, on the
/// current Tokio runtime (`None` outside one).
pub fn launcher(settings: &RunSettings, sandbox: Arc<Sandbox>) -> Option<Arc<dyn Launch>> {
    let runtime = tokio::runtime::Handle::try_current().ok()?;
    let children = ChildSettings {
        workspace: settings.workspace.clone(),
        scratch_dir: settings.scratch_dir.clone(),
        grace: settings.grace,
        limits: settings.limits,
        extra_env: settings.extra_env.clone(),
        idle: settings.backend_idle,
        starlark_host: starlark_host(settings),
    };
    Some(Arc::new(Launcher::new(sandbox, children, runtime)))
}

/// The program run as `starlark-host`: the configured one or this one,
/// where the sandbox's user can run it. A server running as root from a
/// place others cannot enter (root's home, a private temporary directory)
/// keeps a hard link to it (or a copy) under the scratch root instead.
fn starlark_host(settings: &RunSettings) -> PathBuf {
    let program = settings
        .starlark_host
        .clone()
        .or_else(|| std::env::current_exe().ok())
        .unwrap_or_else(|| PathBuf::from("skilld"));
    if !nix::unistd::geteuid().is_root() || runner::runnable_by_anyone(&program) {
        return program;
    }
    reachable_copy(&program, &settings.scratch_dir).unwrap_or_else(|e| {
        let path = program.display();
        tracing::warn!(%path, error = %e, "the Starlark host may not be reachable by the sandbox's user");
        program
    })
}

/// A link to `program` (or a copy) under `scratch`, named by its inode,
/// so that servers sharing the scratch root share it.
fn reachable_copy(program: &std::path::Path, scratch: &std::path::Path) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    crate::sandbox::ensure_scratch_root(scratch)?;
    let dir = scratch.join(".starlark-host");
    std::fs::create_dir_all(&dir)?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o711))?;
    let meta = std::fs::metadata(program)?;
    let target = dir.join(format!("skilld-{}-{}", meta.dev(), meta.ino()));
    if target.exists() {
        return Ok(target);
    }
    // A link shares the program's mode: only one others may run will do.
    let linked = meta.mode() & 0o001 != 0 && std::fs::hard_link(program, &target).is_ok();
    if !linked {
        let staged = dir.join(format!(".copy-{}", std::process::id()));
        std::fs::copy(program, &staged)?;
        std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o755))?;
        std::fs::rename(&staged, &target)?;
    }
    Ok(target)
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

/// A launcher with a sandbox of its own, for commands that load skills
/// without serving them (`skilld tools`).
pub fn standalone_launcher(settings: &RunSettings) -> Option<Arc<dyn Launch>> {
    launcher(settings, Arc::new(Sandbox::detect(sandbox_settings(settings))))
}

/// The configured sandbox, with the data and scratch directories always
/// among the places no tool may read.
fn sandbox_settings(settings: &RunSettings) -> crate::sandbox::Settings {
    let mut sandbox = settings.sandbox.clone();
    sandbox
        .protected
        .extend([settings.data_dir.clone(), settings.scratch_dir.clone()]);
    sandbox
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
fn valid_mode(mode: &str) -> Result<&str, InvokeError> {
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

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
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
