//! The test server: a real skilld on 127.0.0.1 port 0, started through
//! one builder, and stopped when dropped.

use super::{checkout, host_settings, marks_root, set_mode, tempdir, test_store};
use skilld::AppState;
use skilld::auth::Auth;
use skilld::catalog::{CatalogHandle, CatalogOptions};
use skilld::http::ServerLimits;
use skilld::http::kit::guard::WebGuard;
use skilld::install::InstallSettings;
use skilld::invoke::{Invoker, RunSettings};
use skilld::session::SessionSettings;
use skilld::store::Stores;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// A server on 127.0.0.1 port 0 with its own data directory and SQLite
/// run log, stopped when dropped. Without tokens it has a local secret,
/// as `skilld serve` does, which its helpers for people send.
pub struct TestServer {
    pub addr: SocketAddr,
    pub catalog: Arc<CatalogHandle>,
    pub invoker: Arc<Invoker>,
    /// The server's whole store, for tests to arrange and inspect what
    /// the API does not show.
    pub store: Stores,
    /// The session runtime, for a notifier to follow as `skilld serve`'s does.
    pub sessions: Arc<skilld::session::Sessions>,
    /// The local secret of a server without tokens: the person's.
    pub secret: Option<String>,
    /// Holds the data directory (and SQLite file) for the server's life.
    data: Option<tempfile::TempDir>,
    stop: Option<Stop>,
    stopped: Option<tokio::task::JoinHandle<()>>,
}

/// How a test server starts: [`TestServer::builder`] with the catalog,
/// then one method per option that differs from a plain server (SQLite in
/// its own data directory, no tokens, no origins, no uploads, default
/// limits), then [`TestServerBuilder::start`]. crates.io's `TestApp` is
/// the model: one entry, so a new option is one method, not a constructor.
pub struct TestServerBuilder {
    opts: CatalogOptions,
    settings: RunSettings,
    database: Option<String>,
    store: Option<(Stores, tempfile::TempDir)>,
    auth: Option<Auth>,
    web: WebGuard,
    install: InstallSettings,
    limits: ServerLimits,
    sessions: SessionSettings,
    allowed: bool,
}

impl TestServerBuilder {
    /// Run settings other than the defaults.
    pub fn settings(mut self, settings: RunSettings) -> Self {
        self.settings = settings;
        self
    }

    /// The run log at `database_url` (to restart on the same run log).
    pub fn database(mut self, database_url: &str) -> Self {
        self.database = Some(database_url.to_owned());
        self
    }

    /// A store made beforehand, and the data directory it lives in.
    pub fn store(mut self, store: Stores, data: tempfile::TempDir) -> Self {
        self.store = Some((store, data));
        self
    }

    /// Tokens (or no local secret) instead of [`open_auth`].
    pub fn auth(mut self, auth: Auth) -> Self {
        self.auth = Some(auth);
        self
    }

    /// Web pages of `allowed_origins` let in by CORS.
    pub fn origins(mut self, allowed_origins: Vec<String>) -> Self {
        self.web.allowed_origins = allowed_origins;
        self
    }

    /// Taking uploads as `install` says.
    pub fn install(mut self, install: InstallSettings) -> Self {
        self.install = install;
        self
    }

    /// `limits` on connections and MCP sessions.
    pub fn limits(mut self, limits: ServerLimits) -> Self {
        self.limits = limits;
        self
    }

    /// `[sessions]` other than the defaults.
    pub fn sessions(mut self, sessions: SessionSettings) -> Self {
        self.sessions = sessions;
        self
    }

    /// Every tool allowed ahead of time by an operator (standing allow
    /// grants for the loaded versions), for tests about running rather
    /// than approving.
    pub fn allowed(mut self) -> Self {
        self.allowed = true;
        self
    }

    /// Starts the server as configured.
    pub async fn start(self) -> TestServer {
        let (store, data) = match (self.store, &self.database) {
            (Some(given), _) => given,
            (None, Some(url)) => (
                skilld::store::connect(url).await.unwrap(),
                tempfile::tempdir().unwrap(),
            ),
            (None, None) => {
                let data = tempdir().unwrap();
                (test_store(data.path()).await, data)
            }
        };
        let server = TestServer::launch(
            Launch {
                opts: self.opts,
                settings: self.settings,
                auth: self.auth.unwrap_or_else(open_auth),
                web: self.web,
                install: self.install,
                limits: self.limits,
                sessions: self.sessions,
            },
            store,
            data,
        )
        .await;
        if self.allowed {
            server.allow_every_tool().await;
        }
        server
    }
}

type Stop = tokio::sync::oneshot::Sender<()>;

/// Serves `state` on 127.0.0.1 port 0 until told to stop: its address,
/// the sender that stops it, and the task that ends when it has.
async fn serve_on_port_0(state: AppState) -> (SocketAddr, Stop, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let stopped = tokio::spawn(async move {
        let signal = async {
            let _ = stop_rx.await;
        };
        skilld::serve(state, listener, signal, Duration::from_secs(2))
            .await
            .unwrap();
    });
    (addr, stop, stopped)
}

/// The local secret of a server without tokens, written where `skilld
/// serve` keeps it, for the command line to find.
fn keep_local_secret(auth: &Auth, data: &Path) -> Option<String> {
    let secret = auth.is_local_secret(TEST_SECRET).then(|| TEST_SECRET.to_owned());
    if secret.is_some() {
        let file = skilld::local_secret::path(data);
        std::fs::write(&file, TEST_SECRET).unwrap();
        set_mode(&file, 0o600);
    }
    secret
}

/// What [`TestServer::launch`] serves, gathered by the builder.
struct Launch {
    opts: CatalogOptions,
    settings: RunSettings,
    auth: Auth,
    web: WebGuard,
    install: InstallSettings,
    limits: ServerLimits,
    sessions: SessionSettings,
}

impl Launch {
    /// Fills in what every test server needs and a test did not set: the
    /// data directory, where the marks go, the Starlark host, a workspace.
    fn settle(&mut self, data: &Path) {
        let (opts, settings) = (&mut self.opts, &mut self.settings);
        settings.data_dir = data.to_path_buf();
        if opts.rules.deps_dir.is_none() {
            // Where `skilld serve` prepares plain skills' dependencies.
            opts.rules.deps_dir = Some(data.join("deps"));
        }
        settings.sandbox.write_paths.push(marks_root());
        if settings.starlark_host.is_none() {
            settings.starlark_host = host_settings().starlark_host;
        }
        if settings.workspace == Path::new(".") {
            settings.workspace = checkout().to_path_buf();
        }
    }
}

impl TestServer {
    /// The one way to start a test server: see [`TestServerBuilder`].
    pub fn builder(opts: CatalogOptions) -> TestServerBuilder {
        TestServerBuilder {
            opts,
            settings: RunSettings::default(),
            database: None,
            store: None,
            auth: None,
            web: WebGuard {
                loopback_only: true,
                allowed_origins: Vec::new(),
            },
            install: InstallSettings::default(),
            limits: ServerLimits::default(),
            sessions: SessionSettings::default(),
            allowed: false,
        }
    }

    async fn launch(mut launch: Launch, store: Stores, data: tempfile::TempDir) -> Self {
        launch.settle(data.path());
        let Launch {
            mut opts,
            settings,
            auth,
            web,
            install,
            limits,
            sessions,
        } = launch;
        let secret = keep_local_secret(&auth, data.path());
        let invoker = Arc::new(Invoker::new(store.clone(), settings));
        if opts.launcher.is_none() {
            opts.launcher = invoker.launcher();
        }
        let catalog = Arc::new(
            tokio::task::spawn_blocking(move || CatalogHandle::new(opts))
                .await
                .unwrap(),
        );
        let sessions = skilld::session::Sessions::shared(&invoker, &store, catalog.clone(), sessions);
        let state = AppState {
            sessions: sessions.clone(),
            approver: skilld::invoke::Approver::new(&invoker, &store),
            installer: Arc::new(skilld::install::Installer::new(
                catalog.clone(),
                invoker.clone(),
                install,
            )),
            catalog: catalog.clone(),
            invoker: invoker.clone(),
            auth: Arc::new(auth),
            web: Arc::new(web),
            limits,
        };
        let (addr, stop, stopped) = serve_on_port_0(state).await;
        Self {
            addr,
            catalog,
            invoker,
            store,
            sessions,
            secret,
            data: Some(data),
            stop: Some(stop),
            stopped: Some(stopped),
        }
    }

    /// Stops the server as SIGTERM would, and waits until it has. The data
    /// directory (and its run log) is handed back, to be read afterwards.
    pub async fn shutdown(mut self) -> Option<tempfile::TempDir> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(stopped) = self.stopped.take() {
            stopped.await.unwrap();
        }
        self.data.take()
    }

    /// `POST /tools/{tool}/invoke` with `arguments`, as a caller without
    /// a token: the status and body.
    pub async fn invoke(&self, tool: &str, arguments: serde_json::Value) -> (u16, serde_json::Value) {
        super::Api::anonymous(self).invoke(tool, arguments).await
    }

    /// The server's data directory (its run log, its local secret).
    pub fn data_dir(&self) -> &Path {
        self.data.as_ref().map_or(Path::new("/nonexistent"), |d| d.path())
    }

    /// A client for the person at the inbox: it sends the local secret
    /// of a server without tokens (and nothing with tokens).
    pub fn person(&self) -> reqwest::Client {
        super::bearer_client(self.secret.as_deref())
    }

    /// Approves a held call once (answered 200), then waits for its run.
    pub async fn approve_once_and_wait(&self, held: &serde_json::Value) -> serde_json::Value {
        let person = super::Api::of(self);
        let approval = held["approval_id"].as_str().unwrap();
        let (status, approved) = person
            .post(
                &format!("/approvals/{approval}/approve"),
                serde_json::json!({"scope": "once"}),
            )
            .await;
        assert_eq!(status, 200, "{approved}");
        person.finished_run(&held["run_id"]).await
    }

    /// `POST /skills/reload` as the person who holds the secret (200).
    pub async fn reload(&self) {
        let (status, body) = super::Api::of(self).post_empty("/skills/reload").await;
        assert_eq!(status, 200, "{body}");
    }

    /// `GET path` as the person, its body as JSON, whatever the status.
    pub async fn get_json(&self, path: &str) -> serde_json::Value {
        super::Api::of(self).get(path).await.1
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Records a standing allow grant for every tool now loaded, so that
    /// the policy (`docs/design.md` §4 step 2) lets their calls run.
    pub async fn allow_every_tool(&self) {
        allow_every_tool(&self.catalog, &self.store).await;
    }
}

/// The local secret of every test server without tokens: tests hold it
/// as the person who started the server would.
pub const TEST_SECRET: &str = "7e57c0de7e57c0de7e57c0de7e57c0de7e57c0de7e57c0de7e57c0de7e57c0de";

/// A server without tokens, its local secret [`TEST_SECRET`].
pub fn open_auth() -> Auth {
    Auth::open_with_secret(TEST_SECRET).unwrap()
}

/// See [`TestServer::allow_every_tool`].
pub async fn allow_every_tool(catalog: &CatalogHandle, store: &Stores) {
    let catalog = catalog.current();
    for entry in &catalog.tools {
        let skill = &catalog.skills[entry.skill];
        store
            .approvals
            .put_grant(skilld::store::Grant {
                id: uuid::Uuid::now_v7(),
                skill: skill.name.clone(),
                tool: skill.tools[entry.tool].name.clone(),
                skill_hash: skill.hash.clone(),
                decision: skilld::store::GrantDecision::Allow,
                created_by: Some("test-operator".to_owned()),
                created_at: chrono::Utc::now(),
            })
            .await
            .unwrap();
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
