//! The kernel's side of the gate, where no safe wrapper exists: the seccomp
//! user-notification ioctls, installing a filter that returns a listener,
//! and handing that listener out of the cloned child over a socket pair.

#![expect(
    unsafe_code,
    reason = "seccomp(2) with a listener, its ioctls, and sendmsg in the cloned child"
)]

use super::bpf::Program;
use std::ffi::{c_int, c_uint, c_void};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr;

/// One connect the kernel holds for the supervisor.
#[derive(Debug, Clone, Copy)]
pub(super) struct Notification {
    pub id: u64,
    /// The caller's thread id, in the server's pid namespace.
    pub tid: u32,
    pub args: [u64; 6],
}

/// The next held call. Blocks while none is pending: call it only once
/// `poll` said one is (an `ENOENT` then means its caller went away).
pub(super) fn receive(listener: BorrowedFd) -> io::Result<Notification> {
    // SAFETY: all-zero is a valid seccomp_notif, and the kernel insists
    // on a zeroed one.
    let mut notif: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: the ioctl writes one seccomp_notif into `notif`.
    let rc = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_RECV,
            &raw mut notif,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Notification {
        id: notif.id,
        tid: notif.pid,
        args: notif.data.args,
    })
}

/// Whether the call `id` still waits: its caller is alive and the same,
/// so what was read through its pid before this was read from it.
pub(super) fn still_waiting(listener: BorrowedFd, id: u64) -> bool {
    // SAFETY: the ioctl reads one u64.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
            &raw const id,
        ) == 0
    }
}

/// Ends the call `id` with `result` (0, or a positive errno it fails
/// with). Never "continue": the caller's memory may have changed since it
/// was read. Fails with `ENOENT` when the caller has gone, which is no
/// error of the server's.
pub(super) fn answer(listener: BorrowedFd, id: u64, errno: i32) -> io::Result<()> {
    let resp = libc::seccomp_notif_resp {
        id,
        val: 0,
        error: -errno,
        flags: 0,
    };
    // SAFETY: the ioctl reads one seccomp_notif_resp.
    let rc = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND,
            &raw const resp,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Registers the listener with the reactor: it reports a pending call as
/// readable and the run's end as a hang-up.
pub(super) fn watch(listener: OwnedFd) -> io::Result<tokio::io::unix::AsyncFd<OwnedFd>> {
    // SAFETY: an open descriptor the AsyncFd owns, so it stays open and
    // the same until the AsyncFd is dropped.
    unsafe { tokio::io::unix::AsyncFd::register_with_interest(listener, tokio::io::Interest::READABLE) }
        .map_err(|err| err.into_parts().1)
}

/// Installs `program` on the calling thread, which must have
/// `no_new_privs`, and answers its listener.
fn install(program: &Program, flags: c_uint) -> io::Result<OwnedFd> {
    let fprog = fprog(program);
    // SAFETY: `fprog` points into `program`, alive across the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            flags,
            &raw const fprog,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = c_int::try_from(fd).map_err(io::Error::other)?;
    // SAFETY: a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn fprog(program: &Program) -> libc::sock_fprog {
    libc::sock_fprog {
        len: u16::try_from(program.len()).unwrap_or(u16::MAX),
        filter: program.as_ptr().cast_mut().cast::<libc::sock_filter>(),
    }
}

/// The flags the children install the gate with, learnt by installing it
/// on a throwaway thread: `NEW_LISTENER`, with `WAIT_KILLABLE_RECV` where
/// the kernel has it (5.19), so that once the server has taken a call no
/// signal but a fatal one interrupts it (the server may already have
/// connected the socket). An error where there is no user notification
/// (before 5.0), or where the server itself runs under a filter that has
/// a listener (`EBUSY`: one per chain).
pub(super) fn probe(program: &Program) -> io::Result<c_uint> {
    let program = program.clone();
    std::thread::Builder::new()
        .name("skilld-seccomp".to_owned())
        .spawn(move || {
            // Only this thread, which ends right after: its filter and
            // no_new_privs go with it.
            // SAFETY: a plain prctl.
            if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
                return Err(io::Error::last_os_error());
            }
            let listener = c_uint::try_from(libc::SECCOMP_FILTER_FLAG_NEW_LISTENER).unwrap_or(0);
            let killable = c_uint::try_from(libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV).unwrap_or(0);
            match install(&program, listener | killable) {
                Ok(_) => Ok(listener | killable),
                Err(err) if err.raw_os_error() == Some(libc::EINVAL) => {
                    install(&program, listener).map(|_| listener)
                }
                Err(err) => Err(err),
            }
        })?
        .join()
        .map_err(|_| io::Error::other("the probe's thread panicked"))?
}

/// What the cloned child needs to install the gate and send its listener
/// to the server: plain data and pointers into itself, boxed so they stay
/// put.
#[repr(C)]
pub(crate) struct Raw {
    program: libc::sock_fprog,
    flags: c_uint,
    socket: c_int,
    msg: libc::msghdr,
    iov: libc::iovec,
    byte: u8,
    /// `CMSG_SPACE(sizeof(int))`, 8-byte aligned as a cmsghdr must be.
    control: [u64; 4],
}

/// The hand-off of one child's listener: the socket pair and the message
/// the child sends on it.
pub(crate) struct Handoff {
    raw: Box<Raw>,
    ours: OwnedFd,
    _theirs: OwnedFd,
}

impl Handoff {
    /// Prepares the hand-off of a listener for `program`, which must
    /// outlive the child's use of it (until clone returns).
    pub(crate) fn new(program: &Program, flags: c_uint) -> io::Result<Self> {
        use rustix::net::{AddressFamily, SocketFlags, SocketType, socketpair};
        let (ours, theirs) = socketpair(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        )?;
        // SAFETY: msghdr and iovec are plain data, all-zero valid.
        let (msg, iov) = unsafe { (std::mem::zeroed(), std::mem::zeroed()) };
        let mut raw = Box::new(Raw {
            program: fprog(program),
            flags,
            socket: theirs.as_raw_fd(),
            msg,
            iov,
            byte: 0,
            control: [0; 4],
        });
        let space = control_space();
        let raw_ptr: *mut Raw = &raw mut *raw;
        // SAFETY: every pointer is into the box, which never moves; the
        // control buffer is CMSG_SPACE(sizeof(int)) bytes, aligned.
        unsafe {
            (*raw_ptr).iov.iov_base = (&raw mut (*raw_ptr).byte).cast::<c_void>();
            (*raw_ptr).iov.iov_len = 1;
            (*raw_ptr).msg.msg_iov = &raw mut (*raw_ptr).iov;
            (*raw_ptr).msg.msg_iovlen = 1;
            (*raw_ptr).msg.msg_control = (&raw mut (*raw_ptr).control).cast::<c_void>();
            (*raw_ptr).msg.msg_controllen = space;
            let cmsg = libc::CMSG_FIRSTHDR(&raw const (*raw_ptr).msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(size_of::<c_int>() as c_uint) as usize;
        }
        Ok(Self {
            raw,
            ours,
            _theirs: theirs,
        })
    }

    /// The child's view, for `ChildArgs`.
    pub(crate) fn raw(&mut self) -> *mut Raw {
        &raw mut *self.raw
    }

    /// The listener, once the child has exec'd (it sent it before).
    pub(crate) fn receive(self) -> io::Result<OwnedFd> {
        use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, recvmsg};
        let mut space = [std::mem::MaybeUninit::uninit(); 64];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let mut byte = [0u8; 1];
        recvmsg(
            self.ours.as_fd(),
            &mut [io::IoSliceMut::new(&mut byte)],
            &mut control,
            RecvFlags::DONTWAIT | RecvFlags::CMSG_CLOEXEC,
        )?;
        let mut fds = control.drain().filter_map(|m| match m {
            RecvAncillaryMessage::ScmRights(fds) => Some(fds),
            _ => None,
        });
        fds.next()
            .and_then(|mut fds| fds.next())
            .ok_or_else(|| io::Error::other("the child sent no listener"))
    }
}

/// `CMSG_SPACE(sizeof(int))`.
fn control_space() -> usize {
    // SAFETY: pure arithmetic.
    unsafe { libc::CMSG_SPACE(size_of::<c_int>() as c_uint) as usize }
}

/// In the cloned child, after its other filters: installs the gate and
/// sends its listener to the server, then closes it, so the tool never
/// holds it (one holding its own listener could answer its own calls).
/// Only system calls on `raw`; false on failure, errno set.
///
/// # Safety
/// Only in the child `spawn` clones, with the `raw` of a live `Handoff`.
pub(crate) unsafe fn install_and_hand_off(raw: *mut Raw) -> bool {
    // SAFETY: `raw` is the parent's boxed `Raw`, alive and unmoved until
    // the child execs (CLONE_VFORK); the child alone writes to it meanwhile.
    unsafe {
        let fd = libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            (*raw).flags,
            &raw const (*raw).program,
        );
        let Ok(fd) = c_int::try_from(fd) else {
            return false;
        };
        if fd < 0 {
            return false;
        }
        let cmsg = libc::CMSG_FIRSTHDR(&raw const (*raw).msg);
        ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<c_int>(), fd);
        let sent = libc::sendmsg((*raw).socket, &raw const (*raw).msg, libc::MSG_NOSIGNAL) == 1;
        libc::close(fd);
        sent
    }
}
