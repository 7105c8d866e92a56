//! The `mcp` backend (`docs/gateway.md`): a skill that fronts an existing
//! MCP server. A stdio server is started in the run sandbox like a process
//! backend's child, kept, restarted with backoff and stopped when idle; a
//! remote one is reached over Streamable HTTP. Its tools are listed at
//! load; the digest of their definitions is part of the skill's hash, and
//! a changed list (announced, or found at a restart) reloads the catalog.

mod call;
mod http;
mod listing;
mod offer;
mod session;
pub mod uri;

use super::backoff::Backoff;
use super::place::Place;
use super::{ChildSettings, INITIALIZE_TIMEOUT};
use crate::runner::Child;
use crate::sandbox::Sandbox;
use crate::skill::backend::{
    Backend, BackendCall, BackendError, BackendResult, BoxFuture, HookAnswer, HookCall, LaunchRequest,
    Launched, UpstreamExtras, Wake,
};
use crate::skill::upstream::{EnvValue, Transport, Upstream};
use listing::{ListError, PastBound};
use offer::Offer;
use serde_json::{Value, json};
use session::{Handler, Session};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// One skill's upstream MCP server.
#[derive(Debug)]
pub struct McpBackend {
    /// Itself, for the tasks that watch its sessions.
    me: Weak<McpBackend>,
    place: Place,
    /// The skill's content hash before the offer is folded in: the same
    /// hash reuses this backend across reloads.
    hash: String,
    upstream: Upstream,
    session: tokio::sync::Mutex<Option<Arc<Session>>>,
    handler: Handler,
    /// What the server lists now.
    offer: Mutex<Option<Offer>>,
    /// The digest of the offer the catalog last took.
    served: Mutex<Option<String>>,
    backoff: Backoff,
    /// Ticks when the catalog should reload (shared by the launcher).
    reload: watch::Sender<u64>,
    stopped: CancellationToken,
    /// Started by its first call (an untrusted skill's).
    by_first_call: bool,
    /// Why skilld last dropped the server's session, and when: for
    /// `/diagnostics`, until the next drop replaces it.
    dropped: Mutex<Option<String>>,
}

impl McpBackend {
    /// The backend of `req`, not started. `reload` ticks when its offer
    /// changes.
    pub fn new(
        req: &LaunchRequest<'_>,
        upstream: &Upstream,
        sandbox: Arc<Sandbox>,
        settings: ChildSettings,
        reload: watch::Sender<u64>,
    ) -> Arc<Self> {
        let (tools_changed, changes) = watch::channel(0);
        let backend = Arc::new_cyclic(|me| Self {
            me: me.clone(),
            place: Place::new(req, sandbox, settings),
            hash: req.hash.to_owned(),
            upstream: upstream.clone(),
            session: tokio::sync::Mutex::new(None),
            handler: Handler::new(req.skill, tools_changed),
            offer: Mutex::new(None),
            served: Mutex::new(None),
            backoff: Backoff::default(),
            reload,
            stopped: CancellationToken::new(),
            by_first_call: req.trust == crate::skill::Trust::Untrusted,
            dropped: Mutex::new(None),
        });
        tokio::spawn(follow_changes(Arc::downgrade(&backend), changes));
        backend
    }

    pub fn hash(&self) -> &str {
        &self.hash
    }

    /// Starts the server (unless it runs) and says what it offers: what
    /// the catalog takes from now on.
    pub async fn launched(&self) -> Result<Launched, BackendError> {
        let dropped = || BackendError::NotRunning("the backend was dropped".to_owned());
        let backend = self.me.upgrade().ok_or_else(dropped)?;
        self.session(Instant::now() + INITIALIZE_TIMEOUT).await?;
        let listed_none = || BackendError::Protocol("the server listed no tools".to_owned());
        let offer = lock(&self.offer).clone().ok_or_else(listed_none)?;
        for skipped in &offer.skipped {
            tracing::warn!(skill = %self.place.skill, "{skipped}");
        }
        *lock(&self.served) = Some(offer.digest.clone());
        Ok(Launched {
            backend,
            tools: offer.tools,
            hooks: Vec::new(),
            workflows: Vec::new(),
            scanners: Vec::new(),
            offered: Some(offer.digest),
            extras: Some(Arc::new(offer.extras)),
        })
    }

    /// The live session, started (after the backoff, if it must wait and
    /// may by `deadline`) when there is none.
    async fn session(&self, deadline: Instant) -> Result<Arc<Session>, BackendError> {
        let mut slot = self.session.lock().await;
        if let Some(session) = slot.as_ref().filter(|s| s.is_alive()) {
            return Ok(session.clone());
        }
        if slot.take().is_some() {
            self.failed();
        }
        self.wait_backoff(deadline).await?;
        let started = tokio::time::timeout_at(deadline, self.start()).await;
        let late = || BackendError::TimedOut("it did not answer initialize in time".to_owned());
        match started.unwrap_or_else(|_| Err(late())) {
            Ok(session) => {
                let session = Arc::new(session);
                *slot = Some(session.clone());
                tokio::spawn(watch_session(self.me.clone(), Arc::downgrade(&session)));
                Ok(session)
            }
            Err(why) => {
                self.failed();
                Err(why.reworded(|w| self.place.explain(w)))
            }
        }
    }

    /// Starts an untrusted skill's server, for a call a person let run.
    async fn woken(&self, timeout: Duration) -> Result<(), BackendError> {
        self.session(Instant::now() + timeout)
            .await
            .map(|_| ())
            .map_err(not_started)
    }

    /// Connects, then lists the tools; a list that differs from what the
    /// catalog took reloads it.
    async fn start(&self) -> Result<Session, BackendError> {
        let session = match &self.upstream.transport {
            Transport::Stdio { command, env } => self.start_stdio(command, env).await?,
            Transport::Remote { url, headers } => Session::remote(url, headers, self.handler.clone()).await?,
        };
        match self.relist(&session).await {
            Ok(()) => Ok(session),
            Err(ListError::Past(past)) => {
                self.keep_drop(&past);
                Err(BackendError::Protocol(past.to_string()))
            }
            Err(e) => Err(BackendError::Refused(e.to_string())),
        }
    }

    async fn start_stdio(
        &self,
        command: &[String],
        env: &[(String, EnvValue)],
    ) -> Result<Session, BackendError> {
        let not_running = BackendError::NotRunning;
        let mut more_env = Vec::with_capacity(env.len());
        for (name, value) in env {
            let value = match value {
                EnvValue::Literal(v) => v.clone(),
                EnvValue::Secret(secret) => secret.resolve().map_err(|e| not_running(e.to_string()))?,
            };
            more_env.push((name.clone(), value));
        }
        let scratch = self
            .place
            .scratch_dir()
            .map_err(|e| not_running(format!("cannot make its directory: {e}")))?;
        let command = crate::runner::deps_command(command.to_vec(), self.place.deps.as_deref());
        let (spec, egress) = self
            .place
            .spec(&command, &scratch, more_env)
            .map_err(|e| not_running(format!("cannot prepare its sandbox: {e}")))?;
        let child = Child::start(spec)?.holding(egress);
        Session::stdio(child, scratch, self.handler.clone(), &self.place.skill).await
    }

    /// Lists the server's tools into [`Self::offer`]; when they differ from
    /// what the catalog took, asks for a reload.
    async fn relist(&self, session: &Session) -> Result<(), ListError> {
        let peer = session.service.peer();
        let tools = listing::tools(peer).await?;
        let offer = Offer::of(&tools, self.extras(peer).await?);
        let served = lock(&self.served).clone();
        if served.is_some_and(|s| s != offer.digest) {
            tracing::warn!(skill = %self.place.skill, "the upstream's tools changed: reloading the catalog");
            self.reload.send_modify(|n| *n += 1);
        }
        *lock(&self.offer) = Some(offer);
        Ok(())
    }

    /// The server's prompts and resources, when it says it has them, each
    /// resource under skilld's URI of it ([`uri`]). One it fails to list
    /// is left out with a warning, not a failed start; one past a bound
    /// fails the listing.
    async fn extras(&self, peer: &rmcp::Peer<rmcp::RoleClient>) -> Result<UpstreamExtras, PastBound> {
        let capabilities = peer
            .peer_info()
            .map(|i| i.capabilities.clone())
            .unwrap_or_default();
        let mut extras = UpstreamExtras::default();
        if capabilities.prompts.is_some() {
            match listing::prompts(peer).await {
                Ok(prompts) => extras.prompts = prompts.iter().map(|p| json!(p)).collect(),
                Err(ListError::Past(past)) => return Err(past),
                Err(e) => tracing::warn!(skill = %self.place.skill, "{e}"),
            }
        }
        if capabilities.resources.is_some() {
            match listing::resources(peer).await {
                Ok(resources) => extras.resources = self.served_resources(&resources),
                Err(ListError::Past(past)) => return Err(past),
                Err(e) => tracing::warn!(skill = %self.place.skill, "{e}"),
            }
        }
        Ok(extras)
    }

    /// Listed resources as skilld serves them: under its URIs, named
    /// `<skill>:<name>` as prompts are.
    fn served_resources(&self, resources: &[rmcp::model::Resource]) -> Vec<Value> {
        let skill = &self.place.skill;
        resources
            .iter()
            .map(|r| {
                let mut listed = json!(r);
                uri::rewrite_uri(skill, &mut listed);
                listed["name"] = json!(format!("{skill}:{}", r.name));
                listed
            })
            .collect()
    }

    /// Keeps why the server's session is dropped, for `/diagnostics`.
    fn keep_drop(&self, past: &PastBound) {
        tracing::warn!(skill = %self.place.skill, "dropping the upstream MCP server's session: {past}");
        let at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        *lock(&self.dropped) = Some(format!(
            "at {at} skilld dropped the session of the upstream MCP server: {past}; the next call starts it again"
        ));
    }

    /// Ends `session`, whose server sent past a bound: a stdio server's
    /// group is killed, a remote connection closed. It counts as a failure
    /// toward the backoff, so a server that does it at every start is not
    /// started in a loop.
    async fn drop_session(&self, session: &Arc<Session>, past: &PastBound) {
        self.keep_drop(past);
        if self.forget(session).await.is_some() {
            self.failed();
        }
        session.end();
    }

    /// Whether the server's tools are still those the catalog took.
    fn offer_is_served(&self) -> bool {
        let offer = lock(&self.offer);
        let served = lock(&self.served);
        offer
            .as_ref()
            .map(|o| &o.digest)
            .is_some_and(|d| served.as_ref() == Some(d))
    }

    /// The server's name of catalog tool `name`.
    fn upstream_name(&self, name: &str) -> Option<String> {
        lock(&self.offer).as_ref()?.names.get(name).cloned()
    }

    fn failed(&self) {
        self.backoff.failed(Instant::now());
    }

    fn answered(&self) {
        self.backoff.answered();
    }

    async fn wait_backoff(&self, deadline: Instant) -> Result<(), BackendError> {
        self.backoff.wait(deadline, "the MCP server").await
    }

    /// Drops the session if it is still `session`: the next call starts
    /// the server again.
    async fn forget(&self, session: &Arc<Session>) -> Option<Arc<Session>> {
        let mut slot = self.session.lock().await;
        if slot.as_ref().is_some_and(|s| Arc::ptr_eq(s, session)) {
            return slot.take();
        }
        None
    }
}

impl Drop for McpBackend {
    fn drop(&mut self) {
        self.stopped.cancel();
        if let Ok(mut slot) = self.session.try_lock()
            && let Some(session) = slot.take()
        {
            session.kill();
        }
    }
}

/// Re-lists the tools whenever the server says they changed; a server
/// that lists past a bound loses its session.
async fn follow_changes(backend: Weak<McpBackend>, mut changes: watch::Receiver<u64>) {
    while changes.changed().await.is_ok() {
        let Some(b) = backend.upgrade() else { return };
        let session = b.session.lock().await.clone();
        let Some(session) = session else { continue };
        match b.relist(&session).await {
            Ok(()) => {}
            Err(ListError::Past(past)) => b.drop_session(&session, &past).await,
            Err(why) => tracing::warn!(skill = %b.place.skill, "cannot list the upstream's tools: {why}"),
        }
    }
}

/// Stops a session when its server exits (a crash counts toward the
/// backoff) or when it has had no call for the idle time.
async fn watch_session(backend: Weak<McpBackend>, session: Weak<Session>) {
    let Some(idle) = backend.upgrade().map(|b| b.place.settings.idle) else {
        return;
    };
    let tick = (idle / 4).clamp(Duration::from_millis(50), Duration::from_secs(5));
    loop {
        let Some(s) = session.upgrade() else { return };
        let stopped = backend.upgrade().map(|b| b.stopped.clone());
        let Some(stopped) = stopped else { return };
        tokio::select! {
            how = s.exited() => {
                if let Some(b) = backend.upgrade() {
                    tracing::warn!(skill = %b.place.skill, "the upstream MCP server {}", how.unwrap_or_default());
                    // Unless a call found it dead first, and counted it.
                    if b.forget(&s).await.is_some() {
                        b.failed();
                    }
                }
                return;
            }
            () = stopped.cancelled() => return,
            () = tokio::time::sleep(tick) => {}
        }
        // Only the slot and this watch hold it: no call is in flight.
        if s.idle_for() >= idle && Arc::strong_count(&s) <= 2 {
            let Some(b) = backend.upgrade() else { return };
            if let Some(s) = b.forget(&s).await {
                tracing::info!(skill = %b.place.skill, "stopping the idle upstream MCP server");
                drop(b);
                if let Some(s) = Arc::into_inner(s) {
                    s.stop(Duration::from_secs(2)).await;
                }
            }
            return;
        }
    }
}

impl Backend for McpBackend {
    fn execute(&self, call: BackendCall) -> BoxFuture<'_, BackendResult> {
        Box::pin(self.call(call))
    }

    fn hook(&self, call: HookCall) -> BoxFuture<'_, Result<HookAnswer, BackendError>> {
        let why = format!("an MCP server runs no hooks ({})", call.phase);
        Box::pin(std::future::ready(Err(BackendError::Refused(why))))
    }

    fn command_line(&self) -> Vec<String> {
        self.upstream.identity()
    }

    fn get_prompt(&self, name: &str, arguments: Value) -> BoxFuture<'_, Result<Value, BackendError>> {
        let name = name.to_owned();
        Box::pin(async move { self.prompt(name, arguments).await })
    }

    fn read_resource(&self, uri: &str) -> BoxFuture<'_, Result<Value, BackendError>> {
        let uri = uri.to_owned();
        Box::pin(async move { self.resource(uri).await })
    }

    fn last_drop(&self) -> Option<String> {
        lock(&self.dropped).clone()
    }

    fn wake(&self, timeout: Duration) -> BoxFuture<'_, Result<Wake, BackendError>> {
        Box::pin(async move {
            if !self.by_first_call {
                return Ok(Wake::AtLoad);
            }
            // An MCP server runs no hooks.
            self.woken(timeout)
                .await
                .map(|()| Wake::Started { hooks: Vec::new() })
        })
    }
}

/// Why a call found no server to take it, as the caller is told.
fn not_started(why: BackendError) -> BackendError {
    why.reworded(|w| format!("the MCP server could not be started: {w}"))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
