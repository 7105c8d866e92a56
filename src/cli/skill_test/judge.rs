//! How `skilld test` judges an example and reports it, wherever it ran:
//! here, or on the server `--to` names.

use crate::cli::CheckFormat;
use crate::invoke::Envelope;
use crate::skill::Skill;
use crate::skill::examples::{CallExample, Expect, TriggerExample};
use serde::Serialize;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

/// The most of a run's output a failure shows.
const EXCERPT_CHARS: usize = 1200;

/// A skill's trigger examples by kind, each with whether a trigger must
/// fire for it.
pub(super) fn trigger_sides(skill: &Skill) -> [(&'static str, &[TriggerExample], bool); 2] {
    [
        ("match", &skill.examples.matches, true),
        ("not_match", &skill.examples.not_matches, false),
    ]
}

/// A trigger that fired, in words.
pub(super) fn fired_words(kind: &str, value: &str) -> String {
    format!("{kind} trigger '{value}' fired")
}

/// Whether a trigger example passed, and what fired or did not.
pub(super) fn trigger_outcome(
    skill: &Skill,
    kind: &'static str,
    example: &TriggerExample,
    must: bool,
    fired: Option<String>,
) -> Outcome {
    let name = context_name(example);
    let passed = fired.is_some() == must;
    let got = match fired {
        Some(words) => words,
        None if must => format!("no trigger fired; the skill's triggers are {}", declared(skill)),
        None => "no trigger fired".to_owned(),
    };
    let expected = match (passed, must) {
        (true, _) => Vec::new(),
        (false, true) => vec!["one of the skill's triggers to fire".to_owned()],
        (false, false) => vec!["none of the skill's triggers to fire".to_owned()],
    };
    Outcome {
        kind,
        name,
        line: example.pos.map(|p| p.line),
        passed,
        expected,
        got,
    }
}

/// The skill's triggers, in words.
fn declared(skill: &Skill) -> String {
    let t = &skill.triggers;
    let parts: Vec<String> = [
        ("files", &t.files),
        ("keywords", &t.keywords),
        ("languages", &t.languages),
        ("modes", &t.modes),
    ]
    .into_iter()
    .filter(|(_, values)| !values.is_empty())
    .map(|(what, values)| format!("{what} [{}]", values.join(", ")))
    .collect();
    if parts.is_empty() {
        "none (it has no `triggers`)".to_owned()
    } else {
        parts.join(", ")
    }
}

/// A trigger example's context, briefly.
fn context_name(e: &TriggerExample) -> String {
    let mut parts = Vec::new();
    if !e.message.is_empty() {
        parts.push(format!("message {}", quoted(&e.message)));
    }
    if !e.files.is_empty() {
        parts.push(format!("files [{}]", e.files.join(", ")));
    }
    if !e.languages.is_empty() {
        parts.push(format!("languages [{}]", e.languages.join(", ")));
    }
    if !e.mode.is_empty() {
        parts.push(format!("mode {}", e.mode));
    }
    parts.join(", ")
}

fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| s.to_owned())
}

/// Whether a call example passed, and what its run gave.
pub(super) fn call_outcome(example: &CallExample, result: Result<Arc<Envelope>, String>) -> Outcome {
    let name = format!(
        "{} {}",
        example.tool,
        serde_json::Value::Object(example.arguments.clone())
    );
    let (unmet, got) = match &result {
        Ok(envelope) => (unmet(&example.expect, envelope), envelope_in_words(envelope)),
        Err(why) => (vec!["the call to run".to_owned()], format!("not run: {why}")),
    };
    Outcome {
        kind: "call",
        name,
        line: example.pos.map(|p| p.line),
        passed: unmet.is_empty(),
        expected: unmet,
        got,
    }
}

/// The expectations `envelope` does not meet, each in words.
fn unmet(expect: &Expect, envelope: &Envelope) -> Vec<String> {
    let mut unmet = Vec::new();
    if envelope.success != expect.success {
        unmet.push(format!("success: {}", expect.success));
    }
    if let Some(code) = expect.exit_code
        && envelope.exit_code.map(i64::from) != Some(code)
    {
        unmet.push(format!("exit_code: {code}"));
    }
    if let Some(output) = &expect.output
        && &envelope.output != output
    {
        unmet.push(format!("output: {}", quoted(output)));
    }
    for text in &expect.output_contains {
        if !envelope.output.contains(text.as_str()) {
            unmet.push(format!("output_contains: {}", quoted(text)));
        }
    }
    if let Some(parsed) = &expect.parsed
        && envelope.parsed.as_ref() != Some(parsed)
    {
        unmet.push(format!("parsed: {parsed}"));
    }
    if let Some(text) = &expect.error_contains
        && !envelope.error.as_deref().unwrap_or("").contains(text.as_str())
    {
        unmet.push(format!("error_contains: {}", quoted(text)));
    }
    unmet
}

/// What a run gave: its success, exit code, error and an excerpt of its
/// output.
fn envelope_in_words(e: &Envelope) -> String {
    let mut words = format!("success: {}", e.success);
    if let Some(code) = e.exit_code {
        words.push_str(&format!(", exit_code: {code}"));
    }
    if let Some(error) = &e.error {
        words.push_str(&format!(", error: {}", quoted(error)));
    }
    if let Some(parsed) = &e.parsed {
        words.push_str(&format!(", parsed: {parsed}"));
    }
    let excerpt: String = e.output.chars().take(EXCERPT_CHARS).collect();
    let cut = if excerpt.len() < e.output.len() || e.truncated {
        " (cut)"
    } else {
        ""
    };
    words.push_str(&format!(", output{cut}: {}", quoted(&excerpt)));
    words
}

/// One example's result.
#[derive(Debug, Serialize)]
pub(super) struct Outcome {
    /// `call`, `match` or `not_match`.
    kind: &'static str,
    /// The tool and its arguments, or the trigger context.
    name: String,
    /// Where the example is written in the definition file.
    line: Option<u32>,
    passed: bool,
    /// What did not hold (nothing when it passed).
    expected: Vec<String>,
    /// What happened.
    got: String,
}

/// Prints each outcome as it comes, then the summary.
pub(super) struct Report {
    format: CheckFormat,
    skill: String,
    passed: usize,
    failed: usize,
}

impl Report {
    pub(super) fn new(format: CheckFormat, skill: &str) -> Self {
        Self {
            format,
            skill: skill.to_owned(),
            passed: 0,
            failed: 0,
        }
    }

    pub(super) fn record(&mut self, o: Outcome) {
        if o.passed {
            self.passed += 1;
        } else {
            self.failed += 1;
        }
        let mut out = std::io::stdout().lock();
        // A closed stdout loses the lines, not the exit status.
        let _ = match self.format {
            CheckFormat::Json => serde_json::to_writer(&mut out, &o).map_err(std::io::Error::from),
            CheckFormat::Text => write!(out, "{}", text_lines(&o)),
        }
        .and_then(|()| writeln!(out))
        .and_then(|()| out.flush());
    }

    pub(super) fn finish(self) -> ExitCode {
        let mut out = std::io::stdout().lock();
        let _ = match self.format {
            CheckFormat::Json => writeln!(
                out,
                "{}",
                serde_json::json!({"skill": self.skill, "passed": self.passed, "failed": self.failed})
            ),
            CheckFormat::Text => writeln!(
                out,
                "{}: {} passed, {} failed",
                self.skill, self.passed, self.failed
            ),
        };
        if self.failed > 0 {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        }
    }
}

/// `ok   KIND NAME (line N): GOT`, or `FAIL` with what was expected and
/// what it got on lines of their own.
fn text_lines(o: &Outcome) -> String {
    let at = o.line.map(|l| format!(" (line {l})")).unwrap_or_default();
    if o.passed && o.kind == "call" {
        return format!("ok   {} {}{at}", o.kind, o.name);
    }
    if o.passed {
        return format!("ok   {} {}{at}: {}", o.kind, o.name, o.got);
    }
    format!(
        "FAIL {} {}{at}\n     expected {}\n     got {}",
        o.kind,
        o.name,
        o.expected.join(", "),
        o.got
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn envelope(success: bool, exit_code: i32, output: &str) -> Envelope {
        Envelope {
            run_id: uuid::Uuid::nil(),
            skill: "s".into(),
            tool: "t".into(),
            success,
            exit_code: Some(exit_code),
            output: output.into(),
            truncated: false,
            output_bytes: output.len() as u64,
            duration_ms: 1,
            timed_out: false,
            signal: None,
            parsed: serde_json::from_str(output).ok(),
            error: (!success).then(|| format!("exited with code {exit_code}")),
            backend_error: None,
            files: None,
            hooks: None,
            egress: None,
        }
    }

    #[test]
    fn a_run_meeting_every_expectation_passes() {
        let expect = Expect {
            exit_code: Some(0),
            output: Some("{\"n\": 2}".into()),
            output_contains: vec!["\"n\"".into()],
            parsed: Some(json!({"n": 2})),
            ..Expect::default()
        };
        assert!(unmet(&expect, &envelope(true, 0, "{\"n\": 2}")).is_empty());
    }

    #[test]
    fn each_unmet_expectation_is_named() {
        let expect = Expect {
            exit_code: Some(0),
            output_contains: vec!["Hello".into(), "Ada".into()],
            parsed: Some(json!({"n": 2})),
            error_contains: Some("timed out".into()),
            ..Expect::default()
        };
        assert_eq!(
            unmet(&expect, &envelope(false, 3, "Hello, Bob")),
            [
                "success: true",
                "exit_code: 0",
                "output_contains: \"Ada\"",
                "parsed: {\"n\":2}",
                "error_contains: \"timed out\"",
            ]
        );
        let failing = Expect {
            success: false,
            error_contains: Some("code 3".into()),
            ..Expect::default()
        };
        assert!(unmet(&failing, &envelope(false, 3, "")).is_empty());
    }

    #[test]
    fn what_a_run_gave_is_said_with_its_output() {
        let words = envelope_in_words(&envelope(false, 3, "oops\n"));
        assert_eq!(
            words,
            "success: false, exit_code: 3, error: \"exited with code 3\", output: \"oops\\n\""
        );
    }
}
