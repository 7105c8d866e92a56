//! A skill as the MCP Skills extension (SEP-2640) serves it: its
//! `SKILL.md` (the file as written, or one made from the definition when
//! the file cannot stand as an Agent Skill on its own), the frontmatter
//! of that `SKILL.md`, and every served file with its digest.
//!
//! Every byte served here is covered by the skill's content hash: a served
//! file is hashed, and a made `SKILL.md` follows from the hashed
//! definition. So the digests a client saw name exactly what an approval
//! or grant binds to.

use super::files::served_type_of;
use super::hash::{Digests, FileDigest};
use super::model::{Dialect, Listing, SkillFile};
use serde_json::{Map, Value};
use std::sync::Arc;

/// The most files, and bytes, one skill's listing holds (SEP-2640's
/// limits: 512 entries, 16 MiB).
const MAX_FILES: usize = 512;
const MAX_TOTAL_BYTES: u64 = 16 * 1024 * 1024;

/// The file name of a skill's entry point in the extension.
pub const SKILL_MD: &str = "SKILL.md";

/// What the listing is made from.
pub(super) struct Source<'a> {
    pub name: &'a str,
    /// The description skilld derived (from `summary` for a prompt skill).
    pub description: &'a str,
    pub dialect: Dialect,
    /// The definition's frontmatter (empty for a manifest).
    pub frontmatter: &'a Map<String, Value>,
    /// The definition's bytes, and the instructions as written.
    pub definition: &'a [u8],
    pub body: &'a str,
}

/// The files of `files` the extension serves besides `SKILL.md`: the kinds
/// the file routes serve, small enough to read back whole.
pub(super) fn served_paths(files: &[SkillFile]) -> Vec<String> {
    files
        .iter()
        .filter(|f| f.path != SKILL_MD && f.path != "SKILL.yaml")
        .filter(|f| served_type_of(&f.path).is_some() && f.size <= super::MAX_DEFINITION_BYTES)
        .map(|f| f.path.clone())
        .collect()
}

/// The listing, or `None` when the skill cannot be served as an Agent
/// Skill: a name outside the Agent Skills naming rules, no description,
/// or more files or bytes than the extension allows.
pub(super) fn listing(source: &Source<'_>, served: &[String], digests: &Digests) -> Option<Arc<Listing>> {
    if !is_agent_skill_name(source.name) || source.description.trim().is_empty() {
        return None;
    }
    let (frontmatter, made) = skill_md(source)?;
    let own = made
        .as_deref()
        .map_or_else(|| FileDigest::of(source.definition), FileDigest::of);
    let mut files = vec![(SKILL_MD.to_owned(), own)];
    files.extend(
        served
            .iter()
            .filter_map(|p| digests.0.get(p).map(|d| (p.clone(), d.clone()))),
    );
    let total: u64 = files.iter().map(|(_, d)| d.size).sum();
    if files.len() > MAX_FILES || total > MAX_TOTAL_BYTES {
        return None;
    }
    Some(Arc::new(Listing {
        frontmatter,
        made: made.map(Arc::from),
        body: source.body.to_owned(),
        files,
    }))
}

/// The frontmatter of the served `SKILL.md`, and its bytes when it is made.
type Served = (Map<String, Value>, Option<Vec<u8>>);

/// The frontmatter and, when the file cannot be served as written, the
/// `SKILL.md` made from the definition.
fn skill_md(source: &Source<'_>) -> Option<Served> {
    let fm = source.frontmatter;
    let stands = source.dialect != Dialect::Manifest
        && fm.get("name").and_then(Value::as_str) == Some(source.name)
        && fm
            .get("description")
            .and_then(Value::as_str)
            .is_some_and(|d| !d.trim().is_empty());
    if stands {
        return Some((fm.clone(), None));
    }
    let mut made = Map::new();
    made.insert("name".into(), source.name.into());
    made.insert("description".into(), source.description.into());
    if source.dialect != Dialect::Manifest {
        for (key, value) in fm {
            made.entry(key.clone()).or_insert_with(|| value.clone());
        }
    }
    let yaml = serde_norway::to_string(&made).ok()?;
    let text = format!(
        "---\n{yaml}---\n\n{}",
        source.body.trim_start_matches(['\r', '\n'])
    );
    Some((made, Some(text.into_bytes())))
}

/// The Agent Skills naming rule: 1–64 characters of lowercase letters,
/// digits and single inner hyphens.
pub fn is_agent_skill_name(name: &str) -> bool {
    let ok_chars = name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    ok_chars
        && (1..=64).contains(&name.len())
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn source<'a>(fm: &'a Map<String, Value>, def: &'a [u8]) -> Source<'a> {
        Source {
            name: "pdf-tools",
            description: "Work with PDFs.",
            dialect: Dialect::Scripts,
            frontmatter: fm,
            definition: def,
            body: "Use {baseDir}/scripts/x.py.\n",
        }
    }

    #[test]
    fn a_file_that_stands_is_served_as_written() {
        let fm = json!({"name": "pdf-tools", "description": "Work with PDFs.", "license": "MIT"});
        let fm = fm.as_object().cloned().unwrap_or_default();
        let def = b"---\nname: pdf-tools\n---\n";
        let listing = listing(&source(&fm, def), &[], &Digests::default()).unwrap();
        assert!(listing.made.is_none());
        assert_eq!(listing.files[0].1, FileDigest::of(def));
        assert_eq!(listing.frontmatter, fm);
    }

    #[test]
    fn a_file_without_a_name_gets_one_made_whose_frontmatter_reads_back() {
        let fm = json!({"summary": "Work with PDFs.", "modes": ["Dev"]});
        let fm = fm.as_object().cloned().unwrap_or_default();
        let listing = listing(&source(&fm, b"x"), &[], &Digests::default()).unwrap();
        let made = std::str::from_utf8(listing.made.as_deref().unwrap()).unwrap();
        let yaml = made.strip_prefix("---\n").unwrap().split("---\n").next().unwrap();
        let back: Value = serde_norway::from_str(yaml).unwrap();
        assert_eq!(back, Value::Object(listing.frontmatter.clone()));
        assert_eq!(back["name"], "pdf-tools");
        assert!(made.ends_with("Use {baseDir}/scripts/x.py.\n"), "{made}");
        assert_eq!(listing.files[0].1, FileDigest::of(made.as_bytes()));
    }

    #[test]
    fn names_outside_the_agent_skills_rule_are_not_listed() {
        for bad in ["Pdf", "pdf_tools", "-pdf", "pdf-", "a--b", "", &"a".repeat(65)] {
            assert!(!is_agent_skill_name(bad), "{bad}");
        }
        assert!(is_agent_skill_name("pdf-tools2"));
    }
}
