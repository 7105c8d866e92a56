//! Tool exports: JSON Schema for each tool, in the shapes OpenAI (Chat
//! Completions and Responses), Anthropic, Gemini and MCP clients take, and
//! the plain prompt manifest.
//!
//! Every format is serialised once per catalog snapshot, one fragment per
//! tool, so a request only concatenates bytes it already has.

mod schema;

use crate::policy::{RequiresApproval, requires_approval};
use crate::skill::{Skill, Tool, Trust};
use bytes::Bytes;
pub use schema::{MAX_NAME, NUL_FREE_JSON, call_schema, fit_name, json_schema, nul_free_json};
use schema::{gemini_json_schema, gemini_parameters, strict_schema};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use utoipa::ToSchema;

/// The export formats of `GET /tools`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    #[default]
    Native,
    Openai,
    /// OpenAI's Responses API: flat function tools.
    #[serde(rename = "openai-responses")]
    OpenaiResponses,
    Anthropic,
    Gemini,
    Mcp,
    /// A plain-text manifest for a system prompt.
    Prompt,
}

impl Format {
    /// In declaration order: `Exports` finds a format's bodies by its
    /// discriminant.
    pub const ALL: [Format; 7] = [
        Format::Native,
        Format::Openai,
        Format::OpenaiResponses,
        Format::Anthropic,
        Format::Gemini,
        Format::Mcp,
        Format::Prompt,
    ];

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Format::Native => "native",
            Format::Openai => "openai",
            Format::OpenaiResponses => "openai-responses",
            Format::Anthropic => "anthropic",
            Format::Gemini => "gemini",
            Format::Mcp => "mcp",
            Format::Prompt => "prompt",
        }
    }

    /// The body around the joined fragments.
    fn frame(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Format::Gemini => ("{\"function_declarations\":[", ",", "]}"),
            Format::Prompt => (PROMPT_HEADER, "", ""),
            _ => ("{\"tools\":[", ",", "]}"),
        }
    }
}

const PROMPT_HEADER: &str =
    "You are a model that can do function calling with the following functions:\n\n[Skills]\n";

/// A tool as `GET /tools/{tool}` and the native export describe it.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = Tool)]
pub struct ToolInfo {
    pub name: String,
    pub skill: String,
    pub description: String,
    /// A JSON Schema (2020-12) object for the arguments.
    #[schema(value_type = Object)]
    pub parameters: Box<RawValue>,
    pub read_only: bool,
    pub always_ask: bool,
    pub timeout_secs: u64,
    pub trust: Trust,
    pub requires_approval: RequiresApproval,
    /// A JSON Schema object for the tool's JSON output (the envelope's
    /// `parsed`), where the tool declares one.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub output_schema: Option<Box<RawValue>>,
    /// A workflow of the skill's backend (seed 002's `register_workflow`),
    /// called like any tool; absent for a plain tool.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub workflow: bool,
}

impl ToolInfo {
    pub fn new(skill: &Skill, tool: &Tool) -> Self {
        Self::with_schema(skill, tool, raw(&json_schema(tool)))
    }

    fn with_schema(skill: &Skill, tool: &Tool, parameters: Box<RawValue>) -> Self {
        Self {
            name: tool.name.clone(),
            skill: skill.name.clone(),
            description: tool.description.clone(),
            parameters,
            read_only: crate::policy::reads_only(skill, tool),
            always_ask: skill.always_ask || tool.requires_approval,
            timeout_secs: skill.timeout_secs,
            trust: skill.trust,
            requires_approval: requires_approval(skill, tool),
            output_schema: output_schema(skill, tool),
            workflow: matches!(tool.action, crate::skill::Action::Workflow),
        }
    }
}

/// The declared schema of the tool's output, serialised.
fn output_schema(skill: &Skill, tool: &Tool) -> Option<Box<RawValue>> {
    skill.output_schema(&tool.name).map(|s| raw(&s.value))
}

/// A JSON value serialised once, to be embedded in many documents.
fn raw(v: &Value) -> Box<RawValue> {
    // Serialising a JSON value cannot fail; `null` is a valid fallback.
    serde_json::value::to_raw_value(v).unwrap_or_else(|_| RawValue::NULL.to_owned())
}

/// OpenAI's function tool.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct OpenAiTool {
    /// Always `function`.
    #[serde(rename = "type")]
    pub kind: String,
    pub function: OpenAiFunction,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct OpenAiFunction {
    pub name: String,
    pub description: String,
    /// In strict mode's shape whenever `strict` is true.
    #[schema(value_type = Object)]
    pub parameters: Box<RawValue>,
    /// True for every tool but an entrypoint's open object: optional
    /// parameters are required and nullable, null meaning not given.
    pub strict: bool,
}

/// A function tool of OpenAI's Responses API (`FunctionToolParam`): flat,
/// without Chat Completions' nested `function` object.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct OpenAiResponsesTool {
    /// Always `function`.
    #[serde(rename = "type")]
    pub kind: String,
    pub name: String,
    pub description: String,
    /// In strict mode's shape whenever `strict` is true.
    #[schema(value_type = Object)]
    pub parameters: Box<RawValue>,
    /// As in `OpenAiFunction`.
    pub strict: bool,
}

/// Anthropic's tool definition.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AnthropicTool {
    pub name: String,
    pub description: String,
    /// In strict mode's shape whenever `strict` is true.
    #[schema(value_type = Object)]
    pub input_schema: Box<RawValue>,
    /// As OpenAI's `strict`.
    pub strict: bool,
}

/// Gemini's function declaration.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GeminiFunction {
    pub name: String,
    pub description: String,
    /// Gemini's OpenAPI 3.0 subset; unset for a tool without parameters.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub parameters: Option<Box<RawValue>>,
    /// Full JSON Schema, instead of `parameters`, for an entrypoint's
    /// open object.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub parameters_json_schema: Option<Box<RawValue>>,
    /// The JSON Schema of the function's result, where the tool declares
    /// one.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub response_json_schema: Option<Box<RawValue>>,
}

/// An MCP tool as `tools/list` lists it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct McpTool {
    pub name: String,
    /// For people: the tool's name in words.
    pub title: String,
    pub description: String,
    #[serde(rename = "inputSchema")]
    #[schema(value_type = Object)]
    pub input_schema: Box<RawValue>,
    /// Where the tool declares its output: a result's `structuredContent`
    /// validates against it.
    #[serde(rename = "outputSchema", skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub output_schema: Option<Box<RawValue>>,
    pub annotations: McpAnnotations,
    /// Whether a call may answer with a task (the skill's `tasks`);
    /// absent when it never does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution: Option<McpExecution>,
}

/// MCP's `execution` of a tool: `taskSupport` is `optional` or
/// `required`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct McpExecution {
    #[serde(rename = "taskSupport")]
    pub task_support: crate::skill::TaskSupport,
}

/// MCP tool annotations, from the skill's `read_only` and `network`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct McpAnnotations {
    #[serde(rename = "readOnlyHint")]
    pub read_only_hint: bool,
    #[serde(rename = "destructiveHint")]
    pub destructive_hint: bool,
    #[serde(rename = "openWorldHint")]
    pub open_world_hint: bool,
}

/// `GET /tools?format=native`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ToolList {
    pub tools: Vec<ToolInfo>,
}

/// `GET /tools?format=openai`.
#[derive(Debug, Serialize, ToSchema)]
pub struct OpenAiToolList {
    pub tools: Vec<OpenAiTool>,
}

/// `GET /tools?format=openai-responses`.
#[derive(Debug, Serialize, ToSchema)]
pub struct OpenAiResponsesToolList {
    pub tools: Vec<OpenAiResponsesTool>,
}

/// `GET /tools?format=anthropic`.
#[derive(Debug, Serialize, ToSchema)]
pub struct AnthropicToolList {
    pub tools: Vec<AnthropicTool>,
}

/// `GET /tools?format=gemini`.
#[derive(Debug, Serialize, ToSchema)]
pub struct GeminiToolList {
    pub function_declarations: Vec<GeminiFunction>,
}

/// `GET /tools?format=mcp`.
#[derive(Debug, Serialize, ToSchema)]
pub struct McpToolList {
    pub tools: Vec<McpTool>,
}

/// The JSON bodies of `GET /tools`, one shape per `format`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum ToolExport {
    Native(ToolList),
    Openai(OpenAiToolList),
    OpenaiResponses(OpenAiResponsesToolList),
    Anthropic(AnthropicToolList),
    Gemini(GeminiToolList),
    Mcp(McpToolList),
}

/// One tool in one JSON format, serialised.
fn fragment(
    format: Format,
    skill: &Skill,
    tool: &Tool,
    name: &str,
    schema: &RawValue,
) -> serde_json::Result<Vec<u8>> {
    let name = name.to_owned();
    let description = tool.description.clone();
    let strict = || strict_schema(tool).map(|s| raw(&s));
    match format {
        Format::Native => serde_json::to_vec(&ToolInfo::with_schema(skill, tool, schema.to_owned())),
        Format::Openai => {
            let strict = strict();
            serde_json::to_vec(&OpenAiTool {
                kind: "function".to_owned(),
                function: OpenAiFunction {
                    name,
                    description,
                    strict: strict.is_some(),
                    parameters: strict.unwrap_or_else(|| schema.to_owned()),
                },
            })
        }
        Format::OpenaiResponses => {
            let strict = strict();
            serde_json::to_vec(&OpenAiResponsesTool {
                kind: "function".to_owned(),
                name,
                description,
                strict: strict.is_some(),
                parameters: strict.unwrap_or_else(|| schema.to_owned()),
            })
        }
        Format::Anthropic => {
            let strict = strict();
            serde_json::to_vec(&AnthropicTool {
                name,
                description,
                strict: strict.is_some(),
                input_schema: strict.unwrap_or_else(|| schema.to_owned()),
            })
        }
        Format::Gemini => serde_json::to_vec(&GeminiFunction {
            name,
            description,
            parameters: gemini_parameters(tool).as_ref().map(raw),
            parameters_json_schema: gemini_json_schema(tool).as_ref().map(raw),
            response_json_schema: output_schema(skill, tool),
        }),
        Format::Mcp => serde_json::to_vec(&McpTool {
            title: title(&tool.name),
            name,
            description,
            input_schema: schema.to_owned(),
            output_schema: output_schema(skill, tool),
            annotations: McpAnnotations {
                read_only_hint: crate::policy::reads_only(skill, tool),
                destructive_hint: !crate::policy::reads_only(skill, tool),
                open_world_hint: skill.network,
            },
            execution: (skill.task_support != crate::skill::TaskSupport::Forbidden).then_some(McpExecution {
                task_support: skill.task_support,
            }),
        }),
        Format::Prompt => Ok(prompt_line(tool, &name).into_bytes()),
    }
}

/// `disk_usage` → `Disk usage`.
fn title(name: &str) -> String {
    let words = name.replace(['_', '-'], " ");
    let mut chars = words.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// The prompt manifest: `- name: description`, one line per tool.
fn prompt_line(tool: &Tool, name: &str) -> String {
    let description: String = tool.description.split_whitespace().collect::<Vec<_>>().join(" ");
    format!("- {name}: {description}\n")
}

/// One format's serialised fragments and its precomputed bodies.
#[derive(Debug, Default)]
struct FormatExport {
    /// One per catalog tool, in catalog order.
    fragments: Vec<Bytes>,
    /// Every tool.
    all: Bytes,
    /// Per mode (lowercased) seen in the catalog.
    by_mode: HashMap<String, Bytes>,
    /// For a mode no skill names: only `Global` skills.
    global_only: Bytes,
}

/// One tool as the catalog indexes and exports it.
#[derive(Debug, Clone)]
pub struct ToolEntry {
    /// Index into the catalog's skills.
    pub skill: usize,
    /// Index into that skill's tools.
    pub tool: usize,
    /// The name provider exports use: the bare name, or `skill__tool` when
    /// two skills define the bare name (providers need unique names).
    pub export_name: String,
}

/// Every format of every tool, built once per catalog snapshot.
#[derive(Debug, Default)]
pub struct Exports {
    formats: Vec<FormatExport>,
    /// For each catalog tool, the lowercased modes of its skill.
    tool_modes: Vec<Arc<[String]>>,
    /// For each catalog tool, the index of its skill.
    tool_skill: Vec<usize>,
}

impl Exports {
    pub fn build(skills: &[Arc<Skill>], tools: &[ToolEntry]) -> Self {
        let skill_modes: Vec<Arc<[String]>> = skills
            .iter()
            .map(|s| s.modes.iter().map(|m| m.to_ascii_lowercase()).collect())
            .collect();
        let tool_modes: Vec<Arc<[String]>> = tools.iter().map(|e| skill_modes[e.skill].clone()).collect();
        let all_modes: BTreeSet<&str> = skill_modes
            .iter()
            .flat_map(|m| m.iter().map(String::as_str))
            .collect();
        // Each tool's schema is built once and shared by every format.
        let schemas: Vec<Box<RawValue>> = tools
            .iter()
            .map(|e| raw(&json_schema(&skills[e.skill].tools[e.tool])))
            .collect();
        let build = |format: Format| {
            let fragments: Vec<Bytes> = tools
                .iter()
                .zip(&schemas)
                .map(|(e, schema)| {
                    let skill = &skills[e.skill];
                    let tool = &skill.tools[e.tool];
                    // Serialising owned strings and JSON values cannot fail.
                    Bytes::from(fragment(format, skill, tool, &e.export_name, schema).unwrap_or_default())
                })
                .collect();
            let all = assemble(format, fragments.iter());
            // A filter that keeps every tool shares the full body.
            let select = |mode: &str| -> Bytes {
                let kept: Vec<&Bytes> = fragments
                    .iter()
                    .zip(&tool_modes)
                    .filter(|(_, tm)| in_mode(tm, mode))
                    .map(|(f, _)| f)
                    .collect();
                if kept.len() == fragments.len() {
                    all.clone()
                } else {
                    assemble(format, kept.into_iter())
                }
            };
            let by_mode = all_modes.iter().map(|&m| (m.to_owned(), select(m))).collect();
            let global_only = select("global");
            FormatExport {
                fragments,
                all,
                by_mode,
                global_only,
            }
        };
        // The formats are independent: build them side by side.
        let formats: Vec<FormatExport> = std::thread::scope(|scope| {
            #[expect(
                clippy::needless_collect,
                reason = "every thread starts before the first join"
            )]
            let handles: Vec<_> = Format::ALL
                .iter()
                .map(|&f| scope.spawn(move || build(f)))
                .collect();
            handles
                .into_iter()
                .zip(Format::ALL)
                .map(|(h, f)| h.join().unwrap_or_else(|_| build(f)))
                .collect()
        });
        Self {
            formats,
            tool_modes,
            tool_skill: tools.iter().map(|e| e.skill).collect(),
        }
    }

    /// The body for `format`, optionally only tools in `mode` and/or of the
    /// skill with catalog index `skill`.
    pub fn body(&self, format: Format, mode: Option<&str>, skill: Option<usize>) -> Bytes {
        let Some(fe) = self.formats.get(format as usize) else {
            return Bytes::new();
        };
        let mode = mode.map(str::to_ascii_lowercase);
        match (&mode, skill) {
            (None, None) => fe.all.clone(),
            (Some(m), None) => fe.by_mode.get(m).unwrap_or(&fe.global_only).clone(),
            (_, Some(si)) => assemble(
                format,
                fe.fragments
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| self.tool_skill[*i] == si)
                    .filter(|(i, _)| mode.as_deref().is_none_or(|m| in_mode(&self.tool_modes[*i], m)))
                    .map(|(_, f)| f),
            ),
        }
    }

    /// `mode` as [`Exports::body`] tells it apart: itself when a tool
    /// names it (any case), else `None`, since every mode no tool names
    /// exports the same tools.
    pub fn known_mode(&self, mode: &str) -> Option<String> {
        let mode = mode.to_ascii_lowercase();
        let fe = self.formats.first()?;
        fe.by_mode.contains_key(&mode).then_some(mode)
    }

    /// The native fragment of catalog tool `i` (the `Tool` JSON).
    pub fn native(&self, i: usize) -> Option<Bytes> {
        self.formats.first()?.fragments.get(i).cloned()
    }
}

fn in_mode(modes: &[String], mode: &str) -> bool {
    modes.iter().any(|m| m == mode || m == "global")
}

fn assemble<'a>(format: Format, parts: impl Iterator<Item = &'a Bytes>) -> Bytes {
    let (open, sep, close) = format.frame();
    let parts: Vec<&Bytes> = parts.collect();
    let len = open.len() + close.len() + parts.iter().map(|p| p.len() + sep.len()).sum::<usize>();
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(open.as_bytes());
    for (i, p) in parts.into_iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(sep.as_bytes());
        }
        out.extend_from_slice(p);
    }
    out.extend_from_slice(close.as_bytes());
    Bytes::from(out)
}
