//! `skills.lock`: what was installed, from where, with which content, so
//! that `--locked` installs exactly that again or nothing. TOML, sorted by
//! name, one `[[skill]]` each, as Cargo.lock is: it diffs well in review.

use serde::{Deserialize, Serialize};
use std::path::Path;

/// The lock format this skilld writes and reads.
const FORMAT: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    pub format: u32,
    #[serde(default, rename = "skill")]
    pub skills: Vec<Locked>,
}

impl Default for Lock {
    fn default() -> Self {
        Self {
            format: FORMAT,
            skills: Vec::new(),
        }
    }
}

/// One installed skill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Locked {
    pub name: String,
    pub version: String,
    /// Where it came from: `registry+INDEX_URL`, `git+URL[#REF][//SUBDIR]`,
    /// `path+DIR`, `file+ZIP`, or a skilld's `http(s)://…/skills/NAME@VERSION`.
    pub source: String,
    /// The skill's content hash (`SkillDetail.hash`): SHA-256 over what it
    /// executes and serves, the same whatever zip carried it.
    pub sha256: String,
}

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("cannot read {path}: {why}")]
    Read { path: String, why: String },
    #[error("cannot write {path}: {why}")]
    Write { path: String, why: String },
}

impl Lock {
    /// The lock at `path`; an empty one when there is no file.
    pub fn read(path: &Path) -> Result<Self, LockError> {
        let read_error = |why: String| LockError::Read {
            path: path.display().to_string(),
            why,
        };
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => return Err(read_error(e.to_string())),
        };
        let lock: Lock = toml::from_str(&text).map_err(|e| read_error(e.to_string()))?;
        if lock.format != FORMAT {
            return Err(read_error(format!(
                "its format is {}; this skilld reads format {FORMAT}",
                lock.format
            )));
        }
        Ok(lock)
    }

    /// Writes the lock whole: a temporary file beside it, then a rename,
    /// so a reader never sees half of one.
    pub fn write(&self, path: &Path) -> Result<(), LockError> {
        let write_error = |why: String| LockError::Write {
            path: path.display().to_string(),
            why,
        };
        let body = toml::to_string(self).map_err(|e| write_error(e.to_string()))?;
        let text = format!("# Written by skilld: `skilld install --locked` installs exactly this.\n{body}");
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let mut file = tempfile::NamedTempFile::new_in(dir).map_err(|e| write_error(e.to_string()))?;
        std::io::Write::write_all(&mut file, text.as_bytes()).map_err(|e| write_error(e.to_string()))?;
        file.persist(path).map_err(|e| write_error(e.to_string()))?;
        Ok(())
    }

    pub fn entry(&self, name: &str) -> Option<&Locked> {
        self.skills.iter().find(|s| s.name == name)
    }

    /// Records `locked`, replacing the entry of its name.
    pub fn put(&mut self, locked: Locked) {
        self.skills.retain(|s| s.name != locked.name);
        self.skills.push(locked);
        self.skills.sort_by(|a, b| a.name.cmp(&b.name));
    }

    /// Removes `name`'s entry; whether there was one.
    pub fn remove(&mut self, name: &str) -> bool {
        let before = self.skills.len();
        self.skills.retain(|s| s.name != name);
        self.skills.len() != before
    }
}

impl Locked {
    /// What differs between the lock's entry and what is being installed,
    /// as sentences; empty when they agree.
    pub fn differences(&self, got: &Locked) -> Vec<String> {
        let mut out = Vec::new();
        for (field, want, have) in [
            ("version", &self.version, &got.version),
            ("source", &self.source, &got.source),
            ("sha256", &self.sha256, &got.sha256),
        ] {
            if want != have {
                out.push(format!("{field} is {have}, the lock says {want}"));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn locked(name: &str, version: &str) -> Locked {
        Locked {
            name: name.to_owned(),
            version: version.to_owned(),
            source: "registry+http://r/index.json".to_owned(),
            sha256: "ab".repeat(32),
        }
    }

    #[test]
    fn a_lock_round_trips_sorted_and_replaces_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("skills.lock");
        assert_eq!(Lock::read(&path).unwrap(), Lock::default());
        let mut lock = Lock::default();
        lock.put(locked("zeta", "1.0.0"));
        lock.put(locked("alpha", "1.0.0"));
        lock.put(locked("zeta", "2.0.0"));
        lock.write(&path).unwrap();
        let read = Lock::read(&path).unwrap();
        let names: Vec<_> = read
            .skills
            .iter()
            .map(|s| (&s.name[..], &s.version[..]))
            .collect();
        assert_eq!(names, [("alpha", "1.0.0"), ("zeta", "2.0.0")]);
        assert!(std::fs::read_to_string(&path).unwrap().contains("[[skill]]"));
    }

    #[test]
    fn differences_name_each_field_and_bad_files_are_refused() {
        let (a, mut b) = (locked("x", "1.0.0"), locked("x", "1.0.1"));
        assert!(a.differences(&a).is_empty());
        b.sha256 = "cd".repeat(32);
        let diff = a.differences(&b);
        assert_eq!(diff.len(), 2, "{diff:?}");
        assert!(diff[0].starts_with("version is 1.0.1"));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("skills.lock");
        std::fs::write(&path, "format = 9\n").unwrap();
        assert!(Lock::read(&path).is_err());
        std::fs::write(&path, "format = 1\n[[skill]]\nname = 1\n").unwrap();
        assert!(Lock::read(&path).is_err());
    }
}
