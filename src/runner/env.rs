//! The environment a tool runs with: cleared, then an allowlist from the
//! server's own environment, then the injected skill variables
//! (`docs/design.md` §3).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;

/// `PATH` for the child when the server has none: without it every bare
/// program name would fail to resolve.
pub const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Passed through from the server's environment (plus every `LC_*`).
const INHERITED: [&str; 5] = ["PATH", "HOME", "USER", "LANG", "TERM"];

/// Builds the complete environment of a child: nothing else is inherited.
///
/// From the server's environment only `PATH`, `HOME`, `USER`, `LANG`,
/// `LC_*`, `TERM` and the names in `extra_allowed` (exact names) pass, and
/// never a name that [`is_secret_name`] flags, even when configured in:
/// a skill must not be able to read the server's credentials. Then
/// `SKILL_NAME`, `SKILL_DIR`, `SKILL_MODE` and their `GIBBERISH_*` aliases
/// are set, overriding any inherited value. Variables whose name or value is
/// not UTF-8 are left out.
pub fn child_env(
    skill_name: &str,
    skill_dir: &Path,
    mode: &str,
    extra_allowed: &[String],
) -> Vec<(String, String)> {
    build(std::env::vars_os(), skill_name, skill_dir, mode, extra_allowed)
}

/// Adds an installed skill's dependencies (`deps`: a `venv` and a
/// `node_modules`) to the child's paths, so `require` finds its packages
/// and their commands are found. After the system's `PATH`, never before:
/// the approver saw `ls`, and a package's `ls` must not be what runs (a
/// script's `python3` becomes the virtualenv's by [`deps_command`]).
pub fn with_deps(env: &mut Vec<(String, String)>, deps: &Path) {
    let venv = deps.join("venv");
    let modules = deps.join("node_modules");
    let mut back = Vec::new();
    if venv.is_dir() {
        back.push(venv.join("bin").display().to_string());
        env.push(("VIRTUAL_ENV".to_owned(), venv.display().to_string()));
    }
    if modules.is_dir() {
        back.push(modules.join(".bin").display().to_string());
        env.push(("NODE_PATH".to_owned(), modules.display().to_string()));
    }
    if back.is_empty() {
        return;
    }
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| DEFAULT_PATH.to_owned());
    env.retain(|(k, _)| k != "PATH");
    back.insert(0, path);
    env.push(("PATH".to_owned(), back.join(":")));
}

/// The command with its Python interpreter swapped for the virtualenv's
/// in `deps`, when it has one: script runtimes are absolute paths fixed at
/// start-up, which `PATH` no longer changes.
pub fn deps_command(mut argv: Vec<String>, deps: Option<&Path>) -> Vec<String> {
    let venv_python = deps.map(|d| d.join("venv").join("bin").join("python3"));
    if let (Some(program), Some(python)) = (argv.first_mut(), venv_python.filter(|p| p.exists())) {
        let name = Path::new(program.as_str())
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name == "python" || name.starts_with("python3") {
            *program = python.display().to_string();
        }
    }
    argv
}

/// Whether a variable name looks like it holds a credential, or the
/// server's own settings: `*_TOKEN`, `*_TOKENS`, `*_KEY`, `*_SECRET`,
/// `*PASSWORD*`, `*_URL` (database URLs carry passwords), `SKILLD_*`,
/// `AWS_*`, `OPENAI_*`, `ANTHROPIC_*`, compared case-insensitively. Such a
/// name never reaches a child, even when `env_allow` lists it.
pub fn is_secret_name(name: &str) -> bool {
    let name = name.to_ascii_uppercase();
    name.ends_with("_TOKEN")
        || name.ends_with("_TOKENS")
        || name.ends_with("_URL")
        || name.starts_with("SKILLD_")
        || name.ends_with("_KEY")
        || name.ends_with("_SECRET")
        || name.contains("PASSWORD")
        || name.starts_with("AWS_")
        || name.starts_with("OPENAI_")
        || name.starts_with("ANTHROPIC_")
}

/// [`child_env`] over a given parent environment, so it can be tested
/// without touching the process's own.
fn build(
    parent: impl IntoIterator<Item = (OsString, OsString)>,
    skill_name: &str,
    skill_dir: &Path,
    mode: &str,
    extra_allowed: &[String],
) -> Vec<(String, String)> {
    let dir = skill_dir.to_string_lossy();
    let injected = [
        ("SKILL_NAME", skill_name),
        ("SKILL_DIR", dir.as_ref()),
        ("SKILL_MODE", mode),
        ("GIBBERISH_SKILL_NAME", skill_name),
        ("GIBBERISH_SKILL_DIR", dir.as_ref()),
        ("GIBBERISH_MODE", mode),
    ];

    // A map: sorted output, and the last duplicate wins as it would in a
    // real environment.
    let mut kept = BTreeMap::new();
    for (name, value) in parent {
        let (Ok(name), Ok(value)) = (name.into_string(), value.into_string()) else {
            continue;
        };
        let allowed =
            INHERITED.contains(&name.as_str()) || name.starts_with("LC_") || extra_allowed.contains(&name);
        if allowed && !is_secret_name(&name) && !injected.iter().any(|(n, _)| *n == name) {
            kept.insert(name, value);
        }
    }
    kept.entry("PATH".to_owned())
        .or_insert_with(|| DEFAULT_PATH.to_owned());

    let mut env: Vec<(String, String)> = kept.into_iter().collect();
    env.extend(injected.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())));
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parent(vars: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        vars.iter()
            .map(|(n, v)| (OsString::from(n), OsString::from(v)))
            .collect()
    }

    fn names(env: &[(String, String)]) -> Vec<&str> {
        env.iter().map(|(n, _)| n.as_str()).collect()
    }

    #[test]
    fn secret_names() {
        for name in [
            "GITHUB_TOKEN",
            "github_token",
            "MY_API_KEY",
            "CLIENT_SECRET",
            "DB_PASSWORD",
            "password_file",
            "MYPASSWORDS",
            "AWS_REGION",
            "aws_access_key_id",
            "OPENAI_ORG",
            "ANTHROPIC_BASE_URL",
            "SKILLD_TOKENS",
            "skilld_database_url",
            "SKILLD_CONFIG",
            "CI_TOKENS",
            "DATABASE_URL",
            "REDIS_URL",
        ] {
            assert!(is_secret_name(name), "{name} should be secret");
        }
        for name in [
            "PATH",
            "HOME",
            "LANG",
            "LC_ALL",
            "TOKENIZER",
            "KEYBOARD",
            "MY_TOKENS_DIR",
            "SKILL_DIR",
        ] {
            assert!(!is_secret_name(name), "{name} should not be secret");
        }
    }

    #[test]
    fn allowlist_then_injected() {
        let env = build(
            parent(&[
                ("PATH", "/bin"),
                ("HOME", "/home/u"),
                ("LC_ALL", "C.UTF-8"),
                ("EDITOR", "vi"),
                ("GITHUB_TOKEN", "ghp_x"),
                ("SKILLD_TOKENS", "agent:invoke:s3cret"),
                ("DATABASE_URL", "postgres://u:pw@db/x"),
                ("EXTRA", "1"),
                ("SKILL_NAME", "spoofed"),
            ]),
            "git",
            Path::new("/skills/git"),
            "dev",
            &[
                "EXTRA".to_owned(),
                "GITHUB_TOKEN".to_owned(),
                "SKILLD_TOKENS".to_owned(),
                "DATABASE_URL".to_owned(),
                "SKILL_NAME".to_owned(),
            ],
        );
        assert_eq!(
            env,
            [
                ("EXTRA", "1"),
                ("HOME", "/home/u"),
                ("LC_ALL", "C.UTF-8"),
                ("PATH", "/bin"),
                ("SKILL_NAME", "git"),
                ("SKILL_DIR", "/skills/git"),
                ("SKILL_MODE", "dev"),
                ("GIBBERISH_SKILL_NAME", "git"),
                ("GIBBERISH_SKILL_DIR", "/skills/git"),
                ("GIBBERISH_MODE", "dev"),
            ]
            .map(|(n, v)| (n.to_owned(), v.to_owned()))
        );
    }

    #[test]
    fn default_path_when_unset() {
        let env = build(parent(&[("HOME", "/root")]), "s", Path::new("/s"), "m", &[]);
        assert!(env.contains(&("PATH".to_owned(), DEFAULT_PATH.to_owned())));
        assert_eq!(&names(&env)[..2], ["HOME", "PATH"]);
    }
}
