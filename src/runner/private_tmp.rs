//! A run's own `/tmp`, made in the child between clone and exec: seed
//! 003's contract gives an entrypoint a writable, size-bounded `/tmp`
//! (tmpfs, noexec). The child leaves the runs' shared mount namespace for
//! a copy of its own, mounts a fresh tmpfs on `/tmp`, puts back what it
//! must still reach under `/tmp` (its skill or scratch directory, where
//! they lie there), and grants itself the new `/tmp` in its Landlock
//! ruleset, which is still open: the tmpfs did not exist when the parent
//! built it.
//!
//! Why by hand: mount and Landlock system calls in a child that shares the
//! server's memory, with only what the parent prepared (see `spawn.rs`).

#![expect(
    unsafe_code,
    reason = "mount, open_tree, move_mount and landlock_add_rule in the cloned child"
)]

use crate::sandbox::PrivateTmp;
use std::ffi::{CString, c_char, c_int};
use std::ptr;

/// `open_tree`'s and `move_mount`'s flags (linux/mount.h), which libc does
/// not define for every target.
const OPEN_TREE_CLONE: libc::c_uint = 1;
const AT_RECURSIVE: libc::c_uint = 0x8000;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
/// `LANDLOCK_RULE_PATH_BENEATH`.
const RULE_PATH_BENEATH: c_int = 1;

/// `struct landlock_path_beneath_attr`, packed as the kernel has it.
#[repr(C, packed)]
struct PathBeneath {
    allowed_access: u64,
    parent_fd: i32,
}

/// One place put back under the new `/tmp`.
#[repr(C)]
struct Kept {
    path: *const c_char,
    /// Directories to make first, outermost first.
    dirs: *const *const c_char,
    dir_count: usize,
    /// The place is a file: its mount point is an empty file.
    file: bool,
}

/// What the child reads, prepared by the parent and alive across the
/// clone; `trees` is where the child keeps the detached copies it takes.
pub(super) struct Plan {
    options: CString,
    access: [u64; 6],
    kept: Vec<Kept>,
    _dirs: Vec<Vec<*const c_char>>,
    trees: Vec<c_int>,
}

/// The raw view of a [`Plan`] the child gets.
#[repr(C)]
pub(super) struct Raw {
    options: *const c_char,
    access: [u64; 6],
    kept: *const Kept,
    kept_count: usize,
    trees: *mut c_int,
}

impl Plan {
    /// Everything `tmp` says, as the child's system calls take it. The
    /// strings stay in `tmp`, which outlives the spawn.
    pub(super) fn of(tmp: &PrivateTmp) -> Self {
        let dirs: Vec<Vec<*const c_char>> = tmp
            .kept
            .iter()
            .map(|k| k.dirs.iter().map(|d| d.as_ptr()).collect())
            .collect();
        let kept = tmp
            .kept
            .iter()
            .zip(&dirs)
            .map(|(k, d)| Kept {
                path: k.path.as_ptr(),
                dirs: d.as_ptr(),
                dir_count: d.len(),
                file: k.file,
            })
            .collect();
        Self {
            options: tmp.options.clone(),
            access: tmp.access,
            trees: vec![-1; tmp.kept.len()],
            kept,
            _dirs: dirs,
        }
    }

    pub(super) fn raw(&mut self) -> Raw {
        Raw {
            options: self.options.as_ptr(),
            access: self.access,
            kept: self.kept.as_ptr(),
            kept_count: self.kept.len(),
            trees: self.trees.as_mut_ptr(),
        }
    }
}

/// Makes the run's own `/tmp`; `false` (errno set) when a step failed.
///
/// # Safety
/// Only in the cloned child, after it joined the runs' mount namespace,
/// with `raw` from a [`Plan`] the parent keeps alive, and `landlock` the
/// run's ruleset (or -1).
pub(super) unsafe fn make(raw: &Raw, landlock: c_int) -> bool {
    // SAFETY: system calls on the plan's NUL-terminated strings and
    // arrays, valid until the child execs (passed on from the caller).
    unsafe {
        if libc::unshare(libc::CLONE_NEWNS) != 0 {
            return false;
        }
        for i in 0..raw.kept_count {
            let kept = &*raw.kept.add(i);
            let flags = OPEN_TREE_CLONE | AT_RECURSIVE | libc::O_CLOEXEC as libc::c_uint;
            let tree = libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, kept.path, flags);
            if tree < 0 {
                return false;
            }
            *raw.trees.add(i) = tree as c_int;
        }
        let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
        if libc::mount(
            c"tmpfs".as_ptr(),
            c"/tmp".as_ptr(),
            c"tmpfs".as_ptr(),
            flags,
            raw.options.cast(),
        ) != 0
        {
            return false;
        }
        for i in 0..raw.kept_count {
            if !put_back(&*raw.kept.add(i), *raw.trees.add(i)) {
                return false;
            }
        }
        landlock < 0 || grant(raw, landlock)
    }
}

/// Makes `kept`'s mount point in the new `/tmp` and moves its copy there.
///
/// # Safety
/// As for [`make`].
unsafe fn put_back(kept: &Kept, tree: c_int) -> bool {
    // SAFETY: passed on from `make`.
    unsafe {
        for d in 0..kept.dir_count {
            if libc::mkdir(*kept.dirs.add(d), 0o755) != 0 && *libc::__errno_location() != libc::EEXIST {
                return false;
            }
        }
        if kept.file {
            let fd = libc::open(kept.path, libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC, 0o644);
            if fd < 0 {
                return false;
            }
            libc::close(fd);
        }
        let moved = libc::syscall(
            libc::SYS_move_mount,
            tree,
            c"".as_ptr(),
            libc::AT_FDCWD,
            kept.path,
            MOVE_MOUNT_F_EMPTY_PATH,
        );
        libc::close(tree);
        moved == 0
    }
}

/// Adds the new `/tmp` to the run's ruleset with every right the ruleset
/// handles: the widest of the ABIs' sets the kernel takes.
///
/// # Safety
/// As for [`make`].
unsafe fn grant(raw: &Raw, landlock: c_int) -> bool {
    // SAFETY: passed on from `make`; `attr` lives across each call.
    unsafe {
        let dir = libc::open(
            c"/tmp".as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if dir < 0 {
            return false;
        }
        let mut added = false;
        for &access in &raw.access {
            let attr = PathBeneath {
                allowed_access: access,
                parent_fd: dir,
            };
            let rule = ptr::from_ref(&attr);
            if access != 0
                && libc::syscall(libc::SYS_landlock_add_rule, landlock, RULE_PATH_BENEATH, rule, 0) == 0
            {
                added = true;
                break;
            }
        }
        libc::close(dir);
        added
    }
}
