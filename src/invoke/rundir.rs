//! The run directory of an entrypoint call: its input, its `SANDBOX_*`
//! contract, and the output and artifacts it leaves.

use super::{Artifact, Envelope, Prepared};
use crate::skill::Action;
use serde_json::Value;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use uuid::Uuid;

/// Artifacts listed per run, at most.
const MAX_ARTIFACTS: usize = 1000;
/// The largest `output.json` read back.
const MAX_OUTPUT_JSON: u64 = 1024 * 1024;

/// A run's own directory, `<scratch>/<run id>`: its `TMPDIR`, the only
/// place it may write (beside a workspace it declared it writes), and for
/// an entrypoint its working directory with the `SANDBOX_*` contract.
pub(super) struct RunDir {
    pub root: PathBuf,
    /// An entrypoint's `out/`, kept after the run for its artifacts;
    /// `None` for other tools, whose directory goes when they end.
    out: Option<PathBuf>,
    pub env: Vec<(String, String)>,
}

impl RunDir {
    /// Makes the directory of run `id` in a scratch root made ready by
    /// [`ensure_scratch_root`](crate::sandbox::ensure_scratch_root), owned by `owner` (the sandbox's identity)
    /// when given, and writes an entrypoint's input.
    pub fn create(
        scratch: &Path,
        id: Uuid,
        p: &Prepared,
        owner: Option<(u32, u32)>,
    ) -> std::io::Result<Self> {
        let root = scratch.join(id.to_string());
        std::fs::DirBuilder::new().mode(0o700).create(&root)?;
        let mut env = vec![("TMPDIR".to_owned(), root.display().to_string())];
        let mut out = None;
        if matches!(p.tool().action, Action::Entrypoint { .. }) {
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
            out = Some(dir);
        }
        chown(&root, owner)?;
        Ok(Self { root, out, env })
    }

    /// For an entrypoint, `output.json` becomes `parsed` and the artifacts
    /// are listed with their URLs; any other run's directory is removed.
    pub fn finish(&self, envelope: &mut Envelope) {
        let Some(out) = &self.out else {
            if let Err(err) = std::fs::remove_dir_all(&self.root) {
                tracing::warn!(dir = %self.root.display(), %err, "cannot remove a run's scratch directory");
            }
            return;
        };
        if let Ok(Some(bytes)) = crate::skill::files::read_limited(&out.join("output.json"), MAX_OUTPUT_JSON)
            && let Ok(v) = serde_json::from_slice::<Value>(&bytes)
        {
            envelope.parsed = Some(v);
        }
        let mut files = artifacts(&out.join("files"), envelope.run_id);
        files.sort_by(|a, b| a.path.cmp(&b.path));
        envelope.files = Some(files);
    }
}

pub(super) fn chown(path: &Path, owner: Option<(u32, u32)>) -> std::io::Result<()> {
    match owner {
        Some((uid, gid)) => std::os::unix::fs::lchown(path, Some(uid), Some(gid)),
        None => Ok(()),
    }
}

/// Every file under `SANDBOX_FILES_DIR`, up to [`MAX_ARTIFACTS`].
fn artifacts(dir: &Path, run_id: Uuid) -> Vec<Artifact> {
    let mut files = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), String::new())];
    while let Some((dir, rel)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.filter_map(Result::ok) {
            if files.len() >= MAX_ARTIFACTS {
                return files;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            let rel_child = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                stack.push((e.path(), rel_child));
            } else if ft.is_file() {
                let size = e.metadata().map(|m| m.len()).unwrap_or(0);
                files.push(Artifact {
                    url: format!("/runs/{run_id}/files/{rel_child}"),
                    path: rel_child,
                    size,
                });
            }
        }
    }
    files
}

/// Where an entrypoint run keeps its artifacts.
pub fn artifacts_dir(scratch: &Path, id: Uuid) -> PathBuf {
    scratch.join(id.to_string()).join("out").join("files")
}
