//! Starting a run's leader with a vfork-style clone (`CLONE_VM |
//! CLONE_VFORK`; `clone3` into its cgroup where the kernel allows, see
//! `clone3.rs`), and waiting for it through a pidfd.
//!
//! Why by hand: the child must set its resource limits and enter the
//! isolated network namespace between fork and exec. std's `Command` can
//! only do that with a `pre_exec` hook, and a hook makes it `fork` instead
//! of `posix_spawn`: the kernel copies the page tables of the whole
//! multi-threaded server for every run (`cargo bench --bench invoke` shows
//! what that costs). glibc's `posix_spawn` avoids the copy with a vfork-style clone on a separate
//! stack, but it has no attribute for rlimits or `setns`, and the process
//! crates (process-wrap, command-fds) all build on `pre_exec`. So this file
//! does what `posix_spawn` does, plus those two steps.
//!
//! The child shares the parent's memory until it execs, and the parent's
//! other threads keep running, so the child may only make system calls on
//! data prepared here: no allocation, no locks, no panics. The calling
//! thread is suspended until the child has exec'd or exited (`CLONE_VFORK`),
//! which is what makes the shared stack-allocated arguments safe to read.

#![expect(
    unsafe_code,
    reason = "clone, exec, waitid and the child's setup are system calls std does not wrap"
)]

use super::clone3;
use super::limits::ChildSetup;
use super::private_tmp;
use super::process::{Exit, Step, describe_errno, resolve};
use super::{SpawnError, Spec};
use std::ffi::{CString, c_char, c_int, c_void};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr;
use std::sync::atomic::{AtomicI32, Ordering};
use tokio::io::unix::AsyncFd;

/// The child's stack. It only runs a handful of libc wrappers, so this is
/// generous; a guard page below it turns an overflow into a fault instead
/// of silent damage to the parent's memory.
const STACK_BYTES: usize = 64 * 1024;

/// A started leader: its pid (= its process group id), a pidfd that pins
/// the pid until reaped, the read ends of its stdout and stderr, and the
/// write end of its stdin when one was asked for.
pub(super) struct Spawned {
    pub pid: i32,
    pub pidfd: OwnedFd,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
    pub stdin: Option<OwnedFd>,
}

/// Where the child's stdin comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stdin {
    /// `/dev/null`: a tool run reads nothing from the server.
    Null,
    /// A pipe whose write end the server keeps (a long-lived child that
    /// takes requests on stdin).
    Pipe,
}

/// Everything the child reads, as raw pointers into memory the parent
/// keeps alive across the clone; and where the child reports a failure.
#[repr(C)]
struct ChildArgs {
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
    cwd: *const c_char,
    stdin: c_int,
    stdout: c_int,
    stderr: c_int,
    rlimits: *const (libc::__rlimit_resource_t, libc::rlimit),
    rlimit_count: usize,
    /// A network namespace to enter, or -1.
    netns: c_int,
    /// The runs' mount namespace to enter, or -1.
    mountns: c_int,
    /// The user namespace that owns it, to enter first, or -1.
    userns: c_int,
    /// The run's own `/tmp` to make, or null.
    tmp: *const private_tmp::Raw,
    /// One past the highest signal number.
    signal_end: c_int,
    /// The run's cgroup files to write `0` to (`cgroup.procs`, v1 `tasks`).
    cgroups: *const c_int,
    cgroup_count: usize,
    /// Become this uid and gid (`has_identity`).
    has_identity: bool,
    uid: libc::uid_t,
    gid: libc::gid_t,
    /// Confine the child (a `Confinement` was given): drop every
    /// capability, set `no_new_privs`, and apply what follows.
    confined: bool,
    last_cap: c_int,
    /// A Landlock ruleset to restrict to, or -1.
    landlock: c_int,
    /// Seccomp programs to install, in order.
    seccomp: *const libc::sock_fprog,
    seccomp_count: usize,
    /// The unix-socket gate to install last and hand its listener to the
    /// server through, or null.
    gate: *mut crate::sandbox::HandoffRaw,
    failed_step: AtomicI32,
    errno: AtomicI32,
}

/// The namespace the child joins: a run's egress namespace, whose only way
/// out is its proxy, before the shared offline one; -1 for the host's.
fn network_namespace(spec: &Spec, setup: &ChildSetup) -> c_int {
    spec.egress_ns
        .as_deref()
        .map(AsRawFd::as_raw_fd)
        .or(setup.netns())
        .unwrap_or(-1)
}

/// Starts `spec`'s program as the leader of a new process group, or says in
/// one sentence why it could not be started.
pub(super) fn spawn(spec: &Spec, stdin: Stdin) -> Result<Spawned, SpawnError> {
    working_dir(&spec.cwd)?;
    let path = resolve(&spec.program, &spec.cwd, &spec.env)?;
    let c = CSpec::of(spec, &path)?;
    let argv_ptrs = null_terminated(&c.argv);
    let envp_ptrs = null_terminated(&c.envp);

    let setup = ChildSetup::plan(&spec.limits, spec.isolate_network);
    let rlimits = setup.rlimits();
    let confine = spec.confinement.as_ref();
    let joins = Joins::of(confine.and_then(|c| c.cgroup.as_ref()));
    let mut tmp_plan = confine
        .and_then(|c| c.private_tmp.as_ref())
        .map(private_tmp::Plan::of);
    let tmp = tmp_plan.as_mut().map(private_tmp::Plan::raw);
    let seccomp = seccomp_programs(confine);
    let could_not = |what: &str, err: io::Error| {
        SpawnError::Setup(format!("could not start {}: {what}: {err}", spec.program))
    };
    let mut gated =
        Gated::prepare(confine).map_err(|e| could_not("cannot prepare the unix-socket gate", e))?;
    let stdio = Stdio::open(stdin).map_err(|(what, e)| could_not(what, e))?;
    let stack = Stack::take().map_err(|e| could_not("cannot allocate a stack", e))?;

    let mut args = ChildArgs {
        path: c.path.as_ptr(),
        argv: argv_ptrs.as_ptr(),
        envp: envp_ptrs.as_ptr(),
        cwd: c.cwd.as_ptr(),
        stdin: stdio.stdin.as_raw_fd(),
        stdout: stdio.stdout_w.as_raw_fd(),
        stderr: stdio.stderr_w.as_raw_fd(),
        rlimits: rlimits.as_ptr(),
        rlimit_count: rlimits.len(),
        netns: network_namespace(spec, &setup),
        mountns: confine
            .and_then(|c| c.mount_ns.as_deref())
            .map_or(-1, AsRawFd::as_raw_fd),
        userns: confine
            .and_then(|c| c.user_ns.as_deref())
            .map_or(-1, AsRawFd::as_raw_fd),
        tmp: tmp.as_ref().map_or(ptr::null(), ptr::from_ref),
        signal_end: libc::SIGRTMAX() + 1,
        cgroups: ptr::null(),
        cgroup_count: 0,
        has_identity: confine.and_then(|c| c.identity).is_some(),
        uid: confine.and_then(|c| c.identity).map_or(0, |(uid, _)| uid),
        gid: confine.and_then(|c| c.identity).map_or(0, |(_, gid)| gid),
        confined: confine.is_some(),
        last_cap: confine.map_or(0, |c| c_int::try_from(c.last_cap).unwrap_or(63)),
        landlock: confine
            .and_then(|c| c.landlock.as_ref())
            .map_or(-1, AsRawFd::as_raw_fd),
        seccomp: seccomp.as_ptr(),
        seccomp_count: seccomp.len(),
        gate: gated.as_mut().map_or(ptr::null_mut(), |g| g.handoff.raw()),
        failed_step: AtomicI32::new(Step::None as i32),
        errno: AtomicI32::new(0),
    };

    let mut pidfd: c_int = -1;
    // SAFETY: every signal is blocked on this thread for the clone, so no
    // handler of ours runs on the child's stack before it resets them; the
    // child gets its own stack and `args`, which outlive the call: with
    // CLONE_VFORK this thread resumes only once the child has exec'd or
    // exited. `child_main` keeps to the rules in the module comment.
    let cloned = unsafe {
        let all = SignalMask::block_all();
        let cloned = clone_child(&mut args, &stack, &joins, &mut pidfd);
        drop(all);
        cloned
    };
    drop((stdio.stdin, stdio.stdout_w, stdio.stderr_w));
    // The child has exec'd or exited: the stack is free for the next spawn.
    stack.give_back();
    let pid = cloned.map_err(|err| could_not("clone failed", err))?;
    // SAFETY: with CLONE_PIDFD a successful clone stored a new descriptor
    // that nothing else owns.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };

    reached_exec(&args, &pidfd, &spec.program, &path)?;
    if let Some(gated) = gated {
        gated.supervise();
    }
    Ok(Spawned {
        pid,
        pidfd,
        stdout: stdio.stdout_r,
        stderr: stdio.stderr_r,
        stdin: stdio.stdin_w,
    })
}

fn working_dir(cwd: &std::path::Path) -> Result<(), SpawnError> {
    if cwd.is_dir() {
        return Ok(());
    }
    let why = format!("working directory not found: {}", cwd.display());
    Err(SpawnError::NotFound(why))
}

/// A `network: false` child's unix-socket gate, and the hand-off of its
/// listener to the server.
struct Gated<'a> {
    gate: &'a crate::sandbox::UnixGate,
    handoff: crate::sandbox::Handoff,
}

impl<'a> Gated<'a> {
    fn prepare(confine: Option<&'a crate::sandbox::Confinement>) -> io::Result<Option<Self>> {
        let Some(gate) = confine.and_then(|c| c.unix_gate.as_ref()) else {
            return Ok(None);
        };
        let handoff = gate.handoff()?;
        Ok(Some(Self { gate, handoff }))
    }

    /// Once the child has exec'd, having sent its listener: the run's
    /// supervisor takes it. Without it the run's connects fail (`ENOSYS`):
    /// nothing is let through.
    fn supervise(self) {
        match self.handoff.receive() {
            Ok(listener) => self.gate.supervise(listener),
            Err(err) => tracing::warn!(%err, "no listener from a gated child"),
        }
    }
}

/// Whether the child reached its exec. One that failed a step before it
/// has already exited (127): it is reaped so no zombie stays.
fn reached_exec(
    args: &ChildArgs,
    pidfd: &OwnedFd,
    program: &str,
    path: &std::path::Path,
) -> Result<(), SpawnError> {
    let step = Step::from_raw(args.failed_step.load(Ordering::Acquire));
    if step == Step::None {
        return Ok(());
    }
    if let Err(err) = reap(pidfd) {
        tracing::warn!(%err, "could not reap a child that failed to start");
    }
    let why = describe_errno(args.errno.load(Ordering::Acquire), step, program, path);
    // Failing the exec itself is the program's absence; any step before
    // it is the sandbox's.
    Err(match step {
        Step::Exec => SpawnError::NotFound(why),
        _ => SpawnError::Setup(why),
    })
}

/// The program, its arguments, environment and directory as C strings:
/// what the child's pointers point into, so they live until the clone
/// returns.
struct CSpec {
    path: CString,
    cwd: CString,
    argv: Vec<CString>,
    envp: Vec<CString>,
}

impl CSpec {
    fn of(spec: &Spec, path: &std::path::Path) -> Result<Self, SpawnError> {
        let nul = || {
            SpawnError::Invalid(format!(
                "could not start {}: an argument or variable contains a NUL byte",
                spec.program
            ))
        };
        Ok(Self {
            path: CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| nul())?,
            cwd: CString::new(spec.cwd.as_os_str().as_encoded_bytes()).map_err(|_| nul())?,
            argv: std::iter::once(spec.program.as_str())
                .chain(spec.args.iter().map(String::as_str))
                .map(|a| CString::new(a).map_err(|_| nul()))
                .collect::<Result<Vec<_>, _>>()?,
            envp: spec
                .env
                .iter()
                .map(|(k, v)| CString::new(format!("{k}={v}")).map_err(|_| nul()))
                .collect::<Result<Vec<_>, _>>()?,
        })
    }
}

/// The run's seccomp programs as the kernel takes them; they point into
/// `confine`, which outlives the clone.
fn seccomp_programs(confine: Option<&crate::sandbox::Confinement>) -> Vec<libc::sock_fprog> {
    confine
        .map(|c| c.seccomp.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|program| libc::sock_fprog {
            len: u16::try_from(program.len()).unwrap_or(u16::MAX),
            filter: program.as_ptr().cast_mut().cast::<libc::sock_filter>(),
        })
        .collect()
}

/// The child's standard streams and the parent's ends of them.
struct Stdio {
    stdin: OwnedFd,
    stdin_w: Option<OwnedFd>,
    stdout_r: OwnedFd,
    stdout_w: OwnedFd,
    stderr_r: OwnedFd,
    stderr_w: OwnedFd,
}

impl Stdio {
    /// Descriptors at 3 or above, so the child's dup2 onto 0, 1 and 2 can
    /// never close one it still needs (a server started with a closed
    /// stdin would otherwise get a pipe at 0).
    fn open(stdin: Stdin) -> Result<Self, (&'static str, io::Error)> {
        let piped = |e| ("cannot create a pipe", e);
        let (stdin, stdin_w) = match stdin {
            Stdin::Null => (open_dev_null().map_err(|e| ("cannot open /dev/null", e))?, None),
            Stdin::Pipe => {
                let (r, w) = pipe().map_err(piped)?;
                (r, Some(w))
            }
        };
        let (stdout_r, stdout_w) = pipe().map_err(piped)?;
        let (stderr_r, stderr_w) = pipe().map_err(piped)?;
        Ok(Self {
            stdin,
            stdin_w,
            stdout_r,
            stdout_w,
            stderr_r,
            stderr_w,
        })
    }
}

/// How the child joins the run's cgroups: born in the v2 one where it can
/// be, then writing itself into the rest.
struct Joins {
    born_in: Option<RawFd>,
    /// Every file to write `0` to, for a child not born in its v2 cgroup.
    all: Vec<RawFd>,
    /// Those left after a birth in the v2 cgroup.
    after_birth: Vec<RawFd>,
}

impl Joins {
    fn of(cgroup: Option<&crate::sandbox::RunCgroup>) -> Self {
        Self {
            born_in: cgroup.and_then(crate::sandbox::RunCgroup::directory),
            all: cgroup.map(|c| c.procs(false)).unwrap_or_default(),
            after_birth: cgroup.map(|c| c.procs(true)).unwrap_or_default(),
        }
    }
}

/// Clones the child: with `clone3` straight into the run's v2 cgroup where
/// the kernel allows it, else with glibc's `clone`, the child then moving
/// itself there too. Answers the child's pid.
///
/// # Safety
/// As for `clone3::start`: signals blocked on this thread, `args` and
/// `stack` the child's until clone returns.
unsafe fn clone_child(
    args: &mut ChildArgs,
    stack: &Stack,
    joins: &Joins,
    pidfd: &mut c_int,
) -> io::Result<i32> {
    if let Some(cgroup) = joins.born_in {
        args.cgroups = joins.after_birth.as_ptr();
        args.cgroup_count = joins.after_birth.len();
        let (base, len) = stack.usable();
        let how = clone3::Start {
            child: child_main,
            arg: ptr::from_mut(args).cast::<c_void>(),
            stack: base,
            stack_len: len,
            pidfd: ptr::from_mut(pidfd),
            cgroup,
        };
        // SAFETY: passed on from the caller.
        match unsafe { clone3::start(&how) } {
            Some(ret) if ret >= 0 => return i32::try_from(ret).map_err(io::Error::other),
            Some(ret) => {
                let errno = i32::try_from(-ret).unwrap_or(libc::EINVAL);
                return Err(io::Error::from_raw_os_error(errno));
            }
            None => {}
        }
    }
    args.cgroups = joins.all.as_ptr();
    args.cgroup_count = joins.all.len();
    // SAFETY: passed on from the caller; the stack top is the end of a
    // mapping of ours that only the child uses until clone returns.
    let pid = unsafe {
        libc::clone(
            child_main,
            stack.top(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD | libc::SIGCHLD,
            ptr::from_mut(args).cast::<c_void>(),
            ptr::from_mut(pidfd),
        )
    };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(pid)
}

/// The child, between clone and exec. Only system calls on `args`; any
/// failure is written back with its errno and the child exits 127.
extern "C" fn child_main(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the parent's `ChildArgs`, alive and unchanged until
    // this process execs or exits (CLONE_VFORK). Every pointer in it is
    // valid and NUL-terminated (strings) or NULL-terminated (arrays).
    unsafe {
        let a = &*arg.cast::<ChildArgs>();

        // Signal dispositions are the parent's copy (no CLONE_SIGHAND):
        // handlers would run the server's code in here, so reset them
        // before unblocking. SIGPIPE, which Rust ignores, goes back to the
        // default too, as std's Command does: a tool writing to a closed
        // pipe should end the way it would from a shell.
        let mut action: libc::sigaction = std::mem::zeroed();
        let mut default: libc::sigaction = std::mem::zeroed();
        default.sa_sigaction = libc::SIG_DFL;
        for signal in 1..a.signal_end {
            if signal == libc::SIGKILL || signal == libc::SIGSTOP {
                continue;
            }
            if libc::sigaction(signal, ptr::null(), &raw mut action) == 0
                && (action.sa_sigaction != libc::SIG_IGN || signal == libc::SIGPIPE)
                && action.sa_sigaction != libc::SIG_DFL
            {
                libc::sigaction(signal, &raw const default, ptr::null_mut());
            }
        }

        // A session of its own, not only a group: the child must not keep
        // the server's controlling terminal, through which it could read
        // what the operator types or push input into their shell.
        if libc::setsid() < 0 {
            fail(a, Step::Group);
        }
        // Into the run's cgroups while still privileged: "0" moves the
        // writer itself.
        for i in 0..a.cgroup_count {
            if libc::write(*a.cgroups.add(i), c"0".as_ptr().cast(), 1) != 1 {
                fail(a, Step::Cgroup);
            }
        }
        for (from, to) in [(a.stdin, 0), (a.stdout, 1), (a.stderr, 2)] {
            // dup2 leaves the new descriptor without O_CLOEXEC; the
            // originals (all ≥ 3, close-on-exec) vanish at exec.
            if libc::dup2(from, to) < 0 {
                fail(a, Step::Redirect);
            }
        }
        // After everything that needs the host's privileges (the cgroups,
        // the limits): in its own user namespace, a server that is not
        // root holds every capability, over that namespace only.
        if a.userns >= 0 && libc::setns(a.userns, libc::CLONE_NEWUSER) != 0 {
            fail(a, Step::Mounts);
        }
        // After the user namespace: a run's egress namespace, for a server
        // that is not root, belongs to it.
        if a.netns >= 0 && libc::setns(a.netns, libc::CLONE_NEWNET) != 0 {
            fail(a, Step::Network);
        }
        // Joining a mount namespace moves the working directory to its
        // root, so this comes before the chdir.
        if a.mountns >= 0 && libc::setns(a.mountns, libc::CLONE_NEWNS) != 0 {
            fail(a, Step::Mounts);
        }
        if !a.tmp.is_null() && !private_tmp::make(&*a.tmp, a.landlock) {
            fail(a, Step::Tmp);
        }
        // Before the identity changes: the new one may not be able to
        // reach the directory, though it may work inside it.
        if libc::chdir(a.cwd) != 0 {
            fail(a, Step::Directory);
        }
        if a.confined {
            confine(a);
        }
        // The limits last: until close_range below, the child holds a
        // copy of every descriptor the server has open, so a low
        // RLIMIT_NOFILE applied earlier leaves no number free for the
        // gate's listener or the private /tmp (EMFILE on a busy server).
        // Lowering a limit needs no privilege, so the new identity can.
        let mut next = a.rlimits;
        for _ in 0..a.rlimit_count {
            let (resource, limit) = &*next;
            if libc::setrlimit(*resource, limit) != 0 {
                fail(a, Step::Limits);
            }
            next = next.add(1);
        }
        // Whatever the server inherited without close-on-exec (a
        // jobserver pipe, a supervisor's socket) is not the tool's
        // business. Best effort: a kernel before 5.9 lacks close_range.
        libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            0 as libc::c_uint,
        );
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&raw mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &raw const none, ptr::null_mut());
        libc::execve(a.path, a.argv, a.envp);
        fail(a, Step::Exec)
    }
}

/// The sandbox, in the child: another identity without capabilities,
/// `no_new_privs`, the Landlock ruleset, the seccomp filters. Raw system
/// calls for the identity: glibc's `setresuid` would signal the parent's
/// threads, which share this memory, to change theirs too.
///
/// # Safety
/// Only in the cloned child, with `a` as `child_main` got it.
unsafe fn confine(a: &ChildArgs) {
    // SAFETY: system calls on plain values and pointers prepared by the
    // parent, valid until exec (see `child_main`).
    unsafe {
        // The bounding set first: dropping it needs CAP_SETPCAP, which
        // the new identity will not have (a child in its own user
        // namespace has it there).
        if a.has_identity || a.userns >= 0 {
            for cap in 0..=a.last_cap {
                libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0);
            }
        }
        if a.has_identity {
            let ok = libc::syscall(libc::SYS_setgroups, 0, ptr::null::<libc::gid_t>()) == 0
                && libc::syscall(libc::SYS_setresgid, a.gid, a.gid, a.gid) == 0
                && libc::syscall(libc::SYS_setresuid, a.uid, a.uid, a.uid) == 0;
            if !ok {
                fail(a, Step::Identity);
            }
        }
        let header = CapHeader {
            version: LINUX_CAPABILITY_VERSION_3,
            pid: 0,
        };
        let none = [CapData::default(); 2];
        let dropped = libc::syscall(libc::SYS_capset, &raw const header, none.as_ptr()) == 0
            && libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) == 0
            && libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0;
        if !dropped {
            fail(a, Step::Identity);
        }
        if a.landlock >= 0 && libc::syscall(libc::SYS_landlock_restrict_self, a.landlock, 0) != 0 {
            fail(a, Step::Landlock);
        }
        for i in 0..a.seccomp_count {
            let program = a.seccomp.add(i);
            if libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, 0, program) != 0 {
                fail(a, Step::Seccomp);
            }
        }
        // Last, so the listener is sent with every other filter in place;
        // close_range then closes what the child kept of it.
        if !a.gate.is_null() && !crate::sandbox::install_and_hand_off(a.gate) {
            fail(a, Step::Seccomp);
        }
    }
}

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// `struct __user_cap_header_struct`, which libc does not define.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: c_int,
}

/// `struct __user_cap_data_struct`: two of them for version 3.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Records the failed step and errno for the parent and exits.
///
/// # Safety
/// Only in the cloned child.
unsafe fn fail(a: &ChildArgs, step: Step) -> ! {
    // SAFETY: errno is this (shared) thread-local; reading it is a load.
    let errno = unsafe { *libc::__errno_location() };
    a.errno.store(errno, Ordering::Release);
    a.failed_step.store(step as i32, Ordering::Release);
    // SAFETY: _exit ends only this process (no CLONE_THREAD) and runs none
    // of the parent's atexit handlers.
    unsafe { libc::_exit(127) }
}

fn null_terminated(strings: &[CString]) -> Vec<*const c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(ptr::null()))
        .collect()
}

/// Moves a descriptor to 3 or above, keeping it close-on-exec.
fn above_stdio(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    // SAFETY: fcntl on a descriptor we own; the result is a new one we own.
    let raised = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if raised < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fresh from F_DUPFD_CLOEXEC.
    Ok(unsafe { OwnedFd::from_raw_fd(raised) })
}

fn open_dev_null() -> io::Result<OwnedFd> {
    let file = std::fs::File::open("/dev/null")?;
    above_stdio(file.into())
}

/// A close-on-exec pipe: (read end, write end).
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(io::Error::from)?;
    Ok((above_stdio(read)?, above_stdio(write)?))
}

/// An mmap'd stack with a guard page below it.
struct Stack {
    base: *mut c_void,
    len: usize,
}

thread_local! {
    /// One stack per thread that spawns, kept between spawns: mapping and
    /// unmapping one per run made the kernel shoot down TLB entries on
    /// every core, each time (visible in `perf` at 8 concurrent calls).
    /// A spawn borrows the thread's stack only while this thread is
    /// suspended in clone, so one per thread is enough.
    static SPARE_STACK: std::cell::Cell<Option<Stack>> = const { std::cell::Cell::new(None) };
}

impl Stack {
    /// This thread's spare stack, or a new one.
    fn take() -> io::Result<Self> {
        match SPARE_STACK.with(std::cell::Cell::take) {
            Some(stack) => Ok(stack),
            None => Self::new(),
        }
    }

    /// Keeps the stack for this thread's next spawn.
    fn give_back(self) {
        SPARE_STACK.with(|spare| spare.set(Some(self)));
    }

    fn new() -> io::Result<Self> {
        let page = page_size();
        let len = STACK_BYTES + page;
        // SAFETY: an anonymous private mapping; checked below.
        let base = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let stack = Self { base, len };
        // SAFETY: the lowest page of our own mapping.
        if unsafe { libc::mprotect(base, page, libc::PROT_NONE) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(stack)
    }

    /// The stack above the guard page, as `clone3` takes it: its lowest
    /// address and its length, which end on a page boundary.
    fn usable(&self) -> (*mut c_void, usize) {
        let page = page_size();
        ((self.base as usize + page) as *mut c_void, self.len - page)
    }

    /// The highest address, 16-byte aligned (stacks grow down on every
    /// architecture Linux runs us on).
    fn top(&self) -> *mut c_void {
        let end = self.base as usize + self.len;
        (end & !15) as *mut c_void
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping, which the child no longer
        // uses: it has exec'd or exited before clone returned.
        unsafe {
            libc::munmap(self.base, self.len);
        }
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).unwrap_or(4096).max(4096)
}

/// Blocks every signal on this thread while alive, then restores the mask.
struct SignalMask(libc::sigset_t);

impl SignalMask {
    /// # Safety
    /// The guard must be dropped on the thread that made it.
    unsafe fn block_all() -> Self {
        // SAFETY: sigset_t is plain data; the calls get valid pointers.
        unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&raw mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &raw const all, &raw mut old);
            Self(old)
        }
    }
}

impl Drop for SignalMask {
    fn drop(&mut self) {
        // SAFETY: restoring the mask saved by `block_all` on this thread.
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, &raw const self.0, ptr::null_mut());
        }
    }
}

/// Registers a leader's pidfd with the reactor, to learn of its exit
/// without a blocked thread. On failure the descriptor comes back.
pub(super) fn watch_pidfd(fd: OwnedFd) -> Result<AsyncFd<OwnedFd>, (OwnedFd, io::Error)> {
    // SAFETY: an open descriptor that the AsyncFd owns, so it stays open
    // and the same until dropped or taken back by `into_inner`.
    unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }
        .map_err(tokio::io::unix::AsyncFdRegisterError::into_parts)
}

/// Waits until the leader has ended, WITHOUT reaping it: while the zombie
/// exists its pid — which is also the group id — cannot be reused, so
/// killing the group afterwards cannot hit a stranger. The pidfd becomes
/// readable when the process exits, so no thread blocks meanwhile.
pub(super) async fn wait_exit(pidfd: &AsyncFd<OwnedFd>) -> io::Result<Exit> {
    loop {
        let mut ready = pidfd.readable().await?;
        if let Some(exit) = peek_exit(pidfd.get_ref().as_raw_fd())? {
            return Ok(exit);
        }
        ready.clear_ready();
    }
}

/// The exit status if the process has ended, leaving it unreaped.
fn peek_exit(pidfd: RawFd) -> io::Result<Option<Exit>> {
    waitid(pidfd, libc::WEXITED | libc::WNOWAIT | libc::WNOHANG)
}

/// Reaps the process behind `pidfd`, blocking until it has ended.
pub(super) fn reap(pidfd: &OwnedFd) -> io::Result<()> {
    waitid(pidfd.as_raw_fd(), libc::WEXITED).map(|_| ())
}

fn waitid(pidfd: RawFd, options: c_int) -> io::Result<Option<Exit>> {
    let id = libc::id_t::try_from(pidfd).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    loop {
        // SAFETY: siginfo_t is plain data for which all-zero bytes are a
        // valid value; waitid only writes into it.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: a plain system call with a valid out-pointer.
        let rc = unsafe { libc::waitid(libc::P_PIDFD, id, &raw mut info, options) };
        if rc != 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        // SAFETY: waitid succeeded, so si_pid is set: 0 when (WNOHANG)
        // nothing has changed yet.
        if unsafe { info.si_pid() } == 0 {
            return Ok(None);
        }
        // SAFETY: a child state change was reported, so si_status is the
        // field the kernel filled in.
        let status = unsafe { info.si_status() };
        return Ok(Some(match info.si_code {
            libc::CLD_EXITED => Exit::Code(status),
            _ => Exit::Signal(status),
        }));
    }
}
