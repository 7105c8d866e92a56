//! The `starlark` backend (`docs/design.md` §2 "Manifest backends"): the
//! skill's `*.star` entrypoint, evaluated by a Starlark host (this program
//! as `skilld starlark-host`, [`host`]) that the server starts in the run
//! sandbox and keeps like any process backend. The host asks the server
//! for every effect of the SDK ([`effects`]), which checks the skill's
//! permissions before it acts.

mod bounds;
mod ctx;
mod effects;
mod git;
mod host;
mod reach;
mod sdk;

pub use host::run as run_host;

use super::ChildSettings;
use super::process::ProcessBackend;
use super::rpc::{Scope, Serve};
use crate::sandbox::Sandbox;
use crate::skill::Trust;
use crate::skill::backend::{BoxFuture, LaunchRequest};
use crate::skill::context::CallContext;
use bounds::Bounds;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// What the server needs to act for one skill's script.
#[derive(Debug)]
pub(super) struct Shared {
    pub skill: String,
    pub dir: PathBuf,
    pub trust: Trust,
    pub network: bool,
    /// `network.allow`: the hosts `fetch()` may reach without asking.
    pub network_allow: Option<crate::egress::AllowList>,
    /// Who a `fetch()` beyond the list is held as.
    pub asker: crate::egress::Asker,
    pub permissions: Vec<String>,
    pub memory_bytes: Option<u64>,
    pub sandbox: Arc<Sandbox>,
    pub settings: ChildSettings,
    pub runtime: tokio::runtime::Handle,
}

impl Shared {
    pub(super) fn allows(&self, permission: &str) -> bool {
        self.permissions.iter().any(|p| p == permission)
    }
}

/// The skill's host: a process backend running `host starlark-host
/// ENTRYPOINT`, whose SDK requests the server serves.
pub(super) fn backend(
    req: &LaunchRequest<'_>,
    sandbox: Arc<Sandbox>,
    settings: ChildSettings,
    runtime: tokio::runtime::Handle,
    host: &Path,
) -> ProcessBackend {
    let shared = Arc::new(Shared {
        skill: req.skill.to_owned(),
        dir: req.dir.to_path_buf(),
        trust: req.trust,
        network: req.network,
        network_allow: req.network_allow.cloned(),
        asker: crate::egress::Asker {
            skill: req.skill.to_owned(),
            version: req.version.map(str::to_owned),
            hash: req.hash.to_owned(),
            ..crate::egress::Asker::default()
        },
        permissions: req.permissions.to_vec(),
        memory_bytes: req.memory_bytes,
        sandbox: sandbox.clone(),
        settings: settings.clone(),
        runtime,
    });
    let command = vec![
        host.display().to_string(),
        "starlark-host".to_owned(),
        req.entrypoint.display().to_string(),
    ];
    ProcessBackend::new(req, sandbox, settings).serving(command, Arc::new(Effects(shared)))
}

/// Serves a host's SDK requests.
#[derive(Debug)]
struct Effects(Arc<Shared>);

impl Serve for Effects {
    fn open(&self, timeout: Duration, cancel: CancellationToken, context: CallContext) -> Arc<dyn Scope> {
        let scope = effects::Scope::new(self.0.clone(), Bounds::new(timeout, cancel), context);
        Arc::new(EffectScope(Mutex::new(scope)))
    }
}

/// One evaluation's effects, performed one at a time, as the evaluation
/// asks for them.
struct EffectScope(Mutex<effects::Scope>);

impl Scope for EffectScope {
    fn handle(self: Arc<Self>, method: String, params: Value) -> BoxFuture<'static, Result<Value, String>> {
        Box::pin(async move {
            let name = method.clone();
            tokio::task::spawn_blocking(move || {
                let mut scope = self.0.lock().unwrap_or_else(PoisonError::into_inner);
                effects::perform(&mut scope, &method, &params).map_err(|e| format!("{e:#}"))
            })
            .await
            .unwrap_or_else(|e| Err(format!("{name} stopped: {e}")))
        })
    }
}
