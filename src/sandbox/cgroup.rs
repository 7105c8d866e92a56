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
use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
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
    v2_cpu: bool,
    /// v1 parents, used for a limit v2 cannot give.
    v1_pids: Option<PathBuf>,
    v1_memory: Option<PathBuf>,
    v1_cpu: Option<PathBuf>,
    /// Empty run cgroups, kept for the next runs.
    pool: Arc<Mutex<Pool>>,
    /// Run cgroups made so far, which names the next.
    made: AtomicU64,
}

/// Run cgroups left empty by their runs. Making and removing a cgroup
/// costs the kernel more than the rest of a short run together (three of
/// each per run on a hybrid host; `cargo bench --bench invoke` shows it),
/// so an empty one is reused instead, its limits rewritten as needed.
#[derive(Debug, Default)]
struct Pool {
    slots: Vec<Slot>,
    /// The `Cgroups` is gone: slots returned now are removed instead.
    closed: bool,
}

/// [`RunCgroup::ended`], in the order it only moves in: not looked at,
/// found empty, killed.
const UNSEEN: u8 = 0;
const FOUND_EMPTY: u8 = 1;
const KILLED: u8 = 2;

/// Empty run cgroups kept at most.
const POOL_MAX: usize = 64;

/// The limits of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Bounds {
    pub pids: u64,
    pub memory: u64,
    /// CPU time per [`CPU_PERIOD_US`], in microseconds; `None`: no bound.
    pub cpu: Option<u64>,
}

/// The period a run's CPU quota is counted over (the kernel's default).
pub(super) const CPU_PERIOD_US: u64 = 100_000;

/// One run cgroup in each hierarchy in use.
#[derive(Debug)]
struct Slot {
    v2: Option<PathBuf>,
    v1_pids: Option<PathBuf>,
    v1_memory: Option<PathBuf>,
    v1_cpu: Option<PathBuf>,
    /// The limits written last.
    bounds: Option<Bounds>,
}

/// A run's cgroups; given back to the pool, or removed, when dropped.
#[derive(Debug)]
pub struct RunCgroup {
    slot: Option<Slot>,
    /// The v2 cgroup's directory, for a child born in it, and its
    /// `cgroup.procs`, for one that moves itself; then `tasks` of the v1
    /// ones. Open only while the run has the slot: a pooled one
    /// holds no descriptor.
    v2: Option<(OwnedFd, OwnedFd)>,
    v1_tasks: Vec<OwnedFd>,
    kill: Option<PathBuf>,
    /// What `kill` found: [`UNSEEN`], [`FOUND_EMPTY`] (nothing can enter
    /// since, so the drop need not look again) or [`KILLED`] (not reused).
    ended: AtomicU8,
    pool: Arc<Mutex<Pool>>,
}

impl Cgroups {
    /// Finds the hierarchies this process may make cgroups in, and bounds
    /// all runs together by `total`.
    pub(super) fn detect(total: Bounds) -> Self {
        let found = Self::find();
        found.bound_all(total);
        found
    }

    /// Writes `total` on the parent of the run cgroups: each run's own
    /// limits could otherwise add up past the host (64 runs of 2 GiB).
    fn bound_all(&self, total: Bounds) {
        let (pids, memory) = (total.pids.to_string(), total.memory.to_string());
        // (`total.cpu` is not applied: all runs together may use every core.)
        let mut writes = Vec::new();
        if let Some(parent) = &self.v2 {
            if self.v2_pids {
                writes.push((parent.join("pids.max"), pids.clone()));
            }
            if self.v2_memory {
                writes.push((parent.join("memory.max"), memory.clone()));
            }
        }
        writes.extend(self.v1_pids.as_ref().map(|p| (p.join("pids.max"), pids)));
        writes.extend(
            self.v1_memory
                .as_ref()
                .map(|p| (p.join("memory.limit_in_bytes"), memory)),
        );
        for (path, value) in writes {
            if let Err(err) = write(&path, &value) {
                tracing::warn!(path = %path.display(), %err, "cannot bound all runs together");
            }
        }
    }

    fn find() -> Self {
        let mounts = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let own = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let mut found = Self::default();
        if let Some(base) = v2_base(&mounts, &own)
            && let Some(parent) = make_parent(&base)
        {
            found.kill = parent.join("cgroup.kill").exists();
            let enabled = enable_controllers(&base, &parent);
            let has = |c: &str| enabled.split_whitespace().any(|e| e == c);
            found.v2_pids = has("pids");
            found.v2_memory = has("memory");
            found.v2_cpu = has("cpu");
            found.v2 = Some(parent);
        }
        if !found.v2_pids {
            found.v1_pids = v1_base(&mounts, &own, "pids").and_then(|b| make_parent(&b));
        }
        if !found.v2_memory {
            found.v1_memory = v1_base(&mounts, &own, "memory").and_then(|b| make_parent(&b));
        }
        if !found.v2_cpu {
            found.v1_cpu = v1_base(&mounts, &own, "cpu").and_then(|b| make_parent(&b));
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

    /// Where the CPU limit comes from.
    pub(super) fn cpu(&self) -> Option<&'static str> {
        if self.v2_cpu {
            Some("v2")
        } else {
            self.v1_cpu.as_ref().map(|_| "v1")
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

    /// The cgroups of one run, limits written: an empty one from the
    /// pool, else new ones.
    pub(super) fn take(&self, bounds: Bounds) -> io::Result<RunCgroup> {
        let pooled = lock(&self.pool).slots.pop();
        let mut slot = match pooled {
            Some(slot) => slot,
            None => self.make()?,
        };
        if slot.bounds != Some(bounds) {
            self.limit(&slot, bounds)?;
            slot.bounds = Some(bounds);
        }
        let open = |dir: &PathBuf, file: &str| -> io::Result<OwnedFd> {
            let file = fs::OpenOptions::new().write(true).open(dir.join(file))?;
            Ok(OwnedFd::from(file))
        };
        let v2 = match &slot.v2 {
            Some(dir) => Some((OwnedFd::from(fs::File::open(dir)?), open(dir, "cgroup.procs")?)),
            None => None,
        };
        // `tasks`, not `cgroup.procs`: the child moves itself while it is
        // its process's one thread, and the kernel moves `current` alone
        // without the global threadgroup lock that a process move takes.
        // The v1 CPU cgroup only for a run with a CPU bound: joining it is
        // one more write in every child.
        let cpu = slot.v1_cpu.as_ref().filter(|_| bounds.cpu.is_some());
        let v1_tasks = [&slot.v1_pids, &slot.v1_memory, &cpu.cloned()]
            .into_iter()
            .flatten()
            .map(|dir| open(dir, "tasks"))
            .collect::<io::Result<Vec<_>>>()?;
        Ok(RunCgroup {
            v2,
            v1_tasks,
            kill: slot
                .v2
                .as_ref()
                .filter(|_| self.kill)
                .map(|dir| dir.join("cgroup.kill")),
            ended: AtomicU8::new(UNSEEN),
            slot: Some(slot),
            pool: self.pool.clone(),
        })
    }

    fn make(&self) -> io::Result<Slot> {
        let name = format!("run-{}", self.made.fetch_add(1, Ordering::Relaxed));
        let add = |parent: &Option<PathBuf>| -> io::Result<Option<PathBuf>> {
            let Some(parent) = parent else {
                return Ok(None);
            };
            let dir = parent.join(&name);
            fs::create_dir(&dir)?;
            Ok(Some(dir))
        };
        let made = (|| {
            Ok::<_, io::Error>((
                add(&self.v2)?,
                add(&self.v1_pids)?,
                add(&self.v1_memory)?,
                add(&self.v1_cpu)?,
            ))
        })();
        match made {
            Ok((v2, v1_pids, v1_memory, v1_cpu)) => Ok(Slot {
                v2,
                v1_pids,
                v1_memory,
                v1_cpu,
                bounds: None,
            }),
            Err(err) => {
                // Whatever was made before the failure goes again.
                for parent in [&self.v2, &self.v1_pids, &self.v1_memory, &self.v1_cpu]
                    .into_iter()
                    .flatten()
                {
                    let _ = fs::remove_dir(parent.join(&name));
                }
                Err(err)
            }
        }
    }

    fn limit(&self, slot: &Slot, bounds: Bounds) -> io::Result<()> {
        let (pids, memory) = (bounds.pids.to_string(), bounds.memory.to_string());
        if let Some(dir) = &slot.v2 {
            if self.v2_pids {
                write(&dir.join("pids.max"), &pids)?;
            }
            if self.v2_memory {
                write(&dir.join("memory.max"), &memory)?;
                // Without it a run could go on in swap past memory.max.
                let _ = write(&dir.join("memory.swap.max"), "0");
            }
        }
        if let Some(dir) = &slot.v1_pids {
            write(&dir.join("pids.max"), &pids)?;
        }
        if let Some(dir) = &slot.v1_memory {
            write(&dir.join("memory.limit_in_bytes"), &memory)?;
        }
        self.limit_cpu(slot, bounds.cpu)
    }

    /// `cpu.max` (v2) or the CFS quota (v1); unbounded without `cpu`.
    fn limit_cpu(&self, slot: &Slot, cpu: Option<u64>) -> io::Result<()> {
        if let Some(dir) = slot.v2.as_ref().filter(|_| self.v2_cpu) {
            let quota = cpu.map_or_else(|| "max".to_owned(), |q| q.to_string());
            write(&dir.join("cpu.max"), &format!("{quota} {CPU_PERIOD_US}"))?;
        }
        if let Some(dir) = &slot.v1_cpu {
            write(&dir.join("cpu.cfs_period_us"), &CPU_PERIOD_US.to_string())?;
            let quota = cpu.map_or_else(|| "-1".to_owned(), |q| q.to_string());
            write(&dir.join("cpu.cfs_quota_us"), &quota)?;
        }
        Ok(())
    }
}

impl Drop for Cgroups {
    fn drop(&mut self) {
        let slots = {
            let mut pool = lock(&self.pool);
            pool.closed = true;
            std::mem::take(&mut pool.slots)
        };
        for slot in slots {
            remove(slot.dirs());
        }
        for parent in [&self.v2, &self.v1_pids, &self.v1_memory, &self.v1_cpu]
            .into_iter()
            .flatten()
        {
            let _ = fs::remove_dir(parent);
        }
    }
}

impl Slot {
    fn dirs(&self) -> Vec<PathBuf> {
        [&self.v2, &self.v1_pids, &self.v1_memory, &self.v1_cpu]
            .into_iter()
            .flatten()
            .cloned()
            .collect()
    }

    /// No process left in it: every process of a run is in each of its
    /// hierarchies, so one tells.
    fn is_empty(&self) -> bool {
        self.dirs().first().is_some_and(|dir| {
            fs::read_to_string(dir.join("cgroup.procs")).is_ok_and(|p| p.trim().is_empty())
        })
    }
}

impl RunCgroup {
    /// The v2 cgroup's directory, for `clone3(CLONE_INTO_CGROUP)`.
    pub fn directory(&self) -> Option<RawFd> {
        self.v2.as_ref().map(|(dir, _)| dir.as_raw_fd())
    }

    /// The files the child writes `0` to, joining the run's cgroups: v2's
    /// `cgroup.procs` unless it was born there, and v1's `tasks`.
    pub fn procs(&self, born_in_v2: bool) -> Vec<RawFd> {
        let v2 = self.v2.iter().filter(|_| !born_in_v2).map(|(_, procs)| procs);
        v2.chain(&self.v1_tasks).map(AsRawFd::as_raw_fd).collect()
    }

    /// Kills every process in the run: `cgroup.kill` where there is one,
    /// else SIGKILL to each process listed, until none is left.
    ///
    /// An empty cgroup is left as it is: once `cgroup.kill` has been
    /// written, Linux (seen on 6.18) SIGKILLs every child later born in
    /// that cgroup with `CLONE_INTO_CGROUP`, so a killed cgroup is removed
    /// rather than pooled, and a run that left nothing behind keeps its
    /// cgroup reusable.
    pub fn kill(&self) {
        if let Some(kill) = &self.kill {
            if self.slot.as_ref().is_some_and(Slot::is_empty) {
                // Never back from KILLED: a run can be killed, then
                // found empty at its end.
                self.ended.fetch_max(FOUND_EMPTY, Ordering::Relaxed);
                return;
            }
            self.ended.store(KILLED, Ordering::Relaxed);
            if let Err(err) = write(kill, "1") {
                tracing::warn!(%err, "cannot kill the run's cgroup");
            }
            return;
        }
        // A run that left nothing behind is the common case: one read
        // tells, as for `Slot::is_empty`, and the drop need not read again.
        if self.slot.as_ref().is_some_and(Slot::is_empty) {
            self.ended.fetch_max(FOUND_EMPTY, Ordering::Relaxed);
            return;
        }
        for dir in self.slot.iter().flat_map(Slot::dirs) {
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

    /// Whether [`kill`](Self::kill) found the run's cgroup empty: every
    /// process of the run has ended, and none can come back, since none
    /// is left to fork.
    pub fn found_empty(&self) -> bool {
        self.ended.load(Ordering::Relaxed) == FOUND_EMPTY
    }
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        self.v2 = None;
        self.v1_tasks.clear();
        let Some(slot) = self.slot.take() else {
            return;
        };
        // Only an empty cgroup is reused: a process still dying there
        // must not share the next run's limits, nor be killed with it.
        let reusable = match *self.ended.get_mut() {
            FOUND_EMPTY => true,
            KILLED => false,
            _ => slot.is_empty(),
        };
        if reusable {
            let mut pool = lock(&self.pool);
            if !pool.closed && pool.slots.len() < POOL_MAX {
                pool.slots.push(slot);
                return;
            }
        }
        remove(slot.dirs());
    }
}

fn lock(pool: &Mutex<Pool>) -> std::sync::MutexGuard<'_, Pool> {
    pool.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Removes run cgroups, now if they are empty, else from a thread of its
/// own that retries: a killed process takes a moment to leave, and rmdir
/// fails (EBUSY) until it has.
fn remove(dirs: Vec<PathBuf>) {
    if dirs_removed_now(&dirs) {
        return;
    }
    let retry = move || {
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
        .spawn(retry)
    {
        tracing::warn!(%err, "cannot start a thread to remove run cgroups");
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
    remove_stale(base);
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

/// Removes the run cgroups of skilld processes that are gone: a process
/// that ends without dropping its `Cgroups` (killed, or a test binary)
/// leaves its empty `skilld-<pid>-<n>/run-<k>` directories behind.
fn remove_stale(base: &Path) {
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("skilld-"))
            .and_then(|n| n.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let dir = entry.path();
        if let Ok(runs) = fs::read_dir(&dir) {
            for run in runs.filter_map(Result::ok).filter(|r| r.path().is_dir()) {
                let _ = fs::remove_dir(run.path());
            }
        }
        let _ = fs::remove_dir(&dir);
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
    let wanted: Vec<&str> = ["pids", "memory", "cpu"]
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
    let one_by_one = |control: &Path| {
        wanted
            .iter()
            .filter(|c| write(control, &format!("+{c}")).is_ok())
            .count()
    };
    if write(&control, &request).is_err() && one_by_one(&control) == 0 {
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
            .and_then(|()| {
                write(&control, &request).or_else(|e| if one_by_one(&control) > 0 { Ok(()) } else { Err(e) })
            });
        if let Err(err) = moved {
            tracing::info!(%err, "cgroup controllers not delegated; runs get no pids.max or memory.max from v2");
            return String::new();
        }
    }
    // One by one where all at once fails: a controller the host cannot
    // hand down (cpu, with a realtime process about) costs only itself.
    let parent_control = parent.join("cgroup.subtree_control");
    if let Err(err) = write(&parent_control, &request)
        && one_by_one(&parent_control) == 0
    {
        tracing::info!(%err, "cannot enable cgroup controllers for runs");
        return String::new();
    }
    fs::read_to_string(parent.join("cgroup.subtree_control")).unwrap_or_default()
}
