//! The run directory of an entrypoint call: its input, its `SANDBOX_*`
//! contract, and the output and artifacts it leaves.

use super::{Envelope, Prepared};
use crate::artifacts::Artifacts;
use crate::fsafe;
use crate::skill::{Action, Trust};
use nix::fcntl::OFlag;
use nix::sys::stat::SFlag;
use serde_json::Value;
use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use uuid::Uuid;

/// Artifacts listed per run, at most; and the bounds of the walk that
/// finds them (entries looked at, directory depth).
const ARTIFACT_BOUNDS: fsafe::Bounds = fsafe::Bounds {
    files: 1000,
    entries: 10_000,
    depth: 16,
};
/// The largest `output.json` read back.
const MAX_OUTPUT_JSON: u64 = 1024 * 1024;
/// The longest reading back and tidying a run's directory may hold up its
/// end; past it the run ends without `parsed` and artifacts.
const FINISH_TIMEOUT: Duration = Duration::from_secs(30);

/// A run's own directory, `<scratch>/<run id>`: its `TMPDIR`, the only
/// place it may write (beside a workspace it declared it writes), and for
/// an entrypoint its working directory with the `SANDBOX_*` contract.
pub(super) struct RunDir {
    scratch: PathBuf,
    id: Uuid,
    pub root: PathBuf,
    /// An entrypoint's `out/files` is kept after the run for its
    /// artifacts; other tools' directories go when they end.
    entrypoint: bool,
    pub env: Vec<(String, String)>,
    /// Where the directory may go back for the next run of the same skill
    /// as the same user (other tools' runs only).
    reuse: Option<(Arc<DirPool>, PoolKey)>,
}

/// Run directories kept at most, over all skills.
const POOL_MAX: usize = 64;

/// The skill directory, its trust and the owner a kept run directory may
/// serve again: never another skill's run, nor one of another trust or
/// identity.
type PoolKey = (PathBuf, Trust, Option<(u32, u32)>);

/// Empty run directories, kept under names no run has, for the next runs
/// of the same skill. Removing a directory and making another costs the
/// filesystem far more than renaming one (on ext4 mounted with `discard`,
/// the rmdir waits for the device), and a run needs only that its
/// directory be empty, private and its own. What goes back is checked
/// ([`RunDir::give_back`]): only a directory no process of its run can
/// still reach, empty, unchanged in owner, mode and extended attributes.
#[derive(Debug, Default)]
pub(crate) struct DirPool {
    kept: Mutex<HashMap<PoolKey, Vec<Uuid>>>,
}

impl DirPool {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PoolKey, Vec<Uuid>>> {
        self.kept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn len(&self) -> usize {
        self.lock().values().map(Vec::len).sum()
    }

    /// Whether `name` is a kept directory, which the sweep must spare.
    pub(crate) fn holds(&self, name: Uuid) -> bool {
        self.lock().values().any(|names| names.contains(&name))
    }

    /// Moves a kept directory of `key` to `root`; false when there is
    /// none (or the sweep of another server took it).
    fn reuse(&self, scratch: &Path, key: &PoolKey, root: &Path) -> bool {
        loop {
            let Some(name) = self.lock().get_mut(key).and_then(Vec::pop) else {
                return false;
            };
            if std::fs::rename(scratch.join(name.to_string()), root).is_ok() {
                return true;
            }
        }
    }

    /// Keeps `name` for `key`; false when the pool is full.
    fn keep(&self, key: PoolKey, name: Uuid) -> bool {
        let mut kept = self.lock();
        if kept.values().map(Vec::len).sum::<usize>() >= POOL_MAX {
            return false;
        }
        kept.entry(key).or_default().push(name);
        true
    }
}

impl RunDir {
    /// Makes the directory of run `id` in a scratch root made ready by
    /// [`ensure_scratch_root`](crate::sandbox::ensure_scratch_root), owned by `owner` (the sandbox's identity)
    /// when given, and writes an entrypoint's input.
    /// Other tools' runs take a directory their skill's earlier runs left
    /// empty in `pool`, when there is one.
    pub fn create(
        scratch: &Path,
        id: Uuid,
        p: &Prepared,
        owner: Option<(u32, u32)>,
        pool: &Arc<DirPool>,
    ) -> std::io::Result<Self> {
        let root = scratch.join(id.to_string());
        let entrypoint = matches!(p.tool().action, Action::Entrypoint { .. });
        let reuse = (!entrypoint).then(|| (pool.clone(), (p.skill.dir.clone(), p.skill.trust, owner)));
        if let Some((pool, key)) = &reuse
            && pool.reuse(scratch, key, &root)
        {
            return Ok(Self {
                env: vec![("TMPDIR".to_owned(), root.display().to_string())],
                scratch: scratch.to_path_buf(),
                id,
                root,
                entrypoint,
                reuse,
            });
        }
        std::fs::DirBuilder::new().mode(0o700).create(&root)?;
        let mut env = vec![("TMPDIR".to_owned(), root.display().to_string())];
        if entrypoint {
            let dir = root.join("out");
            let files = dir.join("files");
            std::fs::create_dir_all(&files)?;
            let input = serde_json::to_string(&Value::Object(p.arguments.clone()))
                .unwrap_or_else(|_| "{}".to_owned());
            std::fs::write(root.join("input.json"), &input)?;
            env.extend([
                ("SANDBOX_INPUT".to_owned(), input),
                (
                    "SANDBOX_OUTPUT".to_owned(),
                    dir.join("output.json").display().to_string(),
                ),
                ("SANDBOX_FILES_DIR".to_owned(), files.display().to_string()),
                ("SKILL_INSTRUCTIONS".to_owned(), p.skill.instructions.clone()),
            ]);
            for path in [&root.join("input.json"), &dir, &files] {
                chown(path, owner)?;
            }
        }
        chown(&root, owner)?;
        Ok(Self {
            scratch: scratch.to_path_buf(),
            id,
            root,
            entrypoint,
            env,
            reuse,
        })
    }

    /// For an entrypoint, `output.json` becomes `parsed`, `out/files` is
    /// kept (here, or in the artifact bucket) and listed as the artifacts,
    /// and the rest of the directory goes; any other run's directory is
    /// removed, or kept for the next run of its skill when `contained`
    /// (no process of the run is left) and it is as it was made. Off the
    /// async workers and within [`FINISH_TIMEOUT`]: a tool chooses what
    /// lies there.
    pub async fn finish(self, envelope: &mut Envelope, artifacts: &Artifacts, contained: bool) {
        // Most tools leave their directory empty: it goes back to the pool,
        // or one rmdir, which follows nothing and cannot block, ends it
        // without the hop to the blocking pool.
        if !self.entrypoint && ((contained && self.give_back()) || std::fs::remove_dir(&self.root).is_ok()) {
            return;
        }
        let (entrypoint, id, root) = (self.entrypoint, self.id, self.root.clone());
        let job = tokio::task::spawn_blocking(move || self.tidy());
        match tokio::time::timeout(FINISH_TIMEOUT, job).await {
            Ok(Ok(Some(left))) => {
                if left.parsed.is_some() {
                    envelope.parsed = left.parsed;
                }
                envelope.files = Some(artifacts.keep(id, left.files).await);
                if !artifacts.stay_local() {
                    // Uploaded: nothing of the run stays on this disk.
                    let _ = tokio::task::spawn_blocking(move || remove(&root)).await;
                }
            }
            Ok(Ok(None)) => {}
            Ok(Err(err)) => tracing::warn!(run = %id, %err, "cannot read back the run's directory"),
            Err(_) => tracing::warn!(run = %id, "reading back the run's directory timed out"),
        }
        if entrypoint && envelope.files.is_none() {
            envelope.files = Some(Vec::new());
        }
    }

    /// Keeps the directory for the next run of the same skill and owner,
    /// under a fresh name, when the pool has room and the directory is as
    /// it was made: a directory (not a link put in its place), of its
    /// owner, `rwx------`, with no entry and no extended attribute (an
    /// ACL among them). Its times are reset, so nothing of this run is
    /// left to read. Only for a run none of whose processes is left
    /// (the caller's `contained`): nothing else can reach it, since the
    /// scratch root is the server's and no other run's ruleset grants it.
    fn give_back(&self) -> bool {
        let Some((pool, key)) = &self.reuse else {
            return false;
        };
        if pool.len() >= POOL_MAX || !as_made(&self.root, key.2) {
            return false;
        }
        let name = Uuid::now_v7();
        if std::fs::rename(&self.root, self.scratch.join(name.to_string())).is_err() {
            return false;
        }
        if !pool.keep(key.clone(), name) {
            remove(&self.scratch.join(name.to_string()));
        }
        true
    }

    /// [`finish`](Self::finish)'s blocking part: what an entrypoint left
    /// (`None` for other tools).
    fn tidy(&self) -> Option<Left> {
        if !self.entrypoint {
            remove(&self.root);
            return None;
        }
        let Ok(scratch) = fsafe::open_base(&self.scratch) else {
            remove(&self.root);
            return Some(Left::default());
        };
        let id = self.id.to_string();
        // Through the scratch root, which is the server's: `out` and
        // `output.json` are the tool's, and a link there is refused.
        let parsed = fsafe::read_beneath(scratch.as_fd(), &format!("{id}/out/output.json"), MAX_OUTPUT_JSON)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok());
        if let Err(err) = keep_artifacts(scratch.as_fd(), &self.scratch, &id) {
            tracing::warn!(run = %id, %err, "cannot keep the run's artifacts");
            remove(&self.root);
        }
        let files = fsafe::list_files(scratch.as_fd(), &format!("{id}/out/files"), ARTIFACT_BOUNDS);
        Some(Left { parsed, files })
    }
}

/// What an entrypoint left: its `output.json`, parsed, and its files.
#[derive(Default)]
struct Left {
    parsed: Option<Value>,
    files: Vec<fsafe::Listed>,
}

/// Leaves `out/files` the only thing of run `id`'s directory, in
/// directories the server makes afresh (`<id>.keep/out`, renamed to
/// `<id>` once the tool's own directory is gone). So the directories on
/// the way to the artifacts are the server's, and nothing the tool may
/// still hold (a grant on its directory's inode, a process that outlived
/// the run) reaches them. Every step works through descriptors or on the
/// last component of a path under the scratch root, following no link.
fn keep_artifacts(scratch_fd: BorrowedFd<'_>, scratch: &Path, id: &str) -> std::io::Result<()> {
    let staging = format!("{id}.keep");
    let kept_out = staging_dir(scratch_fd, scratch, &staging)?;
    move_files(scratch_fd, id, kept_out.as_fd())?;
    // std's `remove_dir_all` follows no link (fixed in Rust 1.58.1,
    // CVE-2022-21658): it opens each directory with `O_NOFOLLOW` from its
    // parent's descriptor and unlinks a link as a link. Only the last
    // component of this path, `<id>`, is the tool's.
    std::fs::remove_dir_all(scratch.join(id))?;
    nix::fcntl::renameat(scratch_fd, staging.as_str(), scratch_fd, id)?;
    Ok(())
}

/// Makes `<staging>/out` under the scratch root and opens it.
fn staging_dir(scratch_fd: BorrowedFd<'_>, scratch: &Path, staging: &str) -> std::io::Result<OwnedFd> {
    use nix::sys::stat::{Mode, mkdirat};
    if let Err(nix::errno::Errno::EEXIST) = mkdirat(scratch_fd, staging, Mode::S_IRWXU) {
        // Left by a server that stopped half-way: start again.
        std::fs::remove_dir_all(scratch.join(staging))?;
        mkdirat(scratch_fd, staging, Mode::S_IRWXU)?;
    }
    let kept = fsafe::open_beneath(
        scratch_fd,
        Path::new(staging),
        OFlag::O_RDONLY | OFlag::O_DIRECTORY,
    )?;
    mkdirat(&kept, "out", Mode::S_IRWXU)?;
    fsafe::open_beneath(
        kept.as_fd(),
        Path::new("out"),
        OFlag::O_RDONLY | OFlag::O_DIRECTORY,
    )
}

/// Moves `<id>/out/files` into `kept_out`. `rename` moves the entry
/// itself, never a link's target; when `out` is not a plain directory
/// (the tool replaced it), or `files` is not one, nothing is kept.
fn move_files(scratch_fd: BorrowedFd<'_>, id: &str, kept_out: BorrowedFd<'_>) -> std::io::Result<()> {
    use nix::fcntl::AtFlags;
    let dir = OFlag::O_RDONLY | OFlag::O_DIRECTORY;
    let Ok(out) = fsafe::open_beneath(scratch_fd, &Path::new(id).join("out"), dir) else {
        return Ok(());
    };
    if nix::fcntl::renameat(&out, "files", kept_out, "files").is_err() {
        return Ok(());
    }
    let is_dir = nix::sys::stat::fstatat(kept_out, "files", AtFlags::AT_SYMLINK_NOFOLLOW)
        .is_ok_and(|st| SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR);
    if !is_dir {
        nix::unistd::unlinkat(kept_out, "files", nix::unistd::UnlinkatFlags::NoRemoveDir)?;
    }
    Ok(())
}

/// Whether `dir` is a run directory as [`RunDir::create`] made it, of
/// `owner` (else this server's user), and empty; its times are reset when
/// it is.
fn as_made(dir: &Path, owner: Option<(u32, u32)>) -> bool {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let Ok(fd) = nix::fcntl::open(dir, flags, nix::sys::stat::Mode::empty()) else {
        return false;
    };
    let Ok(st) = nix::sys::stat::fstat(&fd) else {
        return false;
    };
    let (uid, gid) = owner.unwrap_or_else(|| {
        let (uid, gid) = (nix::unistd::geteuid(), nix::unistd::getegid());
        (uid.as_raw(), gid.as_raw())
    });
    let kept = st.st_uid == uid
        && st.st_gid == gid
        && st.st_mode & 0o7777 == 0o700
        && st.st_nlink == 2
        && rustix::fs::flistxattr_query(&fd).is_ok_and(|n| n == 0);
    if !kept {
        return false;
    }
    let Ok(mut entries) = nix::dir::Dir::from_fd(fd) else {
        return false;
    };
    let empty = entries
        .iter()
        .all(|e| e.is_ok_and(|e| matches!(e.file_name().to_bytes(), b"." | b"..")));
    let now = nix::sys::time::TimeSpec::UTIME_NOW;
    empty && nix::sys::stat::futimens(&entries, &now, &now).is_ok()
}

/// Removes a run's directory (see [`keep_artifacts`] on why this is safe),
/// saying so when it cannot.
fn remove(dir: &Path) {
    if let Err(err) = std::fs::remove_dir_all(dir)
        && err.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(dir = %dir.display(), %err, "cannot remove a run's scratch directory");
    }
}

pub(super) fn chown(path: &Path, owner: Option<(u32, u32)>) -> std::io::Result<()> {
    match owner {
        Some((uid, gid)) => std::os::unix::fs::lchown(path, Some(uid), Some(gid)),
        None => Ok(()),
    }
}

impl super::Invoker {
    /// Removes finished runs' directories once
    /// [`artifact_ttl`](super::RunSettings::artifact_ttl) has passed, at
    /// start and then every quarter of it (between 100 ms and a minute),
    /// on the blocking pool, until `stop`.
    pub(super) async fn expire_artifacts(
        self: std::sync::Arc<Self>,
        stop: tokio_util::sync::CancellationToken,
    ) {
        let ttl = self.settings.artifact_ttl;
        let every = (ttl / 4).clamp(Duration::from_millis(100), Duration::from_secs(60));
        loop {
            self.artifacts.sweep().await;
            let (scratch, runs, kept) = (
                self.settings.scratch_dir.clone(),
                self.runs.clone(),
                self.dirs.clone(),
            );
            let swept = tokio::task::spawn_blocking(move || {
                sweep(&scratch, ttl, |id| runs.get(id).is_some() || kept.holds(id))
            });
            match swept.await {
                Ok(0) => {}
                Ok(n) => tracing::debug!(count = n, "expired run directories removed"),
                Err(err) => tracing::warn!(%err, "cannot sweep the scratch root"),
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(every) => {}
            }
        }
    }
}

/// Removes each run directory under `scratch` unchanged for `ttl` (by its
/// ctime, which a tool cannot set back), and a `<id>.keep` left by a
/// server that stopped, unless `live` says its run is still going (or
/// the directory is kept for reuse: see [`DirPool`]). Names
/// that are not run ids (a manifest's `backend-…`, `.starlark-host`) are
/// never touched. Returns how many went.
fn sweep(scratch: &Path, ttl: Duration, live: impl Fn(Uuid) -> bool) -> usize {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(scratch) else {
        return 0;
    };
    let now = std::time::SystemTime::now();
    let mut removed = 0;
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name();
        let Some(id) = name.to_str().and_then(run_id) else {
            continue;
        };
        let Ok(meta) = entry.metadata() else { continue };
        let changed = std::time::UNIX_EPOCH
            + Duration::new(
                u64::try_from(meta.ctime()).unwrap_or(0),
                u32::try_from(meta.ctime_nsec()).unwrap_or(0),
            );
        let old = now.duration_since(changed).is_ok_and(|age| age >= ttl);
        if old && !live(id) {
            // Safe on a tool's tree: see `keep_artifacts`.
            remove(&entry.path());
            removed += 1;
        }
    }
    removed
}

/// The run id a scratch entry is named after: `<id>` or `<id>.keep`.
fn run_id(name: &str) -> Option<Uuid> {
    let bare = name.strip_suffix(".keep").unwrap_or(name);
    Uuid::try_parse(bare)
        .ok()
        .filter(|id| id.hyphenated().to_string() == bare)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_run_ids_are_swept() {
        let id = Uuid::now_v7();
        assert_eq!(run_id(&id.to_string()), Some(id));
        assert_eq!(run_id(&format!("{id}.keep")), Some(id));
        for other in [
            format!("backend-notes-{id}"),
            ".starlark-host".to_owned(),
            id.simple().to_string(),
            id.to_string().to_uppercase(),
            format!("{id}.old"),
        ] {
            assert_eq!(run_id(&other), None, "{other}");
        }
    }

    #[test]
    fn the_sweep_spares_live_runs_other_names_and_link_targets() {
        let scratch = tempfile::tempdir().unwrap();
        let target = tempfile::tempdir().unwrap();
        std::fs::write(target.path().join("precious"), "keep me").unwrap();
        let (done, live, linked) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
        for dir in [done.to_string(), live.to_string(), "backend-x".to_owned()] {
            std::fs::create_dir_all(scratch.path().join(&dir).join("out/files")).unwrap();
        }
        std::os::unix::fs::symlink(target.path(), scratch.path().join(linked.to_string())).unwrap();
        // A link inside a run's tree too: std's remove_dir_all must not follow it.
        std::os::unix::fs::symlink(
            target.path(),
            scratch.path().join(done.to_string()).join("out/files/t"),
        )
        .unwrap();
        assert_eq!(sweep(scratch.path(), Duration::from_secs(3600), |_| false), 0);
        assert_eq!(sweep(scratch.path(), Duration::ZERO, |id| id == live), 2);
        let mut left: Vec<String> = std::fs::read_dir(scratch.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        let mut want = vec!["backend-x".to_owned(), live.to_string()];
        want.sort();
        assert_eq!(left, want);
        assert_eq!(
            std::fs::read_to_string(target.path().join("precious")).unwrap(),
            "keep me"
        );
    }
}
