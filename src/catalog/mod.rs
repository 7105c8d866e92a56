//! The catalog: every root scanned, precedence applied, cross-skill rules
//! checked, tools indexed and exports built — once per snapshot. A snapshot
//! is immutable; reloading builds a new one and swaps it in whole.

mod agent_tools;
mod derived;
pub mod installed;
mod roots;
pub mod versions;

use crate::export::Exports;
pub use crate::export::ToolEntry;
use crate::skill::backend::Launch;
use crate::skill::{Code, Diagnostic, InvocationMode, Skill, Trust};
use crate::skill::{LoadOptions, Loaded, PathCache, Runtimes, SkillRules, load_skill};
pub use agent_tools::{AgentTools, Exclusion};
pub use roots::{Root, bundled_dir, configured_roots, default_roots, installed_root, user_skills_dir};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
pub use versions::{Found, NotFound};

/// How catalogs are built; fixed for the life of a handle.
#[derive(Debug, Clone)]
pub struct CatalogOptions {
    pub roots: Vec<Root>,
    pub max_timeout_secs: u64,
    pub runtimes: Runtimes,
    /// Starts the backends of manifest skills (the server's
    /// [`crate::invoke::Invoker::launcher`]); without one they cannot load.
    pub launcher: Option<Arc<dyn Launch>>,
    /// The image allowlist, entrypoint defaults and where plain skills'
    /// dependencies are prepared.
    pub rules: SkillRules,
}

/// A `command` alias of a prompt skill.
#[derive(Debug, Clone)]
pub struct CommandEntry {
    pub command: String,
    pub skill: usize,
}

/// What scanning one root gave, kept so a later failure can reuse it.
#[derive(Debug, Clone)]
struct RootScan {
    path: PathBuf,
    loaded: Arc<Vec<Loaded>>,
}

/// An immutable snapshot of every loaded skill and what was said about them.
#[derive(Debug)]
pub struct Catalog {
    /// Loaded skills, sorted by name.
    pub skills: Vec<Arc<Skill>>,
    by_name: HashMap<String, usize>,
    /// Every tool, sorted by name then skill.
    pub tools: Vec<ToolEntry>,
    /// Bare and export names → indices into `tools`.
    tool_index: HashMap<String, Vec<usize>>,
    pub commands: Vec<CommandEntry>,
    /// Every error of an excluded skill and every warning, sorted.
    pub diagnostics: Vec<Diagnostic>,
    pub exports: Exports,
    scans: Vec<RootScan>,
    /// Installed versions other than the serving ones, loaded when named.
    versions: versions::Versions,
    /// The index of skills MCP sessions get as instructions, made by
    /// `mcp` once per snapshot (rmcp asks for it at every request).
    pub instructions_index: std::sync::OnceLock<String>,
    /// Other answers made from this snapshot once, for every session.
    pub derived: derived::Derived,
}

/// What looking a tool up by name found.
pub enum ToolLookup {
    /// The index into [`Catalog::tools`].
    Found(usize),
    Missing,
    /// Several skills define the name; these are the candidates' indices.
    Ambiguous(Vec<usize>),
}

impl Catalog {
    /// An empty catalog, for a server whose roots are still being read.
    pub fn empty() -> Self {
        Self::assemble(Vec::new(), Vec::new(), Vec::new(), None)
    }

    /// Scans every root and builds a snapshot. A root that cannot be read
    /// reuses what `previous` had for it.
    pub fn build(opts: &CatalogOptions, previous: Option<&Catalog>) -> Self {
        let path_cache = PathCache::new(std::env::var_os("PATH"));
        let mut diagnostics = Vec::new();
        let mut jobs: Vec<Job> = Vec::new();
        let mut reused: Vec<Option<Arc<Vec<Loaded>>>> = vec![None; opts.roots.len()];
        for (i, root) in opts.roots.iter().enumerate() {
            match root_dirs(root, &mut diagnostics) {
                Ok(dirs) => jobs.extend(dirs.into_iter().map(|(dir, trust)| Job { root: i, dir, trust })),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    if root.explicit {
                        diagnostics.push(Diagnostic::warning(
                            Code::RootMissing,
                            root.path.display().to_string(),
                            "this skills directory does not exist",
                        ));
                    }
                }
                Err(e) => {
                    let kept = previous.and_then(|p| p.scans.iter().find(|s| s.path == root.path));
                    diagnostics.push(Diagnostic::error(
                        Code::Unreadable,
                        root.path.display().to_string(),
                        format!(
                            "cannot read this skills directory ({e}); {}",
                            if kept.is_some() {
                                "keeping the skills loaded from it before"
                            } else {
                                "no skills from it are served"
                            }
                        ),
                    ));
                    reused[i] = kept.map(|s| s.loaded.clone());
                }
            }
        }

        let results = load_parallel(&jobs, opts, &path_cache);
        let mut per_root: Vec<Vec<Loaded>> = vec![Vec::new(); opts.roots.len()];
        for (job, loaded) in jobs.iter().zip(results) {
            per_root[job.root].push(loaded);
        }
        let scans: Vec<RootScan> = opts
            .roots
            .iter()
            .zip(per_root)
            .zip(reused)
            .map(|((root, fresh), reused)| RootScan {
                path: root.path.clone(),
                loaded: reused.unwrap_or_else(|| Arc::new(fresh)),
            })
            .collect();

        let accepted = precedence(&scans, &mut diagnostics);
        let accepted = cross_check(accepted, &mut diagnostics);
        Self::assemble(accepted, diagnostics, scans, Some(opts))
    }

    fn assemble(
        mut skills: Vec<Arc<Skill>>,
        mut diagnostics: Vec<Diagnostic>,
        scans: Vec<RootScan>,
        opts: Option<&CatalogOptions>,
    ) -> Self {
        skills.sort_by(|a, b| a.name.cmp(&b.name));
        let ambiguous = warn_ambiguous(&mut skills, &mut diagnostics);
        let tools = index_tools(&skills, &ambiguous);
        let mut tool_index: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, e) in tools.iter().enumerate() {
            let bare = &skills[e.skill].tools[e.tool].name;
            tool_index.entry(bare.clone()).or_default().push(i);
            if &e.export_name != bare {
                tool_index.entry(e.export_name.clone()).or_default().push(i);
            }
        }
        let mut commands: Vec<CommandEntry> = skills
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                s.command.as_ref().map(|c| CommandEntry {
                    command: c.clone(),
                    skill: i,
                })
            })
            .collect();
        commands.sort_by(|a, b| a.command.cmp(&b.command));
        diagnostics.sort_by(|a, b| {
            (&a.skill, &a.path, a.line, a.column, a.code).cmp(&(&b.skill, &b.path, b.line, b.column, b.code))
        });
        diagnostics.dedup();
        let by_name = skills
            .iter()
            .enumerate()
            .map(|(i, s)| (s.name.clone(), i))
            .collect();
        let exports = Exports::build(&skills, &tools);
        Self {
            skills,
            by_name,
            tools,
            tool_index,
            commands,
            diagnostics,
            exports,
            scans,
            versions: versions::Versions::new(opts),
            instructions_index: std::sync::OnceLock::new(),
            derived: derived::Derived::default(),
        }
    }

    pub fn skill(&self, name: &str) -> Option<&Arc<Skill>> {
        self.by_name.get(name).map(|&i| &self.skills[i])
    }

    pub fn skill_index(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// A tool by bare name (or by the qualified export name).
    pub fn tool(&self, name: &str) -> ToolLookup {
        match self.tool_index.get(name).map(Vec::as_slice) {
            None | Some([]) => ToolLookup::Missing,
            Some([one]) => ToolLookup::Found(*one),
            Some(many) => ToolLookup::Ambiguous(many.to_vec()),
        }
    }

    /// The index in [`Catalog::tools`] of a tool of a given skill.
    pub fn skill_tool(&self, skill: &str, tool: &str) -> Option<usize> {
        let si = self.skill_index(skill)?;
        self.tool_index
            .get(tool)?
            .iter()
            .copied()
            .find(|&i| self.tools[i].skill == si)
    }

    pub fn command(&self, command: &str) -> Option<&CommandEntry> {
        self.commands
            .binary_search_by(|c| c.command.as_str().cmp(command))
            .ok()
            .map(|i| &self.commands[i])
    }

    /// Number of errors among the diagnostics (excluded skills and roots).
    /// Whether a client listing tools, prompts or references would see
    /// something else in `other`.
    pub fn differs_for_clients(&self, other: &Catalog) -> bool {
        use crate::export::Format;
        let face = |c: &Catalog| -> Vec<(String, String, Vec<String>)> {
            c.skills
                .iter()
                .map(|s| {
                    let references = s.references().map(|f| format!("{}:{}", f.path, f.size)).collect();
                    (s.name.clone(), s.instructions.clone(), references)
                })
                .collect()
        };
        self.exports.body(Format::Mcp, None, None) != other.exports.body(Format::Mcp, None, None)
            || !self
                .commands
                .iter()
                .map(|e| &e.command)
                .eq(other.commands.iter().map(|e| &e.command))
            || face(self) != face(other)
    }

    /// The dependencies loaded skills wait for that the server could
    /// prepare: each preparation's key with a skill directory asking for
    /// it, once per key.
    pub fn waiting_dependencies(&self) -> Vec<(String, PathBuf)> {
        let mut seen = HashSet::new();
        self.skills
            .iter()
            .filter_map(|s| {
                let key = s.deps_wait.as_ref()?.key.clone()?;
                seen.insert(key.clone()).then(|| (key, s.dir.clone()))
            })
            .collect()
    }

    pub fn error_count(&self) -> usize {
        self.diagnostics.iter().filter(|d| d.is_error()).count()
    }

    /// The diagnostics of the load, then what happened to the loaded
    /// skills' backends since (`GET /diagnostics`): a fronted MCP server
    /// whose session skilld dropped, and why.
    pub fn diagnostics_now(&self) -> Vec<Diagnostic> {
        let dropped = self.skills.iter().filter_map(|s| {
            let why = s.backend.as_ref()?.last_drop()?;
            let path = s.definition.display().to_string();
            Some(Diagnostic::warning(Code::UpstreamDropped, path, why).for_skill(&s.name))
        });
        self.diagnostics.iter().cloned().chain(dropped).collect()
    }
}

/// One skill directory to load, and the trust it loads with.
struct Job {
    root: usize,
    dir: PathBuf,
    trust: Trust,
}

/// The skill directories of a root with their trust: an installed root's
/// serving versions (each installed at its own trust), else every skill
/// directory at the root's.
fn root_dirs(root: &Root, diagnostics: &mut Vec<Diagnostic>) -> std::io::Result<Vec<(PathBuf, Trust)>> {
    if !root.installed {
        let dirs = skill_dirs(&root.path, diagnostics)?;
        return Ok(dirs.into_iter().map(|d| (d, root.trust)).collect());
    }
    let installed::Serving { dirs, unreadable } = installed::serving(&root.path)?;
    for (name, why) in unreadable {
        diagnostics.push(
            Diagnostic::error(
                Code::Unreadable,
                root.path.join(&name).display().to_string(),
                format!("cannot read which version of this installed skill serves ({why})"),
            )
            .for_skill(&name),
        );
    }
    Ok(dirs)
}

fn is_skill_dir(path: &Path) -> bool {
    path.join("SKILL.md").is_file() || path.join("SKILL.yaml").is_file()
}

/// The skill directories of a collection: the subdirectories of `dir`
/// holding a definition file (as published collections group skills, for
/// example `skills/.curated/<skill>`).
fn collection(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir() && is_skill_dir(p))
        .collect()
}

/// The skill directories of a root, sorted: its subdirectories holding a
/// definition file, then those of its collections (a subdirectory, hidden
/// or not, holding skill directories), so that a skill of the root itself
/// wins a name both have. Another visible directory gets a `not_a_skill`
/// warning; another hidden one is skipped. A root that is itself a skill's
/// directory is that one skill, as `skilld check` takes it: its folders
/// are its own (`scripts/`), not skills beside it.
fn skill_dirs(root: &Path, diagnostics: &mut Vec<Diagnostic>) -> std::io::Result<Vec<PathBuf>> {
    if is_skill_dir(root) {
        return Ok(vec![root.to_path_buf()]);
    }
    let mut dirs = Vec::new();
    for entry in std::fs::read_dir(root)? {
        let entry = entry?;
        let path = entry.path();
        let name = entry.file_name();
        if !path.is_dir() {
            continue;
        }
        if is_skill_dir(&path) {
            dirs.push(path);
            continue;
        }
        let grouped = collection(&path);
        if !grouped.is_empty() {
            dirs.extend(grouped);
        } else if !name.to_string_lossy().starts_with('.') {
            diagnostics.push(
                Diagnostic::warning(
                    Code::NotASkill,
                    path.display().to_string(),
                    "this directory has no SKILL.md or SKILL.yaml and is not a skill",
                )
                .for_skill(&name.to_string_lossy()),
            );
        }
    }
    dirs.sort_by(|a, b| (a.components().count(), a).cmp(&(b.components().count(), b)));
    Ok(dirs)
}

/// Loads skill directories on every available core, keeping job order.
fn load_parallel(jobs: &[Job], opts: &CatalogOptions, path: &PathCache) -> Vec<Loaded> {
    let workers = std::thread::available_parallelism()
        .map_or(1, std::num::NonZero::get)
        .min(jobs.len().max(1));
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, Loaded)>> = Mutex::new(Vec::with_capacity(jobs.len()));
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                let mut local = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(job) = jobs.get(i) else { break };
                    let root = &opts.roots[job.root];
                    let lo = LoadOptions {
                        source: &root.name,
                        trust: job.trust,
                        max_timeout_secs: opts.max_timeout_secs,
                        runtimes: &opts.runtimes,
                        installed: root.installed,
                        path,
                        launcher: opts.launcher.as_deref(),
                        rules: &opts.rules,
                    };
                    local.push((i, load_skill(&job.dir, &lo)));
                }
                if let Ok(mut all) = results.lock() {
                    all.extend(local);
                }
            });
        }
    });
    let mut results = results
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, l)| l).collect()
}

/// Rules that span skills: command aliases are unique, every
/// `command_tool` names a tool some loaded skill has, and a manifest's
/// dependencies are loaded. Excluding one skill can strand another, so
/// this runs to a fixed point. (`requires_tools` may name the agent's own
/// tools, which only a caller's policy can tell: [`Catalog::exclusion`].)
fn cross_check(skills: Vec<Arc<Skill>>, diagnostics: &mut Vec<Diagnostic>) -> Vec<Arc<Skill>> {
    let mut skills = skills;
    let mut taken: HashMap<String, String> = HashMap::new();
    skills.retain(|s| {
        let Some(c) = &s.command else { return true };
        if let Some(owner) = taken.get(c) {
            diagnostics.push(
                Diagnostic::error(
                    Code::CommandCollision,
                    s.definition.display().to_string(),
                    format!("command '/{c}' is already taken by skill '{owner}'; choose another"),
                )
                .for_skill(&s.name),
            );
            return false;
        }
        taken.insert(c.clone(), s.name.clone());
        true
    });
    loop {
        let available: HashSet<String> = skills
            .iter()
            .flat_map(|s| s.tools.iter().map(|t| t.name.clone()))
            .collect();
        let names: HashSet<String> = skills.iter().map(|s| s.name.clone()).collect();
        let before = skills.len();
        skills.retain(|s| {
            let path = s.definition.display().to_string();
            if let Some((dep, _)) = s
                .dependencies
                .iter()
                .find(|(d, optional)| !optional && !names.contains(d))
            {
                diagnostics.push(
                    Diagnostic::error(
                        Code::MissingDependency,
                        &path,
                        format!("depends on skill '{dep}', which is not loaded"),
                    )
                    .for_skill(&s.name),
                );
                return false;
            }
            if s.invocation_mode == InvocationMode::ToolDispatch
                && let Some(t) = s.command_tool.as_ref().filter(|t| !available.contains(*t))
            {
                diagnostics.push(
                    Diagnostic::error(
                        Code::UnknownCommandTool,
                        &path,
                        format!("command_tool '{t}' is not a tool of any loaded skill"),
                    )
                    .for_skill(&s.name),
                );
                return false;
            }
            true
        });
        if skills.len() == before {
            warn_optional_dependencies(&skills, diagnostics);
            return skills;
        }
    }
}

/// A missing optional dependency is worth a warning, not an exclusion.
fn warn_optional_dependencies(skills: &[Arc<Skill>], diagnostics: &mut Vec<Diagnostic>) {
    let names: HashSet<&str> = skills.iter().map(|s| s.name.as_str()).collect();
    for s in skills {
        for (dep, _) in s
            .dependencies
            .iter()
            .filter(|(d, optional)| *optional && !names.contains(d.as_str()))
        {
            diagnostics.push(
                Diagnostic::warning(
                    Code::MissingDependency,
                    s.definition.display().to_string(),
                    format!("optional dependency '{dep}' is not loaded"),
                )
                .for_skill(&s.name),
            );
        }
    }
}

/// Holds the current snapshot and swaps in new ones. Readers clone the
/// `Arc` under a read lock held for a pointer copy; a reload builds the new
/// snapshot outside any lock, so readers never wait on disk.
pub struct CatalogHandle {
    current: RwLock<Arc<Catalog>>,
    options: CatalogOptions,
    /// Serialises reloads so two never interleave their swaps.
    reloading: Mutex<()>,
    /// Bumped by each reload that changed what clients see (tools,
    /// prompts, resources), so MCP sessions can say their lists changed.
    changes: tokio::sync::watch::Sender<u64>,
    /// The tool policy of callers that state none (`agent_tools`).
    agent_tools: AgentTools,
    /// Bumped by every reload, so the preparer of plain skills'
    /// dependencies sees what the new snapshot waits for.
    reloads: tokio::sync::watch::Sender<u64>,
}

impl CatalogHandle {
    pub fn new(options: CatalogOptions) -> Self {
        let catalog = Catalog::build(&options, None);
        Self {
            current: RwLock::new(Arc::new(catalog)),
            options,
            reloading: Mutex::new(()),
            changes: tokio::sync::watch::Sender::new(0),
            agent_tools: AgentTools::unstated(),
            reloads: tokio::sync::watch::Sender::new(0),
        }
    }

    /// With `policy` for the callers that state none (the `agent_tools`
    /// setting).
    pub fn with_agent_tools(mut self, policy: AgentTools) -> Self {
        self.agent_tools = policy;
        self
    }

    /// The policy of callers that state none.
    pub fn agent_tools(&self) -> &AgentTools {
        &self.agent_tools
    }

    pub fn current(&self) -> Arc<Catalog> {
        match self.current.read() {
            Ok(c) => c.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    pub fn options(&self) -> &CatalogOptions {
        &self.options
    }

    /// Sees each reload that changed the catalog's tools, prompts or
    /// references.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Sees every reload.
    pub fn reloads(&self) -> tokio::sync::watch::Receiver<u64> {
        self.reloads.subscribe()
    }

    /// Rescans every root and swaps the result in. Blocking: call it from a
    /// blocking thread.
    pub fn reload(&self) -> Arc<Catalog> {
        let _guard = self
            .reloading
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let previous = self.current();
        let next = Arc::new(Catalog::build(&self.options, Some(&previous)));
        match self.current.write() {
            Ok(mut c) => *c = next.clone(),
            Err(poisoned) => *poisoned.into_inner() = next.clone(),
        }
        if next.differs_for_clients(&previous) {
            self.changes.send_modify(|n| *n += 1);
        }
        self.reloads.send_modify(|n| *n += 1);
        tracing::info!(
            skills = next.skills.len(),
            tools = next.tools.len(),
            errors = next.error_count(),
            "catalog reloaded"
        );
        next
    }
}

/// Precedence: the first root to have a name claims it, loaded or not;
/// the same name in a later root is shadowed. Returns the skills that won
/// and loaded.
fn precedence(scans: &[RootScan], diagnostics: &mut Vec<Diagnostic>) -> Vec<Arc<Skill>> {
    let mut claimed: HashMap<&str, &Path> = HashMap::new();
    let mut accepted: Vec<Arc<Skill>> = Vec::new();
    for scan in scans {
        for loaded in scan.loaded.iter() {
            let dir = scan.path.join(&loaded.name);
            if let Some(winner) = claimed.get(loaded.name.as_str()) {
                diagnostics.push(
                    Diagnostic::warning(
                        Code::Shadowed,
                        dir.join("SKILL.md").display().to_string(),
                        format!(
                            "skill '{}' is shadowed by {} from a root of higher precedence",
                            loaded.name,
                            winner.join(&loaded.name).display()
                        ),
                    )
                    .for_skill(&loaded.name),
                );
                continue;
            }
            claimed.insert(&loaded.name, &scan.path);
            diagnostics.extend(loaded.diagnostics.iter().cloned());
            if let Some(skill) = &loaded.skill {
                accepted.push(skill.clone());
            }
        }
    }
    accepted
}

/// Tool names are global: a name two skills define is ambiguous, and each
/// of its skills gets a warning. Returns the ambiguous names.
fn warn_ambiguous(skills: &mut [Arc<Skill>], diagnostics: &mut Vec<Diagnostic>) -> HashSet<String> {
    let mut owners: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (si, s) in skills.iter().enumerate() {
        for t in &s.tools {
            owners.entry(t.name.clone()).or_default().push(si);
        }
    }
    owners.retain(|_, o| o.len() > 1);
    for (tool, owner_idx) in &owners {
        let names: Vec<String> = owner_idx.iter().map(|&i| skills[i].name.clone()).collect();
        for &i in owner_idx {
            let d = Diagnostic::warning(
                Code::AmbiguousToolName,
                skills[i].definition.display().to_string(),
                format!(
                    "tool '{tool}' is defined by skills {}; call it as /skills/{{skill}}/tools/{tool}/invoke",
                    names.join(", ")
                ),
            )
            .for_skill(&skills[i].name);
            // Copies only the skills that gain a warning.
            Arc::make_mut(&mut skills[i]).warnings.push(d.clone());
            diagnostics.push(d);
        }
    }
    owners.into_keys().collect()
}

/// Every tool, sorted by name then skill, with the name providers see: the
/// bare name, or `skill__tool` for an ambiguous one.
fn index_tools(skills: &[Arc<Skill>], ambiguous: &HashSet<String>) -> Vec<ToolEntry> {
    let mut tools = Vec::new();
    for (si, s) in skills.iter().enumerate() {
        for (ti, t) in s.tools.iter().enumerate() {
            let export_name = if ambiguous.contains(&t.name) {
                crate::export::fit_name(format!("{}__{}", s.name.replace('-', "_"), t.name))
            } else {
                t.name.clone()
            };
            tools.push(ToolEntry {
                skill: si,
                tool: ti,
                export_name,
            });
        }
    }
    tools.sort_by(|a, b| {
        let (ta, tb) = (
            &skills[a.skill].tools[a.tool].name,
            &skills[b.skill].tools[b.tool].name,
        );
        ta.cmp(tb).then(a.skill.cmp(&b.skill))
    });
    tools
}
