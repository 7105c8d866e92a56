//! Finding the socket a run's `connect` names, as the run sees it, and
//! whether it is one of the run's own: a socket with a single link, of the
//! run's user, in a directory under one of the run's own directories.
//!
//! Everything is opened by descriptor from the run's root (or working
//! directory), never by a path of the server's: the run lives in another
//! mount namespace, and the tool can swap links while the server looks.

use rustix::fs::{Mode, OFlags, ResolveFlags, Stat, fstat, openat, openat2};
use rustix::io::Errno;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// How many directories above a socket are looked at for one of the run's
/// own: more than any path a `sockaddr_un` can hold has.
const MAX_DEPTH: usize = 64;

/// A directory or file by (device, inode).
pub(super) type Id = (u64, u64);

/// What the run calls its own.
#[derive(Debug, Clone, Copy)]
pub(super) struct Own<'a> {
    /// Directories under which its sockets may be.
    pub dirs: &'a [Id],
    /// Its user: a socket bound by anyone else is not the run's.
    pub uid: u32,
}

/// The run's view of the file system, taken from the calling thread.
pub(super) struct View {
    pub root: OwnedFd,
    /// Its working directory, opened only for a relative path.
    pub cwd: Option<OwnedFd>,
}

/// Why a socket is not the run's, for the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refusal {
    NotOwn,
    Linked,
    Foreign,
    Symlink,
    TooDeep,
}

impl Refusal {
    pub(super) fn why(self) -> &'static str {
        match self {
            Self::NotOwn => "not under the run's own directories",
            Self::Linked => "a socket with more than one link",
            Self::Foreign => "a socket another user bound",
            Self::Symlink => "a symbolic link",
            Self::TooDeep => "too deep to check",
        }
    }
}

/// The outcome of looking for a socket: the kernel's answer (the path
/// does not exist here, is no socket), or a refusal.
#[derive(Debug)]
pub(super) enum Missed {
    Errno(Errno),
    Refused(Refusal),
}

impl From<Errno> for Missed {
    fn from(errno: Errno) -> Self {
        Self::Errno(errno)
    }
}

pub(super) fn id(stat: &Stat) -> Id {
    (stat.st_dev, stat.st_ino)
}

/// The socket `path` names in `view`, opened `O_PATH` (so pinned) when
/// it is the run's own.
pub(super) fn own_socket(view: &View, path: &[u8], own: Own) -> Result<OwnedFd, Missed> {
    let (dir, name) = split(path);
    if matches!(name, b"" | b"." | b"..") {
        // A directory, which the kernel would not connect to either.
        return Err(Errno::CONNREFUSED.into());
    }
    let parent = open_dir(view, dir)?;
    let socket = openat(
        &parent,
        name,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let stat = fstat(&socket)?;
    let kind = stat.st_mode & libc::S_IFMT;
    if kind == libc::S_IFLNK {
        return Err(Missed::Refused(Refusal::Symlink));
    }
    if kind != libc::S_IFSOCK {
        return Err(Errno::CONNREFUSED.into());
    }
    if stat.st_nlink != 1 {
        return Err(Missed::Refused(Refusal::Linked));
    }
    if stat.st_uid != own.uid {
        return Err(Missed::Refused(Refusal::Foreign));
    }
    under_own(parent, &view.root, own.dirs)?;
    Ok(socket)
}

/// `path` as its directory and last component: `("/a", "b")` for
/// `/a/b`, `(".", "b")` for `b`, `("/", "b")` for `/b`.
fn split(path: &[u8]) -> (&[u8], &[u8]) {
    match path.iter().rposition(|&b| b == b'/') {
        Some(0) => (b"/", &path[1..]),
        Some(i) => (&path[..i], &path[i + 1..]),
        None => (b".", path),
    }
}

/// The directory `dir` names in the run's view. An absolute path is
/// resolved inside the run's root (its `..` and its symbolic links stay
/// there, as they would for the run). A relative one is resolved beneath
/// the run's working directory: one that climbs above it is refused,
/// since its `..` would need the run's root and working directory at once.
fn open_dir(view: &View, dir: &[u8]) -> Result<OwnedFd, Missed> {
    let how = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let (base, rel, resolve) = if let Some(rel) = dir.strip_prefix(b"/") {
        let rel: &[u8] = if rel.is_empty() { b"." } else { rel };
        (view.root.as_fd(), rel, ResolveFlags::IN_ROOT)
    } else {
        let cwd = view.cwd.as_ref().ok_or(Errno::NOENT)?;
        (cwd.as_fd(), dir, ResolveFlags::BENEATH)
    };
    // No magic link (`/proc/self/fd/3`): it would lead wherever that
    // descriptor does, in the server's process.
    match openat2(
        base,
        rel,
        how,
        Mode::empty(),
        resolve | ResolveFlags::NO_MAGICLINKS,
    ) {
        Ok(fd) => Ok(fd),
        Err(Errno::XDEV | Errno::LOOP) => Err(Missed::Refused(Refusal::NotOwn)),
        Err(errno) => Err(errno.into()),
    }
}

/// Whether `dir` is one of `own` or lies under one: its parents, walked by
/// descriptor up to the run's root.
fn under_own(dir: OwnedFd, root: &OwnedFd, own: &[Id]) -> Result<(), Missed> {
    let root = id(&fstat(root)?);
    let mut current = dir;
    for _ in 0..MAX_DEPTH {
        let here = id(&fstat(&current)?);
        if own.contains(&here) {
            return Ok(());
        }
        if here == root {
            return Err(Missed::Refused(Refusal::NotOwn));
        }
        let parent = openat(
            &current,
            "..",
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        if id(&fstat(&parent)?) == here {
            // The top of a file system no `..` leaves.
            return Err(Missed::Refused(Refusal::NotOwn));
        }
        current = parent;
    }
    Err(Missed::Refused(Refusal::TooDeep))
}

/// The run's own `/tmp` (a tmpfs of its own), by identity.
pub(super) fn private_tmp(root: BorrowedFd) -> Result<Id, Errno> {
    let tmp = openat2(
        root,
        "tmp",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::IN_ROOT | ResolveFlags::NO_SYMLINKS,
    )?;
    Ok(id(&fstat(&tmp)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;
    use std::os::unix::net::UnixListener;
    use std::path::Path;

    #[test]
    fn splits_like_the_kernel_names() {
        assert_eq!(split(b"/a/b"), (&b"/a"[..], &b"b"[..]));
        assert_eq!(split(b"/b"), (&b"/"[..], &b"b"[..]));
        assert_eq!(split(b"b"), (&b"."[..], &b"b"[..]));
        assert_eq!(split(b"a/b/"), (&b"a/b"[..], &b""[..]));
    }

    fn open(path: &Path) -> OwnedFd {
        rustix::fs::open(
            path,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .unwrap()
    }

    fn dir_id(path: &Path) -> Id {
        let meta = std::fs::metadata(path).unwrap();
        (meta.dev(), meta.ino())
    }

    /// Resolved as the server sees its own files (root `/`): only
    /// sockets with one link, of the right user, under the own directory.
    #[test]
    fn only_the_runs_own_sockets_pass() {
        let own_dir = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        let nested = own_dir.path().join("a/b");
        std::fs::create_dir_all(&nested).unwrap();
        let _mine = UnixListener::bind(nested.join("s")).unwrap();
        let _theirs = UnixListener::bind(other.path().join("s")).unwrap();
        let _linked = UnixListener::bind(other.path().join("t")).unwrap();
        std::fs::hard_link(other.path().join("t"), own_dir.path().join("linked")).unwrap();
        std::os::unix::fs::symlink(other.path().join("s"), own_dir.path().join("sym")).unwrap();
        std::fs::write(own_dir.path().join("file"), "").unwrap();
        let view = View {
            root: open(Path::new("/")),
            cwd: Some(open(own_dir.path())),
        };
        let uid = rustix::process::geteuid().as_raw();
        let own = Own {
            dirs: &[dir_id(own_dir.path())],
            uid,
        };
        let path = |p: &Path| p.as_os_str().as_encoded_bytes().to_vec();
        let check = |p: &[u8], own: Own| own_socket(&view, p, own).map(drop);
        assert!(check(&path(&nested.join("s")), own).is_ok());
        assert!(check(b"a/b/s", own).is_ok());
        assert!(check(b"a/../a/b/s", own).is_ok());
        let refused = |p: &[u8], own: Own| match check(p, own) {
            Err(Missed::Refused(why)) => Some(why),
            other => panic!("{}: {other:?}", String::from_utf8_lossy(p)),
        };
        assert_eq!(
            refused(&path(&other.path().join("s")), own),
            Some(Refusal::NotOwn)
        );
        assert_eq!(
            refused(&path(&own_dir.path().join("linked")), own),
            Some(Refusal::Linked)
        );
        assert_eq!(
            refused(&path(&own_dir.path().join("sym")), own),
            Some(Refusal::Symlink)
        );
        assert_eq!(refused(b"../x/s", own), Some(Refusal::NotOwn));
        let stranger = Own {
            dirs: own.dirs,
            uid: uid + 1,
        };
        assert_eq!(refused(b"a/b/s", stranger), Some(Refusal::Foreign));
        let errno = |p: &[u8]| match check(p, own) {
            Err(Missed::Errno(e)) => e,
            other => panic!("{other:?}"),
        };
        assert_eq!(errno(b"file"), Errno::CONNREFUSED);
        assert_eq!(errno(b"missing"), Errno::NOENT);
        assert_eq!(errno(b"a/"), Errno::CONNREFUSED);
    }
}
