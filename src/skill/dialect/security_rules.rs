//! A `security-rule` manifest's declarative rules (`security_rules`): SAST
//! patterns a scan runs with no backend (`docs/skills.md`, "Security
//! rules"). Patterns come from skills, uploads included, so they are
//! compiled by the `regex` crate, whose matching is linear in the text
//! whatever the pattern, and within a size bound, so no pattern can take
//! the server's time or memory.

use crate::skill::diag::Code;
use crate::skill::parse::{Parse, describe};
pub use crate::skill::security_rule::{RuleSeverity, SecurityRule};
use globset::{Glob, GlobSet, GlobSetBuilder};
use regex::{Regex, RegexBuilder};
use serde_json::{Map, Value};

/// The most rules one skill declares.
pub const MAX_RULES: usize = 256;
/// The longest pattern, in bytes, as written.
pub const MAX_PATTERN_BYTES: usize = 4096;
/// The most memory one compiled pattern (and each of its lazy DFA's
/// caches) may take: `a{1000}{1000}` is a few characters and would take
/// gigabytes unbounded.
pub const PATTERN_SIZE_LIMIT: usize = 1 << 20;
/// The longest message, in characters.
pub const MAX_MESSAGE_CHARS: usize = 1000;
/// The most globs of one rule's `files`.
const MAX_GLOBS: usize = 64;
/// A rule's keys: any other is an error, so a typo (`severty`) is not a
/// rule that silently reports at another severity.
const RULE_KEYS: [&str; 5] = ["id", "pattern", "severity", "message", "files"];

/// Compiles a pattern as rules are: multi-line, within the size bound.
pub fn compile_pattern(pattern: &str) -> Result<Regex, String> {
    if pattern.len() > MAX_PATTERN_BYTES {
        return Err(format!("is longer than {MAX_PATTERN_BYTES} bytes"));
    }
    if pattern.is_empty() {
        return Err("is empty".to_owned());
    }
    RegexBuilder::new(pattern)
        .multi_line(true)
        .crlf(true)
        .size_limit(PATTERN_SIZE_LIMIT)
        .dfa_size_limit(PATTERN_SIZE_LIMIT)
        .build()
        .map_err(|e| match e {
            regex::Error::CompiledTooBig(limit) => {
                format!("compiles to more than {limit} bytes; write a smaller pattern")
            }
            other => format!("is not a regular expression: {}", first_line(&other.to_string())),
        })
}

/// The line of the `regex` crate's message that says what is wrong (its
/// first lines repeat the pattern), cut short.
fn first_line(message: &str) -> String {
    let said = message
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with("error:"))
        .unwrap_or_else(|| message.lines().next().unwrap_or(""));
    said.trim().chars().take(200).collect()
}

impl Parse<'_, '_> {
    /// `security_rules: {rules: [{id, pattern, severity, message, files}]}`,
    /// read from a manifest; each wrong rule is an `invalid_security_rule`
    /// error. Rules of a manifest not of type `security-rule` are warned
    /// of and dropped: a skill says what it is.
    pub(in crate::skill) fn security_rules(&mut self, m: &Map<String, Value>) -> Vec<SecurityRule> {
        let Some(items) = self.rule_items(m) else {
            return Vec::new();
        };
        let mut rules: Vec<SecurityRule> = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let Some(rule) = self.security_rule(i, item) else {
                continue;
            };
            if rules.iter().any(|r| r.id == rule.id) {
                self.rule_error(Some(&rule.id), format!("rule '{}' is declared twice", rule.id));
                continue;
            }
            rules.push(rule);
        }
        let typed = match m.get("types") {
            Some(Value::Array(types)) => types.iter().any(|t| t == "security-rule"),
            Some(Value::String(t)) => t == "security-rule",
            _ => false,
        };
        if !typed && !rules.is_empty() {
            let pos = self.key_pos("security_rules");
            self.warn(
                Code::InvalidSecurityRule,
                pos,
                "security_rules are run only for a manifest of type security-rule: add it to 'types'",
            );
            return Vec::new();
        }
        rules
    }

    /// The list under `security_rules.rules`, or `None` (with an error
    /// when the shape is wrong).
    fn rule_items(&mut self, m: &Map<String, Value>) -> Option<Vec<Value>> {
        let config = match m.get("security_rules")? {
            Value::Null => return None,
            Value::Object(config) => config,
            other => {
                let got = describe(other);
                self.rule_error(
                    None,
                    format!("'security_rules' must be a mapping with 'rules', not {got}"),
                );
                return None;
            }
        };
        if let Some(key) = config.keys().find(|k| *k != "rules") {
            self.rule_error(
                None,
                format!("security_rules has no key '{key}'; its rules go under 'rules'"),
            );
        }
        let items = match config.get("rules") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items.clone(),
            Some(other) => {
                let got = describe(other);
                self.rule_error(
                    None,
                    format!("'security_rules.rules' must be a list of rules, not {got}"),
                );
                return None;
            }
        };
        if items.len() > MAX_RULES {
            let n = items.len();
            self.rule_error(None, format!("security_rules has {n} rules; at most {MAX_RULES}"));
            return None;
        }
        Some(items)
    }

    /// Rule `i`, or `None` after saying what is wrong with it.
    fn security_rule(&mut self, i: usize, item: &Value) -> Option<SecurityRule> {
        let Value::Object(r) = item else {
            let got = describe(item);
            self.rule_error(
                None,
                format!("security rule {} must be a mapping, not {got}", i + 1),
            );
            return None;
        };
        let id = self.rule_id(i, r)?;
        let at = Some(id.as_str());
        if let Some(key) = r.keys().find(|k| !RULE_KEYS.contains(&k.as_str())) {
            let keys = RULE_KEYS.join(", ");
            self.rule_error(
                at,
                format!("rule '{id}': unknown key '{key}' (a rule has {keys})"),
            );
            return None;
        }
        let pattern = self.rule_string(&id, r, "pattern")?;
        let pattern = match compile_pattern(&pattern) {
            Ok(re) => re,
            Err(why) => return self.refuse(at, format!("rule '{id}': its pattern {why}")),
        };
        let severity = self.rule_string(&id, r, "severity")?;
        let Some(severity) = RuleSeverity::parse(&severity) else {
            let one_of = RuleSeverity::ALL.map(RuleSeverity::as_str).join(", ");
            return self.refuse(
                at,
                format!("rule '{id}': severity '{severity}' is not one of {one_of}"),
            );
        };
        let message = self.rule_string(&id, r, "message")?;
        if message.trim().is_empty() || message.chars().count() > MAX_MESSAGE_CHARS {
            let why = format!("rule '{id}': message must be 1 to {MAX_MESSAGE_CHARS} characters");
            return self.refuse(at, why);
        }
        let (globs, files) = self.rule_files(&id, r)?;
        Some(SecurityRule {
            id,
            pattern,
            severity,
            message,
            globs,
            files,
        })
    }

    fn rule_id(&mut self, i: usize, r: &Map<String, Value>) -> Option<String> {
        let Some(id) = r.get("id").and_then(Value::as_str) else {
            return self.refuse(None, format!("security rule {} has no 'id' (a string)", i + 1));
        };
        if crate::skill::names::check_name(id) != crate::skill::names::NameCheck::Valid {
            let why = format!(
                "rule id '{}' must be 1-64 lowercase letters and digits with single hyphens",
                id.escape_debug()
            );
            return self.refuse(Some(id), why);
        }
        Some(id.to_owned())
    }

    /// A rule's required string `key`.
    fn rule_string(&mut self, id: &str, r: &Map<String, Value>, key: &str) -> Option<String> {
        match r.get(key) {
            Some(Value::String(s)) => Some(s.clone()),
            None | Some(Value::Null) => self.refuse(Some(id), format!("rule '{id}' has no '{key}'")),
            Some(other) => {
                let got = describe(other);
                self.refuse(
                    Some(id),
                    format!("rule '{id}': '{key}' must be a string, not {got}"),
                )
            }
        }
    }

    /// A rule's `files`: globs, compiled into one set.
    fn rule_files(&mut self, id: &str, r: &Map<String, Value>) -> Option<(Vec<String>, Option<GlobSet>)> {
        let globs: Vec<String> = match r.get("files") {
            None | Some(Value::Null) => return Some((Vec::new(), None)),
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(items)) if items.iter().all(Value::is_string) => items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            Some(_) => return self.refuse(Some(id), format!("rule '{id}': 'files' must be a list of globs")),
        };
        if globs.is_empty() || globs.len() > MAX_GLOBS {
            let why = format!(
                "rule '{id}': 'files' must list 1 to {MAX_GLOBS} globs (leave it out for every file)"
            );
            return self.refuse(Some(id), why);
        }
        let mut set = GlobSetBuilder::new();
        for glob in &globs {
            match Glob::new(glob) {
                Ok(g) => set.add(g),
                Err(e) => {
                    return self.refuse(
                        Some(id),
                        format!("rule '{id}': '{glob}' is not a glob: {}", e.kind()),
                    );
                }
            };
        }
        match set.build() {
            Ok(set) => Some((globs, Some(set))),
            Err(e) => self.refuse(Some(id), format!("rule '{id}': its globs do not compile: {e}")),
        }
    }

    /// [`Parse::rule_error`], as `None`, for `return`.
    fn refuse<T>(&mut self, id: Option<&str>, msg: String) -> Option<T> {
        self.rule_error(id, msg);
        None
    }

    /// An `invalid_security_rule` error, placed at rule `id` when it is
    /// found in the manifest.
    fn rule_error(&mut self, id: Option<&str>, msg: String) {
        let start = self.key_offset("security_rules");
        let at_id = id.and_then(|id| {
            let from = start?;
            let key = self.nested_key_offset("id", from)?;
            let rest = self.yaml.get(key..)?;
            rest.find(id).map(|at| key + at)
        });
        let pos = at_id.or(start).map(|at| self.yaml_pos(at));
        self.error(Code::InvalidSecurityRule, pos, msg);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_too_large_to_compile_is_refused_with_why() {
        let why = compile_pattern(r"\w{1000}{1000}").unwrap_err();
        assert!(why.contains("compiles to more than"), "{why}");
        let long = "a".repeat(MAX_PATTERN_BYTES + 1);
        assert!(compile_pattern(&long).unwrap_err().contains("longer than"));
        let bad = compile_pattern("(unclosed").unwrap_err();
        assert!(bad.starts_with("is not a regular expression"), "{bad}");
        assert!(!bad.contains('\n'));
    }

    #[test]
    fn patterns_see_line_ends_and_carriage_returns() {
        let re = compile_pattern(r"^secret = \w+$").unwrap();
        assert_eq!(re.find_iter("x\r\nsecret = abc\r\ny").count(), 1);
    }

    #[test]
    fn severities_parse_from_their_names_only() {
        for s in RuleSeverity::ALL {
            assert_eq!(RuleSeverity::parse(s.as_str()), Some(s));
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        assert_eq!(RuleSeverity::parse("High"), None);
        assert!(RuleSeverity::Info < RuleSeverity::Critical);
    }
}
