//! A skill as a zip archive (seed 003): every file of its directory at the
//! archive's root, sorted by path, with fixed times and modes and one
//! compression, so that the same content always gives the same bytes (and
//! one skilld can install from another and compare).

use std::io::{Seek, Write};
use std::path::{Path, PathBuf};
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, DateTime, ZipWriter};

/// The most files an archive holds.
pub const MAX_ARCHIVE_FILES: usize = 10_000;
/// The most bytes its files hold together, before compression.
pub const MAX_ARCHIVE_BYTES: u64 = 256 * 1024 * 1024;
/// Directories deeper than this are not walked.
const MAX_DEPTH: u32 = 16;
/// Version-control directories: history, not the skill.
const SKIPPED_DIRS: [&str; 3] = [".git", ".hg", ".svn"];

#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("'{0}' leads outside the skill's directory")]
    Outside(String),
    #[error("the skill has more than {MAX_ARCHIVE_FILES} files")]
    TooManyFiles,
    #[error("the skill's files hold more than {MAX_ARCHIVE_BYTES} bytes")]
    TooLarge,
    #[error("cannot read '{path}': {source}")]
    Read { path: String, source: std::io::Error },
    #[error("cannot write the archive: {0}")]
    Write(#[from] zip::result::ZipError),
    #[error("cannot write the archive: {0}")]
    Io(#[from] std::io::Error),
}

/// A file of the skill: its path in the archive and whether it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchivedFile {
    pub path: String,
    real: PathBuf,
    executable: bool,
}

/// The files of the skill at `dir`, sorted by path: hidden ones included,
/// version-control directories not; symbolic links are read through and
/// refused when they lead outside the skill.
pub fn archive_files(dir: &Path) -> Result<Vec<ArchivedFile>, ArchiveError> {
    let real_dir = dir.canonicalize().map_err(|source| ArchiveError::Read {
        path: dir.display().to_string(),
        source,
    })?;
    let mut out = Vec::new();
    let (mut total, mut stack) = (0u64, vec![(real_dir.clone(), String::new(), 0u32)]);
    while let Some((path, rel, depth)) = stack.pop() {
        let entries = std::fs::read_dir(&path).map_err(|source| ArchiveError::Read {
            path: rel.clone(),
            source,
        })?;
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel_child = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            let real = entry
                .path()
                .canonicalize()
                .map_err(|_| ArchiveError::Outside(rel_child.clone()))?;
            if !real.starts_with(&real_dir) {
                return Err(ArchiveError::Outside(rel_child));
            }
            let meta = std::fs::metadata(&real)?;
            if meta.is_dir() {
                if depth < MAX_DEPTH && !SKIPPED_DIRS.contains(&name.as_str()) {
                    stack.push((entry.path(), rel_child, depth + 1));
                }
            } else if meta.is_file() {
                use std::os::unix::fs::PermissionsExt;
                total = total.saturating_add(meta.len());
                if out.len() >= MAX_ARCHIVE_FILES {
                    return Err(ArchiveError::TooManyFiles);
                }
                if total > MAX_ARCHIVE_BYTES {
                    return Err(ArchiveError::TooLarge);
                }
                out.push(ArchivedFile {
                    path: rel_child,
                    real,
                    executable: meta.permissions().mode() & 0o100 != 0,
                });
            }
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// Writes the skill at `dir` as a zip archive into `out`, and returns it.
pub fn write_archive<W: Write + Seek>(dir: &Path, out: W) -> Result<W, ArchiveError> {
    let files = archive_files(dir)?;
    let mut zip = ZipWriter::new(out);
    for file in &files {
        let options = SimpleFileOptions::default()
            .compression_method(CompressionMethod::Deflated)
            .compression_level(Some(6))
            .last_modified_time(DateTime::default())
            .unix_permissions(if file.executable { 0o755 } else { 0o644 });
        zip.start_file(file.path.as_str(), options)?;
        let mut source = std::fs::File::open(&file.real).map_err(|source| ArchiveError::Read {
            path: file.path.clone(),
            source,
        })?;
        std::io::copy(&mut source, &mut zip).map_err(|source| ArchiveError::Read {
            path: file.path.clone(),
            source,
        })?;
    }
    Ok(zip.finish()?)
}

/// Lowercase hex SHA-256 of a file, read from its start; left rewound.
pub fn sha256_of(file: &mut std::fs::File) -> std::io::Result<String> {
    use sha2::{Digest, Sha256};
    use std::io::{Read, Seek};
    file.rewind()?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    file.rewind()?;
    Ok(hex::encode(hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn skill(dir: &Path) {
        std::fs::create_dir_all(dir.join("scripts")).unwrap();
        std::fs::create_dir_all(dir.join(".git/objects")).unwrap();
        std::fs::write(dir.join("SKILL.md"), "---\nname: a\ndescription: b\n---\nbody\n").unwrap();
        std::fs::write(dir.join("scripts/run.sh"), "#!/bin/sh\necho hi\n").unwrap();
        std::fs::write(dir.join(".hidden"), "kept").unwrap();
        std::fs::write(dir.join(".git/objects/x"), "history").unwrap();
        use std::os::unix::fs::PermissionsExt;
        let exec = std::fs::Permissions::from_mode(0o755);
        std::fs::set_permissions(dir.join("scripts/run.sh"), exec).unwrap();
    }

    #[test]
    fn the_same_content_gives_the_same_bytes_whenever_and_wherever_it_is_written() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        skill(a.path());
        std::thread::sleep(std::time::Duration::from_millis(1100));
        skill(b.path());
        let one = write_archive(a.path(), Cursor::new(Vec::new()))
            .unwrap()
            .into_inner();
        let two = write_archive(b.path(), Cursor::new(Vec::new()))
            .unwrap()
            .into_inner();
        assert_eq!(one, two);
        let mut zip = zip::ZipArchive::new(Cursor::new(one)).unwrap();
        let names: Vec<String> = zip.file_names().map(|n| n.unwrap().into_owned()).collect();
        let mut sorted = names;
        sorted.sort();
        assert_eq!(sorted, [".hidden", "SKILL.md", "scripts/run.sh"]);
        assert_eq!(zip.by_name("scripts/run.sh").unwrap().unix_mode(), Some(0o100755));
        assert_eq!(zip.by_name("SKILL.md").unwrap().unix_mode(), Some(0o100644));
    }

    #[test]
    fn a_link_out_of_the_skill_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        skill(dir.path());
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("scripts/passwd")).unwrap();
        let err = write_archive(dir.path(), Cursor::new(Vec::new())).unwrap_err();
        assert!(
            matches!(&err, ArchiveError::Outside(p) if p == "scripts/passwd"),
            "{err}"
        );
    }
}
