//! The installed root's layout: every version of an uploaded skill side by
//! side, and a small state file saying which one serves.
//!
//! ```text
//! <root>/<name>/state.json           which versions exist, which is active
//! <root>/<name>/<version>/<name>/    the skill's files, never changed
//! <root>/<name>/<version>/env/       its dependencies (venv, node_modules)
//! <root>/<name>/<version>/install.log
//! <root>/.staging/                   uploads being unpacked and checked
//! ```
//!
//! The skill directory repeats the name because a skill's directory is
//! named after it (the loader checks). The state lives beside the files,
//! not in the run log's database: the files are on this machine's disk,
//! and several instances sharing one PostgreSQL each have their own.

use crate::trust::Trust;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};
use utoipa::ToSchema;

/// The state file of one installed skill.
pub const STATE_FILE: &str = "state.json";
/// Where uploads are unpacked before they are checked; hidden from scans.
pub const STAGING: &str = ".staging";
/// The bounded output of a version's dependency installer.
pub const INSTALL_LOG: &str = "install.log";
/// A version's dependencies, outside its files so its hash stays the
/// archive's. The loader finds them there itself, so the name lives with it.
pub use crate::skill::prepared::ENV_DIR;

/// Where a version stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum VersionStatus {
    /// Installed and allowed to serve.
    Ready,
    /// Waits for an admin's review (`review_uploads`).
    PendingReview,
    /// An admin's review said no; it never serves.
    Rejected,
    /// Its dependencies failed to install; its log says why.
    Failed,
}

impl VersionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            VersionStatus::Ready => "ready",
            VersionStatus::PendingReview => "pending_review",
            VersionStatus::Rejected => "rejected",
            VersionStatus::Failed => "failed",
        }
    }
}

/// An admin's decision on a version held for review.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Review {
    pub approved: bool,
    pub by: Option<String>,
    pub note: Option<String>,
    #[schema(value_type = String, format = DateTime)]
    pub at: DateTime<Utc>,
}

/// One installed version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionState {
    pub version: String,
    pub hash: String,
    pub status: VersionStatus,
    pub trust: Trust,
    pub installed_at: DateTime<Utc>,
    #[serde(default)]
    pub review: Option<Review>,
    /// The signature it was installed with, checked by a trusted key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<SignatureRecord>,
    /// Lowercase hex SHA-256 of its canonical archive (`skilld package`'s
    /// bytes, what a signature covers), whether signed or not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive_sha256: Option<String>,
}

/// A verified signature of a version: the `.minisig` as it came, and the
/// id of the trusted key that made it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignatureRecord {
    pub minisig: String,
    pub key_id: String,
}

/// Every version of one installed skill, sorted by semver, and the one
/// that serves.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillState {
    pub active: Option<String>,
    pub versions: Vec<VersionState>,
}

impl SkillState {
    pub fn version(&self, version: &str) -> Option<&VersionState> {
        self.versions.iter().find(|v| v.version == version)
    }

    pub fn version_mut(&mut self, version: &str) -> Option<&mut VersionState> {
        self.versions.iter_mut().find(|v| v.version == version)
    }

    /// The highest ready version: what `latest` names (seed 003).
    pub fn latest(&self) -> Option<&VersionState> {
        self.versions
            .iter()
            .filter(|v| v.status == VersionStatus::Ready)
            .max_by(|a, b| semver_order(&a.version, &b.version))
    }

    /// `latest` resolved; any other name as given.
    pub fn resolve<'a>(&'a self, version: &'a str) -> Option<&'a str> {
        if version == "latest" {
            self.latest().map(|v| v.version.as_str())
        } else {
            Some(version)
        }
    }

    /// Adds or replaces a version, keeping semver order.
    pub fn put(&mut self, state: VersionState) {
        self.versions.retain(|v| v.version != state.version);
        self.versions.push(state);
        self.versions.sort_by(|a, b| semver_order(&a.version, &b.version));
    }

    /// The active version when it may serve.
    pub fn serving(&self) -> Option<&VersionState> {
        let active = self.version(self.active.as_deref()?)?;
        (active.status == VersionStatus::Ready).then_some(active)
    }
}

fn semver_order(a: &str, b: &str) -> std::cmp::Ordering {
    match (semver::Version::parse(a), semver::Version::parse(b)) {
        (Ok(a), Ok(b)) => a.cmp(&b),
        _ => a.cmp(b),
    }
}

/// A version an installed skill may have: semver, since the directory is
/// named after it and `latest` means the highest.
pub fn valid_version(version: &str) -> bool {
    version.len() <= 64 && semver::Version::parse(version).is_ok()
}

/// The directory of one version (its files, dependencies and log).
pub fn version_dir(root: &Path, name: &str, version: &str) -> PathBuf {
    root.join(name).join(version)
}

/// The skill directory of one version.
pub fn skill_dir(root: &Path, name: &str, version: &str) -> PathBuf {
    version_dir(root, name, version).join(name)
}

/// Whether `name` can name an installed skill: a skill name, so it is one
/// path component and never `..` (routes hand it in from URLs).
pub fn is_installable_name(name: &str) -> bool {
    !matches!(
        crate::skill::names::check_name(name),
        crate::skill::names::NameCheck::Invalid
    )
}

/// The state of skill `name`; `None` when it was never installed (or
/// `name` is no skill name).
pub fn read_state(root: &Path, name: &str) -> std::io::Result<Option<SkillState>> {
    if !is_installable_name(name) {
        return Ok(None);
    }
    let path = root.join(name).join(STATE_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    serde_json::from_slice(&bytes).map(Some).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{}: {e}", path.display()),
        )
    })
}

/// Replaces the state of skill `name` whole: written beside it, synced,
/// then renamed over it, so a crash leaves the old state or the new one.
pub fn write_state(root: &Path, name: &str, state: &SkillState) -> std::io::Result<()> {
    if !is_installable_name(name) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("'{name}' is not a skill name"),
        ));
    }
    let dir = root.join(name);
    std::fs::create_dir_all(&dir)?;
    let mut file = tempfile::NamedTempFile::new_in(&dir)?;
    serde_json::to_writer_pretty(&mut file, state)?;
    file.write_all(b"\n")?;
    file.as_file().sync_all()?;
    file.persist(dir.join(STATE_FILE)).map_err(|e| e.error)?;
    sync_dir(&dir)
}

/// Makes a rename in `dir` durable.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Every installed skill's name (the visible directories of the root).
pub fn names(root: &Path) -> std::io::Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(root)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with('.') && entry.file_type()?.is_dir() {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

/// What serves from an installed root: each skill's directory and trust.
pub struct Serving {
    pub dirs: Vec<(PathBuf, Trust)>,
    /// Skills whose state cannot be read, with why: they serve nothing.
    pub unreadable: Vec<(String, String)>,
}

/// The skill directories that serve, with their trust: each skill's
/// active version when it is ready. A skill whose state cannot be read
/// serves nothing and is reported.
pub fn serving(root: &Path) -> std::io::Result<Serving> {
    let (mut dirs, mut unreadable) = (Vec::new(), Vec::new());
    for name in names(root)? {
        match read_state(root, &name) {
            Ok(Some(state)) => {
                if let Some(v) = state.serving() {
                    dirs.push((skill_dir(root, &name, &v.version), v.trust));
                }
            }
            Ok(None) => {}
            Err(e) => unreadable.push((name, e.to_string())),
        }
    }
    Ok(Serving { dirs, unreadable })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(v: &str, status: VersionStatus) -> VersionState {
        VersionState {
            version: v.to_owned(),
            hash: format!("h{v}"),
            status,
            trust: Trust::Untrusted,
            installed_at: Utc::now(),
            review: None,
            signature: None,
            archive_sha256: None,
        }
    }

    #[test]
    fn versions_keep_semver_order_and_latest_is_the_highest_ready() {
        let mut s = SkillState::default();
        s.put(version("1.10.0", VersionStatus::PendingReview));
        s.put(version("1.2.0", VersionStatus::Ready));
        s.put(version("1.9.0", VersionStatus::Ready));
        let order: Vec<_> = s.versions.iter().map(|v| v.version.as_str()).collect();
        assert_eq!(order, ["1.2.0", "1.9.0", "1.10.0"]);
        assert_eq!(s.resolve("latest"), Some("1.9.0"));
        assert_eq!(s.resolve("1.2.0"), Some("1.2.0"));
        s.active = Some("1.10.0".into());
        assert!(s.serving().is_none(), "a pending version never serves");
    }

    #[test]
    fn state_round_trips_and_serving_lists_only_ready_active_versions() {
        let root = tempfile::tempdir().unwrap();
        let mut s = SkillState {
            active: Some("1.0.0".into()),
            ..SkillState::default()
        };
        s.put(version("1.0.0", VersionStatus::Ready));
        write_state(root.path(), "a", &s).unwrap();
        assert_eq!(read_state(root.path(), "a").unwrap(), Some(s));
        std::fs::create_dir_all(root.path().join("b")).unwrap();
        std::fs::write(root.path().join("b").join(STATE_FILE), "{").unwrap();
        std::fs::create_dir_all(root.path().join(STAGING)).unwrap();
        let Serving {
            dirs,
            unreadable: bad,
        } = serving(root.path()).unwrap();
        assert_eq!(dirs, [(skill_dir(root.path(), "a", "1.0.0"), Trust::Untrusted)]);
        assert_eq!(bad.len(), 1);
        assert_eq!(bad[0].0, "b");
    }

    #[test]
    fn a_name_from_a_url_never_leaves_the_root() {
        let root = tempfile::tempdir().unwrap();
        let inner = root.path().join("inner");
        std::fs::create_dir(&inner).unwrap();
        write_state(root.path(), "x", &SkillState::default()).unwrap();
        std::fs::rename(
            root.path().join("x").join(STATE_FILE),
            root.path().join(STATE_FILE),
        )
        .unwrap();
        for name in ["..", ".", "", "a/b", "../inner"] {
            assert_eq!(read_state(&inner, name).unwrap(), None, "{name}");
            assert!(
                write_state(&inner, name, &SkillState::default()).is_err(),
                "{name}"
            );
        }
    }

    #[test]
    fn only_semver_names_a_version() {
        assert!(valid_version("1.2.3-rc.1+b5"));
        for bad in ["", "..", "1.0", "latest", "1.0.0/..", "x"] {
            assert!(!valid_version(bad), "{bad}");
        }
    }
}
