//! `SKILL.yaml` manifests (seed 002, `docs/skills.md` "Manifests"): the
//! fields every skill has are read as frontmatter is; this module reads the
//! manifest's own: `types`, `implementation`, `prompt`, `tools` and
//! `dependencies`. A backend's own tools come from starting it (`load.rs`).

use super::backend::{BackendKind, DeclaredTool};
use super::diag::Code;
use super::files::{read_inside, resolve_inside};
use super::model::Schema;
use super::names::is_generated_tool_name;
use super::parse::Parse;
use super::upstream::Upstream;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// Keys a manifest has beside the frontmatter's.
pub(super) const MANIFEST_KEYS: &[&str] = &[
    "types",
    "dependencies",
    "implementation",
    "prompt",
    "tools",
    "security_rules",
    "wiki",
];

/// The skill types of seed 002.
pub const TYPES: [&str; 5] = ["tool", "prompt", "workflow", "security-rule", "transform"];

/// The largest prompt or schema file read.
const MAX_PROMPT_FILE: u64 = 256 * 1024;

/// Roughly how many characters a token is, for `max_context_tokens`.
const CHARS_PER_TOKEN: usize = 4;

/// The manifest's own parts, as far as they could be read.
#[derive(Debug, Default)]
pub(super) struct ManifestParts {
    pub types: Vec<String>,
    pub implementation: Option<(BackendKind, PathBuf)>,
    /// The MCP server an `mcp` backend fronts.
    pub upstream: Option<Upstream>,
    /// Whether the manifest writes `read_only` (over an MCP server's
    /// annotations) rather than leaving it to its default.
    pub read_only_written: bool,
    /// The system prompt and context files, for the prompt route.
    pub instructions: String,
    /// The manifest's `tools`, with their compiled schema and their
    /// `requires_approval`.
    pub tools: Vec<(DeclaredTool, Schema, bool)>,
    /// The compiled `output_schema` of each tool that declares one.
    pub outputs: Vec<(String, Schema)>,
}

impl Parse<'_, '_> {
    pub(super) fn manifest_parts(&mut self, m: &Map<String, Value>, dir: &Path) -> ManifestParts {
        let mut parts = ManifestParts {
            types: self.types(m),
            ..ManifestParts::default()
        };
        (parts.implementation, parts.upstream) = self.implementation(m, dir);
        parts.read_only_written = m.contains_key("read_only");
        parts.instructions = self.prompt(m, dir);
        parts.tools = self.manifest_tools(m, dir);
        parts.outputs = parts
            .tools
            .iter()
            .filter_map(|(t, _, _)| Some((t.name.clone(), self.check_output(t)?)))
            .collect();
        self.dependencies(m);
        if wants_code(&parts.types, !parts.tools.is_empty(), m)
            && parts.implementation.is_none()
            && !m.contains_key("implementation")
        {
            let pos = self.key_pos("types").or_else(|| self.key_pos("tools"));
            self.error(
                Code::MissingField,
                pos,
                "a manifest with tools (or of a type other than prompt, or a security-rule without \
                 security_rules) needs 'implementation: {backend, entrypoint}'",
            );
        }
        parts
    }

    /// `types`: required, each one of [`TYPES`].
    fn types(&mut self, m: &Map<String, Value>) -> Vec<String> {
        if !m.contains_key("types") {
            self.missing("types", super::model::Dialect::Manifest);
            return Vec::new();
        }
        let types = self.list_of(m, "types");
        for t in types.iter().filter(|t| !TYPES.contains(&t.as_str())) {
            let pos = self.key_pos("types");
            self.error(
                Code::InvalidField,
                pos,
                format!(
                    "unknown skill type '{t}'; a manifest may be of types {}",
                    TYPES.join(", ")
                ),
            );
        }
        if types.is_empty() {
            let pos = self.key_pos("types");
            self.error(
                Code::MissingField,
                pos,
                "'types' names no type; give at least one",
            );
        }
        types
    }

    /// `implementation: {backend, entrypoint}`, or `{backend: mcp, …}`
    /// with its upstream (whose "entrypoint" is the skill's directory).
    fn implementation(
        &mut self,
        m: &Map<String, Value>,
        dir: &Path,
    ) -> (Option<(BackendKind, PathBuf)>, Option<Upstream>) {
        let imp = match m.get("implementation") {
            Some(Value::Object(imp)) => imp,
            None | Some(Value::Null) => return (None, None),
            Some(other) => {
                let other = other.clone();
                self.invalid("implementation", "a mapping with backend and entrypoint", &other);
                return (None, None);
            }
        };
        if imp.get("backend").and_then(Value::as_str) == Some("mcp") {
            let upstream = self.upstream(imp);
            return (
                upstream.is_some().then(|| (BackendKind::Mcp, dir.to_path_buf())),
                upstream,
            );
        }
        (self.entrypoint_backend(imp, dir), None)
    }

    /// `{backend: process|starlark, entrypoint}`. `plugin` (Go's `.so`)
    /// and anything else unknown is `unsupported_backend`.
    fn entrypoint_backend(&mut self, imp: &Map<String, Value>, dir: &Path) -> Option<(BackendKind, PathBuf)> {
        let pos = self.key_pos("implementation");
        let kind = match imp.get("backend").and_then(Value::as_str) {
            Some("process") => BackendKind::Process,
            Some("starlark") => BackendKind::Starlark,
            Some(other) => {
                self.error(
                    Code::UnsupportedBackend,
                    pos,
                    format!(
                        "backend '{other}' is not supported: use process (a JSON-RPC child), starlark or mcp; \
                         Go plugins (.so) cannot be loaded safely into a Rust server"
                    ),
                );
                return None;
            }
            None => {
                self.error(
                    Code::MissingField,
                    pos,
                    "implementation needs 'backend' (process, starlark or mcp)",
                );
                return None;
            }
        };
        let Some(entry) = imp.get("entrypoint").and_then(Value::as_str) else {
            self.error(
                Code::MissingField,
                pos,
                "implementation needs 'entrypoint', a file of the skill",
            );
            return None;
        };
        match resolve_inside(dir, entry) {
            Ok(path) if path.is_file() => Some((kind, path)),
            Err(true) => {
                self.error(
                    Code::ProgramOutsideSkill,
                    pos,
                    format!("entrypoint '{entry}' resolves outside the skill directory"),
                );
                None
            }
            _ => {
                self.error(
                    Code::MissingEntrypoint,
                    pos,
                    format!("entrypoint '{entry}' is not a file of the skill"),
                );
                None
            }
        }
    }

    /// `prompt: {system_prompt_file, context_files, max_context_tokens}`:
    /// the system prompt, then each context file under its own heading while
    /// the budget lasts.
    fn prompt(&mut self, m: &Map<String, Value>, dir: &Path) -> String {
        let Some(prompt) = m.get("prompt") else {
            return String::new();
        };
        let Value::Object(prompt) = prompt else {
            let other = prompt.clone();
            self.invalid(
                "prompt",
                "a mapping with system_prompt_file and context_files",
                &other,
            );
            return String::new();
        };
        let budget = match prompt.get("max_context_tokens") {
            None | Some(Value::Null) => None,
            Some(v) => match v.as_u64() {
                Some(n) => Some(
                    usize::try_from(n)
                        .unwrap_or(usize::MAX)
                        .saturating_mul(CHARS_PER_TOKEN),
                ),
                None => {
                    let v = v.clone();
                    self.invalid(
                        "prompt",
                        "a mapping whose max_context_tokens is a whole number",
                        &v,
                    );
                    None
                }
            },
        };
        let mut text = String::new();
        if let Some(file) = prompt.get("system_prompt_file").and_then(Value::as_str)
            && let Some(body) = self.prompt_file(dir, file)
        {
            text.push_str(body.trim());
        }
        let context = self.list_in(prompt.get("context_files"), "prompt", false);
        for file in context {
            let Some(body) = self.prompt_file(dir, &file) else {
                continue;
            };
            let section = format!("\n\n## {file}\n\n{}", body.trim());
            if budget.is_some_and(|b| text.chars().count() + section.chars().count() > b) {
                let pos = self.key_pos("prompt");
                self.warn(
                    Code::ContextOverBudget,
                    pos,
                    format!("context file '{file}' is left out: it would pass max_context_tokens"),
                );
                continue;
            }
            text.push_str(&section);
        }
        text
    }

    /// A UTF-8 file of the skill that the manifest names.
    fn prompt_file(&mut self, dir: &Path, rel: &str) -> Option<String> {
        let pos = self.key_pos("prompt").or_else(|| self.key_pos("tools"));
        match read_inside(dir, rel, MAX_PROMPT_FILE) {
            Some(Some(bytes)) => match String::from_utf8(bytes) {
                Ok(text) => Some(text),
                Err(_) => {
                    self.error(Code::InvalidEncoding, pos, format!("'{rel}' is not valid UTF-8"));
                    None
                }
            },
            Some(None) => {
                self.error(
                    Code::TooLarge,
                    pos,
                    format!("'{rel}' is larger than {MAX_PROMPT_FILE} bytes"),
                );
                None
            }
            None => {
                self.error(
                    Code::MissingField,
                    pos,
                    format!(
                        "'{rel}' is not a readable file inside the skill (a regular file, \
                         reached without `..` or a symbolic link)"
                    ),
                );
                None
            }
        }
    }

    /// `tools: [{name, description, input_schema | input_schema_file,
    /// output_schema | output_schema_file, requires_approval}]`.
    fn manifest_tools(&mut self, m: &Map<String, Value>, dir: &Path) -> Vec<(DeclaredTool, Schema, bool)> {
        let items = match m.get("tools") {
            None | Some(Value::Null) => return Vec::new(),
            Some(Value::Array(items)) => items,
            Some(other) => {
                let other = other.clone();
                self.invalid("tools", "a list of tools", &other);
                return Vec::new();
            }
        };
        let mut tools: Vec<(DeclaredTool, Schema, bool)> = Vec::new();
        for item in items {
            let Some(tool) = self.manifest_tool(item, dir) else {
                continue;
            };
            if tools.iter().any(|(t, _, _)| t.name == tool.0.name) {
                let pos = self.value_pos(&tool.0.name);
                self.error(
                    Code::DuplicateTool,
                    pos,
                    format!("tool '{}' is declared twice", tool.0.name),
                );
                continue;
            }
            tools.push(tool);
        }
        tools
    }

    fn manifest_tool(&mut self, item: &Value, dir: &Path) -> Option<(DeclaredTool, Schema, bool)> {
        let Value::Object(t) = item else {
            self.invalid("tools", "a list of mappings with name and description", item);
            return None;
        };
        let Some(name) = t.get("name").and_then(Value::as_str) else {
            let pos = self.key_pos("tools");
            self.error(Code::MissingField, pos, "a tool in 'tools' has no name");
            return None;
        };
        let schema = self
            .schema_in(t, "input_schema", dir)?
            .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}}));
        let output_schema = self.schema_in(t, "output_schema", dir)?;
        let declared = DeclaredTool {
            name: name.to_owned(),
            description: t
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            input_schema: schema,
            output_schema,
            hints: Default::default(),
        };
        let requires_approval = match t.get("requires_approval") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                let pos = self.value_pos("requires_approval");
                self.error(
                    Code::InvalidField,
                    pos,
                    format!("tool '{name}': requires_approval must be true or false, not {other}"),
                );
                false
            }
        };
        let schema = self.check_declared(&declared)?;
        Some((declared, schema, requires_approval))
    }

    /// A tool's schema `key` (`input_schema`), given inline or in the
    /// file `<key>_file` names (JSON or YAML); `Some(None)` when it gives
    /// neither, `None` when the file is not one.
    fn schema_in(&mut self, t: &Map<String, Value>, key: &str, dir: &Path) -> Option<Option<Value>> {
        if let Some(schema) = t.get(key).filter(|s| !s.is_null()) {
            return Some(Some(schema.clone()));
        }
        let Some(file) = t.get(&format!("{key}_file")).and_then(Value::as_str) else {
            return Some(None);
        };
        let text = self.prompt_file(dir, file)?;
        match serde_json::from_str(&text).or_else(|_| super::frontmatter::parse_yaml(&text).map_err(|_| ())) {
            Ok(v) => Some(Some(v)),
            Err(()) => {
                let pos = self.value_pos(file);
                self.error(Code::InvalidField, pos, format!("'{file}' is not JSON or YAML"));
                None
            }
        }
    }

    /// A declared `output_schema`, compiled: a valid JSON Schema of an
    /// object, since MCP's `structuredContent` is one. `None` when the
    /// tool declares none, or an invalid one (then an error says so).
    pub(super) fn check_output(&mut self, tool: &DeclaredTool) -> Option<Schema> {
        let schema = tool.output_schema.as_ref()?;
        let is_object = schema
            .as_object()
            .is_some_and(|s| s.get("type") == Some(&Value::from("object")));
        let compiled = jsonschema::validator_for(schema).ok().filter(|_| is_object);
        if compiled.is_none() {
            let pos = self.value_pos(&tool.name);
            self.error(
                Code::InvalidParameter,
                pos,
                format!(
                    "tool '{}': output_schema must be a valid JSON Schema with \"type\": \"object\" \
                     (MCP's structuredContent is an object)",
                    tool.name
                ),
            );
        }
        compiled.map(|v| Schema {
            value: schema.clone(),
            validator: std::sync::Arc::new(v),
        })
    }

    /// A declared tool's name and schema are usable (`^[a-z0-9_]{1,64}$`,
    /// an object schema): its schema compiled. Also used for what a
    /// backend declares.
    pub(super) fn check_declared(&mut self, tool: &DeclaredTool) -> Option<Schema> {
        let pos = self.value_pos(&tool.name);
        if !is_generated_tool_name(&tool.name) {
            self.error(
                Code::InvalidToolName,
                pos,
                format!("tool name '{}' must match ^[a-z0-9_]{{1,64}}$", tool.name),
            );
            return None;
        }
        // Compiling it proves it valid, and that no `$ref` reaches outside
        // it (the crate fetches nothing without its resolver features).
        let is_object = tool
            .input_schema
            .as_object()
            .is_some_and(|s| s.get("type").is_none_or(|t| t == "object"));
        let compiled = jsonschema::validator_for(&tool.input_schema)
            .ok()
            .filter(|_| is_object);
        if compiled.is_none() {
            self.error(
                Code::InvalidParameter,
                pos,
                format!(
                    "tool '{}': input_schema must be a valid JSON Schema of an object",
                    tool.name
                ),
            );
        }
        compiled.map(|v| Schema {
            value: tool.input_schema.clone(),
            validator: std::sync::Arc::new(v),
        })
    }

    /// `dependencies`: a list of skill names, or of `{name, version,
    /// optional}`; their presence is checked across skills.
    fn dependencies(&mut self, m: &Map<String, Value>) {
        let Some(Value::Array(items)) = m.get("dependencies") else {
            if let Some(other) = m.get("dependencies").filter(|v| !v.is_null()) {
                let other = other.clone();
                self.invalid("dependencies", "a list of skills", &other);
            }
            return;
        };
        for item in items {
            let named = match item {
                Value::String(_) => true,
                Value::Object(d) => d.get("name").is_some_and(Value::is_string),
                _ => false,
            };
            if !named {
                let item = item.clone();
                self.invalid(
                    "dependencies",
                    "a list of skill names or {name, version, optional}",
                    &item,
                );
                return;
            }
        }
    }

    /// A top-level list of strings, as [`Parse::list_in`] reads one.
    fn list_of(&mut self, m: &Map<String, Value>, key: &str) -> Vec<String> {
        self.list_in(m.get(key), key, false)
    }
}

/// Whether a manifest of `types` needs a backend: tools do, and every type
/// but `prompt`, except a `security-rule` that declares its rules
/// (`security_rules.rules`, not empty), which a scan runs without one.
fn wants_code(types: &[String], has_tools: bool, m: &Map<String, Value>) -> bool {
    let declares_rules = m
        .get("security_rules")
        .and_then(|s| s.get("rules"))
        .and_then(Value::as_array)
        .is_some_and(|rules| !rules.is_empty());
    let coded = |t: &String| t != "prompt" && !(t == "security-rule" && declares_rules);
    has_tools || types.iter().any(coded)
}

/// The dependencies a manifest names: (name, optional).
pub fn dependencies(manifest: &Map<String, Value>) -> Vec<(String, bool)> {
    let Some(items) = manifest.get("dependencies").and_then(Value::as_array) else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(|item| match item {
            Value::String(name) => Some((name.clone(), false)),
            Value::Object(d) => Some((
                d.get("name")?.as_str()?.to_owned(),
                d.get("optional").and_then(Value::as_bool).unwrap_or(false),
            )),
            _ => None,
        })
        .collect()
}
