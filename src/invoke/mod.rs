//! The invoke pipeline: resolve → validate → render → decide → record →
//! run → record. HTTP, the command line and MCP all call [`Invoker::call`],
//! so a call behaves the same whichever way it arrives. Approvals
//! ([`Approver`]) and following and cancelling runs ([`Follower`]) live
//! here too, each a type a handler can hold alone, so that the adapters
//! only translate.
//!
//! Each stage has its file: `settings` (how runs are carried out),
//! `call` (the tool a call names, and its decision), `prepare` (checks,
//! rendering, the slot and the run's start), `execute` (the child or the
//! backend, and the run's end). The `Invoker` here owns their shared
//! state and hands callers only narrow views of it.

mod approve;
mod approver;
pub mod args;
mod call;
mod cancel;
mod confine;
mod envelope;
mod error;
mod execute;
mod follow;
mod grants;
mod hooks;
mod inbox;
mod live;
mod prepare;
mod retry;
mod rundir;
mod session;
mod settings;

pub use crate::artifacts::Artifact;
pub use approve::{Held, MAX_NOTE_CHARS, Ruling};
pub use approver::Approver;
pub use call::{Call, Called, Delivery, DryRun, Gate, Target, locate, resolve};
pub use cancel::{Cancelled, Canceller};
pub use confine::WORKSPACE_WRITE;
pub use envelope::Envelope;
pub use error::{FieldError, InvokeError};
pub use follow::{Follower, StreamPermit};
pub use grants::{GrantAsk, PreGrant};
pub use hooks::{HOOK_TIMEOUT, HookEffect};
pub use inbox::{InboxEvent, first_page};
pub use live::{LiveRun, RunEvent, Runs};
pub use prepare::{Asked, Prepared, check_request};
pub use retry::{IdempotencyKey, KEY_KEPT};
pub use session::{Bound, CallSession, Seat, SessionProof, SessionSeats};
pub use settings::{RunSettings, launcher, standalone_launcher};

use crate::catalog::Catalog;
use crate::sandbox::Sandbox;
use crate::skill::backend::Launch;
use crate::store::{Holds, RunLog, Stores};
use settings::sandbox_settings;
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;
use tracing::Instrument as _;

/// The longest a caller may wait for a held call or a run to end.
pub const MAX_WAIT: Duration = Duration::from_secs(300);

/// Owns the pipeline's shared state: the run log and what it holds for
/// a person, the live runs and the concurrency limits. Deciding what it
/// holds is an [`Approver`]'s, made beside it.
pub struct Invoker {
    /// Every call, recorded before it runs and ended once.
    run_log: Arc<dyn RunLog>,
    /// Calls held for a person, and the policy's facts.
    holds: Arc<dyn Holds>,
    runs: Arc<Runs>,
    settings: RunSettings,
    /// Entrypoints' artifacts: keeping them, linking and handing them over.
    artifacts: Arc<crate::artifacts::Artifacts>,
    global: Arc<Semaphore>,
    per_tool: Mutex<HashMap<String, Arc<Semaphore>>>,
    /// Following, waiting for and cancelling runs.
    follower: Arc<Follower>,
    /// What confines each run, as this host allows.
    sandbox: Arc<Sandbox>,
    /// The scratch root has been made and checked.
    scratch_ready: AtomicBool,
    /// Run directories left empty, for the next runs of their skills.
    dirs: Arc<rundir::DirPool>,
    /// Binds calls to their sessions, once the session runtime is up.
    sessions: std::sync::OnceLock<Arc<dyn SessionSeats>>,
}

impl Invoker {
    /// The pipeline over `stores` (it keeps what it uses of them).
    pub fn new(stores: Stores, mut settings: RunSettings) -> Self {
        if settings.egress.asking.is_none() {
            settings.egress = std::mem::take(&mut settings.egress).asking_in(stores.egress.clone());
        }
        let runs = Arc::new(Runs::default());
        let follower = Arc::new(Follower::new(stores.runs.clone(), runs.clone(), &settings));
        Self {
            run_log: stores.runs,
            holds: stores.holds,
            follower,
            runs,
            global: Arc::new(Semaphore::new(settings.max_concurrent.max(1))),
            per_tool: Mutex::default(),
            sandbox: Arc::new(Sandbox::detect(sandbox_settings(&settings))),
            scratch_ready: AtomicBool::new(false),
            dirs: Arc::default(),
            sessions: std::sync::OnceLock::new(),
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

    /// Resolves, validates, renders and decides a call, then refuses it,
    /// holds it for a person, or runs it, as [`Call`] asks.
    pub async fn call(self: &Arc<Self>, catalog: &Arc<Catalog>, call: Call) -> Result<Called, InvokeError> {
        self.call_keyed(catalog, call, None).await
    }

    /// [`Invoker::call`] with the caller's `Idempotency-Key`: a call the
    /// caller made with the same key within [`KEY_KEPT`] is answered
    /// again (its run, as it is now) instead of being made twice; the same
    /// key with another tool or other arguments is refused.
    pub async fn call_keyed(
        self: &Arc<Self>,
        catalog: &Arc<Catalog>,
        call: Call,
        key: Option<IdempotencyKey>,
    ) -> Result<Called, InvokeError> {
        prepare::check_wait(call.wait)?;
        let (skill, tool) = locate(catalog, &call.target)
            .instrument(tracing::trace_span!("invoke.locate"))
            .await?;
        let mut prepared =
            tracing::trace_span!("invoke.prepare").in_scope(|| self.prepare_call(skill, tool, &call))?;
        if let Some(named) = &call.session {
            prepared.session = Some(
                self.bind(named, call.asked.by.as_deref(), &prepared.skill)
                    .await?,
            );
        }
        // Nothing is recorded for a dry run, and the terminal's own runs
        // are not retried over HTTP.
        match key.filter(|_| !call.dry_run && call.gate == Gate::Policy) {
            None => self.decide_call(prepared, &call).await,
            Some(key) => self.decide_once(prepared, &call, key).await,
        }
    }

    /// Lets calls name sessions: `seats` binds them. Once; a second
    /// runtime is refused.
    pub fn seat_sessions(&self, seats: Arc<dyn SessionSeats>) -> Result<(), InvokeError> {
        self.sessions
            .set(seats)
            .map_err(|_| InvokeError::Internal("the session runtime is already set".to_owned()))
    }

    /// Session `id` as a call of `skill` by `caller` sees it.
    pub(super) async fn bind(
        &self,
        session: &CallSession,
        caller: Option<&str>,
        skill: &crate::skill::Skill,
    ) -> Result<Arc<Bound>, InvokeError> {
        let seats = self
            .sessions
            .get()
            .ok_or(InvokeError::SessionNotFound(session.id))?;
        seats.bind(session, caller, skill).await
    }

    /// What starts the backends of manifest skills, in this invoker's
    /// sandbox; `None` outside a Tokio runtime.
    pub fn launcher(&self) -> Option<Arc<dyn Launch>> {
        launcher(&self.settings, self.sandbox.clone())
    }

    /// Where destinations beyond networked runs' lists are held for a
    /// person; `None` when `egress_wait_secs` is 0.
    pub fn egress_asking(&self) -> Option<&crate::egress::Asking> {
        self.settings.egress.asking.as_ref()
    }

    /// Runs wherever they run: following, waiting for, cancelling them.
    pub fn follower(&self) -> &Arc<Follower> {
        &self.follower
    }

    /// How runs are carried out on this server.
    pub fn settings(&self) -> &RunSettings {
        &self.settings
    }

    /// What confines each run, as this host allows.
    pub fn sandbox(&self) -> &Arc<Sandbox> {
        &self.sandbox
    }

    /// Entrypoints' artifacts: keeping them, linking and handing them over.
    pub fn artifacts(&self) -> &Arc<crate::artifacts::Artifacts> {
        &self.artifacts
    }

    /// File `path` of run `id`'s artifacts, for a request with `access`.
    pub async fn serve_artifact(
        &self,
        id: uuid::Uuid,
        path: &str,
        access: crate::artifacts::Access<'_>,
    ) -> Result<crate::artifacts::Served, crate::artifacts::ArtifactError> {
        self.artifacts.serve(&*self.run_log, id, path, access).await
    }

    /// Completes once the server stops taking calls.
    pub async fn closing(&self) {
        self.runs.closing().await;
    }

    /// Stops taking calls, lets running ones finish within `grace`, then
    /// cancels the rest (their groups get SIGTERM, then SIGKILL) and waits,
    /// last for the run log to commit their ends.
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
        if let Err(e) = self.run_log.flush().await {
            tracing::error!(error = %e, "cannot record the last runs' ends");
        }
    }
}
