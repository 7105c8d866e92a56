//! How runs are carried out on this server: [`RunSettings`], and what
//! they configure (the limits of a run, the sandbox, the launcher of
//! backends).

use super::Invoker;
use crate::backend::{ChildSettings, Launcher};
use crate::runner::{self, Limits};
use crate::sandbox::Sandbox;
use crate::skill::Skill;
use crate::skill::backend::Launch;
use crate::skill::context::TurnLimits;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How runs are carried out on this server.
#[derive(Debug, Clone)]
pub struct RunSettings {
    /// Working directory of command and script tools.
    pub workspace: PathBuf,
    /// Where the server keeps its database; no tool may read it.
    pub data_dir: PathBuf,
    /// Each run gets `<scratch_dir>/<run id>`, its only writable place
    /// besides a workspace it declared it writes (`file:write`); an
    /// entrypoint's artifacts stay there, in `out/files`.
    pub scratch_dir: PathBuf,
    /// How long a finished run's directory (an entrypoint's artifacts)
    /// is kept.
    pub artifact_ttl: Duration,
    /// Where an entrypoint's artifacts go when its run ends.
    pub artifacts: crate::artifacts::ArtifactStore,
    /// How tools are confined (`docs/design.md` §9).
    pub sandbox: crate::sandbox::Settings,
    /// SIGTERM → SIGKILL delay.
    pub grace: Duration,
    /// Limits applied to every child unless its skill sets tighter ones.
    pub limits: Limits,
    /// Runs at once, over all tools.
    pub max_concurrent: usize,
    /// Runs at once of any one tool.
    pub max_concurrent_per_tool: usize,
    /// How long a call waits for a free slot before 429.
    pub queue_timeout: Duration,
    /// Names of this instance, recorded on the runs it executes.
    pub instance: String,
    /// What networked runs' proxies start from (`[egress]`).
    pub egress: crate::egress::Egress,
    /// Extra environment variables passed through to children.
    pub extra_env: Vec<String>,
    /// How long an approval request waits for a decision.
    pub approval_ttl: Duration,
    /// Requests one caller may have waiting at once (then 429), so one
    /// token cannot bury the approvers' inbox.
    pub max_pending_per_caller: u64,
    /// Callers (token names, `sub@issuer` of OAuth) who decide their own
    /// held calls in their MCP client (`client_approval`, `docs/mcp.md`).
    pub client_approval: Vec<String>,
    /// MCP offers `load_skill`, a tool that loads a skill's instructions,
    /// for clients that reach neither resources nor the Skills extension.
    pub mcp_load_skill_tool: bool,
    /// Event streams open at once (then 503): each holds a task and a
    /// connection.
    pub max_streams: usize,
    /// Event streams one caller may hold at once (then 429), so one
    /// caller cannot take them all (see [`crate::share`]).
    pub max_streams_per_caller: usize,
    /// The longest an event stream stays open; a client that still wants
    /// to follow the run connects again.
    pub max_stream: Duration,
    /// Waiters re-read a run at least this often, should a notification
    /// be lost (PostgreSQL reconnecting).
    pub wait_poll: Duration,
    /// A manifest's child with no call for this long is stopped; the next
    /// call starts it again.
    pub backend_idle: Duration,
    /// The program run as `starlark-host` for Starlark skills; `None` is
    /// this program.
    pub starlark_host: Option<PathBuf>,
    /// What one turn may spend (`[limits]`): a call outside any session
    /// is a turn of its own.
    pub turn_limits: TurnLimits,
}

impl Default for RunSettings {
    fn default() -> Self {
        Self {
            workspace: PathBuf::from("."),
            data_dir: PathBuf::from("."),
            scratch_dir: std::env::temp_dir().join("skilld-runs"),
            artifact_ttl: Duration::from_secs(3600),
            artifacts: crate::artifacts::ArtifactStore::Local,
            sandbox: crate::sandbox::Settings::default(),
            grace: Duration::from_secs(5),
            limits: Limits {
                memory_bytes: None,
                cpu_secs: None,
                open_files: Some(1024),
                file_size_bytes: Some(1024 * 1024 * 1024),
            },
            max_concurrent: 64,
            max_concurrent_per_tool: 16,
            queue_timeout: Duration::from_secs(10),
            instance: format!("skilld-{}", std::process::id()),
            extra_env: Vec::new(),
            egress: crate::egress::Egress::default(),
            approval_ttl: Duration::from_secs(3600),
            max_pending_per_caller: 20,
            client_approval: Vec::new(),
            mcp_load_skill_tool: false,
            max_streams: 256,
            max_streams_per_caller: 32,
            max_stream: Duration::from_secs(3600),
            wait_poll: Duration::from_secs(5),
            backend_idle: Duration::from_secs(600),
            starlark_host: None,
            turn_limits: TurnLimits::default(),
        }
    }
}

/// A launcher of backends run as `settings` say, in `sandbox`, on the
/// current Tokio runtime (`None` outside one).
pub fn launcher(settings: &RunSettings, sandbox: Arc<Sandbox>) -> Option<Arc<dyn Launch>> {
    let runtime = tokio::runtime::Handle::try_current().ok()?;
    let children = ChildSettings {
        workspace: settings.workspace.clone(),
        scratch_dir: settings.scratch_dir.clone(),
        grace: settings.grace,
        limits: settings.limits,
        extra_env: settings.extra_env.clone(),
        idle: settings.backend_idle,
        starlark_host: starlark_host(settings),
        turn_limits: settings.turn_limits,
        egress: settings.egress.clone(),
    };
    Some(Arc::new(Launcher::new(sandbox, children, runtime)))
}

/// The program run as `starlark-host`: the configured one or this one,
/// where the sandbox's user can run it. A server running as root from a
/// place others cannot enter (root's home, a private temporary directory)
/// keeps a hard link to it (or a copy) under the scratch root instead.
fn starlark_host(settings: &RunSettings) -> PathBuf {
    let program = settings
        .starlark_host
        .clone()
        .or_else(|| std::env::current_exe().ok())
        .unwrap_or_else(|| PathBuf::from("skilld"));
    if !nix::unistd::geteuid().is_root() || runner::runnable_by_anyone(&program) {
        return program;
    }
    reachable_copy(&program, &settings.scratch_dir).unwrap_or_else(|e| {
        let path = program.display();
        tracing::warn!(%path, error = %e, "the Starlark host may not be reachable by the sandbox's user");
        program
    })
}

/// A link to `program` (or a copy) under `scratch`, named by its inode,
/// so that servers sharing the scratch root share it.
fn reachable_copy(program: &std::path::Path, scratch: &std::path::Path) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    crate::sandbox::ensure_scratch_root(scratch)?;
    let dir = scratch.join(".starlark-host");
    std::fs::create_dir_all(&dir)?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o711))?;
    let meta = std::fs::metadata(program)?;
    let target = dir.join(format!("skilld-{}-{}", meta.dev(), meta.ino()));
    if target.exists() {
        return Ok(target);
    }
    // A link shares the program's mode: only one others may run will do.
    let linked = meta.mode() & 0o001 != 0 && std::fs::hard_link(program, &target).is_ok();
    if !linked {
        let staged = dir.join(format!(".copy-{}", std::process::id()));
        std::fs::copy(program, &staged)?;
        std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o755))?;
        std::fs::rename(&staged, &target)?;
    }
    Ok(target)
}

/// A launcher with a sandbox of its own, for commands that load skills
/// without serving them (`skilld tools`).
pub fn standalone_launcher(settings: &RunSettings) -> Option<Arc<dyn Launch>> {
    launcher(settings, Arc::new(Sandbox::detect(sandbox_settings(settings))))
}

/// The configured sandbox, with the data and scratch directories always
/// among the places no tool may read.
pub(super) fn sandbox_settings(settings: &RunSettings) -> crate::sandbox::Settings {
    let mut sandbox = settings.sandbox.clone();
    sandbox
        .protected
        .extend([settings.data_dir.clone(), settings.scratch_dir.clone()]);
    sandbox
}

impl Invoker {
    /// The rlimits of a run of `skill`. A memory size the skill did not
    /// set itself (seed 003's default) is no address-space limit: it
    /// bounds the run's cgroup ([`Invoker::cgroup_memory_for`]).
    pub(super) fn limits_for(&self, skill: &Skill) -> Limits {
        let d = &self.settings.limits;
        let own = skill
            .resources
            .memory_bytes
            .filter(|_| !skill.resources.memory_is_default);
        Limits {
            memory_bytes: own.or(d.memory_bytes),
            cpu_secs: d.cpu_secs,
            open_files: d.open_files,
            file_size_bytes: d.file_size_bytes,
        }
    }

    /// The `memory.max` of a run of `skill`'s cgroup, where a memory
    /// controller exists: its own, or the default it got, or the server's.
    pub(super) fn cgroup_memory_for(&self, skill: &Skill) -> Option<u64> {
        skill.resources.memory_bytes.or(self.settings.limits.memory_bytes)
    }
}
