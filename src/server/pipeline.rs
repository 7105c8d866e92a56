//! What every command that runs tools here starts from: the async
//! runtime, the run log, the pipeline over it, and the catalog its
//! launcher loads, kept fresh while the files change.

use crate::catalog::{CatalogHandle, CatalogOptions};
use crate::config::{self, Config};
use crate::invoke::{Approver, Invoker};
use crate::skill::backend::Launch;
use crate::store::Stores;
use anyhow::Context;
use std::sync::Arc;

/// Reloads the catalog when its files change, unless `--no-watch`.
pub fn watch(config: &Config, handle: &Arc<CatalogHandle>) -> Option<crate::watch::Watch> {
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

/// The multi-threaded Tokio runtime every command that runs tools here
/// blocks on.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// Opens the run log. A server (`recover`) also marks the runs a crash
/// left `running` as interrupted; `skilld run` must not, since a server may
/// be running some of them right now.
pub async fn open_store(config: &Config, recover: bool) -> anyhow::Result<Stores> {
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
    let instance = (store.runs.backend() != "sqlite").then_some(config.run.instance.as_str());
    let interrupted = store
        .runs
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
pub async fn pipeline(config: &Config, recover: bool) -> anyhow::Result<Pipeline> {
    pipeline_over(open_store(config, recover).await?, config).await
}

/// [`pipeline`] over a store already open.
pub async fn pipeline_over(stores: Stores, config: &Config) -> anyhow::Result<Pipeline> {
    let invoker = Arc::new(Invoker::new(stores.clone(), config.run.clone()));
    let approver = Approver::new(&invoker, &stores);
    let (loading, launcher) = (config.clone(), invoker.launcher());
    let handle = Arc::new(tokio::task::spawn_blocking(move || load_catalog(&loading, launcher)).await?);
    approver.pre_grant(&handle.current(), &config.grants).await?;
    crate::watch::follow_offers(handle.clone());
    Ok(Pipeline {
        invoker,
        approver,
        catalog: handle,
        stores,
    })
}

/// What serving and the commands start from: the pipeline, a person's
/// side of it, the catalog, and the stores they were made over (the
/// session runtime and the notifier take theirs from here).
pub struct Pipeline {
    pub invoker: Arc<Invoker>,
    pub approver: Approver,
    pub catalog: Arc<CatalogHandle>,
    pub stores: Stores,
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

/// How `tools` starts manifests' backends: as a server would by default,
/// with a data directory of their own to keep out of reach.
pub fn standalone_settings() -> crate::invoke::RunSettings {
    let scratch = std::env::temp_dir().join("skilld-runs");
    crate::invoke::RunSettings {
        data_dir: scratch.clone(),
        scratch_dir: scratch,
        ..crate::invoke::RunSettings::default()
    }
}
