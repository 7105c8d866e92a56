//! What a skill's dependency files may ask for: packages of the index or
//! the registry, by name and version, and nothing else. A path, a URL, a
//! version-control source or an installer option would make the installer
//! build local code, read other files or fetch from other hosts; each is
//! refused with the file, the line and why, before any installer runs.
//! The same check feeds the admin's review scanner (`install::review`)
//! and the loader; it imports nothing of skilld's, so any layer may use it.

mod npm;
mod pip;

use std::path::Path;

/// The registry npm installs from unless the config names another.
pub const DEFAULT_NPM_REGISTRY: &str = "https://registry.npmjs.org/";

/// The dependency files that are checked, as the installers read them.
pub const REQUIREMENTS: &str = "requirements.txt";
pub const PACKAGE: &str = "package.json";
pub const PACKAGE_LOCK: &str = "package-lock.json";

/// The most of an offending line a refusal quotes.
const EXCERPT_CHARS: usize = 160;

/// One thing a dependency file asks for that is not installed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// [`REQUIREMENTS`], [`PACKAGE`] or [`PACKAGE_LOCK`].
    pub file: &'static str,
    /// 1-based.
    pub line: u32,
    /// The line, trimmed, at most 160 characters.
    pub excerpt: String,
    pub why: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} line {}: {}", self.file, self.line, self.why)
    }
}

impl Refusal {
    fn new(file: &'static str, text: &str, line: u32, why: String) -> Self {
        let excerpt = text
            .lines()
            .nth(line.saturating_sub(1) as usize)
            .unwrap_or_default()
            .trim()
            .chars()
            .take(EXCERPT_CHARS)
            .collect();
        Self {
            file,
            line,
            excerpt,
            why,
        }
    }
}

/// One file's check: its text in, its refusals out.
type Check<'a> = dyn Fn(&str) -> Vec<Refusal> + 'a;

/// Checks the dependency files `dir` has; an empty list when they ask
/// only for packages by name and version. `npm_registry` is where every
/// package of a `package-lock.json` must come from.
pub fn check_dir(dir: &Path, npm_registry: &str) -> std::io::Result<Vec<Refusal>> {
    let checks: [(&'static str, &Check); 3] = [
        (REQUIREMENTS, &check_requirements),
        (PACKAGE, &check_package),
        (PACKAGE_LOCK, &|text| check_lock(text, npm_registry)),
    ];
    let mut refused = Vec::new();
    for (file, check) in checks {
        match read(dir, file)? {
            None => {}
            Some(Ok(text)) => refused.extend(check(&text)),
            Some(Err(why)) => refused.push(Refusal {
                file,
                line: 1,
                excerpt: String::new(),
                why: why.to_owned(),
            }),
        }
    }
    Ok(refused)
}

/// The refusals of a `requirements.txt`'s text.
pub fn check_requirements(text: &str) -> Vec<Refusal> {
    pip::check(text)
}

/// The refusals of a `package.json`'s text.
pub fn check_package(text: &str) -> Vec<Refusal> {
    npm::check_package(text)
}

/// The refusals of a `package-lock.json`'s text, against `npm_registry`.
pub fn check_lock(text: &str, npm_registry: &str) -> Vec<Refusal> {
    npm::check_lock(text, npm_registry)
}

/// The file's text; `None` when the skill has none, an error when it is
/// not a regular file of UTF-8 text.
fn read(dir: &Path, name: &str) -> std::io::Result<Option<Result<String, &'static str>>> {
    let path = dir.join(name);
    match std::fs::symlink_metadata(&path) {
        Ok(meta) if meta.is_file() => {}
        Ok(_) => return Ok(Some(Err("it is not a regular file"))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    }
    let bytes = std::fs::read(&path)?;
    Ok(Some(String::from_utf8(bytes).map_err(|_| "it is not UTF-8 text")))
}

/// The 1-based line of the first occurrence of `needle` in `text`, else 1.
fn line_of(text: &str, needle: &str) -> u32 {
    text.find(needle)
        .map(|at| text[..at].matches('\n').count() + 1)
        .and_then(|n| u32::try_from(n).ok())
        .unwrap_or(1)
}
