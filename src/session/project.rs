//! A session's project files from a directory of the workspace: listed
//! once, bounded, never following a link or leaving the workspace.

use super::error::SessionError;
use std::path::{Component, Path, PathBuf};

/// How deep a project's directories are walked.
const MAX_DEPTH: usize = 16;

/// The files under `rel` (a relative path in `workspace`), as paths
/// relative to it, at most `max` of them.
pub(super) fn files(workspace: &Path, rel: &str, max: usize) -> Result<Vec<String>, SessionError> {
    let bad = |why: &str| SessionError::BadPath(format!("path '{}' {why}", rel.escape_debug()));
    let relative = Path::new(rel);
    let plain = relative
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if rel.contains('\0') || !plain {
        return Err(bad("must be relative to the workspace, without '..'"));
    }
    let root = workspace
        .canonicalize()
        .map_err(|_| bad("cannot be read: the server has no workspace directory"))?;
    let dir = root
        .join(relative)
        .canonicalize()
        .map_err(|_| bad("is not a directory of the workspace"))?;
    if !dir.starts_with(&root) || !dir.is_dir() {
        return Err(bad("is not a directory of the workspace"));
    }
    let mut found = Vec::new();
    walk(&dir, &dir, 0, max, &mut found);
    found.sort();
    Ok(found)
}

fn walk(root: &Path, dir: &Path, depth: usize, max: usize, found: &mut Vec<String>) {
    if depth > MAX_DEPTH {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        if found.len() >= max {
            return;
        }
        // No link is followed: one could lead out of the workspace.
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            walk(root, &path, depth + 1, max, found);
        } else if meta.is_file()
            && let Ok(rel) = path.strip_prefix(root)
            && let Some(text) = rel.to_str()
        {
            found.push(text.to_owned());
        }
    }
}
