//! Opening what a tool could have touched, through a directory the server
//! owns. A tool may replace any file or directory it can write with a
//! symbolic link, a hard link, a FIFO or a device before the server reads
//! it; paths checked first and opened later (`canonicalize`, then `open`)
//! lose that race, and resolving the base directory too lets a link in the
//! base itself carry every path "inside" (issue 24).
//!
//! So every such path is opened relative to a directory descriptor with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`:
//! no link is followed anywhere on the way, nothing above the base is
//! reached. Without `openat2` (Linux before 5.6) the path is walked one
//! component at a time with `O_NOFOLLOW`, with the same guarantees. Only a
//! regular file with a single link is read: a FIFO would block the reader
//! (opens are `O_NONBLOCK`), a device is not a tool's output, and a hard
//! link the tool planted names a file that is not its own.
//!
//! Everything here blocks; async callers use [`read`], which runs it on
//! the blocking pool within a time bound.

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::{FileStat, Mode, SFlag};
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

/// Why a file was not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// Missing, a link or `..` on the way, an absolute path, not a regular
    /// file, or a file with more than one link: all answer alike, so that
    /// nobody learns what is there.
    #[error("not found")]
    NotFound,
    /// A regular file over the limit.
    #[error("larger than {0} bytes")]
    TooLarge(u64),
    /// The file system did not answer in time.
    #[error("not read within {0:?}")]
    TimedOut(Duration),
}

/// Flags every open here carries.
fn always() -> OFlag {
    OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK | OFlag::O_NOCTTY
}

/// Opens a directory the server chose (a skill directory, the scratch
/// root) as the base of later opens. Its own path is the server's
/// configuration, so it is resolved as usual.
pub fn open_base(dir: &Path) -> std::io::Result<OwnedFd> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    Ok(nix::fcntl::open(dir, flags, Mode::empty())?)
}

/// `rel` as a path that can only go down: relative, made of plain names
/// (`.` dropped), not empty. `None` for `..`, an absolute path or NUL.
pub fn downward(rel: &str) -> Option<PathBuf> {
    if rel.contains('\0') {
        return None;
    }
    let mut out = PathBuf::new();
    for c in Path::new(rel).components() {
        match c {
            Component::Normal(name) => out.push(name),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    (!out.as_os_str().is_empty()).then_some(out)
}

/// Opens `rel` (see [`downward`]) beneath `base` with `flags`, following
/// no link on the way or at the end.
pub fn open_beneath(base: BorrowedFd<'_>, rel: &Path, flags: OFlag) -> std::io::Result<OwnedFd> {
    open_with_mode(base, rel, flags, Mode::empty())
}

/// [`open_beneath`] with the mode a file it creates gets.
fn open_with_mode(base: BorrowedFd<'_>, rel: &Path, flags: OFlag, mode: Mode) -> std::io::Result<OwnedFd> {
    let how = OpenHow::new().flags(flags | always()).mode(mode).resolve(
        ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS | ResolveFlag::RESOLVE_NO_MAGICLINKS,
    );
    match nix::fcntl::openat2(base, rel, how) {
        Err(Errno::ENOSYS) => walk(base, rel, flags, mode),
        opened => Ok(opened?),
    }
}

/// Writes `bytes` to `rel` (see [`downward`]) beneath `base`, following
/// no link on the way or at the end: a new file (`rw-r--r--`), or one
/// that is already a regular file with a single link, replaced in place
/// (checked before it is cut, so a hard link planted there is not).
/// Its directory must exist.
pub fn write_beneath(base: BorrowedFd<'_>, rel: &str, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let rel = downward(rel).ok_or_else(|| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    let fd = open_with_mode(
        base,
        &rel,
        OFlag::O_WRONLY | OFlag::O_CREAT,
        Mode::from_bits_truncate(0o644),
    )?;
    let stat = nix::sys::stat::fstat(&fd)?;
    if !is_own_file(&stat) {
        return Err(std::io::Error::from(std::io::ErrorKind::InvalidInput));
    }
    nix::unistd::ftruncate(&fd, 0)?;
    std::fs::File::from(fd).write_all(bytes)
}

/// [`open_beneath`] without `openat2`: each directory on the way is
/// opened from the one before with `O_NOFOLLOW | O_DIRECTORY`, so a link
/// anywhere fails with `ELOOP` or `ENOTDIR`.
fn walk(base: BorrowedFd<'_>, rel: &Path, flags: OFlag, mode: Mode) -> std::io::Result<OwnedFd> {
    let names: Vec<&std::ffi::OsStr> = rel
        .components()
        .map(|c| match c {
            Component::Normal(name) => Ok(name),
            _ => Err(std::io::Error::from(std::io::ErrorKind::InvalidInput)),
        })
        .collect::<Result<_, _>>()?;
    let Some((last, dirs)) = names.split_last() else {
        return Err(std::io::ErrorKind::InvalidInput.into());
    };
    let mut at: Option<OwnedFd> = None;
    for name in dirs {
        let from = at.as_ref().map_or(base, AsFd::as_fd);
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | always();
        at = Some(nix::fcntl::openat(from, *name, flags, Mode::empty())?);
    }
    let from = at.as_ref().map_or(base, AsFd::as_fd);
    Ok(nix::fcntl::openat(from, *last, flags | always(), mode)?)
}

/// Whether `stat` is a regular file with one link: a tool's own output.
pub fn is_own_file(stat: &FileStat) -> bool {
    SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT == SFlag::S_IFREG && stat.st_nlink == 1
}

/// The bytes of `rel` beneath `base`: a regular file with one link, at
/// most `limit` bytes (checked again while reading, should it grow).
pub fn read_beneath(base: BorrowedFd<'_>, rel: &str, limit: u64) -> Result<Vec<u8>, Refused> {
    let rel = downward(rel).ok_or(Refused::NotFound)?;
    let fd = open_beneath(base, &rel, OFlag::O_RDONLY).map_err(|_| Refused::NotFound)?;
    let stat = nix::sys::stat::fstat(&fd).map_err(|_| Refused::NotFound)?;
    if !is_own_file(&stat) {
        return Err(Refused::NotFound);
    }
    let len = u64::try_from(stat.st_size).unwrap_or(u64::MAX);
    if len > limit {
        return Err(Refused::TooLarge(limit));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    std::fs::File::from(fd)
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|_| Refused::NotFound)?;
    if bytes.len() as u64 > limit {
        return Err(Refused::TooLarge(limit));
    }
    Ok(bytes)
}

/// Whether `rel` beneath `base` is a file [`read_beneath`] would read
/// (size aside).
pub fn is_file_beneath(base: BorrowedFd<'_>, rel: &str) -> bool {
    downward(rel)
        .and_then(|rel| open_beneath(base, &rel, OFlag::O_RDONLY).ok())
        .and_then(|fd| nix::sys::stat::fstat(&fd).ok())
        .is_some_and(|stat| is_own_file(&stat))
}

/// [`read_beneath`] of `rel` beneath the directory `base`, on the blocking
/// pool, given up after `within` (the thread then finishes on its own).
pub async fn read(base: PathBuf, rel: String, limit: u64, within: Duration) -> Result<Vec<u8>, Refused> {
    let job = tokio::task::spawn_blocking(move || {
        let fd = open_base(&base).map_err(|_| Refused::NotFound)?;
        read_beneath(fd.as_fd(), &rel, limit)
    });
    match tokio::time::timeout(within, job).await {
        Ok(Ok(read)) => read,
        Ok(Err(_)) => Err(Refused::NotFound),
        Err(_) => Err(Refused::TimedOut(within)),
    }
}

/// A regular file found by [`list_files`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// `/`-separated, relative to the listed directory.
    pub path: String,
    pub size: u64,
}

/// Bounds of a [`list_files`] walk.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// Files listed, at most.
    pub files: usize,
    /// Entries looked at, at most (directories and what is skipped too).
    pub entries: usize,
    /// Directories below the listed one, at most.
    pub depth: u32,
}

/// The regular single-link files under `rel` beneath `base`, not sorted.
/// Each directory is entered through the descriptor of its parent with
/// `O_NOFOLLOW`, so a directory swapped for a link while the walk runs is
/// skipped, never followed. Names that are not UTF-8 are skipped.
pub fn list_files(base: BorrowedFd<'_>, rel: &str, bounds: Bounds) -> Vec<Listed> {
    let mut out = Vec::new();
    let Some(rel) = downward(rel) else { return out };
    let Ok(fd) = open_beneath(base, &rel, OFlag::O_RDONLY | OFlag::O_DIRECTORY) else {
        return out;
    };
    let mut budget = bounds.entries;
    list_dir(fd, "", 0, bounds, &mut budget, &mut out);
    out
}

fn list_dir(
    fd: OwnedFd,
    prefix: &str,
    depth: u32,
    bounds: Bounds,
    budget: &mut usize,
    out: &mut Vec<Listed>,
) {
    let Ok(mut dir) = nix::dir::Dir::from_fd(fd) else {
        return;
    };
    let names = entry_names(&mut dir, budget);
    for name in names {
        if out.len() >= bounds.files {
            return;
        }
        let Ok(stat) = nix::sys::stat::fstatat(dir.as_fd(), name.as_str(), AtFlags::AT_SYMLINK_NOFOLLOW)
        else {
            continue;
        };
        let path = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}/{name}")
        };
        let kind = SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT;
        if kind == SFlag::S_IFDIR && depth < bounds.depth {
            let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | always();
            if let Ok(child) = nix::fcntl::openat(dir.as_fd(), name.as_str(), flags, Mode::empty()) {
                list_dir(child, &path, depth + 1, bounds, budget, out);
            }
        } else if is_own_file(&stat) {
            let size = u64::try_from(stat.st_size).unwrap_or(0);
            out.push(Listed { path, size });
        }
    }
}

/// The names in `dir` (not `.` or `..`), while `budget` lasts.
fn entry_names(dir: &mut nix::dir::Dir, budget: &mut usize) -> Vec<String> {
    let mut names = Vec::new();
    for entry in dir.iter().filter_map(Result::ok) {
        let Ok(name) = entry.file_name().to_str() else {
            continue;
        };
        if name == "." || name == ".." {
            continue;
        }
        if *budget == 0 {
            break;
        }
        *budget -= 1;
        names.push(name.to_owned());
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn base(dir: &Path) -> OwnedFd {
        open_base(dir).unwrap()
    }

    fn read(dir: &Path, rel: &str, limit: u64) -> Result<Vec<u8>, Refused> {
        read_beneath(base(dir).as_fd(), rel, limit)
    }

    #[test]
    fn reads_a_regular_file_below() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        std::fs::write(dir.path().join("a/b/c.txt"), "hi").unwrap();
        assert_eq!(read(dir.path(), "a/b/c.txt", 10), Ok(b"hi".to_vec()));
        assert_eq!(read(dir.path(), "./a/./b/c.txt", 10), Ok(b"hi".to_vec()));
    }

    #[test]
    fn refuses_a_link_anywhere_on_the_way() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir_all(&real).unwrap();
        std::fs::write(real.join("f.txt"), "inside").unwrap();
        symlink(&real, dir.path().join("via")).unwrap();
        symlink("real", dir.path().join("rel")).unwrap();
        symlink("/", dir.path().join("root")).unwrap();
        symlink(real.join("f.txt"), dir.path().join("last.txt")).unwrap();
        for rel in ["via/f.txt", "rel/f.txt", "root/etc/passwd", "last.txt"] {
            assert_eq!(read(dir.path(), rel, 1 << 20), Err(Refused::NotFound), "{rel}");
        }
    }

    #[test]
    fn refuses_dot_dot_absolute_and_empty_paths() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a")).unwrap();
        std::fs::write(dir.path().join("f.txt"), "x").unwrap();
        for rel in ["a/../f.txt", "../f.txt", "/etc/passwd", "", ".", "a/\0"] {
            assert_eq!(
                read(&dir.path().join("a"), rel, 10),
                Err(Refused::NotFound),
                "{rel:?}"
            );
        }
    }

    #[test]
    fn refuses_a_fifo_without_blocking_and_a_device() {
        let dir = tempfile::tempdir().unwrap();
        nix::unistd::mkfifo(&dir.path().join("fifo"), Mode::S_IRWXU).unwrap();
        let started = std::time::Instant::now();
        assert_eq!(read(dir.path(), "fifo", 10), Err(Refused::NotFound));
        assert!(started.elapsed() < Duration::from_secs(1));
        // A device node needs CAP_MKNOD; /dev itself is a base like any other.
        assert_eq!(read(Path::new("/dev"), "null", 10), Err(Refused::NotFound));
        assert_eq!(read(dir.path(), "missing", 10), Err(Refused::NotFound));
        assert_eq!(read(dir.path(), ".", 10), Err(Refused::NotFound));
    }

    #[test]
    fn refuses_a_file_with_another_link() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f.txt"), "x").unwrap();
        std::fs::hard_link(dir.path().join("f.txt"), dir.path().join("g.txt")).unwrap();
        assert_eq!(read(dir.path(), "g.txt", 10), Err(Refused::NotFound));
        assert_eq!(read(dir.path(), "f.txt", 10), Err(Refused::NotFound));
    }

    #[test]
    fn refuses_what_is_too_large() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f.txt"), "12345").unwrap();
        assert_eq!(read(dir.path(), "f.txt", 4), Err(Refused::TooLarge(4)));
        assert_eq!(read(dir.path(), "f.txt", 5), Ok(b"12345".to_vec()));
    }

    #[test]
    fn writes_only_a_file_of_its_own_below() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("a")).unwrap();
        let fd = base(dir.path());
        write_beneath(fd.as_fd(), "a/new.txt", b"one").unwrap();
        write_beneath(fd.as_fd(), "a/new.txt", b"2").unwrap();
        assert_eq!(std::fs::read(dir.path().join("a/new.txt")).unwrap(), b"2");
        let mode = std::fs::metadata(dir.path().join("a/new.txt"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o644);
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("victim"), "keep").unwrap();
        symlink(outside.path().join("victim"), dir.path().join("link")).unwrap();
        std::fs::hard_link(outside.path().join("victim"), dir.path().join("hard")).unwrap();
        symlink(outside.path(), dir.path().join("dirlink")).unwrap();
        for rel in ["link", "hard", "dirlink/victim", "../x", "/x", "missing/x"] {
            assert!(write_beneath(fd.as_fd(), rel, b"gone").is_err(), "{rel}");
        }
        assert_eq!(std::fs::read(outside.path().join("victim")).unwrap(), b"keep");
    }

    #[test]
    fn the_walk_without_openat2_follows_no_link_either() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        std::fs::write(dir.path().join("a/b/f"), "x").unwrap();
        symlink(dir.path().join("a"), dir.path().join("l")).unwrap();
        symlink(dir.path().join("a/b/f"), dir.path().join("a/lf")).unwrap();
        let fd = base(dir.path());
        assert!(walk(fd.as_fd(), Path::new("a/b/f"), OFlag::O_RDONLY, Mode::empty()).is_ok());
        for rel in ["l/b/f", "a/lf", "a/../a/b/f"] {
            assert!(
                walk(fd.as_fd(), Path::new(rel), OFlag::O_RDONLY, Mode::empty()).is_err(),
                "{rel}"
            );
        }
    }

    #[test]
    fn lists_only_real_files_within_bounds() {
        let dir = tempfile::tempdir().unwrap();
        let files = dir.path().join("files");
        std::fs::create_dir_all(files.join("sub/deeper")).unwrap();
        std::fs::write(files.join("a.txt"), "aa").unwrap();
        std::fs::write(files.join("sub/b.txt"), "b").unwrap();
        std::fs::write(files.join("sub/deeper/c.txt"), "c").unwrap();
        std::fs::write(dir.path().join("outside.txt"), "o").unwrap();
        symlink("/etc", files.join("etc")).unwrap();
        symlink(dir.path().join("outside.txt"), files.join("o.txt")).unwrap();
        std::fs::hard_link(dir.path().join("outside.txt"), files.join("h.txt")).unwrap();
        nix::unistd::mkfifo(&files.join("fifo"), Mode::S_IRWXU).unwrap();
        let bounds = Bounds {
            files: 100,
            entries: 100,
            depth: 1,
        };
        let mut got = list_files(base(dir.path()).as_fd(), "files", bounds);
        got.sort_by(|a, b| a.path.cmp(&b.path));
        let want = [("a.txt", 2), ("sub/b.txt", 1)];
        let want: Vec<Listed> = want
            .iter()
            .map(|(p, s)| Listed {
                path: (*p).to_owned(),
                size: *s,
            })
            .collect();
        assert_eq!(got, want);
        let one = Bounds { files: 1, ..bounds };
        assert_eq!(list_files(base(dir.path()).as_fd(), "files", one).len(), 1);
        symlink(&files, dir.path().join("link")).unwrap();
        assert_eq!(list_files(base(dir.path()).as_fd(), "link", bounds), Vec::new());
    }
}
