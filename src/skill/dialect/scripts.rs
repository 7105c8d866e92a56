//! The scripts dialect: one tool per script directly under
//! `scripts/`, run by the runtime its extension names.

use crate::setting::SettingError;
use crate::skill::diag::Code;
use crate::skill::files::read_limited;
use crate::skill::model::*;
use crate::skill::names::{fit_name, is_generated_tool_name};
use crate::skill::parse::Parse;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Runtimes for scripts by extension; configurable. Each program is
/// resolved to an absolute path when the runtimes are made (at start-up),
/// from the absolute directories of the server's `PATH`: never from the
/// workspace a tool runs in, where a caller could plant a
/// `node_modules/.bin/ts-node` or a `./python3`. That is also why `.ts`
/// never runs through `npx`, which looks in the working directory first.
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
        ] {
            runtimes.set(ext, vec![program.to_owned()]);
        }
        runtimes
            .by_extension
            .insert("ts".to_owned(), typescript_runtime());
        runtimes
    }
}

impl Runtimes {
    /// The default runtimes, with the config's `runtimes` replacing them
    /// by extension.
    pub fn configured(by_extension: HashMap<String, Vec<String>>) -> Result<Self, SettingError> {
        let mut runtimes = Self::default();
        for (ext, argv) in by_extension {
            if argv.is_empty() {
                return Err(SettingError::new(
                    "runtimes",
                    format!("runtimes.{ext} is empty; give at least a program"),
                ));
            }
            runtimes.set(&ext, argv);
        }
        Ok(runtimes)
    }

    /// The runtime of files with extension `ext`, if one is set.
    pub fn for_extension(&self, ext: &str) -> Option<&[String]> {
        self.by_extension.get(ext).map(Vec::as_slice)
    }

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

/// Why `runtime` cannot run a script here (its program is not on the
/// server's `PATH`, or not where the config says), for a load-time
/// warning; `None` when it can.
pub(in crate::skill) fn runtime_missing(runtime: &[String], ext: &str) -> Option<String> {
    let Some(program) = runtime.first() else {
        return Some(format!("no runtime is set for .{ext} scripts"));
    };
    let path = Path::new(program);
    if path.is_absolute() && path.is_file() {
        return None;
    }
    let missing = if path.is_absolute() {
        format!("its runtime {program} does not exist")
    } else {
        format!("its runtime '{program}' is not on the server's PATH")
    };
    let fix = if ext == "ts" {
        "; install ts-node and typescript (npm install -g ts-node typescript), use Node 22.6 or later \
         (it strips types itself), or name a runner in the config's runtimes.ts (skilld downloads none)"
            .to_owned()
    } else {
        format!("; install it, or set runtimes.{ext} in the config")
    };
    Some(format!("{missing}{fix}: calls fail until then"))
}

/// How `.ts` scripts run when the config does not say (seed 001 runs
/// them with ts-node): a `ts-node` on the server's `PATH`, transpiling
/// only (a type error is the author's to find, not a call's to fail on)
/// and reading no `tsconfig.json` (ts-node's options there can load any
/// module, and one in the workspace is the caller's); else Node's own
/// type stripping, where its version has it (22.6 and later); else a bare
/// `ts-node`, which the loader reports as missing.
fn typescript_runtime() -> Vec<String> {
    if let Some(ts_node) = on_server_path("ts-node") {
        return [
            ts_node.as_str(),
            "--transpile-only",
            "--skip-project",
            "--compiler-options",
            r#"{"module":"commonjs","moduleResolution":"node"}"#,
        ]
        .map(str::to_owned)
        .to_vec();
    }
    if let Some(node) = on_server_path("node").filter(|n| strips_types(n)) {
        return vec![
            node,
            "--experimental-strip-types".to_owned(),
            "--disable-warning=ExperimentalWarning".to_owned(),
        ];
    }
    vec!["ts-node".to_owned()]
}

/// Whether the Node at `node` strips TypeScript types itself (22.6 and
/// later); asked once per program, within two seconds.
fn strips_types(node: &str) -> bool {
    static KNOWN: std::sync::Mutex<Option<HashMap<String, bool>>> = std::sync::Mutex::new(None);
    let mut known = KNOWN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(answer) = known.as_ref().and_then(|k| k.get(node)) {
        return *answer;
    }
    let answer = node_version(node).is_some_and(|v| v >= (22, 6));
    known
        .get_or_insert_with(HashMap::new)
        .insert(node.to_owned(), answer);
    answer
}

/// `node --version` as (major, minor); `None` when it does not answer
/// in time or in a form known.
fn node_version(node: &str) -> Option<(u32, u32)> {
    use std::io::Read;
    let mut child = std::process::Command::new(node)
        .arg("--version")
        .env_clear()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let mut out = String::new();
    child.stdout.take()?.take(64).read_to_string(&mut out).ok()?;
    parse_node_version(&out)
}

/// `v22.6.0` → (22, 6).
fn parse_node_version(text: &str) -> Option<(u32, u32)> {
    let mut parts = text.trim().strip_prefix('v')?.split('.');
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// A bare program name found in an absolute directory of the server's
/// `PATH`, as an absolute path; `None` for a path, or a name not found
/// (which then fails when a tool runs, as a missing program does).
fn on_server_path(program: &str) -> Option<String> {
    if program.contains('/') {
        return None;
    }
    let path = std::env::var_os("PATH")?;
    crate::skill::files::find_program(&path, program).map(|p| p.display().to_string())
}

/// The scripts directly under `scripts/` that are tools, sorted: those
/// `explicit` names (the frontmatter's `script_tools`), or else each one
/// with a known runtime that is not a helper (see [`is_helper`]).
pub(in crate::skill) fn list_scripts(
    scripts_dir: &Path,
    runtimes: &Runtimes,
    explicit: Option<&[String]>,
) -> Vec<PathBuf> {
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
        .filter(|p| match explicit {
            Some(names) => p
                .file_name()
                .and_then(|f| f.to_str())
                .is_some_and(|f| names.iter().any(|n| n == f)),
            None => !is_helper(p),
        })
        .collect();
    out.sort();
    out
}

/// Whether a script is a helper rather than a tool: hidden, private
/// (`_util.py`, `__init__.py`), a test (`test_*`, `*_test`, `*.test.*`,
/// `*.spec.*`, `conftest.py`), a shell library that asks to be sourced,
/// or a page's script (it uses `document` or `window`). The last two only
/// without a `#!` line, which a command has.
fn is_helper(path: &Path) -> bool {
    let (Some(file), Some(stem)) = (
        path.file_name().and_then(|f| f.to_str()),
        path.file_stem().and_then(|s| s.to_str()),
    ) else {
        return false;
    };
    let test = stem.starts_with("test_")
        || stem.ends_with("_test")
        || stem.ends_with(".test")
        || stem.ends_with(".spec")
        || stem == "conftest";
    if file.starts_with('.') || file.starts_with('_') || test {
        return true;
    }
    let Some(bytes) = read_limited(path, 64 * 1024).ok().flatten() else {
        return false;
    };
    let head = String::from_utf8_lossy(&bytes);
    if head.starts_with("#!") {
        return false;
    }
    let says_sourced = head
        .lines()
        .take(20)
        .filter(|l| l.trim_start().starts_with('#'))
        .map(str::to_ascii_lowercase)
        .any(|l| {
            ["source this", "source it", "sourced"]
                .iter()
                .any(|w| l.contains(w))
        });
    match path.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "sh" | "bash" => says_sourced,
        "js" | "ts" => head.contains("document.") || head.contains("window."),
        _ => false,
    }
}

/// The runtime for a script's extension, else for the skill's `lang`
/// (Python when neither says).
pub(in crate::skill) fn runtime_for(script: &Path, lang: Option<&str>, runtimes: &Runtimes) -> Vec<String> {
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

/// The `metadata` key by which a skill says its scripts are not tools
/// (`"none"`): the Agent Skills specification leaves other top-level keys
/// to be refused, and keeps `metadata` for a client's own.
pub const OPT_OUT_KEY: &str = "skilld.script_tools";

/// Whether the frontmatter says the scripts are not tools: `metadata`'s
/// [`OPT_OUT_KEY`] is `none` (any other value is reported by the loader).
pub(in crate::skill) fn opted_out(fm: &serde_json::Map<String, serde_json::Value>) -> bool {
    fm.get("metadata")
        .and_then(|m| m.get(OPT_OUT_KEY))
        .and_then(serde_json::Value::as_str)
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("none"))
}

/// `<skill>_<stem>`, lowercased, with every other character as `_`; over
/// 64 characters, shortened with a hash ([`fit_name`]).
fn tool_name_for(skill: &str, stem: &str) -> String {
    fit_name(
        format!("{skill}_{stem}")
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '_'
                }
            })
            .collect(),
    )
}

impl Parse<'_, '_> {
    /// Warns when `script`'s runtime cannot run it here: the call would
    /// only fail with "command not found".
    pub(in crate::skill) fn runtime_found(&mut self, script: &Path, runtime: &[String]) {
        let ext = script.extension().and_then(|e| e.to_str()).unwrap_or("");
        if let Some(why) = runtime_missing(runtime, ext) {
            let file = script
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default();
            self.warn_in(
                Code::ProgramNotFound,
                &script.display().to_string(),
                format!("scripts/{file} cannot run here: {why}"),
            );
        }
    }

    /// One tool per script; a script whose tool name is invalid or taken
    /// is left out.
    pub(in crate::skill) fn script_tools(
        &mut self,
        skill: &str,
        scripts: &[PathBuf],
        explicit: Option<&[String]>,
        runtimes: &Runtimes,
    ) -> Vec<Tool> {
        for name in explicit.unwrap_or_default() {
            if !scripts
                .iter()
                .any(|s| s.file_name().is_some_and(|f| f == name.as_str()))
            {
                let pos = self.key_pos("script_tools");
                self.error(
                    Code::InvalidField,
                    pos,
                    format!("script_tools names scripts/{name}, which is not a script under scripts/ with a known runtime"),
                );
            }
        }
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
            if !is_generated_tool_name(&name) {
                self.error(
                    Code::InvalidToolName,
                    None,
                    format!("script scripts/{file} would give the tool name '{name}', which is not ^[a-z0-9_]{{1,64}}$"),
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
            let runtime = runtime_for(script, None, runtimes);
            self.runtime_found(script, &runtime);
            let skill_dir = script.parent().and_then(Path::parent).unwrap_or(script);
            let description = super::script_doc::describe(script, skill_dir)
                .unwrap_or_else(|| format!("Run scripts/{file}."));
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
                schema: None,
                requires_approval: false,
                read_only: None,
                action: Action::Script {
                    path: script.clone(),
                    runtime,
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
    fn node_versions() {
        assert_eq!(parse_node_version("v22.6.0\n"), Some((22, 6)));
        assert_eq!(parse_node_version("v20.20.2"), Some((20, 20)));
        assert!(parse_node_version("22").is_none());
        assert!((20, 20) < (22, 6) && (23, 1) >= (22, 6));
    }

    #[test]
    fn script_tool_names() {
        assert_eq!(tool_name_for("text-tools", "word_count"), "text_tools_word_count");
        assert_eq!(tool_name_for("a", "B.c-d"), "a_b_c_d");
    }
}
