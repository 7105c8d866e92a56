//! The files of a skill directory: bounded reads, paths that must stay
//! inside it, the listing, the walk of what is hashed, and programs on
//! `PATH`.

use super::model::SkillFile;
use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;

/// At most this many files are listed (and hashed) per skill.
const MAX_LISTED_FILES: usize = 10_000;

/// Looks programs up on `PATH` once per catalog build; shared by threads.
#[derive(Debug, Default)]
pub struct PathCache {
    path: Option<std::ffi::OsString>,
    found: Mutex<HashMap<String, bool>>,
}

impl PathCache {
    pub fn new(path: Option<std::ffi::OsString>) -> Self {
        Self {
            path,
            found: Mutex::default(),
        }
    }

    /// Whether `name` is an executable file in some `PATH` directory.
    pub fn has(&self, name: &str) -> bool {
        if let Ok(found) = self.found.lock()
            && let Some(&hit) = found.get(name)
        {
            return hit;
        }
        let hit = self.path.as_deref().and_then(|p| find_program(p, name)).is_some();
        if let Ok(mut found) = self.found.lock() {
            found.insert(name.to_owned(), hit);
        }
        hit
    }
}

/// `name` as an executable file on `path` (a `PATH` value), as
/// [`crate::program::lookup`] finds it.
pub(super) fn find_program(path: &std::ffi::OsStr, name: &str) -> Option<PathBuf> {
    match crate::program::lookup(path, name, crate::program::has_execute_bit) {
        crate::program::Lookup::Found(found) => Some(found),
        crate::program::Lookup::NotExecutable | crate::program::Lookup::NotFound => None,
    }
}

/// Reads a file unless it is larger than `limit` (then `Ok(None)`).
pub fn read_limited(path: &Path, limit: u64) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    let file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    if len > limit {
        return Ok(None);
    }
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    // One byte past the limit tells a file that grew since `metadata`.
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Ok(None);
    }
    Ok(Some(bytes))
}

/// Files of the skill (not following symlinks, hidden entries skipped),
/// `/`-separated and sorted.
pub(super) fn list_files(dir: &Path) -> Vec<SkillFile> {
    let mut out = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), String::new(), 0u32)];
    while let Some((path, rel, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&path) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.starts_with('.') {
                continue;
            }
            let Ok(ft) = entry.file_type() else { continue };
            let rel_child = if rel.is_empty() {
                name.to_owned()
            } else {
                format!("{rel}/{name}")
            };
            if ft.is_dir() && depth < 8 {
                stack.push((entry.path(), rel_child, depth + 1));
            } else if ft.is_file() && out.len() < MAX_LISTED_FILES {
                let size = entry.metadata().map(|m| m.len()).unwrap_or(0);
                out.push(SkillFile {
                    path: rel_child,
                    size,
                });
            }
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// What a tool could run from `scripts/`: every file under it, hidden ones
/// included and symlinks followed (`inside`, relative paths), and every
/// entry whose real path lies outside the skill directory (`outside`).
#[derive(Debug, Default)]
pub(super) struct Runnable {
    pub inside: Vec<String>,
    pub outside: Vec<String>,
    /// The walk stopped at [`MAX_HASHED_DEPTH`] or [`MAX_LISTED_FILES`]
    /// with more to see: what lies past it would not be hashed, so an edit
    /// there would keep an approval; such a skill is not loaded.
    pub incomplete: bool,
}

/// How deep under a skill its hashed files may lie.
pub(super) const MAX_HASHED_DEPTH: u32 = 16;

/// Why a skill whose files could not all be hashed is not loaded.
pub(super) fn too_deep(place: &str) -> String {
    format!(
        "{place} goes deeper than {MAX_HASHED_DEPTH} directories or holds more than {MAX_LISTED_FILES} \
         files: not all of it could be hashed, so an edit there would keep an approval; the skill is \
         not loaded"
    )
}

/// Walks `scripts/` for [`Runnable`], at most [`MAX_HASHED_DEPTH`] levels
/// deep and [`MAX_LISTED_FILES`] files.
pub(super) fn runnable_files(dir: &Path) -> Runnable {
    files_under(dir, "scripts")
}

/// Every file under `sub` of `dir` (all of `dir` when `sub` is empty),
/// hidden ones and symlinks' targets included, split as [`Runnable`]: a
/// manifest's child may load any file of its skill.
pub(super) fn files_under(dir: &Path, sub: &str) -> Runnable {
    let mut found = Runnable::default();
    let Ok(real_dir) = dir.canonicalize() else {
        return found;
    };
    let mut stack = vec![(dir.join(sub), sub.to_owned(), 0u32)];
    while let Some((path, rel, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&path) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel_child = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let Ok(real) = entry.path().canonicalize() else {
                continue;
            };
            if !real.starts_with(&real_dir) {
                found.outside.push(rel_child);
            } else if real.is_dir() {
                if depth < MAX_HASHED_DEPTH {
                    stack.push((entry.path(), rel_child, depth + 1));
                } else {
                    found.incomplete = true;
                }
            } else if real.is_file() {
                if found.inside.len() < MAX_LISTED_FILES {
                    found.inside.push(rel_child);
                } else {
                    found.incomplete = true;
                }
            }
        }
    }
    found.outside.sort();
    found
}

/// Removes `.` and `..` lexically; `None` when `..` climbs above the start.
pub(super) fn normalize(rel: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in rel.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(n) => out.push(n),
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// Resolves `rel` inside `dir`: lexically first, then through symlinks.
/// `Err(true)` when it leaves the directory, `Err(false)` when it is missing.
pub fn resolve_inside(dir: &Path, rel: &str) -> Result<PathBuf, bool> {
    let norm = normalize(Path::new(rel)).ok_or(true)?;
    let joined = dir.join(&norm);
    let real = joined.canonicalize().map_err(|_| false)?;
    let real_dir = dir.canonicalize().map_err(|_| false)?;
    if real.starts_with(&real_dir) {
        Ok(real)
    } else {
        Err(true)
    }
}

/// Seed 001's limits on the file operations skilld performs for a skill
/// (Starlark's `read_file` and `write_file`, its files and references
/// served): what is read is at most 1 MiB, what is written at most
/// 100 KiB, and either is a file of one of [`SERVED_EXTENSIONS`].
pub const MAX_READ_BYTES: u64 = 1024 * 1024;
/// See [`MAX_READ_BYTES`].
pub const MAX_WRITE_BYTES: u64 = 100 * 1024;

/// The extensions served as skill files, with the content type of each.
const SERVED_TYPES: &[(&str, &str)] = &[
    ("md", "text/markdown; charset=utf-8"),
    ("txt", "text/plain; charset=utf-8"),
    ("json", "application/json"),
    ("yaml", "application/yaml"),
    ("yml", "application/yaml"),
    ("py", "text/x-python; charset=utf-8"),
    ("sh", "text/x-shellscript; charset=utf-8"),
    ("bash", "text/x-shellscript; charset=utf-8"),
    ("js", "text/javascript; charset=utf-8"),
    ("ts", "text/plain; charset=utf-8"),
    ("html", "text/html; charset=utf-8"),
    ("css", "text/css; charset=utf-8"),
    ("xml", "application/xml"),
    ("csv", "text/csv; charset=utf-8"),
    ("log", "text/plain; charset=utf-8"),
    ("toml", "application/toml"),
    ("ini", "text/plain; charset=utf-8"),
    ("cfg", "text/plain; charset=utf-8"),
    ("conf", "text/plain; charset=utf-8"),
];

/// The extensions of the files skills serve.
pub const SERVED_EXTENSIONS: [&str; SERVED_TYPES.len()] = {
    let mut out = [""; SERVED_TYPES.len()];
    let mut i = 0;
    while i < SERVED_TYPES.len() {
        out[i] = SERVED_TYPES[i].0;
        i += 1;
    }
    out
};

/// The content type a skill file with extension `ext` (lowercase) is
/// served as, or `None` when files of that kind are not served.
pub fn served_type(ext: &str) -> Option<&'static str> {
    SERVED_TYPES.iter().find(|(e, _)| *e == ext).map(|(_, t)| *t)
}

/// The bytes of `rel` inside `dir` (blocking), opened as
/// [`crate::fsafe`] does: `None` when it is missing, climbs with `..`,
/// passes a symbolic link anywhere, is not a regular file or has another
/// hard link; `Some(None)` when it is over `limit` bytes.
pub fn read_inside(dir: &Path, rel: &str, limit: u64) -> Option<Option<Vec<u8>>> {
    use std::os::fd::AsFd;
    let base = crate::fsafe::open_base(dir).ok()?;
    match crate::fsafe::read_beneath(base.as_fd(), rel, limit) {
        Ok(bytes) => Some(Some(bytes)),
        Err(crate::fsafe::Refused::TooLarge(_)) => Some(None),
        Err(_) => None,
    }
}

/// The content type a skill file at `rel` is served as, by its extension
/// (see [`served_type`]).
pub fn served_type_of(rel: &str) -> Option<&'static str> {
    served_type(&extension(rel))
}

/// `rel`'s extension, lowercased; empty without one.
pub fn extension(rel: &str) -> String {
    Path::new(rel)
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default()
}
