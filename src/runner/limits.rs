//! Resource limits and network isolation, applied in the child between
//! clone and exec (see `spawn`).

use nix::sys::resource::{Resource, getrlimit};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
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

/// Whether runs can be put into an isolated network namespace: true once
/// [`isolated_network`] could make one. `/readyz` reports it; where it is
/// false, `network: false` is advisory only.
pub fn network_isolation_available() -> bool {
    isolated_network().is_some()
}

/// The network namespace runs with `network: false` enter: made once, on
/// first use, and held open by this descriptor for the life of the server.
/// It has only `lo`, down, so nothing in it can reach any address.
///
/// One namespace for all runs instead of one per run: creating and tearing
/// down a namespace is costly for the kernel (the invoke bench times the
/// runner with and without it), while `setns` into an existing one is
/// cheap. What runs share through it
/// is only the abstract unix-socket namespace, which the server's host
/// namespace never sees either.
///
/// Made by a short-lived thread of its own, since `unshare` moves the
/// calling thread; this needs `CAP_SYS_ADMIN` and a kernel and seccomp
/// profile that allow it.
fn isolated_network() -> Option<RawFd> {
    static NAMESPACE: OnceLock<Option<OwnedFd>> = OnceLock::new();
    NAMESPACE
        .get_or_init(|| {
            let made = std::thread::Builder::new()
                .name("skilld-netns".to_owned())
                .spawn(|| -> io::Result<OwnedFd> {
                    // Changes only this thread, which ends right after.
                    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).map_err(io::Error::from)?;
                    Ok(std::fs::File::open("/proc/thread-self/ns/net")?.into())
                })
                .map_err(io::Error::other)
                .and_then(|thread| thread.join().map_err(|_| io::Error::other("the thread panicked"))?);
            match made {
                Ok(fd) => Some(fd),
                Err(err) => {
                    tracing::info!(%err, "no network namespace for isolated runs; network: false is advisory");
                    None
                }
            }
        })
        .as_ref()
        .map(AsRawFd::as_raw_fd)
}

/// What the child does to itself before exec. Plain data, computed in the
/// parent, so that nothing is allocated or looked up in the child.
#[derive(Debug, Clone, Copy)]
pub(super) struct ChildSetup {
    rlimits: [Option<(Resource, u64, u64)>; 4],
    netns: Option<RawFd>,
}

impl ChildSetup {
    pub(super) fn plan(limits: &Limits, isolate_network: bool) -> Self {
        let netns = if isolate_network { isolated_network() } else { None };
        if isolate_network && netns.is_none() {
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
        Self { rlimits, netns }
    }

    /// The limits as setrlimit(2) takes them.
    pub(super) fn rlimits(&self) -> Vec<(libc::__rlimit_resource_t, libc::rlimit)> {
        self.rlimits
            .iter()
            .flatten()
            .map(|&(resource, soft, hard)| {
                (
                    resource as libc::__rlimit_resource_t,
                    libc::rlimit {
                        rlim_cur: soft,
                        rlim_max: hard,
                    },
                )
            })
            .collect()
    }

    /// The namespace to enter, if the run is to be isolated and can be.
    pub(super) fn netns(&self) -> Option<RawFd> {
        self.netns
    }
}

/// Soft and hard limits no higher than the server's hard limit: raising
/// it would need `CAP_SYS_RESOURCE` and make the spawn fail instead.
fn clamp(resource: Resource, soft: u64, hard: u64) -> (Resource, u64, u64) {
    let ceiling = getrlimit(resource).map_or(u64::MAX, |(_, hard)| hard);
    let hard = hard.min(ceiling);
    (resource, soft.min(hard), hard)
}
