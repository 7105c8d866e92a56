//! `skilld test`: runs a skill's examples (`docs/skills.md`, "Examples").
//! Trigger examples go through the engine of `POST /skills/match`, tool
//! calls through the pipeline of `skilld run`, in the sandbox, recorded in
//! a run log of a temporary data directory that is removed afterwards;
//! or, with `--to`, on a running server (`remote`). `judge` judges and
//! reports them the same either way.

mod judge;
mod remote;

use super::check::{CheckFormat, Linter};
use super::failure::Failure;
use crate::config::{Config, LocalArgs, ServeArgs};
use crate::invoke::{Asked, Call, Called, Delivery, Envelope, Gate, Target};
use crate::server::{harden, pipeline, runtime};
use crate::skill::Skill;
use crate::skill::examples::{CallExample, TriggerExample};
use crate::skill::triggers::{self, Context, FiredTrigger};
use judge::{Report, call_outcome, fired_words, trigger_outcome, trigger_sides};
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
    #[arg(long, value_name = "DIR", conflicts_with = "to")]
    pub workspace: Option<PathBuf>,
    /// Run the examples against this running server's skill of the same
    /// name (`http://HOST:PORT`) instead of here.
    #[arg(long, value_name = "URL")]
    pub to: Option<String>,
    /// Bearer token for `--to` (prefer the environment). Without one, a
    /// server on this machine (a loopback address) gets the local secret
    /// of the data directory.
    #[arg(
        long = "to-token",
        env = "SKILLD_TEST_TO_TOKEN",
        hide_env_values = true,
        value_name = "T"
    )]
    pub to_token: Option<String>,
    /// The data directory whose local secret a loopback `--to` gets.
    #[arg(long = "data-dir", env = "SKILLD_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// A config file, for that data directory.
    #[arg(long, env = "SKILLD_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
}

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
    if let Some(server) = &args.to {
        return on_server(args, server, &skill, report);
    }
    trigger_examples(&skill, &mut report);
    if !skill.examples.calls.is_empty()
        && let Err(why) = call_examples(&dir, &skill, args.workspace.as_deref(), &mut report)
    {
        return fail(2, &format!("{why:#}"));
    }
    report.finish()
}

/// The examples run on `server` (`--to`) instead of here, with the exit
/// codes of a run here.
fn on_server(args: &TestArgs, server: &str, skill: &Skill, mut report: Report) -> ExitCode {
    let target = remote::Target {
        server: server.to_owned(),
        token: args.to_token.clone(),
        data_dir: args.data_dir.clone(),
        config: args.config.clone(),
    };
    let ran = match runtime() {
        Ok(rt) => rt.block_on(remote::run(&target, skill, &mut report)),
        Err(e) => Err(Failure::Unreachable(format!("{e:#}"))),
    };
    match ran {
        Ok(()) => report.finish(),
        Err(Failure::Refused(why)) => fail(1, &why),
        Err(Failure::Unreachable(why)) => fail(2, &why),
    }
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
    let (runtimes, rules) = crate::config::lint_settings(None).map_err(|e| e.to_string())?;
    Linter::new(runtimes, rules)
        .lint_printed(dir, "test")
        .ok_or_else(|| format!("{} does not lint; no example was run", dir.display()))
}

/// Each trigger example, through the engine of `POST /skills/match`.
fn trigger_examples(skill: &Skill, report: &mut Report) {
    for (kind, examples, must) in trigger_sides(skill) {
        for example in examples {
            let fired = fired(skill, example).map(|f| fired_words(&trigger_kind(&f), &f.value));
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

fn trigger_kind(f: &FiredTrigger) -> String {
    serde_json::to_value(f.kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
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
    let mut config = Config::resolve(&serve)?;
    // Dependencies are looked for where the user's server prepares them.
    (config.runtimes, config.rules) = crate::config::lint_settings(None)?;
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
        let crate::server::Pipeline {
            invoker,
            catalog: handle,
            ..
        } = pipeline(&config, false).await?;
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
        sampler: None,
        budget: None,
        session: None,
    };
    match invoker.call(catalog, call).await {
        Ok(Called::Finished(envelope)) => Ok(envelope),
        Ok(_) => Err("the run did not finish".to_owned()),
        Err(e) => Err(e.sentence()),
    }
}
