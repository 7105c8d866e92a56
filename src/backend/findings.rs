//! A scanner's findings (seed 002's `register_scanner`), checked before
//! anyone relies on their shape: `scanner/run` answers
//! `{"findings": [{"rule", "severity", "message", "path", "line"}]}`.

use crate::skill::backend::BackendError;
use serde_json::{Map, Value, json};

/// The severities a finding may have, least first.
pub const SEVERITIES: [&str; 5] = ["info", "low", "medium", "high", "critical"];

/// The findings of a `scanner/run` answer, each with exactly the five
/// keys (`line` null when the finding is of a whole file), or which one
/// is malformed and why.
pub(super) fn of_answer(answer: &Value) -> Result<Vec<Value>, BackendError> {
    let Some(Value::Array(findings)) = answer.get("findings") else {
        let why = "the answer must be {\"findings\": [...]}, a list of findings";
        return Err(BackendError::Protocol(why.to_owned()));
    };
    findings
        .iter()
        .enumerate()
        .map(|(i, f)| {
            finding(f).map_err(|why| BackendError::Protocol(format!("finding {i} ({}) {why}", shown(f))))
        })
        .collect()
}

/// One finding, normalized.
fn finding(f: &Value) -> Result<Value, String> {
    let Value::Object(f) = f else {
        return Err("is not an object".to_owned());
    };
    let rule = text(f, "rule")?;
    if rule.is_empty() {
        return Err("has an empty rule".to_owned());
    }
    let severity = text(f, "severity")?;
    if !SEVERITIES.contains(&severity) {
        return Err(format!(
            "has severity '{severity}', which is not one of {}",
            SEVERITIES.join(", ")
        ));
    }
    let line = match f.get("line") {
        None | Some(Value::Null) => Value::Null,
        Some(n) => match n.as_u64().filter(|n| *n >= 1) {
            Some(n) => json!(n),
            None => return Err("has a line that is not a whole number from 1".to_owned()),
        },
    };
    Ok(json!({
        "rule": rule,
        "severity": severity,
        "message": text(f, "message")?,
        "path": text(f, "path")?,
        "line": line,
    }))
}

fn text<'a>(f: &'a Map<String, Value>, key: &str) -> Result<&'a str, String> {
    f.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("has no string '{key}'"))
}

/// A finding as a short line, for the error that names it.
fn shown(f: &Value) -> String {
    let text = f.to_string();
    match text.char_indices().nth(120) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn findings_are_normalized_and_a_malformed_one_is_named() {
        let answer = json!({"findings": [
            {"rule": "r1", "severity": "high", "message": "m", "path": "a.py", "line": 3, "extra": 1},
            {"rule": "r2", "severity": "info", "message": "m", "path": "b.py"},
        ]});
        assert_eq!(
            of_answer(&answer).unwrap(),
            vec![
                json!({"rule": "r1", "severity": "high", "message": "m", "path": "a.py", "line": 3}),
                json!({"rule": "r2", "severity": "info", "message": "m", "path": "b.py", "line": null}),
            ]
        );
        let cases = [
            (json!({"findings": {}}), "a list of findings"),
            (json!({"findings": [1]}), "finding 0 (1) is not an object"),
            (
                json!({"findings": [{"rule": "r", "severity": "bad", "message": "m", "path": "p"}]}),
                "severity 'bad'",
            ),
            (
                json!({"findings": [{"rule": "r", "severity": "low", "path": "p"}]}),
                "no string 'message'",
            ),
            (
                json!({"findings": [{"rule": "r", "severity": "low", "message": "m", "path": "p", "line": 0}]}),
                "line that is not",
            ),
            (
                json!({"findings": [{"rule": "", "severity": "low", "message": "m", "path": "p"}]}),
                "empty rule",
            ),
        ];
        for (answer, says) in cases {
            let why = of_answer(&answer).unwrap_err();
            assert_eq!(why.kind(), crate::skill::backend::BackendErrorKind::Protocol);
            assert!(why.to_string().contains(says), "{why} lacks {says}");
        }
    }
}
