//! The local secret of a server without tokens (`docs/design.md` §9).
//!
//! Without tokens, anyone who reaches the server lists and invokes, and
//! the tools it runs are among them. Deciding approvals, grants and admin
//! work needs this secret: made on first start, kept in the data directory
//! (mode 0600, and no tool may read that directory), and handed to the
//! person who started the server as a link, as Jupyter does. The command
//! line reads it from the same file.

use std::fs::OpenOptions;
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The file that holds it, in the data directory.
pub const FILE_NAME: &str = "local-secret";

/// Random bytes in a secret (64 hex digits).
const BYTES: usize = 32;

/// Where `data_dir` keeps its secret.
pub fn path(data_dir: &Path) -> PathBuf {
    data_dir.join(FILE_NAME)
}

/// The secret kept in `data_dir`, made there first if there is none.
/// Servers starting at once on one directory agree on one secret.
pub fn load_or_create(data_dir: &Path) -> io::Result<String> {
    load_or_create_named(data_dir, FILE_NAME)
}

/// A secret of the server's kept in file `name` of `data_dir` (the local
/// secret, the key of artifact links), made there first if there is none.
pub fn load_or_create_named(data_dir: &Path, name: &str) -> io::Result<String> {
    let file = data_dir.join(name);
    if let Some(secret) = read_own(&file)? {
        return Ok(secret);
    }
    std::fs::create_dir_all(data_dir)?;
    // Written whole beside it, then linked in unless one appeared meanwhile:
    // nobody ever reads half a secret.
    let mut staged = tempfile::Builder::new()
        .prefix(&format!(".{name}"))
        .permissions(std::fs::Permissions::from_mode(0o600))
        .tempfile_in(data_dir)?;
    staged.write_all(fresh()?.as_bytes())?;
    staged.as_file().sync_all()?;
    match staged.persist_noclobber(&file) {
        Ok(_) => {}
        Err(e) if e.error.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e.error),
    }
    read_own(&file)?.ok_or_else(|| io::Error::other("the secret vanished as it was made"))
}

/// The secret kept in `data_dir`, as the command line reads it: `None`
/// when there is none (the server has tokens, or never started there).
pub fn read(data_dir: &Path) -> io::Result<Option<String>> {
    match std::fs::read_to_string(path(data_dir)) {
        Ok(text) => parse(&text).map(Some),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The server's own secret file: not a link, this user's, and 0600 (a
/// looser one is tightened, with a warning: it may have been read).
fn read_own(file: &Path) -> io::Result<Option<String>> {
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(file);
    let opened = match opened {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(refusal(file, &e.to_string())),
    };
    let meta = opened.metadata()?;
    if !meta.is_file() || meta.uid() != nix::unistd::geteuid().as_raw() {
        return Err(refusal(file, "it is not a file of this user"));
    }
    if meta.mode() & 0o077 != 0 {
        tracing::warn!(file = %file.display(), mode = format!("{:o}", meta.mode() & 0o777),
            "a secret of the server could be read by others; made 0600 (remove the file for a new secret)");
        opened.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    let mut text = String::new();
    (&opened).take(4096).read_to_string(&mut text)?;
    parse(&text).map(Some).map_err(|e| refusal(file, &e.to_string()))
}

fn refusal(file: &Path, why: &str) -> io::Error {
    io::Error::other(format!(
        "cannot use the secret {}: {why}; remove it and start again for a new one",
        file.display()
    ))
}

/// A secret as the file holds it: hex digits, a line break allowed.
fn parse(text: &str) -> io::Result<String> {
    let secret = text.trim();
    if secret.len() < 32 || !secret.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(io::Error::other("it does not hold a secret of hex digits"));
    }
    Ok(secret.to_owned())
}

/// A new secret from the kernel's random source.
pub fn fresh() -> io::Result<String> {
    let mut bytes = [0u8; BYTES];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(hex::encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_once_private_and_then_reused() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let first = load_or_create(&data).unwrap();
        assert_eq!(first.len(), 2 * BYTES);
        let meta = std::fs::metadata(path(&data)).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600);
        assert_eq!(load_or_create(&data).unwrap(), first);
        assert_eq!(read(&data).unwrap(), Some(first.clone()));
        assert_eq!(read(dir.path()).unwrap(), None);
        // Nothing staged is left beside it.
        let names: Vec<_> = std::fs::read_dir(&data)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [FILE_NAME]);
        // Loosened, it is tightened again and kept.
        std::fs::set_permissions(path(&data), std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(load_or_create(&data).unwrap(), first);
        let meta = std::fs::metadata(path(&data)).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600);
    }

    #[test]
    fn a_link_or_garbage_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("elsewhere");
        std::fs::write(&elsewhere, "a".repeat(64)).unwrap();
        std::os::unix::fs::symlink(&elsewhere, path(dir.path())).unwrap();
        assert!(load_or_create(dir.path()).is_err());
        std::fs::remove_file(path(dir.path())).unwrap();
        std::fs::write(path(dir.path()), "not a secret").unwrap();
        let err = load_or_create(dir.path()).unwrap_err().to_string();
        assert!(err.contains("remove it"), "{err}");
    }
}
