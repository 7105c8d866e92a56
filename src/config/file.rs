//! The config file (`--config`, `SKILLD_CONFIG`): every key it may hold,
//! read once. A key it does not know is refused, so a typo cannot pass
//! for a setting.

use super::ConfigError;
use crate::artifacts::ArtifactsConfig;
use crate::auth::TokenConfig;
use crate::egress::EgressSettings;
use crate::install::InstallConfig;
use crate::install::signature::SignaturesConfig;
use crate::invoke::PreGrant;
use crate::notify::NotifyConfig;
use crate::oauth::OAuthConfig;
use crate::registry::RegistrySource;
use crate::retention::RetentionConfig;
use crate::session::SessionSettings;
use crate::skill::context::TurnLimits;
use serde::Deserialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The TOML file: the same keys as the flags, in snake_case. Its
/// sections are read by the types of the modules that own them.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub bind: Option<String>,
    pub skills: Option<Vec<String>>,
    #[serde(alias = "database_url")]
    pub database: Option<String>,
    pub workspace: Option<PathBuf>,
    pub data_dir: Option<PathBuf>,
    pub insecure: Option<bool>,
    pub max_timeout_secs: Option<u64>,
    pub no_watch: Option<bool>,
    /// Script runtimes by extension, e.g. `py = ["python3", "-I"]`.
    pub runtimes: Option<HashMap<String, Vec<String>>>,
    /// The images entrypoint skills may name (seed 003's three by
    /// default); an entry ending in `*` allows every image it begins.
    pub image_allowlist: Option<Vec<String>>,
    /// What an entrypoint skill gets when it does not say (seed 003:
    /// 120 s, 256 MiB as its cgroup's memory, 0.5 CPU).
    pub entrypoint_timeout_secs: Option<u64>,
    pub entrypoint_memory_bytes: Option<u64>,
    pub entrypoint_cpu: Option<f64>,
    /// Runs at once over all tools (default 64), and of any one tool (16).
    pub max_concurrent_runs: Option<usize>,
    pub max_concurrent_runs_per_tool: Option<usize>,
    /// How long a call waits for a free slot before 429 (default 10 s).
    pub queue_timeout_secs: Option<u64>,
    /// See [`LocalArgs::approval_ttl_secs`](super::LocalArgs::approval_ttl_secs).
    pub approval_ttl_secs: Option<u64>,
    /// How long a destination a networked run's list does not cover waits
    /// for a person (default 120 s; 0 refuses it at once, asking no one).
    pub egress_wait_secs: Option<u64>,
    /// Requests one caller may have waiting for a person at once (default 20).
    pub max_pending_approvals_per_caller: Option<u64>,
    /// Callers (token names, or `sub@issuer` of OAuth) who decide their own
    /// held calls in their MCP client rather than in the inbox.
    pub client_approval: Option<Vec<String>>,
    /// MCP offers the tool `load_skill` (default false).
    pub mcp_load_skill_tool: Option<bool>,
    /// Event streams open at once (default 256), how many of them one
    /// caller may hold (default 32), and how long one may stay open
    /// (default 3600 s).
    pub max_event_streams: Option<usize>,
    pub max_event_streams_per_caller: Option<usize>,
    pub max_event_stream_secs: Option<u64>,
    /// Connections open at once (default 1024, and at most half the open
    /// files limit).
    pub max_connections: Option<usize>,
    /// How long a connection may go with no request in flight: from its
    /// accept to a whole request head, or idle between requests (default
    /// 10 s).
    pub header_timeout_secs: Option<u64>,
    /// MCP sessions open at once (default 1000), and how many of them one
    /// caller may hold (default 100).
    pub max_mcp_sessions: Option<usize>,
    pub max_mcp_sessions_per_caller: Option<usize>,
    /// A manifest's child with no call for this long is stopped.
    pub backend_idle_secs: Option<u64>,
    /// How long an entrypoint's artifacts are kept after its run (default
    /// 3600 s).
    pub artifact_ttl_secs: Option<u64>,
    /// SIGTERM → SIGKILL delay for a tool's process group (default 5 s).
    pub kill_grace_secs: Option<u64>,
    /// How long running tools may finish after SIGTERM to skilld (default 10 s).
    pub shutdown_grace_secs: Option<u64>,
    /// How long a run's end waits in memory, after the answer, for others
    /// to share its commit (default 0: committed at once, still after the
    /// answer; at most 10000).
    pub run_log_commit_interval_ms: Option<u64>,
    /// Extra environment variables children may inherit (secret-shaped
    /// names never pass).
    pub env_allow: Option<Vec<String>>,
    /// Limits every child gets unless its skill sets its own.
    pub max_open_files: Option<u64>,
    pub max_file_size_bytes: Option<u64>,
    pub max_memory_bytes: Option<u64>,
    pub max_cpu_secs: Option<u64>,
    /// This instance's name in the run log (default: the host name).
    pub instance: Option<String>,
    /// Bearer tokens: `[[tokens]] name, role, secret | secret_sha256`.
    pub tokens: Option<Vec<TokenConfig>>,
    /// OAuth access tokens: `[oauth]` and its `[[oauth.issuers]]`.
    pub oauth: Option<OAuthConfig>,
    /// See [`ServeArgs::allowed_origins`](super::ServeArgs::allowed_origins).
    pub allowed_origins: Option<Vec<String>>,
    /// See [`LocalArgs::public_url`](super::LocalArgs::public_url).
    pub public_url: Option<String>,
    /// Webhooks told of each new request and decision.
    pub notify: Option<Vec<NotifyConfig>>,
    /// What one turn may spend (seed 002's per-turn limits): `[limits]`
    /// `llm_calls_per_turn`, `shell_execs_per_turn`, `net_fetches_per_turn`.
    pub limits: Option<TurnLimits>,
    /// See [`LocalArgs::sandbox`](super::LocalArgs::sandbox).
    pub sandbox: Option<String>,
    /// Who tools run as when skilld is root: `uid:gid` or a user name
    /// (default `65534:65534`, nobody).
    pub sandbox_user: Option<String>,
    /// Processes one run may have at once (default 512).
    pub sandbox_pids_max: Option<u64>,
    /// Memory one run may use unless its skill says (default 2 GiB).
    pub sandbox_memory_bytes: Option<u64>,
    /// Memory all runs together may use (default half the host's).
    pub sandbox_total_memory_bytes: Option<u64>,
    /// Processes all runs together may have (default 8192).
    pub sandbox_total_pids_max: Option<u64>,
    /// The size of an entrypoint run's own `/tmp` (default 64 MiB).
    pub sandbox_tmp_bytes: Option<u64>,
    /// Directories tools may also read and execute, beyond the system's.
    pub sandbox_read_paths: Option<Vec<PathBuf>>,
    /// Directories tools may also write, beyond their scratch directory.
    pub sandbox_write_paths: Option<Vec<PathBuf>>,
    /// See [`LocalArgs::scratch_dir`](super::LocalArgs::scratch_dir).
    pub scratch_dir: Option<PathBuf>,
    /// Pre-approvals (`docs/api.md`, "Grants").
    pub grants: Option<Vec<PreGrant>>,
    /// See [`LocalArgs::agent_tools`](super::LocalArgs::agent_tools); a list (`["read", "write"]`).
    pub agent_tools: Option<Vec<String>>,
    /// Untrusted uploads (`POST /skills`) wait for an admin's review
    /// before they serve (default false).
    pub review_uploads: Option<bool>,
    /// Limits of uploads and their dependencies.
    pub install: Option<InstallConfig>,
    /// Where entrypoints' artifacts go.
    pub artifacts: Option<ArtifactsConfig>,
    /// How long the run log keeps runs.
    pub retention: Option<RetentionConfig>,
    /// The registries `skilld search`, `install NAME` and `add` ask, in
    /// order: `[[registries]] url, token`.
    pub registries: Option<Vec<RegistrySource>>,
    /// How long a registry's index is kept before it is asked again
    /// (default 3600 s; 0 keeps nothing).
    pub registry_ttl_secs: Option<u64>,
    /// The keys trusted to sign uploads.
    pub signatures: Option<SignaturesConfig>,
    /// Sessions (`docs/sessions.md`): how long they live, how many a
    /// caller holds, and the skills that activate without asking.
    pub sessions: Option<SessionSettings>,
    /// Networked runs' proxy (`docs/egress.md`): names it resolves
    /// itself, ranges it may reach, each run's bounds.
    pub egress: Option<EgressSettings>,
}

impl FileConfig {
    /// The file at `path`, or every key left out when there is none.
    pub fn load(path: Option<&Path>) -> Result<Self, ConfigError> {
        let Some(path) = path else {
            return Ok(Self::default());
        };
        let text = std::fs::read_to_string(path).map_err(|cause| ConfigError::Read {
            path: path.to_path_buf(),
            cause,
        })?;
        toml::from_str(&text).map_err(|cause| ConfigError::Parse {
            path: path.to_path_buf(),
            cause: Box::new(cause),
        })
    }
}
