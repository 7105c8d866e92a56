//! Taking a version's `env/` back from the sandbox's user once its
//! installers are done: every entry becomes the server's user's, with
//! plain modes (directories `rwxr-xr-x`, files `rw-r--r--` or
//! `rwxr-xr-x`, no set-id bits), so no later run, which is that same
//! sandbox user, can change the dependencies it runs with.
//!
//! The walk follows no link and names nothing by a path an installer
//! could have bent: each directory is opened beneath its parent's
//! descriptor with `O_NOFOLLOW`, and taken back before it is listed, so
//! nothing of the sandbox's user can add to it after. What an installer
//! has no reason to leave is removed rather than taken: a hard link (it
//! could name a file outside `env/`), a pipe, a socket.

use nix::fcntl::{AtFlags, OFlag, open, openat};
use nix::sys::stat::{FileStat, Mode, SFlag, fstatat};
use nix::unistd::{Gid, Uid, UnlinkatFlags, fchownat, unlinkat};
use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// Deeper directories fail the install: the walk holds one descriptor per
/// level.
const MAX_DEPTH: usize = 256;

/// Makes everything under `env` (and `env` itself) the server's user's.
pub fn hand_back(env: &Path) -> io::Result<()> {
    let owner = (nix::unistd::geteuid(), nix::unistd::getegid());
    let top = open(env, dir_flags(), Mode::empty())?;
    settle(&top, 0o755, owner)?;
    // Directories are opened when their turn comes, so the descriptors
    // held are those of the current path's ancestors.
    let mut pending: Vec<(Rc<OwnedFd>, OsString, usize)> = Vec::new();
    push_entries(&Rc::new(top), 1, &mut pending)?;
    while let Some((parent, name, depth)) = pending.pop() {
        let stat = fstatat(parent.as_ref(), name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW)?;
        match SFlag::from_bits_truncate(stat.st_mode & SFlag::S_IFMT.bits()) {
            SFlag::S_IFDIR => {
                if depth > MAX_DEPTH {
                    return Err(io::Error::other(format!(
                        "the dependencies nest more than {MAX_DEPTH} directories deep"
                    )));
                }
                let dir = openat(parent.as_ref(), name.as_os_str(), dir_flags(), Mode::empty())?;
                settle(&dir, 0o755, owner)?;
                push_entries(&Rc::new(dir), depth + 1, &mut pending)?;
            }
            SFlag::S_IFREG if stat.st_nlink == 1 => take_file(&parent, &name, &stat, owner)?,
            SFlag::S_IFLNK => fchownat(
                parent.as_ref(),
                name.as_os_str(),
                Some(owner.0),
                Some(owner.1),
                AtFlags::AT_SYMLINK_NOFOLLOW,
            )?,
            _ => unlinkat(parent.as_ref(), name.as_os_str(), UnlinkatFlags::NoRemoveDir)?,
        }
    }
    Ok(())
}

/// A descriptor that names a directory and nothing more: no link is
/// followed, no read permission is needed.
fn dir_flags() -> OFlag {
    OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC
}

/// Queues the entries of `dir`, which is already the server's.
fn push_entries(
    dir: &Rc<OwnedFd>,
    depth: usize,
    out: &mut Vec<(Rc<OwnedFd>, OsString, usize)>,
) -> io::Result<()> {
    for entry in std::fs::read_dir(through(dir))? {
        out.push((dir.clone(), entry?.file_name(), depth));
    }
    Ok(())
}

/// A regular file with one link: opened beneath its directory without
/// following a link, then taken through that descriptor.
fn take_file(parent: &OwnedFd, name: &OsString, stat: &FileStat, owner: (Uid, Gid)) -> io::Result<()> {
    let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let file = openat(parent, name.as_os_str(), flags, Mode::empty())?;
    let opened = nix::sys::stat::fstat(&file)?;
    if (opened.st_dev, opened.st_ino) != (stat.st_dev, stat.st_ino) {
        return Err(io::Error::other(
            "an installed file changed while it was taken back",
        ));
    }
    let mode = if stat.st_mode & 0o111 != 0 { 0o755 } else { 0o644 };
    settle(&file, mode, owner)
}

/// Owner and mode set through `fd` (by its `/proc/self/fd` entry, which
/// reaches the very file an `O_PATH` descriptor names).
fn settle(fd: &OwnedFd, mode: u32, owner: (Uid, Gid)) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let path = through(fd);
    std::os::unix::fs::chown(&path, Some(owner.0.as_raw()), Some(owner.1.as_raw()))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
}

fn through(fd: &OwnedFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    #[test]
    fn links_are_not_followed_and_odd_entries_go() {
        let env = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("victim");
        std::fs::write(&victim, "x").unwrap();
        std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
        let venv = env.path().join("venv/bin");
        std::fs::create_dir_all(&venv).unwrap();
        std::fs::write(venv.join("tool"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(venv.join("tool"), std::fs::Permissions::from_mode(0o4777)).unwrap();
        std::fs::write(env.path().join("data"), "d").unwrap();
        std::fs::set_permissions(env.path().join("data"), std::fs::Permissions::from_mode(0o666)).unwrap();
        std::os::unix::fs::symlink(&victim, env.path().join("link")).unwrap();
        std::os::unix::fs::symlink(outside.path(), env.path().join("dirlink")).unwrap();
        std::fs::hard_link(&victim, env.path().join("hard")).unwrap();
        nix::unistd::mkfifo(&env.path().join("fifo"), Mode::from_bits_truncate(0o600)).unwrap();

        hand_back(env.path()).unwrap();

        let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().mode() & 0o7777;
        assert_eq!(
            mode(&venv.join("tool")),
            0o755,
            "set-id and group/other write dropped"
        );
        assert_eq!(mode(&env.path().join("data")), 0o644);
        assert_eq!(mode(&venv), 0o755);
        assert_eq!(mode(&victim), 0o600, "the link's target is untouched");
        assert!(env.path().join("link").symlink_metadata().unwrap().is_symlink());
        assert!(
            !env.path().join("hard").exists() && victim.exists(),
            "the hard link goes"
        );
        assert!(!env.path().join("fifo").exists());
        let me = nix::unistd::geteuid().as_raw();
        assert_eq!(std::fs::symlink_metadata(venv.join("tool")).unwrap().uid(), me);
    }

    #[test]
    fn too_deep_a_tree_is_refused() {
        let env = tempfile::tempdir().unwrap();
        let mut deep = env.path().to_path_buf();
        for _ in 0..=MAX_DEPTH {
            deep.push("d");
        }
        std::fs::create_dir_all(&deep).unwrap();
        assert!(hand_back(env.path()).is_err());
    }
}
