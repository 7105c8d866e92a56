//! The composition root: what builds a running skilld from its
//! [`Config`] — the run log, the pipeline over it, the catalog, and then
//! the HTTP server or one MCP session on stdio. The command line only
//! parses and prints; every command that runs tools here starts from
//! [`pipeline`].

mod authority;
mod pipeline;
mod process;

pub use pipeline::{Pipeline, open_store, pipeline, pipeline_over, runtime, standalone_settings};
pub use process::harden;

use authority::{announce_auth, authority, people_url};
use pipeline::watch;
use process::{connection_limits, shutdown_signal};

use crate::config::Config;
use crate::http::{AppState, serve};
use anyhow::Context;
use std::io::Write;
use std::sync::Arc;

/// `skilld serve`: hardens this process, then serves until SIGTERM or
/// Ctrl-C.
pub fn run(config: Config) -> anyhow::Result<()> {
    harden(&config);
    tracing::debug!(?config, "configuration");
    let runtime = runtime()?;
    runtime.block_on(serve_main(config))
}

/// Listens on the configured address, then opens the run log (ending
/// the runs an earlier crash left running), loads the catalog, and serves
/// until SIGTERM or Ctrl-C.
/// A SQLite database is this server's alone: claimed, and its address
/// noted for `skilld mcp` sessions; held until the server stops.
fn claim_database(
    config: &Config,
    addr: std::net::SocketAddr,
) -> anyhow::Result<Option<nix::fcntl::Flock<std::fs::File>>> {
    let claim = if config.database_url.starts_with("sqlite:") {
        crate::store::claim_for_serving(&config.database_url).map_err(|e| match e {
            crate::store::StoreError::Conflict(why) => anyhow::anyhow!(why),
            other => anyhow::anyhow!("{other}"),
        })?
    } else {
        None
    };
    if let Some(claim) = &claim
        && let Err(e) = crate::store::announce_serving(claim, &people_url(config, addr))
    {
        tracing::warn!(error = %e, "cannot note this server's address for skilld mcp sessions");
    }
    Ok(claim)
}

async fn serve_main(config: Config) -> anyhow::Result<()> {
    let limits = connection_limits(&config.limits);
    let listener = tokio::net::TcpListener::bind(config.bind)
        .await
        .with_context(|| format!("cannot listen on {}", config.bind))?;
    let addr = listener.local_addr().context("no local address")?;
    let _claim = claim_database(&config, addr)?;
    let store = open_store(&config, true).await?;
    let pipeline::Pipeline {
        invoker,
        approver,
        catalog: handle,
        stores: store,
    } = pipeline_over(store, &config).await?;
    // Only a server prunes: `skilld run` and `mcp` sessions come and go.
    let _retention = crate::retention::spawn(store.pruning.clone(), config.retention.clone());
    // In the background: an unreachable bucket is retried for a while.
    tokio::spawn({
        let artifacts = invoker.artifacts().clone();
        async move { artifacts.check().await }
    });
    let mut notifier = crate::notify::spawn(
        approver.clone(),
        store.outbox.clone(),
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
    let sessions =
        crate::session::Sessions::shared(&invoker, &store, handle.clone(), config.sessions.clone());
    if let Some(notifier) = &mut notifier {
        notifier.follow_activations(sessions.activation_requests());
        if let Some(asking) = invoker.egress_asking() {
            notifier.follow_egress(asking.held());
        }
    }
    let state = AppState {
        sessions,
        installer,
        catalog: handle,
        invoker,
        approver,
        auth,
        limits,
        web: Arc::new(crate::http::kit::guard::WebGuard {
            loopback_only: addr.ip().is_loopback(),
            allowed_origins: config.allowed_origins.clone(),
        }),
    };
    serve(state, listener, shutdown, config.shutdown_grace).await?;
    tracing::info!("stopped");
    Ok(())
}

/// `skilld mcp`: one MCP session on stdio, as the local user, with the
/// invoke role (list and call; approving is for people, elsewhere), in
/// `mode`, the person deciding held calls in their client when
/// `client_approval`.
pub fn serve_stdio(config: Config, mode: Option<String>, client_approval: bool) -> anyhow::Result<()> {
    use rmcp::ServiceExt;
    harden(&config);
    let runtime = runtime()?;
    runtime.block_on(async move {
        let pipeline::Pipeline {
            invoker,
            approver,
            catalog: handle,
            ..
        } = pipeline(&config, false).await?;
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
            mode,
            client_approval,
            inbox: crate::mcp::LocalInbox {
                database_url: config.database_url.clone(),
                address: people_url(&config, config.bind),
            },
        };
        let server = crate::mcp::McpServer::local(handle, approver, session);
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
