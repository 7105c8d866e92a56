//! A registry's index: one JSON document naming skills, their versions,
//! where each version's archive is, its SHA-256 and, optionally, its
//! signature. Any static host can serve one; every skilld serves its own
//! at `GET /index.json`.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The format this skilld writes and reads.
pub const FORMAT: u32 = 1;
/// The largest index read: a registry of thousands of skills fits.
pub const MAX_INDEX_BYTES: usize = 16 * 1024 * 1024;

/// `index.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Index {
    /// The index format, `1`.
    pub format: u32,
    /// The skills, each with the versions that may be installed.
    pub skills: Vec<IndexSkill>,
}

/// One skill of an index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct IndexSkill {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Oldest first; the highest semver is the one `NAME` installs.
    pub versions: Vec<IndexVersion>,
}

/// One installable version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct IndexVersion {
    pub version: String,
    /// The archive, absolute or relative to the index's own address.
    pub url: String,
    /// Lowercase hex SHA-256 of the archive's bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// The skill's hash (`SkillDetail.hash`): checked by the installer
    /// after unpacking, whatever zip the archive is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    /// A minisign signature (the `.minisig` file's text) of the skill's
    /// canonical archive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// Why an index cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("it is over {MAX_INDEX_BYTES} bytes")]
    TooLarge,
    #[error("it is not an index: {0}")]
    Malformed(String),
    #[error("its format is {0}; this skilld reads format {FORMAT}")]
    Format(u32),
}

impl Index {
    /// Reads an index, keeping only the versions that can be installed
    /// safely: a valid name and semver, an address, and something to check
    /// the archive against (`sha256` or `hash`). The rest are named in the
    /// second value.
    pub fn parse(body: &[u8]) -> Result<(Self, Vec<String>), IndexError> {
        if body.len() > MAX_INDEX_BYTES {
            return Err(IndexError::TooLarge);
        }
        let mut index: Index =
            serde_json::from_slice(body).map_err(|e| IndexError::Malformed(e.to_string()))?;
        if index.format != FORMAT {
            return Err(IndexError::Format(index.format));
        }
        let mut skipped = Vec::new();
        let mut names = std::collections::HashSet::new();
        index.skills.retain_mut(|skill| {
            let valid = crate::skill::names::check_name(&skill.name) == crate::skill::names::NameCheck::Valid;
            if !valid {
                skipped.push(format!("'{}': not a skill name", skill.name.escape_debug()));
                return false;
            }
            if !names.insert(skill.name.clone()) {
                skipped.push(format!("{}: listed twice; the first is kept", skill.name));
                return false;
            }
            let mut versions = std::collections::HashSet::new();
            skill.versions.retain(|v| match v.unusable() {
                Some(why) => {
                    skipped.push(format!("{}@{}: {why}", skill.name, v.version.escape_debug()));
                    false
                }
                None if !versions.insert(v.version.clone()) => {
                    skipped.push(format!(
                        "{}@{}: listed twice; the first is kept",
                        skill.name, v.version
                    ));
                    false
                }
                None => true,
            });
            skill.description = printable(&skill.description);
            !skill.versions.is_empty()
        });
        Ok((index, skipped))
    }

    /// The skills whose name or description holds every word of `query`,
    /// case-insensitively; an empty query finds them all.
    pub fn search<'a>(&'a self, query: &str) -> impl Iterator<Item = &'a IndexSkill> {
        let words: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
        self.skills.iter().filter(move |s| {
            let text = format!("{} {}", s.name, s.description).to_lowercase();
            words.iter().all(|w| text.contains(w.as_str()))
        })
    }

    pub fn skill(&self, name: &str) -> Option<&IndexSkill> {
        self.skills.iter().find(|s| s.name == name)
    }
}

impl IndexSkill {
    /// `version`, or the highest release (a pre-release only when there is
    /// nothing else).
    pub fn version(&self, version: Option<&str>) -> Option<&IndexVersion> {
        match version {
            Some(v) => self.versions.iter().find(|x| x.version == v),
            None => self.versions.iter().max_by_key(|v| {
                let parsed = semver::Version::parse(&v.version).ok();
                let release = parsed.as_ref().is_some_and(|p| p.pre.is_empty());
                (release, parsed)
            }),
        }
    }
}

impl IndexVersion {
    /// Why this version cannot be installed, if it cannot.
    fn unusable(&self) -> Option<&'static str> {
        if !crate::catalog::installed::valid_version(&self.version) {
            return Some("not a semver version");
        }
        if self.url.is_empty() || self.url.len() > 2048 {
            return Some("no usable address");
        }
        if self.sha256.is_none() && self.hash.is_none() {
            return Some("neither sha256 nor hash to check it against");
        }
        if self.sha256.as_deref().is_some_and(|s| !is_sha256(s)) {
            return Some("sha256 is not 64 hex digits");
        }
        if self.hash.as_deref().is_some_and(|s| !is_sha256(s)) {
            return Some("hash is not 64 hex digits");
        }
        None
    }
}

fn is_sha256(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A registry's text as it may reach a terminal: no control characters
/// (an escape sequence could rewrite what the user sees), at most 1,000
/// characters.
pub fn printable(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(1000)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HASH: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn index(versions: serde_json::Value) -> serde_json::Value {
        serde_json::json!({"format": 1, "skills": [
            {"name": "kube", "description": "Kubernetes helper", "versions": versions}
        ]})
    }

    #[test]
    fn unusable_versions_are_left_out_and_named() {
        let sha = "a".repeat(64);
        let body = index(serde_json::json!([
            {"version": "1.0.0", "url": "k.zip", "sha256": sha},
            {"version": "one", "url": "k.zip", "sha256": sha},
            {"version": "1.1.0", "url": "k.zip"},
            {"version": "1.2.0", "url": "k.zip", "sha256": "zz"},
            {"version": "2.0.0", "url": "", "hash": HASH},
        ]));
        let (index, skipped) = Index::parse(body.to_string().as_bytes()).unwrap();
        let versions: Vec<_> = index.skills[0].versions.iter().map(|v| &v.version).collect();
        assert_eq!(versions, ["1.0.0"]);
        assert_eq!(skipped.len(), 4, "{skipped:?}");
    }

    #[test]
    fn duplicates_bad_hashes_and_control_characters_are_left_out() {
        let body = serde_json::json!({"format": 1, "skills": [
            {"name": "kube", "description": "a\u{1b}]52;c;evil\u{7}b", "versions": [
                {"version": "1.0.0", "url": "first", "hash": HASH},
                {"version": "1.0.0", "url": "second", "hash": HASH},
                {"version": "1.1.0", "url": "x", "hash": "abc&trust=user"}]},
            {"name": "kube", "versions": [{"version": "2.0.0", "url": "y", "hash": HASH}]},
            {"name": "my_skill", "versions": [{"version": "1.0.0", "url": "z", "hash": HASH}]},
        ]});
        let (index, skipped) = Index::parse(body.to_string().as_bytes()).unwrap();
        assert_eq!(index.skills.len(), 1, "{skipped:?}");
        let kube = &index.skills[0];
        assert_eq!(kube.versions.len(), 1);
        assert_eq!(kube.versions[0].url, "first");
        assert!(
            !kube.description.chars().any(char::is_control),
            "{:?}",
            kube.description
        );
        assert_eq!(skipped.len(), 4, "{skipped:?}");
    }

    #[test]
    fn a_bad_name_or_format_is_refused() {
        let bad_name = serde_json::json!({"format": 1, "skills": [
            {"name": "../x", "versions": [{"version": "1.0.0", "url": "x", "hash": HASH}]}
        ]});
        let (index, skipped) = Index::parse(bad_name.to_string().as_bytes()).unwrap();
        assert!(index.skills.is_empty() && skipped.len() == 1);
        assert!(matches!(
            Index::parse(br#"{"format": 2, "skills": []}"#),
            Err(IndexError::Format(2))
        ));
        assert!(matches!(Index::parse(b"[]"), Err(IndexError::Malformed(_))));
    }

    #[test]
    fn the_highest_release_is_chosen_and_words_all_match() {
        let body = index(serde_json::json!([
            {"version": "1.10.0", "url": "a", "hash": HASH},
            {"version": "1.9.0", "url": "b", "hash": HASH},
            {"version": "2.0.0-rc.1", "url": "c", "hash": HASH},
        ]));
        let (index, _) = Index::parse(body.to_string().as_bytes()).unwrap();
        let skill = index.skill("kube").unwrap();
        assert_eq!(skill.version(None).unwrap().version, "1.10.0");
        assert_eq!(skill.version(Some("1.9.0")).unwrap().url, "b");
        assert!(skill.version(Some("3.0.0")).is_none());
        assert_eq!(index.search("KUBERNETES help").count(), 1);
        assert_eq!(index.search("kubernetes deploy").count(), 0);
        assert_eq!(index.search("").count(), 1);
    }
}
