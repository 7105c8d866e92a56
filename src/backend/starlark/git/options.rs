//! The options each reading subcommand may take under `git:read`. An
//! allowlist, not a list of the dangerous ones: `grep -O<cmd>` runs a
//! program, `--ext-diff` and `--textconv` run drivers, `--output` writes,
//! `--show-signature` and `%G` run gpg, and git adds options every
//! release. An option outside its subcommand's list makes the call need
//! `git:write`.
//!
//! How an argument is read: one that does not start with `-` is a
//! revision or a path; after `--` every argument is a path. A long option
//! is listed as `--name` (a flag) or `--name=` (it takes a value, attached
//! with `=` or as the next argument, which is then read like any other
//! argument). A short option is listed as `-x` (a flag, alone: a cluster
//! such as `-iO` is not taken apart) or `-x*` (it takes a value, which may
//! be attached: git reads the rest of the cluster as that value).

/// What `git log` and its kin take to choose and show commits.
const REVISIONS: &[&str] = &[
    "-n*",
    "--max-count=",
    "--skip=",
    "--since=",
    "--after=",
    "--until=",
    "--before=",
    "--author=",
    "--committer=",
    "--grep=",
    "--all-match",
    "--invert-grep",
    "-i",
    "--regexp-ignore-case",
    "-E",
    "--extended-regexp",
    "-F",
    "--fixed-strings",
    "--merges",
    "--no-merges",
    "--min-parents=",
    "--max-parents=",
    "--first-parent",
    "--all",
    "--branches",
    "--tags",
    "--remotes",
    "--reverse",
    "--topo-order",
    "--date-order",
    "--author-date-order",
    "--ancestry-path",
    "--left-right",
    "--cherry-pick",
    "--cherry-mark",
    "--boundary",
    "--full-history",
    "--simplify-by-decoration",
    "--follow",
    "--date=",
    "--abbrev-commit",
    "--no-abbrev-commit",
    "--oneline",
    "--pretty",
    "--pretty=",
    "--format=",
    "--graph",
    "--decorate",
    "--decorate=",
    "--no-decorate",
    "--parents",
    "--children",
    "--count",
    "--timestamp",
    "--no-walk",
    "--relative-date",
    "--mailmap",
    "--no-mailmap",
    "--notes",
    "--no-notes",
    "-z",
];

/// What the diff family takes to shape a diff.
const DIFFS: &[&str] = &[
    "-p",
    "-u",
    "--patch",
    "-s",
    "--no-patch",
    "-U*",
    "--unified=",
    "--raw",
    "--patch-with-raw",
    "--patch-with-stat",
    "--stat",
    "--stat=",
    "--numstat",
    "--shortstat",
    "--dirstat",
    "--dirstat=",
    "--summary",
    "--name-only",
    "--name-status",
    "--color",
    "--color=",
    "--no-color",
    "--word-diff",
    "--word-diff=",
    "--color-words",
    "--no-renames",
    "-M*",
    "--find-renames",
    "--find-renames=",
    "-C*",
    "--find-copies",
    "--find-copies=",
    "-B*",
    "--full-index",
    "--binary",
    "--abbrev",
    "--abbrev=",
    "-R",
    "--relative",
    "--relative=",
    "-a",
    "--text",
    "-w",
    "--ignore-all-space",
    "-b",
    "--ignore-space-change",
    "--ignore-space-at-eol",
    "--ignore-blank-lines",
    "--diff-filter=",
    "-S*",
    "-G*",
    "--pickaxe-all",
    "--pickaxe-regex",
    "--minimal",
    "--patience",
    "--histogram",
    "--diff-algorithm=",
    "--cached",
    "--staged",
    "--merge-base",
    "--exit-code",
    "--quiet",
    "--check",
    "--src-prefix=",
    "--dst-prefix=",
    "--no-prefix",
    "-r",
    "-t",
    "--root",
    "--no-commit-id",
    "-m",
    "-c",
    "--cc",
    "--combined-all-paths",
    "-z",
    "--no-ext-diff",
    "--no-textconv",
];

const STATUS: &[&str] = &[
    "-s",
    "--short",
    "-b",
    "--branch",
    "--porcelain",
    "--porcelain=",
    "--long",
    "-u*",
    "--untracked-files",
    "--untracked-files=",
    "--ignored",
    "--ignored=",
    "-z",
    "--ahead-behind",
    "--no-ahead-behind",
    "--renames",
    "--no-renames",
    "--find-renames",
    "--find-renames=",
    "--show-stash",
];

const REV_PARSE: &[&str] = &[
    "--abbrev-ref",
    "--abbrev-ref=",
    "--short",
    "--short=",
    "--verify",
    "--quiet",
    "-q",
    "--show-toplevel",
    "--git-dir",
    "--absolute-git-dir",
    "--git-common-dir",
    "--is-inside-work-tree",
    "--is-inside-git-dir",
    "--is-bare-repository",
    "--is-shallow-repository",
    "--symbolic",
    "--symbolic-full-name",
    "--show-prefix",
    "--show-cdup",
    "--all",
    "--branches",
    "--tags",
    "--remotes",
    "--default",
    "--show-object-format",
];

const LS_FILES: &[&str] = &[
    "-c",
    "--cached",
    "-d",
    "--deleted",
    "-m",
    "--modified",
    "-o",
    "--others",
    "-i",
    "--ignored",
    "-s",
    "--stage",
    "-u",
    "--unmerged",
    "-k",
    "--killed",
    "-z",
    "--exclude-standard",
    "--directory",
    "--no-empty-directory",
    "--full-name",
    "--error-unmatch",
    "-t",
    "-v",
    "-f",
    "--eol",
    "--deduplicate",
    "--format=",
    "--abbrev",
    "--abbrev=",
];

const LS_TREE: &[&str] = &[
    "-r",
    "-d",
    "-t",
    "-l",
    "--long",
    "-z",
    "--name-only",
    "--name-status",
    "--object-only",
    "--full-name",
    "--full-tree",
    "--abbrev",
    "--abbrev=",
    "--format=",
];

/// Not `--textconv`, `--filters` or `--batch*`: the first two run drivers.
const CAT_FILE: &[&str] = &["-t", "-s", "-e", "-p"];

const BLAME: &[&str] = &[
    "-L*",
    "-l",
    "-t",
    "-s",
    "-e",
    "-w",
    "-p",
    "--porcelain",
    "--line-porcelain",
    "--incremental",
    "-M*",
    "-C*",
    "--root",
    "--show-stats",
    "--date=",
    "-n",
    "--show-number",
    "-f",
    "--show-name",
    "-c",
    "--abbrev=",
    "--first-parent",
    "--reverse",
    "--no-textconv",
];

const DESCRIBE: &[&str] = &[
    "--tags",
    "--all",
    "--long",
    "--always",
    "--abbrev=",
    "--exact-match",
    "--dirty",
    "--dirty=",
    "--broken",
    "--broken=",
    "--first-parent",
    "--match=",
    "--exclude=",
    "--candidates=",
    "--contains",
];

const SHORTLOG: &[&str] = &[
    "-s",
    "--summary",
    "-n",
    "--numbered",
    "-e",
    "--email",
    "--group=",
    "-c",
    "--committer",
];

/// Not `-O`/`--open-files-in-pager` (runs a program), `--textconv`,
/// `--no-index` (files outside the repository) or `-f` (a pattern file).
const GREP: &[&str] = &[
    "-i",
    "--ignore-case",
    "-I",
    "-w",
    "--word-regexp",
    "-v",
    "--invert-match",
    "-n",
    "--line-number",
    "--column",
    "-l",
    "--files-with-matches",
    "--name-only",
    "-L",
    "--files-without-match",
    "-c",
    "--count",
    "-h",
    "-H",
    "--full-name",
    "-E",
    "--extended-regexp",
    "-G",
    "--basic-regexp",
    "-F",
    "--fixed-strings",
    "-P",
    "--perl-regexp",
    "-e",
    "-A*",
    "-B*",
    "-C*",
    "--context=",
    "--after-context=",
    "--before-context=",
    "--function-context",
    "-W",
    "--max-depth=",
    "--cached",
    "--untracked",
    "--exclude-standard",
    "--no-exclude-standard",
    "-o",
    "--only-matching",
    "-q",
    "--quiet",
    "--all-match",
    "--and",
    "--or",
    "--not",
    "(",
    ")",
    "-z",
    "--null",
    "--heading",
    "--break",
    "-m*",
    "--max-count=",
    "--threads=",
    "-r",
    "--recursive",
    "--no-recursive",
    "--no-textconv",
];

const SHOW_REF: &[&str] = &[
    "--head",
    "--heads",
    "--branches",
    "--tags",
    "-d",
    "--dereference",
    "-s",
    "--hash",
    "--hash=",
    "--verify",
    "--exists",
    "--abbrev",
    "--abbrev=",
    "-q",
    "--quiet",
];

const FOR_EACH_REF: &[&str] = &[
    "--format=",
    "--sort=",
    "--count=",
    "--points-at=",
    "--merged",
    "--merged=",
    "--no-merged",
    "--no-merged=",
    "--contains",
    "--contains=",
    "--no-contains",
    "--no-contains=",
    "--ignore-case",
    "--omit-empty",
    "--exclude=",
    "-s",
    "--shell",
    "-p",
    "--perl",
    "--python",
    "--tcl",
];

const NAME_REV: &[&str] = &[
    "--tags",
    "--refs=",
    "--exclude=",
    "--all",
    "--name-only",
    "--no-undefined",
    "--always",
];

const MERGE_BASE: &[&str] = &[
    "-a",
    "--all",
    "--octopus",
    "--independent",
    "--is-ancestor",
    "--fork-point",
];

const COUNT_OBJECTS: &[&str] = &["-v", "--verbose", "-H", "--human-readable"];

/// `branch` and `tag` read only when they list.
const LISTING: &[&str] = &[
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
    "--contains",
    "--contains=",
    "--no-contains",
    "--merged",
    "--merged=",
    "--no-merged",
    "--points-at=",
    "--sort=",
    "--format=",
    "--column",
    "--no-column",
    "-n*",
];

/// `config` reads with one of these first, and nothing from another file.
const CONFIG: &[&str] = &[
    "--get",
    "--get-all",
    "--get-regexp",
    "--list",
    "-l",
    "--show-origin",
    "--show-scope",
    "--null",
    "-z",
    "--name-only",
    "--type=",
    "--bool",
    "--int",
    "--path",
    "--default=",
    "--local",
    "--worktree",
    "--includes",
    "--no-includes",
    "--all",
    "--regexp",
    "--value=",
    "--show-names",
    "--url=",
];

/// The options subcommand `sub` reads with, when it is a reading one.
/// `branch`, `tag`, `remote`, `stash` and `config` read only in some
/// forms ([`reading_form`]).
pub(super) fn of(sub: &str) -> Option<Vec<&'static str>> {
    Some(match sub {
        "log" | "show" | "rev-list" | "stash" => [REVISIONS, DIFFS].concat(),
        "shortlog" => [REVISIONS, SHORTLOG].concat(),
        "diff" | "diff-tree" | "diff-files" | "diff-index" => DIFFS.to_vec(),
        "status" => STATUS.to_vec(),
        "rev-parse" => REV_PARSE.to_vec(),
        "ls-files" => LS_FILES.to_vec(),
        "ls-tree" => LS_TREE.to_vec(),
        "cat-file" => CAT_FILE.to_vec(),
        "blame" => BLAME.to_vec(),
        "describe" => DESCRIBE.to_vec(),
        "grep" => GREP.to_vec(),
        "show-ref" => SHOW_REF.to_vec(),
        "for-each-ref" => FOR_EACH_REF.to_vec(),
        "name-rev" => NAME_REV.to_vec(),
        "merge-base" => MERGE_BASE.to_vec(),
        "count-objects" => COUNT_OBJECTS.to_vec(),
        "version" => vec!["--build-options"],
        "branch" | "tag" => LISTING.to_vec(),
        "remote" => vec!["-v", "--verbose", "--push", "--all"],
        "config" => CONFIG.to_vec(),
        _ => return None,
    })
}

/// Whether `rest` is a form of `sub` that only reads, for the
/// subcommands that also write (`branch new`, `remote add`, `stash`).
pub(super) fn reading_form(sub: &str, rest: &[String]) -> bool {
    let first = rest.first().map(String::as_str);
    match sub {
        // Listing options only, and no name: `branch x` makes a branch.
        "branch" | "tag" => {
            let lists = rest
                .iter()
                .any(|a| matches!(a.as_str(), "--list" | "-l" | "--show-current"));
            lists || rest.iter().all(|a| a.starts_with('-'))
        }
        // Not `remote show`, which asks the remote.
        "remote" => first == Some("get-url") || rest.iter().all(|a| a == "-v" || a == "--verbose"),
        "stash" => matches!(first, Some("list" | "show")),
        "config" => matches!(
            first,
            Some("--get" | "--get-all" | "--get-regexp" | "--list" | "-l" | "get" | "list")
        ),
        _ => true,
    }
}

/// The first argument of `rest` that `options` does not list, if any.
pub(super) fn unlisted<'a>(options: &[&str], rest: &'a [String]) -> Option<&'a str> {
    let mut paths = false;
    for arg in rest {
        let arg = arg.as_str();
        if paths || !arg.starts_with('-') || arg == "-" {
            continue;
        }
        if arg == "--" {
            paths = true;
            continue;
        }
        if !listed(options, arg) {
            return Some(arg);
        }
    }
    None
}

fn listed(options: &[&str], arg: &str) -> bool {
    if let Some(long) = arg.strip_prefix("--") {
        let name = long.split_once('=').map_or(long, |(name, _)| name);
        let flag = format!("--{name}");
        let valued = format!("--{name}=");
        return if long.contains('=') {
            options.contains(&valued.as_str())
        } else {
            options.contains(&flag.as_str()) || options.contains(&valued.as_str())
        };
    }
    // `-5` is `-n 5` for the commands that take revisions.
    if arg.len() > 1 && arg[1..].bytes().all(|b| b.is_ascii_digit()) {
        return options.contains(&"-n*");
    }
    options.iter().any(|o| match o.strip_suffix('*') {
        Some(short) => arg.starts_with(short),
        None => *o == arg,
    })
}

/// Whether an argument asks git to verify a signature, which runs the
/// configured gpg: `%G…` placeholders and `%(signature…)` atoms.
pub(super) fn runs_gpg(arg: &str) -> bool {
    arg.contains("%G") || arg.contains("%(signature") || arg.starts_with("--show-signature")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|a| (*a).to_owned()).collect()
    }

    #[test]
    fn listed_options_read_and_the_rest_are_named() {
        let grep = of("grep").unwrap();
        assert_eq!(unlisted(&grep, &args(&["-n", "-e", "x", "--", "-O"])), None);
        assert_eq!(unlisted(&grep, &args(&["-Ocat"])), Some("-Ocat"));
        assert_eq!(unlisted(&grep, &args(&["-O"])), Some("-O"));
        assert_eq!(
            unlisted(&grep, &args(&["--open-files-in-pager=x"])),
            Some("--open-files-in-pager=x")
        );
        // An abbreviation git would expand is not an option of the list.
        assert_eq!(unlisted(&grep, &args(&["--open"])), Some("--open"));
        assert_eq!(unlisted(&grep, &args(&["-iO"])), Some("-iO"));
        assert_eq!(unlisted(&grep, &args(&["-C3", "-A", "2"])), None);
        let log = of("log").unwrap();
        assert_eq!(
            unlisted(&log, &args(&["-5", "--format=%H", "-n3", "--stat"])),
            None
        );
        assert_eq!(unlisted(&log, &args(&["--ext-diff"])), Some("--ext-diff"));
        assert_eq!(unlisted(&log, &args(&["--textconv"])), Some("--textconv"));
        assert_eq!(
            unlisted(&log, &args(&["--output=/tmp/x"])),
            Some("--output=/tmp/x")
        );
        // A flag given a value is not the flag.
        assert_eq!(unlisted(&log, &args(&["--all=x"])), Some("--all=x"));
        let cat = of("cat-file").unwrap();
        assert_eq!(
            unlisted(&cat, &args(&["--textconv", "HEAD:a"])),
            Some("--textconv")
        );
        assert!(runs_gpg("--format=%G?") && runs_gpg("--format=%(signature)"));
    }

    #[test]
    fn some_subcommands_read_only_in_some_forms() {
        assert!(reading_form("branch", &args(&["-v"])));
        assert!(reading_form("branch", &args(&["--list", "fe*"])));
        assert!(!reading_form("branch", &args(&["new"])));
        assert!(reading_form("remote", &args(&["get-url", "origin"])));
        assert!(!reading_form("remote", &args(&["add", "o", "u"])));
        assert!(!reading_form("stash", &args(&[])));
        assert!(reading_form("config", &args(&["--get", "user.name"])));
        assert!(!reading_form("config", &args(&["core.pager", "x"])));
    }
}
