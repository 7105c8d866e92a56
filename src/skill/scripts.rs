//! The scripts dialect: one tool per script directly under
//! `scripts/`, run by the runtime its extension names.

use super::diag::Code;
use super::files::read_limited;
use super::model::*;
use super::names::is_tool_name;
use super::parse::Parse;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Runtimes for scripts by extension; configurable. Each program is
/// resolved to an absolute path when the runtimes are made (at start-up),
/// from the absolute directories of the server's `PATH`: never from the
/// workspace a tool runs in, where a caller could plant a
/// `node_modules/.bin/ts-node` or a `./python3`.
#[derive(Debug, Clone)]
pub struct Runtimes {
    pub by_extension: HashMap<String, Vec<String>>,
}

impl Default for Runtimes {
    fn default() -> Self {
        let mut runtimes = Self {
            by_extension: HashMap::new(),
        };
        for (ext, program) in [
            ("py", "python3"),
            ("sh", "bash"),
            ("bash", "bash"),
            ("js", "node"),
            ("ts", "ts-node"),
        ] {
            runtimes.set(ext, vec![program.to_owned()]);
        }
        runtimes
    }
}

impl Runtimes {
    /// Sets the runtime of `ext`, its program resolved on the server's `PATH`
    /// (see [`Runtimes`]).
    pub fn set(&mut self, ext: &str, mut argv: Vec<String>) {
        if let Some(program) = argv.first_mut()
            && let Some(found) = on_server_path(program)
        {
            *program = found;
        }
        self.by_extension.insert(ext.to_owned(), argv);
    }
}

/// A bare program name found in an absolute directory of the server's
/// `PATH`, as an absolute path; `None` for a path, or a name not found
/// (which then fails when a tool runs, as a missing program does).
fn on_server_path(program: &str) -> Option<String> {
    if program.contains('/') {
        return None;
    }
    let path = std::env::var_os("PATH")?;
    super::files::find_program(&path, program).map(|p| p.display().to_string())
}

/// Scripts directly under `scripts/` with a known runtime, sorted.
pub(super) fn list_scripts(scripts_dir: &Path, runtimes: &Runtimes) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(scripts_dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.is_file()
                && p.extension()
                    .and_then(|e| e.to_str())
                    .is_some_and(|e| runtimes.by_extension.contains_key(e))
        })
        .collect();
    out.sort();
    out
}

/// The runtime for a script's extension, else for the skill's `lang`
/// (Python when neither says).
pub(super) fn runtime_for(script: &Path, lang: Option<&str>, runtimes: &Runtimes) -> Vec<String> {
    let ext = script.extension().and_then(|e| e.to_str()).unwrap_or("");
    if let Some(r) = runtimes.by_extension.get(ext) {
        return r.clone();
    }
    let by_lang = match lang {
        Some("node") => "js",
        Some("bash") => "sh",
        _ => "py",
    };
    runtimes.by_extension.get(by_lang).cloned().unwrap_or_default()
}

/// The first line of a script's leading comment or docstring, as the
/// description of its tool.
fn script_summary(path: &Path) -> Option<String> {
    let bytes = read_limited(path, 64 * 1024).ok()??;
    let text = String::from_utf8_lossy(&bytes);
    for line in text.lines().take(20) {
        let line = line.trim();
        if line.is_empty() || line.starts_with("#!") {
            continue;
        }
        let stripped = ["\"\"\"", "'''", "//", "#", "/**", "/*", "*"]
            .iter()
            .find_map(|m| line.strip_prefix(m))
            .map(|s| {
                s.trim()
                    .trim_end_matches("\"\"\"")
                    .trim_end_matches("'''")
                    .trim_end_matches("*/")
                    .trim()
            });
        return stripped.filter(|s| !s.is_empty()).map(str::to_owned);
    }
    None
}

/// `<skill>_<stem>`, lowercased, with every other character as `_`.
fn tool_name_for(skill: &str, stem: &str) -> String {
    format!("{skill}_{stem}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}

impl Parse<'_, '_> {
    /// One tool per script; a script whose tool name is invalid or taken
    /// is left out.
    pub(super) fn script_tools(
        &mut self,
        skill: &str,
        scripts: &[PathBuf],
        runtimes: &Runtimes,
    ) -> Vec<Tool> {
        let mut tools: Vec<Tool> = Vec::new();
        for script in scripts {
            let file = script
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default();
            let stem = script
                .file_stem()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default();
            let name = tool_name_for(skill, &stem);
            if !is_tool_name(&name) {
                self.error(
                    Code::InvalidToolName,
                    None,
                    format!("script scripts/{file} would give the tool name '{name}', which is not ^[a-z0-9_]{{1,32}}$"),
                );
                continue;
            }
            if let Some(other) = tools.iter().find(|t| t.name == name) {
                self.error(
                    Code::DuplicateTool,
                    None,
                    format!(
                        "scripts/{file} and another script both give the tool name '{}'",
                        other.name
                    ),
                );
                continue;
            }
            let description = script_summary(script).unwrap_or_else(|| format!("Run scripts/{file}."));
            tools.push(Tool {
                name,
                description,
                params: vec![Param {
                    name: "args".to_owned(),
                    ty: ParamType::Array,
                    required: false,
                    description: format!("Command-line arguments for scripts/{file}, one per element."),
                    default: None,
                    enum_values: None,
                }],
                open_object: false,
                action: Action::Script {
                    path: script.clone(),
                    runtime: runtime_for(script, None, runtimes),
                },
            });
        }
        tools
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_tool_names() {
        assert_eq!(tool_name_for("text-tools", "word_count"), "text_tools_word_count");
        assert_eq!(tool_name_for("a", "B.c-d"), "a_b_c_d");
    }
}
