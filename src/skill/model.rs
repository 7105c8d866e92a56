//! The unified skill model every dialect parses into (`docs/design.md` §2).

use super::diag::Diagnostic;
use super::template::CommandTemplate;
use serde::Serialize;
use serde_json::Value;
use std::path::PathBuf;
use utoipa::ToSchema;

/// How a skill was written; decides how its tools are found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Dialect {
    Manifest,
    Markdown,
    Entrypoint,
    Scripts,
    Prompt,
}

pub use crate::trust::Trust;

/// How a prompt skill's command alias is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum InvocationMode {
    #[default]
    PromptRewrite,
    ToolDispatch,
}

/// Whether a skill's calls answer an MCP client that has tasks with one
/// (MCP's `execution.taskSupport`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TaskSupport {
    #[default]
    Forbidden,
    Optional,
    Required,
}

/// The JSON types a tool parameter may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ParamType {
    String,
    Integer,
    Number,
    Boolean,
    Array,
}

impl ParamType {
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "string" => Some(ParamType::String),
            "integer" => Some(ParamType::Integer),
            "number" => Some(ParamType::Number),
            "boolean" => Some(ParamType::Boolean),
            "array" => Some(ParamType::Array),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ParamType::String => "string",
            ParamType::Integer => "integer",
            ParamType::Number => "number",
            ParamType::Boolean => "boolean",
            ParamType::Array => "array",
        }
    }
}

/// One declared parameter of a tool.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    pub name: String,
    pub ty: ParamType,
    pub required: bool,
    pub description: String,
    pub default: Option<Value>,
    /// Allowed values, when the description says `(one of: a, b)`.
    pub enum_values: Option<Vec<Value>>,
}

/// What invoking a tool runs.
#[derive(Debug, Clone)]
pub enum Action {
    /// A command template from a `#### Command` block. `program`
    /// is the template's program resolved at load time: an absolute path
    /// (inside the skill when it was written relative) or a bare name that
    /// is looked up on `PATH` when the tool runs.
    Command {
        template: CommandTemplate,
        program: String,
    },
    /// A script under `scripts/`, run by its extension's runtime with the
    /// `args` array as its arguments.
    Script { path: PathBuf, runtime: Vec<String> },
    /// An entrypoint taking the arguments object as `SANDBOX_INPUT`.
    Entrypoint { path: PathBuf, runtime: Vec<String> },
    /// A tool of a manifest's backend (`Skill::backend`), called by name.
    Backend,
    /// A workflow of a manifest's backend (seed 002's `register_workflow`),
    /// served as a tool and called by name through `Backend::workflow`.
    Workflow,
}

/// A JSON Schema a manifest tool declared, compiled once when it loaded.
#[derive(Debug, Clone)]
pub struct Schema {
    pub value: Value,
    pub validator: std::sync::Arc<jsonschema::Validator>,
}

/// A tool as loaded; its `read_only`/`always_ask`/timeout come from its skill.
#[derive(Debug, Clone)]
pub struct Tool {
    pub name: String,
    pub description: String,
    pub params: Vec<Param>,
    /// Entrypoint tools take any JSON object; the rest only their params.
    pub open_object: bool,
    /// A manifest tool's own JSON Schema for its arguments (then `params`
    /// is empty and `open_object` set): the calls are checked against it.
    pub schema: Option<Schema>,
    /// The call always asks a person (a manifest's `requires_approval`).
    pub requires_approval: bool,
    /// Whether this tool only reads, when it differs from its skill's
    /// `read_only` (an MCP server's `readOnlyHint`, or an override).
    pub read_only: Option<bool>,
    pub action: Action,
}

/// `eligibility`: where a skill may load.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, ToSchema)]
pub struct Eligibility {
    pub os: Vec<String>,
    pub env: Vec<String>,
    pub binaries: Vec<String>,
}

/// `triggers`: when a skill applies.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, ToSchema)]
pub struct Triggers {
    pub files: Vec<String>,
    pub keywords: Vec<String>,
    pub languages: Vec<String>,
    pub modes: Vec<String>,
}

/// `resources`, normalised, with seed 003's defaults filled in for an
/// entrypoint skill that does not set them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, ToSchema)]
pub struct Resources {
    /// Memory limit in bytes.
    pub memory_bytes: Option<u64>,
    /// CPU limit in cores.
    pub cpu: Option<f64>,
    /// `memory_bytes` is the server's default, not the skill's: it bounds
    /// the run's cgroup only, never its address space (Node would not
    /// start under 256 MiB of it).
    #[serde(skip)]
    pub memory_is_default: bool,
}

/// A file of the skill's directory, for `files` and the file route.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct SkillFile {
    /// Relative to the skill directory, `/`-separated.
    pub path: String,
    pub size: u64,
}

/// Dependencies a skill asks for that are not ready yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DepsWait {
    /// The preparation that would make them ready (see
    /// [`super::prepared`]); `None` when none will.
    pub key: Option<String>,
    pub why: String,
}

/// A permission the calls of a skill need, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Need {
    pub permission: &'static str,
    pub why: &'static str,
}

/// What the MCP Skills extension serves of one skill (made by
/// [`super::listing`]).
#[derive(Debug, Clone)]
pub struct Listing {
    /// The frontmatter of the served `SKILL.md`, as JSON.
    pub frontmatter: serde_json::Map<String, serde_json::Value>,
    /// The served `SKILL.md` when it is not the file on disk (a manifest
    /// skill's, or one whose frontmatter lacks `name` or `description`).
    pub made: Option<std::sync::Arc<[u8]>>,
    /// The instructions with `{baseDir}` as written.
    pub body: String,
    /// Each served file, `SKILL.md` first, with its digest.
    pub files: Vec<(String, super::hash::FileDigest)>,
}

/// One skill, whatever its dialect.
#[derive(Debug, Clone)]
pub struct Skill {
    pub name: String,
    pub version: Option<String>,
    pub description: String,
    pub author: Option<String>,
    pub license: Option<String>,
    pub tags: Vec<String>,
    pub instructions: String,
    pub modes: Vec<String>,
    pub read_only: bool,
    pub always_ask: bool,
    pub timeout_secs: u64,
    /// `tasks`: whether its calls answer MCP clients with tasks.
    pub task_support: TaskSupport,
    /// Whether its runs reach the network at all: `network: true`, or a
    /// `network.allow` list.
    pub network: bool,
    /// `network: {allow: [...]}`: its runs get a network namespace of their
    /// own whose one way out is the egress proxy, which lets through only
    /// these destinations (issue 42). `None` for `true` and `false`.
    pub network_allow: Option<crate::egress::AllowList>,
    pub resources: Resources,
    pub lang: Option<String>,
    pub invocation_mode: InvocationMode,
    pub command: Option<String>,
    pub command_tool: Option<String>,
    pub requires_tools: Vec<String>,
    pub eligibility: Eligibility,
    pub triggers: Triggers,
    /// What `skilld test` runs: tool calls and trigger contexts.
    pub examples: super::examples::Examples,
    pub permissions: Vec<String>,
    /// The Agent Skills `compatibility`: what the skill needs of its
    /// environment, in words.
    pub compatibility: Option<String>,
    /// The Agent Skills `allowed-tools`: the agent tools the skill expects
    /// (reported; skilld does not grant them).
    pub allowed_tools: Vec<String>,
    /// The Agent Skills `metadata`: the author's own keys, as strings.
    pub metadata: std::collections::BTreeMap<String, String>,
    pub dialect: Dialect,
    /// A manifest's `types` (tool, prompt, workflow, security-rule,
    /// transform); empty for the other dialects.
    pub types: Vec<String>,
    /// The live backend of a manifest skill, which runs its tools.
    pub backend: Option<std::sync::Arc<dyn super::backend::Backend>>,
    /// The prompts and resources of an MCP server the skill fronts.
    pub upstream: Option<std::sync::Arc<super::backend::UpstreamExtras>>,
    /// The hooks its backend handles (`before_tool_call`, …).
    pub hooks: Vec<String>,
    /// A `security-rule` manifest's declarative rules (`security_rules`),
    /// compiled: a scan runs them with no backend.
    pub security_rules: Vec<super::security_rule::SecurityRule>,
    /// The scanners its backend offers (`register_scanner`), run by
    /// `Backend::scan`.
    pub scanners: Vec<String>,
    /// Skills a manifest depends on: (name, optional). A missing required
    /// one excludes it; a missing optional one is a warning.
    pub dependencies: Vec<(String, bool)>,
    /// Permissions a manifest's calls need, each with why: a call is
    /// refused while one of them is not declared (`docs/skills.md`).
    pub needs: Vec<Need>,
    /// The skill's directory.
    pub dir: PathBuf,
    /// An installed version's dependencies (its virtualenv and
    /// `node_modules`), or a plain skill's once prepared, put on its
    /// tools' paths.
    pub deps: Option<PathBuf>,
    /// Why a plain skill's dependencies are not ready: its calls are
    /// refused (409 `dependencies_not_ready`) until they are.
    pub deps_wait: Option<DepsWait>,
    /// The definition file (`SKILL.md` or `SKILL.yaml`).
    pub definition: PathBuf,
    pub files: Vec<SkillFile>,
    /// Name of the root it came from.
    pub source: String,
    pub trust: Trust,
    /// SHA-256 (hex) over what the skill would execute (`docs/design.md` §2).
    pub hash: String,
    /// How the hashed files looked, to tell at a run's start whether they
    /// still hash to `hash`.
    pub fingerprint: std::sync::Arc<super::hash::Fingerprint>,
    pub tools: Vec<Tool>,
    /// The JSON Schema of a tool's result, by tool name, where the tool
    /// declares one (a manifest's `output_schema`, or its backend's).
    pub output_schemas: std::collections::BTreeMap<String, Schema>,
    pub warnings: Vec<Diagnostic>,
    /// What the MCP Skills extension serves of it; `None` when it cannot
    /// be served as an Agent Skill (see [`super::listing`]).
    pub listing: Option<std::sync::Arc<Listing>>,
}

impl Skill {
    /// Whether its runs reach the network as the host does: `network:
    /// true` of a bundled skill or one the operator named (`[egress]
    /// unrestricted`). Any other `network: true` loads as an empty
    /// `network.allow`, and a list reaches the network only through the
    /// egress proxy, which holds what it lacks for a person.
    pub fn unrestricted_network(&self) -> bool {
        self.network && self.network_allow.is_none()
    }

    /// Whether the skill serves in `mode` (`Global` skills serve in all).
    pub fn in_mode(&self, mode: &str) -> bool {
        self.modes
            .iter()
            .any(|m| m.eq_ignore_ascii_case(mode) || m.eq_ignore_ascii_case("global"))
    }

    /// The first permission its calls need that it does not declare.
    pub fn undeclared_need(&self) -> Option<Need> {
        self.needs
            .iter()
            .copied()
            .find(|n| !self.permissions.iter().any(|p| p == n.permission))
    }

    /// The declared JSON Schema of tool `tool`'s result, if it has one.
    pub fn output_schema(&self, tool: &str) -> Option<&Schema> {
        self.output_schemas.get(tool)
    }

    /// The files under `references/`, for the prompt route.
    pub fn references(&self) -> impl Iterator<Item = &SkillFile> {
        self.files.iter().filter(|f| f.path.starts_with("references/"))
    }
}
