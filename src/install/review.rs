//! A static review of a skill's files before an admin activates it: the
//! patterns installers and droppers use (piping the network into a shell,
//! running decoded payloads, reading credentials, writing outside the
//! skill, hiding code in encoded blobs), and network use the skill did not
//! declare; and dependency files that ask for more than registry
//! packages by name and version ([`crate::deps`]).
//!
//! It reads line by line and tells an admin where to look; it proves
//! nothing safe. A pattern spread over several lines goes unseen.

use crate::deps;
use crate::scan::{Report, ScanFinding};
use crate::skill::security_rule::RuleSeverity;
use regex::Regex;
use serde::{Deserialize, Serialize};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;
use utoipa::ToSchema;

/// Larger files are not read: scripts are small, and a blob that size is
/// data, not something a person would review line by line.
const MAX_FILE_BYTES: u64 = 1 << 20;
/// Bounds the walk of a skill that ships a whole tree.
const MAX_FILES: usize = 10_000;
const EXCERPT_CHARS: usize = 160;
/// Tools' caches and vendored dependencies: not the skill's own code.
const SKIPPED_DIRS: [&str; 4] = [".git", "node_modules", ".venv", "__pycache__"];
/// Shortest run of base64 or hex reported as a blob; hashes (a SHA-512 is
/// 128 hex digits, 88 base64) stay below it.
const MIN_BLOB: usize = 200;
/// Where writing is harmless: scratch space and the standard streams.
const HARMLESS_TARGETS: [&str; 6] = [
    "/tmp",
    "/dev/null",
    "/dev/stdout",
    "/dev/stderr",
    "/dev/fd",
    "/dev/tty",
];

/// What the scanner found in one place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Finding {
    pub code: FindingCode,
    /// Relative to the skill directory, '/'-separated.
    pub path: String,
    /// 1-based.
    pub line: u32,
    pub message: String,
    /// The line, trimmed, at most 160 characters.
    pub excerpt: String,
    /// A `security_rule` finding's skill: a loaded security-rule skill
    /// whose rule or scanner matched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill: Option<String>,
    /// A `security_rule` finding's rule (its `id`, or what the scanner
    /// named).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// A `security_rule` finding's severity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<RuleSeverity>,
}

/// The kinds of finding, in the order findings on one line are listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum FindingCode {
    PipeFromNetwork,
    EvalOfDecoded,
    ReadsCredentials,
    WritesOutsideSkill,
    ObfuscatedBlob,
    ShellTrue,
    NetworkUndeclared,
    /// A `requirements.txt` line or a `package.json` dependency that is a
    /// path, a URL, a VCS source or an option: the upload is refused, and
    /// no installer ever runs it.
    UnsafeDependency,
    /// An upgrade declaring capabilities (permissions, the network) the
    /// serving version does not: it waits for an admin's consent.
    PermissionsAdded,
    /// A loaded security-rule skill's rule or scanner matched
    /// (`skill`, `rule` and `severity` say which and how serious).
    SecurityRule,
}

impl FindingCode {
    /// The code as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PipeFromNetwork => "pipe_from_network",
            Self::EvalOfDecoded => "eval_of_decoded",
            Self::ReadsCredentials => "reads_credentials",
            Self::WritesOutsideSkill => "writes_outside_skill",
            Self::ObfuscatedBlob => "obfuscated_blob",
            Self::ShellTrue => "shell_true",
            Self::NetworkUndeclared => "network_undeclared",
            Self::UnsafeDependency => "unsafe_dependency",
            Self::PermissionsAdded => "permissions_added",
            Self::SecurityRule => "security_rule",
        }
    }
}

/// Scans every text file of the skill under `dir` (scripts, and SKILL.md
/// with its code blocks, as text). `network_allowed` is false when the
/// skill declares `network: false`; then network calls are flagged
/// ([`FindingCode::NetworkUndeclared`]). Findings are sorted by (path,
/// line, code), one per code and line. Files over 1 MiB or not UTF-8 are
/// skipped, symlinks are not followed, and at most 10,000 files are read.
/// Dependency files are checked against the default npm registry
/// ([`scan_with_registry`] names another).
pub fn scan(dir: &Path, network_allowed: bool) -> io::Result<Vec<Finding>> {
    scan_with_registry(dir, network_allowed, deps::DEFAULT_NPM_REGISTRY)
}

/// [`scan`], with `npm_registry` the one a `package-lock.json` must fetch
/// every package from.
pub fn scan_with_registry(dir: &Path, network_allowed: bool, npm_registry: &str) -> io::Result<Vec<Finding>> {
    let rules = RULES.as_ref().map_err(|e| io::Error::other(e.clone()))?;
    let mut findings = dependency_findings(dir, npm_registry)?;
    for (rel, path) in skill_files(dir)? {
        if let Some(text) = read_text(&path)? {
            scan_text(rules, &rel, &text, network_allowed, &mut findings);
        }
    }
    findings.sort_by(|a, b| (&a.path, a.line, a.code).cmp(&(&b.path, b.line, b.code)));
    findings.dedup_by(|a, b| (&a.path, a.line, a.code) == (&b.path, b.line, b.code));
    Ok(findings)
}

/// An [`FindingCode::UnsafeDependency`] for each thing the skill's
/// dependency files ask for that no installer is given.
pub fn dependency_findings(dir: &Path, npm_registry: &str) -> io::Result<Vec<Finding>> {
    let refused = deps::check_dir(dir, npm_registry)?;
    Ok(refused
        .into_iter()
        .map(|r| Finding {
            code: FindingCode::UnsafeDependency,
            path: r.file.to_owned(),
            line: r.line,
            message: r.why,
            excerpt: r.excerpt,
            skill: None,
            rule: None,
            severity: None,
        })
        .collect())
}

/// A scan's findings (the loaded skills' security rules and scanners over
/// an upload) as the review's, each with its line as excerpt.
pub fn rule_findings(report: &Report) -> Vec<Finding> {
    // Each file with findings split into lines once, not once a finding.
    let found: std::collections::HashSet<&str> = report.findings.iter().map(|f| f.path.as_str()).collect();
    let lines: std::collections::HashMap<&str, Vec<&str>> = (report.tree.files.iter())
        .filter(|file| found.contains(file.path.as_str()))
        .map(|file| (file.path.as_str(), file.text.lines().collect()))
        .collect();
    let excerpt = |f: &ScanFinding| {
        let line = lines
            .get(f.path.as_str())?
            .get(usize::try_from(f.line?).ok()?.checked_sub(1)?)?;
        Some(line.trim().chars().take(EXCERPT_CHARS).collect())
    };
    report
        .findings
        .iter()
        .map(|f| Finding {
            code: FindingCode::SecurityRule,
            path: f.path.clone(),
            // A finding of a whole file is shown at its first line.
            line: f.line.unwrap_or(1),
            message: format!(
                "{} ({} rule '{}' of skill '{}')",
                f.message,
                f.severity.as_str(),
                f.rule,
                f.skill
            ),
            excerpt: excerpt(f).unwrap_or_default(),
            skill: Some(f.skill.clone()),
            rule: Some(f.rule.clone()),
            severity: Some(f.severity),
        })
        .collect()
}

/// Regular files under `dir` with their '/'-separated relative paths.
fn skill_files(dir: &Path) -> io::Result<Vec<(String, PathBuf)>> {
    let mut files = Vec::new();
    let mut pending = vec![(String::new(), dir.to_path_buf())];
    while let Some((prefix, path)) = pending.pop() {
        for (name, child, kind) in sorted_entries(&path)? {
            let rel = format!("{prefix}{name}");
            // `DirEntry::file_type` does not follow symlinks, so a link is
            // neither and cannot lead the scan out of the skill.
            if kind.is_dir() && !SKIPPED_DIRS.contains(&name.as_str()) {
                pending.push((format!("{rel}/"), child));
            } else if kind.is_file() {
                files.push((rel, child));
                if files.len() == MAX_FILES {
                    return Ok(files);
                }
            }
        }
    }
    Ok(files)
}

/// Sorted, so that the cap keeps the same files from one scan to the next.
fn sorted_entries(dir: &Path) -> io::Result<Vec<(String, PathBuf, std::fs::FileType)>> {
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        entries.push((name, entry.path(), entry.file_type()?));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(entries)
}

/// The file's text, or `None` when it is too large or not UTF-8.
fn read_text(path: &Path) -> io::Result<Option<String>> {
    let bytes = crate::skill::files::read_limited(path, MAX_FILE_BYTES)?;
    Ok(bytes.and_then(|b| String::from_utf8(b).ok()))
}

fn scan_text(rules: &Rules, rel: &str, text: &str, network_allowed: bool, out: &mut Vec<Finding>) {
    let markdown = rel.to_ascii_lowercase().ends_with(".md");
    let mut in_fence = false;
    let hits = rules.hits(text);
    for (index, line) in text.lines().enumerate() {
        let fence = markdown && is_fence(line);
        in_fence ^= fence;
        let prose = is_comment(line) || (markdown && (fence || !in_fence));
        let number = u32::try_from(index + 1).unwrap_or(u32::MAX);
        for code in rules.check(line, &hits, prose, network_allowed) {
            out.push(Finding {
                code,
                path: rel.to_owned(),
                line: number,
                message: code.message().to_owned(),
                excerpt: line.trim().chars().take(EXCERPT_CHARS).collect(),
                skill: None,
                rule: None,
                severity: None,
            });
        }
    }
}

fn is_fence(line: &str) -> bool {
    let line = line.trim_start();
    line.starts_with("```") || line.starts_with("~~~")
}

fn is_comment(line: &str) -> bool {
    let line = line.trim_start();
    ["#", "//", "/*", "* ", "<!--"]
        .iter()
        .any(|c| line.starts_with(c))
        || line == "*"
}

/// The patterns of one code, matched line by line.
struct LineRule {
    code: FindingCode,
    /// Whether it applies to comments and Markdown prose too: instructions
    /// an agent may follow, and payloads hidden there, are as dangerous as
    /// code; but a mention of `curl` in prose uses no network.
    in_prose: bool,
    re: Regex,
}

struct Rules {
    lines: Vec<LineRule>,
    /// Writes whose named group `t` is the target path.
    writes: Vec<Regex>,
    escapes: Regex,
    /// Every pattern above, in that order, matched over a whole file with
    /// `^` and `$` at line ends: a pattern that matches no line matches
    /// nowhere in the file, so most lines of most files skip most rules.
    whole: regex::RegexSet,
}

/// Which of a file's patterns can match some line of it.
struct Hits {
    lines: Vec<bool>,
    writes: bool,
    escapes: bool,
}

impl Rules {
    fn hits(&self, text: &str) -> Hits {
        let set = self.whole.matches(text);
        let n = self.lines.len();
        Hits {
            lines: (0..n).map(|i| set.matched(i)).collect(),
            writes: (n..n + self.writes.len()).any(|i| set.matched(i)),
            escapes: set.matched(n + self.writes.len()),
        }
    }

    fn check(&self, line: &str, hits: &Hits, prose: bool, network_allowed: bool) -> Vec<FindingCode> {
        let applies = |(i, r): &(usize, &LineRule)| {
            hits.lines[*i]
                && (r.in_prose || !prose)
                && (r.code != FindingCode::NetworkUndeclared || !network_allowed)
        };
        let lines = self.lines.iter().enumerate().filter(applies);
        let mut found: Vec<_> = lines
            .filter(|(_, r)| r.re.is_match(line))
            .map(|(_, r)| r.code)
            .collect();
        if hits.writes && self.writes_outside(line) {
            found.push(FindingCode::WritesOutsideSkill);
        }
        if self.has_blob(line, hits.escapes) {
            found.push(FindingCode::ObfuscatedBlob);
        }
        found
    }

    fn writes_outside(&self, line: &str) -> bool {
        let mut targets = self.writes.iter().flat_map(|re| re.captures_iter(line));
        targets.any(|c| c.name("t").is_some_and(|t| outside_skill(t.as_str())))
    }

    fn has_blob(&self, line: &str, escapes: bool) -> bool {
        if line.len() < MIN_BLOB && !escapes {
            return false;
        }
        let mut base64 = line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '+' || c == '/'));
        let mut hex = line.split(|c: char| !c.is_ascii_hexdigit());
        base64.any(is_base64_blob) || hex.any(is_hex_blob) || (escapes && self.escapes.is_match(line))
    }
}

impl FindingCode {
    fn message(self) -> &'static str {
        match self {
            Self::PipeFromNetwork => "runs a program fetched from the network",
            Self::EvalOfDecoded => "runs code decoded at run time",
            Self::ReadsCredentials => "reads credentials or secrets of the host",
            Self::WritesOutsideSkill => "writes outside the skill and the sandbox's output",
            Self::ObfuscatedBlob => "contains a long encoded blob",
            Self::ShellTrue => "runs a command built at run time through the shell",
            Self::NetworkUndeclared => "uses the network, but the skill declares `network: false`",
            Self::UnsafeDependency => "names a dependency that is not a registry package by name and version",
            Self::PermissionsAdded => "asks for capabilities the serving version does not declare",
            Self::SecurityRule => "matches a security rule of a loaded skill",
        }
    }
}

/// Encoded bytes mix digits and both cases; a long word, a path or a rule
/// line of one repeated character does not.
fn is_base64_blob(run: &str) -> bool {
    let has = |f: fn(&u8) -> bool| run.as_bytes().iter().any(f);
    run.len() >= MIN_BLOB
        && has(u8::is_ascii_digit)
        && has(u8::is_ascii_lowercase)
        && has(u8::is_ascii_uppercase)
}

/// Hex-encoded bytes mix digits and letters; padding of zeros or of `f`s
/// does not.
fn is_hex_blob(run: &str) -> bool {
    let has = |f: fn(&u8) -> bool| run.as_bytes().iter().any(f);
    run.len() >= MIN_BLOB && has(u8::is_ascii_digit) && has(u8::is_ascii_alphabetic)
}

/// Whether writing to `target` (as written in the script) reaches beyond
/// the skill's directory, the sandbox's output and scratch space. Other
/// variables than `HOME` are trusted: the runner sets `SANDBOX_OUTPUT` and
/// `SANDBOX_FILES_DIR`, and guessing the rest would only add noise.
fn outside_skill(target: &str) -> bool {
    let home = ["~", "$HOME", "${HOME}"]
        .iter()
        .any(|home| is_under(target, home));
    let climbs = target.split('/').any(|part| part == "..");
    let absolute = target.starts_with('/') && !HARMLESS_TARGETS.iter().any(|safe| is_under(target, safe));
    home || climbs || absolute
}

fn is_under(path: &str, root: &str) -> bool {
    path.strip_prefix(root)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// A pipe into a shell, or into an interpreter reading its program from
/// stdin (`| python3 -m json.tool` only parses).
const SINK: &str = concat!(
    r"\|\s*(?:sudo\s+(?:-\S+\s+)*)?",
    r#"(?:(?:ba|z|da|k|fi)?sh\b|(?:python[\d.]*|perl|ruby|node)(?:\s+-)?\s*(?:$|[;&|)'"]))"#,
);
/// `eval "$(…)"` and `sh -c "$(…)"`: the shell runs a command's output.
const SUBST_SINK: &str = r#"(?:\beval|\b(?:ba|z|da|k)?sh\s+-c)\s+["']?(?:\$\(|`)"#;
const FETCH: &str = r"\b(?:curl|wget)\b";
const DECODE_CLI: &str = r"\b(?:base64|base32|xxd|openssl)\b[^|]*\s(?:-d|-D|--decode|-r\w*)\b";
/// Functions that run code given as a string or bytes; `model.eval()` and
/// `re.exec()` are methods, hence the character before.
const CODE_SINK: &str = r"(?:(?:^|[^.\w$])(?:exec|eval|Function)\s*\(|\b(?:pickle|marshal)\.loads\s*\()";
const DECODER: &str = concat!(
    r"\b(?:b64decode|b32decode|b16decode|b85decode|a85decode|decodebytes|decodestring|codecs\.decode",
    r"|unhexlify|fromhex|(?:zlib|gzip|bz2|lzma)\.decompress|marshal\.loads|atob|Buffer\.from",
    r"|base64_decode|gzinflate|str_rot13)\b",
);
const URL_READ: &str = r"\b(?:urlopen|urllib|requests\.\w|httpx\.\w|fetch\s*\(|https?\.get)";
/// A path written to, up to where the shell would end the word.
const TARGET: &str = r#"['"]?(?P<t>[~/$.][^\s;|&'"()<>]*)"#;

static RULES: LazyLock<Result<Rules, regex::Error>> = LazyLock::new(Rules::new);

impl Rules {
    fn new() -> Result<Self, regex::Error> {
        let mut lines = Vec::new();
        for (code, in_prose, patterns) in line_patterns() {
            let re = Regex::new(&patterns.join("|"))?;
            lines.push(LineRule { code, in_prose, re });
        }
        let writes: Vec<Regex> = write_patterns()
            .iter()
            .map(|p| Regex::new(p))
            .collect::<Result<_, _>>()?;
        let escapes = Regex::new(r"(?:\\x[0-9a-fA-F]{2}){20,}")?;
        let every = lines
            .iter()
            .map(|r| r.re.as_str())
            .chain(writes.iter().map(Regex::as_str))
            .chain([escapes.as_str()]);
        let whole = regex::RegexSetBuilder::new(every).multi_line(true).build()?;
        Ok(Self {
            lines,
            writes,
            escapes,
            whole,
        })
    }
}

/// Per code: whether it applies to prose, and its alternatives.
fn line_patterns() -> Vec<(FindingCode, bool, Vec<String>)> {
    use FindingCode::*;
    let fetched = vec![
        format!("{FETCH}.*{SINK}"),
        format!(r"(?:\b(?:ba|z|da|k)?sh|\bsource|(?:^|\s)\.)\s+<\(\s*{FETCH}"),
        format!(r"{SUBST_SINK}\s*{FETCH}"),
        format!("{CODE_SINK}.*{URL_READ}"),
    ];
    let decoded = vec![
        format!("{CODE_SINK}.*{DECODER}"),
        format!("{DECODE_CLI}.*{SINK}"),
        format!("{SUBST_SINK}.*{DECODE_CLI}"),
    ];
    vec![
        (PipeFromNetwork, true, fetched),
        (EvalOfDecoded, true, decoded),
        (ReadsCredentials, true, strings(CREDENTIALS)),
        (ShellTrue, false, strings(SHELL)),
        (NetworkUndeclared, false, strings(NETWORK)),
    ]
}

fn strings(patterns: &[&str]) -> Vec<String> {
    patterns.iter().map(|p| (*p).to_owned()).collect()
}

/// Keys, tokens and the environment of other processes.
const CREDENTIALS: &[&str] = &[
    r"(?:^|[^\w.])\.(?:ssh|aws|netrc|gnupg|git-credentials)\b",
    r"\bid_(?:rsa|dsa|ecdsa|ed25519)\b",
    r#"/proc/[^/\s'"]+/environ\b"#,
    r"\.docker/config\.json\b|\.kube/config\b|/etc/g?shadow\b",
];

const SHELL: &[&str] = &[
    r"\bshell\s*[=:]\s*[Tt]rue\b",
    r"\b(?:subprocess\.getoutput|subprocess\.getstatusoutput|create_subprocess_shell)\s*\(",
    // `os.system`/`os.popen` of anything but one plain literal (a variable,
    // an f-string, a literal joined with more) lets input reach the shell.
    r#"\bos\.(?:system|popen)\s*\(\s*(?:[^'"\s]|['"][^'"]*['"]\s*[^\s,)])"#,
];

const NETWORK: &[&str] = &[
    r"\b(?:curl|wget|ncat|socat)\b|\bnc\s|/dev/(?:tcp|udp)/",
    r"\brequests\.\w|^\s*(?:import|from)\s+(?:requests|urllib3)\b|\burllib\.request\b|\burllib[23]\b",
    r"\bfrom\s+urllib\s+import\s+request\b|\bhttp\.client\b|\bsocket\.(?:socket|create_connection)\b",
    r"\bhttpx\b|\baiohttp\b",
    r"\bfetch\s*\(|\bhttps?\.(?:get|request)\s*\(|\baxios\b",
    r#"\b(?:(?:require|import)\s*\(|from)\s*['"](?:node:)?(?:http|https|net|tls|dgram)['"]"#,
];

/// Shell redirections, `tee`, the last word of `cp`/`mv`, and Python's
/// and Node's writes to a literal path.
fn write_patterns() -> Vec<String> {
    // A quoted path, perhaps prefixed (f"", r"") or inside `expanduser(…)`.
    let path = r#"(?:os\.path\.expanduser\(\s*)?[rbfu]?['"`](?P<t>[^'"`]+)['"`]\s*\)?"#;
    let mode = r#"['"][rbt]*[wax+]"#;
    let node = r"\b(?:writeFileSync|writeFile|appendFileSync|appendFile|createWriteStream)";
    vec![
        format!(r"(?:^|[^=<>!\-])>>?\s*{TARGET}"),
        format!(r"\btee\s+(?:-\S+\s+)*{TARGET}"),
        format!(r#"\b(?:cp|mv)\s[^;|&]*?\s{TARGET}['"()\s]*(?:$|[;|&#])"#),
        format!(r"\bopen\s*\(\s*{path}\s*,\s*(?:mode\s*=\s*)?{mode}"),
        format!(r"\bPath\s*\(\s*{path}\s*\.\s*(?:write_text|write_bytes|open\s*\(\s*{mode})"),
        format!(r"\bshutil\.(?:copy\w*|move)\s*\([^,]*,\s*{path}"),
        format!(r"{node}\s*\(\s*{path}"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{BTreeMap, BTreeSet};

    #[derive(serde::Deserialize)]
    struct Expected {
        flagged: BTreeMap<String, Case>,
        clean: BTreeMap<String, Case>,
    }

    #[derive(serde::Deserialize)]
    struct Case {
        #[serde(default = "network_default")]
        network_allowed: bool,
        #[serde(default)]
        findings: Vec<(String, String, u32)>,
    }

    fn network_default() -> bool {
        true
    }

    fn corpus() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/review")
    }

    fn expected() -> Expected {
        let text = std::fs::read_to_string(corpus().join("expected.json")).unwrap();
        serde_json::from_str(&text).unwrap()
    }

    /// The corpus's cases as found on disk and as scanned.
    fn scanned(kind: &str, cases: &BTreeMap<String, Case>) -> BTreeMap<String, Vec<(String, String, u32)>> {
        let dirs: BTreeSet<String> = std::fs::read_dir(corpus().join(kind))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(
            dirs,
            cases.keys().cloned().collect(),
            "{kind}/ and expected.json list other cases"
        );
        let found = |(name, case): (&String, &Case)| {
            let dir = corpus().join(kind).join(name);
            assert_eq!(
                declared_network(&dir),
                case.network_allowed,
                "{name}: SKILL.md declares otherwise"
            );
            let findings = scan(&dir, case.network_allowed).unwrap();
            let found = findings
                .iter()
                .map(|f| (f.code.as_str().to_owned(), f.path.clone(), f.line));
            (name.clone(), found.collect())
        };
        cases.iter().map(found).collect()
    }

    fn declared_network(dir: &Path) -> bool {
        let text = std::fs::read_to_string(dir.join("SKILL.md")).unwrap();
        text.lines().any(|l| l == "network: true")
    }

    #[test]
    fn flagged_cases_give_exactly_the_expected_findings() {
        let expected = expected();
        let want: BTreeMap<_, _> = expected
            .flagged
            .iter()
            .map(|(n, c)| (n.clone(), c.findings.clone()))
            .collect();
        assert!(want.len() >= 12 && want.values().all(|f| !f.is_empty()));
        assert_eq!(scanned("flagged", &expected.flagged), want);
    }

    #[test]
    fn clean_cases_give_no_finding() {
        let expected = expected();
        let found = scanned("clean", &expected.clean);
        assert!(found.len() >= 6);
        assert_eq!(
            found
                .into_iter()
                .filter(|(_, f)| !f.is_empty())
                .collect::<Vec<_>>(),
            []
        );
    }

    #[test]
    fn the_corpus_covers_every_code_and_as_str_is_the_serialized_name() {
        let covered: BTreeSet<String> = expected()
            .flagged
            .values()
            .flat_map(|c| c.findings.iter().map(|f| f.0.clone()))
            .collect();
        use FindingCode::*;
        let all = [
            PipeFromNetwork,
            EvalOfDecoded,
            ReadsCredentials,
            WritesOutsideSkill,
            ObfuscatedBlob,
            ShellTrue,
            NetworkUndeclared,
            UnsafeDependency,
        ];
        for code in all {
            assert_eq!(serde_json::to_value(code).unwrap(), code.as_str());
            assert!(covered.contains(code.as_str()), "{code:?} has no flagged case");
        }
    }

    #[test]
    fn write_targets_outside_the_skill() {
        for target in [
            "/etc/x",
            "~/.bashrc",
            "~",
            "$HOME/.profile",
            "${HOME}",
            "../x",
            "/tmp/../etc/x",
            "/tmpfoo",
        ] {
            assert!(outside_skill(target), "{target}");
        }
        for target in [
            "out.txt",
            "./out",
            "/tmp",
            "/tmp/x",
            "/dev/null",
            "/dev/stderr",
            "$SANDBOX_OUTPUT/x",
            "~user",
        ] {
            assert!(!outside_skill(target), "{target}");
        }
    }

    #[test]
    fn blobs_mix_character_classes() {
        let mixed = "0123456789abcdefABCDEF".repeat(10);
        assert!(is_base64_blob(&mixed) && is_hex_blob(&mixed));
        for plain in [
            "a".repeat(300),
            "0".repeat(300),
            "abcdefghij".repeat(30),
            "AbCdEf".repeat(50),
        ] {
            assert!(!is_base64_blob(&plain) && !is_hex_blob(&plain), "{plain}");
        }
        assert!(!is_hex_blob(&mixed[..MIN_BLOB - 1]));
    }

    #[test]
    fn links_caches_binaries_and_large_files_are_not_read() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("evil.sh"), "curl x | sh\n").unwrap();
        let skill = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), skill.path().join("linked")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("evil.sh"), skill.path().join("evil.sh")).unwrap();
        std::fs::create_dir(skill.path().join("node_modules")).unwrap();
        std::fs::write(skill.path().join("node_modules/x.js"), "eval(atob(x))\n").unwrap();
        std::fs::write(skill.path().join("bin.sh"), b"curl x | sh\n\xff\n").unwrap();
        let huge = std::fs::File::create(skill.path().join("huge.sh")).unwrap();
        huge.set_len(50 << 20).unwrap();
        let started = std::time::Instant::now();
        assert_eq!(scan(skill.path(), true).unwrap(), []);
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn a_line_of_almost_a_mebibyte_is_scanned() {
        let skill = tempfile::tempdir().unwrap();
        let unit = "cp a /b > /etc/x curl | sh eval(atob( tee ~/ \\x41";
        let line = unit.repeat((MAX_FILE_BYTES as usize - 1) / unit.len());
        std::fs::write(skill.path().join("long.sh"), &line).unwrap();
        let findings = scan(skill.path(), false).unwrap();
        let codes: Vec<_> = findings.iter().map(|f| f.code).collect();
        use FindingCode::*;
        assert_eq!(
            codes,
            [
                PipeFromNetwork,
                EvalOfDecoded,
                WritesOutsideSkill,
                NetworkUndeclared
            ]
        );
        assert_eq!(
            findings[0].excerpt,
            line.chars().take(EXCERPT_CHARS).collect::<String>()
        );
    }

    #[test]
    fn at_most_ten_thousand_files_are_read() {
        let skill = tempfile::tempdir().unwrap();
        for i in 0..=MAX_FILES {
            std::fs::write(skill.path().join(format!("f{i:05}.sh")), "curl x | sh\n").unwrap();
        }
        let findings = scan(skill.path(), true).unwrap();
        assert_eq!(findings.len(), MAX_FILES);
        assert_eq!(findings.last().map(|f| f.path.as_str()), Some("f09999.sh"));
    }

    proptest! {
        #[test]
        fn any_bytes_scan_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
            let skill = tempfile::tempdir().unwrap();
            std::fs::write(skill.path().join("f.sh"), &bytes).unwrap();
            scan(skill.path(), false).unwrap();
        }

        #[test]
        fn any_text_scans_without_panicking(text in "(?s).{0,512}", markdown in any::<bool>()) {
            let rules = RULES.as_ref().unwrap();
            let mut out = Vec::new();
            scan_text(rules, if markdown { "SKILL.md" } else { "x.py" }, &text, false, &mut out);
            prop_assert!(out.iter().all(|f| f.line >= 1 && f.excerpt.chars().count() <= EXCERPT_CHARS));
        }
    }
}
