//! Manifest backends (`docs/design.md` §2 "Manifest backends"): what the
//! catalog's [`Launch`] starts when a `SKILL.yaml` names `implementation`.
//! A `process` skill is a long-lived child speaking JSON-RPC 2.0 on its
//! stdin and stdout, started in the same sandbox as a run.

mod backoff;
mod findings;
mod mcp;
mod outcome;
mod place;
mod process;
mod rpc;
mod starlark;

pub use mcp::McpBackend;
pub use mcp::uri as upstream_uri;
pub use process::ProcessBackend;
pub use starlark::run_host as run_starlark_host;

use crate::runner::Limits;
use crate::sandbox::Sandbox;
use crate::skill::backend::{Backend, BackendError, BackendKind, Launch, LaunchRequest, Launched};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// How long a child has to answer `initialize` (at load and on restart).
pub const INITIALIZE_TIMEOUT: Duration = Duration::from_secs(5);

/// A child that did not start is a backend that is not running.
impl From<crate::runner::SpawnError> for BackendError {
    fn from(e: crate::runner::SpawnError) -> Self {
        BackendError::NotRunning(e.to_string())
    }
}

/// What children of every backend share: where and how they run.
#[derive(Debug, Clone)]
pub struct ChildSettings {
    /// Their working directory.
    pub workspace: PathBuf,
    /// Each child gets a directory of its own under it (its `TMPDIR`).
    pub scratch_dir: PathBuf,
    pub grace: Duration,
    pub limits: Limits,
    pub extra_env: Vec<String>,
    /// A child with no call for this long is stopped, and started again
    /// by the next call.
    pub idle: Duration,
    /// The program that runs `starlark-host`: this one, or `skilld` when
    /// the server is embedded in another program (the tests).
    pub starlark_host: PathBuf,
    /// What a call outside any session (a script's loading) may spend.
    pub turn_limits: crate::skill::context::TurnLimits,
    /// What the egress of a `network.allow` skill starts from
    /// (`[egress]`): its child's proxy, and its Starlark `fetch()`'s
    /// resolver.
    pub egress: crate::egress::Egress,
}

/// Starts backends for the catalog, and keeps each running one so that a
/// reload of an unchanged skill reuses it.
#[derive(Debug)]
pub struct Launcher {
    sandbox: Arc<Sandbox>,
    settings: ChildSettings,
    runtime: tokio::runtime::Handle,
    /// Running process backends by skill directory.
    running: Mutex<HashMap<PathBuf, Weak<ProcessBackend>>>,
    /// MCP servers by skill directory.
    upstreams: Mutex<HashMap<PathBuf, Weak<McpBackend>>>,
    /// Ticks when an MCP server's tools changed: the catalog reloads.
    reload: tokio::sync::watch::Sender<u64>,
}

impl Launcher {
    /// A launcher whose children run on `runtime`.
    pub fn new(sandbox: Arc<Sandbox>, settings: ChildSettings, runtime: tokio::runtime::Handle) -> Self {
        Self {
            sandbox,
            settings,
            runtime,
            running: Mutex::default(),
            upstreams: Mutex::default(),
            reload: tokio::sync::watch::channel(0).0,
        }
    }

    /// The MCP server of `req`, kept when its skill is unchanged, else new.
    fn upstream(&self, req: &LaunchRequest<'_>) -> Result<Arc<McpBackend>, BackendError> {
        let upstream = req
            .upstream
            .ok_or_else(|| BackendError::NotRunning("an mcp backend needs its server".to_owned()))?;
        let mut kept = self
            .upstreams
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        kept.retain(|_, b| b.strong_count() > 0);
        if let Some(backend) = kept
            .get(req.dir)
            .and_then(Weak::upgrade)
            .filter(|b| b.hash() == req.hash)
        {
            return Ok(backend);
        }
        let _entered = self.runtime.enter();
        let (sandbox, settings) = (self.sandbox.clone(), self.settings.clone());
        let backend = McpBackend::new(req, upstream, sandbox, settings, self.reload.clone());
        kept.insert(req.dir.to_path_buf(), Arc::downgrade(&backend));
        Ok(backend)
    }

    /// Starts (or reuses) an MCP server and lists what it offers.
    fn launch_mcp(&self, req: &LaunchRequest<'_>) -> Result<Launched, BackendError> {
        let backend = self.upstream(req)?;
        self.on_runtime(async move { backend.launched().await }, "the MCP server")?
    }

    /// Runs `start` on the server's runtime, which owns the children's
    /// pipes and connections, and waits for it here: the catalog loads on
    /// plain threads.
    fn on_runtime<T: Send + 'static>(
        &self,
        start: impl std::future::Future<Output = T> + Send + 'static,
        what: &str,
    ) -> Result<T, BackendError> {
        let (tx, rx) = std::sync::mpsc::channel();
        self.runtime.spawn(async move {
            let _ = tx.send(start.await);
        });
        rx.recv_timeout(INITIALIZE_TIMEOUT + Duration::from_secs(5))
            .map_err(|_| BackendError::TimedOut(format!("{what} was not started in time")))
    }

    /// Starts the backend `make` builds, unless one for this skill runs
    /// unchanged.
    fn start(
        &self,
        req: &LaunchRequest<'_>,
        make: impl FnOnce() -> ProcessBackend,
    ) -> Result<Launched, BackendError> {
        if let Some(reused) = self.reusable(req) {
            return Ok(reused);
        }
        let backend = Arc::new(make());
        let starting = backend.clone();
        let answer = self.on_runtime(async move { starting.initialize().await }, "the child")??;
        self.lock()
            .insert(req.dir.to_path_buf(), Arc::downgrade(&backend));
        Ok(Launched {
            backend,
            tools: answer.tools,
            hooks: answer.hooks,
            workflows: answer.workflows,
            scanners: answer.scanners,
            offered: None,
            extras: None,
        })
    }

    /// The backend already running for this skill, unchanged since.
    fn reusable(&self, req: &LaunchRequest<'_>) -> Option<Launched> {
        let backend = self.kept(req)?;
        let answer = backend.declared()?;
        Some(Launched {
            backend,
            tools: answer.tools,
            hooks: answer.hooks,
            workflows: answer.workflows,
            scanners: answer.scanners,
            offered: None,
            extras: None,
        })
    }

    /// The backend kept for this skill, unchanged since, started or not.
    fn kept(&self, req: &LaunchRequest<'_>) -> Option<Arc<ProcessBackend>> {
        let mut running = self.lock();
        running.retain(|_, b| b.strong_count() > 0);
        let backend = running.get(req.dir)?.upgrade()?;
        (backend.hash() == req.hash).then_some(backend)
    }

    /// The backend of `req`, as `launch` would start it.
    fn make(&self, req: &LaunchRequest<'_>) -> ProcessBackend {
        let (sandbox, settings) = (self.sandbox.clone(), self.settings.clone());
        match req.kind {
            BackendKind::Process => ProcessBackend::new(req, sandbox, settings),
            BackendKind::Starlark => {
                let host = settings.starlark_host.clone();
                starlark::backend(req, sandbox, settings, self.runtime.clone(), &host)
            }
            // Launched by `launch_mcp`: never made here.
            BackendKind::Mcp => ProcessBackend::new(req, sandbox, settings),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Weak<ProcessBackend>>> {
        self.running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Launch for Launcher {
    fn launch(&self, req: &LaunchRequest<'_>) -> Result<Launched, BackendError> {
        if req.kind == BackendKind::Mcp {
            return self.launch_mcp(req);
        }
        self.start(req, || self.make(req))
    }

    fn offer_changes(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        Some(self.reload.subscribe())
    }

    fn unstarted(&self, req: &LaunchRequest<'_>) -> Result<Arc<dyn Backend>, BackendError> {
        if req.kind == BackendKind::Mcp {
            return Ok(self.upstream(req)?);
        }
        if let Some(kept) = self.kept(req) {
            return Ok(kept);
        }
        let backend = Arc::new(self.make(req).started_by_first_call());
        self.lock()
            .insert(req.dir.to_path_buf(), Arc::downgrade(&backend));
        Ok(backend)
    }
}
