//! Loading a `SKILL.yaml` skill: its fields read as frontmatter is, its
//! manifest parts, then its backend started for the tools it adds.

use crate::skill::backend::{BackendKind, DeclaredTool, HeldBack, LaunchRequest, Launched};
use crate::skill::definition::{LoadOptions, decode, read_definition, with_base_dir};
use crate::skill::diag::{Code, Diagnostic, Pos};
use crate::skill::fields::Origin;
use crate::skill::files;
use crate::skill::frontmatter;
use crate::skill::hash;
use crate::skill::manifest::{MANIFEST_KEYS, ManifestParts};
use crate::skill::model::*;
use crate::skill::parse::Parse;
use crate::skill::phases::Phase;
use crate::skill::upstream::Upstream;
use crate::trust::Trust;
use serde_json::{Map, Value};
use std::path::Path;

/// Every file under the skill's directory, each one its own: a file that
/// resolves outside it, or a tree too deep to list, is an error.
fn own_files(p: &mut Parse<'_, '_>, dir: &Path) -> files::Runnable {
    let every = files::files_under(dir, "");
    for outside in &every.outside {
        p.error_in(
            Code::ProgramOutsideSkill,
            &dir.join(outside).display().to_string(),
            format!("{outside} resolves outside the skill directory; a manifest's files must be its own"),
        );
    }
    if every.incomplete {
        p.error_in(
            Code::TooLarge,
            &dir.display().to_string(),
            files::too_deep("the skill"),
        );
    }
    every
}

/// The skill of manifest `path` in `dir`, errors and all; `None` when the
/// manifest cannot be read as a YAML mapping.
pub(in crate::skill) fn load(
    dir: &Path,
    name: &str,
    path: &Path,
    opts: &LoadOptions<'_>,
    diags: &mut Vec<Diagnostic>,
) -> Option<Skill> {
    let shown = path.display().to_string();
    let bytes = read_definition(path, &shown, diags)?;
    let text = decode(&bytes, &shown, diags)?;
    let mut p = Parse::new(shown, text, diags);
    p.dir_name(name);
    p.yaml = text;
    let manifest = p.manifest(text)?;
    p.unknown_keys_beside(&manifest, MANIFEST_KEYS);
    let fields = p.fields(
        &textual_compatibility(&manifest),
        name,
        Dialect::Manifest,
        opts.max_timeout_secs,
        opts.path,
    );
    let parts = p.manifest_parts(&manifest, dir);
    let files = files::list_files(dir);
    let every = own_files(&mut p, dir);
    let needs = needs(&parts, fields.network);
    let (deps, deps_wait) = p.prepared_dependencies(dir, Dialect::Manifest, opts);
    let mut skill = fields.into_skill(Origin {
        name,
        dialect: Dialect::Manifest,
        dir,
        definition: path.to_path_buf(),
        source: opts.source,
        trust: opts.trust,
        network_unrestricted: opts.rules.network_unrestricted(name, opts.trust),
        deps,
    });
    skill.deps_wait = deps_wait;
    skill.instructions = with_base_dir(&parts.instructions, dir);
    skill.types = parts.types.clone();
    skill.needs = needs;
    skill.dependencies = crate::skill::manifest::dependencies(&manifest);
    skill.files = files;
    let (hash, fingerprint, digests) = hash::content_hash(dir, path, &bytes, &every.inside);
    let source = crate::skill::listing::Source {
        name,
        description: &skill.description,
        dialect: Dialect::Manifest,
        frontmatter: &Map::new(),
        definition: &bytes,
        body: &parts.instructions,
    };
    skill.listing = crate::skill::listing::listing(
        &source,
        &crate::skill::listing::served_paths(&skill.files),
        &digests,
    );
    skill.hash = hash;
    skill.fingerprint = std::sync::Arc::new(fingerprint);
    skill.tools = parts
        .tools
        .iter()
        .cloned()
        .map(|(d, schema, ask)| backend_tool(d, schema, ask))
        .collect();
    skill.output_schemas = parts.outputs.iter().cloned().collect();
    // A skill already excluded is not started: its child would serve nothing.
    if !p.has_errors() {
        p.launch(&mut skill, &parts, &Value::Object(manifest), opts);
    }
    // Without a started backend (linting, held for review, or untrusted
    // and waiting for an approved call), the tools it would add are not
    // known: an upload must not be refused for naming one.
    let started = skill.backend.is_some() && skill.trust != Trust::Untrusted;
    let unseen = parts.implementation.is_some() && !started;
    let known: Vec<&str> = skill.tools.iter().map(|t| t.name.as_str()).collect();
    p.check_example_tools(&skill.examples, &known, unseen);
    Some(skill)
}

const SHELL_EXEC: &str = "shell:exec";

/// The permissions a manifest's calls need: a process backend runs a
/// program, and network access is fetching.
fn needs(parts: &ManifestParts, network: bool) -> Vec<Need> {
    let mut needs = Vec::new();
    let stdio_mcp = parts
        .upstream
        .as_ref()
        .is_some_and(|u| matches!(u.transport, crate::skill::upstream::Transport::Stdio { .. }));
    if matches!(parts.implementation, Some((BackendKind::Process, _))) || stdio_mcp {
        needs.push(Need {
            permission: SHELL_EXEC,
            why: "its tools run in a child process",
        });
    }
    if network {
        needs.push(Need {
            permission: "net:fetch",
            why: "it asks for network access (network: true)",
        });
    }
    needs
}

/// The entrypoint run by its extension's runtime, or directly.
fn command_for(entry: &Path, opts: &LoadOptions<'_>) -> Vec<String> {
    let ext = entry.extension().and_then(|e| e.to_str()).unwrap_or("");
    let mut command = opts
        .runtimes
        .for_extension(ext)
        .map(<[String]>::to_vec)
        .unwrap_or_default();
    command.push(entry.display().to_string());
    command
}

/// A tool a manifest or its backend declared, run by the backend.
fn backend_tool(d: DeclaredTool, schema: Schema, requires_approval: bool) -> Tool {
    Tool {
        name: d.name,
        description: d.description,
        params: Vec::new(),
        open_object: true,
        schema: Some(schema),
        requires_approval,
        read_only: None,
        action: Action::Backend,
    }
}

/// Seed 002's `compatibility` is a mapping, the Agent Skills one a
/// sentence: a mapping is kept as its `key: value` pairs in words.
fn textual_compatibility(manifest: &Map<String, Value>) -> Map<String, Value> {
    let mut fields = manifest.clone();
    if let Some(Value::Object(c)) = manifest.get("compatibility") {
        let words: Vec<String> = c
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => format!("{k}: {s}"),
                other => format!("{k}: {other}"),
            })
            .collect();
        fields.insert("compatibility".to_owned(), Value::String(words.join(", ")));
    }
    fields
}

impl Parse<'_, '_> {
    /// The manifest as a mapping; `None` when it is not YAML or not a
    /// mapping.
    fn manifest(&mut self, text: &str) -> Option<Map<String, Value>> {
        match frontmatter::parse_yaml(text) {
            Ok(Value::Object(map)) => Some(map),
            Ok(_) => {
                self.error(
                    Code::InvalidYaml,
                    Some(Pos { line: 1, column: 1 }),
                    "SKILL.yaml must be a YAML mapping of keys to values",
                );
                None
            }
            Err(e) => {
                let pos = e.location.map(|(line, column)| Pos { line, column });
                self.error(
                    Code::InvalidYaml,
                    pos,
                    format!("invalid YAML in SKILL.yaml: {}", e.message),
                );
                None
            }
        }
    }

    /// Starts the skill's backend and adds the tools it declares beside
    /// the manifest's (the manifest's stand when both name one).
    fn launch(&mut self, skill: &mut Skill, parts: &ManifestParts, manifest: &Value, opts: &LoadOptions<'_>) {
        let Some((kind, entry)) = &parts.implementation else {
            return;
        };
        let pos = self.key_pos("implementation");
        if !self.references_allowed(skill, parts) {
            return;
        }
        if let Some(need) = skill.undeclared_need().filter(|n| n.permission == SHELL_EXEC) {
            self.warn(
                Code::PermissionNotDeclared,
                self.key_pos("permissions").or(pos),
                format!(
                    "the process backend is not started: {}, so declare '{SHELL_EXEC}'; its calls are refused until then",
                    need.why
                ),
            );
            return;
        }
        if skill.deps_wait.is_some() {
            // Started without its packages, it would only fail to find
            // them; the dependencies' own finding says why.
            return;
        }
        match opts.launcher.and_then(crate::skill::backend::Launch::held_back) {
            Some(HeldBack::UntilReviewed) => {
                self.warn(
                    Code::BackendFailed,
                    pos,
                    format!(
                        "the {} backend is not started until this version is reviewed",
                        kind.as_str()
                    ),
                );
                return;
            }
            Some(HeldBack::Linting) => return,
            None => {}
        }
        let Some(launcher) = opts.launcher else {
            self.error(
                Code::BackendFailed,
                pos,
                format!("the {} backend cannot be started here", kind.as_str()),
            );
            return;
        };
        let req = LaunchRequest {
            skill: &skill.name,
            dir: &skill.dir,
            deps: skill.deps.as_deref(),
            kind: *kind,
            entrypoint: entry,
            command: command_for(entry, opts),
            manifest,
            trust: skill.trust,
            hash: &skill.hash,
            version: skill.version.as_deref(),
            network: skill.unrestricted_network(),
            network_allow: skill.network_allow.as_ref(),
            permissions: &skill.permissions,
            memory_bytes: skill.resources.memory_bytes,
            upstream: parts.upstream.as_ref(),
        };

        if skill.trust == Trust::Untrusted {
            let backend = launcher.unstarted(&req);
            return self.await_first_call(skill, parts, *kind, backend);
        }
        match launcher.launch(&req) {
            Ok(launched) => self.adopt(skill, launched, parts),
            Err(why) => self.error(
                Code::BackendFailed,
                pos,
                format!("the {} backend did not start: {why}", kind.as_str()),
            ),
        }
    }

    /// An untrusted skill's backend, kept unstarted until a call a person
    /// let run: its code must not run before, not even to list its tools,
    /// so its tools are the manifest's.
    fn await_first_call(
        &mut self,
        skill: &mut Skill,
        parts: &ManifestParts,
        kind: BackendKind,
        backend: Result<
            std::sync::Arc<dyn crate::skill::backend::Backend>,
            crate::skill::backend::BackendError,
        >,
    ) {
        let pos = self.key_pos("implementation");
        match backend {
            Ok(backend) => skill.backend = Some(backend),
            Err(why) => {
                let why = format!("the {} backend cannot be prepared: {why}", kind.as_str());
                return self.error(Code::BackendFailed, pos, why);
            }
        }
        if parts.tools.is_empty() {
            self.warn(
                Code::BackendFailed,
                self.key_pos("tools").or(pos),
                "an untrusted skill's backend starts only for a call a person approved, so its \
                 tools are those `tools` lists, and it lists none",
            );
        }
    }

    /// Whether the upstream's references to the server's environment and
    /// files may be resolved: only for skills an operator placed. An
    /// uploaded skill naming `{env: …}` would read the server's secrets.
    fn references_allowed(&mut self, skill: &Skill, parts: &ManifestParts) -> bool {
        let refers = parts.upstream.as_ref().is_some_and(Upstream::has_references);
        if refers && skill.trust == Trust::Untrusted {
            self.error(
                Code::InvalidField,
                self.key_pos("implementation"),
                "an untrusted skill may not take values from the server's environment or files                  ({env: …} or {file: …}); only skills an operator placed may",
            );
            return false;
        }
        true
    }

    fn adopt(&mut self, skill: &mut Skill, launched: Launched, parts: &ManifestParts) {
        let rules = Rules::of(skill, parts);
        for declared in launched.tools {
            if skill.tools.iter().any(|t| t.name == declared.name) {
                continue;
            }
            if let Some(schema) = self.check_declared(&declared) {
                if let Some(output) = self.check_output(&declared) {
                    skill.output_schemas.insert(declared.name.clone(), output);
                }
                let (read_only, asks) = rules.of_tool(&declared);
                let mut tool = backend_tool(declared, schema, asks);
                tool.read_only = read_only;
                skill.tools.push(tool);
            }
        }
        self.adopt_workflows(skill, launched.workflows);
        skill.scanners = launched.scanners;
        skill.upstream = launched.extras.clone();
        if let Some(offered) = &launched.offered {
            let fingerprint = std::sync::Arc::make_mut(&mut skill.fingerprint);
            skill.hash = fingerprint.fold_offer(&skill.hash, offered);
        }
        for hook in &launched.hooks {
            if Phase::parse(hook).is_none() {
                self.warn(
                    Code::UnknownField,
                    self.key_pos("implementation"),
                    format!(
                        "the backend offers hook '{hook}', which skilld does not run; the phases are {}",
                        Phase::names()
                    ),
                );
            }
        }
        skill.hooks = Phase::known(&launched.hooks);
        skill.backend = Some(launched.backend);
    }
}

impl Parse<'_, '_> {
    /// A backend's workflows, served as tools of the skill: checked like
    /// its tools; one named as a tool is a warning, and not served.
    fn adopt_workflows(&mut self, skill: &mut Skill, workflows: Vec<DeclaredTool>) {
        for declared in workflows {
            if skill.tools.iter().any(|t| t.name == declared.name) {
                self.warn(
                    Code::DuplicateTool,
                    self.key_pos("implementation"),
                    format!(
                        "the backend's workflow '{}' has the name of a tool of the skill; it is not served",
                        declared.name
                    ),
                );
                continue;
            }
            if let Some(schema) = self.check_declared(&declared) {
                let mut tool = backend_tool(declared, schema, false);
                tool.action = Action::Workflow;
                skill.tools.push(tool);
            }
        }
    }
}

/// How an MCP server's tools are ruled: the manifest's overrides, then
/// its skill-wide `read_only` and `always_ask` when written, then the
/// server's annotations.
struct Rules<'a> {
    overrides: Option<&'a std::collections::BTreeMap<String, crate::skill::upstream::ToolOverride>>,
    /// The manifest's `read_only`, when it was written.
    read_only: Option<bool>,
}

impl<'a> Rules<'a> {
    fn of(skill: &Skill, parts: &'a ManifestParts) -> Self {
        Self {
            overrides: parts.upstream.as_ref().map(|u| &u.overrides),
            read_only: parts.read_only_written.then_some(skill.read_only),
        }
    }

    /// A tool's own `read_only` (`None`: its skill's) and whether it
    /// always asks.
    fn of_tool(&self, t: &DeclaredTool) -> (Option<bool>, bool) {
        if self.overrides.is_none() {
            return (None, false);
        }
        let rule = self
            .overrides
            .and_then(|o| o.get(&t.name))
            .copied()
            .unwrap_or_default();
        let read_only = rule.read_only.or(self.read_only).or(t.hints.read_only);
        let asks = rule.always_ask.unwrap_or(t.hints.destructive == Some(true));
        (read_only, asks)
    }
}
