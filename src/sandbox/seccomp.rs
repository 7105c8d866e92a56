//! The seccomp filters of confined runs. Every run gets two: one refusing
//! what would let a tool leave the run (typing into a terminal, a user
//! namespace, io_uring), one answering `clone3` as unknown. Runs with
//! `network: false` get a third: no socket but a unix one, whatever
//! namespace the process manages to be in.
//!
//! Three filters rather than one because each answers with its own errno,
//! the one a program expects: `EPERM` for what is forbidden, `ENOSYS` for
//! `clone3` (so glibc falls back to `clone`, whose flags a filter can
//! read), `EAFNOSUPPORT` for a family, as a kernel without it would say.

use seccompiler::{
    BackendError, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

/// The compiled filters, made once.
#[derive(Debug, Default)]
pub(super) struct Filters {
    /// What every confined run installs.
    pub every_run: Vec<Arc<BpfProgram>>,
    /// Added for `network: false`.
    pub no_network: Option<Arc<BpfProgram>>,
}

impl Filters {
    /// The filters of one run, in the order the child installs them.
    pub(super) fn for_run(&self, network: bool) -> Vec<Arc<BpfProgram>> {
        let mut out = self.every_run.clone();
        if !network {
            out.extend(self.no_network.clone());
        }
        out
    }

    /// Whether this architecture got its filters.
    pub(super) fn available(&self) -> bool {
        !self.every_run.is_empty()
    }
}

/// The filters, compiled on first use; empty on an architecture seccompiler
/// does not know (then the layer is reported as not enforced).
pub(super) fn filters() -> &'static Filters {
    static FILTERS: OnceLock<Filters> = OnceLock::new();
    FILTERS.get_or_init(|| match compile_all() {
        Ok(filters) => filters,
        Err(err) => {
            tracing::info!(%err, "no seccomp filters for confined runs");
            Filters::default()
        }
    })
}

fn compile_all() -> Result<Filters, BackendError> {
    Ok(Filters {
        every_run: vec![Arc::new(escapes()?), Arc::new(no_clone3()?)],
        no_network: Some(Arc::new(unix_only()?)),
    })
}

/// `TIOCSTI` and `TIOCLINUX` type into (or read) a terminal the tool may
/// still hold a descriptor of; a user namespace hands an unprivileged
/// process every capability over nf_tables and the rest of the namespaced
/// kernel surface; io_uring opens files and sockets without the system
/// calls the other filters and Landlock see.
fn escapes() -> Result<BpfProgram, BackendError> {
    let new_user = u64::try_from(libc::CLONE_NEWUSER).unwrap_or_default();
    let rules = [
        (
            libc::SYS_ioctl,
            vec![
                // The kernel reads the request as an unsigned int: compare
                // the low 32 bits, so high bits set cannot slip past.
                rule(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, libc::TIOCSTI)?,
                rule(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, libc::TIOCLINUX)?,
            ],
        ),
        (libc::SYS_unshare, vec![has_flag(new_user)?]),
        (libc::SYS_clone, vec![has_flag(new_user)?]),
        (libc::SYS_io_uring_setup, Vec::new()),
        (libc::SYS_io_uring_enter, Vec::new()),
        (libc::SYS_io_uring_register, Vec::new()),
    ];
    compile(rules.into_iter().collect(), libc::EPERM)
}

/// `clone3` takes its flags behind a pointer no filter can read, so it is
/// answered as unknown, and glibc retries with `clone`.
fn no_clone3() -> Result<BpfProgram, BackendError> {
    compile(
        [(libc::SYS_clone3, Vec::new())].into_iter().collect(),
        libc::ENOSYS,
    )
}

/// Sockets of any family but `AF_UNIX` (IP, netlink, vsock, packet, …).
/// Unix sockets stay for pipes between a tool's own processes; the host's
/// are out of sight in the run's mount namespace, and Landlock scopes
/// the abstract ones to the run.
fn unix_only() -> Result<BpfProgram, BackendError> {
    let other = || rule(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, libc::AF_UNIX);
    let rules = [
        (libc::SYS_socket, vec![other()?]),
        (libc::SYS_socketpair, vec![other()?]),
    ];
    compile(rules.into_iter().collect(), libc::EAFNOSUPPORT)
}

fn rule(
    arg: u8,
    len: SeccompCmpArgLen,
    op: SeccompCmpOp,
    value: impl TryInto<u64>,
) -> Result<SeccompRule, BackendError> {
    let value = value.try_into().unwrap_or_default();
    SeccompRule::new(vec![SeccompCondition::new(arg, len, op, value)?])
}

/// The first argument (flags) has every bit of `flag` set.
fn has_flag(flag: u64) -> Result<SeccompRule, BackendError> {
    rule(0, SeccompCmpArgLen::Qword, SeccompCmpOp::MaskedEq(flag), flag)
}

/// A filter that allows everything but `rules`, which fail with `errno`.
/// seccompiler checks the architecture first and kills a process that
/// makes a system call through another ABI (i386's `int 0x80` on x86_64),
/// which would otherwise slip past the numbers.
fn compile(rules: BTreeMap<i64, Vec<SeccompRule>>, errno: i32) -> Result<BpfProgram, BackendError> {
    let arch = std::env::consts::ARCH.try_into()?;
    let errno = u32::try_from(errno).unwrap_or(1);
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(errno), arch)?;
    filter.try_into()
}
