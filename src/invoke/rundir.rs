//! The run directory of an entrypoint call: its input, its `SANDBOX_*`
//! contract, and the output and artifacts it leaves.

use super::{Artifact, Envelope, Prepared};
use serde_json::Value;
use std::path::{Path, PathBuf};
use uuid::Uuid;

/// Artifacts listed per run, at most.
const MAX_ARTIFACTS: usize = 1000;
/// The largest `output.json` read back.
const MAX_OUTPUT_JSON: u64 = 1024 * 1024;

/// The working directory of an entrypoint run and its `SANDBOX_*` contract.
pub(super) struct RunDir {
    pub root: PathBuf,
    out: PathBuf,
    files: PathBuf,
    pub env: Vec<(String, String)>,
}

impl RunDir {
    /// Makes the directory of run `id` and writes its input.
    pub fn create(data_dir: &Path, id: Uuid, p: &Prepared) -> std::io::Result<Self> {
        let root = data_dir.join("runs").join(id.to_string());
        let out = root.join("out");
        let files = out.join("files");
        std::fs::create_dir_all(&files)?;
        let input =
            serde_json::to_string(&Value::Object(p.arguments.clone())).unwrap_or_else(|_| "{}".to_owned());
        std::fs::write(root.join("input.json"), &input)?;
        let output = out.join("output.json");
        let env = vec![
            ("SANDBOX_INPUT".to_owned(), input),
            ("SANDBOX_OUTPUT".to_owned(), output.display().to_string()),
            ("SANDBOX_FILES_DIR".to_owned(), files.display().to_string()),
            ("SKILL_INSTRUCTIONS".to_owned(), p.skill.instructions.clone()),
        ];
        Ok(Self {
            root,
            out,
            files,
            env,
        })
    }

    /// `output.json` becomes `parsed`; artifacts are listed with their URLs.
    pub fn collect(&self, envelope: &mut Envelope) {
        if let Ok(Some(bytes)) =
            crate::skill::files::read_limited(&self.out.join("output.json"), MAX_OUTPUT_JSON)
            && let Ok(v) = serde_json::from_slice::<Value>(&bytes)
        {
            envelope.parsed = Some(v);
        }
        let mut files = self.artifacts(envelope.run_id);
        files.sort_by(|a, b| a.path.cmp(&b.path));
        envelope.files = Some(files);
    }

    /// Every file under `SANDBOX_FILES_DIR`, up to [`MAX_ARTIFACTS`].
    fn artifacts(&self, run_id: Uuid) -> Vec<Artifact> {
        let mut files = Vec::new();
        let mut stack = vec![(self.files.clone(), String::new())];
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
}

/// Where an entrypoint run keeps its artifacts.
pub fn artifacts_dir(data_dir: &Path, id: Uuid) -> PathBuf {
    data_dir
        .join("runs")
        .join(id.to_string())
        .join("out")
        .join("files")
}
