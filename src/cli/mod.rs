//! The `skilld` command line (`docs/api.md`, "The command line").

mod failure;
mod import;
mod install;
mod list;
mod locked;
mod manage;
mod progress;
mod registry;
pub mod scaffold;
mod sign;
mod skill_test;

use crate::catalog::{Catalog, CatalogHandle, CatalogOptions, Root};
use crate::config::{self, Config, LocalArgs, ServeArgs};
use crate::export::Format;
use crate::http::{AppState, serve};
use crate::invoke::{Asked, Call, Called, Delivery, Gate, Invoker, Target};
use crate::skill::backend::{Launch, Linting};
use crate::skill::{Code, Diagnostic, Severity, Trust};
use crate::skill::{LoadOptions, PathCache, Runtimes, SkillRules, load_skill};
use crate::store::Store;
use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use scaffold::ScaffoldDialect;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Parser)]
#[command(name = "skilld", version, about = "Serves skills as an API")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP server.
    Serve(Box<ServeArgs>),
    /// Lint skills; exit 1 on any error (a path with no skill is one).
    Check {
        #[arg(long, value_enum, default_value_t = CheckFormat::Text)]
        format: CheckFormat,
        /// The server's TOML config, whose runtimes, image_allowlist and
        /// entrypoint defaults apply as they would when it serves.
        #[arg(long, env = "SKILLD_CONFIG", value_name = "FILE")]
        config: Option<PathBuf>,
        /// Skill directories (or their SKILL.md), or directories of skills.
        #[arg(required = true, value_name = "DIR")]
        dirs: Vec<PathBuf>,
    },
    /// Print the tool exports without a server.
    Tools {
        #[arg(long = "skills", value_name = "[TRUST=]DIR")]
        skills: Vec<String>,
        /// The shape of the exports.
        #[arg(long, default_value = "native", value_parser = format_parser())]
        format: Format,
        #[arg(long, value_name = "M")]
        mode: Option<String>,
    },
    /// Run one tool here, without a server, and print its envelope.
    Run {
        #[arg(long = "skills", value_name = "[TRUST=]DIR")]
        skills: Vec<String>,
        /// The tool (or `skill__tool` for an ambiguous name).
        tool: String,
        /// The arguments, as a JSON object.
        #[arg(long = "args", value_name = "JSON", default_value = "{}")]
        args: String,
        /// Record the run in this database (default: the server's).
        #[arg(long, env = "SKILLD_DATABASE_URL", value_name = "URL")]
        database: Option<String>,
        #[arg(long, env = "SKILLD_DATA_DIR", value_name = "DIR")]
        data_dir: Option<PathBuf>,
        #[arg(long, env = "SKILLD_WORKSPACE", value_name = "DIR")]
        workspace: Option<PathBuf>,
        #[arg(long, value_name = "M")]
        mode: Option<String>,
    },
    /// Serve MCP over stdin and stdout, for a desktop client that starts
    /// skilld itself. Calls that need approval wait for a person deciding
    /// through a `skilld serve` sharing the run log.
    Mcp(McpArgs),
    /// Print the OpenAPI document.
    Openapi,
    /// Lint a skill, then write it as a zip archive: the same bytes for the
    /// same content. Exit 1 when it does not lint, 2 when it cannot be
    /// written.
    Package {
        /// The skill's directory (the one holding SKILL.md or SKILL.yaml).
        #[arg(value_name = "DIR")]
        dir: PathBuf,
        /// Where to write the archive (default: NAME-VERSION.zip here).
        #[arg(short = 'o', long = "output", value_name = "FILE.zip")]
        output: Option<PathBuf>,
        /// Also sign it with this minisign secret key (`skilld keygen`,
        /// `minisign -G`), writing FILE.zip.minisig beside it. An
        /// encrypted key takes its password from SKILLD_SIGN_PASSWORD.
        #[arg(long = "sign", value_name = "KEYFILE")]
        sign: Option<PathBuf>,
    },
    /// Make a minisign key pair for signing packages: PREFIX.key (secret,
    /// unencrypted, mode 0600) and PREFIX.pub. Prints the public key.
    /// Exit 1 when either file exists (nothing is overwritten), 2 when
    /// they cannot be written.
    Keygen(sign::KeygenArgs),
    /// Make a new skill directory, PARENT/NAME, from a template of one
    /// dialect that passes `skilld check` and whose tool runs. Prints its
    /// path. Exit 1 when NAME is not a valid skill name or the directory
    /// exists (nothing is overwritten), 2 when it cannot be written.
    New {
        /// The skill's name: lowercase letters and digits, with single
        /// hyphens between words (`csv-stats`).
        #[arg(value_name = "NAME")]
        name: String,
        /// How the skill is written (`docs/skills.md`, "Which dialect?").
        #[arg(long, value_enum, default_value_t = ScaffoldDialect::Markdown)]
        dialect: ScaffoldDialect,
        /// The directory to make it in.
        #[arg(long = "dir", value_name = "PARENT", default_value = ".")]
        dir: PathBuf,
    },
    /// Install a skill from another skilld (`http://HOST/skills/NAME`, or
    /// `NAME@VERSION`) or from a zip file: into this machine's installed
    /// root (under the data directory), or with `--to` into a running
    /// server. A skill fetched from a skilld must have the hash its source
    /// gives, or nothing is installed. Prints `NAME@VERSION STATUS HASH`.
    /// Exit 0 installed; 1 refused (it does not lint, its hash differs,
    /// that version exists, …); 2 the source, the server or the disk
    /// cannot be reached.
    Install(install::InstallArgs),
    /// List the skills served here (or by `--to`'s server): `NAME@VERSION`,
    /// root, trust and description; with `--available`, those the
    /// registries offer. Exit 2 when nothing can be read.
    List(list::ListArgs),
    /// Search the registries (`--registry`, or the config's
    /// `[[registries]]`, asked in order; each index is cached for
    /// `registry_ttl_secs`): a line per skill, `NAME@LATEST`, its
    /// description and its registry. Exit 0 found; 1 nothing matches or
    /// no registry is configured; 2 no registry can be read.
    Search(registry::SearchArgs),
    /// Add a skill from the registries to a project: into
    /// `WORKSPACE/.agent/skills/NAME`, checked as an install is, and
    /// recorded in `WORKSPACE/skills.lock`. Prints `NAME@VERSION DIR HASH`.
    /// Exit 1 refused (not found, tampered, does not lint, already there
    /// without `--force`, not as locked); 2 unreachable.
    Add(registry::AddArgs),
    /// Write a static registry's `index.json` for the archives in a
    /// directory (with their `.minisig` signatures), for any HTTP server
    /// to serve. Exit 1 when an archive does not lint or has no semver
    /// version, 2 when the directory cannot be read or written.
    Index(registry::IndexArgs),
    /// Show a skill: its manifest's main fields, permissions, state,
    /// installed versions and grants. Exit 1 when there is no such skill,
    /// 2 when the server, the disk or the database cannot be reached.
    Info(manage::InfoArgs),
    /// Remove an installed skill (every version) or one version
    /// (`NAME@VERSION`): the highest other ready version then serves.
    /// Exit 1 when it is not installed or runs of it are in flight
    /// (without `--force`), 2 when it cannot be reached.
    Remove(manage::RemoveArgs),
    /// Show the permissions a skill declares and the grants standing for
    /// it; `--revoke` revokes them all first. Exit 1 when there is no such
    /// skill (or the token may not), 2 when it cannot be reached.
    Permissions(manage::PermissionsArgs),
    /// Run a skill's examples: its trigger examples through the engine of
    /// `POST /skills/match`, its calls as `skilld run` runs them, in the
    /// sandbox, with a throwaway run log. Prints a line per example. Exit
    /// 0 all passed; 1 one failed, the skill does not lint or has no
    /// examples; 2 they cannot be run.
    Test(skill_test::TestArgs),
    /// Write a skill (a SKILL.yaml with an `mcp` backend) for each MCP
    /// server of Claude Desktop's, Claude Code's, Cursor's or VS Code's
    /// config, with secrets as environment references. Prints each skill
    /// and the variables to set. Exit 1 on bad input, 2 when a skill
    /// cannot be written.
    Import(import::ImportArgs),
    /// Evaluate a Starlark skill's script for a server: the child it
    /// starts in the run sandbox, speaking JSON-RPC on stdin and stdout.
    #[command(hide = true)]
    StarlarkHost {
        /// The script (`*.star`).
        entrypoint: PathBuf,
    },
}

/// `skilld mcp`'s flags: those of every command that runs tools here,
/// and the session's mode.
#[derive(Debug, clap::Args)]
pub struct McpArgs {
    #[command(flatten)]
    pub local: LocalArgs,
    /// The mode the client works in (`Dev`, `Meeting`, …): only tools of
    /// skills serving in it (or `Global`) are listed and may be called,
    /// unless a request names another in its `_meta` `skilld/mode`.
    #[arg(long, env = "SKILLD_MODE", value_name = "M")]
    pub mode: Option<String>,
    /// Ask the person in their client to decide the calls that wait for
    /// one (an elicitation, or `input_required` on 2026-07-28), when the
    /// client can be asked: the one local user decides their own calls.
    /// Without it, they decide in a `skilld serve`'s inbox.
    #[arg(long, env = "SKILLD_CLIENT_APPROVAL")]
    pub client_approval: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CheckFormat {
    Text,
    Json,
}

/// `--format`, listing its values in `--help` and in errors.
fn format_parser() -> impl clap::builder::TypedValueParser<Value = Format> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(Format::ALL.map(Format::as_str))
        .try_map(|s| Format::parse(&s).ok_or_else(|| format!("unknown format '{s}'")))
}

/// Runs the command line; the process exits with the returned code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::StarlarkHost { entrypoint } = &cli.command {
        // No logging set-up: stderr is the server's log of this child.
        return crate::backend::run_starlark_host(entrypoint);
    }
    if let Err(e) = init_tracing() {
        eprintln!("skilld: {e}");
        return ExitCode::from(2);
    }
    let result = match cli.command {
        Command::Serve(args) => run_serve(&args),
        Command::Check { format, dirs, config } => return check(&dirs, format, config.as_deref()),
        Command::Tools { skills, format, mode } => tools(&skills, format, mode.as_deref()),
        Command::Mcp(args) => run_mcp(&args),
        Command::Openapi => print_openapi(),
        Command::Package { dir, output, sign } => return package(&dir, output.as_deref(), sign.as_deref()),
        Command::Keygen(args) => return sign::keygen(&args),
        Command::New { name, dialect, dir } => return new_skill(&dir, &name, dialect),
        Command::Install(args) if args.replays_lock() => return locked::run(&args),
        Command::Install(args) => return install::run(&args),
        Command::Search(args) => return registry::search(&args),
        Command::List(args) => return list::list(&args),
        Command::Add(args) => return registry::add(&args),
        Command::Index(args) => return registry::index(&args),
        Command::Info(args) => return manage::info(&args),
        Command::Remove(args) => return manage::remove(&args),
        Command::Permissions(args) => return manage::permissions(&args),
        Command::Import(args) => return import::run(&args),
        Command::Test(args) => return skill_test::run(&args),
        Command::StarlarkHost { .. } => Ok(()),
        Command::Run {
            skills,
            tool,
            args,
            database,
            data_dir,
            workspace,
            mode,
        } => {
            let serve = ServeArgs {
                local: LocalArgs {
                    skills,
                    database,
                    data_dir,
                    workspace,
                    no_watch: Some(true),
                    ..LocalArgs::default()
                },
                ..ServeArgs::default()
            };
            return match run_one(&serve, &tool, &args, mode.as_deref()) {
                Ok(true) => ExitCode::SUCCESS,
                Ok(false) => ExitCode::from(1),
                Err(e) => {
                    eprintln!("skilld: {e:#}");
                    ExitCode::from(2)
                }
            };
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("skilld: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Logs go to stderr, so stdout carries only what commands print: text
/// (coloured only on a terminal), or JSON lines with
/// `SKILLD_LOG_FORMAT=json`, filtered by `SKILLD_LOG`.
fn init_tracing() -> Result<(), String> {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_env("SKILLD_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(progress::LogWriter);
    let format = std::env::var("SKILLD_LOG_FORMAT").unwrap_or_default();
    // Already set (a test that calls `main` twice) is fine.
    let _ = match format.as_str() {
        "" | "text" => builder.with_ansi(std::io::stderr().is_terminal()).try_init(),
        "json" => builder.json().with_current_span(true).try_init(),
        other => {
            return Err(format!(
                "SKILLD_LOG_FORMAT is '{}'; it takes text (the default) or json",
                other.escape_debug()
            ));
        }
    };
    Ok(())
}

/// Variables that hold secrets, read once at start-up (`ServeArgs`).
const SECRET_VARIABLES: [&str; 2] = ["SKILLD_TOKENS", "SKILLD_DATABASE_URL"];

/// Makes this process non-dumpable: its `/proc/<pid>` entries (memory,
/// environment, file descriptors) then belong to root, so a tool running
/// as the same user cannot read them. And wipes the secrets, already
/// parsed, from its environment and its command line, so that not even
/// root reads them there.
fn harden(config: &Config) {
    if let Err(e) = nix::sys::prctl::set_dumpable(false) {
        tracing::warn!(error = %e, "cannot make the process non-dumpable; tools of the same user can read its memory");
    }
    let mut secrets: Vec<&str> = SECRET_VARIABLES.to_vec();
    secrets.extend(config.secret_variables.iter().map(String::as_str));
    if let Err(why) = crate::environ::wipe(&secrets) {
        tracing::warn!(%why, "cannot wipe the secrets from this process's environment");
    }
    let passwords = crate::config::url_passwords(&config.database_url);
    if let Err(why) = crate::environ::mask_arguments(&passwords) {
        tracing::warn!(%why, "cannot mask the database password in this process's command line");
    }
}

fn run_serve(args: &ServeArgs) -> anyhow::Result<()> {
    let config = Config::resolve(args).map_err(anyhow::Error::msg)?;
    harden(&config);
    tracing::debug!(?config, "configuration");
    let runtime = runtime()?;
    runtime.block_on(serve_main(config))
}

/// `skilld mcp`: one MCP session on stdio, as the local user, with the
/// invoke role (list and call; approving is for people, elsewhere).
fn run_mcp(args: &McpArgs) -> anyhow::Result<()> {
    use rmcp::ServiceExt;
    let config = Config::resolve(&ServeArgs {
        local: args.local.clone(),
        ..ServeArgs::default()
    })
    .map_err(anyhow::Error::msg)?;
    harden(&config);
    let runtime = runtime()?;
    runtime.block_on(async move {
        let (invoker, handle) = pipeline(&config, false).await?;
        let _watcher = watch(&config, &handle);
        // Plain skills' dependencies are prepared here as in `serve`.
        let preparing = tokio_util::sync::CancellationToken::new();
        let installer = Arc::new(crate::install::Installer::new(
            handle.clone(),
            invoker.clone(),
            config.install.clone(),
        ));
        tokio::spawn(installer.prepare_dependencies(preparing.clone()));
        let _stop_preparing = preparing.drop_guard();
        let session = crate::mcp::LocalSession {
            caller: crate::auth::Caller {
                name: std::env::var("USER").ok().map(|u| format!("mcp:{u}")),
                role: crate::auth::Role::Invoke,
            },
            mode: args.mode.clone(),
            client_approval: args.client_approval,
            inbox: crate::mcp::LocalInbox {
                database_url: config.database_url.clone(),
                address: people_url(&config, config.bind),
            },
        };
        let server = crate::mcp::McpServer::local(handle, invoker.clone(), session);
        let session = server
            .serve(rmcp::transport::io::stdio())
            .await
            .context("the MCP client did not initialize")?;
        let ended = session.waiting().await;
        invoker.shutdown(config.shutdown_grace).await;
        ended.context("the MCP session failed")?;
        Ok(())
    })
}

/// Reloads the catalog when its files change, unless `--no-watch`.
fn watch(config: &Config, handle: &Arc<CatalogHandle>) -> Option<crate::watch::Watch> {
    if !config.watch {
        return None;
    }
    match crate::watch::spawn(handle.clone()) {
        Ok(w) => Some(w),
        Err(e) => {
            tracing::warn!(error = %e, "file watching unavailable; use POST /skills/reload");
            None
        }
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// Opens the run log. A server (`recover`) also marks the runs a crash
/// left `running` as interrupted; `skilld run` must not, since a server may
/// be running some of them right now.
async fn open_store(config: &Config, recover: bool) -> anyhow::Result<Arc<dyn Store>> {
    let store = crate::store::connect_with(&config.database_url, config.run_log_commit_interval)
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "cannot open the run log {}: {e}",
                config::redact_url(&config.database_url)
            )
        })?;
    if !recover {
        return Ok(store);
    }
    // SQLite belongs to this instance alone; PostgreSQL may be shared.
    let instance = (store.backend() != "sqlite").then_some(config.run.instance.as_str());
    let interrupted = store
        .interrupt_running(instance, chrono::Utc::now())
        .await
        .map_err(|e| anyhow::anyhow!("cannot recover the run log: {e}"))?;
    if interrupted > 0 {
        tracing::warn!(
            interrupted,
            "runs left running by an earlier crash are marked interrupted"
        );
    }
    Ok(store)
}

/// The run log, the pipeline over it, and the catalog its launcher loads
/// (manifests' backends start in the pipeline's sandbox): what serving,
/// `run`, `mcp` and `install` each start from. `recover` ends the runs a
/// crash left running, as only a server should.
async fn pipeline(config: &Config, recover: bool) -> anyhow::Result<(Arc<Invoker>, Arc<CatalogHandle>)> {
    pipeline_over(open_store(config, recover).await?, config).await
}

/// [`pipeline`] over a store already open.
async fn pipeline_over(
    store: Arc<dyn Store>,
    config: &Config,
) -> anyhow::Result<(Arc<Invoker>, Arc<CatalogHandle>)> {
    let invoker = Arc::new(Invoker::new(store, config.run.clone()));
    let (loading, launcher) = (config.clone(), invoker.launcher());
    let handle = Arc::new(tokio::task::spawn_blocking(move || load_catalog(&loading, launcher)).await?);
    invoker
        .pre_grant(&handle.current(), &config.grants)
        .await
        .map_err(anyhow::Error::msg)?;
    crate::watch::follow_offers(handle.clone());
    Ok((invoker, handle))
}

fn load_catalog(config: &Config, launcher: Option<Arc<dyn Launch>>) -> CatalogHandle {
    CatalogHandle::new(CatalogOptions {
        roots: config.roots.clone(),
        max_timeout_secs: config.max_timeout_secs,
        runtimes: config.runtimes.clone(),
        launcher,
        rules: config.rules.clone(),
    })
    .with_agent_tools(config.agent_tools.clone())
}

async fn serve_main(config: Config) -> anyhow::Result<()> {
    let limits = connection_limits(&config.limits);
    let listener = tokio::net::TcpListener::bind(config.bind)
        .await
        .with_context(|| format!("cannot listen on {}", config.bind))?;
    let addr = listener.local_addr().context("no local address")?;
    let claim = if config.database_url.starts_with("sqlite:") {
        crate::store::claim_for_serving(&config.database_url).map_err(|e| match e {
            crate::store::StoreError::Conflict(why) => anyhow::anyhow!(why),
            other => anyhow::anyhow!("{other}"),
        })?
    } else {
        None
    };
    if let Some(claim) = &claim
        && let Err(e) = crate::store::announce_serving(claim, &people_url(&config, addr))
    {
        tracing::warn!(error = %e, "cannot note this server's address for skilld mcp sessions");
    }
    let store = open_store(&config, true).await?;
    let (invoker, handle) = pipeline_over(store.clone(), &config).await?;
    // Only a server prunes: `skilld run` and `mcp` sessions come and go.
    let _retention = crate::retention::spawn(store, config.retention.clone());
    // In the background: an unreachable bucket is retried for a while.
    tokio::spawn({
        let artifacts = invoker.artifacts().clone();
        async move { artifacts.check().await }
    });
    let mut notifier = crate::notify::spawn(
        invoker.clone(),
        config.notify.clone(),
        config.run.instance.clone(),
        // The bound address: `--bind` may have asked for port 0.
        config
            .public_url
            .clone()
            .unwrap_or_else(|| format!("http://{addr}")),
    );
    let catalog = handle.current();
    tracing::info!(
        skills = catalog.skills.len(),
        tools = catalog.tools.len(),
        errors = catalog.error_count(),
        "catalog loaded"
    );
    let _watcher = watch(&config, &handle);
    let (auth, secret) = authority(&config, &people_url(&config, addr))?;
    let shutdown = shutdown_signal().context("cannot listen for SIGTERM and SIGINT")?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "listening on http://{addr}")?;
        out.flush()?;
    }
    announce_auth(&config, addr, secret.as_deref());
    let installer = Arc::new(crate::install::Installer::new(
        handle.clone(),
        invoker.clone(),
        config.install.clone(),
    ));
    let sessions = crate::session::Sessions::shared(&invoker, handle.clone(), config.sessions.clone());
    if let Some(notifier) = &mut notifier {
        notifier.follow_activations(sessions.activation_requests());
    }
    let state = AppState {
        sessions,
        installer,
        catalog: handle,
        invoker,
        auth,
        limits,
        web: Arc::new(crate::http::guard::WebGuard {
            loopback_only: addr.ip().is_loopback(),
            allowed_origins: config.allowed_origins.clone(),
        }),
    };
    serve(state, listener, shutdown, config.shutdown_grace).await?;
    tracing::info!("stopped");
    Ok(())
}

/// Where people reach a server listening on `addr`: `--public-url`, else
/// `http://` and the address (loopback for one listening everywhere).
fn people_url(config: &Config, addr: std::net::SocketAddr) -> String {
    config
        .public_url
        .clone()
        .unwrap_or_else(|| format!("http://{}", link_host(addr)))
}

/// Who may do what on this server: its tokens, and the access tokens of
/// its OAuth issuers for the resource at `public_url`; without either, the
/// local secret kept in the data directory (made on first start), returned
/// too.
fn authority(config: &Config, public_url: &str) -> anyhow::Result<(Arc<crate::auth::Auth>, Option<String>)> {
    if let Some(settings) = &config.oauth {
        let oauth = crate::oauth::OAuth::new(settings, public_url).map_err(anyhow::Error::msg)?;
        tracing::info!(resource = %oauth.resource(), metadata = %oauth.metadata_url(true),
            "OAuth access tokens are taken");
        let auth = (*config.auth)
            .clone()
            .with_oauth(Arc::new(oauth))
            .map_err(anyhow::Error::msg)?;
        return Ok((Arc::new(auth), None));
    }
    if !config.auth.is_open() {
        return Ok((config.auth.clone(), None));
    }
    let secret = crate::local_secret::load_or_create(&config.data_dir)
        .with_context(|| format!("cannot keep the local secret in {}", config.data_dir.display()))?;
    let auth = crate::auth::Auth::open_with_secret(&secret).map_err(anyhow::Error::msg)?;
    Ok((Arc::new(auth), Some(secret)))
}

/// Says who may do what: without tokens, the inbox's link that carries the
/// local secret, on stdout after the address and in the log (the one place
/// the log holds it).
fn announce_auth(config: &Config, addr: std::net::SocketAddr, secret: Option<&str>) {
    if !config.auth.is_open() || config.oauth.is_some() {
        let tokens: Vec<String> = config
            .auth
            .tokens()
            .iter()
            .map(|t| format!("{}:{}", t.name(), t.role()))
            .collect();
        if !tokens.is_empty() {
            tracing::info!(tokens = %tokens.join(","), "bearer tokens required");
        }
        return;
    }
    if addr.ip().is_loopback() {
        tracing::info!("no tokens are configured: every local request may list and invoke");
    } else {
        tracing::warn!(%addr, "no tokens are configured (--insecure): anyone who can reach this address can run tools");
    }
    let Some(secret) = secret else { return };
    let link = format!("http://{}/ui?secret={secret}", link_host(addr));
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "approve at {link}").and_then(|()| out.flush());
    tracing::info!(%link, "deciding approvals needs the local secret: open the inbox with this link");
}

/// The address a browser on this machine opens for `addr`: loopback for a
/// server listening on every address.
fn link_host(addr: std::net::SocketAddr) -> std::net::SocketAddr {
    let ip: std::net::IpAddr = match addr.ip() {
        std::net::IpAddr::V4(v4) if v4.is_unspecified() => std::net::Ipv4Addr::LOCALHOST.into(),
        std::net::IpAddr::V6(v6) if v6.is_unspecified() => std::net::Ipv6Addr::LOCALHOST.into(),
        ip => ip,
    };
    std::net::SocketAddr::new(ip, addr.port())
}

/// `limits`, with as many descriptors as this process may have, and at
/// most half of them for connections: the rest are for runs' pipes, the
/// run log and the skills.
fn connection_limits(limits: &crate::http::ServerLimits) -> crate::http::ServerLimits {
    let mut limits = limits.clone();
    let Some(files) = crate::http::raise_open_files_limit() else {
        return limits;
    };
    let most = usize::try_from(files / 2).unwrap_or(usize::MAX).max(1);
    if limits.max_connections > most {
        tracing::warn!(
            max_connections = limits.max_connections,
            open_files = files,
            "max_connections is more than half the open files limit; using {most}"
        );
        limits.max_connections = most;
    }
    limits
}

/// Completes on Ctrl-C or SIGTERM. The handlers are installed here, before
/// the server says it is listening, not when the future is first polled:
/// a client that reads the announcement and signals at once must find them
/// (the accept loop may serve a first connection before it polls this).
fn shutdown_signal() -> std::io::Result<impl Future<Output = ()> + Send + 'static> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => {},
            _ = terminate.recv() => {},
        }
        tracing::info!("shutting down");
    })
}

/// Lints each path: a skill directory on its own (or its `SKILL.md`), or
/// a directory of skills. The directories of skills load as the roots of
/// one catalog, in the order given, exactly as `skilld serve --skills`
/// loads them: earlier ones win a name (later ones are `shadowed`), and
/// cross-skill rules apply across them. A path that holds no skill at
/// all is an error, so a typo in CI cannot pass as "0 errors".
fn check(paths: &[PathBuf], format: CheckFormat, config: Option<&Path>) -> ExitCode {
    let (runtimes, rules) = match config::lint_settings(config) {
        Ok(settings) => settings,
        Err(e) => {
            eprintln!("skilld: {e}");
            return ExitCode::from(2);
        }
    };
    let path_cache = PathCache::new(std::env::var_os("PATH"));
    // A linter runs no skill's code: manifests are read as written.
    let launcher: Arc<dyn Launch> = Arc::new(Linting);
    let linting = Linted {
        runtimes: &runtimes,
        rules: &rules,
        path: &path_cache,
        launcher: Some(&launcher),
    };
    let mut diagnostics: Vec<Diagnostic> = Vec::new();
    let mut loaded = 0usize;
    let mut roots: Vec<Root> = Vec::new();
    for path in paths {
        match lint_target(path) {
            Err(d) => diagnostics.push(d),
            Ok(LintTarget::Skill(dir)) => {
                let l = load_skill(&dir, &lint_options("check", &linting));
                loaded += usize::from(l.skill.is_some());
                diagnostics.extend(l.diagnostics);
                diagnostics.extend(l.skill.iter().flat_map(|s| skill_test::argument_findings(s)));
            }
            Ok(LintTarget::Root(root)) => {
                if !roots.iter().any(|r| r.path == root.path) {
                    roots.push(root);
                }
            }
        }
    }
    if !roots.is_empty() {
        let (skills, found) = lint_roots(roots, &linting);
        loaded += skills;
        diagnostics.extend(found);
    }
    report(&diagnostics, loaded, format)
}

/// Prints what `check` found; exit 1 on any error.
fn report(diagnostics: &[Diagnostic], loaded: usize, format: CheckFormat) -> ExitCode {
    let errors = diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .count();
    let warnings = diagnostics.len() - errors;
    let mut out = std::io::stdout().lock();
    let written = match format {
        CheckFormat::Text => {
            let mut r = Ok(());
            for d in diagnostics {
                r = r.and_then(|()| writeln!(out, "{d}"));
            }
            eprintln!("{loaded} skills loaded, {errors} errors, {warnings} warnings");
            r
        }
        CheckFormat::Json => {
            let body = serde_json::json!({
                "skills": loaded,
                "errors": errors,
                "warnings": warnings,
                "diagnostics": diagnostics,
            });
            writeln!(out, "{body}")
        }
    };
    if written.is_err() {
        return ExitCode::from(2);
    }
    if errors > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// `skilld package`: lints the skill at `dir` as `check` does, then writes
/// its archive (through a temporary file, so a failed write leaves none),
/// and with `sign` its signature beside it.
fn package(dir: &Path, output: Option<&Path>, sign: Option<&Path>) -> ExitCode {
    if !(dir.join("SKILL.md").is_file() || dir.join("SKILL.yaml").is_file()) {
        eprintln!("skilld: {} holds no SKILL.md or SKILL.yaml", dir.display());
        return ExitCode::from(1);
    }
    // The key is read first: a wrong password writes nothing.
    let key = match sign.map(sign::signing_key).transpose() {
        Ok(key) => key,
        Err(e) => {
            eprintln!("skilld: {e}");
            return ExitCode::from(2);
        }
    };
    let (runtimes, path_cache) = (Runtimes::default(), PathCache::new(std::env::var_os("PATH")));
    let launcher: Arc<dyn Launch> = Arc::new(Linting);
    // A package is checked as an upload is: its dependencies install with it.
    let rules = SkillRules::default();
    let linting = Linted {
        runtimes: &runtimes,
        rules: &rules,
        path: &path_cache,
        launcher: Some(&launcher),
    };
    let loaded = load_skill(dir, &lint_options("package", &linting));
    let mut diagnostics = loaded.diagnostics;
    diagnostics.extend(loaded.skill.iter().flat_map(|s| skill_test::argument_findings(s)));
    for d in &diagnostics {
        eprintln!("{d}");
    }
    let failed = diagnostics.iter().any(|d| d.severity == Severity::Error);
    let Some(skill) = loaded.skill.filter(|_| !failed) else {
        eprintln!("skilld: {} does not lint; nothing was written", dir.display());
        return ExitCode::from(1);
    };
    let version = skill.version.as_deref().unwrap_or("0.0.0");
    let default_name = PathBuf::from(format!("{}-{version}.zip", skill.name));
    let output = output.unwrap_or(&default_name);
    let written = write_package(dir, output).and_then(|()| match &key {
        Some(key) => sign::sign_archive(key, output).map(Some),
        None => Ok(None),
    });
    match written {
        Ok(signature) => {
            println!("{}", output.display());
            if let (Some(path), Some(key)) = (signature, &key) {
                eprintln!("signed by key {}: {}", key.id(), path.display());
            }
            eprintln!("skill {} {version}, hash {}", skill.name, skill.hash);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("skilld: cannot write {}: {e:#}", output.display());
            ExitCode::from(2)
        }
    }
}

/// `skilld new`: makes the skill `parent/name` from a template, then says
/// on stderr how to lint and run it.
fn new_skill(parent: &Path, name: &str, dialect: ScaffoldDialect) -> ExitCode {
    let dir = match scaffold::scaffold(parent, name, dialect) {
        Ok(dir) => dir,
        Err(e) => {
            eprintln!("skilld: {e}");
            return ExitCode::from(if e.is_refusal() { 1 } else { 2 });
        }
    };
    println!("{}", dir.display());
    eprintln!("next: edit it, then `skilld check {}`", dir.display());
    if let Some((tool, args)) = scaffold::example_call(name, dialect) {
        eprintln!(
            "try:  skilld run --skills {} {tool} --args '{args}'",
            parent.display()
        );
    }
    ExitCode::SUCCESS
}

fn write_package(dir: &Path, output: &Path) -> anyhow::Result<()> {
    let parent = match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let staged = tempfile::NamedTempFile::new_in(parent)?;
    let file = crate::install::archive::write_archive(dir, staged.reopen()?)?;
    file.sync_all()?;
    // A package is for others to read, not a private temporary file.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(staged.path(), std::fs::Permissions::from_mode(0o644))?;
    staged.persist(output)?;
    Ok(())
}

/// How `tools` starts manifests' backends: as a server would by default,
/// with a data directory of their own to keep out of reach.
fn standalone_settings() -> crate::invoke::RunSettings {
    let scratch = std::env::temp_dir().join("skilld-runs");
    crate::invoke::RunSettings {
        data_dir: scratch.clone(),
        scratch_dir: scratch,
        ..crate::invoke::RunSettings::default()
    }
}

/// What `check` and `package` lint with.
struct Linted<'a> {
    runtimes: &'a Runtimes,
    rules: &'a SkillRules,
    path: &'a PathCache,
    launcher: Option<&'a Arc<dyn Launch>>,
}

/// How `check` and `package` load one skill: as a user skill, its
/// backend never started.
fn lint_options<'a>(source: &'a str, linting: &Linted<'a>) -> LoadOptions<'a> {
    LoadOptions {
        source,
        trust: Trust::User,
        max_timeout_secs: config::DEFAULT_MAX_TIMEOUT_SECS,
        runtimes: linting.runtimes,
        installed: false,
        path: linting.path,
        launcher: linting.launcher.map(Arc::as_ref),
        rules: linting.rules,
    }
}

/// What one path given to `check` is.
enum LintTarget {
    /// A skill's directory, linted alone.
    Skill(PathBuf),
    /// A directory of skills, a root of the catalog.
    Root(Root),
}

/// What `path` is for `check`, or why it is none.
fn lint_target(path: &Path) -> Result<LintTarget, Diagnostic> {
    let shown = path.display().to_string();
    let is_definition = path
        .file_name()
        .is_some_and(|n| n == "SKILL.md" || n == "SKILL.yaml");
    if is_definition && path.is_file() {
        let dir = path.parent().unwrap_or(Path::new("."));
        return lint_target(if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        });
    }
    if !path.exists() {
        return Err(Diagnostic::error(
            Code::RootMissing,
            &shown,
            "no such file or directory",
        ));
    }
    if !path.is_dir() {
        return Err(Diagnostic::error(
            Code::NotASkill,
            &shown,
            "a file, not a skill: give the skill's directory (the one holding SKILL.md) or a directory of skills",
        ));
    }
    if path.join("SKILL.md").is_file() || path.join("SKILL.yaml").is_file() {
        return Ok(LintTarget::Skill(path.to_path_buf()));
    }
    Ok(LintTarget::Root(Root {
        name: shown,
        path: path.to_path_buf(),
        trust: Trust::User,
        explicit: true,
        installed: false,
    }))
}

/// The skills loaded from directories of skills as one catalog, as a
/// server loads its roots, and what was found; a root that holds no
/// skill at all is an error of its own.
fn lint_roots(roots: Vec<Root>, linting: &Linted<'_>) -> (usize, Vec<Diagnostic>) {
    let catalog = Catalog::build(
        &CatalogOptions {
            roots: roots.clone(),
            max_timeout_secs: config::DEFAULT_MAX_TIMEOUT_SECS,
            runtimes: linting.runtimes.clone(),
            launcher: linting.launcher.cloned(),
            rules: linting.rules.clone(),
        },
        None,
    );
    let mut found = catalog.diagnostics.clone();
    found.extend(
        catalog
            .skills
            .iter()
            .flat_map(|s| skill_test::argument_findings(s)),
    );
    for root in &roots {
        let has_skills = catalog.skills.iter().any(|s| s.source == root.name);
        // Skills of its own that failed, or lost their name to an
        // earlier root's, were there all the same.
        let had = found.iter().any(|d| {
            (d.is_error() || d.code == Code::Shadowed) && Path::new(&d.path).starts_with(&root.path)
        });
        if !has_skills && !had {
            found.push(Diagnostic::error(
                Code::NotASkill,
                &root.name,
                "no skills here: a skill is a directory holding a SKILL.md",
            ));
        }
    }
    (catalog.skills.len(), found)
}

fn tools(skills: &[String], format: Format, mode: Option<&str>) -> anyhow::Result<()> {
    let roots = if skills.is_empty() {
        config::default_roots(&config::default_workspace(), &config::default_data_dir())
    } else {
        skills
            .iter()
            .map(|s| Root::parse_flag(s))
            .collect::<Result<_, _>>()
            .map_err(anyhow::Error::msg)?
    };
    let backends = runtime()?;
    let _entered = backends.enter();
    let catalog = Catalog::build(
        &CatalogOptions {
            roots,
            max_timeout_secs: config::DEFAULT_MAX_TIMEOUT_SECS,
            runtimes: Runtimes::default(),
            launcher: crate::invoke::standalone_launcher(&standalone_settings()),
            rules: SkillRules::default(),
        },
        None,
    );
    for d in catalog.diagnostics.iter().filter(|d| d.is_error()) {
        eprintln!("{d}");
    }
    let body = catalog.exports.body(format, mode, None);
    let mut out = std::io::stdout().lock();
    out.write_all(&body)?;
    if format != Format::Prompt {
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// `skilld run`: the same pipeline as the invoke route, in this process.
/// Returns whether the tool succeeded.
fn run_one(args: &ServeArgs, tool: &str, json: &str, mode: Option<&str>) -> anyhow::Result<bool> {
    let arguments: serde_json::Value =
        serde_json::from_str(json).map_err(|e| anyhow::anyhow!("--args is not JSON: {e}"))?;
    let config = Config::resolve(args).map_err(anyhow::Error::msg)?;
    harden(&config);
    let runtime = runtime()?;
    runtime.block_on(async move {
        let (invoker, handle) = pipeline(&config, false).await?;
        let catalog = handle.current();
        // The person at the terminal is the one asking: `skilld run` runs
        // the tool without holding it for approval, and records it as
        // requested by the local user.
        let call = Call {
            target: Target::Tool(tool.to_owned()),
            arguments,
            mode: mode.map(str::to_owned),
            dry_run: false,
            wait: Duration::ZERO,
            delivery: Delivery::Result,
            gate: Gate::Operator,
            asked: Asked {
                by: std::env::var("USER").ok().map(|u| format!("cli:{u}")),
                request_id: None,
            },
            sampler: None,
            session: None,
        };
        let envelope = match invoker.call(&catalog, call).await {
            Ok(Called::Finished(envelope)) => envelope,
            Ok(_) => anyhow::bail!("the run did not finish"),
            Err(e) => anyhow::bail!("{}", e.sentence()),
        };
        invoker.shutdown(config.shutdown_grace).await;
        let mut out = std::io::stdout().lock();
        serde_json::to_writer_pretty(&mut out, envelope.as_ref())?;
        writeln!(out)?;
        Ok(envelope.success)
    })
}

fn print_openapi() -> anyhow::Result<()> {
    let doc = crate::openapi();
    let json = doc
        .to_pretty_json()
        .context("cannot serialise the OpenAPI document")?;
    println!("{json}");
    Ok(())
}
