//! What the SDK's `git` needs (seed 002's `git:read` and `git:write`):
//! which calls only read, and whether a program `exec` would run is git,
//! so that `exec("git", …)` needs the same permission as `git(…)`. And
//! what makes a reading call read-only in fact: no pager, no external
//! diff, textconv or filter driver, no hook, no configuration but the
//! repository's own, with every program that names neutralised.

mod options;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Subcommands that read, with the options [`options::of`] lists.
const READS: [&str; 27] = [
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
    "branch",
    "tag",
    "remote",
    "stash",
    "config",
];

/// What running git with `args` (its subcommand first) needs, and when
/// it needs `git:write` for a subcommand that can read, why.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Need {
    Read,
    Write(Option<String>),
}

impl Need {
    pub(super) fn permission(&self) -> &'static str {
        match self {
            Need::Read => "git:read",
            Need::Write(_) => "git:write",
        }
    }
}

/// The permission running git with `args` (its subcommand first) needs.
pub(super) fn permission(args: &[String]) -> &'static str {
    need(args).permission()
}

/// What running git with `args` needs: `git:read` for a reading
/// subcommand in a reading form with only the options it lists.
pub(super) fn need(args: &[String]) -> Need {
    let Some((sub, rest)) = args.split_first() else {
        return Need::Read;
    };
    if !READS.contains(&sub.as_str()) {
        return Need::Write(None);
    }
    if !options::reading_form(sub, rest) {
        return Need::Write(Some(format!("'git {sub}' in this form writes")));
    }
    if let Some(gpg) = rest.iter().find(|a| options::runs_gpg(a)) {
        let why = format!("'{gpg}' runs the configured gpg to check signatures");
        return Need::Write(Some(why));
    }
    let listed = options::of(sub).unwrap_or_default();
    match options::unlisted(&listed, rest) {
        None => Need::Read,
        Some(option) => Need::Write(Some(format!(
            "'{option}' is not among the options 'git {sub}' reads with (docs/skills.md lists them)"
        ))),
    }
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

/// Options put before every subcommand: no pager, no hook, no file
/// system monitor, no attributes file or external diff, whatever the
/// repository's configuration says (`-c` outranks it).
pub(super) fn forced_options() -> Vec<String> {
    let mut argv = vec!["--no-pager".to_owned()];
    for setting in [
        "core.hooksPath=/dev/null",
        "core.fsmonitor=false",
        "core.attributesFile=/dev/null",
        "core.pager=cat",
        "diff.external=",
        "log.showSignature=false",
        // The sandbox's user may not own the workspace; git would refuse it.
        "safe.directory=*",
    ] {
        argv.extend(["-c".to_owned(), setting.to_owned()]);
    }
    argv
}

/// The environment every git the SDK runs gets besides the skill's: no
/// system or global configuration (the global one is where a planted
/// `XDG_CONFIG_HOME/git/config` would come from), no system attributes,
/// no fetch of a partial clone's missing objects, no prompt, and no
/// optional lock (so `status` leaves the index as it found it).
pub(super) fn forced_env() -> Vec<(String, String)> {
    [
        ("GIT_CONFIG_NOSYSTEM", "1"),
        ("GIT_CONFIG_GLOBAL", "/dev/null"),
        ("GIT_ATTR_NOSYSTEM", "1"),
        ("GIT_NO_LAZY_FETCH", "1"),
        ("GIT_TERMINAL_PROMPT", "0"),
        ("GIT_OPTIONAL_LOCKS", "0"),
    ]
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .to_vec()
}

/// `args` with what keeps drivers from running put after the subcommand:
/// `--no-ext-diff` and `--no-textconv` where it diffs, `--no-textconv`
/// where it reads blobs.
pub(super) fn with_driver_options(mut args: Vec<String>) -> Vec<String> {
    let (at, added): (usize, &[&str]) = match args.first().map(String::as_str) {
        Some("log" | "show" | "diff" | "diff-tree" | "diff-files" | "diff-index") => {
            (1, &["--no-ext-diff", "--no-textconv"])
        }
        Some("stash") if args.len() > 1 => (2, &["--no-ext-diff", "--no-textconv"]),
        Some("blame" | "grep") => (1, &["--no-textconv"]),
        _ => (1, &[]),
    };
    for (i, option) in added.iter().enumerate() {
        args.insert(at + i, (*option).to_owned());
    }
    args
}

/// What the repository's own configuration sets that names a program
/// (a filter's `clean`, a diff driver's `textconv`, a gpg program, …),
/// each emptied with `-c`: `keys` is `git config --list --name-only -z`.
pub(super) fn neutralised(keys: &str) -> Vec<String> {
    const PROGRAMS: [&str; 17] = [
        "clean",
        "smudge",
        "process",
        "textconv",
        "command",
        "external",
        "editor",
        "askpass",
        "sshcommand",
        "gitproxy",
        "alternaterefscommand",
        "program",
        "helper",
        "driver",
        "cmd",
        "defaultkeycommand",
        "difffilter",
    ];
    let mut argv = Vec::new();
    for key in keys.split('\0').map(str::trim).filter(|k| !k.is_empty()) {
        let last = key.rsplit('.').next().unwrap_or_default().to_ascii_lowercase();
        if PROGRAMS.contains(&last.as_str()) {
            argv.extend(["-c".to_owned(), format!("{key}=")]);
        }
    }
    argv
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
            &["grep", "-Ocat", "x"],
            &["grep", "--open-files-in-pager", "x"],
            &["show", "--ext-diff"],
            &["log", "--format=%G?"],
            &["remote", "-v", "show", "origin"],
            &["cat-file", "--filters", "HEAD:a"],
            &["push"],
            &["myalias"],
            &["stash"],
        ] {
            assert_eq!(of(args), "git:write", "{args:?}");
        }
    }

    #[test]
    fn programs_the_repository_configures_are_emptied_and_drivers_kept_off() {
        let keys = "core.bare\0filter.evil.clean\0diff.My Driver.textconv\0gpg.program\0user.name\0";
        assert_eq!(
            neutralised(keys),
            [
                "-c",
                "filter.evil.clean=",
                "-c",
                "diff.My Driver.textconv=",
                "-c",
                "gpg.program="
            ]
        );
        let args = |l: &[&str]| l.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            with_driver_options(args(&["show", "HEAD"])),
            args(&["show", "--no-ext-diff", "--no-textconv", "HEAD"])
        );
        assert_eq!(
            with_driver_options(args(&["stash", "show", "-p"])),
            args(&["stash", "show", "--no-ext-diff", "--no-textconv", "-p"])
        );
        assert_eq!(with_driver_options(args(&["status"])), args(&["status"]));
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
