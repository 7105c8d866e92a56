//! The entrypoint dialect: one tool, named after the skill, that
//! runs a `main` script with whatever arguments object it is given.

use super::diag::Code;
use super::model::*;
use super::names::{fit_name, is_generated_tool_name};
use super::parse::Parse;
use super::scripts::{Runtimes, runtime_for};
use std::path::{Path, PathBuf};

/// Entrypoint names, in the order they are looked for.
const ENTRYPOINTS: [&str; 4] = ["main.py", "main.sh", "main.js", "run.py"];

/// The first entrypoint script that exists under `scripts/`.
pub(super) fn find(scripts_dir: &Path) -> Option<PathBuf> {
    ENTRYPOINTS
        .iter()
        .map(|e| scripts_dir.join(e))
        .find(|p| p.is_file())
}

impl Parse<'_, '_> {
    /// The skill's one tool, which takes the skill's description; none
    /// (and an error) without an entrypoint script.
    pub(super) fn entrypoint_tool(
        &mut self,
        skill: &str,
        entrypoint: Option<&Path>,
        lang: Option<&str>,
        description: &str,
        runtimes: &Runtimes,
    ) -> Vec<Tool> {
        let Some(ep) = entrypoint else {
            self.error(
                Code::MissingEntrypoint,
                None,
                format!(
                    "no entrypoint script: add scripts/{} (or {})",
                    ENTRYPOINTS[0],
                    ENTRYPOINTS[1..].join(", ")
                ),
            );
            return Vec::new();
        };
        let tool_name = fit_name(skill.replace('-', "_"));
        if !is_generated_tool_name(&tool_name) {
            self.error(
                Code::InvalidToolName,
                None,
                format!("the entrypoint tool would be named '{tool_name}', which is not ^[a-z0-9_]{{1,64}}$; rename the skill"),
            );
        }
        let runtime = runtime_for(ep, lang, runtimes);
        vec![Tool {
            name: tool_name,
            description: description.to_owned(),
            params: Vec::new(),
            open_object: true,
            schema: None,
            requires_approval: false,
            action: Action::Entrypoint {
                path: ep.to_path_buf(),
                runtime,
            },
        }]
    }
}
