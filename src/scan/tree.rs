//! The files a scan reads: a directory (or one file) beneath a base the
//! server chose, walked through directory descriptors as
//! [`crate::fsafe`] opens files: no symbolic link is followed anywhere,
//! nothing above the base is reached, only regular files with a single
//! link are read, and places no tool may read (the data directory, the
//! scratch root, …) are left out. Bounded in entries, depth, files and
//! bytes; what is left out is said, not hidden.

use crate::fsafe;
use nix::dir::Dir;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{FileStat, Mode, SFlag};
use serde::Serialize;
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use utoipa::ToSchema;

/// How much one scan reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Files read, at most.
    pub files: usize,
    /// Directory entries looked at, at most (what is skipped too).
    pub entries: usize,
    /// Directories below the scanned one, at most.
    pub depth: u32,
    /// A larger file is skipped (`too_large`).
    pub file_bytes: u64,
    /// The scan stops reading once its files add up to this.
    pub total_bytes: u64,
}

impl Default for Bounds {
    fn default() -> Self {
        Self {
            files: 10_000,
            entries: 100_000,
            depth: 32,
            file_bytes: 1 << 20,
            total_bytes: 32 << 20,
        }
    }
}

/// The most skipped entries listed; the rest are counted only.
pub const MAX_SKIPPED_LISTED: usize = 1000;
/// Tools' caches and vendored dependencies: not the project's own code.
const VENDORED: [&str; 4] = [".git", "node_modules", ".venv", "__pycache__"];

/// A file read, as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanFile {
    /// '/'-separated, relative to the base (the workspace, an upload).
    pub path: String,
    pub text: String,
}

/// Why an entry was not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// A symbolic link: never followed.
    Link,
    /// A FIFO, socket or device.
    NotRegular,
    /// A regular file with more than one link: it may name a file from
    /// anywhere.
    HardLink,
    /// Larger than the per-file bound.
    TooLarge,
    /// Not UTF-8 text, or holding a NUL byte.
    Binary,
    /// A place no tool may read (the server's data, its scratch root).
    Protected,
    /// A tool's cache or vendored code (`.git`, `node_modules`, `.venv`,
    /// `__pycache__`).
    Vendored,
    /// A name that is not UTF-8, or an entry that could not be opened.
    Unreadable,
    /// Deeper than the walk goes.
    TooDeep,
}

/// An entry the scan did not read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct Skipped {
    /// '/'-separated, relative to the base.
    pub path: String,
    pub reason: SkipReason,
}

/// What a walk read and left out.
#[derive(Debug, Clone, Default)]
pub struct Tree {
    pub files: Vec<ScanFile>,
    /// At most [`MAX_SKIPPED_LISTED`].
    pub skipped: Vec<Skipped>,
    /// Every entry skipped, listed or not.
    pub skipped_count: usize,
    /// Which bound stopped the walk early, in words.
    pub incomplete: Option<String>,
    bytes: u64,
    entries: usize,
}

/// Why a path cannot be scanned at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Absolute, or climbing with `..`.
    #[error("'{0}' is not a path inside the workspace: give it relative, without '..'")]
    Outside(String),
    /// A symbolic link on the way or at the end.
    #[error("'{0}' passes through a symbolic link, which a scan never follows")]
    Link(String),
    /// A NUL byte, or longer than paths may be.
    #[error("'{0}' is not a path")]
    Invalid(String),
    /// A place no tool may read.
    #[error("'{0}' is a place no tool may read")]
    Protected(String),
    #[error("'{0}' does not exist")]
    NotFound(String),
    /// The base itself cannot be opened.
    #[error("the directory to scan cannot be opened: {0}")]
    Base(String),
}

/// Reads `rel` beneath `base` (`""` or `.` for `base` itself): every file
/// of a directory, within `bounds`, or the one file it names. Entries
/// under one of `protected` (real paths) are skipped.
pub fn read(base: &Path, rel: &str, protected: &[PathBuf], bounds: Bounds) -> Result<Tree, Refusal> {
    let base_fd = fsafe::open_base(base).map_err(|e| Refusal::Base(e.to_string()))?;
    let real_base = base.canonicalize().map_err(|e| Refusal::Base(e.to_string()))?;
    let shown = rel.escape_debug().to_string();
    let whole = rel.is_empty() || rel == ".";
    let rel_path = if whole {
        PathBuf::new()
    } else {
        downward(rel, &shown)?
    };
    let walk = Walk {
        root: real_base,
        protected,
        bounds,
    };
    let prefix: Vec<String> = rel_path
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let prefix = prefix.join("/");
    if walk.is_protected(&walk.root.join(&rel_path)) {
        return Err(Refusal::Protected(shown));
    }
    let target = if whole {
        base_fd
    } else {
        let flags = OFlag::O_RDONLY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW;
        fsafe::open_beneath(base_fd.as_fd(), &rel_path, flags).map_err(|_| why_not(base, &rel_path, shown))?
    };
    let mut tree = Tree::default();
    let stat = nix::sys::stat::fstat(&target).map_err(|e| Refusal::Base(e.to_string()))?;
    if kind(&stat) == SFlag::S_IFDIR {
        walk.dir(target, &prefix, 0, &mut tree);
    } else {
        walk.one_file(target, &stat, &prefix, &mut tree);
    }
    Ok(tree)
}

/// `rel` as a path that only goes down, or why not.
fn downward(rel: &str, shown: &str) -> Result<PathBuf, Refusal> {
    if rel.contains('\0') || rel.chars().count() > 4096 {
        return Err(Refusal::Invalid(shown.to_owned()));
    }
    fsafe::downward(rel).ok_or_else(|| Refusal::Outside(shown.to_owned()))
}

/// Why opening `rel` failed: a link on the way, or nothing there. Only
/// chooses the message; the safe open already refused.
fn why_not(base: &Path, rel: &Path, shown: String) -> Refusal {
    let mut at = base.to_path_buf();
    for part in rel.components() {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(meta) if meta.file_type().is_symlink() => return Refusal::Link(shown),
            Ok(_) => {}
            Err(_) => return Refusal::NotFound(shown),
        }
    }
    Refusal::NotFound(shown)
}

fn kind(stat: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT
}

/// One walk's settings.
struct Walk<'a> {
    /// The real path of the base.
    root: PathBuf,
    protected: &'a [PathBuf],
    bounds: Bounds,
}

impl Walk<'_> {
    fn is_protected(&self, real: &Path) -> bool {
        self.protected.iter().any(|p| real.starts_with(p))
    }

    /// Reads directory `fd` (at `prefix`), depth first, in name order so
    /// that the bounds keep the same files from one scan to the next.
    fn dir(&self, fd: OwnedFd, prefix: &str, depth: u32, tree: &mut Tree) {
        let Ok(mut dir) = Dir::from_fd(fd) else {
            return skip(tree, prefix, SkipReason::Unreadable);
        };
        for name in self.names(&mut dir, prefix, tree) {
            if tree.incomplete.is_some() {
                return;
            }
            let path = join(prefix, &name);
            self.entry(dir.as_fd(), &name, &path, depth, tree);
        }
    }

    /// The entries of `dir`, sorted, while the entry budget lasts.
    fn names(&self, dir: &mut Dir, prefix: &str, tree: &mut Tree) -> Vec<String> {
        let mut names = Vec::new();
        for entry in dir.iter().filter_map(Result::ok) {
            let raw = entry.file_name().to_bytes();
            if raw == b"." || raw == b".." {
                continue;
            }
            if tree.entries >= self.bounds.entries {
                tree.incomplete = Some(format!("a scan looks at most {} entries", self.bounds.entries));
                break;
            }
            tree.entries += 1;
            match entry.file_name().to_str() {
                Ok(name) => names.push(name.to_owned()),
                Err(_) => {
                    let lossy = String::from_utf8_lossy(raw);
                    skip(tree, &join(prefix, &lossy), SkipReason::Unreadable);
                }
            }
        }
        names.sort();
        names
    }

    fn entry(&self, dir: BorrowedFd<'_>, name: &str, path: &str, depth: u32, tree: &mut Tree) {
        if self.is_protected(&self.root.join(path)) {
            return skip(tree, path, SkipReason::Protected);
        }
        let Ok(stat) = nix::sys::stat::fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) else {
            return skip(tree, path, SkipReason::Unreadable);
        };
        let flags =
            OFlag::O_RDONLY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_NOCTTY;
        match kind(&stat) {
            SFlag::S_IFLNK => skip(tree, path, SkipReason::Link),
            SFlag::S_IFDIR if VENDORED.contains(&name) => skip(tree, path, SkipReason::Vendored),
            SFlag::S_IFDIR if depth >= self.bounds.depth => skip(tree, path, SkipReason::TooDeep),
            SFlag::S_IFDIR => {
                match nix::fcntl::openat(dir, name, flags | OFlag::O_DIRECTORY, Mode::empty()) {
                    Ok(child) => self.dir(child, path, depth + 1, tree),
                    Err(_) => skip(tree, path, SkipReason::Unreadable),
                }
            }
            SFlag::S_IFREG => match nix::fcntl::openat(dir, name, flags, Mode::empty()) {
                Ok(fd) => self.one_file(fd, &stat, path, tree),
                Err(_) => skip(tree, path, SkipReason::Unreadable),
            },
            _ => skip(tree, path, SkipReason::NotRegular),
        }
    }

    /// Reads the opened file `fd` as `path`, checked again through the
    /// descriptor: it must still be a regular file with one link.
    fn one_file(&self, fd: OwnedFd, before: &FileStat, path: &str, tree: &mut Tree) {
        let Ok(stat) = nix::sys::stat::fstat(&fd) else {
            return skip(tree, path, SkipReason::Unreadable);
        };
        if kind(&stat) != SFlag::S_IFREG || (stat.st_dev, stat.st_ino) != (before.st_dev, before.st_ino) {
            return skip(tree, path, SkipReason::NotRegular);
        }
        if !fsafe::is_own_file(&stat) {
            return skip(tree, path, SkipReason::HardLink);
        }
        let size = u64::try_from(stat.st_size).unwrap_or(u64::MAX);
        if size > self.bounds.file_bytes {
            return skip(tree, path, SkipReason::TooLarge);
        }
        if tree.files.len() >= self.bounds.files || tree.bytes.saturating_add(size) > self.bounds.total_bytes
        {
            tree.incomplete = Some(format!(
                "a scan reads at most {} files and {} bytes",
                self.bounds.files, self.bounds.total_bytes
            ));
            return;
        }
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        let limit = self.bounds.file_bytes;
        let read = std::fs::File::from(fd).take(limit + 1).read_to_end(&mut bytes);
        if read.is_err() {
            return skip(tree, path, SkipReason::Unreadable);
        }
        if bytes.len() as u64 > limit {
            return skip(tree, path, SkipReason::TooLarge);
        }
        tree.bytes += bytes.len() as u64;
        match String::from_utf8(bytes) {
            Ok(text) if !text.contains('\0') => tree.files.push(ScanFile {
                path: path.to_owned(),
                text,
            }),
            _ => skip(tree, path, SkipReason::Binary),
        }
    }
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_owned()
    } else {
        format!("{prefix}/{name}")
    }
}

fn skip(tree: &mut Tree, path: &str, reason: SkipReason) {
    tree.skipped_count += 1;
    if tree.skipped.len() < MAX_SKIPPED_LISTED {
        tree.skipped.push(Skipped {
            path: path.to_owned(),
            reason,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn paths(tree: &Tree) -> Vec<&str> {
        tree.files.iter().map(|f| f.path.as_str()).collect()
    }

    fn reasons(tree: &Tree) -> Vec<(&str, SkipReason)> {
        tree.skipped.iter().map(|s| (s.path.as_str(), s.reason)).collect()
    }

    #[test]
    fn reads_text_files_and_says_what_it_left_out() {
        let ws = tempfile::tempdir().unwrap();
        let d = ws.path();
        std::fs::create_dir_all(d.join("src/deep")).unwrap();
        std::fs::create_dir_all(d.join("node_modules")).unwrap();
        std::fs::write(d.join("src/a.py"), "a\n").unwrap();
        std::fs::write(d.join("src/deep/b.py"), "b\n").unwrap();
        std::fs::write(d.join("src/bin"), b"\xff\x00").unwrap();
        std::fs::write(d.join("src/big"), "x".repeat(20)).unwrap();
        std::fs::write(d.join("node_modules/x.js"), "x").unwrap();
        symlink("/etc", d.join("src/etc")).unwrap();
        symlink("/etc/passwd", d.join("src/passwd")).unwrap();
        std::fs::hard_link(d.join("src/a.py"), d.join("hard.py")).unwrap();
        nix::unistd::mkfifo(&d.join("src/fifo"), Mode::S_IRWXU).unwrap();
        let bounds = Bounds {
            file_bytes: 10,
            ..Bounds::default()
        };
        let tree = read(d, "", &[], bounds).unwrap();
        assert_eq!(paths(&tree), ["src/deep/b.py"]);
        use SkipReason::*;
        assert_eq!(
            reasons(&tree),
            [
                ("hard.py", HardLink),
                ("node_modules", Vendored),
                ("src/a.py", HardLink),
                ("src/big", TooLarge),
                ("src/bin", Binary),
                ("src/etc", Link),
                ("src/fifo", NotRegular),
                ("src/passwd", Link),
            ]
        );
        assert_eq!(tree.incomplete, None);
    }

    #[test]
    fn refuses_paths_that_leave_or_link() {
        let ws = tempfile::tempdir().unwrap();
        let d = ws.path();
        std::fs::create_dir(d.join("sub")).unwrap();
        symlink("/etc", d.join("etc")).unwrap();
        symlink(d.join("sub"), d.join("inside")).unwrap();
        let b = Bounds::default();
        assert!(matches!(read(d, "../x", &[], b), Err(Refusal::Outside(_))));
        assert!(matches!(read(d, "sub/../../x", &[], b), Err(Refusal::Outside(_))));
        assert!(matches!(read(d, "/etc", &[], b), Err(Refusal::Outside(_))));
        assert!(matches!(read(d, "etc", &[], b), Err(Refusal::Link(_))));
        assert!(matches!(read(d, "etc/passwd", &[], b), Err(Refusal::Link(_))));
        assert!(matches!(read(d, "inside", &[], b), Err(Refusal::Link(_))));
        assert!(matches!(read(d, "a\0b", &[], b), Err(Refusal::Invalid(_))));
        assert!(matches!(read(d, "missing", &[], b), Err(Refusal::NotFound(_))));
        assert!(read(d, "./sub", &[], b).is_ok());
    }

    #[test]
    fn protected_places_are_neither_scanned_nor_read() {
        let ws = tempfile::tempdir().unwrap();
        let d = ws.path().canonicalize().unwrap();
        std::fs::create_dir(d.join("data")).unwrap();
        std::fs::write(d.join("data/secret"), "token").unwrap();
        std::fs::write(d.join("ok.txt"), "fine").unwrap();
        let protected = [d.join("data")];
        let b = Bounds::default();
        let tree = read(&d, "", &protected, b).unwrap();
        assert_eq!(paths(&tree), ["ok.txt"]);
        assert_eq!(reasons(&tree), [("data", SkipReason::Protected)]);
        assert!(matches!(
            read(&d, "data/secret", &protected, b),
            Err(Refusal::Protected(_))
        ));
    }

    #[test]
    fn stops_at_its_bounds_and_says_so() {
        let ws = tempfile::tempdir().unwrap();
        for i in 0..5 {
            std::fs::write(ws.path().join(format!("f{i}")), "12345").unwrap();
        }
        let files = Bounds {
            files: 3,
            ..Bounds::default()
        };
        let tree = read(ws.path(), "", &[], files).unwrap();
        assert_eq!(paths(&tree), ["f0", "f1", "f2"]);
        assert!(tree.incomplete.is_some());
        let bytes = Bounds {
            total_bytes: 12,
            ..Bounds::default()
        };
        assert_eq!(read(ws.path(), "", &[], bytes).unwrap().files.len(), 2);
        let one = read(ws.path(), "f4", &[], Bounds::default()).unwrap();
        assert_eq!(paths(&one), ["f4"]);
        std::fs::create_dir_all(ws.path().join("a/b")).unwrap();
        std::fs::write(ws.path().join("a/b/c"), "c").unwrap();
        let below = read(ws.path(), "./a//b", &[], Bounds::default()).unwrap();
        assert_eq!(paths(&below), ["a/b/c"]);
        let file = read(ws.path(), "a/b/c", &[], Bounds::default()).unwrap();
        assert_eq!(paths(&file), ["a/b/c"]);
    }
}
