//! The Markdown dialect: each tool block of the body becomes
//! a tool that runs its command template, with the parameters of its table.

use super::tool_blocks::{ParamsSection, ToolBlock};
use crate::skill::diag::{Code, Pos};
use crate::skill::files::{PathCache, normalize, resolve_inside};
use crate::skill::model::*;
use crate::skill::names::is_tool_name;
use crate::skill::parse::Parse;
use crate::skill::template::{self, CommandTemplate};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;

/// Where the columns of a Parameters table are.
struct Columns {
    name: usize,
    ty: usize,
    required: usize,
    description: Option<usize>,
    default: Option<usize>,
}

impl Parse<'_, '_> {
    /// The tools of the blocks, in order. Files inside the skill that a
    /// command runs go to `hashed`, so that changing them changes the hash.
    pub(in crate::skill) fn markdown_tools(
        &mut self,
        blocks: &[ToolBlock],
        body_offset: usize,
        dir: &Path,
        path: &PathCache,
        hashed: &mut Vec<String>,
    ) -> Vec<Tool> {
        let mut tools: Vec<Tool> = Vec::with_capacity(blocks.len());
        for block in blocks {
            if let Some(tool) = self.block_tool(block, &tools, body_offset, dir, path, hashed) {
                tools.push(tool);
            }
        }
        tools
    }

    /// The tool of one block; `None` when its command cannot be used.
    fn block_tool(
        &mut self,
        block: &ToolBlock,
        earlier: &[Tool],
        body_offset: usize,
        dir: &Path,
        path: &PathCache,
        hashed: &mut Vec<String>,
    ) -> Option<Tool> {
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
        if earlier.iter().any(|t| t.name == block.name) {
            self.error(
                Code::DuplicateTool,
                name_pos,
                format!("tool '{}' is defined more than once in this skill", block.name),
            );
        }
        let mut declared = Vec::new();
        let params = self.params(block, body_offset, &mut declared);
        let (src, offset) = self.command_source(block, body_offset, name_pos)?;
        let code_pos = Some(self.index.pos(body_offset + offset));
        let template = match CommandTemplate::parse(src) {
            Ok(t) => t,
            Err(e) => {
                self.error(
                    Code::InvalidCommand,
                    code_pos,
                    format!("tool '{}': {e}", block.name),
                );
                return None;
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
        let program = self.resolve_program(&block.name, &template.program, dir, path, code_pos, hashed)?;
        Some(Tool {
            name: block.name.clone(),
            description: block.description.clone(),
            params,
            open_object: false,
            schema: None,
            requires_approval: false,
            read_only: None,
            action: Action::Command { template, program },
        })
    }

    /// The one code block of the `#### Command` section, and its offset in
    /// the body.
    fn command_source<'b>(
        &mut self,
        block: &'b ToolBlock,
        body_offset: usize,
        name_pos: Option<Pos>,
    ) -> Option<(&'b str, usize)> {
        let command_pos = Some(self.index.pos(body_offset + block.command_offset));
        match (block.has_command_section, block.commands.as_slice()) {
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
        }
    }

    /// Every placeholder of the command names a parameter, and a flag
    /// placeholder a boolean one.
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

    /// `docs/design.md` §2: absolute, inside the skill when relative, else on `PATH`.
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
        let Some(cols) = self.columns(block, header, body_offset) else {
            return Vec::new();
        };
        let mut params: Vec<Param> = Vec::with_capacity(rows.len());
        for (cells, row_offset) in rows {
            let pos = Some(self.index.pos(body_offset + row_offset));
            if let Some(param) = self.param(block, &cols, cells, pos, &params, declared) {
                params.push(param);
            }
        }
        params
    }

    /// Finds the columns by their headers, in any order and case.
    fn columns(&mut self, block: &ToolBlock, header: &[String], body_offset: usize) -> Option<Columns> {
        let table_pos = Some(self.index.pos(body_offset + block.params_offset));
        let col = |want: &str| header.iter().position(|h| h.trim().eq_ignore_ascii_case(want));
        let (Some(name), Some(ty), Some(required)) = (col("name"), col("type"), col("required")) else {
            self.error(
                Code::InvalidParameter,
                table_pos,
                format!(
                    "tool '{}': the Parameters table needs the columns Name, Type, Required and Description",
                    block.name
                ),
            );
            return None;
        };
        Some(Columns {
            name,
            ty,
            required,
            description: col("description"),
            default: col("default"),
        })
    }

    /// The parameter of one table row; `None` when the row has an error.
    fn param(
        &mut self,
        block: &ToolBlock,
        cols: &Columns,
        cells: &[String],
        pos: Option<Pos>,
        earlier: &[Param],
        declared: &mut Vec<String>,
    ) -> Option<Param> {
        let cell = |i: Option<usize>| i.and_then(|i| cells.get(i)).map(String::as_str).unwrap_or("");
        let name = cell(Some(cols.name)).trim_matches('`').to_owned();
        declared.push(name.clone());
        if !self.param_name_ok(block, &name, earlier, pos) {
            return None;
        }
        let raw_type = cell(Some(cols.ty)).trim_matches('`');
        let Some(ty) = ParamType::parse(raw_type) else {
            self.error(
                Code::InvalidType,
                pos,
                format!(
                    "tool '{}': parameter '{name}' has type '{raw_type}'; use string, integer, number, boolean or array",
                    block.name
                ),
            );
            return None;
        };
        let required = match cell(Some(cols.required)).trim().to_ascii_lowercase().as_str() {
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
                return None;
            }
        };
        let description = cell(cols.description).to_owned();
        // A Default column wins over a `(default: …)` in the description.
        let default_text = cols
            .default
            .map(|i| cell(Some(i)).trim())
            .filter(|d| !d.is_empty() && !["-", "—", "–"].contains(d))
            .map(str::to_owned)
            .or_else(|| annotation(&description, "default:"));
        let default = match default_text {
            None => None,
            Some(text) => Some(self.default_value(block, &name, ty, &text, pos)?),
        };
        let enum_values = match annotation(&description, "one of:") {
            None => None,
            Some(list) => Some(self.allowed_values(block, &name, ty, &list, pos)?),
        };
        Some(Param {
            name,
            ty,
            required,
            description,
            default,
            enum_values,
        })
    }

    /// A parameter name must be a valid placeholder and not taken.
    fn param_name_ok(&mut self, block: &ToolBlock, name: &str, earlier: &[Param], pos: Option<Pos>) -> bool {
        if !template::is_param_name(name) {
            self.error(
                Code::InvalidParameter,
                pos,
                format!(
                    "tool '{}': parameter name '{name}' must be letters, digits and '_'",
                    block.name
                ),
            );
            return false;
        }
        if earlier.iter().any(|p| p.name == name) {
            self.error(
                Code::InvalidParameter,
                pos,
                format!("tool '{}': parameter '{name}' is declared twice", block.name),
            );
            return false;
        }
        true
    }

    fn default_value(
        &mut self,
        block: &ToolBlock,
        name: &str,
        ty: ParamType,
        text: &str,
        pos: Option<Pos>,
    ) -> Option<Value> {
        let value = parse_value(ty, text);
        if value.is_none() {
            self.error(
                Code::InvalidDefault,
                pos,
                format!(
                    "tool '{}': default '{text}' of parameter '{name}' is not a valid {}",
                    block.name,
                    ty.as_str()
                ),
            );
        }
        value
    }

    /// The values of a `(one of: …)` annotation; arrays cannot have them.
    fn allowed_values(
        &mut self,
        block: &ToolBlock,
        name: &str,
        ty: ParamType,
        list: &str,
        pos: Option<Pos>,
    ) -> Option<Vec<Value>> {
        let values: Option<Vec<Value>> = list.split(',').map(|s| parse_value(ty, s.trim())).collect();
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
            return None;
        }
        values
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
