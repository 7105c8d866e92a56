//! Programs on `PATH`: the one lookup shared by the skill loader (is a
//! runtime there?) and the runner (which file runs), and whether any user
//! may run a file. Plain file-system reads, so every layer may use it.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// What a lookup on `PATH` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    Found(PathBuf),
    /// Only files the caller may not execute carry the name.
    NotExecutable,
    NotFound,
}

/// `name` as a file in an absolute directory of `path` (a `PATH` value)
/// that `executable` accepts. Relative and empty entries are skipped:
/// POSIX reads them against the working directory, which a tool's caller
/// may control. One that any user can run ([`runnable_by_anyone`]) comes
/// first, since a sandboxed tool runs as another user; otherwise the
/// first in `PATH` order.
pub fn lookup(path: &OsStr, name: &str, executable: impl Fn(&Path) -> bool) -> Lookup {
    let mut not_executable = false;
    let mut first = None;
    for dir in std::env::split_paths(path).filter(|d| d.is_absolute()) {
        let candidate = dir.join(name);
        if !candidate.is_file() {
            continue;
        }
        if !executable(&candidate) {
            not_executable = true;
        } else if runnable_by_anyone(&candidate) {
            return Lookup::Found(candidate);
        } else if first.is_none() {
            first = Some(candidate);
        }
    }
    match first {
        Some(found) => Lookup::Found(found),
        None if not_executable => Lookup::NotExecutable,
        None => Lookup::NotFound,
    }
}

/// Whether some execute bit of `path` is set (following links).
pub fn has_execute_bit(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Whether any user can run `path`: it and every directory above it are
/// executable by others. A sandboxed tool runs as another user, so a
/// program under `/root` (a pyenv shim, say) is passed over for one
/// further down the PATH that it can run.
pub fn runnable_by_anyone(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let others_x = |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.permissions().mode() & 0o001 != 0);
    others_x(path) && path.ancestors().skip(1).all(others_x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn file(dir: &Path, name: &str, mode: u32) {
        let path = dir.join(name);
        std::fs::write(&path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn only_absolute_entries_and_executable_files_count() {
        let dir = tempfile::tempdir().unwrap();
        file(dir.path(), "plain", 0o644);
        file(dir.path(), "tool", 0o755);
        let abs = dir.path().as_os_str();
        assert_eq!(lookup(abs, "plain", has_execute_bit), Lookup::NotExecutable);
        assert_eq!(lookup(abs, "missing", has_execute_bit), Lookup::NotFound);
        assert_eq!(
            lookup(abs, "tool", has_execute_bit),
            Lookup::Found(dir.path().join("tool"))
        );
        // The same directory named relatively is never read.
        let cwd = std::env::current_dir().unwrap();
        let up = "../".repeat(cwd.components().count());
        let relative = format!("{up}{}", dir.path().display().to_string().trim_start_matches('/'));
        assert!(Path::new(&relative).join("tool").is_file(), "{relative}");
        assert_eq!(
            lookup(OsStr::new(&format!(":{relative}")), "tool", has_execute_bit),
            Lookup::NotFound
        );
    }
}
