//! The seccomp filters of confined runs. Every run gets two: one refusing
//! what would let a tool leave the run (typing into a terminal, a user
//! namespace, io_uring), one answering `clone3` as unknown. Runs with
//! `network: false` get the unix-socket gate's one filter (`unix_gate`),
//! or where the host cannot supervise connects, two of these: no socket
//! but a unix one, whatever namespace the process manages to be in; and no
//! connectionless unix socket, nor any `connect` at all.
//!
//! Several filters rather than one because each answers with its own errno,
//! the one a program expects: `EPERM` for what is forbidden, `ENOSYS` for
//! `clone3` (so glibc falls back to `clone`, whose flags a filter can
//! read), `EAFNOSUPPORT` for a family, as a kernel without it would say,
//! `EACCES` for a socket the run may not have or reach. Not more: the
//! kernel compiles each filter of each run anew, 50 to 200 µs apiece here.

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
    /// Added for `network: false` where connects are not supervised (the
    /// gate's own filter does the same and decides connects).
    pub no_network: Vec<Arc<BpfProgram>>,
}

impl Filters {
    /// The filters of one run, in the order the child installs them.
    /// `gated`: the gate's filter, installed after these, holds
    /// `network: false`'s rules.
    pub(super) fn for_run(&self, network: bool, gated: bool) -> Vec<Arc<BpfProgram>> {
        let mut out = self.every_run.clone();
        if !network && !gated {
            out.extend(self.no_network.iter().cloned());
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
        no_network: vec![Arc::new(unix_only()?), Arc::new(no_unix_reach()?)],
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
/// Unix sockets stay for pipes between a tool's own processes
/// (`socketpair`); [`no_unix_reach`] keeps them from any listener.
fn unix_only() -> Result<BpfProgram, BackendError> {
    let other = || rule(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, libc::AF_UNIX);
    let rules = [
        (libc::SYS_socket, vec![other()?]),
        (libc::SYS_socketpair, vec![other()?]),
    ];
    compile(rules.into_iter().collect(), libc::EAFNOSUPPORT)
}

/// Connectionless unix sockets (`SOCK_DGRAM`, and `SOCK_RAW`, which the
/// kernel makes a datagram one): `sendmsg` reaches any named datagram
/// listener through its `msg_name`, connected or not, even from a
/// `socketpair`, and that address lies behind a pointer no filter reads.
/// Stream and seqpacket sockets ignore or refuse `msg_name`, so with
/// these refused, `connect` is the one way to a listener: every `connect`
/// fails too, where no gate decides them.
fn no_unix_reach() -> Result<BpfProgram, BackendError> {
    let unix_of_type = |kind: i32| -> Result<SeccompRule, BackendError> {
        SeccompRule::new(vec![
            SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, libc::AF_UNIX as u64)?,
            // The type's low four bits; the rest are SOCK_CLOEXEC and
            // SOCK_NONBLOCK.
            SeccompCondition::new(
                1,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::MaskedEq(0xf),
                kind.unsigned_abs().into(),
            )?,
        ])
    };
    let rules = || -> Result<Vec<SeccompRule>, BackendError> {
        Ok(vec![
            unix_of_type(libc::SOCK_DGRAM)?,
            unix_of_type(libc::SOCK_RAW)?,
        ])
    };
    let rules = [
        (libc::SYS_socket, rules()?),
        (libc::SYS_socketpair, rules()?),
        (libc::SYS_connect, Vec::new()),
    ];
    compile(rules.into_iter().collect(), libc::EACCES)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `network: false` adds its two filters only where no gate holds
    /// its rules.
    #[test]
    fn network_false_gets_the_fallback_only_without_the_gate() {
        let filters = compile_all().unwrap();
        let every = filters.every_run.len();
        assert_eq!(filters.for_run(true, false).len(), every);
        assert_eq!(filters.for_run(true, true).len(), every);
        assert_eq!(filters.for_run(false, true).len(), every);
        assert_eq!(filters.for_run(false, false).len(), every + 2);
    }
}
