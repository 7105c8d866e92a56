//! The runs' mount namespace for a server that is not root, which may not
//! make one in the host's user namespace: it is made in a user namespace
//! of its own (the server's uid and gid mapped to themselves), by a
//! short-lived child cloned into both. The child covers the places, opens
//! descriptors of what they hid and of the two namespaces into the
//! server's descriptor table (`CLONE_FILES`), and exits; the descriptors
//! keep the namespaces alive. Each later binding is done the same way, by
//! a child that joins both namespaces first.
//!
//! The making child gets a copy of the server's memory, not the memory
//! itself: to write its own `uid_map` it must be dumpable, and the flag
//! belongs to the memory, which must stay undumpable for the server. Its
//! findings come back through a page both share.
//!
//! Why by hand: a multi-threaded process may not `unshare` a user
//! namespace, so a new process must be cloned into it, and what that child
//! does before it exits is the same kind of raw, allocation-free work as a
//! run's child between clone and exec (see `runner/spawn.rs`).

#![expect(
    unsafe_code,
    reason = "clone into new namespaces, and the child's system calls on memory it shares with the server"
)]

use std::ffi::{CString, c_char, c_int, c_void};
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;
use std::ptr;

/// The most places covered.
pub(super) const MAX_PLACES: usize = 8;

/// What the making child found, for [`super::mounts::Mounts`].
pub(super) struct Made {
    pub user: OwnedFd,
    pub mnt: OwnedFd,
    /// A descriptor of each place as it was before it was covered, in the
    /// order given.
    pub under: Vec<OwnedFd>,
}

#[repr(C)]
struct MakeArgs {
    uid_line: *const c_char,
    gid_line: *const c_char,
    places: [*const c_char; MAX_PLACES],
    place_count: usize,
    under: [c_int; MAX_PLACES],
    user: c_int,
    mnt: c_int,
    step: c_int,
    errno: c_int,
}

/// Makes the namespaces and covers `places` (existing directories) there.
pub(super) fn make(places: &[&Path]) -> io::Result<Made> {
    if places.len() > MAX_PLACES {
        return Err(io::Error::other("too many places to cover"));
    }
    let uid_line = CString::new(format!("{0} {0} 1\n", nix::unistd::geteuid()))?;
    let gid_line = CString::new(format!("{0} {0} 1\n", nix::unistd::getegid()))?;
    let place_strings = places
        .iter()
        .map(|p| CString::new(p.as_os_str().as_encoded_bytes()))
        .collect::<Result<Vec<_>, _>>()?;
    let args = MakeArgs {
        uid_line: uid_line.as_ptr(),
        gid_line: gid_line.as_ptr(),
        places: [ptr::null(); MAX_PLACES],
        place_count: place_strings.len(),
        under: [-1; MAX_PLACES],
        user: -1,
        mnt: -1,
        step: 0,
        errno: 0,
    };
    let mut shared = Shared::new(args)?;
    for (slot, place) in shared.get_mut().places.iter_mut().zip(&place_strings) {
        *slot = place.as_ptr();
    }
    // Its own copy of the memory (no CLONE_VM), see the module comment.
    let flags = libc::CLONE_NEWUSER | libc::CLONE_NEWNS;
    // SAFETY: `make_child` only makes system calls on the shared `args`,
    // which outlives the child (CLONE_VFORK: this thread waits until it
    // exits); the strings it reads are in its copy of this memory.
    let status = unsafe { run_child(make_child, shared.ptr().cast(), flags, false) }?;
    let args = shared.get_mut();
    // SAFETY: the child opened these into the descriptor table this
    // process shares with it, close-on-exec, and nothing else owns them.
    let owned = |fd: c_int| (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) });
    let under: Vec<OwnedFd> = args.under[..args.place_count]
        .iter()
        .filter_map(|&fd| owned(fd))
        .collect();
    let (user, mnt) = (owned(args.user), owned(args.mnt));
    match (status, user, mnt) {
        (0, Some(user), Some(mnt)) if under.len() == places.len() => Ok(Made { user, mnt, under }),
        _ => Err(io::Error::other(format!(
            "cannot make the runs' namespaces ({}): {}",
            MAKE_STEPS
                .get(usize::try_from(args.step).unwrap_or(0))
                .unwrap_or(&"?"),
            io::Error::from_raw_os_error(args.errno)
        ))),
    }
}

const MAKE_STEPS: [&str; 8] = [
    "clone",
    "dumpable or setgroups",
    "uid_map",
    "gid_map",
    "mount propagation",
    "open a place",
    "cover a place",
    "open the namespaces",
];

extern "C" fn make_child(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the parent's `MakeArgs`, alive and unchanged but
    // for what this child writes, until it exits (CLONE_VFORK); its
    // strings are NUL-terminated.
    unsafe {
        let a = &mut *arg.cast::<MakeArgs>();
        let fail = |a: &mut MakeArgs, step: c_int| {
            a.step = step;
            a.errno = *libc::__errno_location();
            1
        };
        // This copy of the memory only: its /proc files become its own.
        if libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) != 0 {
            return fail(a, 1);
        }
        if !write_file(c"/proc/self/setgroups".as_ptr(), c"deny".as_ptr()) {
            return fail(a, 1);
        }
        if !write_file(c"/proc/self/uid_map".as_ptr(), a.uid_line) {
            return fail(a, 2);
        }
        if !write_file(c"/proc/self/gid_map".as_ptr(), a.gid_line) {
            return fail(a, 3);
        }
        let none = ptr::null::<c_char>();
        if libc::mount(
            none,
            c"/".as_ptr(),
            none,
            libc::MS_REC | libc::MS_SLAVE,
            ptr::null(),
        ) != 0
        {
            return fail(a, 4);
        }
        for i in 0..a.place_count {
            let place = a.places[i];
            let fd = libc::open(place, libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC);
            if fd < 0 {
                return fail(a, 5);
            }
            a.under[i] = fd;
            let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
            let opts = c"mode=0755,size=1m";
            if libc::mount(
                c"tmpfs".as_ptr(),
                place,
                c"tmpfs".as_ptr(),
                flags,
                opts.as_ptr().cast(),
            ) != 0
            {
                return fail(a, 6);
            }
        }
        a.user = libc::open(c"/proc/self/ns/user".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        a.mnt = libc::open(c"/proc/self/ns/mnt".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if a.user < 0 || a.mnt < 0 {
            return fail(a, 7);
        }
        0
    }
}

#[repr(C)]
struct BindArgs {
    user: c_int,
    mnt: c_int,
    /// Directories to make, outermost first.
    dirs: *const *const c_char,
    dir_count: usize,
    /// A file to make as the mount point, or null.
    file: *const c_char,
    source: *const c_char,
    target: *const c_char,
    errno: c_int,
}

/// Binds `source` (a path through a descriptor of a covered place) over
/// `target` in the namespaces, making the mount point first: the
/// directories `dirs` and, for a file, `target` itself.
pub(super) fn bind(
    user: &OwnedFd,
    mnt: &OwnedFd,
    dirs: &[&Path],
    file: bool,
    source: &Path,
    target: &Path,
) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let c = |p: &Path| CString::new(p.as_os_str().as_encoded_bytes());
    let dir_strings = dirs.iter().map(|d| c(d)).collect::<Result<Vec<_>, _>>()?;
    let dir_ptrs: Vec<*const c_char> = dir_strings.iter().map(|d| d.as_ptr()).collect();
    let (source, target) = (c(source)?, c(target)?);
    let mut args = BindArgs {
        user: user.as_raw_fd(),
        mnt: mnt.as_raw_fd(),
        dirs: dir_ptrs.as_ptr(),
        dir_count: dir_ptrs.len(),
        file: if file { target.as_ptr() } else { ptr::null() },
        source: source.as_ptr(),
        target: target.as_ptr(),
        errno: 0,
    };
    // SAFETY: as for `make`: `bind_child` makes system calls on `args`,
    // which outlives it.
    let status = unsafe { run_child(bind_child, ptr::from_mut(&mut args).cast(), 0, true) }?;
    if status == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(args.errno))
    }
}

extern "C" fn bind_child(arg: *mut c_void) -> c_int {
    // SAFETY: as in `make_child`, for `BindArgs`.
    unsafe {
        let a = &mut *arg.cast::<BindArgs>();
        let fail = |a: &mut BindArgs| {
            a.errno = *libc::__errno_location();
            1
        };
        if libc::setns(a.user, libc::CLONE_NEWUSER) != 0 || libc::setns(a.mnt, libc::CLONE_NEWNS) != 0 {
            return fail(a);
        }
        for i in 0..a.dir_count {
            if libc::mkdir(*a.dirs.add(i), 0o755) != 0 && *libc::__errno_location() != libc::EEXIST {
                return fail(a);
            }
        }
        if !a.file.is_null() {
            let fd = libc::open(a.file, libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC, 0o644);
            if fd < 0 {
                return fail(a);
            }
            libc::close(fd);
        }
        // A stale binding of a place since made again on the host.
        libc::umount2(a.target, libc::MNT_DETACH);
        let none = ptr::null::<c_char>();
        if libc::mount(
            a.source,
            a.target,
            none,
            libc::MS_BIND | libc::MS_REC,
            ptr::null(),
        ) != 0
        {
            return fail(a);
        }
        0
    }
}

/// `open`, `write` the whole NUL-terminated `text`, `close`.
///
/// # Safety
/// Both pointers are NUL-terminated strings.
unsafe fn write_file(path: *const c_char, text: *const c_char) -> bool {
    // SAFETY: passed on from the caller.
    unsafe {
        let fd = libc::open(path, libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let len = libc::strlen(text);
        let written = libc::write(fd, text.cast(), len);
        libc::close(fd);
        usize::try_from(written).is_ok_and(|w| w == len)
    }
}

/// Runs `child` in a process sharing this one's descriptor table (and its
/// memory, with `share_memory`; else a copy of it), with `extra` clone
/// flags, and waits for its exit status.
///
/// # Safety
/// `child` may only make system calls on `arg` (no allocation, no locks),
/// and `arg` must stay valid until this returns.
pub(super) unsafe fn run_child(
    child: extern "C" fn(*mut c_void) -> c_int,
    arg: *mut c_void,
    extra: c_int,
    share_memory: bool,
) -> io::Result<c_int> {
    const STACK: usize = 64 * 1024;
    // SAFETY: an anonymous private mapping, unmapped below.
    let stack = unsafe {
        libc::mmap(
            ptr::null_mut(),
            STACK,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
            -1,
            0,
        )
    };
    if stack == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let top = ((stack as usize + STACK) & !15) as *mut c_void;
    let vm = if share_memory { libc::CLONE_VM } else { 0 };
    let flags = vm | libc::CLONE_VFORK | libc::CLONE_FILES | libc::SIGCHLD | extra;
    // SAFETY: every signal is blocked on this thread while the child runs
    // on its own stack, so no handler of the server runs there; with
    // CLONE_VFORK this thread resumes only once the child has exited.
    let pid = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&raw mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &raw const all, &raw mut old);
        let pid = libc::clone(child, top, flags, arg);
        libc::pthread_sigmask(libc::SIG_SETMASK, &raw const old, ptr::null_mut());
        pid
    };
    let cloned = if pid < 0 {
        Err(io::Error::last_os_error())
    } else {
        wait(pid)
    };
    // SAFETY: the child has exited; the mapping is ours alone again.
    unsafe {
        libc::munmap(stack, STACK);
    }
    cloned
}

fn wait(pid: c_int) -> io::Result<c_int> {
    loop {
        let mut status: c_int = 0;
        // SAFETY: a plain system call with a valid out-pointer.
        let rc = unsafe { libc::waitpid(pid, &raw mut status, libc::__WALL) };
        if rc == pid {
            return Ok(if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else {
                -1
            });
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// A value in a page shared with a child that has its own copy of the
/// rest of the memory, so that what it writes there comes back.
struct Shared<T> {
    page: *mut T,
}

impl<T> Shared<T> {
    fn new(value: T) -> io::Result<Self> {
        // SAFETY: a new anonymous shared mapping large enough for `T`,
        // page-aligned (so aligned for `T`), written once below.
        let page = unsafe {
            libc::mmap(
                ptr::null_mut(),
                size_of::<T>(),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if page == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let page = page.cast::<T>();
        // SAFETY: the mapping is ours, writable, and holds no value yet.
        unsafe { page.write(value) };
        Ok(Self { page })
    }

    fn ptr(&self) -> *mut T {
        self.page
    }

    fn get_mut(&mut self) -> &mut T {
        // SAFETY: initialised in `new`; no child runs while this borrow
        // lives (the children are waited for before it is taken).
        unsafe { &mut *self.page }
    }
}

impl<T> Drop for Shared<T> {
    fn drop(&mut self) {
        // SAFETY: the value was written in `new` and is dropped once; the
        // mapping is ours to unmap.
        unsafe {
            ptr::drop_in_place(self.page);
            libc::munmap(self.page.cast(), size_of::<T>());
        }
    }
}
