//! One connection to an upstream MCP server: rmcp's client over a child's
//! pipes (a stdio server started in the sandbox) or over Streamable HTTP.
//! The handler routes the server's progress to the call that asked, and
//! tells the backend when its tool list changed.

use crate::runner::Child;
use crate::skill::backend::{BackendError, Progress, ProgressSink};
use crate::skill::upstream::SecretRef;
use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, ProgressNotificationParam, ProgressToken,
    ProtocolVersion,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// What the server's notifications reach.
#[derive(Debug, Clone)]
pub(super) struct Handler {
    skill: String,
    /// The sink of each call in flight, by its progress token.
    progress: Arc<Mutex<HashMap<ProgressToken, ProgressSink>>>,
    /// Ticks when the server says its tools changed.
    tools_changed: watch::Sender<u64>,
}

impl Handler {
    pub fn new(skill: &str, tools_changed: watch::Sender<u64>) -> Self {
        Self {
            skill: skill.to_owned(),
            progress: Arc::default(),
            tools_changed,
        }
    }

    /// Routes progress with `token` to `sink` until the guard is dropped.
    pub fn follow(&self, token: ProgressToken, sink: ProgressSink) -> Following {
        lock(&self.progress).insert(token.clone(), sink);
        Following {
            progress: self.progress.clone(),
            token,
        }
    }
}

/// Stops routing one call's progress when dropped.
pub(super) struct Following {
    progress: Arc<Mutex<HashMap<ProgressToken, ProgressSink>>>,
    token: ProgressToken,
}

impl Drop for Following {
    fn drop(&mut self) {
        lock(&self.progress).remove(&self.token);
    }
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        // 2025-11-25: every server of either era answers it, and its
        // list_changed notifications come without a subscription.
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("skilld", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }

    async fn on_progress(&self, params: ProgressNotificationParam, _: NotificationContext<RoleClient>) {
        let sink = lock(&self.progress).get(&params.progress_token).cloned();
        if let Some(sink) = sink {
            sink.report(Progress {
                progress: params.progress,
                total: params.total,
                message: params.message,
            });
        }
    }

    async fn on_tool_list_changed(&self, _: NotificationContext<RoleClient>) {
        tracing::info!(skill = %self.skill, "the upstream MCP server says its tools changed");
        self.tools_changed.send_modify(|n| *n += 1);
    }
}

/// A live connection.
pub(super) struct Session {
    pub service: RunningService<RoleClient, Handler>,
    /// A stdio server's child (killed with its whole group when dropped).
    child: Option<Child>,
    scratch: Option<PathBuf>,
    pub last_used: Mutex<Instant>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("stdio", &self.child.is_some())
            .finish_non_exhaustive()
    }
}

impl Session {
    /// Connects to a started stdio server over its pipes.
    pub async fn stdio(
        mut child: Child,
        scratch: PathBuf,
        handler: Handler,
        skill: &str,
    ) -> Result<Self, BackendError> {
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(BackendError::NotRunning(
                "the server's pipes were not opened".to_owned(),
            ));
        };
        if let Some(stderr) = child.stderr.take() {
            tokio::spawn(crate::backend::rpc::log_stderr(
                stderr,
                skill.to_owned(),
                "upstream MCP server",
            ));
        }
        let service = match handler.serve((stdout, stdin)).await {
            Ok(service) => service,
            Err(e) => {
                let exited = tokio::time::timeout(Duration::from_millis(200), child.exited()).await;
                child.kill();
                let _ = std::fs::remove_dir_all(&scratch);
                // A server that exited crashed; one still running answered wrongly.
                return Err(match exited {
                    Ok(how) => BackendError::Crashed(format!("it did not initialize: {e} (it {how})")),
                    Err(_) => BackendError::Protocol(format!("it did not initialize: {e}")),
                });
            }
        };
        Ok(Self::new(service, Some(child), Some(scratch)).await)
    }

    /// Connects to a remote server at `url`, with `headers` resolved now.
    pub async fn remote(
        url: &str,
        headers: &[(String, SecretRef)],
        handler: Handler,
    ) -> Result<Self, BackendError> {
        use rmcp::transport::StreamableHttpClientTransport;
        let not_running = BackendError::NotRunning;
        use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
        let mut custom = HashMap::new();
        for (name, secret) in headers {
            let value = secret.resolve().map_err(|e| not_running(e.to_string()))?;
            let name = hyper::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| not_running(format!("'{name}' is not a header name")))?;
            let mut value = hyper::header::HeaderValue::from_str(&value).map_err(|_| {
                not_running(format!("the value for header {name} is not a valid header value"))
            })?;
            value.set_sensitive(true);
            custom.insert(name, value);
        }
        let mut config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(custom);
        config.max_concurrent_requests = 64;
        let transport = StreamableHttpClientTransport::with_client(super::http::HyperClient::new()?, config);
        let service = handler
            .serve(transport)
            .await
            .map_err(|e| BackendError::Refused(format!("it did not initialize: {e}")))?;
        Ok(Self::new(service, None, None).await)
    }

    /// The session of a connected `service`. rmcp's client keeps answers
    /// (up to 512 of any size, stale ones too) to serve again: a list
    /// skilld re-reads must be the server's answer now, and what a server
    /// sends must not stay in memory past the listing that bounds it.
    async fn new(
        service: RunningService<RoleClient, Handler>,
        child: Option<Child>,
        scratch: Option<PathBuf>,
    ) -> Self {
        service
            .peer()
            .set_response_cache_config(rmcp::service::ClientCacheConfig::disabled())
            .await;
        Self {
            service,
            child,
            scratch,
            last_used: Mutex::new(Instant::now()),
        }
    }

    pub fn is_alive(&self) -> bool {
        !self.service.is_transport_closed() && !self.service.is_closed()
    }

    pub fn touch(&self) {
        *lock(&self.last_used) = Instant::now();
    }

    pub fn idle_for(&self) -> Duration {
        lock(&self.last_used).elapsed()
    }

    /// Kills a stdio server's whole group at once.
    pub fn kill(&self) {
        if let Some(child) = &self.child {
            child.kill();
        }
    }

    /// Ends the connection at once, from wherever it is shared: a stdio
    /// server's group is killed, and the connection closed.
    pub fn end(&self) {
        self.kill();
        self.service.cancellation_token().cancel();
    }

    /// How a stdio server's leader ended, once it has.
    pub async fn exited(&self) -> Option<String> {
        match &self.child {
            Some(child) => Some(child.exited().await),
            None => std::future::pending().await,
        }
    }

    /// Ends the connection: a stdio server gets SIGTERM, then SIGKILL
    /// after `grace`.
    pub async fn stop(mut self, grace: Duration) {
        let _ = self.service.close_with_timeout(grace).await;
        if let Some(child) = self.child.take() {
            child.stop(grace).await;
        }
        if let Some(scratch) = self.scratch.take() {
            let _ = std::fs::remove_dir_all(scratch);
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(scratch) = self.scratch.take() {
            let _ = std::fs::remove_dir_all(scratch);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
