//! `clone3` with `CLONE_INTO_CGROUP`, so a run's leader is born in its v2
//! cgroup instead of moving itself there.
//!
//! Why: a write to `cgroup.procs` takes the kernel's global cgroup
//! threadgroup lock for writing, which waits for an RCU grace period on
//! hosts without `favordynmods`; that move was most of what the sandbox
//! added to a short run. A fork into the cgroup takes the same lock only
//! for reading.
//!
//! Why by hand: neither libc nor nix wraps `clone3`, and glibc's `clone`
//! takes no `clone_args`. A `CLONE_VM` child starts on its new stack with
//! the parent's registers, so it cannot return into the caller's frame
//! like a fork: a few instructions call the child's function on that
//! stack and exit with its result. They exist for x86_64 only (the one
//! target built and tested here); elsewhere `start` answers `None` and the
//! caller uses glibc's `clone`, with the child moving itself.

#![expect(
    unsafe_code,
    reason = "clone3 and the child's first instructions are a system call and assembly"
)]

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};

/// `struct clone_args` up to `cgroup` (`CLONE_ARGS_SIZE_VER2`, Linux 5.7).
#[repr(C)]
#[derive(Debug, Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// `CLONE_INTO_CGROUP` from `linux/sched.h` (libc does not define it).
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// Set once the kernel (or a seccomp filter in front of it) refused
/// `clone3` as unknown: every later spawn goes straight to `clone`.
static UNAVAILABLE: AtomicBool = AtomicBool::new(false);

/// What the child runs on its stack; its result is the exit status if it
/// returns.
pub(super) type ChildFn = extern "C" fn(*mut c_void) -> c_int;

/// Where and how the child starts.
pub(super) struct Start {
    pub child: ChildFn,
    pub arg: *mut c_void,
    /// The lowest address of the child's stack, and its length.
    pub stack: *mut c_void,
    pub stack_len: usize,
    /// Receives the child's pidfd (`CLONE_PIDFD`).
    pub pidfd: *mut c_int,
    /// The v2 cgroup directory the child is born in.
    pub cgroup: c_int,
}

/// Starts the child with `CLONE_VM | CLONE_VFORK | CLONE_PIDFD |
/// CLONE_INTO_CGROUP`: `Some(pid)`, `Some(-errno)` when it failed, or
/// `None` when `clone3` or `CLONE_INTO_CGROUP` is not there to use.
///
/// # Safety
/// As for glibc's `clone`: the stack is the child's alone, `arg` outlives
/// the child's use of it (`CLONE_VFORK` suspends this thread until the
/// child has exec'd or exited), and `child` keeps to what may run in a
/// child sharing this memory. Signals must be blocked on this thread.
pub(super) unsafe fn start(how: &Start) -> Option<i64> {
    if UNAVAILABLE.load(Ordering::Relaxed) {
        return None;
    }
    let args = CloneArgs {
        flags: (libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD) as u64 | CLONE_INTO_CGROUP,
        pidfd: how.pidfd as u64,
        exit_signal: libc::SIGCHLD as u64,
        stack: how.stack as u64,
        stack_size: how.stack_len as u64,
        cgroup: u64::try_from(how.cgroup).ok()?,
        ..CloneArgs::default()
    };
    // SAFETY: passed on from the caller; `args` lives across the call.
    let ret = unsafe { raw(&args, how.child, how.arg) }?;
    // ENOSYS: no clone3 (before 5.3, or a container's seccomp profile);
    // E2BIG: a kernel before 5.7 that has no `cgroup` field.
    if ret == -i64::from(libc::ENOSYS) || ret == -i64::from(libc::E2BIG) {
        UNAVAILABLE.store(true, Ordering::Relaxed);
        tracing::debug!(
            "clone3 with CLONE_INTO_CGROUP is unavailable; runs join their cgroup by writing to it"
        );
        return None;
    }
    Some(ret)
}

#[cfg(target_arch = "x86_64")]
unsafe fn raw(args: &CloneArgs, child: ChildFn, arg: *mut c_void) -> Option<i64> {
    let ret: i64;
    // SAFETY: the parent gets the syscall's result with only rax, rcx and
    // r11 changed. The child (rax 0) is on its own stack, 16-byte aligned
    // by the caller, so `call` enters `child` as the ABI expects; it never
    // comes back here, leaving through exit with the result.
    unsafe {
        std::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "mov rdi, r13",
            "call r12",
            "mov edi, eax",
            "mov eax, {exit}",
            "syscall",
            "ud2",
            "2:",
            exit = const libc::SYS_exit,
            inlateout("rax") libc::SYS_clone3 => ret,
            in("rdi") std::ptr::from_ref(args),
            in("rsi") size_of::<CloneArgs>(),
            in("r12") child,
            in("r13") arg,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    Some(ret)
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn raw(_args: &CloneArgs, _child: ChildFn, _arg: *mut c_void) -> Option<i64> {
    None
}

/// Whether spawns still try `clone3`; for the tests of the fallback.
#[cfg(test)]
pub(super) fn forget(available: bool) {
    UNAVAILABLE.store(!available, Ordering::Relaxed);
}
