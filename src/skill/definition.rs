//! What loading any skill definition shares, whatever its dialect: the
//! options, reading the file (bounded, UTF-8), the directory's name as the
//! skill's, and `{baseDir}` in instructions.

use super::backend::Launch;
use super::diag::{Code, Diagnostic};
use super::dialect::scripts::Runtimes;
use super::files::{PathCache, read_limited};
use super::names::{NameCheck, check_name};
use super::parse::Parse;
use super::rules::SkillRules;
use crate::trust::Trust;
use std::path::Path;

/// The largest definition file that is parsed.
pub const MAX_DEFINITION_BYTES: u64 = 1024 * 1024;

/// What a load needs to know beyond the directory itself.
pub struct LoadOptions<'a> {
    pub source: &'a str,
    pub trust: Trust,
    pub max_timeout_secs: u64,
    pub runtimes: &'a Runtimes,
    /// The skill is an installed version: its dependencies (if any) sit
    /// beside it (`prepared::deps_of`), for its tools and its backend.
    pub installed: bool,
    pub path: &'a PathCache,
    /// Starts manifests' backends; without one they cannot load.
    pub launcher: Option<&'a dyn Launch>,
    /// The image allowlist, entrypoint defaults and where plain skills'
    /// dependencies are prepared.
    pub rules: &'a SkillRules,
}

/// Instructions with `{baseDir}` (the placeholder skills written for
/// Claude use for their own directory) replaced by the skill's directory,
/// so that the paths they give can be followed.
pub(super) fn with_base_dir(instructions: &str, dir: &Path) -> String {
    instructions.replace("{baseDir}", &dir.display().to_string())
}

/// The bytes of a definition file (`SKILL.md`, `SKILL.yaml`), unless it
/// is missing, unreadable or too large.
pub(super) fn read_definition(def_path: &Path, path: &str, diags: &mut Vec<Diagnostic>) -> Option<Vec<u8>> {
    let file = def_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match read_limited(def_path, MAX_DEFINITION_BYTES) {
        Ok(Some(bytes)) => Some(bytes),
        Ok(None) => {
            diags.push(Diagnostic::error(
                Code::TooLarge,
                path,
                format!("{file} is larger than {MAX_DEFINITION_BYTES} bytes and is not parsed"),
            ));
            None
        }
        Err(e) => {
            diags.push(Diagnostic::error(
                Code::Unreadable,
                path,
                format!("cannot read {file}: {e}"),
            ));
            None
        }
    }
}

pub(super) fn decode<'b>(bytes: &'b [u8], path: &str, diags: &mut Vec<Diagnostic>) -> Option<&'b str> {
    match std::str::from_utf8(bytes) {
        Ok(t) => Some(t),
        Err(e) => {
            diags.push(Diagnostic::error(
                Code::InvalidEncoding,
                path,
                format!("{path} is not valid UTF-8 (at byte {})", e.valid_up_to()),
            ));
            None
        }
    }
}

impl Parse<'_, '_> {
    /// The directory's name is the skill's, so it must be a valid name.
    pub(super) fn dir_name(&mut self, name: &str) {
        match check_name(name) {
            NameCheck::Valid => {}
            NameCheck::Underscore => self.warn(
                Code::NameStyle,
                None,
                format!("skill name '{name}' uses '_'; the convention is lowercase words joined by single hyphens"),
            ),
            NameCheck::Invalid => self.error(
                Code::InvalidName,
                None,
                format!(
                    "skill name '{name}' is invalid: use 1-64 lowercase letters and digits, with single hyphens between them"
                ),
            ),
        }
    }
}
