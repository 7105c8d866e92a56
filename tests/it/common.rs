//! Shared helpers: corpus roots, catalogs, and real servers on port 0.

use skilld::AppState;
use skilld::auth::Auth;
use skilld::catalog::{Catalog, CatalogHandle, CatalogOptions, Root};
use skilld::http::ServerLimits;
use skilld::http::guard::WebGuard;
use skilld::install::InstallSettings;
use skilld::invoke::{Invoker, RunSettings};
use skilld::skill::Runtimes;
use skilld::skill::Trust;
use skilld::store::Store;
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The test corpus, `tests/corpus`.
pub fn corpus_dir() -> PathBuf {
    checkout().join("tests/corpus")
}

/// The bundled `skills/` of this repository.
pub fn bundled_dir() -> PathBuf {
    checkout().join("skills")
}

/// This repository as a sandboxed tool can read it: the checkout itself,
/// or, when it lies where others cannot go (a clone in root's home or a
/// private temporary directory: the tools run as another user), a copy
/// in a world-readable temporary directory, made once per test process.
pub fn checkout() -> &'static Path {
    static CHECKOUT: std::sync::LazyLock<PathBuf> = std::sync::LazyLock::new(|| {
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        if !nix::unistd::geteuid().is_root() || skilld::runner::runnable_by_anyone(here) {
            return here.to_path_buf();
        }
        let base = std::env::temp_dir().join("skilld-test-checkouts");
        let _ = std::fs::create_dir(&base);
        remove_copies_of_dead_processes(&base);
        let copy = base.join(std::process::id().to_string());
        let _ = std::fs::remove_dir_all(&copy);
        copy_readable(here, &copy);
        for dir in [&base, &copy] {
            set_mode(dir, 0o755);
        }
        copy
    });
    &CHECKOUT
}

/// The checkout without its build output, readable by everyone.
fn copy_readable(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    set_mode(to, 0o755);
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        let target = to.join(&name);
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            if name != "target" && name != "node_modules" {
                copy_readable(&entry.path(), &target);
            }
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target).unwrap();
            let exec = std::fs::metadata(entry.path()).unwrap().permissions().mode() & 0o111 != 0;
            set_mode(&target, if exec { 0o755 } else { 0o644 });
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path()).unwrap(), &target).unwrap();
        }
    }
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn remove_copies_of_dead_processes(base: &Path) {
    for entry in std::fs::read_dir(base).into_iter().flatten().flatten() {
        let pid = entry.file_name().to_string_lossy().into_owned();
        if !Path::new("/proc").join(&pid).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

pub fn root(path: impl Into<PathBuf>, trust: Trust) -> Root {
    let path = path.into();
    Root {
        name: path.display().to_string(),
        path,
        trust,
        explicit: true,
        installed: false,
    }
}

pub fn options(roots: Vec<Root>) -> CatalogOptions {
    CatalogOptions {
        roots,
        max_timeout_secs: 600,
        runtimes: Runtimes::default(),
        launcher: None,
        rules: Default::default(),
    }
}

/// The corpus as `expected.json` says to load it: valid, warn and invalid
/// as three roots of one catalog.
pub fn corpus_options() -> CatalogOptions {
    let c = corpus_dir();
    options(vec![
        root(c.join("valid"), Trust::User),
        root(c.join("warn"), Trust::User),
        root(c.join("invalid"), Trust::User),
    ])
}

/// The corpus catalog, its manifests' backends started (and stopped again
/// when the runtime they ran on is dropped, on return).
pub fn corpus_catalog() -> Catalog {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let _entered = runtime.enter();
    let mut opts = corpus_options();
    opts.launcher = skilld::invoke::standalone_launcher(&host_settings());
    Catalog::build(&opts, None)
}

/// A server on 127.0.0.1 port 0 with its own data directory and SQLite
/// run log, stopped when dropped. Without tokens it has a local secret,
/// as `skilld serve` does, which its helpers for people send.
pub struct TestServer {
    pub addr: SocketAddr,
    pub catalog: Arc<CatalogHandle>,
    pub invoker: Arc<Invoker>,
    /// The local secret of a server without tokens: the person's.
    pub secret: Option<String>,
    /// Holds the data directory (and SQLite file) for the server's life.
    data: Option<tempfile::TempDir>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    stopped: Option<tokio::task::JoinHandle<()>>,
}

impl TestServer {
    pub async fn start(opts: CatalogOptions) -> Self {
        Self::start_with(opts, RunSettings::default()).await
    }

    /// With a given database URL (to restart on the same run log).
    pub async fn start_on(opts: CatalogOptions, database_url: &str) -> Self {
        let store = skilld::store::connect(database_url).await.unwrap();
        Self::launch(opts, RunSettings::default(), store, tempfile::tempdir().unwrap()).await
    }

    pub async fn start_with(opts: CatalogOptions, settings: RunSettings) -> Self {
        let data = tempdir().unwrap();
        let store = test_store(data.path()).await;
        Self::launch(opts, settings, store, data).await
    }

    /// With bearer tokens required.
    pub async fn start_with_auth(opts: CatalogOptions, auth: Auth) -> Self {
        let data = tempdir().unwrap();
        let store = test_store(data.path()).await;
        Self::launch_with_auth(opts, RunSettings::default(), store, data, auth).await
    }

    pub async fn launch(
        opts: CatalogOptions,
        settings: RunSettings,
        store: Arc<dyn Store>,
        data: tempfile::TempDir,
    ) -> Self {
        Self::launch_with_auth(opts, settings, store, data, open_auth()).await
    }

    pub async fn launch_with_auth(
        opts: CatalogOptions,
        settings: RunSettings,
        store: Arc<dyn Store>,
        data: tempfile::TempDir,
        auth: Auth,
    ) -> Self {
        let web = WebGuard {
            loopback_only: true,
            allowed_origins: Vec::new(),
        };
        Self::launch_guarded(
            opts,
            settings,
            store,
            data,
            auth,
            web,
            InstallSettings::default(),
            ServerLimits::default(),
        )
        .await
    }

    /// With web pages of `allowed_origins` let in (a server without tokens).
    pub async fn start_with_origins(opts: CatalogOptions, allowed_origins: Vec<String>) -> Self {
        Self::start_with_auth_and_origins(opts, open_auth(), allowed_origins).await
    }

    /// With tokens, and web pages of `allowed_origins` let in by CORS.
    pub async fn start_with_auth_and_origins(
        opts: CatalogOptions,
        auth: Auth,
        allowed_origins: Vec<String>,
    ) -> Self {
        let data = tempdir().unwrap();
        let store = test_store(data.path()).await;
        let web = WebGuard {
            loopback_only: true,
            allowed_origins,
        };
        Self::launch_guarded(
            opts,
            RunSettings::default(),
            store,
            data,
            auth,
            web,
            InstallSettings::default(),
            ServerLimits::default(),
        )
        .await
    }

    /// Taking uploads as `install` says.
    pub async fn start_installing(opts: CatalogOptions, install: InstallSettings) -> Self {
        let data = tempdir().unwrap();
        let store = test_store(data.path()).await;
        let web = WebGuard {
            loopback_only: true,
            allowed_origins: Vec::new(),
        };
        Self::launch_guarded(
            opts,
            RunSettings::default(),
            store,
            data,
            open_auth(),
            web,
            install,
            ServerLimits::default(),
        )
        .await
    }

    /// With `limits` on connections and MCP sessions, and tokens if `auth`
    /// has some.
    pub async fn start_limited(opts: CatalogOptions, auth: Auth, limits: ServerLimits) -> Self {
        let data = tempdir().unwrap();
        let store = test_store(data.path()).await;
        let web = WebGuard {
            loopback_only: true,
            allowed_origins: Vec::new(),
        };
        Self::launch_guarded(
            opts,
            RunSettings::default(),
            store,
            data,
            auth,
            web,
            InstallSettings::default(),
            limits,
        )
        .await
    }

    /// With tokens, taking uploads as `install` says.
    pub async fn start_installing_with_auth(
        opts: CatalogOptions,
        install: InstallSettings,
        auth: Auth,
    ) -> Self {
        let data = tempdir().unwrap();
        let store = test_store(data.path()).await;
        let web = WebGuard {
            loopback_only: true,
            allowed_origins: Vec::new(),
        };
        Self::launch_guarded(
            opts,
            RunSettings::default(),
            store,
            data,
            auth,
            web,
            install,
            ServerLimits::default(),
        )
        .await
    }

    #[expect(clippy::too_many_arguments, reason = "each constructor above passes its own")]
    async fn launch_guarded(
        mut opts: CatalogOptions,
        mut settings: RunSettings,
        store: Arc<dyn Store>,
        data: tempfile::TempDir,
        auth: Auth,
        web: WebGuard,
        install: InstallSettings,
        limits: ServerLimits,
    ) -> Self {
        settings.data_dir = data.path().to_path_buf();
        if opts.rules.deps_dir.is_none() {
            // Where `skilld serve` prepares plain skills' dependencies.
            opts.rules.deps_dir = Some(data.path().join("deps"));
        }
        settings.sandbox.write_paths.push(marks_root());
        if settings.starlark_host.is_none() {
            settings.starlark_host = host_settings().starlark_host;
        }
        if settings.workspace == Path::new(".") {
            settings.workspace = checkout().to_path_buf();
        }
        let secret = auth.is_local_secret(TEST_SECRET).then(|| TEST_SECRET.to_owned());
        if secret.is_some() {
            // Where `skilld serve` keeps it, for the command line to find.
            let file = skilld::local_secret::path(data.path());
            std::fs::write(&file, TEST_SECRET).unwrap();
            set_mode(&file, 0o600);
        }
        let invoker = Arc::new(Invoker::new(store, settings));
        if opts.launcher.is_none() {
            opts.launcher = invoker.launcher();
        }
        let catalog = Arc::new(
            tokio::task::spawn_blocking(move || CatalogHandle::new(opts))
                .await
                .unwrap(),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let state = AppState {
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
        let stopped = tokio::spawn(async move {
            let signal = async {
                let _ = stop_rx.await;
            };
            skilld::serve(state, listener, signal, Duration::from_secs(2))
                .await
                .unwrap();
        });
        Self {
            addr,
            catalog,
            invoker,
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

    /// `POST /tools/{tool}/invoke` with `arguments`: the status and body.
    pub async fn invoke(&self, tool: &str, arguments: serde_json::Value) -> (u16, serde_json::Value) {
        let res = reqwest::Client::new()
            .post(self.url(&format!("/tools/{tool}/invoke")))
            .json(&serde_json::json!({ "arguments": arguments }))
            .send()
            .await
            .unwrap();
        (res.status().as_u16(), res.json().await.unwrap())
    }

    /// The server's data directory (its run log, its local secret).
    pub fn data_dir(&self) -> &Path {
        self.data.as_ref().map_or(Path::new("/nonexistent"), |d| d.path())
    }

    /// A client for the person at the inbox: it sends the local secret
    /// of a server without tokens (and nothing with tokens).
    pub fn person(&self) -> reqwest::Client {
        let mut headers = reqwest::header::HeaderMap::new();
        if let Some(secret) = &self.secret {
            headers.insert(
                reqwest::header::AUTHORIZATION,
                format!("Bearer {secret}").parse().unwrap(),
            );
        }
        reqwest::Client::builder()
            .default_headers(headers)
            .build()
            .unwrap()
    }

    /// Approves a held call once (answered 200), then waits for its run.
    pub async fn approve_once_and_wait(&self, held: &serde_json::Value) -> serde_json::Value {
        let approval = held["approval_id"].as_str().unwrap();
        let approved = self
            .person()
            .post(self.url(&format!("/approvals/{approval}/approve")))
            .json(&serde_json::json!({"scope": "once"}))
            .send()
            .await
            .unwrap();
        assert_eq!(approved.status(), 200);
        let run = held["run_id"].as_str().unwrap();
        self.get_json(&format!("/runs/{run}?wait=30")).await
    }

    /// `GET path` as the person, its body as JSON, whatever the status.
    /// `POST /skills/reload` as the person who holds the secret (200).
    pub async fn reload(&self) {
        let res = self
            .person()
            .post(self.url("/skills/reload"))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
    }

    pub async fn get_json(&self, path: &str) -> serde_json::Value {
        let res = self.person().get(self.url(path)).send().await.unwrap();
        res.json().await.unwrap()
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// A server whose every tool an operator has allowed ahead of time
    /// (standing allow grants for the loaded versions), for tests about
    /// running rather than approving.
    pub async fn start_allowed(opts: CatalogOptions) -> Self {
        let server = Self::start(opts).await;
        server.allow_every_tool().await;
        server
    }

    /// Records a standing allow grant for every tool now loaded, so that
    /// the policy (`docs/design.md` §4 step 2) lets their calls run.
    pub async fn allow_every_tool(&self) {
        allow_every_tool(&self.catalog, &self.invoker.store).await;
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
pub async fn allow_every_tool(catalog: &CatalogHandle, store: &Arc<dyn Store>) {
    let catalog = catalog.current();
    for entry in &catalog.tools {
        let skill = &catalog.skills[entry.skill];
        store
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

/// Copies a directory tree (for tests that change skills on disk).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
            let mut perms = std::fs::metadata(&target).unwrap().permissions();
            #[allow(clippy::permissions_set_readonly_false)]
            perms.set_readonly(false);
            std::fs::set_permissions(&target, perms).unwrap();
        }
    }
}

/// A temporary directory others can read and enter, as a skill or a
/// workspace must be for a sandboxed tool, which runs as another user.
pub fn tempdir() -> std::io::Result<tempfile::TempDir> {
    Ok(dir_with_mode(0o755))
}

/// A temporary directory anyone can write: where a sandboxed tool that
/// declared `file:write` leaves the marks a test reads.
pub fn writable_tempdir() -> tempfile::TempDir {
    dir_with_mode(0o777)
}

fn dir_with_mode(mode: u32) -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(mode)).unwrap();
    dir
}

/// Run settings whose tools work in `workspace`.
/// The defaults, with Starlark skills evaluated by the `skilld` binary
/// (this test binary cannot be their host).
pub fn host_settings() -> RunSettings {
    RunSettings {
        starlark_host: Some(PathBuf::from(env!("CARGO_BIN_EXE_skilld"))),
        // Not the default `.`: the checkout holds the Starlark host, and
        // no tool may run what lies in the data directory.
        data_dir: std::env::temp_dir().join(format!("skilld-test-data-{}", std::process::id())),
        ..RunSettings::default()
    }
}

pub fn working_in(workspace: &Path) -> RunSettings {
    RunSettings {
        workspace: workspace.to_path_buf(),
        ..RunSettings::default()
    }
}

/// Where tests' tools leave marks: every test server lets its sandboxed
/// tools write here (`sandbox_write_paths`), as a deployment would a
/// shared output directory.
pub fn marks_root() -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let root = std::env::temp_dir().join("skilld-test-marks");
    let _ = std::fs::create_dir(&root);
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o1777)).unwrap();
    root
}

/// A fresh directory under [`marks_root`] that any user can write.
pub fn marks_dir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir_in(marks_root()).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    dir
}

/// Writes `text` to `path`, making its directory.
pub fn write_file(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// `greet` in `dir`: read-only (runs at once), with a reference file and
/// the command `/hi`.
pub fn greet_skill(dir: &Path) {
    write_file(
        &dir.join("greet/SKILL.md"),
        "---\nname: greet\nversion: 1.0.0\ndescription: Greets people.\nread_only: true\ncommand: hi\n\
         triggers:\n  keywords: [hello]\n---\n\n\
         Say hello. See references/notes.md.\n\n### greet\n\nGreets someone.\n\n#### Parameters\n\n\
         | Name | Type | Required | Description |\n|---|---|---|---|\n| name | string | yes | Who. |\n\n\
         #### Command\n\n```\necho hello {{name}}\n```\n",
    );
    write_file(&dir.join("greet/references/notes.md"), "Greet people by name.\n");
}

/// `stamp` in `dir`: not read-only, so a person approves every call; it
/// appends `ran` to the file it is given and prints `stamped`.
pub fn stamp_skill(dir: &Path) {
    write_file(
        &dir.join("stamp/SKILL.md"),
        "---\nname: stamp\nversion: 1.0.0\ndescription: Leaves a stamp.\n---\n\n### stamp\n\n\
         Appends a line to a file.\n\n#### Parameters\n\n| Name | Type | Required | Description |\n\
         |---|---|---|---|\n| path | string | yes | The file. |\n\n#### Command\n\n\
         ```\nsh -c 'echo ran >> \"$0\"; echo stamped' {{path}}\n```\n",
    );
}

/// The run log of a test server: SQLite in its data directory, or, with
/// `SKILLD_TEST_STORE=postgres` (CI runs the attack suite a second time
/// so), a fresh schema of `SKILLD_TEST_POSTGRES_URL`'s database.
pub async fn test_store(data: &Path) -> Arc<dyn Store> {
    let url = match test_postgres() {
        Some(base) => fresh_schema(base),
        None => format!("sqlite://{}", data.join("skilld.db").display()),
    };
    skilld::store::connect(&url).await.unwrap()
}

/// The PostgreSQL database test servers use instead of SQLite, when
/// `SKILLD_TEST_STORE=postgres` asks for it.
pub fn test_postgres() -> Option<&'static str> {
    static BASE: std::sync::LazyLock<Option<String>> = std::sync::LazyLock::new(|| {
        let wanted = std::env::var("SKILLD_TEST_STORE").is_ok_and(|s| s == "postgres");
        wanted.then(|| {
            std::env::var("SKILLD_TEST_POSTGRES_URL")
                .ok()
                .filter(|u| !u.is_empty())
                .expect("SKILLD_TEST_STORE=postgres needs SKILLD_TEST_POSTGRES_URL")
        })
    });
    BASE.as_deref()
}

/// A URL of `base` whose connections use a schema of their own, made now
/// (blocking: it runs on a thread of its own). Schemas of test processes
/// that are gone are dropped first.
pub fn fresh_schema(base: &str) -> String {
    use sqlx::Connection;
    static MADE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let schema = format!("skilld_run_{}_{n}", std::process::id());
    let (base_owned, made) = (base.to_owned(), schema.clone());
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let mut admin = sqlx::PgConnection::connect(&base_owned).await.unwrap();
            if n == 0 {
                drop_schemas_of_gone_processes(&mut admin).await;
            }
            sqlx::query(sqlx::AssertSqlSafe(format!("create schema {made}")))
                .execute(&mut admin)
                .await
                .unwrap();
        });
    })
    .join()
    .unwrap();
    let sep = if base.contains('?') { '&' } else { '?' };
    format!("{base}{sep}options=-c%20search_path%3D{schema}")
}

async fn drop_schemas_of_gone_processes(admin: &mut sqlx::PgConnection) {
    let schemas: Vec<(String,)> =
        sqlx::query_as("select nspname::text from pg_namespace where nspname like 'skilld_run_%'")
            .fetch_all(&mut *admin)
            .await
            .unwrap();
    for (schema,) in schemas {
        let pid = schema.split('_').nth(2).unwrap_or_default();
        if !Path::new("/proc").join(pid).exists() {
            let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                "drop schema if exists {schema} cascade"
            )))
            .execute(&mut *admin)
            .await;
        }
    }
}

/// A read-only skill `name` (dashes for underscores) whose one tool of the
/// same name runs `command` on its one string parameter `param` (say
/// `sh -c {{s}}`), with `front` added to its frontmatter (`network:
/// true`, say): the hostile tool of the sandbox tests.
pub fn one_tool_skill(dir: &Path, name: &str, front: &str, param: &str, command: &str) {
    let skill = name.replace('_', "-");
    write_file(
        &dir.join(&skill).join("SKILL.md"),
        &format!(
            "---\nname: {skill}\nversion: 1.0.0\ndescription: A hostile tool.\nread_only: true\n{front}---\n\n\
             ### {name}\n\nRuns what it is given.\n\n#### Parameters\n\n| Name | Type | Required | Description |\n\
             |---|---|---|---|\n| {param} | string | yes | What to run. |\n\n#### Command\n\n```\n{command}\n```\n"
        ),
    );
}

/// The URL a `skilld serve` child announces on the first line of its
/// stdout (`listening on URL`), or that line when it announced none.
pub fn announced_url(child: &mut std::process::Child) -> Result<String, String> {
    use std::io::BufRead;
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut first)
        .unwrap();
    match first.trim().strip_prefix("listening on ") {
        Some(url) => Ok(url.to_owned()),
        None => Err(first),
    }
}
