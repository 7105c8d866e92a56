//! `skilld test`: runs a skill's examples (`docs/skills.md`, "Examples").
//! Trigger examples go through the engine of `POST /skills/match`, tool
//! calls through the pipeline of `skilld run`, in the sandbox, recorded in
//! a run log of a temporary data directory that is removed afterwards.

use super::{CheckFormat, Linted, harden, lint_options, pipeline, runtime};
use crate::config::{Config, LocalArgs, ServeArgs};
use crate::invoke::{Asked, Call, Called, Delivery, Envelope, Gate, Target};
use crate::skill::backend::{Launch, Linting};
use crate::skill::examples::{CallExample, Expect, TriggerExample};
use crate::skill::triggers::{self, Context, FiredTrigger};
use crate::skill::{Code, Diagnostic, PathCache, Severity, Skill, load_skill};
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// `skilld test`'s flags.
#[derive(Debug, clap::Args)]
pub struct TestArgs {
    /// The skill's directory (or its SKILL.md or SKILL.yaml).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// `text`: a line per example; `json`: a JSON object per line.
    #[arg(long, value_enum, default_value_t = CheckFormat::Text)]
    pub format: CheckFormat,
    /// The tools' working directory (default: an empty temporary one).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
}

/// The most of a run's output a failure shows.
const EXCERPT_CHARS: usize = 1200;

/// Runs the examples of the skill at `args.dir`: exit 0 when all pass;
/// 1 when one fails, the skill does not lint, or it has none; 2 when
/// they cannot be run at all.
pub fn run(args: &TestArgs) -> ExitCode {
    let dir = match skill_dir(&args.dir) {
        Ok(dir) => dir,
        Err(why) => return fail(2, &why),
    };
    // A workspace of the user's must exist: a test makes nothing of theirs.
    if let Some(work) = args.workspace.as_deref().filter(|w| !w.is_dir()) {
        return fail(2, &format!("--workspace {} is not a directory", work.display()));
    }
    let skill = match lint(&dir) {
        Ok(skill) => skill,
        Err(why) => return fail(1, &why),
    };
    if skill.examples.is_empty() {
        let why = format!(
            "{} has no examples, so nothing was tested; add `examples:` (docs/skills.md, \"Examples\")",
            skill.name
        );
        return fail(1, &why);
    }
    let mut report = Report::new(args.format, &skill.name);
    trigger_examples(&skill, &mut report);
    if !skill.examples.calls.is_empty()
        && let Err(why) = call_examples(&dir, &skill, args.workspace.as_deref(), &mut report)
    {
        return fail(2, &format!("{why:#}"));
    }
    report.finish()
}

fn fail(code: u8, why: &str) -> ExitCode {
    eprintln!("skilld: {why}");
    ExitCode::from(code)
}

/// The skill directory `path` names: itself, or the one holding the
/// definition file it is.
fn skill_dir(path: &Path) -> Result<PathBuf, String> {
    let is_definition = path
        .file_name()
        .is_some_and(|n| n == "SKILL.md" || n == "SKILL.yaml");
    let dir = match path.parent() {
        Some(parent) if is_definition && path.is_file() => parent,
        _ => path,
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    if !dir.join("SKILL.md").is_file() && !dir.join("SKILL.yaml").is_file() {
        return Err(format!("{} holds no SKILL.md or SKILL.yaml", path.display()));
    }
    std::path::absolute(dir).map_err(|e| format!("{}: {e}", path.display()))
}

/// The skill linted as `skilld check` lints it (its findings on stderr),
/// or why it does not lint.
fn lint(dir: &Path) -> Result<Arc<Skill>, String> {
    let (runtimes, rules) = crate::config::lint_settings(None)?;
    let path_cache = PathCache::new(std::env::var_os("PATH"));
    let launcher: Arc<dyn Launch> = Arc::new(Linting);
    let linting = Linted {
        runtimes: &runtimes,
        rules: &rules,
        path: &path_cache,
        launcher: Some(&launcher),
    };
    let loaded = load_skill(dir, &lint_options("test", &linting));
    let mut diagnostics = loaded.diagnostics;
    diagnostics.extend(loaded.skill.iter().flat_map(|s| argument_findings(s)));
    for d in &diagnostics {
        eprintln!("{d}");
    }
    let failed = diagnostics.iter().any(|d| d.severity == Severity::Error);
    loaded
        .skill
        .filter(|_| !failed)
        .ok_or_else(|| format!("{} does not lint; no example was run", dir.display()))
}

/// A finding for each call example whose arguments its tool would
/// refuse, checked as the invoke pipeline checks a call's (`check`,
/// `package` and `test` lint with it; the loader, a layer below the
/// pipeline, cannot).
pub(super) fn argument_findings(skill: &Skill) -> Vec<Diagnostic> {
    let path = skill.definition.display().to_string();
    let calls = skill.examples.calls.iter().enumerate();
    calls
        .filter_map(|(i, call)| {
            let tool = skill.tools.iter().find(|t| t.name == call.tool)?;
            let errors = crate::invoke::args::validate(tool, &call.arguments).err()?;
            let why: Vec<String> = errors
                .iter()
                .map(|e| match e.field.as_str() {
                    "" => e.message.clone(),
                    field => format!("{field}: {}", e.message),
                })
                .collect();
            let msg = format!(
                "examples.calls[{i}]: arguments that tool '{}' refuses: {}",
                call.tool,
                why.join("; ")
            );
            let d = Diagnostic::error(Code::InvalidExampleArguments, &path, msg);
            Some(d.at(call.pos).for_skill(&skill.name))
        })
        .collect()
}

/// Each trigger example, through the engine of `POST /skills/match`.
fn trigger_examples(skill: &Skill, report: &mut Report) {
    let sides = [
        ("match", &skill.examples.matches, true),
        ("not_match", &skill.examples.not_matches, false),
    ];
    for (kind, examples, must) in sides {
        for example in examples {
            let fired = fired(skill, example);
            report.record(trigger_outcome(skill, kind, example, must, fired));
        }
    }
}

fn fired(skill: &Skill, example: &TriggerExample) -> Option<FiredTrigger> {
    let ctx = Context {
        files: &example.files,
        message: &example.message,
        languages: &example.languages,
        mode: &example.mode,
        explicit: &[],
    };
    triggers::fired(skill, &ctx)
}

/// Whether a trigger example passed, and what fired or did not.
fn trigger_outcome(
    skill: &Skill,
    kind: &'static str,
    example: &TriggerExample,
    must: bool,
    fired: Option<FiredTrigger>,
) -> Outcome {
    let name = context_name(example);
    let got = match &fired {
        Some(f) => format!("{} trigger '{}' fired", trigger_kind(f), f.value),
        None if must => format!("no trigger fired; the skill's triggers are {}", declared(skill)),
        None => "no trigger fired".to_owned(),
    };
    let passed = fired.is_some() == must;
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

fn trigger_kind(f: &FiredTrigger) -> String {
    serde_json::to_value(f.kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
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

/// The pipeline `skilld run` uses, over a run log in a temporary data
/// directory: its one root is the skill's directory, so that no skill
/// beside it loads (nor starts a backend, nor takes its name).
fn test_config(dir: &Path, scratch: &Path, workspace: Option<&Path>) -> anyhow::Result<Config> {
    let data = scratch.join("data");
    let work = workspace.map_or_else(|| scratch.join("workspace"), Path::to_path_buf);
    std::fs::create_dir_all(&work)?;
    let serve = ServeArgs {
        local: LocalArgs {
            skills: vec![format!("user={}", dir.display())],
            database: Some(format!("sqlite://{}", data.join("skilld.db").display())),
            data_dir: Some(data),
            scratch_dir: Some(scratch.join("runs")),
            workspace: Some(work),
            no_watch: Some(true),
            ..LocalArgs::default()
        },
        ..ServeArgs::default()
    };
    let mut config = Config::resolve(&serve).map_err(anyhow::Error::msg)?;
    // Dependencies are looked for where the user's server prepares them.
    (config.runtimes, config.rules) = crate::config::lint_settings(None).map_err(anyhow::Error::msg)?;
    Ok(config)
}

/// Runs each call example and records it; `Err` when they cannot run.
fn call_examples(
    dir: &Path,
    linted: &Skill,
    workspace: Option<&Path>,
    report: &mut Report,
) -> anyhow::Result<()> {
    let scratch = tempfile::Builder::new().prefix("skilld-test-").tempdir()?;
    let config = test_config(dir, scratch.path(), workspace)?;
    harden(&config);
    let runtime = runtime()?;
    runtime.block_on(async {
        let (invoker, handle) = pipeline(&config, false).await?;
        let catalog = handle.current();
        let Some(skill) = catalog.skill(&linted.name).cloned() else {
            for d in catalog
                .diagnostics
                .iter()
                .filter(|d| d.skill.as_deref() == Some(&linted.name))
            {
                eprintln!("{d}");
            }
            anyhow::bail!("{} did not load to run its calls", linted.name);
        };
        for example in &skill.examples.calls {
            let outcome = call_outcome(example, call(&invoker, &catalog, &skill, example).await);
            report.record(outcome);
        }
        invoker.shutdown(config.shutdown_grace).await;
        Ok(())
    })
}

/// One call example through the pipeline: its envelope, or why it did
/// not run. The user testing their own skill is the one asking, so the
/// call is not held for approval, as with `skilld run`.
async fn call(
    invoker: &Arc<crate::invoke::Invoker>,
    catalog: &Arc<crate::catalog::Catalog>,
    skill: &Skill,
    example: &CallExample,
) -> Result<Arc<Envelope>, String> {
    let call = Call {
        target: Target::SkillTool {
            skill: skill.name.clone(),
            tool: example.tool.clone(),
        },
        arguments: serde_json::Value::Object(example.arguments.clone()),
        mode: None,
        dry_run: false,
        wait: Duration::ZERO,
        delivery: Delivery::Result,
        gate: Gate::Operator,
        asked: Asked {
            by: std::env::var("USER").ok().map(|u| format!("test:{u}")),
            request_id: None,
        },
    };
    match invoker.call(catalog, call).await {
        Ok(Called::Finished(envelope)) => Ok(envelope),
        Ok(_) => Err("the run did not finish".to_owned()),
        Err(e) => Err(e.sentence()),
    }
}

/// Whether a call example passed, and what its run gave.
fn call_outcome(example: &CallExample, result: Result<Arc<Envelope>, String>) -> Outcome {
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
struct Outcome {
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
struct Report {
    format: CheckFormat,
    skill: String,
    passed: usize,
    failed: usize,
}

impl Report {
    fn new(format: CheckFormat, skill: &str) -> Self {
        Self {
            format,
            skill: skill.to_owned(),
            passed: 0,
            failed: 0,
        }
    }

    fn record(&mut self, o: Outcome) {
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

    fn finish(self) -> ExitCode {
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
            files: None,
            hooks: None,
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
