//! Archives checked outside the installed root. `skilld add` places a
//! skill into a project's own skills directory
//! (`<workspace>/.agent/skills/NAME`), checked as an upload is — hostile
//! archives refused, linted, its dependency files vetted, its hash
//! compared — but with no versions beside it: the project's root holds one
//! copy of each skill, which the project's repository tracks. `skilld
//! index` reads what each archive of a static registry holds.

use super::signature::SignaturePolicy;
use super::unpack::UnpackLimits;
use super::{InstallError, check, stage, verify_signature, vet_dependencies};
use crate::skill::{Runtimes, SkillRules, Trust};
use std::path::{Path, PathBuf};

/// Where `add` places skills, under a workspace.
pub const PROJECT_SKILLS: &str = ".agent/skills";
/// Archives are unpacked here first, inside the skills directory so the
/// final move is a rename on one filesystem; hidden from the loader.
const STAGING: &str = ".staging";

#[derive(Debug, thiserror::Error)]
pub enum AddError {
    #[error(transparent)]
    Install(#[from] InstallError),
    #[error("{0} exists; pass --force to replace it")]
    Exists(PathBuf),
    #[error("the archive holds {got}, not {want} as its registry lists it; nothing was added")]
    NotAsListed { want: String, got: String },
}

impl From<std::io::Error> for AddError {
    fn from(e: std::io::Error) -> Self {
        AddError::Install(e.into())
    }
}

/// What to place, and how.
pub struct Adding<'a> {
    pub archive: std::fs::File,
    /// The project's skills directory (`<workspace>/.agent/skills`).
    pub skills_dir: &'a Path,
    /// The name the registry lists it under.
    pub name: &'a str,
    /// The version the registry lists it at.
    pub version: &'a str,
    /// The skill hash it must have, when its source gives one.
    pub expect_hash: Option<&'a str>,
    /// Replace a skill already there.
    pub force: bool,
    pub limits: UnpackLimits,
    pub npm_registry: &'a str,
    /// Its `.minisig`, checked as an upload's is against `policy`.
    pub signature: Option<&'a str>,
    pub policy: &'a SignaturePolicy,
}

/// What was placed: its directory, version and hash.
pub struct Added {
    pub dir: PathBuf,
    pub version: Option<String>,
    pub hash: String,
}

/// Unpacks, checks and moves a skill into the project's skills directory;
/// nothing is left behind on any error.
pub fn add(adding: Adding<'_>) -> Result<Added, AddError> {
    let presented = adding.policy.screen(adding.signature)?;
    let staging = adding.skills_dir.join(STAGING);
    let staged = stage::stage(adding.archive, &staging, &adding.limits)?;
    verify_signature(&staged, &presented)?;
    let not_as_listed = |version: &str| AddError::NotAsListed {
        want: format!("{}@{}", adding.name, adding.version),
        got: format!("{}@{version}", staged.name),
    };
    if staged.name != adding.name {
        return Err(not_as_listed("…"));
    }
    let rules = SkillRules {
        deps_dir: None,
        ..SkillRules::default()
    };
    let checked = check(
        &staged.dir,
        Trust::User,
        &Runtimes::default(),
        &rules,
        crate::skill::DEFAULT_MAX_TIMEOUT_SECS,
    )?;
    if checked.version.as_deref() != Some(adding.version) {
        return Err(not_as_listed(checked.version.as_deref().unwrap_or("no version")));
    }
    vet_dependencies(&staged.dir, adding.npm_registry)?;
    if let Some(expected) = adding.expect_hash.filter(|h| **h != checked.hash) {
        return Err(InstallError::HashMismatch {
            expected: expected.to_owned(),
            got: checked.hash,
        }
        .into());
    }
    let target = adding.skills_dir.join(&staged.name);
    replace(&staged.dir, &target, &staged.area, adding.force)?;
    Ok(Added {
        dir: target,
        version: checked.version,
        hash: checked.hash,
    })
}

/// Moves `from` to `target`; an existing `target` is moved aside into the
/// staging area first (and removed with it) when `force` says so.
fn replace(from: &Path, target: &Path, area: &Path, force: bool) -> Result<(), AddError> {
    if std::fs::symlink_metadata(target).is_ok() {
        if !force {
            return Err(AddError::Exists(target.to_path_buf()));
        }
        let aside = area.join("replaced");
        std::fs::rename(target, &aside)?;
        if let Err(e) = std::fs::rename(from, target) {
            // Put the old one back: the staging area goes with everything in it.
            let _ = std::fs::rename(&aside, target);
            return Err(e.into());
        }
        return Ok(());
    }
    std::fs::rename(from, target)?;
    Ok(())
}

/// Removes what earlier adds left in the staging area (one stopped
/// half-way), and the area itself when it is empty.
pub fn clear_staging(skills_dir: &Path) {
    let staging = skills_dir.join(STAGING);
    if let Ok(entries) = std::fs::read_dir(&staging) {
        for entry in entries.filter_map(Result::ok) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
    let _ = std::fs::remove_dir(&staging);
}

/// What an archive holds, as a registry's index lists it.
pub struct Inspected {
    pub name: String,
    pub version: Option<String>,
    pub description: String,
    pub hash: String,
}

/// Unpacks and checks an archive in a private temporary directory, and
/// says what skill it holds; nothing of it is kept.
pub fn inspect(archive: std::fs::File, limits: &UnpackLimits) -> Result<Inspected, InstallError> {
    let scratch = tempfile::tempdir()?;
    let staged = stage::stage(archive, scratch.path(), limits)?;
    let rules = SkillRules {
        deps_dir: None,
        ..SkillRules::default()
    };
    let checked = check(
        &staged.dir,
        Trust::Untrusted,
        &Runtimes::default(),
        &rules,
        crate::skill::DEFAULT_MAX_TIMEOUT_SECS,
    )?;
    Ok(Inspected {
        name: staged.name.clone(),
        version: checked.version,
        description: checked.description,
        hash: checked.hash,
    })
}
