//! What the SDK's `git` needs (seed 002's `git:read` and `git:write`):
//! which subcommands only read, and whether a program `exec` would run is
//! git, so that `exec("git", …)` needs the same permission as `git(…)`.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Subcommands that only read, whatever their arguments (but an
/// `--output` file, see [`permission`]).
const READS: [&str; 22] = [
    "status",
    "log",
    "diff",
    "show",
    "rev-parse",
    "ls-files",
    "blame",
    "cat-file",
    "describe",
    "shortlog",
    "rev-list",
    "ls-tree",
    "grep",
    "show-ref",
    "for-each-ref",
    "name-rev",
    "merge-base",
    "diff-tree",
    "diff-files",
    "diff-index",
    "count-objects",
    "version",
];

/// Options of `branch` and `tag` that only list.
const LISTING: [&str; 10] = [
    "--list",
    "-l",
    "-a",
    "--all",
    "-r",
    "--remotes",
    "-v",
    "-vv",
    "--verbose",
    "--show-current",
];

/// The permission running git with `args` (its subcommand first) needs.
pub(super) fn permission(args: &[String]) -> &'static str {
    let Some((sub, rest)) = args.split_first() else {
        return "git:read";
    };
    // `--output=FILE` writes a file, whatever the subcommand.
    if rest.iter().any(|a| a.starts_with("--output")) {
        return "git:write";
    }
    let only = |allowed: &[&str]| rest.iter().all(|a| allowed.contains(&a.as_str()));
    let reads = match sub.as_str() {
        s if READS.contains(&s) => true,
        "branch" | "tag" => only(&LISTING),
        "remote" => only(&["-v", "--verbose"]) || matches!(rest.first().map(String::as_str), Some("get-url")),
        "stash" => matches!(rest.first().map(String::as_str), Some("list" | "show")),
        "config" => matches!(
            rest.first().map(String::as_str),
            Some("--get" | "--get-all" | "--get-regexp" | "--list" | "-l" | "get" | "list")
        ),
        _ => false,
    };
    if reads { "git:read" } else { "git:write" }
}

/// Refuses a first argument that is not a subcommand: git's own options
/// (`-c`, `-C`, `--git-dir`, `--exec-path`, …) could run other programs
/// or reach another repository.
pub(super) fn check_subcommand(args: &[String]) -> anyhow::Result<()> {
    match args.first() {
        None => anyhow::bail!("git: name a subcommand (git(['status']))"),
        Some(sub) if sub.starts_with('-') || sub.is_empty() => anyhow::bail!(
            "git: '{sub}' is not a subcommand; git's own options are refused (use cwd= for the directory)"
        ),
        Some(_) => Ok(()),
    }
}

/// Options put before every subcommand: no repository's hooks or file
/// system monitor run, whatever its configuration says.
pub(super) fn forced_options() -> Vec<String> {
    [
        "-c",
        "core.hooksPath=/dev/null",
        "-c",
        "core.fsmonitor=false",
        // The sandbox's user may not own the workspace; git would refuse it.
        "-c",
        "safe.directory=*",
    ]
    .map(str::to_owned)
    .to_vec()
}

/// The subcommand a program runs when it is git: `Some(None)` for git
/// itself, `Some(Some("status"))` for `git-status`; `None` when it is not
/// git. A program is git when its real file (links followed) is named
/// `git` or `git-…`, or is the very file `git` is on `path`.
pub(super) fn as_git(program: &str, path: &str) -> Option<Option<String>> {
    let real = locate(program, path).and_then(|p| p.canonicalize().ok());
    let names = [Some(PathBuf::from(program)), real.clone()];
    for name in names
        .iter()
        .flatten()
        .filter_map(|p| p.file_name()?.to_str().map(str::to_owned))
    {
        if name == "git" {
            return Some(None);
        }
        if let Some(sub) = name.strip_prefix("git-") {
            return Some(Some(sub.to_owned()));
        }
    }
    let git = locate("git", path)?.metadata().ok()?;
    let meta = real?.metadata().ok()?;
    (meta.dev() == git.dev() && meta.ino() == git.ino()).then_some(None)
}

/// Where `program` is: itself when it has a slash, else the first
/// directory of `path` (a `PATH`) that has it.
fn locate(program: &str, path: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    path.split(':')
        .filter(|d| !d.is_empty())
        .map(|d| Path::new(d).join(program))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(args: &[&str]) -> &'static str {
        permission(&args.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>())
    }

    #[test]
    fn reading_subcommands_need_read_and_the_rest_write() {
        for args in [
            &["status"][..],
            &["log", "--oneline"],
            &["diff", "HEAD"],
            &["branch"],
            &["branch", "--list"],
            &["remote", "-v"],
            &["config", "--get", "user.name"],
            &["stash", "list"],
        ] {
            assert_eq!(of(args), "git:read", "{args:?}");
        }
        for args in [
            &["commit", "-m", "x"][..],
            &["branch", "new"],
            &["remote", "add", "o", "u"],
            &["config", "core.fsmonitor", "x"],
            &["log", "--output=/tmp/x"],
            &["push"],
            &["myalias"],
            &["stash"],
        ] {
            assert_eq!(of(args), "git:write", "{args:?}");
        }
    }

    #[test]
    fn git_is_known_by_its_name_its_link_target_and_its_file() {
        let path = std::env::var("PATH").unwrap_or_default();
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("innocent");
        let git = locate("git", &path).unwrap();
        std::os::unix::fs::symlink(&git, &link).unwrap();
        assert_eq!(as_git("git", &path), Some(None));
        assert_eq!(
            as_git("/usr/bin/git-upload-pack", &path),
            Some(Some("upload-pack".to_owned()))
        );
        assert_eq!(as_git(&link.display().to_string(), &path), Some(None));
        assert_eq!(as_git("ls", &path), None);
        assert!(check_subcommand(&["-c".to_owned(), "x=y".to_owned()]).is_err());
    }
}
