//! The entrypoint dialect: one tool, named after the skill, that
//! runs a `main` script with whatever arguments object it is given.

use super::scripts::{Runtimes, runtime_for};
use crate::skill::diag::Code;
use crate::skill::fields::Fields;
use crate::skill::model::*;
use crate::skill::names::{fit_name, is_generated_tool_name};
use crate::skill::parse::Parse;
use crate::skill::rules::{SkillRules, default_image};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// Entrypoint names, in the order they are looked for.
const ENTRYPOINTS: [&str; 4] = ["main.py", "main.sh", "main.js", "run.py"];

/// The first entrypoint script that exists under `scripts/`.
pub(in crate::skill) fn find(scripts_dir: &Path) -> Option<PathBuf> {
    ENTRYPOINTS
        .iter()
        .map(|e| scripts_dir.join(e))
        .find(|p| p.is_file())
}

impl Parse<'_, '_> {
    /// The skill's one tool, which takes the skill's description; none
    /// (and an error) without an entrypoint script.
    pub(in crate::skill) fn entrypoint_tool(
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
        self.runtime_found(ep, &runtime);
        vec![Tool {
            name: tool_name,
            description: description.to_owned(),
            params: Vec::new(),
            open_object: true,
            schema: None,
            requires_approval: false,
            read_only: None,
            action: Action::Entrypoint {
                path: ep.to_path_buf(),
                runtime,
            },
        }]
    }
}

impl Parse<'_, '_> {
    /// Seed 003's server side of an entrypoint skill: what it does not set
    /// of timeout, memory and CPU comes from the server's defaults, and
    /// its image (named, or its language's default) must be on the
    /// server's allowlist.
    pub(in crate::skill) fn entrypoint_rules(
        &mut self,
        fm: &Map<String, Value>,
        fields: &mut Fields,
        entrypoint: Option<&Path>,
        rules: &SkillRules,
        max_timeout_secs: u64,
    ) {
        let defaults = &rules.entrypoint;
        if fm.get("timeout").is_none_or(Value::is_null) {
            fields.timeout_secs = defaults.timeout_secs.clamp(1, max_timeout_secs);
        }
        if fields.resources.memory_bytes.is_none() && defaults.memory_bytes.is_some() {
            fields.resources.memory_bytes = defaults.memory_bytes;
            fields.resources.memory_is_default = true;
        }
        if fields.resources.cpu.is_none() {
            fields.resources.cpu = defaults.cpu;
        }
        let named = fm.get("image").and_then(Value::as_str);
        let lang = fields.lang.as_deref().unwrap_or_else(|| {
            match entrypoint.and_then(|p| p.extension()).and_then(|e| e.to_str()) {
                Some("js") => "node",
                Some("sh") => "bash",
                _ => "python",
            }
        });
        let image = named.unwrap_or_else(|| default_image(lang));
        if rules.allows_image(image) {
            return;
        }
        let whose = if named.is_some() {
            format!("image '{image}'")
        } else {
            format!("the default image of lang {lang}, '{image}',")
        };
        let pos = self.key_pos("image");
        self.error(
            Code::ImageNotAllowed,
            pos,
            format!(
                "{whose} is not on the server's image allowlist ({}); use one of those, or have the admin add it \
                 to image_allowlist",
                rules.image_allowlist.join(", ")
            ),
        );
    }
}
