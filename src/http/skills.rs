//! `/skills`, `/diagnostics` and `/commands`: the catalog, read-only, plus
//! the admin reload.

use super::AppState;
use super::auth::{Require, need};
use super::kit::error::{ApiError, Problem, Result};
use super::kit::extract::{Accept, AgentPolicy, AgentToolsQuery, Path, Query};
use super::responses::{BadQuery, Binary, NoSuchSkill};
use crate::catalog::{AgentTools, Catalog, Exclusion, NotFound};
use crate::export::ToolInfo;
use crate::skill::MAX_DEFINITION_BYTES;
use crate::skill::{
    Diagnostic, Dialect, Eligibility, InvocationMode, Resources, Skill, SkillFile, Triggers, Trust,
};
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_skills))
        .routes(routes!(reload_skills))
        .routes(routes!(get_skill))
        .routes(routes!(get_skill_prompt))
        .routes(routes!(list_diagnostics))
        .routes(routes!(list_commands))
        // The file route needs axum's `{*path}` wildcard, which is not an
        // OpenAPI path template; its spec entry is added in `http::openapi`.
        .route(
            "/skills/{skill}/files/{*path}",
            axum::routing::get(get_skill_file),
        )
}

/// A skill in a list.
#[derive(Debug, Serialize, ToSchema)]
pub struct SkillSummary {
    pub name: String,
    /// Semver; absent for prompt skills that declare none.
    pub version: Option<String>,
    pub description: String,
    pub dialect: Dialect,
    /// The root it came from (`bundled`, `user`, `project`, `installed`, or
    /// a `--skills` directory).
    pub source: String,
    pub trust: Trust,
    pub modes: Vec<String>,
    /// Names of its tools.
    pub tools: Vec<String>,
    /// The tools it needs: the agent's own (`read`, `shell`) or skilld's.
    pub requires_tools: Vec<String>,
    /// SHA-256 of what it would execute.
    pub hash: String,
}

impl SkillSummary {
    pub fn new(s: &Skill) -> Self {
        Self {
            name: s.name.clone(),
            version: s.version.clone(),
            description: s.description.clone(),
            dialect: s.dialect,
            source: s.source.clone(),
            trust: s.trust,
            modes: s.modes.clone(),
            tools: s.tools.iter().map(|t| t.name.clone()).collect(),
            requires_tools: s.requires_tools.clone(),
            hash: s.hash.clone(),
        }
    }
}

/// `GET /skills`: the available skills index (seed 004).
#[derive(Debug, Serialize, ToSchema)]
pub struct SkillList {
    pub skills: Vec<SkillSummary>,
    /// Skills left out under the caller's tool policy (`agent_tools`),
    /// each with why; empty without a policy.
    pub excluded: Vec<Exclusion>,
}

impl SkillList {
    /// The skills `keep` lets through (given each one's place in the
    /// catalog), those `policy` leaves out apart.
    pub fn of(catalog: &Catalog, policy: &AgentTools, keep: impl Fn(usize, &Skill) -> bool) -> Self {
        let mut list = Self {
            skills: Vec::new(),
            excluded: Vec::new(),
        };
        let kept = catalog.skills.iter().enumerate().filter(|(i, s)| keep(*i, s));
        for (_, s) in kept {
            match catalog.exclusion(s, policy) {
                Some(why) => list.excluded.push(why),
                None => list.skills.push(SkillSummary::new(s)),
            }
        }
        list
    }
}

/// 409 `missing_required_tool` for a skill that `policy` leaves out.
pub(super) fn available(catalog: &Catalog, skill: &Skill, policy: &AgentTools) -> Result<()> {
    match catalog.exclusion(skill, policy) {
        None => Ok(()),
        Some(why) => Err(ApiError::Conflict {
            code: "missing_required_tool",
            detail: why.message,
        }),
    }
}

/// The 409 of a route that hands out a skill.
pub(super) const EXCLUDED: &str = "The caller's tool policy (`agent_tools`) lacks a tool the skill requires, \
and no loaded skill provides it (`missing_required_tool`)";

/// Everything about one skill.
#[derive(Debug, Serialize, ToSchema)]
pub struct SkillDetail {
    pub name: String,
    pub version: Option<String>,
    pub description: String,
    pub dialect: Dialect,
    pub source: String,
    pub trust: Trust,
    pub modes: Vec<String>,
    pub hash: String,
    pub author: Option<String>,
    pub license: Option<String>,
    pub tags: Vec<String>,
    pub read_only: bool,
    pub always_ask: bool,
    pub timeout_secs: u64,
    pub network: bool,
    /// Where the tools may connect when the skill lists it
    /// (`network: {allow: [...]}`): each run reaches these through
    /// skilld's proxy, and nothing else. Absent for `true` and `false`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_allow: Option<Vec<String>>,
    pub resources: Resources,
    pub invocation_mode: InvocationMode,
    pub command: Option<String>,
    pub command_tool: Option<String>,
    pub requires_tools: Vec<String>,
    pub eligibility: Eligibility,
    pub triggers: Triggers,
    pub permissions: Vec<String>,
    /// The Agent Skills `compatibility`: what the skill needs of its
    /// environment, in words.
    pub compatibility: Option<String>,
    /// The Agent Skills `allowed-tools`: the agent tools the skill expects.
    /// skilld grants nothing from it.
    pub allowed_tools: Vec<String>,
    /// The Agent Skills `metadata`: the author's own keys and their values
    /// (numbers as their text); `{}` when there is none.
    pub metadata: std::collections::BTreeMap<String, String>,
    /// The Markdown body.
    pub instructions: String,
    pub files: Vec<SkillFile>,
    pub tools: Vec<ToolInfo>,
    pub warnings: Vec<Diagnostic>,
}

impl SkillDetail {
    pub fn new(s: &Skill) -> Self {
        Self {
            name: s.name.clone(),
            version: s.version.clone(),
            description: s.description.clone(),
            dialect: s.dialect,
            source: s.source.clone(),
            trust: s.trust,
            modes: s.modes.clone(),
            hash: s.hash.clone(),
            author: s.author.clone(),
            license: s.license.clone(),
            tags: s.tags.clone(),
            read_only: s.read_only,
            always_ask: s.always_ask,
            timeout_secs: s.timeout_secs,
            network: s.network,
            network_allow: s
                .network_allow
                .as_ref()
                .map(|list| list.patterns().iter().map(ToString::to_string).collect()),
            resources: s.resources.clone(),
            invocation_mode: s.invocation_mode,
            command: s.command.clone(),
            command_tool: s.command_tool.clone(),
            requires_tools: s.requires_tools.clone(),
            eligibility: s.eligibility.clone(),
            triggers: s.triggers.clone(),
            permissions: s.permissions.clone(),
            compatibility: s.compatibility.clone(),
            allowed_tools: s.allowed_tools.clone(),
            metadata: s.metadata.clone(),
            instructions: s.instructions.clone(),
            files: s.files.clone(),
            tools: s.tools.iter().map(|t| ToolInfo::new(s, t)).collect(),
            warnings: s.warnings.clone(),
        }
    }
}

/// Filters of `GET /skills`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SkillFilter {
    /// Only skills serving in this mode (or `Global`).
    pub mode: Option<String>,
    /// Case-insensitive text to find in the name or description.
    pub q: Option<String>,
    pub trust: Option<Trust>,
    /// Only skills from this source (`bundled`, `user`, `project`,
    /// `installed`, or a `--skills` directory as given): `installed` lists
    /// what another skilld can pull.
    pub source: Option<String>,
}

/// List the loaded skills, sorted by name; under a tool policy, those it
/// leaves out apart, in `excluded`.
#[utoipa::path(get, path = "/skills", tag = "skills", security(("bearer" = ["read"])), params(SkillFilter, AgentToolsQuery),
    responses(
        (status = 200, description = "The skills", body = SkillList),
        BadQuery,
    ))]
async fn list_skills(
    _: Require<need::Read>,
    State(state): State<AppState>,
    Query(filter): Query<SkillFilter>,
    AgentPolicy(policy): AgentPolicy,
) -> Json<SkillList> {
    let catalog = state.catalog.current();
    let q = filter.q.as_deref().map(str::to_lowercase);
    let text = q.as_ref().map(|_| SearchText::of(&catalog));
    Json(SkillList::of(&catalog, &policy, |i, s| {
        filter.mode.as_deref().is_none_or(|m| s.in_mode(m))
            && filter.trust.is_none_or(|t| s.trust == t)
            && filter.source.as_deref().is_none_or(|src| s.source == src)
            && q.as_deref()
                .zip(text.as_deref())
                .is_none_or(|(q, text)| text.matches(i, q))
    }))
}

/// Each skill's name and description in lower case, made once per catalog
/// snapshot: lowering every skill's text for each `?q=` took 50 ms of a
/// request at 50 000 skills (`cargo bench --bench catalog`).
struct SearchText(Vec<(String, String)>);

impl SearchText {
    fn of(catalog: &Catalog) -> Arc<Self> {
        let made = catalog
            .derived
            .get_or_try_make::<Self, std::convert::Infallible>("skills.search", || {
                Ok(Self(
                    catalog
                        .skills
                        .iter()
                        .map(|s| (s.name.to_lowercase(), s.description.to_lowercase()))
                        .collect(),
                ))
            });
        match made {
            Ok(text) => text,
            Err(never) => match never {},
        }
    }

    /// Whether the skill at `i` holds `q` (already lower case).
    fn matches(&self, i: usize, q: &str) -> bool {
        self.0
            .get(i)
            .is_some_and(|(name, description)| name.contains(q) || description.contains(q))
    }
}

/// The skill's name in a path.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct SkillPath {
    /// The skill's name; `name@version` names one installed version, and
    /// `name@latest` the highest ready one.
    pub skill: String,
}

/// The skill a path names (`name`, `name@version`, `name@latest`). Another
/// installed version is read, and maybe loaded, on a blocking thread.
pub(super) async fn named(state: &AppState, spec: &str) -> Result<Arc<Skill>> {
    let catalog = state.catalog.current();
    let found = if spec.contains('@') {
        let owned = spec.to_owned();
        tokio::task::spawn_blocking(move || catalog.find(&owned))
            .await
            .map_err(|e| ApiError::Internal(format!("finding {spec} stopped: {e}")))?
    } else {
        catalog.find(spec)
    };
    found.map(|f| f.skill).map_err(|e| match e {
        NotFound::Broken { .. } => ApiError::Conflict {
            code: "version_unavailable",
            detail: e.to_string(),
        },
        _ => ApiError::not_found("skill", spec),
    })
}

/// One skill with its tools, files and warnings.
#[utoipa::path(get, path = "/skills/{skill}", tag = "skills", security(("bearer" = ["read"])), params(SkillPath),
    responses(
        (status = 200, description = "The skill", body = SkillDetail),
        BadQuery,
        NoSuchSkill,
    ))]
async fn get_skill(
    _: Require<need::Read>,
    State(state): State<AppState>,
    Path(p): Path<SkillPath>,
) -> Result<Json<SkillDetail>> {
    let skill = named(&state, &p.skill).await?;
    Ok(Json(SkillDetail::new(&skill)))
}

/// A skill's instructions, for prompt rewriting.
#[derive(Debug, Serialize, ToSchema)]
pub struct SkillPrompt {
    pub skill: String,
    pub instructions: String,
    /// Paths (under `references/`) that `/skills/{skill}/files/{path}` serves.
    pub references: Vec<String>,
}

/// A skill's instructions and references; `text/markdown` when `Accept` asks.
#[utoipa::path(get, path = "/skills/{skill}/prompt", tag = "skills", security(("bearer" = ["read"])), params(SkillPath, AgentToolsQuery),
    responses(
        (status = 200, description = "The instructions", content(
            (SkillPrompt = "application/json"),
            (String = "text/markdown"),
        )),
        BadQuery,
        NoSuchSkill,
        (status = 409, description = EXCLUDED, body = Problem, content_type = "application/problem+json"),
    ))]
async fn get_skill_prompt(
    _: Require<need::Read>,
    State(state): State<AppState>,
    Path(p): Path<SkillPath>,
    AgentPolicy(policy): AgentPolicy,
    accept: Accept,
) -> Result<Response> {
    let skill = named(&state, &p.skill).await?;
    available(&state.catalog.current(), &skill, &policy)?;
    if accept.prefers("text/markdown") {
        return Ok((
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/markdown; charset=utf-8"),
            )],
            skill.instructions.clone(),
        )
            .into_response());
    }
    Ok(Json(SkillPrompt::new(&skill)).into_response())
}

impl SkillPrompt {
    pub fn new(skill: &Skill) -> Self {
        Self {
            skill: skill.name.clone(),
            instructions: skill.instructions.clone(),
            references: skill.references().map(|f| f.path.clone()).collect(),
        }
    }
}

/// A skill's file in a path.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct SkillFilePath {
    /// The skill's name.
    pub skill: String,
    /// The file, relative to the skill's directory.
    pub path: String,
}

/// A file of a skill (references, assets, scripts). A path with `..`, or
/// through a symbolic link anywhere, is not found, nor is anything but a
/// regular file with a single link.
#[utoipa::path(get, path = "/skills/{skill}/files/{path}", tag = "skills", security(("bearer" = ["read"])), params(SkillFilePath),
    responses(
        (status = 200, description = "The file, as the type of its extension (`md` is `text/markdown`, `txt`, `ts`, \
`log`, `ini`, `cfg` and `conf` are `text/plain`, `py` `text/x-python`, `sh` and `bash` `text/x-shellscript`, \
`js` `text/javascript`, `html` `text/html`, `css` `text/css`, `csv` `text/csv`, `json` `application/json`, \
`yaml` and `yml` `application/yaml`, `xml` `application/xml`, `toml` `application/toml`); or, when `Accept` \
prefers `application/octet-stream`, as a download of that type", content(
            (inline(Binary) = "application/octet-stream"),
            (String = "text/markdown"),
            (String = "text/plain"),
            (String = "text/x-python"),
            (String = "text/x-shellscript"),
            (String = "text/javascript"),
            (String = "text/html"),
            (String = "text/css"),
            (String = "text/csv"),
            (serde_json::Value = "application/json"),
            (String = "application/yaml"),
            (String = "application/xml"),
            (String = "application/toml"),
        )),
        BadQuery,
        (status = 404, description = "No such skill or file, an extension that is not served; or a path with `..`, \
a symbolic link on the way, or something other than a regular file with a single link", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "The file is over 1 MiB", body = Problem, content_type = "application/problem+json"),
        (status = 504, description = "The server's disk did not give the file within 10 s", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn get_skill_file(
    _: Require<need::Read>,
    State(state): State<AppState>,
    Path(p): Path<SkillFilePath>,
    accept: Accept,
) -> Result<Response> {
    let skill = named(&state, &p.skill).await?;
    let ext = crate::skill::files::extension(&p.path);
    let Some(mut content_type) = crate::skill::files::served_type(&ext) else {
        return Err(not_served(&skill.dir, &p.path, &ext).await);
    };
    // A client that wants the bytes whatever they are (a generated one
    // saving a file) may ask for them as such.
    if accept.prefers(OCTET_STREAM) {
        content_type = OCTET_STREAM;
    }
    let bytes =
        super::read_file_beneath(skill.dir.clone(), p.path.clone(), &p.path, MAX_DEFINITION_BYTES).await?;
    Ok((
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
            // A skill's HTML must not run script on this origin.
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static("sandbox; default-src 'none'"),
            ),
        ],
        bytes,
    )
        .into_response())
}

const OCTET_STREAM: &str = "application/octet-stream";

/// Why a file of a kind that is not served is not: 403 naming the kinds
/// that are when the file exists (the skill's `files` lists it), else 404.
async fn not_served(dir: &std::path::Path, rel: &str, ext: &str) -> ApiError {
    let (dir, owned) = (dir.to_path_buf(), rel.to_owned());
    let check = tokio::task::spawn_blocking(move || {
        use std::os::fd::AsFd;
        crate::fsafe::open_base(&dir).is_ok_and(|base| crate::fsafe::is_file_beneath(base.as_fd(), &owned))
    });
    // A disk that does not answer shows nothing rather than hold the request.
    let exists = matches!(
        tokio::time::timeout(super::FILE_READ_TIMEOUT, check).await,
        Ok(Ok(true))
    );
    if !exists {
        return ApiError::not_found("file", rel);
    }
    let kind = if ext.is_empty() {
        "files without an extension are".to_owned()
    } else {
        format!("'.{ext}' files are")
    };
    ApiError::Refused {
        code: "file_type_not_served",
        detail: format!(
            "{rel} exists, but {kind} not served; served: .{}",
            crate::skill::files::SERVED_EXTENSIONS.join(", .")
        ),
    }
}

/// `GET /diagnostics`.
#[derive(Debug, Serialize, ToSchema)]
pub struct DiagnosticList {
    pub diagnostics: Vec<Diagnostic>,
}

/// Every excluded skill's errors and every warning of the catalog, then
/// each fronted MCP server whose session skilld dropped since, and why
/// (`upstream_dropped`).
#[utoipa::path(get, path = "/diagnostics", tag = "skills", security(("bearer" = ["read"])),
    responses((status = 200, description = "The diagnostics", body = DiagnosticList), BadQuery))]
async fn list_diagnostics(_: Require<need::Read>, State(state): State<AppState>) -> Json<DiagnosticList> {
    Json(DiagnosticList {
        diagnostics: state.catalog.current().diagnostics_now(),
    })
}

/// A command alias of a prompt skill.
#[derive(Debug, Serialize, ToSchema)]
pub struct CommandInfo {
    /// Invoked as `/<command>`.
    pub command: String,
    pub skill: String,
    pub description: String,
    pub invocation_mode: InvocationMode,
    /// The tool a `tool_dispatch` command invokes.
    pub command_tool: Option<String>,
}

/// `GET /commands`.
#[derive(Debug, Serialize, ToSchema)]
pub struct CommandList {
    pub commands: Vec<CommandInfo>,
    /// The built-in commands (`help`, `skill`, `skills`), which no alias
    /// may take.
    pub builtin: Vec<String>,
    /// The aliases' skills that the caller's tool policy leaves out.
    pub excluded: Vec<Exclusion>,
}

impl CommandList {
    /// The aliases, those of skills `policy` leaves out apart.
    pub fn of(catalog: &Catalog, policy: &AgentTools) -> Self {
        let mut list = Self {
            commands: Vec::new(),
            builtin: crate::skill::fields::BUILTIN_COMMANDS
                .iter()
                .map(|&c| c.to_owned())
                .collect(),
            excluded: Vec::new(),
        };
        list.builtin.sort_unstable();
        for c in &catalog.commands {
            let s = &catalog.skills[c.skill];
            if let Some(why) = catalog.exclusion(s, policy) {
                list.excluded.push(why);
                continue;
            }
            list.commands.push(CommandInfo {
                command: c.command.clone(),
                skill: s.name.clone(),
                description: s.description.clone(),
                invocation_mode: s.invocation_mode,
                command_tool: s.command_tool.clone(),
            });
        }
        list
    }
}

/// The command aliases, sorted, and the built-in commands; under a tool
/// policy, the aliases of skills it leaves out apart, in `excluded`.
#[utoipa::path(get, path = "/commands", tag = "skills", security(("bearer" = ["read"])), params(AgentToolsQuery),
    responses((status = 200, description = "The command aliases", body = CommandList), BadQuery))]
async fn list_commands(
    _: Require<need::Read>,
    State(state): State<AppState>,
    AgentPolicy(policy): AgentPolicy,
) -> Json<CommandList> {
    Json(CommandList::of(&state.catalog.current(), &policy))
}

/// What a reload found.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReloadSummary {
    /// Skills now served.
    pub skills: usize,
    /// Error diagnostics (excluded skills, unreadable roots).
    pub errors: usize,
}

/// Rescan every root now and swap the new catalog in.
#[utoipa::path(post, path = "/skills/reload", tag = "skills", security(("bearer" = ["admin"])),
    responses((status = 200, description = "The catalog was rebuilt", body = ReloadSummary), BadQuery))]
async fn reload_skills(
    _: Require<need::Admin>,
    State(state): State<AppState>,
) -> Result<Json<ReloadSummary>> {
    let handle = state.catalog.clone();
    let catalog = tokio::task::spawn_blocking(move || handle.reload())
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(Json(ReloadSummary {
        skills: catalog.skills.len(),
        errors: catalog.error_count(),
    }))
}
