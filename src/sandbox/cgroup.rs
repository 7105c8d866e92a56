//! One cgroup per run: `cgroup.kill` ends every process of the run, even
//! those that left its process group, and `pids.max` and `memory.max`
//! bound what it can take.
//!
//! Detected, not assumed: a pure v2 host with delegated controllers gets
//! everything from one tree; a hybrid host (v2 without controllers, v1
//! `pids` and `memory`) gets kill from v2 and the limits from v1; a host
//! where nothing can be written falls back to the process group.

use std::fs;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// Where run cgroups are made, per hierarchy.
#[derive(Debug, Default)]
pub(super) struct Cgroups {
    /// The v2 parent of run cgroups, and whether it has `cgroup.kill`.
    v2: Option<PathBuf>,
    kill: bool,
    /// The controllers enabled for the v2 run cgroups.
    v2_pids: bool,
    v2_memory: bool,
    /// v1 parents, used for a limit v2 cannot give.
    v1_pids: Option<PathBuf>,
    v1_memory: Option<PathBuf>,
}

/// The limits of one run.
#[derive(Debug, Clone, Copy)]
pub(super) struct Bounds {
    pub pids: u64,
    pub memory: u64,
}

/// A run's cgroups, removed (once empty) when dropped.
#[derive(Debug)]
pub struct RunCgroup {
    dirs: Vec<PathBuf>,
    /// `cgroup.procs` of each, open for the child to write itself into.
    procs: Vec<OwnedFd>,
    kill: Option<PathBuf>,
}

impl Cgroups {
    /// Finds the hierarchies this process may make cgroups in.
    pub(super) fn detect() -> Self {
        let mounts = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let own = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let mut found = Self::default();
        if let Some(base) = v2_base(&mounts, &own)
            && let Some(parent) = make_parent(&base)
        {
            found.kill = parent.join("cgroup.kill").exists();
            let enabled = enable_controllers(&base, &parent);
            found.v2_pids = enabled.contains("pids");
            found.v2_memory = enabled.contains("memory");
            found.v2 = Some(parent);
        }
        if !found.v2_pids {
            found.v1_pids = v1_base(&mounts, &own, "pids").and_then(|b| make_parent(&b));
        }
        if !found.v2_memory {
            found.v1_memory = v1_base(&mounts, &own, "memory").and_then(|b| make_parent(&b));
        }
        found
    }

    /// Whether `cgroup.kill` ends runs.
    pub(super) fn kills(&self) -> bool {
        self.v2.is_some() && self.kill
    }

    /// `"v2"`, `"v1"` or `None`: where `pids.max` comes from.
    pub(super) fn pids(&self) -> Option<&'static str> {
        if self.v2_pids {
            Some("v2")
        } else {
            self.v1_pids.as_ref().map(|_| "v1")
        }
    }

    /// Where the memory limit comes from.
    pub(super) fn memory(&self) -> Option<&'static str> {
        if self.v2_memory {
            Some("v2")
        } else {
            self.v1_memory.as_ref().map(|_| "v1")
        }
    }

    /// Makes the cgroups of run `name`, limits written.
    pub(super) fn make(&self, name: &str, bounds: Bounds) -> io::Result<RunCgroup> {
        let mut run = RunCgroup {
            dirs: Vec::new(),
            procs: Vec::new(),
            kill: None,
        };
        if let Some(parent) = &self.v2 {
            let dir = run.add(parent, name)?;
            if self.v2_pids {
                write(&dir.join("pids.max"), &bounds.pids.to_string())?;
            }
            if self.v2_memory {
                write(&dir.join("memory.max"), &bounds.memory.to_string())?;
                // Without it a run could go on in swap past memory.max.
                let _ = write(&dir.join("memory.swap.max"), "0");
            }
            run.kill = self.kill.then(|| dir.join("cgroup.kill"));
        }
        if let Some(parent) = &self.v1_pids {
            let dir = run.add(parent, name)?;
            write(&dir.join("pids.max"), &bounds.pids.to_string())?;
        }
        if let Some(parent) = &self.v1_memory {
            let dir = run.add(parent, name)?;
            write(&dir.join("memory.limit_in_bytes"), &bounds.memory.to_string())?;
        }
        Ok(run)
    }
}

impl Drop for Cgroups {
    fn drop(&mut self) {
        for parent in [&self.v2, &self.v1_pids, &self.v1_memory].into_iter().flatten() {
            let _ = fs::remove_dir(parent);
        }
    }
}

impl RunCgroup {
    fn add(&mut self, parent: &Path, name: &str) -> io::Result<PathBuf> {
        let dir = parent.join(name);
        fs::create_dir(&dir)?;
        self.dirs.push(dir.clone());
        let procs = fs::OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.procs"))?;
        self.procs.push(procs.into());
        Ok(dir)
    }

    /// The `cgroup.procs` the child writes `0` to, joining the run's cgroups.
    pub fn procs(&self) -> Vec<RawFd> {
        self.procs.iter().map(AsRawFd::as_raw_fd).collect()
    }

    /// Kills every process in the run: `cgroup.kill` where there is one,
    /// else SIGKILL to each process listed, until none is left.
    pub fn kill(&self) {
        if let Some(kill) = &self.kill {
            if let Err(err) = write(kill, "1") {
                tracing::warn!(%err, "cannot kill the run's cgroup");
            }
            return;
        }
        for dir in &self.dirs {
            for _ in 0..20 {
                let pids = fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
                let pids: Vec<i32> = pids.lines().filter_map(|l| l.trim().parse().ok()).collect();
                if pids.is_empty() {
                    break;
                }
                for pid in pids {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(pid),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
            }
        }
    }
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        self.procs.clear();
        let dirs = std::mem::take(&mut self.dirs);
        if dirs.is_empty() {
            return;
        }
        if dirs_removed_now(&dirs) {
            return;
        }
        // A killed process takes a moment to leave, and rmdir fails
        // (EBUSY) until it has: retried off the caller's path, bounded.
        let remove = move || {
            for _ in 0..200 {
                std::thread::sleep(Duration::from_millis(10));
                if dirs_removed_now(&dirs) {
                    return;
                }
            }
            tracing::warn!(cgroups = ?dirs, "run cgroups still busy; left behind");
        };
        if let Err(err) = std::thread::Builder::new()
            .name("skilld-cgroup".to_owned())
            .spawn(remove)
        {
            tracing::warn!(%err, "cannot start a thread to remove run cgroups");
        }
    }
}

/// Tries once; true when every directory is gone.
fn dirs_removed_now(dirs: &[PathBuf]) -> bool {
    dirs.iter()
        .map(|d| fs::remove_dir(d).is_ok() || !d.exists())
        .fold(true, |all, gone| all & gone)
}

fn write(path: &Path, value: &str) -> io::Result<()> {
    fs::OpenOptions::new()
        .write(true)
        .open(path)?
        .write_all(value.as_bytes())
}

/// The unified hierarchy's directory of this process.
fn v2_base(mounts: &str, own: &str) -> Option<PathBuf> {
    let mount = mount_point(mounts, |fstype, _| fstype == "cgroup2")?;
    let path = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    Some(join_cgroup(&mount, path))
}

/// A v1 hierarchy's directory of this process, for `controller`.
fn v1_base(mounts: &str, own: &str, controller: &str) -> Option<PathBuf> {
    let mount = mount_point(mounts, |fstype, options| {
        fstype == "cgroup" && options.split(',').any(|o| o == controller)
    })?;
    let path = own.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, names, path) = (parts.next()?, parts.next()?, parts.next()?);
        names.split(',').any(|n| n == controller).then_some(path)
    })?;
    Some(join_cgroup(&mount, path))
}

/// The mount point of the first mount whose type and super options match.
fn mount_point(mounts: &str, matches: impl Fn(&str, &str) -> bool) -> Option<PathBuf> {
    mounts.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let mut right = right.split(' ');
        let (fstype, _source, options) = (right.next()?, right.next()?, right.next()?);
        let point = left.split(' ').nth(4)?;
        matches(fstype, options).then(|| PathBuf::from(point))
    })
}

fn join_cgroup(mount: &Path, path: &str) -> PathBuf {
    mount.join(path.trim().trim_start_matches('/'))
}

/// The directory run cgroups go in: `skilld-<pid>-<n>` beside this
/// process's own, made fresh (one per [`Cgroups`], removed with it).
/// `None` where it cannot be made (not delegated).
fn make_parent(base: &Path) -> Option<PathBuf> {
    static MADE: AtomicU32 = AtomicU32::new(0);
    let n = MADE.fetch_add(1, Ordering::Relaxed);
    let parent = base.join(format!("skilld-{}-{n}", std::process::id()));
    match fs::create_dir(&parent) {
        Ok(()) => Some(parent),
        Err(err) => {
            tracing::debug!(base = %base.display(), %err, "cannot make run cgroups here");
            None
        }
    }
}

/// Enables `pids` and `memory` for the run cgroups where the hierarchy
/// offers them; returns those enabled. A cgroup that holds processes
/// cannot give controllers to its children (the no-internal-process rule,
/// which the root is exempt from), so where this process's own cgroup
/// refuses, the process moves into a `skilld-server` leaf first, as a
/// delegated service must.
fn enable_controllers(base: &Path, parent: &Path) -> String {
    let offered = fs::read_to_string(base.join("cgroup.controllers")).unwrap_or_default();
    let wanted: Vec<&str> = ["pids", "memory"]
        .into_iter()
        .filter(|c| offered.split_whitespace().any(|o| o == *c))
        .collect();
    if wanted.is_empty() {
        return String::new();
    }
    let request = wanted
        .iter()
        .map(|c| format!("+{c}"))
        .collect::<Vec<_>>()
        .join(" ");
    let control = base.join("cgroup.subtree_control");
    if write(&control, &request).is_err() {
        let leaf = base.join("skilld-server");
        let moved = fs::create_dir(&leaf)
            .or_else(|e| {
                if e.kind() == io::ErrorKind::AlreadyExists {
                    Ok(())
                } else {
                    Err(e)
                }
            })
            .and_then(|()| write(&leaf.join("cgroup.procs"), &std::process::id().to_string()))
            .and_then(|()| write(&control, &request));
        if let Err(err) = moved {
            tracing::info!(%err, "cgroup controllers not delegated; runs get no pids.max or memory.max from v2");
            return String::new();
        }
    }
    if let Err(err) = write(&parent.join("cgroup.subtree_control"), &request) {
        tracing::info!(%err, "cannot enable cgroup controllers for runs");
        return String::new();
    }
    fs::read_to_string(parent.join("cgroup.subtree_control")).unwrap_or_default()
}
