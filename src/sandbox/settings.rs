//! The configured sandbox: which skills run in it, who they run as, and
//! what bounds their runs, with the config's keys checked over the
//! defaults (`docs/design.md` §9).

use crate::setting::SettingError;
use std::path::PathBuf;

/// Which skills run sandboxed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Level {
    /// Every skill.
    #[default]
    On,
    /// Only `untrusted` skills: for setups that trust their own skills.
    Off,
}

/// The configured sandbox.
#[derive(Debug, Clone)]
pub struct Settings {
    pub level: Level,
    /// The identity tools run as when the server is root; a server that is
    /// not root cannot change identity and runs them as itself.
    pub uid: u32,
    pub gid: u32,
    /// Processes (and threads) one run may have at once.
    pub pids_max: u64,
    /// Memory one run may use when neither its skill nor the server's
    /// `max_memory_bytes` says.
    pub memory_max: u64,
    /// Memory all runs together may use (the parent of their cgroups).
    pub total_memory_max: u64,
    /// Processes all runs together may have.
    pub total_pids_max: u64,
    /// The size of an entrypoint run's own `/tmp` (seed 003: 64 MB).
    pub tmp_bytes: u64,
    /// Directories tools may also read and execute (a runtime outside the
    /// system directories, say).
    pub read_paths: Vec<PathBuf>,
    /// Directories tools may also write (a shared output directory).
    pub write_paths: Vec<PathBuf>,
    /// Places no tool may read, even inside its workspace: the data
    /// directory, the config file, the skill roots, the scratch root.
    pub protected: Vec<PathBuf>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            level: Level::On,
            uid: 65534,
            gid: 65534,
            pids_max: 512,
            memory_max: 2 * 1024 * 1024 * 1024,
            total_memory_max: half_the_memory(),
            total_pids_max: 8192,
            tmp_bytes: 64 * 1024 * 1024,
            read_paths: Vec::new(),
            write_paths: Vec::new(),
            protected: Vec::new(),
        }
    }
}

impl Level {
    /// `sandbox`, as the config gives it: `on` (the default) or `off`.
    pub fn configured(text: Option<&str>) -> Result<Self, SettingError> {
        match text {
            None | Some("on") => Ok(Self::On),
            Some("off") => Ok(Self::Off),
            Some(other) => Err(SettingError::new(
                "sandbox",
                format!("sandbox must be \"on\" or \"off\", not {other:?}"),
            )),
        }
    }
}

/// `sandbox_user`: `uid:gid`, `uid` (gid the same), or a user name with
/// its primary group. Never root: the point is another, unprivileged
/// identity.
pub fn parse_user(user: &str) -> Result<(u32, u32), SettingError> {
    let numeric = |s: &str| s.parse::<u32>().ok();
    let found = match user.split_once(':') {
        Some((u, g)) => numeric(u).zip(numeric(g)),
        None => numeric(user).map(|u| (u, u)).or_else(|| {
            nix::unistd::User::from_name(user)
                .ok()
                .flatten()
                .map(|u| (u.uid.as_raw(), u.gid.as_raw()))
        }),
    };
    match found {
        Some((0, _) | (_, 0)) => Err(SettingError::new(
            "sandbox_user",
            format!("sandbox_user {user:?} is root; name an unprivileged user"),
        )),
        Some(ids) => Ok(ids),
        None => Err(SettingError::new(
            "sandbox_user",
            format!("sandbox_user {user:?} is neither uid:gid nor a known user name"),
        )),
    }
}

/// Half of this host's memory, the default bound of all runs together;
/// 8 GiB where `/proc/meminfo` does not say.
fn half_the_memory() -> u64 {
    let total_kib = std::fs::read_to_string("/proc/meminfo").ok().and_then(|info| {
        info.lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    });
    total_kib.map_or(8 << 30, |kib| kib * 1024 / 2)
}
