//! An upload made ready to check: unpacked into a private staging
//! directory, the skill found in it (at the archive's root, as `skilld
//! package` writes it, or in its one top-level directory, as `zip -r` of a
//! folder does), and moved under its own name, which the loader checks
//! against the definition.

use super::InstallError;
use crate::install::unpack::{UnpackLimits, unpack};
use crate::skill::frontmatter;
use crate::skill::names::{NameCheck, check_name};
use std::path::{Path, PathBuf};

/// A staging directory, removed with everything in it when dropped.
pub struct Staged {
    /// `<root>/.staging/<id>`.
    pub area: PathBuf,
    /// The skill's directory inside it, named after the skill.
    pub dir: PathBuf,
    pub name: String,
    pub files: usize,
    pub bytes: u64,
}

impl Drop for Staged {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.area);
    }
}

/// Unpacks `archive` under `staging` and finds the skill in it. Nothing is
/// left behind on any error.
pub fn stage(archive: std::fs::File, staging: &Path, limits: &UnpackLimits) -> Result<Staged, InstallError> {
    std::fs::create_dir_all(staging)?;
    let area = staging.join(uuid::Uuid::now_v7().to_string());
    std::fs::create_dir(&area)?;
    let mut staged = Staged {
        area: area.clone(),
        dir: PathBuf::new(),
        name: String::new(),
        files: 0,
        bytes: 0,
    };
    let unpacked = area.join("upload");
    let counts = unpack(std::io::BufReader::new(archive), &unpacked, limits)?;
    (staged.files, staged.bytes) = (counts.files, counts.bytes);
    let found = skill_root(&unpacked).ok_or(InstallError::NoSkill)?;
    let name = declared_name(&found)?;
    staged.dir = area.join(&name);
    std::fs::rename(&found, &staged.dir)?;
    staged.name = name;
    Ok(staged)
}

fn has_definition(dir: &Path) -> bool {
    dir.join("SKILL.md").is_file() || dir.join("SKILL.yaml").is_file()
}

/// The archive's root when it holds the definition, else its only entry
/// when that is a directory holding one.
fn skill_root(unpacked: &Path) -> Option<PathBuf> {
    if has_definition(unpacked) {
        return Some(unpacked.to_path_buf());
    }
    let mut entries = std::fs::read_dir(unpacked).ok()?.filter_map(Result::ok);
    let only = entries.next()?;
    if entries.next().is_some() {
        return None;
    }
    let path = only.path();
    (only.file_type().ok()?.is_dir() && has_definition(&path)).then_some(path)
}

/// The `name` a definition declares, read before the full load so the
/// directory can be named after it.
fn declared_name(dir: &Path) -> Result<String, InstallError> {
    let unreadable = |why: &str| InstallError::Unnamed(why.to_owned());
    let yaml_file = dir.join("SKILL.yaml");
    let text = if yaml_file.is_file() {
        std::fs::read_to_string(&yaml_file).map_err(|_| unreadable("SKILL.yaml is not UTF-8 text"))?
    } else {
        let md = std::fs::read_to_string(dir.join("SKILL.md"))
            .map_err(|_| unreadable("SKILL.md is not UTF-8 text"))?;
        let split =
            frontmatter::split(&md).map_err(|_| unreadable("SKILL.md's frontmatter is not closed"))?;
        split
            .yaml
            .ok_or_else(|| unreadable("SKILL.md has no frontmatter"))?
            .to_owned()
    };
    let value = frontmatter::parse_yaml(&text)
        .map_err(|e| unreadable(&format!("its YAML is invalid: {}", e.message)))?;
    let name = value
        .get("name")
        .and_then(|n| n.as_str())
        .ok_or_else(|| unreadable("it declares no name"))?;
    match check_name(name) {
        NameCheck::Valid => Ok(name.to_owned()),
        _ => Err(unreadable(&format!(
            "'{name}' is not a skill name (lowercase letters, digits and single hyphens)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn zip(entries: &[(&str, &str)]) -> std::fs::File {
        let mut file = tempfile::tempfile().unwrap();
        {
            let mut w = zip::ZipWriter::new(&mut file);
            for (name, body) in entries {
                w.start_file(*name, zip::write::SimpleFileOptions::default())
                    .unwrap();
                w.write_all(body.as_bytes()).unwrap();
            }
            w.finish().unwrap();
        }
        std::io::Seek::rewind(&mut file).unwrap();
        file
    }

    const MD: &str = "---\nname: hello\nversion: 1.0.0\ndescription: Says hello.\n---\nHi.\n";

    #[test]
    fn the_skill_is_found_at_the_root_or_in_its_one_folder() {
        let staging = tempfile::tempdir().unwrap();
        for archive in [zip(&[("SKILL.md", MD)]), zip(&[("folder/SKILL.md", MD)])] {
            let staged = stage(archive, staging.path(), &UnpackLimits::default()).unwrap();
            assert_eq!(staged.name, "hello");
            assert!(staged.dir.join("SKILL.md").is_file());
            let area = staged.area.clone();
            drop(staged);
            assert!(!area.exists(), "dropping a stage removes it");
        }
    }

    #[test]
    fn an_archive_without_a_named_skill_is_refused_and_leaves_nothing() {
        let staging = tempfile::tempdir().unwrap();
        let cases = [
            zip(&[("README.md", "no skill")]),
            zip(&[("a/SKILL.md", MD), ("b/SKILL.md", MD)]),
            zip(&[("SKILL.md", "---\nname: ../etc\n---\n")]),
            zip(&[("SKILL.md", "---\ndescription: nameless\n---\n")]),
        ];
        for archive in cases {
            assert!(stage(archive, staging.path(), &UnpackLimits::default()).is_err());
        }
        assert_eq!(std::fs::read_dir(staging.path()).unwrap().count(), 0);
    }
}
