//! The supervisor of one gated run: it takes each `connect` the kernel
//! holds, decides it, and performs the allowed ones itself, on the tool's
//! own socket (a duplicate got through a pidfd), through the socket file it
//! checked and pinned. It never lets the kernel continue the call: the
//! tool's memory, where the address lies, can change between the check
//! and the kernel's second read of it.
//!
//! A task per run waits on the listener; each call is settled on the
//! blocking pool (a connect can wait for a listener's backlog), at most
//! [`IN_FLIGHT`] at once per run, the rest held by the kernel meanwhile.
//! The task ends when the listener hangs up: every process of the run has
//! gone.

use super::kernel::{self, Notification};
use super::resolve::{self, Id, Missed, Own, View};
use rustix::io::Errno;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use tokio::io::unix::AsyncFd;

/// Calls of one run settled at once. A connect blocks only on a listener
/// of the run itself (no other is allowed), which goes when the run ends;
/// this bounds the blocking pool's threads one run can hold until then.
const IN_FLIGHT: usize = 4;

/// `sizeof(struct sockaddr_storage)`: the longest address `connect` takes.
const ADDRESS_MAX: usize = 128;

/// What one run's sockets may be.
#[derive(Debug)]
pub(super) struct Allowed {
    /// Its scratch directory (`TMPDIR`, and `HOME` under another identity).
    pub scratch: Option<Id>,
    /// It has a `/tmp` of its own.
    pub private_tmp: bool,
    /// The user its processes run as.
    pub uid: u32,
    /// Its IP sockets may connect: its network namespace is its egress
    /// one, whose only way out is the proxy.
    pub ip: bool,
}

/// Supervises the calls behind `listener` until the run has ended. Needs
/// a Tokio runtime; without one the listener is closed, and the run's
/// connects fail (`ENOSYS`).
pub(super) fn start(listener: OwnedFd, allowed: Arc<Allowed>) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::warn!("no runtime to supervise a run's unix-socket connects; they fail");
        return;
    };
    let _entered = runtime.enter();
    let listener = match kernel::watch(listener) {
        Ok(listener) => Arc::new(listener),
        Err(err) => {
            tracing::warn!(%err, "cannot watch a run's unix-socket connects; they fail");
            return;
        }
    };
    runtime.spawn(serve(listener, allowed));
}

async fn serve(listener: Arc<AsyncFd<OwnedFd>>, allowed: Arc<Allowed>) {
    let slots = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
    while let Ok(slot) = slots.clone().acquire_owned().await {
        let Some(call) = next(&listener).await else {
            return;
        };
        let (listener, allowed) = (listener.clone(), allowed.clone());
        tokio::task::spawn_blocking(move || {
            let _slot = slot;
            settle(listener.get_ref().as_fd(), &call, &allowed);
        });
    }
}

/// The next held call, or `None` once the run has gone.
async fn next(listener: &AsyncFd<OwnedFd>) -> Option<Notification> {
    loop {
        let mut ready = listener.readable().await.ok()?;
        let (pending, gone) = poll_now(listener.get_ref().as_fd());
        if pending {
            match kernel::receive(listener.get_ref().as_fd()) {
                Ok(call) => return Some(call),
                // Its caller was killed meanwhile.
                Err(err) if matches!(err.raw_os_error(), Some(libc::ENOENT | libc::EINTR)) => continue,
                Err(err) => {
                    tracing::warn!(%err, "cannot receive a run's held connect");
                    return None;
                }
            }
        }
        if gone {
            return None;
        }
        ready.clear_ready();
    }
}

/// Whether a call is pending, and whether the run has gone (hang-up).
/// The receive ioctl would block when none is: this asks first.
fn poll_now(listener: BorrowedFd) -> (bool, bool) {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let zero = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    loop {
        let mut fds = [PollFd::new(&listener, PollFlags::IN)];
        match poll(&mut fds, Some(&zero)) {
            Ok(_) => {
                let got = fds[0].revents();
                let gone = got.intersects(PollFlags::HUP | PollFlags::ERR | PollFlags::NVAL);
                return (got.contains(PollFlags::IN), gone);
            }
            Err(Errno::INTR) => {}
            Err(_) => return (false, true),
        }
    }
}

/// Decides and answers one call.
fn settle(listener: BorrowedFd, call: &Notification, allowed: &Allowed) {
    let errno = match connect_for(listener, call, allowed) {
        Ok(()) => 0,
        Err(errno) => errno.raw_os_error(),
    };
    if let Err(err) = kernel::answer(listener, call.id, errno)
        && err.raw_os_error() != Some(libc::ENOENT)
    {
        tracing::warn!(%err, "cannot answer a run's held connect");
    }
}

/// An address as `connect` got it.
#[derive(Debug, PartialEq, Eq)]
enum Address {
    /// A path in the file system.
    Named(Vec<u8>),
    /// A name in the abstract namespace.
    Abstract,
    /// Not a unix address a connect takes (`EINVAL`).
    Invalid,
}

/// The connect the tool asked for, made for it when its target is one of
/// the run's own sockets, or any IP address in an egress run (its
/// namespace holds only the proxy); else the errno it fails with.
fn connect_for(listener: BorrowedFd, call: &Notification, allowed: &Allowed) -> Result<(), Errno> {
    let tid = call.tid;
    // The kernel reads `fd` and `addrlen` as ints.
    let fd = call.args[0] as u32 as i32;
    let (bytes, len) = read_address(tid, call.args[1], call.args[2] as u32 as i32)?;
    let address = parse(&bytes[..len]);
    let pidfd = open_pidfd(tid)?;
    let view = match &address {
        Address::Named(path) => Some(view(tid, !path.starts_with(b"/"))?),
        _ => None,
    };
    // All of the above went by the thread's id: it still names the caller.
    if !kernel::still_waiting(listener, call.id) {
        return Err(Errno::NOENT);
    }
    let socket = rustix::process::pidfd_getfd(&pidfd, fd, rustix::process::PidfdGetfdFlags::empty())
        .map_err(no_access_as_eacces)?;
    let domain = rustix::net::sockopt::socket_domain(&socket)?;
    if allowed.ip
        && [
            rustix::net::AddressFamily::INET,
            rustix::net::AddressFamily::INET6,
        ]
        .contains(&domain)
    {
        // The socket lives in the run's namespace, so it goes where the
        // run's own connect would, from the address copied once.
        return connect_ip(&socket, &bytes[..len]);
    }
    if domain != rustix::net::AddressFamily::UNIX {
        // No other family opens in these runs.
        return Err(Errno::ACCESS);
    }
    match (address, view) {
        (Address::Named(path), Some(view)) => {
            let pinned = own_socket(&view, &path, allowed, tid)?;
            connect_through(&socket, &pinned)
        }
        (Address::Abstract, _) => {
            refused(tid, b"@", "an abstract name");
            Err(Errno::ACCESS)
        }
        _ => Err(Errno::INVAL),
    }
}

/// Connects an IP socket of an egress run to the address it gave.
fn connect_ip(socket: &OwnedFd, bytes: &[u8]) -> Result<(), Errno> {
    let address = ip_address(bytes).ok_or(Errno::INVAL)?;
    loop {
        match rustix::net::connect(socket, &address) {
            Err(Errno::INTR) => {}
            done => return done,
        }
    }
}

/// An IPv4 or IPv6 address as `connect` takes it, when `bytes` hold one.
fn ip_address(bytes: &[u8]) -> Option<std::net::SocketAddr> {
    use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4, SocketAddrV6};
    let family = u16::from_ne_bytes([*bytes.first()?, *bytes.get(1)?]);
    let port = u16::from_be_bytes([*bytes.get(2)?, *bytes.get(3)?]);
    if i32::from(family) == libc::AF_INET && bytes.len() >= size_of::<libc::sockaddr_in>() {
        let ip: [u8; 4] = bytes.get(4..8)?.try_into().ok()?;
        return Some(SocketAddrV4::new(Ipv4Addr::from(ip), port).into());
    }
    if i32::from(family) == libc::AF_INET6 && bytes.len() >= size_of::<libc::sockaddr_in6>() {
        let flow = u32::from_ne_bytes(bytes.get(4..8)?.try_into().ok()?);
        let ip: [u8; 16] = bytes.get(8..24)?.try_into().ok()?;
        let scope = u32::from_ne_bytes(bytes.get(24..28)?.try_into().ok()?);
        return Some(SocketAddrV6::new(Ipv6Addr::from(ip), port, flow, scope).into());
    }
    None
}

/// The pinned socket file when `path` names one of the run's own.
fn own_socket(view: &View, path: &[u8], allowed: &Allowed, tid: u32) -> Result<OwnedFd, Errno> {
    let mut dirs: Vec<Id> = allowed.scratch.into_iter().collect();
    if allowed.private_tmp {
        dirs.extend(resolve::private_tmp(view.root.as_fd()).ok());
    }
    let own = Own {
        dirs: &dirs,
        uid: allowed.uid,
    };
    match resolve::own_socket(view, path, own) {
        Ok(pinned) => Ok(pinned),
        Err(Missed::Errno(errno)) => Err(errno),
        Err(Missed::Refused(why)) => {
            refused(tid, path, why.why());
            Err(Errno::ACCESS)
        }
    }
}

fn refused(tid: u32, path: &[u8], why: &str) {
    let path = crate::logline::escape(&String::from_utf8_lossy(path), 200);
    tracing::info!(tid, %path, why, "refused a run's connect to a unix socket");
}

/// Connects the tool's socket to the pinned file, by a path that leads
/// to it and nowhere else.
fn connect_through(socket: &OwnedFd, pinned: &OwnedFd) -> Result<(), Errno> {
    let path = format!("/proc/self/fd/{}", pinned.as_raw_fd());
    let address = rustix::net::SocketAddrUnix::new(path.as_str())?;
    loop {
        match rustix::net::connect(socket, &address) {
            Err(Errno::INTR) => {}
            done => return done,
        }
    }
}

/// The address the tool passed, copied out of its memory once: the
/// bytes and how many of them it gave.
fn read_address(tid: u32, at: u64, len: i32) -> Result<([u8; ADDRESS_MAX], usize), Errno> {
    use nix::sys::uio::{RemoteIoVec, process_vm_readv};
    let len = usize::try_from(len)
        .ok()
        .filter(|&len| len <= ADDRESS_MAX)
        .ok_or(Errno::INVAL)?;
    let mut buf = [0u8; ADDRESS_MAX];
    if len > 0 {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(tid).map_err(|_| Errno::SRCH)?);
        let remote = RemoteIoVec {
            base: usize::try_from(at).map_err(|_| Errno::FAULT)?,
            len,
        };
        let read = process_vm_readv(pid, &mut [std::io::IoSliceMut::new(&mut buf[..len])], &[remote])
            .map_err(|e| no_access_as_eacces(Errno::from_raw_os_error(e as i32)))?;
        if read != len {
            return Err(Errno::FAULT);
        }
    }
    Ok((buf, len))
}

/// What the kernel would make of `bytes` as a unix address to connect to.
fn parse(bytes: &[u8]) -> Address {
    const PATH_AT: usize = 2;
    let family = bytes.get(..PATH_AT).map(|f| u16::from_ne_bytes([f[0], f[1]]));
    if bytes.len() <= PATH_AT
        || bytes.len() > size_of::<libc::sockaddr_un>()
        || family != Some(libc::AF_UNIX as u16)
    {
        return Address::Invalid;
    }
    let path = &bytes[PATH_AT..];
    if path[0] == 0 {
        return Address::Abstract;
    }
    let end = path.iter().position(|&b| b == 0).unwrap_or(path.len());
    Address::Named(path[..end].to_vec())
}

/// A pidfd of the calling thread (Linux 6.9), or else of its process:
/// the socket is taken from its descriptor table.
fn open_pidfd(tid: u32) -> Result<OwnedFd, Errno> {
    use rustix::process::{Pid, PidfdFlags, pidfd_open};
    let pid = |raw: u32| i32::try_from(raw).ok().and_then(Pid::from_raw).ok_or(Errno::SRCH);
    let thread = PidfdFlags::from_bits_retain(libc::O_EXCL.unsigned_abs());
    match pidfd_open(pid(tid)?, thread) {
        Err(Errno::INVAL) => {}
        opened => return opened,
    }
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).map_err(|_| Errno::SRCH)?;
    let tgid = status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or(Errno::SRCH)?;
    pidfd_open(pid(tgid)?, PidfdFlags::empty())
}

/// The calling thread's root, and its working directory when the path
/// is relative to it.
fn view(tid: u32, relative: bool) -> Result<View, Errno> {
    use rustix::fs::{Mode, OFlags, open};
    let dir = |what: &str| {
        open(
            format!("/proc/{tid}/{what}"),
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(no_access_as_eacces)
    };
    Ok(View {
        root: dir("root")?,
        cwd: if relative { Some(dir("cwd")?) } else { None },
    })
}

/// The server lacking ptrace access to the run (`EPERM`) is the run's
/// `EACCES`: it was not allowed.
fn no_access_as_eacces(errno: Errno) -> Errno {
    if errno == Errno::PERM {
        Errno::ACCESS
    } else {
        errno
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(family: u16, path: &[u8]) -> Vec<u8> {
        let mut bytes = family.to_ne_bytes().to_vec();
        bytes.extend_from_slice(path);
        bytes
    }

    #[test]
    fn reads_addresses_as_the_kernel_does() {
        let unix = libc::AF_UNIX as u16;
        assert_eq!(parse(&address(unix, b"/a/s\0")), Address::Named(b"/a/s".to_vec()));
        assert_eq!(parse(&address(unix, b"rel")), Address::Named(b"rel".to_vec()));
        assert_eq!(parse(&address(unix, b"/a\0/b")), Address::Named(b"/a".to_vec()));
        assert_eq!(parse(&address(unix, b"\0name")), Address::Abstract);
        assert_eq!(parse(&address(unix, b"")), Address::Invalid);
        assert_eq!(parse(&address(libc::AF_INET as u16, b"/a")), Address::Invalid);
        assert_eq!(parse(&address(unix, &[b'a'; 109])), Address::Invalid);
        assert_eq!(
            parse(&address(unix, &[b'a'; 108])),
            Address::Named(vec![b'a'; 108])
        );
        assert_eq!(parse(b"\x01"), Address::Invalid);
    }

    #[test]
    fn reads_ip_addresses_as_the_kernel_does() {
        // `struct sockaddr_in`: family, port (network order), address, zeros.
        let mut v4 = address(libc::AF_INET as u16, &8080u16.to_be_bytes());
        v4.extend_from_slice(&[127, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(ip_address(&v4), Some("127.0.0.1:8080".parse().unwrap()));
        // `struct sockaddr_in6`: family, port, flow info, address, scope.
        let mut v6 = address(libc::AF_INET6 as u16, &443u16.to_be_bytes());
        v6.extend_from_slice(&0u32.to_ne_bytes());
        v6.extend_from_slice(&std::net::Ipv6Addr::LOCALHOST.octets());
        v6.extend_from_slice(&0u32.to_ne_bytes());
        assert_eq!(ip_address(&v6), Some("[::1]:443".parse().unwrap()));
        assert_eq!(ip_address(&v6[..10]), None);
        assert_eq!(ip_address(&v4[..8]), None);
        assert_eq!(ip_address(&address(libc::AF_UNIX as u16, b"/a/s\0")), None);
    }
}
