//! `network: false` reaches no unix socket of the host (`docs/design.md`
//! §9, "unix sockets"): the gate on `connect()`.
//!
//! Why a gate: Landlock (before ABI 8) governs opening files, not
//! connecting to a socket by its path, and no list of hidden directories
//! is complete (the runs' mount namespace hides `/tmp` and `/run`; a
//! Docker socket in a home directory stays in sight). So the connection
//! itself is decided, by the first mechanism this host has ([`choose`]):
//! the server deciding each connect (seccomp user notification), else
//! refusing them all (plain seccomp).

mod bpf;
mod kernel;
mod resolve;
mod supervisor;

pub(crate) use bpf::Program;
pub(crate) use kernel::{Handoff, Raw as HandoffRaw, install_and_hand_off};

use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use supervisor::Allowed;

/// How `network: false` runs are kept from the host's unix sockets here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mechanism {
    /// The server decides each `connect` (seccomp user notification):
    /// only the run's own named sockets. The filter's flags.
    SeccompNotify(u32),
    /// Every `connect` fails with `EACCES` (plain seccomp): the fallback.
    Refused,
    /// No seccomp filter on this architecture.
    Unavailable,
}

impl Mechanism {
    /// Its name in `/readyz`.
    pub(super) fn name(self) -> &'static str {
        match self {
            Self::SeccompNotify(_) => "seccomp_notify",
            Self::Refused => "refused",
            Self::Unavailable => "unavailable",
        }
    }
}

/// The gate's program, made once for each kind of run: `ip` for one
/// whose network is its egress namespace.
fn program(ip: bool) -> Option<&'static Arc<Program>> {
    static UNIX: OnceLock<Option<Arc<Program>>> = OnceLock::new();
    static IP: OnceLock<Option<Arc<Program>>> = OnceLock::new();
    let made = if ip { &IP } else { &UNIX };
    made.get_or_init(|| bpf::gate(ip).map(Arc::new)).as_ref()
}

/// The mechanism of this host, probed once at start. `seccomp`: whether
/// the plain filters exist here.
///
/// Landlock's `LANDLOCK_ACCESS_FS_RESOLVE_UNIX` (ABI 8) would come first:
/// the kernel itself refusing a connect to a socket outside the granted
/// directories, with no round trip through the server and no caveat on
/// peer credentials. Neither this kernel generation (ABI 7) nor the
/// `landlock` crate (0.4.8) has it; when they do, it is probed here, as a
/// variant of its own, and the ruleset grants it on the run's own
/// directories.
pub(super) fn choose(seccomp: bool) -> Mechanism {
    if !seccomp {
        return Mechanism::Unavailable;
    }
    let Some(program) = program(false) else {
        return Mechanism::Refused;
    };
    match kernel::probe(program).and_then(|flags| can_take_sockets().map(|()| flags)) {
        Ok(flags) => Mechanism::SeccompNotify(flags),
        Err(err) => {
            tracing::info!(%err, "no seccomp user notification: network: false runs cannot connect to unix sockets");
            Mechanism::Refused
        }
    }
}

/// Whether the supervisor's calls exist (`pidfd_getfd`, Linux 5.6; with
/// it `openat2`): tried on the server's own process.
fn can_take_sockets() -> std::io::Result<()> {
    use rustix::process::{PidfdFlags, PidfdGetfdFlags, getpid, pidfd_getfd, pidfd_open};
    use std::os::fd::AsRawFd;
    let pidfd = pidfd_open(getpid(), PidfdFlags::empty())?;
    pidfd_getfd(&pidfd, pidfd.as_raw_fd(), PidfdGetfdFlags::empty())?;
    Ok(())
}

/// What a gate is made for: one run's scratch directory, whether it has
/// its own `/tmp`, the user it runs as, and whether its network is its
/// egress namespace.
pub(super) struct GatedRun<'a> {
    pub scratch: &'a Path,
    pub private_tmp: bool,
    pub uid: u32,
    pub ip: bool,
}

/// One run's gate: the filter its child installs last, and what the
/// server lets its `connect` reach.
#[derive(Debug)]
pub struct UnixGate {
    program: Arc<Program>,
    flags: u32,
    allowed: Arc<Allowed>,
}

impl UnixGate {
    /// The gate of a run whose scratch directory is `scratch`, with its
    /// own `/tmp` or not, running as `uid`; `None` unless the host gates
    /// by user notification. `ip`: the run's network is its egress
    /// namespace, where its IP sockets may connect.
    pub(super) fn new(mechanism: Mechanism, run: &GatedRun) -> Option<Self> {
        let Mechanism::SeccompNotify(flags) = mechanism else {
            return None;
        };
        let scratch = std::fs::metadata(run.scratch).ok().map(|m| (m.dev(), m.ino()));
        Some(Self {
            program: program(run.ip)?.clone(),
            flags,
            allowed: Arc::new(Allowed {
                scratch,
                private_tmp: run.private_tmp,
                uid: run.uid,
                ip: run.ip,
            }),
        })
    }

    /// Prepares the hand-off of the child's listener to the server.
    pub(crate) fn handoff(&self) -> std::io::Result<Handoff> {
        Handoff::new(&self.program, self.flags)
    }

    /// Decides the run's connects until its last process has gone.
    pub fn supervise(&self, listener: OwnedFd) {
        supervisor::start(listener, self.allowed.clone());
    }
}
