//! The dialects' parsers: which dialect a skill directory is written in,
//! and reading each into the unified model (`super::model`).

pub(super) mod entrypoint;
pub(super) mod examples;
pub(super) mod manifest;
mod manifest_upstream;
pub(super) mod markdown;
mod script_doc;
pub mod scripts;
pub mod security_rules;
pub mod tool_blocks;

use self::scripts::{Runtimes, list_scripts, opted_out};
use self::tool_blocks::ToolBlock;
use crate::skill::model::Dialect;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// The dialect, and the scripts its tools will need.
pub(in crate::skill) struct Detected {
    pub(in crate::skill) dialect: Dialect,
    /// The entrypoint script under `scripts/`, if there is one.
    pub(in crate::skill) entrypoint: Option<PathBuf>,
    /// The scripts under `scripts/` with a known runtime.
    pub(in crate::skill) scripts: Vec<PathBuf>,
}

/// Tool blocks make a Markdown skill; else an entrypoint (present, or
/// declared by `lang`, `image` or `resources`) makes an entrypoint skill;
/// else scripts make a scripts skill; else it is a prompt.
pub(in crate::skill) fn detect(
    dir: &Path,
    blocks: &[ToolBlock],
    fm: &Map<String, Value>,
    runtimes: &Runtimes,
) -> Detected {
    let scripts_dir = dir.join("scripts");
    // Tool blocks decide the dialect; only without them do scripts matter,
    // and not at all when the skill says they are not tools.
    let has_scripts = blocks.is_empty() && scripts_dir.is_dir() && !opted_out(fm);
    let entrypoint = if has_scripts {
        entrypoint::find(&scripts_dir)
    } else {
        None
    };
    let declares_entrypoint = ["lang", "image", "resources"].iter().any(|k| fm.contains_key(*k));
    let scripts = if has_scripts {
        let explicit: Option<Vec<String>> = fm.get("script_tools").and_then(Value::as_array).map(|names| {
            names
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        });
        list_scripts(&scripts_dir, runtimes, explicit.as_deref())
    } else {
        Vec::new()
    };
    let dialect = if !blocks.is_empty() {
        Dialect::Markdown
    } else if declares_entrypoint || entrypoint.is_some() {
        Dialect::Entrypoint
    } else if !scripts.is_empty() {
        Dialect::Scripts
    } else {
        Dialect::Prompt
    };
    Detected {
        dialect,
        entrypoint,
        scripts,
    }
}
