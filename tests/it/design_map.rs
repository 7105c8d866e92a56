//! The newcomer's map (`docs/design.md` §8) stays true: it names every
//! file of `src/`, and nothing that is not there. A module added, moved
//! or removed without its line fails here, not in a reader's hands.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The source files the map names: `src/x.rs` and `src/dir/` lines at the
/// left margin, and beneath a folder its files and subfolders, indented
/// two spaces a level.
fn mapped(design: &str) -> BTreeSet<String> {
    let section = &design[design.find("## 8. Code layout").unwrap()..];
    let start = section.find("```\n").unwrap() + 4;
    let block = &section[start..start + section[start..].find("```").unwrap()];
    let mut folders: Vec<String> = Vec::new();
    let mut files = BTreeSet::new();
    for line in block.lines() {
        let indent = line.len() - line.trim_start().len();
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        if indent == 0 {
            folders.clear();
        } else {
            folders.truncate(indent / 2);
        }
        if !(name.starts_with("src/") || indent > 0) || !(name.ends_with('/') || name.ends_with(".rs")) {
            continue;
        }
        let path = format!("{}{name}", folders.concat());
        if name.ends_with('/') {
            folders.push(if indent == 0 { path } else { name.to_owned() });
        } else {
            assert!(files.insert(path.clone()), "{path} is named twice");
        }
    }
    files
}

fn sources(dir: &Path, root: &Path, out: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path: PathBuf = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, root, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.insert(path.strip_prefix(root).unwrap().display().to_string());
        }
    }
}

#[test]
fn the_design_map_names_every_module_and_only_those() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let design = std::fs::read_to_string(root.join("docs/design.md")).unwrap();
    let on_map = mapped(&design);
    let mut on_disk = BTreeSet::new();
    sources(&root.join("src"), root, &mut on_disk);
    let missing: Vec<_> = on_disk.difference(&on_map).collect();
    let stale: Vec<_> = on_map.difference(&on_disk).collect();
    assert!(missing.is_empty(), "modules the map does not name: {missing:?}");
    assert!(stale.is_empty(), "the map names what is not there: {stale:?}");
}
