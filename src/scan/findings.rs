//! A scan's findings: what each says, which skill (and rule, and
//! scanner) made it, and the checks on findings a backend gives, since a
//! scanner or a hook is a skill's code answering over a pipe.

use crate::skill::backend::BackendError;
use crate::skill::dialect::security_rules::{MAX_MESSAGE_CHARS, RuleSeverity};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeSet;
use utoipa::ToSchema;

/// The most findings one scan keeps (and a scanner or hook may give).
pub const MAX_FINDINGS: usize = 10_000;
/// The longest rule name a backend may give.
const MAX_RULE_CHARS: usize = 128;

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ScanFinding {
    /// The skill whose rule, scanner or hook made it.
    pub skill: String,
    /// The rule's `id`, or the rule a scanner or hook named.
    pub rule: String,
    pub severity: RuleSeverity,
    pub message: String,
    /// The file, '/'-separated, relative to the workspace (or, in an
    /// install review, to the uploaded skill).
    pub path: String,
    /// 1-based; null for a finding of a whole file (a scanner's).
    #[schema(minimum = 1)]
    pub line: Option<u32>,
    /// The scanner that reported it; absent for a declarative rule's
    /// finding and one a hook added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scanner: Option<String>,
}

impl ScanFinding {
    /// As a scanner or hook gets it.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The order findings are listed in: by file, line, then who.
    fn key(&self) -> (&str, Option<u32>, &str, &str, &str) {
        (&self.path, self.line, &self.skill, &self.rule, &self.message)
    }
}

/// Sorts findings and drops exact repeats.
pub fn settle(findings: &mut Vec<ScanFinding>) {
    findings.sort_by(|a, b| a.key().cmp(&b.key()).then_with(|| a.scanner.cmp(&b.scanner)));
    findings.dedup();
}

/// Findings `given` by a backend, each checked (see [`one`]), or why they
/// are refused: all of them, should one be wrong. A wrong one is an
/// answer out of the scanner protocol.
pub fn from_backend(
    given: &[Value],
    files: &BTreeSet<&str>,
    by: &By<'_>,
) -> Result<Vec<ScanFinding>, BackendError> {
    if given.len() > MAX_FINDINGS {
        return Err(BackendError::Protocol(format!(
            "it gave {} findings; at most {MAX_FINDINGS}",
            given.len()
        )));
    }
    given
        .iter()
        .enumerate()
        .map(|(i, v)| {
            one(v, files, by).map_err(|why| BackendError::Protocol(format!("finding {}: {why}", i + 1)))
        })
        .collect()
}

/// Who answered: a scanner of a skill, or a skill's hook.
pub struct By<'a> {
    pub skill: &'a str,
    pub scanner: Option<&'a str>,
}

/// A finding as a backend gives it: `rule`, `severity`, `message`, `path`
/// (one of the files scanned: a scanner reports on what it was given) and
/// `line` (absent or null: the whole file), checked; other keys are
/// ignored. It is `by`'s.
fn one(v: &Value, files: &BTreeSet<&str>, by: &By<'_>) -> Result<ScanFinding, String> {
    let Value::Object(f) = v else {
        return Err("not an object {rule, severity, message, path, line}".to_owned());
    };
    let rule = text(f, "rule", 1, MAX_RULE_CHARS)?;
    let severity = text(f, "severity", 1, 16)?;
    let severity = RuleSeverity::parse(&severity).ok_or_else(|| {
        let one_of = RuleSeverity::ALL.map(RuleSeverity::as_str).join(", ");
        format!("severity '{}' is not one of {one_of}", severity.escape_debug())
    })?;
    let message = text(f, "message", 0, MAX_MESSAGE_CHARS)?;
    let path = text(f, "path", 1, 4096)?;
    if !files.contains(path.as_str()) {
        return Err(format!(
            "path '{}' is not a file of the scan",
            path.escape_debug()
        ));
    }
    let line = match f.get("line") {
        None | Some(Value::Null) => None,
        Some(n) => Some(
            n.as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .filter(|n| *n >= 1)
                .ok_or("line must be a whole number from 1, or null for a whole file")?,
        ),
    };
    Ok(ScanFinding {
        skill: by.skill.to_owned(),
        rule,
        severity,
        message,
        path,
        line,
        scanner: by.scanner.map(str::to_owned),
    })
}

/// String `key` of `f`: `min` to `max` characters.
fn text(f: &Map<String, Value>, key: &str, min: usize, max: usize) -> Result<String, String> {
    match f.get(key).and_then(Value::as_str) {
        Some(s) if (min..=max).contains(&s.chars().count()) => Ok(s.to_owned()),
        Some(_) => Err(format!("{key} must be {min} to {max} characters")),
        None => Err(format!("{key} must be a string")),
    }
}

/// A hook's list of findings, over those it was given: a finding equal to
/// one given (its `skill` and `scanner` included) stays whose it was; any
/// other is the hook's skill's, whatever it claims, so a hook cannot
/// speak for another skill. Returns the new list.
pub fn from_hook(
    given: &[Value],
    before: &[ScanFinding],
    files: &BTreeSet<&str>,
    skill: &str,
) -> Result<Vec<ScanFinding>, BackendError> {
    let by = By { skill, scanner: None };
    let mut out = from_backend(given, files, &by)?;
    for (finding, value) in out.iter_mut().zip(given) {
        let claimed = ScanFinding {
            skill: value
                .get("skill")
                .and_then(Value::as_str)
                .unwrap_or(skill)
                .to_owned(),
            scanner: value.get("scanner").and_then(Value::as_str).map(str::to_owned),
            ..finding.clone()
        };
        if before.contains(&claimed) {
            *finding = claimed;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn finding(skill: &str, rule: &str, line: u32) -> ScanFinding {
        ScanFinding {
            skill: skill.to_owned(),
            rule: rule.to_owned(),
            severity: RuleSeverity::High,
            message: "m".to_owned(),
            path: "a.py".to_owned(),
            line: Some(line),
            scanner: None,
        }
    }

    #[test]
    fn a_backend_finding_must_have_its_shape_and_name_a_scanned_file() {
        let files = BTreeSet::from(["a.py"]);
        let by = By {
            skill: "s",
            scanner: Some("sc"),
        };
        let good =
            json!({"rule": "r", "severity": "low", "message": "m", "path": "a.py", "line": 3, "extra": 1});
        let got = from_backend(std::slice::from_ref(&good), &files, &by).unwrap();
        assert_eq!(got[0].scanner.as_deref(), Some("sc"));
        assert_eq!((got[0].line, got[0].severity), (Some(3), RuleSeverity::Low));
        let whole = json!({"rule": "r", "severity": "low", "message": "", "path": "a.py", "line": null});
        assert_eq!(from_backend(&[whole], &files, &by).unwrap()[0].line, None);
        for (bad, said) in [
            (json!("x"), "not an object"),
            (
                json!({"severity": "low", "message": "m", "path": "a.py", "line": 1}),
                "rule must be a string",
            ),
            (
                json!({"rule": "r", "severity": "grave", "message": "m", "path": "a.py", "line": 1}),
                "is not one of",
            ),
            (
                json!({"rule": "", "severity": "low", "message": "m", "path": "a.py", "line": 1}),
                "rule must be 1 to",
            ),
            (
                json!({"rule": "r", "severity": "low", "message": "m", "path": "/etc/passwd", "line": 1}),
                "not a file of the scan",
            ),
            (
                json!({"rule": "r", "severity": "low", "message": "m", "path": "a.py", "line": 0}),
                "line must be",
            ),
            (
                json!({"rule": "r", "severity": "low", "message": "m", "path": "a.py", "line": 1.5}),
                "line must be",
            ),
        ] {
            let why = from_backend(&[good.clone(), bad], &files, &by).unwrap_err();
            assert_eq!(why.kind(), crate::skill::backend::BackendErrorKind::Protocol);
            let why = why.to_string();
            assert!(why.starts_with("finding 2: ") && why.contains(said), "{why}");
        }
    }

    #[test]
    fn a_hook_keeps_what_it_was_given_and_owns_what_it_adds() {
        let files = BTreeSet::from(["a.py"]);
        let before = vec![finding("rules", "r1", 1), finding("rules", "r2", 2)];
        let kept = before[1].to_value();
        let mut forged = finding("rules", "new", 5).to_value();
        forged["skill"] = json!("rules");
        let got = from_hook(&[kept, forged], &before, &files, "hooker").unwrap();
        assert_eq!(got[0], before[1]);
        assert_eq!(got[1], finding("hooker", "new", 5));
    }
}
