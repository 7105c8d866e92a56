//! Reading one skill directory into the unified model, whatever its dialect,
//! with a diagnostic for everything wrong with it.

use super::diag::{Code, Diagnostic, Pos};
use super::dialect;
use super::files::{PathCache, content_hash, list_files, normalize, read_limited, resolve_inside};
use super::frontmatter::{self, Unclosed};
use super::markdown::{self, ParamsSection, ToolBlock};
use super::model::*;
use super::names::{NameCheck, check_name, is_tool_name};
use super::parse::Parse;
use super::scripts::Runtimes;
use super::template::{self, CommandTemplate};
use serde_json::{Map, Value};
use std::collections::BTreeSet;
use std::path::Path;

/// The largest definition file that is parsed (seed 001's read limit).
pub const MAX_DEFINITION_BYTES: u64 = 1024 * 1024;
/// What a load needs to know beyond the directory itself.
pub struct LoadOptions<'a> {
    pub source: &'a str,
    pub trust: Trust,
    pub max_timeout_secs: u64,
    pub runtimes: &'a Runtimes,
    pub path: &'a PathCache,
}

/// The outcome for one directory: the skill unless some error excluded it,
/// and every diagnostic (errors and warnings).
#[derive(Debug, Clone)]
pub struct Loaded {
    pub name: String,
    /// Shared, so a catalog snapshot and the next reload's reuse of an
    /// unreadable root never copy it.
    pub skill: Option<std::sync::Arc<Skill>>,
    pub diagnostics: Vec<Diagnostic>,
}

/// Loads the skill in `dir`, whose name is the skill's name.
pub fn load_skill(dir: &Path, opts: &LoadOptions<'_>) -> Loaded {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut diags = Vec::new();
    let skill = load_inner(dir, &name, opts, &mut diags);
    for d in &mut diags {
        d.skill = Some(name.clone());
    }
    let skill = skill.filter(|_| !diags.iter().any(Diagnostic::is_error));
    let skill = skill.map(|mut s| {
        s.warnings = diags.clone();
        std::sync::Arc::new(s)
    });
    Loaded {
        name,
        skill,
        diagnostics: diags,
    }
}

fn load_inner(dir: &Path, name: &str, opts: &LoadOptions<'_>, diags: &mut Vec<Diagnostic>) -> Option<Skill> {
    let manifest = dir.join("SKILL.yaml");
    if manifest.is_file() {
        diags.push(Diagnostic::error(
            Code::UnsupportedDialect,
            manifest.display().to_string(),
            "SKILL.yaml manifests are not supported by this version of skilld; the skill is skipped",
        ));
        return None;
    }
    let def_path = dir.join("SKILL.md");
    let path = def_path.display().to_string();
    let bytes = match read_limited(&def_path, MAX_DEFINITION_BYTES) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => {
            diags.push(Diagnostic::error(
                Code::TooLarge,
                &path,
                format!("SKILL.md is larger than {MAX_DEFINITION_BYTES} bytes and is not parsed"),
            ));
            return None;
        }
        Err(e) => {
            diags.push(Diagnostic::error(
                Code::Unreadable,
                &path,
                format!("cannot read SKILL.md: {e}"),
            ));
            return None;
        }
    };
    let text = match std::str::from_utf8(&bytes) {
        Ok(t) => t,
        Err(e) => {
            diags.push(Diagnostic::error(
                Code::InvalidEncoding,
                &path,
                format!("SKILL.md is not valid UTF-8 (at byte {})", e.valid_up_to()),
            ));
            return None;
        }
    };
    let mut p = Parse::new(path, text, diags);

    match check_name(name) {
        NameCheck::Valid => {}
        NameCheck::Underscore => p.warn(
            Code::NameStyle,
            None,
            format!("skill name '{name}' uses '_'; the convention is lowercase words joined by single hyphens"),
        ),
        NameCheck::Invalid => p.error(
            Code::InvalidName,
            None,
            format!(
                "skill name '{name}' is invalid: use 1-64 lowercase letters and digits, with single hyphens between them"
            ),
        ),
    }

    let split = match frontmatter::split(text) {
        Ok(s) => s,
        Err(Unclosed) => {
            p.error(
                Code::InvalidFrontmatter,
                Some(Pos { line: 1, column: 1 }),
                "frontmatter opened with '---' is never closed; add a '---' line after it",
            );
            return None;
        }
    };
    let fm = match split.yaml {
        None => Map::new(),
        Some(yaml) => {
            p.yaml = yaml;
            p.yaml_offset = split.yaml_offset;
            match frontmatter::parse_yaml(yaml) {
                Ok(Value::Object(map)) => map,
                Ok(_) => {
                    let pos = p.index.pos(split.yaml_offset);
                    p.error(
                        Code::InvalidFrontmatter,
                        Some(pos),
                        "frontmatter must be a YAML mapping of keys to values",
                    );
                    return None;
                }
                Err(e) => {
                    let base = p.index.pos(split.yaml_offset);
                    let pos = e.location.map(|(l, c)| Pos {
                        line: base.line + l.saturating_sub(1),
                        column: c,
                    });
                    let message = shift_lines(&e.message, base.line - 1);
                    p.error(
                        Code::InvalidYaml,
                        pos.or(Some(base)),
                        format!("invalid YAML in frontmatter: {message}"),
                    );
                    return None;
                }
            }
        }
    };
    let body = split.body;
    let body_offset = split.body_offset;

    p.unknown_keys(&fm);

    let blocks = markdown::tool_blocks(body);
    let detected = dialect::detect(dir, &blocks, &fm, opts.runtimes);
    let dialect = detected.dialect;

    let fields = p.fields(&fm, name, dialect, opts.max_timeout_secs, opts.path);

    // Tools.
    let instructions = body.trim_start_matches(['\r', '\n']).to_owned();
    let mut extra_hashed = Vec::new();
    let tools = match dialect {
        Dialect::Markdown => p.markdown_tools(&blocks, body_offset, dir, opts.path, &mut extra_hashed),
        Dialect::Entrypoint => p.entrypoint_tool(
            name,
            detected.entrypoint.as_deref(),
            fields.lang.as_deref(),
            &fields.description,
            opts.runtimes,
        ),
        Dialect::Scripts => p.script_tools(name, &detected.scripts, opts.runtimes),
        Dialect::Prompt | Dialect::Manifest => Vec::new(),
    };

    let files = list_files(dir);
    let hash = content_hash(dir, &bytes, &files, &extra_hashed);

    Some(Skill {
        name: name.to_owned(),
        version: fields.version,
        description: fields.description,
        author: fields.author,
        license: fields.license,
        tags: fields.tags,
        instructions,
        modes: fields.modes,
        read_only: fields.read_only,
        always_ask: fields.always_ask,
        timeout_secs: fields.timeout_secs,
        network: fields.network,
        resources: fields.resources,
        lang: fields.lang,
        invocation_mode: fields.invocation_mode,
        command: fields.command,
        command_tool: fields.command_tool,
        requires_tools: fields.requires_tools,
        eligibility: fields.eligibility,
        triggers: fields.triggers,
        permissions: fields.permissions,
        dialect,
        dir: dir.to_path_buf(),
        definition: def_path,
        files,
        source: opts.source.to_owned(),
        trust: opts.trust,
        hash,
        tools,
        warnings: Vec::new(),
    })
}

impl Parse<'_, '_> {
    fn markdown_tools(
        &mut self,
        blocks: &[ToolBlock],
        body_offset: usize,
        dir: &Path,
        path: &PathCache,
        hashed: &mut Vec<String>,
    ) -> Vec<Tool> {
        let mut tools: Vec<Tool> = Vec::with_capacity(blocks.len());
        for block in blocks {
            let name_pos = Some(self.index.pos(body_offset + block.name_offset));
            if !is_tool_name(&block.name) {
                self.error(
                    Code::InvalidToolName,
                    name_pos,
                    format!(
                        "tool name '{}' is invalid: use 1-32 lowercase letters, digits and underscores",
                        block.name
                    ),
                );
            }
            if tools.iter().any(|t| t.name == block.name) {
                self.error(
                    Code::DuplicateTool,
                    name_pos,
                    format!("tool '{}' is defined more than once in this skill", block.name),
                );
            }
            let mut declared = Vec::new();
            let params = self.params(block, body_offset, &mut declared);
            let command_pos = Some(self.index.pos(body_offset + block.command_offset));
            let command = match (block.has_command_section, block.commands.as_slice()) {
                (false, _) => {
                    self.error(
                        Code::MissingField,
                        name_pos,
                        format!("tool '{}' has no '#### Command' section", block.name),
                    );
                    None
                }
                (true, []) => {
                    self.error(
                        Code::MissingField,
                        command_pos,
                        format!(
                            "the '#### Command' section of tool '{}' has no code block",
                            block.name
                        ),
                    );
                    None
                }
                (true, [(src, offset)]) => Some((src.as_str(), *offset)),
                (true, [_, (_, offset), ..]) => {
                    let pos = Some(self.index.pos(body_offset + offset));
                    self.error(
                        Code::InvalidCommand,
                        pos,
                        format!(
                            "the '#### Command' section of tool '{}' has more than one code block",
                            block.name
                        ),
                    );
                    None
                }
            };
            let Some((src, offset)) = command else { continue };
            let code_pos = Some(self.index.pos(body_offset + offset));
            let template = match CommandTemplate::parse(src) {
                Ok(t) => t,
                Err(e) => {
                    self.error(
                        Code::InvalidCommand,
                        code_pos,
                        format!("tool '{}': {e}", block.name),
                    );
                    continue;
                }
            };
            self.check_placeholders(
                &block.name,
                &template,
                &params,
                &declared,
                src,
                body_offset + offset,
            );
            let Some(program) =
                self.resolve_program(&block.name, &template.program, dir, path, code_pos, hashed)
            else {
                continue;
            };
            tools.push(Tool {
                name: block.name.clone(),
                description: block.description.clone(),
                params,
                open_object: false,
                action: Action::Command { template, program },
            });
        }
        tools
    }

    fn check_placeholders(
        &mut self,
        tool: &str,
        t: &CommandTemplate,
        params: &[Param],
        declared: &[String],
        src: &str,
        offset: usize,
    ) {
        let mut seen = BTreeSet::new();
        for w in &t.args {
            for piece in &w.pieces {
                let (name, flag) = match piece {
                    template::Piece::Literal(_) => continue,
                    template::Piece::Var(n) => (n, false),
                    template::Piece::Flag { name, .. } => (name, true),
                };
                if !seen.insert((name.clone(), flag)) {
                    continue;
                }
                let pos = src
                    .find(&format!("{{{{{name}"))
                    .map(|i| self.index.pos(offset + i));
                match params.iter().find(|p| &p.name == name) {
                    None if declared.contains(name) => {}
                    None => self.error(
                        Code::UnknownParameter,
                        pos,
                        format!("tool '{tool}': the command uses {{{{{name}}}}} but no parameter '{name}' is declared"),
                    ),
                    Some(p) if flag && p.ty != ParamType::Boolean => self.error(
                        Code::InvalidType,
                        pos,
                        format!(
                            "tool '{tool}': {{{{{name}:…}}}} is a flag and needs a boolean parameter, but '{name}' is {}",
                            p.ty.as_str()
                        ),
                    ),
                    Some(_) => {}
                }
            }
        }
    }

    /// DESIGN §2: absolute, inside the skill when relative, else on `PATH`.
    fn resolve_program(
        &mut self,
        tool: &str,
        program: &str,
        dir: &Path,
        path: &PathCache,
        pos: Option<Pos>,
        hashed: &mut Vec<String>,
    ) -> Option<String> {
        if program.starts_with('/') {
            if !Path::new(program).is_file() {
                self.error(
                    Code::MissingProgram,
                    pos,
                    format!("tool '{tool}': program {program} does not exist"),
                );
                return None;
            }
            return Some(program.to_owned());
        }
        if program.contains('/') {
            return match resolve_inside(dir, program) {
                Ok(real) => {
                    if let Some(rel) = normalize(Path::new(program)) {
                        hashed.push(rel.to_string_lossy().replace('\\', "/"));
                    }
                    Some(real.display().to_string())
                }
                Err(true) => {
                    self.error(
                        Code::ProgramOutsideSkill,
                        pos,
                        format!("tool '{tool}': program {program} resolves outside the skill directory"),
                    );
                    None
                }
                Err(false) => {
                    self.error(
                        Code::MissingProgram,
                        pos,
                        format!("tool '{tool}': program {program} does not exist in the skill directory"),
                    );
                    None
                }
            };
        }
        if !path.has(program) {
            self.warn(
                Code::ProgramNotFound,
                pos,
                format!(
                    "tool '{tool}': program '{program}' is not on PATH; calls will fail until it is installed"
                ),
            );
        }
        Some(program.to_owned())
    }

    /// The parameters of a block. Rows with errors are left out, but their
    /// names go to `declared` so the command check does not report them again.
    fn params(&mut self, block: &ToolBlock, body_offset: usize, declared: &mut Vec<String>) -> Vec<Param> {
        let Some(ParamsSection::Table { header, rows }) = &block.params else {
            return Vec::new();
        };
        let table_pos = Some(self.index.pos(body_offset + block.params_offset));
        let col = |want: &str| header.iter().position(|h| h.trim().eq_ignore_ascii_case(want));
        let (Some(c_name), Some(c_type), Some(c_req)) = (col("name"), col("type"), col("required")) else {
            self.error(
                Code::InvalidParameter,
                table_pos,
                format!(
                    "tool '{}': the Parameters table needs the columns Name, Type, Required and Description",
                    block.name
                ),
            );
            return Vec::new();
        };
        let c_desc = col("description");
        let c_default = col("default");
        let mut params: Vec<Param> = Vec::with_capacity(rows.len());
        for (cells, row_offset) in rows {
            let pos = Some(self.index.pos(body_offset + row_offset));
            let cell = |i: Option<usize>| i.and_then(|i| cells.get(i)).map(String::as_str).unwrap_or("");
            let name = cell(Some(c_name)).trim_matches('`').to_owned();
            declared.push(name.clone());
            if !template::is_param_name(&name) {
                self.error(
                    Code::InvalidParameter,
                    pos,
                    format!(
                        "tool '{}': parameter name '{name}' must be letters, digits and '_'",
                        block.name
                    ),
                );
                continue;
            }
            if params.iter().any(|p| p.name == name) {
                self.error(
                    Code::InvalidParameter,
                    pos,
                    format!("tool '{}': parameter '{name}' is declared twice", block.name),
                );
                continue;
            }
            let raw_type = cell(Some(c_type)).trim_matches('`');
            let Some(ty) = ParamType::parse(raw_type) else {
                self.error(
                    Code::InvalidType,
                    pos,
                    format!(
                        "tool '{}': parameter '{name}' has type '{raw_type}'; use string, integer, number, boolean or array",
                        block.name
                    ),
                );
                continue;
            };
            let required = match cell(Some(c_req)).trim().to_ascii_lowercase().as_str() {
                "yes" | "y" | "true" | "required" => true,
                "no" | "n" | "false" | "optional" | "" => false,
                other => {
                    self.error(
                        Code::InvalidParameter,
                        pos,
                        format!(
                            "tool '{}': parameter '{name}' has Required '{other}'; use yes or no",
                            block.name
                        ),
                    );
                    continue;
                }
            };
            let description = cell(c_desc).to_owned();
            let default_text = c_default
                .map(|i| cell(Some(i)).trim())
                .filter(|d| !d.is_empty() && !["-", "—", "–"].contains(d))
                .map(str::to_owned)
                .or_else(|| annotation(&description, "default:"));
            let default = match default_text {
                None => None,
                Some(text) => match parse_value(ty, &text) {
                    Some(v) => Some(v),
                    None => {
                        self.error(
                            Code::InvalidDefault,
                            pos,
                            format!(
                                "tool '{}': default '{text}' of parameter '{name}' is not a valid {}",
                                block.name,
                                ty.as_str()
                            ),
                        );
                        continue;
                    }
                },
            };
            let enum_values = match annotation(&description, "one of:") {
                None => None,
                Some(list) => {
                    let values: Option<Vec<Value>> =
                        list.split(',').map(|s| parse_value(ty, s.trim())).collect();
                    if values.is_none() || ty == ParamType::Array {
                        self.error(
                            Code::InvalidParameter,
                            pos,
                            format!(
                                "tool '{}': the allowed values '{list}' of parameter '{name}' are not all valid {}",
                                block.name,
                                ty.as_str()
                            ),
                        );
                        continue;
                    }
                    values
                }
            };
            params.push(Param {
                name,
                ty,
                required,
                description,
                default,
                enum_values,
            });
        }
        params
    }
}

/// The text of a `(key value)` annotation in a description, such as
/// `(default: 10)` or `(one of: a, b)`; the key is matched without case.
fn annotation(description: &str, key: &str) -> Option<String> {
    let lower = description.to_ascii_lowercase();
    let mut from = 0;
    while let Some(i) = lower[from..].find('(') {
        let start = from + i + 1;
        let inner = lower[start..].trim_start();
        let skipped = lower[start..].len() - inner.len();
        if inner.starts_with(key) {
            let value_start = start + skipped + key.len();
            let end = description[value_start..].find(')')?;
            let v = description[value_start..value_start + end].trim();
            return Some(v.to_owned());
        }
        from = start;
    }
    None
}

/// Reads a default or allowed value written in a table as a JSON value.
fn parse_value(ty: ParamType, text: &str) -> Option<Value> {
    let t = text.trim().trim_matches('`');
    let unquoted = t
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .or_else(|| t.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')))
        .unwrap_or(t);
    match ty {
        ParamType::String => Some(Value::String(unquoted.to_owned())),
        ParamType::Integer => unquoted.parse::<i64>().ok().map(Value::from),
        ParamType::Number => unquoted
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number),
        ParamType::Boolean => match unquoted.to_ascii_lowercase().as_str() {
            "true" | "yes" => Some(Value::Bool(true)),
            "false" | "no" => Some(Value::Bool(false)),
            _ => None,
        },
        ParamType::Array => {
            if t.starts_with('[') {
                let v: Value = serde_json::from_str(t).ok()?;
                v.as_array()?.iter().all(Value::is_string).then_some(v)
            } else {
                Some(Value::Array(
                    unquoted
                        .split(',')
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(|s| Value::String(s.to_owned()))
                        .collect(),
                ))
            }
        }
    }
}

/// The YAML crate counts lines from the start of the frontmatter; this
/// rewrites each `line N` of its message to count from the top of the file.
fn shift_lines(message: &str, by: u32) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(i) = rest.find("line ") {
        let (head, tail) = rest.split_at(i + 5);
        out.push_str(head);
        let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
        match tail[..digits].parse::<u32>() {
            Ok(n) => out.push_str(&(n.saturating_add(by)).to_string()),
            Err(_) => out.push_str(&tail[..digits]),
        }
        rest = &tail[digits..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotations_and_values() {
        assert_eq!(
            annotation("Number of commits (default: 10)", "default:").as_deref(),
            Some("10")
        );
        assert_eq!(
            annotation("Pick (One of: a, b) (Default: `a`)", "default:").as_deref(),
            Some("`a`")
        );
        assert_eq!(parse_value(ParamType::Integer, "10"), Some(Value::from(10)));
        assert_eq!(parse_value(ParamType::Integer, "ten"), None);
        assert_eq!(
            parse_value(ParamType::String, "\"x y\""),
            Some(Value::from("x y"))
        );
        assert_eq!(
            parse_value(ParamType::Array, "a, b"),
            Some(serde_json::json!(["a", "b"]))
        );
    }
}
