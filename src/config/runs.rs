//! How runs are carried out and confined: the top-level keys of the file
//! (and the flags of some) over the defaults of [`RunSettings`] and of the
//! sandbox, whose modules say what is wrong with a value.

use super::places::{Places, absolute};
use super::{FileConfig, ServeArgs};
use crate::artifacts::ArtifactStore;
use crate::invoke::RunSettings;
use crate::runner::Limits;
use crate::sandbox;
use crate::setting::SettingError;
use std::time::Duration;

/// How runs are carried out: the flags and the file over the defaults,
/// in the server's places. Where artifacts go, and what no tool may
/// touch, are the caller's to add.
pub fn run(args: &ServeArgs, file: &FileConfig, places: &Places) -> Result<RunSettings, SettingError> {
    let defaults = RunSettings::default();
    let secs = Duration::from_secs;
    Ok(RunSettings {
        scratch_dir: places.scratch_dir.clone(),
        artifacts: ArtifactStore::Local,
        artifact_ttl: file
            .artifact_ttl_secs
            .map_or(defaults.artifact_ttl, |s| secs(s.max(1))),
        starlark_host: None,
        turn_limits: file.limits.unwrap_or_default(),
        sandbox: sandbox(args, file)?,
        workspace: places.workspace.clone(),
        data_dir: places.data_dir.clone(),
        grace: file.kill_grace_secs.map_or(defaults.grace, secs),
        limits: Limits {
            memory_bytes: file.max_memory_bytes.or(defaults.limits.memory_bytes),
            cpu_secs: file.max_cpu_secs.or(defaults.limits.cpu_secs),
            open_files: file.max_open_files.or(defaults.limits.open_files),
            file_size_bytes: file.max_file_size_bytes.or(defaults.limits.file_size_bytes),
        },
        max_concurrent: file.max_concurrent_runs.unwrap_or(defaults.max_concurrent).max(1),
        max_concurrent_per_tool: file
            .max_concurrent_runs_per_tool
            .unwrap_or(defaults.max_concurrent_per_tool)
            .max(1),
        queue_timeout: file.queue_timeout_secs.map_or(defaults.queue_timeout, secs),
        instance: args
            .local
            .instance
            .clone()
            .or(file.instance.clone())
            .unwrap_or_else(host_name),
        extra_env: file.env_allow.clone().unwrap_or_default(),
        approval_ttl: args
            .local
            .approval_ttl_secs
            .or(file.approval_ttl_secs)
            .map_or(defaults.approval_ttl, |s| secs(s.max(1))),
        max_pending_per_caller: file
            .max_pending_approvals_per_caller
            .unwrap_or(defaults.max_pending_per_caller)
            .max(1),
        client_approval: file.client_approval.clone().unwrap_or_default(),
        mcp_load_skill_tool: file.mcp_load_skill_tool.unwrap_or(false),
        max_streams: file.max_event_streams.unwrap_or(defaults.max_streams).max(1),
        max_streams_per_caller: crate::share::configured(
            "max_event_streams_per_caller",
            file.max_event_streams_per_caller,
            defaults.max_streams_per_caller,
            "max_event_streams",
            file.max_event_streams.unwrap_or(defaults.max_streams),
        )?,
        max_stream: file
            .max_event_stream_secs
            .map_or(defaults.max_stream, |s| secs(s.max(1))),
        wait_poll: defaults.wait_poll,
        egress: egress(file)?,
        backend_idle: file
            .backend_idle_secs
            .map_or(defaults.backend_idle, |s| secs(s.max(1))),
    })
}

/// The sandbox: the flag's level over the file's, and the file's limits
/// and places, made absolute against this directory.
fn sandbox(args: &ServeArgs, file: &FileConfig) -> Result<sandbox::Settings, SettingError> {
    let defaults = sandbox::Settings::default();
    let level = sandbox::Level::configured(args.local.sandbox.as_deref().or(file.sandbox.as_deref()))?;
    let (uid, gid) = match file.sandbox_user.as_deref() {
        Some(user) => sandbox::parse_user(user)?,
        None => (defaults.uid, defaults.gid),
    };
    Ok(sandbox::Settings {
        level,
        uid,
        gid,
        pids_max: file.sandbox_pids_max.unwrap_or(defaults.pids_max).max(1),
        memory_max: file.sandbox_memory_bytes.unwrap_or(defaults.memory_max),
        total_memory_max: file
            .sandbox_total_memory_bytes
            .unwrap_or(defaults.total_memory_max),
        total_pids_max: file
            .sandbox_total_pids_max
            .unwrap_or(defaults.total_pids_max)
            .max(1),
        tmp_bytes: file.sandbox_tmp_bytes.unwrap_or(defaults.tmp_bytes).max(4096),
        read_paths: file
            .sandbox_read_paths
            .iter()
            .flatten()
            .map(|p| absolute(p.clone()))
            .collect(),
        write_paths: args
            .local
            .sandbox_write_paths
            .iter()
            .chain(file.sandbox_write_paths.iter().flatten())
            .map(|p| absolute(p.clone()))
            .collect(),
        protected: Vec::new(),
    })
}

/// The host's name, which names this instance in the run log.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "skilld".to_owned())
}

/// `[egress]` and `egress_wait_secs`, compiled.
fn egress(file: &FileConfig) -> Result<crate::egress::Egress, SettingError> {
    let mut egress = file.egress.clone().unwrap_or_default().compile()?;
    if let Some(secs) = file.egress_wait_secs {
        egress.wait = Duration::from_secs(secs);
    }
    Ok(egress)
}
