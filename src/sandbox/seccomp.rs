//! The seccomp filter of runs with `network: false`: no new IPv4 or IPv6
//! socket, whatever namespace the process manages to be in.

use seccompiler::{
    BackendError, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

/// The compiled filter, made once; `None` on an architecture seccompiler
/// does not know (then the layer is reported as not enforced).
pub(super) fn no_inet() -> Option<Arc<BpfProgram>> {
    static PROGRAM: OnceLock<Option<Arc<BpfProgram>>> = OnceLock::new();
    PROGRAM
        .get_or_init(|| match compile() {
            Ok(program) => Some(Arc::new(program)),
            Err(err) => {
                tracing::info!(%err, "no seccomp filter for isolated runs");
                None
            }
        })
        .clone()
}

fn compile() -> Result<BpfProgram, BackendError> {
    let family = |af: i32| -> Result<SeccompRule, BackendError> {
        let af = u64::try_from(af).unwrap_or_default();
        SeccompRule::new(vec![SeccompCondition::new(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Eq,
            af,
        )?])
    };
    let rules: BTreeMap<i64, Vec<SeccompRule>> = [
        (
            libc::SYS_socket,
            vec![family(libc::AF_INET)?, family(libc::AF_INET6)?],
        ),
        // io_uring can open sockets (IORING_OP_SOCKET) without the socket
        // system call this filter sees; an empty rule list denies it whole.
        (libc::SYS_io_uring_setup, Vec::new()),
    ]
    .into_iter()
    .collect();
    let arch = std::env::consts::ARCH.try_into()?;
    // A mismatch allows, a match fails with EAFNOSUPPORT, the answer of a
    // kernel without IP: programs report it as "address family not
    // supported". seccompiler checks the architecture first and kills a
    // process that makes a system call through another ABI (i386's
    // `int 0x80` on x86_64), which would otherwise slip past the numbers.
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(u32::try_from(libc::EAFNOSUPPORT).unwrap_or(97)),
        arch,
    )?;
    filter.try_into()
}
