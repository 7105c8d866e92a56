//! The roots skills are loaded from (`docs/design.md` §2): those named by
//! `--skills` or the config's `skills`, else the default sources in their
//! order of precedence, and always the installed root.

use crate::setting::SettingError;
use crate::skill::Trust;
use std::path::{Path, PathBuf};

/// A directory of skills with a trust level. Earlier roots win collisions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    /// `bundled`, `user`, `project`, `installed`, or the directory as given.
    pub name: String,
    pub path: PathBuf,
    pub trust: Trust,
    /// Named explicitly (`--skills`): a missing directory is worth a warning.
    pub explicit: bool,
    /// Laid out as [`installed`] says: versions side by
    /// side, the active one served.
    pub installed: bool,
}

impl Root {
    /// Parses `[TRUST=]DIR` as `--skills` takes it; trust defaults to `user`.
    pub fn parse_flag(spec: &str) -> Result<Self, SettingError> {
        let (trust, dir) = match spec.split_once('=') {
            Some((t, d)) if Trust::parse(t).is_some() => (Trust::parse(t), d),
            _ => (None, spec),
        };
        if dir.is_empty() {
            return Err(SettingError::new(
                "skills",
                format!("--skills '{spec}' names no directory"),
            ));
        }
        // Absolute, so that the script paths of its skills still name them
        // from the workspace their interpreters run in.
        Ok(Self {
            name: dir.to_owned(),
            path: std::path::absolute(dir).unwrap_or_else(|_| PathBuf::from(dir)),
            trust: trust.unwrap_or(Trust::User),
            explicit: true,
            installed: false,
        })
    }
}

/// The roots: those `given` as `--skills` takes them (`[TRUST=]DIR`),
/// else the default ones. What `POST /skills` installed serves whichever
/// roots were named: it is the server's own, kept in its data directory.
pub fn configured_roots(
    given: &[String],
    workspace: &Path,
    data_dir: &Path,
) -> Result<Vec<Root>, SettingError> {
    if given.is_empty() {
        return Ok(default_roots(workspace, data_dir));
    }
    let mut roots = given
        .iter()
        .map(|s| Root::parse_flag(s))
        .collect::<Result<Vec<_>, _>>()?;
    let installed = installed_root(data_dir);
    if !roots.iter().any(|r| r.path == installed.path) {
        roots.push(installed);
    }
    Ok(roots)
}

/// The `skills/` directory that ships with skilld: beside the binary's
/// install prefix (`<prefix>/share/skilld/skills`), else the source tree it
/// was built from, else `./skills`.
pub fn bundled_dir() -> PathBuf {
    if let Some(prefix) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().and_then(Path::parent).map(Path::to_path_buf))
    {
        let installed = prefix.join("share/skilld/skills");
        if installed.is_dir() {
            return installed;
        }
    }
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("skills");
    if source.is_dir() {
        return source;
    }
    PathBuf::from("skills")
}

/// The user's own skills: `$XDG_CONFIG_HOME/skilld/skills`, else
/// `~/.config/skilld/skills`.
pub fn user_skills_dir() -> Option<PathBuf> {
    let set = |name| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    match set("XDG_CONFIG_HOME") {
        Some(config) => Some(config.join("skilld/skills")),
        None => set("HOME").map(|h| h.join(".config/skilld/skills")),
    }
}

/// The default sources, in precedence order: bundled, the user's, the
/// project's (`.agent/skills` of the workspace), installed.
pub fn default_roots(workspace: &Path, data_dir: &Path) -> Vec<Root> {
    let mut roots = vec![Root {
        name: "bundled".to_owned(),
        path: bundled_dir(),
        trust: Trust::Bundled,
        explicit: false,
        installed: false,
    }];
    if let Some(path) = user_skills_dir() {
        roots.push(Root {
            name: "user".to_owned(),
            path,
            trust: Trust::User,
            explicit: false,
            installed: false,
        });
    }
    roots.push(Root {
        name: "project".to_owned(),
        path: workspace.join(".agent/skills"),
        trust: Trust::User,
        explicit: false,
        installed: false,
    });
    roots.push(installed_root(data_dir));
    roots
}

/// Where `POST /skills` installs: `<data dir>/installed`, untrusted.
pub fn installed_root(data_dir: &Path) -> Root {
    Root {
        name: "installed".to_owned(),
        path: data_dir.join("installed"),
        trust: Trust::Untrusted,
        explicit: false,
        installed: true,
    }
}
