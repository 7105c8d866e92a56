//! Consent by capability (seed 002's approval of a skill's permissions,
//! once): the admin who installs a skill consents to the capabilities it
//! declares, its `permissions` and the network. An upgrade that asks for
//! more than the serving version waits for an admin's review, the
//! difference shown as a finding; one asking for the same or fewer
//! installs like any other.

use super::review::{Finding, FindingCode};
use crate::skill::Skill;
use std::collections::BTreeSet;
use std::path::Path;

/// A skill's declared capabilities: each permission, and `network` when it
/// may reach the network.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Capabilities(BTreeSet<String>);

impl Capabilities {
    pub fn of(skill: &Skill) -> Self {
        let mut set: BTreeSet<String> = skill.permissions.iter().cloned().collect();
        if skill.network {
            set.insert("network".to_owned());
        }
        Self(set)
    }

    /// What `self` asks for beyond `consented`, in order.
    pub fn beyond(&self, consented: &Self) -> Vec<String> {
        self.0.difference(&consented.0).cloned().collect()
    }
}

/// The finding that holds an upgrade: `added` beyond what `serving` (the
/// version consented to) declares, pointing at the line of the skill's
/// definition that declares them.
pub fn finding(definition: &Path, added: &[String], serving: &str) -> Finding {
    let file = definition
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let text = std::fs::read_to_string(definition).unwrap_or_default();
    let key = if added.iter().all(|a| a == "network") {
        "network"
    } else {
        "permissions"
    };
    let (line, excerpt) = text
        .lines()
        .enumerate()
        .find(|(_, l)| l.trim_start().starts_with(key))
        .map_or((1, String::new()), |(i, l)| {
            (i + 1, l.trim().chars().take(160).collect())
        });
    Finding {
        code: FindingCode::PermissionsAdded,
        path: file,
        line: u32::try_from(line).unwrap_or(u32::MAX),
        message: format!(
            "asks for {} beyond what {serving}, the version serving, was installed with: an admin consents to \
             the new capabilities by approving this review",
            added.join(", ")
        ),
        excerpt,
        skill: None,
        rule: None,
        severity: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(items: &[&str]) -> Capabilities {
        Capabilities(items.iter().map(|s| (*s).to_owned()).collect())
    }

    #[test]
    fn only_what_is_new_counts() {
        let old = caps(&["file:read", "net:fetch"]);
        assert!(caps(&["file:read"]).beyond(&old).is_empty(), "fewer");
        assert!(
            caps(&["net:fetch", "file:read"]).beyond(&old).is_empty(),
            "the same"
        );
        assert_eq!(
            caps(&["file:read", "shell:exec", "network"]).beyond(&old),
            ["network", "shell:exec"]
        );
    }

    #[test]
    fn the_finding_points_at_the_declaring_line() {
        let dir = tempfile::tempdir().unwrap();
        let md = dir.path().join("SKILL.md");
        std::fs::write(&md, "---\nname: x\npermissions: [file:read, shell:exec]\n---\n").unwrap();
        let f = finding(&md, &["shell:exec".to_owned()], "1.0.0");
        assert_eq!((f.path.as_str(), f.line), ("SKILL.md", 3));
        assert_eq!(f.excerpt, "permissions: [file:read, shell:exec]");
        assert!(
            f.message.contains("shell:exec") && f.message.contains("1.0.0"),
            "{}",
            f.message
        );
    }
}
