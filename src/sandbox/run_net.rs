//! A network namespace of one run's own for a server that is not root,
//! with a listener bound on its loopback: `network: {allow: [...]}` runs
//! reach the world only through that listener (`docs/egress.md`).
//!
//! Such a server may make namespaces only inside the runs' user namespace
//! (`userns.rs`), which a thread of a threaded process may not join; so a
//! short-lived child, cloned sharing the server's descriptor table, joins
//! it, makes the network namespace, brings `lo` up, binds and listens, and
//! leaves both descriptors behind as it exits. The namespace then belongs
//! to the runs' user namespace, which a run joins before it.
//!
//! Why by hand: as in `userns.rs`, what a child does between clone and
//! exit is raw, allocation-free work no crate does.

#![expect(
    unsafe_code,
    reason = "a cloned child's system calls, and the interface ioctls no crate wraps"
)]

use super::userns::run_child;
use std::ffi::{c_int, c_void};
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::ptr;

/// A run's namespace and the listener on its loopback.
#[derive(Debug)]
pub struct RunNetwork {
    pub namespace: OwnedFd,
    /// Non-blocking, listening on `127.0.0.1` and a port the kernel chose.
    pub listener: OwnedFd,
}

#[repr(C)]
struct NetArgs {
    user: c_int,
    address: libc::sockaddr_in,
    net: c_int,
    listener: c_int,
    step: c_int,
    errno: c_int,
}

const STEPS: [&str; 6] = [
    "clone",
    "join the runs' user namespace",
    "make a network namespace",
    "bring lo up",
    "listen on 127.0.0.1",
    "open the namespace",
];

/// Makes a run's network namespace inside the user namespace `user`.
pub fn make_in(user: &OwnedFd) -> io::Result<RunNetwork> {
    use std::os::fd::AsRawFd;
    let mut args = NetArgs {
        user: user.as_raw_fd(),
        address: libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: 0,
            sin_addr: libc::in_addr {
                s_addr: u32::from(std::net::Ipv4Addr::LOCALHOST).to_be(),
            },
            sin_zero: [0; 8],
        },
        net: -1,
        listener: -1,
        step: 0,
        errno: 0,
    };
    // SAFETY: `net_child` makes system calls on `args` alone, which
    // outlives it (the child shares this memory and is waited for).
    let status = unsafe { run_child(net_child, ptr::from_mut(&mut args).cast(), 0, true) }?;
    // SAFETY: the child opened these into the descriptor table this
    // process shares with it, close-on-exec, and nothing else owns them.
    let owned = |fd: c_int| (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) });
    match (status, owned(args.net), owned(args.listener)) {
        (0, Some(namespace), Some(listener)) => Ok(RunNetwork { namespace, listener }),
        _ => Err(io::Error::other(format!(
            "cannot make the run's network namespace ({}): {}",
            STEPS.get(usize::try_from(args.step).unwrap_or(0)).unwrap_or(&"?"),
            io::Error::from_raw_os_error(args.errno)
        ))),
    }
}

extern "C" fn net_child(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the parent's `NetArgs`, alive until this child
    // exits (CLONE_VFORK), written only here meanwhile.
    unsafe {
        let a = &mut *arg.cast::<NetArgs>();
        let fail = |a: &mut NetArgs, step: c_int| {
            a.step = step;
            a.errno = *libc::__errno_location();
            1
        };
        if libc::setns(a.user, libc::CLONE_NEWUSER) != 0 {
            return fail(a, 1);
        }
        if libc::unshare(libc::CLONE_NEWNET) != 0 {
            return fail(a, 2);
        }
        if !loopback_up() {
            return fail(a, 3);
        }
        a.listener = libc::socket(
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            0,
        );
        let len = size_of::<libc::sockaddr_in>() as libc::socklen_t;
        if a.listener < 0
            || libc::bind(a.listener, (&raw const a.address).cast(), len) != 0
            || libc::listen(a.listener, libc::SOMAXCONN) != 0
        {
            return fail(a, 4);
        }
        a.net = libc::open(c"/proc/self/ns/net".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if a.net < 0 {
            return fail(a, 5);
        }
        0
    }
}

/// Sets `lo` up in the calling thread's network namespace, which gives
/// it 127.0.0.1: for a thread of a server that is root, which makes the
/// namespace itself.
pub fn set_loopback_up() -> io::Result<()> {
    // SAFETY: only system calls on this function's own stack.
    if unsafe { loopback_up() } {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sets `lo` up in the calling thread's namespace.
///
/// # Safety
/// Only system calls on its own stack: fit for the cloned child.
unsafe fn loopback_up() -> bool {
    // SAFETY: a zeroed ifreq is valid; the name is NUL-terminated within
    // IFNAMSIZ; the ioctls read and write only that struct.
    unsafe {
        let socket = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if socket < 0 {
            return false;
        }
        let mut req: libc::ifreq = std::mem::zeroed();
        for (slot, byte) in req.ifr_name.iter_mut().zip(b"lo\0") {
            *slot = *byte as libc::c_char;
        }
        let mut up = libc::ioctl(socket, libc::SIOCGIFFLAGS, &raw mut req) == 0;
        if up {
            req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            up = libc::ioctl(socket, libc::SIOCSIFFLAGS, &raw const req) == 0;
        }
        // The ioctl's errno, not close's, is the one to report.
        let errno = *libc::__errno_location();
        libc::close(socket);
        *libc::__errno_location() = errno;
        up
    }
}
