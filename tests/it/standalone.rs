//! The repository stands on its own: a user who clones it has nothing
//! beside it, so no tracked file may lean on the sibling directory the
//! project was designed from (CI scripts aside, which run where it is).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Spelled in two pieces so that this file does not match itself.
const SIBLING: &str = concat!("..", "/shared");

/// The tracked files, or (outside a git checkout) every file but build
/// output and dependencies.
fn tracked_files(root: &Path) -> Vec<PathBuf> {
    let listed = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(root)
        .output()
        .ok()
        .filter(|o| o.status.success());
    if let Some(out) = listed {
        return out
            .stdout
            .split(|&b| b == 0)
            .filter(|p| !p.is_empty())
            .map(|p| root.join(String::from_utf8_lossy(p).as_ref()))
            .collect();
    }
    let mut files = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().map(Result::unwrap) {
            let name = entry.file_name();
            if ["target", ".git", "node_modules"].iter().any(|n| name == *n) {
                continue;
            }
            if entry.file_type().unwrap().is_dir() {
                stack.push(entry.path());
            } else {
                files.push(entry.path());
            }
        }
    }
    files
}

#[test]
fn no_tracked_file_outside_ci_refers_to_the_sibling_design_directory() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let offenders: Vec<String> = tracked_files(root)
        .into_iter()
        .filter(|p| !p.starts_with(root.join(".ci")))
        .filter(|p| {
            std::fs::read(p)
                .map(|bytes| bytes.windows(SIBLING.len()).any(|w| w == SIBLING.as_bytes()))
                .unwrap_or(false)
        })
        .map(|p| p.strip_prefix(root).unwrap_or(&p).display().to_string())
        .collect();
    assert!(
        offenders.is_empty(),
        "these files refer to {SIBLING}, which a clone of the repository does not have: {offenders:?}"
    );
}

#[test]
fn the_corpus_lives_in_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for path in [
        "tests/corpus/expected.json",
    ] {
        assert!(root.join(path).is_file(), "{path} is missing");
    }
}
