//! Resource limits and network isolation, applied in the child between fork
//! and exec — the only reason the runner ever uses a `pre_exec` hook.

use nix::sys::resource::{Resource, getrlimit, setrlimit};
use std::io;
use std::sync::OnceLock;

/// Resource limits for one run; `None` leaves the server's own limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    /// Address space (`RLIMIT_AS`): an allocation past it fails in the child
    /// instead of pushing the host into swap or the OOM killer.
    pub memory_bytes: Option<u64>,
    /// CPU time (`RLIMIT_CPU`): SIGXCPU at the limit, SIGKILL a second later.
    pub cpu_secs: Option<u64>,
    /// Open descriptors (`RLIMIT_NOFILE`).
    pub open_files: Option<u64>,
    /// Largest file the child may write (`RLIMIT_FSIZE`): past it, SIGXFSZ.
    pub file_size_bytes: Option<u64>,
}

/// Whether this process can put a child into a fresh network namespace
/// (`unshare(CLONE_NEWNET)`, which needs `CAP_SYS_ADMIN` and a kernel and
/// seccomp profile that allow it). Probed once, in a forked child, so the
/// server's own namespaces are never touched; `/readyz` reports it, and
/// where it is false `network: false` is advisory only.
pub fn network_isolation_available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(probe_network_isolation)
}

fn probe_network_isolation() -> bool {
    use nix::sys::wait::{WaitStatus, waitpid};
    use nix::unistd::{ForkResult, fork};

    // SAFETY: the child only calls unshare(2) and _exit(2), both
    // async-signal-safe, and touches no memory the parent's other threads
    // could have left locked.
    match unsafe { fork() } {
        Ok(ForkResult::Child) => {
            // SAFETY: plain system calls, no allocation; _exit skips atexit
            // handlers and stdio flushing that belong to the parent.
            unsafe {
                let ok = libc::unshare(libc::CLONE_NEWNET) == 0;
                libc::_exit(if ok { 0 } else { 1 })
            }
        }
        Ok(ForkResult::Parent { child }) => loop {
            match waitpid(child, None) {
                Ok(WaitStatus::Exited(_, 0)) => break true,
                Ok(_) => break false,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(err) => {
                    tracing::warn!(%err, "could not wait for the network isolation probe");
                    break false;
                }
            }
        },
        Err(err) => {
            tracing::warn!(%err, "could not fork the network isolation probe");
            false
        }
    }
}

/// What the child does to itself before exec. Plain data, computed in the
/// parent, so that nothing is allocated or looked up after fork.
#[derive(Debug, Clone, Copy)]
pub(super) struct ChildSetup {
    rlimits: [Option<(Resource, u64, u64)>; 4],
    new_network: bool,
}

impl ChildSetup {
    /// `None` when there is nothing to do, so the caller keeps std's
    /// posix_spawn path (no hook, nothing run after fork).
    pub(super) fn plan(limits: &Limits, isolate_network: bool) -> Option<Self> {
        let new_network = isolate_network && network_isolation_available();
        if isolate_network && !new_network {
            tracing::debug!("network isolation unavailable; running the child with the host network");
        }
        let rlimits = [
            limits.memory_bytes.map(|v| clamp(Resource::RLIMIT_AS, v, v)),
            // The hard limit a second later turns an ignored SIGXCPU into SIGKILL.
            limits
                .cpu_secs
                .map(|v| clamp(Resource::RLIMIT_CPU, v, v.saturating_add(1))),
            limits.open_files.map(|v| clamp(Resource::RLIMIT_NOFILE, v, v)),
            limits
                .file_size_bytes
                .map(|v| clamp(Resource::RLIMIT_FSIZE, v, v)),
        ];
        (new_network || rlimits.iter().any(Option::is_some)).then_some(Self { rlimits, new_network })
    }

    /// Runs in the child between fork and exec.
    ///
    /// Only async-signal-safe system calls; no allocation (errors are raw
    /// OS errors, which `io::Error` stores without allocating).
    pub(super) fn apply(&self) -> io::Result<()> {
        for (resource, soft, hard) in self.rlimits.iter().flatten() {
            setrlimit(*resource, *soft, *hard).map_err(|e| io::Error::from_raw_os_error(e as i32))?;
        }
        if self.new_network {
            // SAFETY: a bare system call on this (single-threaded) child.
            if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

/// Soft and hard limits no higher than the server's hard limit: raising
/// it would need `CAP_SYS_RESOURCE` and make the spawn fail instead.
fn clamp(resource: Resource, soft: u64, hard: u64) -> (Resource, u64, u64) {
    let ceiling = getrlimit(resource).map_or(u64::MAX, |(_, hard)| hard);
    let hard = hard.min(ceiling);
    (resource, soft.min(hard), hard)
}
