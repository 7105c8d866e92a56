//! The sandbox of a run (`docs/design.md` §9): another identity with no
//! privileges, a Landlock ruleset, a cgroup of its own, seccomp filters,
//! and for `network: false` the gate on unix-socket connects. This module
//! decides and prepares; the runner applies it all in the child, between
//! clone and exec, and starts the gate's supervisor after.

mod cgroup;
mod landlock;
mod mounts;
mod run_net;
mod seccomp;
mod settings;
mod unix_gate;
mod userns;

pub use cgroup::RunCgroup;
pub use run_net::{RunNetwork, make_in as run_network_in, set_loopback_up};
pub use seccompiler::BpfProgram;
pub use settings::{Level, Settings, parse_user};
pub use unix_gate::UnixGate;
pub(crate) use unix_gate::{Handoff, HandoffRaw, install_and_hand_off};

use crate::program::runnable_by_anyone;
use crate::trust::Trust;
use ::landlock::RulesetStatus;
use serde::Serialize;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use utoipa::ToSchema;

/// What this host lets the sandbox enforce, learnt once at start-up.
#[derive(Debug)]
pub struct Sandbox {
    pub settings: Settings,
    landlock: RulesetStatus,
    cgroups: cgroup::Cgroups,
    /// Whether the server can switch identity (it is root).
    switch_identity: bool,
    /// The highest capability number this kernel knows.
    last_cap: u32,
    /// What every run may read: the system directories that exist here,
    /// and `read_paths`.
    base_read: Vec<PathBuf>,
    /// The Landlock rules for the system's fixed places, opened once.
    fixed_rules: landlock::Fixed,
    /// The mount namespace runs join, made on the first confined run;
    /// `None` where it cannot be made (a server that is not root).
    mounts: std::sync::OnceLock<Option<mounts::Mounts>>,
    /// How `network: false` runs are kept from the host's unix sockets.
    unix_gate: unix_gate::Mechanism,
}

/// One run's request to the sandbox.
#[derive(Debug)]
pub struct Request<'a> {
    pub trust: Trust,
    pub skill_dir: &'a Path,
    /// An installed version's dependencies (its virtualenv, its
    /// `node_modules`), read and run like the skill.
    pub deps: Option<&'a Path>,
    /// The workspace; `None` for a dependency installer, which gets no
    /// workspace and none of the configured `write_paths`: it writes only
    /// its `scratch`.
    pub workspace: Option<&'a Path>,
    /// The skill declared `file:write`.
    pub workspace_write: bool,
    pub scratch: &'a Path,
    pub network: bool,
    /// The run reaches the network only through its egress proxy, in a
    /// namespace of its own: TCP as `network`, but the host's unix sockets
    /// gated as without it.
    pub egress: bool,
    /// Programs the run may start beyond the system (its runtime).
    pub programs: Vec<PathBuf>,
    pub memory_bytes: Option<u64>,
    /// CPU cores the run may use (`resources.cpu`), where a CPU
    /// controller can bound it.
    pub cpu: Option<f64>,
    /// The run gets a writable `/tmp` of its own (seed 003's contract for
    /// entrypoints), where the runs' mount namespace exists.
    pub private_tmp: bool,
}

/// A run's own `/tmp`, as the child makes it: a tmpfs of `options`,
/// granted in its ruleset with the widest of `access` the kernel takes
/// (Landlock's directory rights, ABI 6 down to 1), with `kept` put back.
#[derive(Debug)]
pub struct PrivateTmp {
    pub options: std::ffi::CString,
    pub access: [u64; 6],
    pub kept: Vec<KeptPlace>,
}

/// A place under `/tmp` the run must still reach (its skill, the scratch
/// root), put back in its own `/tmp`.
#[derive(Debug)]
pub struct KeptPlace {
    pub path: std::ffi::CString,
    /// The directories below `/tmp` on the way to it, outermost first.
    pub dirs: Vec<std::ffi::CString>,
    pub file: bool,
}

/// What the child applies to itself, prepared by the parent. Whenever
/// there is one, the child also drops every capability and sets
/// `no_new_privs`.
#[derive(Debug, Default)]
pub struct Confinement {
    /// `(uid, gid)` to become, when the server can switch.
    pub identity: Option<(u32, u32)>,
    pub last_cap: u32,
    pub landlock: Option<OwnedFd>,
    /// Seccomp programs to install, in order.
    pub seccomp: Vec<Arc<BpfProgram>>,
    pub cgroup: Option<RunCgroup>,
    /// The mount namespace to join, hiding the host's sockets and
    /// processes.
    pub mount_ns: Option<Arc<OwnedFd>>,
    /// The user namespace to join before it (a server that is not root).
    pub user_ns: Option<Arc<OwnedFd>>,
    /// The run's own `/tmp`, in a mount namespace of its own.
    pub private_tmp: Option<PrivateTmp>,
    /// For `network: false`: the filter installed last, whose listener
    /// goes to the server, which decides each `connect`.
    pub unix_gate: Option<UnixGate>,
}

impl Sandbox {
    /// Probes the host once.
    pub fn detect(mut settings: Settings) -> Self {
        let switch_identity = nix::unistd::geteuid().is_root();
        let last_cap = caps::runtime::thread_all_supported()
            .iter()
            .map(|c| u32::from(c.index()))
            .max()
            .unwrap_or(40);
        // Real paths: the workspace is carved by real path.
        for p in &mut settings.protected {
            if let Ok(real) = p.canonicalize() {
                *p = real;
            }
        }
        // `/etc/resolv.conf` often links into `/run`: a run with the
        // network reads it there (the file alone, never its directory).
        let resolver = Path::new("/etc/resolv.conf")
            .canonicalize()
            .ok()
            .filter(|real| !landlock::SYSTEM.iter().any(|s| real.starts_with(s)));
        let base_read = landlock::SYSTEM
            .iter()
            .map(PathBuf::from)
            .filter(|p| p.exists())
            .chain(resolver)
            .chain(settings.read_paths.iter().cloned())
            .collect();
        Self {
            unix_gate: unix_gate::choose(seccomp::filters().available()),
            landlock: landlock::probe(),
            fixed_rules: landlock::Fixed::open(),
            mounts: std::sync::OnceLock::new(),
            cgroups: cgroup::Cgroups::detect(cgroup::Bounds {
                pids: settings.total_pids_max,
                memory: settings.total_memory_max,
                cpu: None,
            }),
            switch_identity,
            last_cap,
            base_read,
            settings,
        }
    }

    /// This sandbox as on a host without seccomp user notification:
    /// `network: false` runs connect nowhere.
    #[cfg(test)]
    pub(crate) fn refusing_connects(mut self) -> Self {
        self.unix_gate = unix_gate::Mechanism::Refused;
        self
    }

    /// The places no tool may read, as real paths (the data and scratch
    /// directories among them): a scan of the workspace skips them too.
    pub fn protected(&self) -> &[PathBuf] {
        &self.settings.protected
    }

    /// The identity confined tools run as, when the server switches to one.
    pub fn identity(&self) -> Option<(u32, u32)> {
        self.switch_identity
            .then_some((self.settings.uid, self.settings.gid))
    }

    /// Whether a skill of `trust` runs sandboxed here.
    pub fn applies_to(&self, trust: Trust) -> bool {
        self.settings.level == Level::On || trust == Trust::Untrusted
    }

    /// Why the sandbox's user could not read the files of a skill of
    /// `trust` in `dir`, when it runs them and cannot (a checkout in
    /// root's home, say): otherwise the child fails with a bare
    /// "Permission denied".
    pub fn unreachable(&self, trust: Trust, dir: &Path) -> Option<String> {
        let (uid, _) = self.identity().filter(|_| self.applies_to(trust))?;
        if runnable_by_anyone(dir) {
            return None;
        }
        Some(format!(
            "the sandbox's user (uid {uid}) cannot reach the skill directory {}: give others \
             access to it (o+x on each directory above it, o+r on its files) or set sandbox_user",
            dir.display()
        ))
    }

    /// Makes `<root>/<name>`, `rwx------`, under a checked scratch root,
    /// owned by the sandbox's user when a skill of `trust` runs as it: the
    /// private directory of a backend's child or evaluation.
    pub fn private_dir(&self, root: &Path, name: &str, trust: Trust) -> std::io::Result<PathBuf> {
        use std::os::unix::fs::DirBuilderExt;
        ensure_scratch_root(root)?;
        let dir = root.join(name);
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        if self.applies_to(trust)
            && let Some((uid, gid)) = self.identity()
        {
            std::os::unix::fs::lchown(&dir, Some(uid), Some(gid))?;
        }
        Ok(dir)
    }

    /// Prepares the confinement of one run, or `Ok(None)` when the skill
    /// runs unconfined (`sandbox = "off"` and not untrusted).
    pub fn confine(&self, req: &Request) -> std::io::Result<Option<Confinement>> {
        if !self.applies_to(req.trust) {
            return Ok(None);
        }
        let grants = self.grants(req);
        let mounts = self.mounts();
        if let Some(mounts) = mounts {
            mounts.reveal(self.visible(req).iter().map(PathBuf::as_path))?;
        }
        let landlock = landlock::ruleset(&grants, &self.fixed_rules, mounts.and_then(mounts::Mounts::proc))
            .map_err(std::io::Error::other)?;
        let mount_ns = mounts.map(mounts::Mounts::namespace);
        let user_ns = mounts.and_then(mounts::Mounts::user_namespace);
        let private_tmp = match (req.private_tmp, mounts) {
            (true, Some(_)) => Some(self.private_tmp(req)?),
            _ => None,
        };
        let bounds = cgroup::Bounds {
            pids: self.settings.pids_max,
            memory: req.memory_bytes.unwrap_or(self.settings.memory_max),
            cpu: req.cpu.map(cpu_quota),
        };
        let cgroup = match self.cgroups.take(bounds) {
            Ok(made) => Some(made),
            Err(err) => {
                tracing::warn!(%err, "cannot make the run's cgroup; it runs without one");
                None
            }
        };
        let unix_gate = (!req.network || req.egress)
            .then(|| self.unix_gate(req, private_tmp.is_some()))
            .flatten();
        Ok(Some(Confinement {
            identity: self.identity(),
            last_cap: self.last_cap,
            landlock,
            seccomp: seccomp::filters().for_run(req.network, unix_gate.is_some()),
            cgroup,
            mount_ns,
            user_ns,
            private_tmp,
            unix_gate,
        }))
    }

    /// The gate of a `network: false` or egress run: its unix sockets may
    /// be in its scratch directory and its own `/tmp`.
    fn unix_gate(&self, req: &Request, private_tmp: bool) -> Option<UnixGate> {
        let uid = self
            .identity()
            .map_or_else(|| nix::unistd::geteuid().as_raw(), |(uid, _)| uid);
        let run = unix_gate::GatedRun {
            scratch: req.scratch,
            private_tmp,
            uid,
            ip: req.egress,
        };
        UnixGate::new(self.unix_gate, &run)
    }

    /// Plans a run's own `/tmp`: what lies under the host's `/tmp` that
    /// the run must reach is put back in it (outermost places only).
    fn private_tmp(&self, req: &Request) -> std::io::Result<PrivateTmp> {
        let tmp = Path::new("/tmp").canonicalize()?;
        let mut places: Vec<PathBuf> = self
            .visible(req)
            .iter()
            .filter_map(|p| p.canonicalize().ok())
            .filter(|p| p.starts_with(&tmp) && *p != tmp)
            .collect();
        places.sort();
        places.dedup_by(|later, earlier| later.starts_with(&*earlier));
        let c = |p: &Path| {
            std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).map_err(std::io::Error::other)
        };
        let kept = places
            .iter()
            .map(|place| {
                let file = !place.is_dir();
                let last = if file {
                    place.parent()
                } else {
                    Some(place.as_path())
                };
                let mut dirs: Vec<&Path> = last
                    .into_iter()
                    .flat_map(Path::ancestors)
                    .take_while(|a| a.starts_with(&tmp) && *a != tmp)
                    .collect();
                dirs.reverse();
                Ok(KeptPlace {
                    path: c(place)?,
                    dirs: dirs.into_iter().map(c).collect::<std::io::Result<_>>()?,
                    file,
                })
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(PrivateTmp {
            options: c(Path::new(&format!("size={},mode=1777", self.settings.tmp_bytes)))?,
            access: landlock::dir_access_by_abi(),
            kept,
        })
    }

    /// The runs' mount namespace, made on first use.
    fn mounts(&self) -> Option<&mounts::Mounts> {
        self.mounts
            .get_or_init(|| match mounts::Mounts::make() {
                Ok(made) => Some(made),
                Err(err) => {
                    tracing::info!(%err, "no mount namespace for runs: the host's /tmp, /run and processes stay in their sight");
                    None
                }
            })
            .as_ref()
    }

    /// The places a run must find in its mount namespace: whatever it is
    /// granted, before any carving (Landlock still decides the access).
    fn visible(&self, req: &Request) -> Vec<PathBuf> {
        // The scratch root, not the run's own directory: bound once, it
        // shows every run's directory, made later beneath it.
        let scratch = req.scratch.parent().unwrap_or(req.scratch);
        [req.skill_dir, scratch]
            .into_iter()
            .chain(req.workspace)
            .chain(req.deps)
            .map(Path::to_path_buf)
            .chain(
                req.programs
                    .iter()
                    .flat_map(|p| program_dirs(p).into_iter().chain(executable_file(p))),
            )
            .chain(self.settings.read_paths.iter().cloned())
            .chain(self.settings.write_paths.iter().cloned())
            .collect()
    }

    /// What a run would be allowed, without preparing anything.
    pub fn allowance(&self, req: &Request) -> Allowance {
        if !self.applies_to(req.trust) {
            return Allowance {
                confined: false,
                ..Allowance::default()
            };
        }
        let grants = self.grants(req);
        let shown = |paths: &[PathBuf]| paths.iter().map(|p| p.display().to_string()).collect();
        Allowance {
            confined: true,
            identity: self.identity().map(|(uid, gid)| format!("uid {uid} gid {gid}")),
            read: shown(&grants.read),
            write: shown(&grants.write),
            list: shown(&grants.list),
            network: req.network,
            pids_max: self.cgroups.pids().map(|_| self.settings.pids_max),
            memory_max: self
                .cgroups
                .memory()
                .map(|_| req.memory_bytes.unwrap_or(self.settings.memory_max)),
            cpu_max: req.cpu.filter(|_| self.cgroups.cpu().is_some()),
            tmp: req.private_tmp.then(|| self.tmp_shown()),
        }
    }

    /// What an entrypoint's `/tmp` is here.
    fn tmp_shown(&self) -> String {
        if self.mounts().is_some() {
            format!("its own, {} bytes, noexec", self.settings.tmp_bytes)
        } else {
            "none: the runs' mount namespace is unavailable here, so /tmp is not writable; \
             write temporary files to $TMPDIR"
                .to_owned()
        }
    }

    /// The paths of one run's Landlock ruleset.
    fn grants(&self, req: &Request) -> landlock::Grants {
        let mut read = self.base_read.clone();
        read.push(req.skill_dir.to_path_buf());
        read.extend(req.deps.map(Path::to_path_buf));
        for program in &req.programs {
            // The program itself, even in a protected place (the Starlark
            // host kept under the scratch root): an executable file gives
            // nothing but itself. What lies beside it is carved.
            read.extend(executable_file(program));
            for dir in program_dirs(program) {
                read.extend(landlock::around(&dir, &self.settings.protected).whole);
            }
        }
        let mut write = vec![req.scratch.to_path_buf()];
        let mut list = Vec::new();
        if let Some(workspace) = req.workspace {
            let workspace = landlock::around(workspace, &self.settings.protected);
            write.extend(self.settings.write_paths.iter().cloned());
            if req.workspace_write {
                write.extend(workspace.whole);
            } else {
                read.extend(workspace.whole);
            }
            list = workspace.list;
        }
        landlock::Grants {
            read,
            write,
            list,
            no_tcp: !req.network,
        }
    }

    /// What is enforced, layer by layer, for `/readyz` and dry runs.
    /// `network_isolated`: whether the runner has its empty network namespace.
    pub fn report(&self, network_isolated: bool) -> Report {
        let on = |yes: bool| if yes { "enforced" } else { "unavailable" }.to_owned();
        let files = match self.landlock {
            RulesetStatus::FullyEnforced => "enforced",
            RulesetStatus::PartiallyEnforced => "partial",
            RulesetStatus::NotEnforced => "unavailable",
        };
        Report {
            level: match self.settings.level {
                Level::On => "on",
                Level::Off => "untrusted-only",
            }
            .to_owned(),
            identity: if self.switch_identity {
                format!("uid {} gid {}", self.settings.uid, self.settings.gid)
            } else {
                "server user, no privileges".to_owned()
            },
            files: files.to_owned(),
            kill: if self.cgroups.kills() {
                "cgroup".to_owned()
            } else {
                "process group".to_owned()
            },
            pids: self
                .cgroups
                .pids()
                .map_or_else(|| "unavailable".to_owned(), |v| format!("enforced (cgroup {v})")),
            memory: self
                .cgroups
                .memory()
                .map_or_else(|| "rlimit".to_owned(), |v| format!("enforced (cgroup {v})")),
            cpu: self
                .cgroups
                .cpu()
                .map_or_else(|| "unavailable".to_owned(), |v| format!("enforced (cgroup {v})")),
            network: on(network_isolated),
            // A run's egress namespace is made as the empty one is, or in
            // the runs' user namespace by a server that is not root.
            egress: if network_isolated || self.mounts().and_then(mounts::Mounts::user_namespace).is_some() {
                "proxy"
            } else {
                "unavailable"
            }
            .to_owned(),
            seccomp: on(seccomp::filters().available()),
            unix_sockets: self.unix_gate.name().to_owned(),
            mounts: on(self.mounts().is_some()),
            processes: on(self.mounts().is_some_and(|m| m.hides_processes)),
        }
    }
}

/// What the sandbox enforces on this host, per layer.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Report {
    /// `on` (every skill) or `untrusted-only` (`sandbox = "off"`).
    pub level: String,
    /// Who tools run as.
    pub identity: String,
    /// Landlock: `enforced`, `partial` (an older ABI) or `unavailable`.
    pub files: String,
    /// How a run is ended: `cgroup` (`cgroup.kill`) or `process group`.
    pub kill: String,
    /// `pids.max` per run.
    pub pids: String,
    /// `memory.max` per run, else the address-space rlimit.
    pub memory: String,
    /// A skill's `resources.cpu`: `cpu.max` (v2) or the CFS quota (v1).
    pub cpu: String,
    /// `network: false` gets an empty network namespace.
    pub network: String,
    /// `network: {allow: [...]}`: `proxy` (each run gets a namespace of
    /// its own whose one way out is skilld's proxy, `docs/egress.md`), or
    /// `unavailable` (no network namespaces here: such calls fail).
    pub egress: String,
    /// Every run gets filters refusing terminal injection, user
    /// namespaces and io_uring; `network: false` also every socket family
    /// but `AF_UNIX`, and connectionless unix sockets.
    pub seccomp: String,
    /// How `network: false` runs are kept from the host's unix sockets:
    /// `seccomp_notify` (the server decides each `connect`: only the run's
    /// own named sockets), `refused` (every `connect` fails: no user
    /// notification here) or `unavailable` (no seccomp filters).
    pub unix_sockets: String,
    /// Runs join a mount namespace where the host's `/tmp`, `/var/tmp`,
    /// `/run` and `/dev/shm` (and the unix sockets in them) are hidden.
    pub mounts: String,
    /// `/proc` shows a run only its own processes (`hidepid`), not the
    /// server's or other runs' command lines.
    pub processes: String,
}

/// What one run may do, as a dry run shows it.
#[derive(Debug, Clone, Default, Serialize, ToSchema)]
pub struct Allowance {
    /// False when the skill runs unconfined (`sandbox = "off"` and not
    /// untrusted); the other fields are then empty.
    pub confined: bool,
    /// The uid and gid it would run as; none when it keeps the server's
    /// (which is not root), without privileges.
    pub identity: Option<String>,
    /// What it may read and execute.
    pub read: Vec<String>,
    /// What it may also write.
    pub write: Vec<String>,
    /// Directories it may only list: those on the way to a protected
    /// place inside its workspace (the names show; nothing inside is read).
    pub list: Vec<String>,
    /// Whether it may use the network.
    pub network: bool,
    /// Its process limit, where a cgroup enforces one.
    pub pids_max: Option<u64>,
    /// Its memory limit in bytes, where a cgroup enforces one.
    pub memory_max: Option<u64>,
    /// Its CPU limit in cores, where a cgroup enforces one.
    pub cpu_max: Option<f64>,
    /// An entrypoint's own `/tmp` (seed 003), or why it has none.
    pub tmp: Option<String>,
}

/// What a program outside the system directories needs beside itself:
/// for one in a `bin` or `sbin` directory (`/opt/py/bin/python3`), that
/// directory and the library directories next to it (`/opt/py/lib`), so
/// its libraries come with it (the file itself is [`executable_file`]'s);
/// for the program of an npm package (a runner such as
/// `node_modules/.bin/ts-node`), the `node_modules` it lies in, whose
/// other packages it loads (ts-node's `typescript`); for any other,
/// nothing. Never the prefix itself: `~/bin/python3`'s is the home directory, with the
/// config, the run log and `~/.ssh` in it. System programs need nothing.
fn program_dirs(program: &Path) -> Vec<PathBuf> {
    let Ok(real) = program.canonicalize() else {
        return Vec::new();
    };
    if landlock::SYSTEM.iter().any(|s| real.starts_with(s)) {
        return Vec::new();
    }
    if let Some(modules) = real.ancestors().skip(1).find(|a| a.ends_with("node_modules")) {
        return vec![modules.to_path_buf()];
    }
    let Some(dir) = real.parent() else {
        return Vec::new();
    };
    match dir.parent() {
        Some(prefix) if dir.ends_with("bin") || dir.ends_with("sbin") => std::iter::once(dir.to_path_buf())
            .chain(LIBRARY_DIRS.iter().map(|lib| prefix.join(lib)))
            .collect(),
        _ => Vec::new(),
    }
}

/// `program`'s real path when it is an executable regular file outside
/// the system directories: granted whole, wherever it lies. Never a file
/// that is not executable (the run log, a secret): naming one as a
/// program grants nothing.
fn executable_file(program: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let real = program.canonicalize().ok()?;
    let meta = std::fs::metadata(&real).ok()?;
    let runnable = meta.is_file() && meta.permissions().mode() & 0o111 != 0;
    let system = landlock::SYSTEM.iter().any(|s| real.starts_with(s));
    (runnable && !system).then_some(real)
}

/// The directories beside a program's `bin` that hold what it loads.
const LIBRARY_DIRS: [&str; 3] = ["lib", "lib64", "libexec"];

/// `cores` as CPU time per period, in microseconds: at least 1 ms, as
/// the kernel takes no less.
fn cpu_quota(cores: f64) -> u64 {
    let quota = (cores * cgroup::CPU_PERIOD_US as f64).round();
    if quota.is_finite() && quota >= 1000.0 {
        quota as u64
    } else {
        1000
    }
}

/// Makes the scratch root, `rwx--x--x`: a run can enter its own directory
/// but not list the others. One that exists must be a directory of this
/// user's, not a symlink someone planted in a shared `/tmp`.
pub fn ensure_scratch_root(scratch: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    match std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o711)
        .create(scratch)
    {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let meta = std::fs::symlink_metadata(scratch)?;
    if !meta.is_dir() || meta.uid() != nix::unistd::geteuid().as_raw() {
        return Err(std::io::Error::other(format!(
            "the scratch directory {} is not a directory of this user's",
            scratch.display()
        )));
    }
    if meta.mode() & 0o7777 != 0o711 {
        std::fs::set_permissions(scratch, std::fs::Permissions::from_mode(0o711))?;
    }
    Ok(())
}
