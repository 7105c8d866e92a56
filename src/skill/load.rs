//! Reading one skill directory into the unified model, whatever its dialect,
//! with a diagnostic for everything wrong with it. This module holds the
//! steps of a load in order; each dialect's tools, the frontmatter fields
//! and the file helpers live in modules of their own.

use super::definition::{LoadOptions, decode, read_definition, with_base_dir};
use super::diag::{Code, Diagnostic, Pos};
use super::dialect;
use super::dialect::tool_blocks;
use super::fields::Origin;
use super::files;
use super::frontmatter::{self, Split, Unclosed};
use super::hash;
use super::listing;
use super::model::*;
use super::parse::Parse;
use serde_json::{Map, Value};
use std::path::Path;

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

/// The skill as read, errors and all; `None` when the definition cannot be
/// read far enough to say what the skill is.
fn load_inner(dir: &Path, name: &str, opts: &LoadOptions<'_>, diags: &mut Vec<Diagnostic>) -> Option<Skill> {
    let manifest = dir.join("SKILL.yaml");
    if manifest.is_file() {
        return dialect::manifest::load(dir, name, &manifest, opts, diags);
    }
    let def_path = dir.join("SKILL.md");
    let path = def_path.display().to_string();
    let bytes = read_definition(&def_path, &path, diags)?;
    let text = decode(&bytes, &path, diags)?;
    let mut p = Parse::new(path, text, diags);
    p.dir_name(name);
    let (fm, split) = p.frontmatter(text)?;
    p.unknown_keys(&fm);
    let blocks = tool_blocks::tool_blocks(split.body);
    let detected = dialect::detect(dir, &blocks, &fm, opts.runtimes);
    let dialect = detected.dialect;
    let mut fields = p.fields(&fm, name, dialect, opts.max_timeout_secs, opts.path);
    if dialect == Dialect::Entrypoint {
        p.entrypoint_rules(
            &fm,
            &mut fields,
            detected.entrypoint.as_deref(),
            opts.rules,
            opts.max_timeout_secs,
        );
    }
    // Files inside the skill that a command runs, hashed with the scripts.
    let mut hashed = Vec::new();
    let tools = match dialect {
        Dialect::Markdown => p.markdown_tools(&blocks, split.body_offset, dir, opts.path, &mut hashed),
        Dialect::Entrypoint => p.entrypoint_tool(
            name,
            detected.entrypoint.as_deref(),
            fields.lang.as_deref(),
            &fields.description,
            opts.runtimes,
        ),
        Dialect::Scripts => p.script_tools(
            name,
            &detected.scripts,
            fields.script_tools.as_deref(),
            opts.runtimes,
        ),
        Dialect::Prompt | Dialect::Manifest => Vec::new(),
    };
    p.runnable_files(dir, &mut hashed);
    let files = files::list_files(dir);
    let served = listing::served_paths(&files);
    // What it serves is what an agent reads: an approval binds to that too.
    hashed.extend(served.iter().cloned());
    let (hash, fingerprint, digests) = hash::content_hash(dir, &def_path, &bytes, &hashed);
    let body = split.body.trim_start_matches(['\r', '\n']);
    let source = listing::Source {
        name,
        description: &fields.description,
        dialect,
        frontmatter: &fm,
        definition: &bytes,
        body,
    };
    let listing = listing::listing(&source, &served, &digests);
    let (deps, deps_wait) = p.prepared_dependencies(dir, dialect, opts);
    let mut skill = fields.into_skill(Origin {
        name,
        dialect,
        dir,
        definition: def_path,
        source: opts.source,
        trust: opts.trust,
        network_unrestricted: opts.rules.network_unrestricted(name, opts.trust),
        deps,
    });
    skill.deps_wait = deps_wait;
    skill.instructions = with_base_dir(body, dir);
    skill.listing = listing;
    skill.files = files;
    skill.hash = hash;
    skill.fingerprint = std::sync::Arc::new(fingerprint);
    skill.tools = tools;
    let known: Vec<&str> = skill.tools.iter().map(|t| t.name.as_str()).collect();
    p.check_example_tools(&skill.examples, &known, false);
    Some(skill)
}

impl<'t> Parse<'t, '_> {
    /// Adds to `hashed` what a skill runs beyond what its tools name: its
    /// runnable files (reporting those that lead outside it) and its
    /// dependency files.
    fn runnable_files(&mut self, dir: &Path, hashed: &mut Vec<String>) {
        let runnable = files::runnable_files(dir);
        for outside in &runnable.outside {
            self.error_in(
                Code::ProgramOutsideSkill,
                &dir.join(outside).display().to_string(),
                format!("{outside} resolves outside the skill directory; a skill may run only its own files"),
            );
        }
        if runnable.incomplete {
            self.error_in(
                Code::TooLarge,
                &dir.join("scripts").display().to_string(),
                files::too_deep("scripts/"),
            );
        }
        hashed.extend(runnable.inside);
        // What its dependencies are is part of what it runs: an approval given
        // for one `requirements.txt` is not for another.
        hashed.extend(
            [
                crate::deps::REQUIREMENTS,
                crate::deps::PACKAGE,
                crate::deps::PACKAGE_LOCK,
            ]
            .into_iter()
            .filter(|f| dir.join(f).is_file())
            .map(str::to_owned),
        );
    }

    /// The frontmatter as a mapping (empty without one) and the split file;
    /// `None` when it is unclosed or not a YAML mapping.
    fn frontmatter(&mut self, text: &'t str) -> Option<(Map<String, Value>, Split<'t>)> {
        let split = match frontmatter::split(text) {
            Ok(s) => s,
            Err(Unclosed) => {
                self.error(
                    Code::InvalidFrontmatter,
                    Some(Pos { line: 1, column: 1 }),
                    "frontmatter opened with '---' is never closed; add a '---' line after it",
                );
                return None;
            }
        };
        let Some(yaml) = split.yaml else {
            return Some((Map::new(), split));
        };
        self.yaml = yaml;
        self.yaml_offset = split.yaml_offset;
        match frontmatter::parse_yaml(yaml) {
            Ok(Value::Object(map)) => Some((map, split)),
            Ok(_) => {
                let pos = self.index.pos(split.yaml_offset);
                self.error(
                    Code::InvalidFrontmatter,
                    Some(pos),
                    "frontmatter must be a YAML mapping of keys to values",
                );
                None
            }
            Err(e) => {
                let base = self.index.pos(split.yaml_offset);
                let pos = e.location.map(|(l, c)| Pos {
                    line: base.line + l.saturating_sub(1),
                    column: c,
                });
                let message = shift_lines(&e.message, base.line - 1);
                self.error(
                    Code::InvalidYaml,
                    pos.or(Some(base)),
                    format!("invalid YAML in frontmatter: {message}"),
                );
                None
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
