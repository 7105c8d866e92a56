//! The Landlock ruleset of one run: what it may read, run and write.

use enumflags2::BitFlags;
use landlock::{
    ABI, Access, AccessFs, AccessNet, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus, Scope,
};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
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

/// Device files a program may read and write. Not `/dev/tty`: a run has
/// no controlling terminal, and no other terminal is its business.
const DEVICES: [&str; 3] = ["/dev/null", "/dev/zero", "/dev/full"];

/// Device files a program may only read.
const READ_DEVICES: [&str; 2] = ["/dev/random", "/dev/urandom"];

/// What one run may touch, by path.
#[derive(Debug, Default)]
pub(super) struct Grants {
    pub read: Vec<PathBuf>,
    pub write: Vec<PathBuf>,
    /// Directories that may only be listed: those on the way to a
    /// protected place inside a granted one.
    pub list: Vec<PathBuf>,
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
                .and_then(landlock::Ruleset::create)
                .and_then(landlock::RulesetCreated::restrict_self);
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

/// The rules of every run that name fixed system places: the [`SYSTEM`]
/// directories, the [`DEVICES`] and `/dev`'s listing (not its other
/// devices: a terminal or a disk is no tool's to read), opened once and held, so a
/// run adds them without opening, checking and closing each again.
/// Configured paths are opened per run: a symlink switched under one is
/// followed.
#[derive(Debug, Default)]
pub(super) struct Fixed {
    places: Vec<(PathBuf, PathFd, BitFlags<AccessFs>)>,
    /// The host's `/proc`, apart: a run in the runs' mount namespace sees
    /// another instance of it, which needs a rule of its own.
    proc: Option<PathFd>,
}

impl Fixed {
    /// Opens the places that exist here.
    pub(super) fn open() -> Self {
        let read = AccessFs::from_read(TARGET);
        let file = AccessFs::from_file(TARGET);
        let places = SYSTEM
            .iter()
            .map(|p| (*p, read))
            .chain(DEVICES.iter().map(|d| (*d, file)))
            .chain(READ_DEVICES.iter().map(|d| (*d, file & AccessFs::ReadFile)))
            .chain([("/dev", BitFlags::from(AccessFs::ReadDir))]);
        Self {
            places: places
                .filter(|(path, _)| *path != PROC)
                .filter_map(|(path, rights)| {
                    let path = PathBuf::from(path);
                    let fd = PathFd::new(&path).ok()?;
                    let rights = fit(&path, rights);
                    Some((path, fd, rights))
                })
                .collect(),
            proc: PathFd::new(PROC).ok(),
        }
    }

    fn holds(&self, path: &Path) -> bool {
        path == Path::new(PROC) || self.places.iter().any(|(held, _, _)| held == path)
    }
}

const PROC: &str = "/proc";

/// Every directory right of each ABI from [`TARGET`] down to the first,
/// as bits: a child adding a rule of its own to the ruleset takes the
/// widest the kernel accepts.
pub(super) fn dir_access_by_abi() -> [u64; 6] {
    [ABI::V6, ABI::V5, ABI::V4, ABI::V3, ABI::V2, ABI::V1].map(|abi| AccessFs::from_all(abi).bits())
}

/// Builds the ruleset; the child applies it with `landlock_restrict_self`.
/// `None` when the kernel has no Landlock.
/// `proc`: the `/proc` the run will see, when it is not the host's.
pub(super) fn ruleset(
    access: &Grants,
    fixed: &Fixed,
    proc: Option<BorrowedFd>,
) -> Result<Option<OwnedFd>, landlock::RulesetError> {
    let mut ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(TARGET))?
        .scope(Scope::from_all(TARGET))?;
    if access.no_tcp {
        ruleset = ruleset.handle_access(AccessNet::from_all(TARGET))?;
    }
    let mut created = ruleset.create()?;
    for (_, fd, rights) in &fixed.places {
        created = created.add_rule(PathBeneath::new(fd.as_fd(), *rights))?;
    }
    let read = AccessFs::from_read(TARGET);
    if let Some(proc) = proc.or(fixed.proc.as_ref().map(AsFd::as_fd)) {
        created = created.add_rule(PathBeneath::new(proc, read))?;
    }
    let all = AccessFs::from_all(TARGET);
    for path in access.read.iter().filter(|p| !fixed.holds(p)) {
        created = add(created, path, read)?;
    }
    for path in &access.write {
        created = add(created, path, all)?;
    }
    for path in &access.list {
        created = add(created, path, AccessFs::ReadDir.into())?;
    }
    Ok(created.into())
}

/// Adds one rule; a path that does not exist (`/lib32`) is skipped.
fn add(
    created: landlock::RulesetCreated,
    path: &Path,
    rights: BitFlags<AccessFs>,
) -> Result<landlock::RulesetCreated, landlock::RulesetError> {
    let Ok(fd) = PathFd::new(path) else {
        return Ok(created);
    };
    created.add_rule(PathBeneath::new(fd, fit(path, rights)))
}

/// The rights that apply to `path`: a file takes only file rights.
fn fit(path: &Path, rights: BitFlags<AccessFs>) -> BitFlags<AccessFs> {
    if path.is_dir() {
        rights
    } else {
        rights & AccessFs::from_file(TARGET)
    }
}

/// `root`, or when one of `protected` lies inside it, every entry of
/// `root` but the ones leading to a protected path, recursively: Landlock
/// only ever adds access, so a hole is made by granting around it. The
/// directories on the way stay listable ([`Carved::list`]): a listing
/// that shows a protected entry's name is fine, reading it is not, and
/// without it `ls` and `git status` fail at the workspace's root.
/// Entries are taken by their real paths, so a symlink to a protected
/// place is left out too. Entries made later inside a carved directory are
/// not granted.
pub(super) fn around(root: &Path, protected: &[PathBuf]) -> Carved {
    let mut out = Carved::default();
    let Ok(root) = root.canonicalize() else {
        return out;
    };
    carve(&root, &root, protected, &mut out);
    if out.whole.len() + out.list.len() > MAX_CARVED {
        tracing::warn!(root = %root.display(), "too many entries around protected paths; not granted");
        out = Carved::default();
    }
    out
}

/// What [`around`] grants.
#[derive(Debug, Default)]
pub(super) struct Carved {
    /// Granted with what the caller grants.
    pub whole: Vec<PathBuf>,
    /// On the way to a protected place: listed only (a Landlock rule
    /// reaches beneath, so a protected directory's names can be listed
    /// too, never its files read).
    pub list: Vec<PathBuf>,
}

fn carve(root: &Path, dir: &Path, protected: &[PathBuf], out: &mut Carved) {
    if protected.iter().any(|p| dir.starts_with(p)) {
        return;
    }
    if !protected.iter().any(|p| p.starts_with(dir)) {
        out.whole.push(dir.to_path_buf());
        return;
    }
    out.list.push(dir.to_path_buf());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        if out.whole.len() + out.list.len() > MAX_CARVED {
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
            out.whole.push(real);
        }
    }
}
