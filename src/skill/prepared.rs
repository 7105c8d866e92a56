//! The dependencies of skills outside the installed root (a
//! `requirements.txt` or `package.json` in a plain skills directory),
//! prepared once by the server as an upload's are, and kept by the hash
//! of the files that ask for them: `<deps dir>/<key>/env` holds the
//! virtualenv and `node_modules`, `ready` says they are complete,
//! `failed` why they are not, `install.log` what the installers said.
//! Editing a dependency file makes a new key, so a new preparation.

use super::definition::LoadOptions;
use super::diag::Code;
use super::model::{DepsWait, Dialect};
use super::parse::Parse;
use crate::deps::{PACKAGE, PACKAGE_LOCK, REQUIREMENTS, check_dir};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// The marker written once a preparation is complete.
pub const READY: &str = "ready";
/// The reason a preparation failed.
pub const FAILED: &str = "failed";
/// The installers' output.
pub const LOG: &str = "install.log";
/// The virtualenv and `node_modules`, as [`crate::runner::with_deps`] takes them.
pub const ENV: &str = "env";
/// An installed version's dependencies, beside its skill directory. The
/// layout is `catalog::installed`'s; the name lives here because
/// the loader reads it and the catalog sits above the loader.
pub const ENV_DIR: &str = "env";

/// The largest dependency file that is hashed; a larger one is not
/// prepared (the installers' own checks read the same files).
const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// Where a preparation stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// Its `env` directory, complete.
    Ready(PathBuf),
    /// Not yet prepared (or being prepared).
    Pending,
    /// Tried and failed, with why.
    Failed(String),
}

/// The key of the dependencies `dir` asks for: the SHA-256 of its
/// dependency files (names and contents) and the registry they come
/// from; `None` when it has no dependency file.
pub fn key(dir: &Path, npm_registry: &str) -> std::io::Result<Option<String>> {
    let mut hasher = Sha256::new();
    let mut any = false;
    for file in [REQUIREMENTS, PACKAGE, PACKAGE_LOCK] {
        let path = dir.join(file);
        if !path.is_file() {
            continue;
        }
        let bytes = super::files::read_limited(&path, MAX_FILE_BYTES)?
            .ok_or_else(|| std::io::Error::other(format!("{file} is larger than {MAX_FILE_BYTES} bytes")))?;
        any = true;
        hasher.update(file.as_bytes());
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(&bytes);
    }
    if !any {
        return Ok(None);
    }
    hasher.update(npm_registry.as_bytes());
    Ok(Some(hex::encode(hasher.finalize())))
}

/// The directory of one preparation.
pub fn dir_of(deps_dir: &Path, key: &str) -> PathBuf {
    deps_dir.join(key)
}

/// Where the preparation `key` stands.
pub fn state(deps_dir: &Path, key: &str) -> State {
    let dir = dir_of(deps_dir, key);
    if dir.join(READY).is_file() {
        return State::Ready(dir.join(ENV));
    }
    match std::fs::read_to_string(dir.join(FAILED)) {
        Ok(why) => State::Failed(why.trim().to_owned()),
        Err(_) => State::Pending,
    }
}

/// The dependencies installed for the version whose skill directory is
/// `skill_dir`, when it has some.
pub fn deps_of(skill_dir: &Path) -> Option<PathBuf> {
    let env = skill_dir.parent()?.join(ENV_DIR);
    env.is_dir().then_some(env)
}

impl Parse<'_, '_> {
    /// The dependencies the tools of the skill in `dir` run with: an
    /// installed version's, beside it; a plain skill's, once the server
    /// has prepared them. Until then the skill loads with a
    /// `dependencies_not_ready` warning and says why its calls wait; a
    /// dependency file that asks for what is never installed (a path, a
    /// URL, an option: the rules of an upload) is an error.
    pub(super) fn prepared_dependencies(
        &mut self,
        dir: &Path,
        dialect: Dialect,
        opts: &LoadOptions<'_>,
    ) -> (Option<PathBuf>, Option<DepsWait>) {
        if opts.installed {
            return (deps_of(dir), None);
        }
        let Some(deps_dir) = opts
            .rules
            .deps_dir
            .as_deref()
            .filter(|_| dialect != Dialect::Prompt)
        else {
            return (None, None);
        };
        let registry = &opts.rules.npm_registry;
        let file = [REQUIREMENTS, PACKAGE, PACKAGE_LOCK]
            .into_iter()
            .find(|f| dir.join(f).is_file())
            .unwrap_or(REQUIREMENTS);
        let shown = dir.join(file).display().to_string();
        let unreadable = |e: std::io::Error| DepsWait {
            key: None,
            why: format!("its dependency files cannot be read: {e}"),
        };
        let key = match key(dir, registry) {
            Ok(None) => return (None, None),
            Ok(Some(key)) => key,
            Err(e) => {
                let wait = unreadable(e);
                self.warn_in(Code::DependenciesNotReady, &shown, wait.why.clone());
                return (None, Some(wait));
            }
        };
        match check_dir(dir, registry) {
            Ok(refused) if refused.is_empty() => {}
            Ok(refused) => {
                let each: Vec<String> = refused.iter().map(ToString::to_string).collect();
                let why = format!(
                    "its dependencies are never installed: {}; a dependency file may name packages of the \
                     index or the registry by name and version only, as an upload's",
                    each.join("; ")
                );
                self.error_in(Code::DependenciesNotReady, &shown, why.clone());
                return (None, Some(DepsWait { key: None, why }));
            }
            Err(e) => {
                let wait = unreadable(e);
                self.warn_in(Code::DependenciesNotReady, &shown, wait.why.clone());
                return (None, Some(wait));
            }
        }
        let place = dir_of(deps_dir, &key);
        let why = match state(deps_dir, &key) {
            State::Ready(env) => return (Some(env), None),
            State::Pending => format!(
                "its dependencies are not prepared yet: the server installs them into {} (as an upload's, in \
                 the sandbox); its tools answer 409 dependencies_not_ready until then",
                place.display()
            ),
            State::Failed(why) => format!(
                "its dependencies could not be prepared ({why}); {} has the installers' output; they are tried \
                 again when the server restarts or the files change",
                place.join(LOG).display()
            ),
        };
        self.warn_in(Code::DependenciesNotReady, &shown, why.clone());
        (None, Some(DepsWait { key: Some(key), why }))
    }
}
