//! `skilld check` and `skilld package`: skills linted as a server would
//! load them, without running any of their code; a package written only
//! for a skill that lints.

use super::sign;
use crate::catalog::{Catalog, CatalogOptions, Root};
use crate::config;
use crate::skill::backend::{Launch, Linting};
use crate::skill::{Code, Diagnostic, Severity, Trust};
use crate::skill::{LoadOptions, PathCache, Runtimes, Skill, SkillRules, load_skill};
use clap::ValueEnum;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// `skilld check --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CheckFormat {
    Text,
    Json,
}

/// Lints each path: a skill directory on its own (or its `SKILL.md`), or
/// a directory of skills. The directories of skills load as the roots of
/// one catalog, in the order given, exactly as `skilld serve --skills`
/// loads them: earlier ones win a name (later ones are `shadowed`), and
/// cross-skill rules apply across them. A path that holds no skill at
/// all is an error, so a typo in CI cannot pass as "0 errors".
pub fn check(paths: &[PathBuf], format: CheckFormat, config: Option<&Path>) -> ExitCode {
    let (runtimes, rules) = match config::lint_settings(config) {
        Ok(settings) => settings,
        Err(e) => {
            eprintln!("skilld: {e}");
            return ExitCode::from(2);
        }
    };
    let linter = Linter::new(runtimes, rules);
    let mut diagnostics: Vec<Diagnostic> = Vec::new();
    let mut loaded = 0usize;
    let mut roots: Vec<Root> = Vec::new();
    for path in paths {
        match lint_target(path) {
            Err(d) => diagnostics.push(d),
            Ok(LintTarget::Skill(dir)) => {
                let (skill, found) = linter.lint(&dir, "check");
                loaded += usize::from(skill.is_some());
                diagnostics.extend(found);
            }
            Ok(LintTarget::Root(root)) => {
                if !roots.iter().any(|r| r.path == root.path) {
                    roots.push(root);
                }
            }
        }
    }
    if !roots.is_empty() {
        let (skills, found) = linter.lint_roots(roots);
        loaded += skills;
        diagnostics.extend(found);
    }
    report(&diagnostics, loaded, format)
}

/// Prints what `check` found; exit 1 on any error.
fn report(diagnostics: &[Diagnostic], loaded: usize, format: CheckFormat) -> ExitCode {
    let errors = diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .count();
    let warnings = diagnostics.len() - errors;
    let mut out = std::io::stdout().lock();
    let written = match format {
        CheckFormat::Text => {
            let mut r = Ok(());
            for d in diagnostics {
                r = r.and_then(|()| writeln!(out, "{d}"));
            }
            eprintln!("{loaded} skills loaded, {errors} errors, {warnings} warnings");
            r
        }
        CheckFormat::Json => {
            let body = serde_json::json!({
                "skills": loaded,
                "errors": errors,
                "warnings": warnings,
                "diagnostics": diagnostics,
            });
            writeln!(out, "{body}")
        }
    };
    if written.is_err() {
        return ExitCode::from(2);
    }
    if errors > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// `skilld package`: lints the skill at `dir` as `check` does, then writes
/// its archive (through a temporary file, so a failed write leaves none),
/// and with `sign` its signature beside it.
pub fn package(dir: &Path, output: Option<&Path>, sign: Option<&Path>) -> ExitCode {
    if !(dir.join("SKILL.md").is_file() || dir.join("SKILL.yaml").is_file()) {
        eprintln!("skilld: {} holds no SKILL.md or SKILL.yaml", dir.display());
        return ExitCode::from(1);
    }
    // The key is read first: a wrong password writes nothing.
    let key = match sign.map(sign::signing_key).transpose() {
        Ok(key) => key,
        Err(e) => {
            eprintln!("skilld: {e}");
            return ExitCode::from(2);
        }
    };
    // A package is checked as an upload is: its dependencies install with it.
    let linter = Linter::new(Runtimes::default(), SkillRules::default());
    let Some(skill) = linter.lint_printed(dir, "package") else {
        eprintln!("skilld: {} does not lint; nothing was written", dir.display());
        return ExitCode::from(1);
    };
    let version = skill.version.as_deref().unwrap_or("0.0.0");
    let default_name = PathBuf::from(format!("{}-{version}.zip", skill.name));
    let output = output.unwrap_or(&default_name);
    let written = write_package(dir, output).and_then(|()| match &key {
        Some(key) => sign::sign_archive(key, output).map(Some),
        None => Ok(None),
    });
    match written {
        Ok(signature) => {
            println!("{}", output.display());
            if let (Some(path), Some(key)) = (signature, &key) {
                eprintln!("signed by key {}: {}", key.id(), path.display());
            }
            eprintln!("skill {} {version}, hash {}", skill.name, skill.hash);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("skilld: cannot write {}: {e:#}", output.display());
            ExitCode::from(2)
        }
    }
}

fn write_package(dir: &Path, output: &Path) -> anyhow::Result<()> {
    let parent = match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let staged = tempfile::NamedTempFile::new_in(parent)?;
    let file = crate::install::archive::write_archive(dir, staged.reopen()?)?;
    file.sync_all()?;
    // A package is for others to read, not a private temporary file.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(staged.path(), std::fs::Permissions::from_mode(0o644))?;
    staged.persist(output)?;
    Ok(())
}

/// What `check`, `package` and `test` lint with. A linter runs no
/// skill's code: manifests are read as written, their backends never
/// started.
pub struct Linter {
    runtimes: Runtimes,
    rules: SkillRules,
    path: PathCache,
    launcher: Arc<dyn Launch>,
}

impl Linter {
    pub fn new(runtimes: Runtimes, rules: SkillRules) -> Self {
        Self {
            runtimes,
            rules,
            path: PathCache::new(std::env::var_os("PATH")),
            launcher: Arc::new(Linting),
        }
    }

    /// The skill at `dir`, loaded as a user skill of the root named
    /// `source`, if it loads, and what was found in it.
    pub fn lint(&self, dir: &Path, source: &str) -> (Option<Arc<Skill>>, Vec<Diagnostic>) {
        let options = LoadOptions {
            source,
            trust: Trust::User,
            max_timeout_secs: config::DEFAULT_MAX_TIMEOUT_SECS,
            runtimes: &self.runtimes,
            installed: false,
            path: &self.path,
            launcher: Some(self.launcher.as_ref()),
            rules: &self.rules,
        };
        let loaded = load_skill(dir, &options);
        let mut found = loaded.diagnostics;
        found.extend(loaded.skill.iter().flat_map(|s| argument_findings(s)));
        (loaded.skill, found)
    }

    /// [`Linter::lint`], its findings on stderr; the skill only when none
    /// of them is an error.
    pub fn lint_printed(&self, dir: &Path, source: &str) -> Option<Arc<Skill>> {
        let (skill, found) = self.lint(dir, source);
        for d in &found {
            eprintln!("{d}");
        }
        let failed = found.iter().any(|d| d.severity == Severity::Error);
        skill.filter(|_| !failed)
    }

    /// The skills loaded from directories of skills as one catalog, as a
    /// server loads its roots, and what was found; a root that holds no
    /// skill at all is an error of its own.
    fn lint_roots(&self, roots: Vec<Root>) -> (usize, Vec<Diagnostic>) {
        let catalog = Catalog::build(
            &CatalogOptions {
                roots: roots.clone(),
                max_timeout_secs: config::DEFAULT_MAX_TIMEOUT_SECS,
                runtimes: self.runtimes.clone(),
                launcher: Some(self.launcher.clone()),
                rules: self.rules.clone(),
            },
            None,
        );
        let mut found = catalog.diagnostics.clone();
        found.extend(catalog.skills.iter().flat_map(|s| argument_findings(s)));
        for root in &roots {
            let has_skills = catalog.skills.iter().any(|s| s.source == root.name);
            // Skills of its own that failed, or lost their name to an
            // earlier root's, were there all the same.
            let had = found.iter().any(|d| {
                (d.is_error() || d.code == Code::Shadowed) && Path::new(&d.path).starts_with(&root.path)
            });
            if !has_skills && !had {
                found.push(Diagnostic::error(
                    Code::NotASkill,
                    &root.name,
                    "no skills here: a skill is a directory holding a SKILL.md",
                ));
            }
        }
        (catalog.skills.len(), found)
    }
}

/// What one path given to `check` is.
enum LintTarget {
    /// A skill's directory, linted alone.
    Skill(PathBuf),
    /// A directory of skills, a root of the catalog.
    Root(Root),
}

/// What `path` is for `check`, or why it is none.
fn lint_target(path: &Path) -> Result<LintTarget, Diagnostic> {
    let shown = path.display().to_string();
    let is_definition = path
        .file_name()
        .is_some_and(|n| n == "SKILL.md" || n == "SKILL.yaml");
    if is_definition && path.is_file() {
        let dir = path.parent().unwrap_or(Path::new("."));
        return lint_target(if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        });
    }
    if !path.exists() {
        return Err(Diagnostic::error(
            Code::RootMissing,
            &shown,
            "no such file or directory",
        ));
    }
    if !path.is_dir() {
        return Err(Diagnostic::error(
            Code::NotASkill,
            &shown,
            "a file, not a skill: give the skill's directory (the one holding SKILL.md) or a directory of skills",
        ));
    }
    if path.join("SKILL.md").is_file() || path.join("SKILL.yaml").is_file() {
        return Ok(LintTarget::Skill(path.to_path_buf()));
    }
    Ok(LintTarget::Root(Root {
        name: shown,
        path: path.to_path_buf(),
        trust: Trust::User,
        explicit: true,
        installed: false,
    }))
}

/// A finding for each call example whose arguments its tool would
/// refuse, checked as the invoke pipeline checks a call's (`check`,
/// `package` and `test` lint with it; the loader, a layer below the
/// pipeline, cannot).
fn argument_findings(skill: &Skill) -> Vec<Diagnostic> {
    let path = skill.definition.display().to_string();
    let calls = skill.examples.calls.iter().enumerate();
    calls
        .filter_map(|(i, call)| {
            let tool = skill.tools.iter().find(|t| t.name == call.tool)?;
            let errors = crate::invoke::args::validate(tool, &call.arguments).err()?;
            let why: Vec<String> = errors
                .iter()
                .map(|e| match e.field.as_str() {
                    "" => e.message.clone(),
                    field => format!("{field}: {}", e.message),
                })
                .collect();
            let msg = format!(
                "examples.calls[{i}]: arguments that tool '{}' refuses: {}",
                call.tool,
                why.join("; ")
            );
            let d = Diagnostic::error(Code::InvalidExampleArguments, &path, msg);
            Some(d.at(call.pos).for_skill(&skill.name))
        })
        .collect()
}
