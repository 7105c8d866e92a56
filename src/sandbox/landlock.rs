//! The Landlock ruleset of one run: what it may read, run and write.

use landlock::{
    ABI, Access, AccessFs, AccessNet, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus, Scope,
};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

/// The ABI this code is written and tested against: files, TCP ports,
/// and the signal and abstract-socket scopes. Older kernels get what they
/// support (best effort), which `/readyz` reports.
const TARGET: ABI = ABI::V6;

/// A carve-out never grants more entries than this; past it the directory
/// is left out whole (fail closed).
const MAX_CARVED: usize = 4096;

/// The system's read-only parts every program needs.
pub(super) const SYSTEM: [&str; 10] = [
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/proc",
];

/// Device files a program may read and write.
const DEVICES: [&str; 4] = ["/dev/null", "/dev/zero", "/dev/full", "/dev/tty"];

/// What one run may touch, by path.
#[derive(Debug, Default)]
pub(super) struct Grants {
    pub read: Vec<PathBuf>,
    pub write: Vec<PathBuf>,
    /// No TCP connect or bind at all (`network: false`).
    pub no_tcp: bool,
}

/// How much of the ruleset this kernel enforces, learnt once by applying
/// one to a throwaway thread.
pub(super) fn probe() -> RulesetStatus {
    let attempt = std::thread::Builder::new()
        .name("skilld-landlock".to_owned())
        .spawn(|| {
            // Restricts only this thread, which ends right after.
            let status = Ruleset::default()
                .handle_access(AccessFs::from_all(TARGET))
                .and_then(|r| r.scope(Scope::from_all(TARGET)))
                .and_then(|r| r.create())
                .and_then(|r| r.restrict_self());
            status.map(|s| s.ruleset)
        })
        .ok()
        .and_then(|t| t.join().ok());
    match attempt {
        Some(Ok(status)) => status,
        Some(Err(err)) => {
            tracing::info!(%err, "Landlock unavailable");
            RulesetStatus::NotEnforced
        }
        None => RulesetStatus::NotEnforced,
    }
}

/// Builds the ruleset; the child applies it with `landlock_restrict_self`.
/// `None` when the kernel has no Landlock.
pub(super) fn ruleset(access: &Grants) -> Result<Option<OwnedFd>, landlock::RulesetError> {
    let mut ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(TARGET))?
        .scope(Scope::from_all(TARGET))?;
    if access.no_tcp {
        ruleset = ruleset.handle_access(AccessNet::from_all(TARGET))?;
    }
    let mut created = ruleset.create()?;
    let read = AccessFs::from_read(TARGET);
    let all = AccessFs::from_all(TARGET);
    for (paths, rights) in [(&access.read, read), (&access.write, all)] {
        for path in paths {
            created = add(created, path, rights)?;
        }
    }
    for device in DEVICES {
        created = add(created, Path::new(device), AccessFs::from_file(TARGET))?;
    }
    created = add(created, Path::new("/dev"), read)?;
    Ok(created.into())
}

/// Adds one rule; a path that does not exist (`/lib32`) is skipped.
fn add(
    created: landlock::RulesetCreated,
    path: &Path,
    rights: enumflags2::BitFlags<AccessFs>,
) -> Result<landlock::RulesetCreated, landlock::RulesetError> {
    let Ok(fd) = PathFd::new(path) else {
        return Ok(created);
    };
    let is_dir = path.is_dir();
    let rights = if is_dir {
        rights
    } else {
        rights & AccessFs::from_file(TARGET)
    };
    created.add_rule(PathBeneath::new(fd, rights))
}

/// `root`, or when one of `protected` lies inside it, every entry of
/// `root` but the ones leading to a protected path, recursively: Landlock
/// only ever adds access, so a hole is made by granting around it.
/// Entries are taken by their real paths, so a symlink to a protected
/// place is left out too. Entries made later inside a carved directory are
/// not granted.
pub(super) fn around(root: &Path, protected: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(root) = root.canonicalize() else {
        return out;
    };
    carve(&root, &root, protected, &mut out);
    if out.len() > MAX_CARVED {
        tracing::warn!(root = %root.display(), "too many entries around protected paths; not granted");
        out.clear();
    }
    out
}

fn carve(root: &Path, dir: &Path, protected: &[PathBuf], out: &mut Vec<PathBuf>) {
    if protected.iter().any(|p| dir.starts_with(p)) {
        return;
    }
    if !protected.iter().any(|p| p.starts_with(dir)) {
        out.push(dir.to_path_buf());
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        if out.len() > MAX_CARVED {
            return;
        }
        // A symlink out of `root` is not followed: Landlock would not
        // grant its target through `root` either.
        let Ok(real) = entry.path().canonicalize() else {
            continue;
        };
        if !real.starts_with(root) {
            continue;
        }
        if real.is_dir() {
            carve(root, &real, protected, out);
        } else if !protected.iter().any(|p| real.starts_with(p)) {
            out.push(real);
        }
    }
}
