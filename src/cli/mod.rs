//! The `skilld` command line (`docs/api.md`, "The command line").

mod check;
mod egress_view;
mod failure;
mod import;
mod install;
mod list;
mod locked;
mod manage;
mod progress;
mod registry;
pub mod scaffold;
mod sign;
mod skill_test;

use crate::catalog::{Catalog, CatalogOptions, Root};
use crate::config::{self, Config, LocalArgs, ServeArgs};
use crate::export::Format;
use crate::invoke::{Asked, Call, Called, Delivery, Gate, Target};
use crate::server;
use crate::skill::{Runtimes, SkillRules};
use anyhow::Context;
use check::CheckFormat;
use clap::{Parser, Subcommand};
use scaffold::ScaffoldDialect;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

#[derive(Debug, Parser)]
#[command(name = "skilld", version, about = "Serves skills as an API")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP server.
    Serve(Box<ServeArgs>),
    /// Lint skills; exit 1 on any error (a path with no skill is one).
    Check {
        #[arg(long, value_enum, default_value_t = CheckFormat::Text)]
        format: CheckFormat,
        /// The server's TOML config, whose runtimes, image_allowlist and
        /// entrypoint defaults apply as they would when it serves.
        #[arg(long, env = "SKILLD_CONFIG", value_name = "FILE")]
        config: Option<PathBuf>,
        /// Skill directories (or their SKILL.md), or directories of skills.
        #[arg(required = true, value_name = "DIR")]
        dirs: Vec<PathBuf>,
    },
    /// Print the tool exports without a server.
    Tools {
        #[arg(long = "skills", value_name = "[TRUST=]DIR")]
        skills: Vec<String>,
        /// The shape of the exports.
        #[arg(long, default_value = "native", value_parser = format_parser())]
        format: Format,
        #[arg(long, value_name = "M")]
        mode: Option<String>,
    },
    /// Run one tool here, without a server, and print its envelope.
    Run {
        #[arg(long = "skills", value_name = "[TRUST=]DIR")]
        skills: Vec<String>,
        /// The tool (or `skill__tool` for an ambiguous name).
        tool: String,
        /// The arguments, as a JSON object.
        #[arg(long = "args", value_name = "JSON", default_value = "{}")]
        args: String,
        /// Record the run in this database (default: the server's).
        #[arg(long, env = "SKILLD_DATABASE_URL", value_name = "URL")]
        database: Option<String>,
        #[arg(long, env = "SKILLD_DATA_DIR", value_name = "DIR")]
        data_dir: Option<PathBuf>,
        #[arg(long, env = "SKILLD_WORKSPACE", value_name = "DIR")]
        workspace: Option<PathBuf>,
        #[arg(long, value_name = "M")]
        mode: Option<String>,
    },
    /// Serve MCP over stdin and stdout, for a desktop client that starts
    /// skilld itself. Calls that need approval wait for a person deciding
    /// through a `skilld serve` sharing the run log.
    Mcp(McpArgs),
    /// Print the OpenAPI document.
    Openapi,
    /// Lint a skill, then write it as a zip archive: the same bytes for the
    /// same content. Exit 1 when it does not lint, 2 when it cannot be
    /// written.
    Package {
        /// The skill's directory (the one holding SKILL.md or SKILL.yaml).
        #[arg(value_name = "DIR")]
        dir: PathBuf,
        /// Where to write the archive (default: NAME-VERSION.zip here).
        #[arg(short = 'o', long = "output", value_name = "FILE.zip")]
        output: Option<PathBuf>,
        /// Also sign it with this minisign secret key (`skilld keygen`,
        /// `minisign -G`), writing FILE.zip.minisig beside it. An
        /// encrypted key takes its password from SKILLD_SIGN_PASSWORD.
        #[arg(long = "sign", value_name = "KEYFILE")]
        sign: Option<PathBuf>,
    },
    /// Make a minisign key pair for signing packages: PREFIX.key (secret,
    /// unencrypted, mode 0600) and PREFIX.pub. Prints the public key.
    /// Exit 1 when either file exists (nothing is overwritten), 2 when
    /// they cannot be written.
    Keygen(sign::KeygenArgs),
    /// Make a new skill directory, PARENT/NAME, from a template of one
    /// dialect that passes `skilld check` and whose tool runs. Prints its
    /// path. Exit 1 when NAME is not a valid skill name or the directory
    /// exists (nothing is overwritten), 2 when it cannot be written.
    New {
        /// The skill's name: lowercase letters and digits, with single
        /// hyphens between words (`csv-stats`).
        #[arg(value_name = "NAME")]
        name: String,
        /// How the skill is written (`docs/skills.md`, "Which dialect?").
        #[arg(long, value_enum, default_value_t = ScaffoldDialect::Markdown)]
        dialect: ScaffoldDialect,
        /// The directory to make it in.
        #[arg(long = "dir", value_name = "PARENT", default_value = ".")]
        dir: PathBuf,
    },
    /// Install a skill from another skilld (`http://HOST/skills/NAME`, or
    /// `NAME@VERSION`) or from a zip file: into this machine's installed
    /// root (under the data directory), or with `--to` into a running
    /// server. A skill fetched from a skilld must have the hash its source
    /// gives, or nothing is installed. Prints `NAME@VERSION STATUS HASH`.
    /// Exit 0 installed; 1 refused (it does not lint, its hash differs,
    /// that version exists, …); 2 the source, the server or the disk
    /// cannot be reached.
    Install(install::InstallArgs),
    /// List the skills served here (or by `--to`'s server): `NAME@VERSION`,
    /// root, trust and description; with `--available`, those the
    /// registries offer. Exit 2 when nothing can be read.
    List(list::ListArgs),
    /// Search the registries (`--registry`, or the config's
    /// `[[registries]]`, asked in order; each index is cached for
    /// `registry_ttl_secs`): a line per skill, `NAME@LATEST`, its
    /// description and its registry. Exit 0 found; 1 nothing matches or
    /// no registry is configured; 2 no registry can be read.
    Search(registry::SearchArgs),
    /// Add a skill from the registries to a project: into
    /// `WORKSPACE/.agent/skills/NAME`, checked as an install is, and
    /// recorded in `WORKSPACE/skills.lock`. Prints `NAME@VERSION DIR HASH`.
    /// Exit 1 refused (not found, tampered, does not lint, already there
    /// without `--force`, not as locked); 2 unreachable.
    Add(registry::AddArgs),
    /// Write a static registry's `index.json` for the archives in a
    /// directory (with their `.minisig` signatures), for any HTTP server
    /// to serve. Exit 1 when an archive does not lint or has no semver
    /// version, 2 when the directory cannot be read or written.
    Index(registry::IndexArgs),
    /// Show a skill: its manifest's main fields, permissions, state,
    /// installed versions and grants. Exit 1 when there is no such skill,
    /// 2 when the server, the disk or the database cannot be reached.
    Info(manage::InfoArgs),
    /// Remove an installed skill (every version) or one version
    /// (`NAME@VERSION`): the highest other ready version then serves.
    /// Exit 1 when it is not installed or runs of it are in flight
    /// (without `--force`), 2 when it cannot be reached.
    Remove(manage::RemoveArgs),
    /// Show the permissions a skill declares and the grants standing for
    /// it; `--revoke` revokes them all first. Exit 1 when there is no such
    /// skill (or the token may not), 2 when it cannot be reached.
    Permissions(manage::PermissionsArgs),
    /// Run a skill's examples: its trigger examples through the engine of
    /// `POST /skills/match`, its calls as `skilld run` runs them, in the
    /// sandbox, with a throwaway run log. Prints a line per example. Exit
    /// 0 all passed; 1 one failed, the skill does not lint or has no
    /// examples; 2 they cannot be run.
    Test(skill_test::TestArgs),
    /// Write a skill (a SKILL.yaml with an `mcp` backend) for each MCP
    /// server of Claude Desktop's, Claude Code's, Cursor's or VS Code's
    /// config, with secrets as environment references. Prints each skill
    /// and the variables to set. Exit 1 on bad input, 2 when a skill
    /// cannot be written.
    Import(import::ImportArgs),
    /// Evaluate a Starlark skill's script for a server: the child it
    /// starts in the run sandbox, speaking JSON-RPC on stdin and stdout.
    #[command(hide = true)]
    StarlarkHost {
        /// The script (`*.star`).
        entrypoint: PathBuf,
    },
}

/// `skilld mcp`'s flags: those of every command that runs tools here,
/// and the session's mode.
#[derive(Debug, clap::Args)]
pub struct McpArgs {
    #[command(flatten)]
    pub local: LocalArgs,
    /// The mode the client works in (`Dev`, `Meeting`, …): only tools of
    /// skills serving in it (or `Global`) are listed and may be called,
    /// unless a request names another in its `_meta` `skilld/mode`.
    #[arg(long, env = "SKILLD_MODE", value_name = "M")]
    pub mode: Option<String>,
    /// Ask the person in their client to decide the calls that wait for
    /// one (an elicitation, or `input_required` on 2026-07-28), when the
    /// client can be asked: the one local user decides their own calls.
    /// Without it, they decide in a `skilld serve`'s inbox.
    #[arg(long, env = "SKILLD_CLIENT_APPROVAL")]
    pub client_approval: bool,
}

/// `--format`, listing its values in `--help` and in errors.
fn format_parser() -> impl clap::builder::TypedValueParser<Value = Format> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(Format::ALL.map(Format::as_str))
        .try_map(|s| Format::parse(&s).ok_or_else(|| format!("unknown format '{s}'")))
}

/// Runs the command line; the process exits with the returned code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::StarlarkHost { entrypoint } = &cli.command {
        // No logging set-up: stderr is the server's log of this child.
        return crate::backend::run_starlark_host(entrypoint);
    }
    if let Err(e) = init_tracing() {
        eprintln!("skilld: {e}");
        return ExitCode::from(2);
    }
    let result = match cli.command {
        Command::Serve(args) => Config::resolve(&args)
            .map_err(anyhow::Error::from)
            .and_then(server::run),
        Command::Check { format, dirs, config } => return check::check(&dirs, format, config.as_deref()),
        Command::Tools { skills, format, mode } => tools(&skills, format, mode.as_deref()),
        Command::Mcp(args) => run_mcp(args),
        Command::Openapi => print_openapi(),
        Command::Package { dir, output, sign } => {
            return check::package(&dir, output.as_deref(), sign.as_deref());
        }
        Command::Keygen(args) => return sign::keygen(&args),
        Command::New { name, dialect, dir } => return new_skill(&dir, &name, dialect),
        Command::Install(args) if args.replays_lock() => return locked::run(&args),
        Command::Install(args) => return install::run(&args),
        Command::Search(args) => return registry::search(&args),
        Command::List(args) => return list::list(&args),
        Command::Add(args) => return registry::add(&args),
        Command::Index(args) => return registry::index(&args),
        Command::Info(args) => return manage::info(&args),
        Command::Remove(args) => return manage::remove(&args),
        Command::Permissions(args) => return manage::permissions(&args),
        Command::Import(args) => return import::run(&args),
        Command::Test(args) => return skill_test::run(&args),
        Command::StarlarkHost { .. } => Ok(()),
        Command::Run {
            skills,
            tool,
            args,
            database,
            data_dir,
            workspace,
            mode,
        } => {
            let serve = ServeArgs {
                local: LocalArgs {
                    skills,
                    database,
                    data_dir,
                    workspace,
                    no_watch: Some(true),
                    ..LocalArgs::default()
                },
                ..ServeArgs::default()
            };
            return match run_one(&serve, &tool, &args, mode.as_deref()) {
                Ok(true) => ExitCode::SUCCESS,
                Ok(false) => ExitCode::from(1),
                Err(e) => {
                    eprintln!("skilld: {e:#}");
                    ExitCode::from(2)
                }
            };
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("skilld: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Logs go to stderr, so stdout carries only what commands print: text
/// (coloured only on a terminal), or JSON lines with
/// `SKILLD_LOG_FORMAT=json`, filtered by `SKILLD_LOG`.
fn init_tracing() -> Result<(), crate::setting::SettingError> {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_env("SKILLD_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(progress::LogWriter);
    let format = std::env::var("SKILLD_LOG_FORMAT").unwrap_or_default();
    // Already set (a test that calls `main` twice) is fine.
    let _ = match format.as_str() {
        "" | "text" => builder.with_ansi(std::io::stderr().is_terminal()).try_init(),
        "json" => builder.json().with_current_span(true).try_init(),
        other => {
            return Err(crate::setting::SettingError::new(
                "SKILLD_LOG_FORMAT",
                format!(
                    "SKILLD_LOG_FORMAT is '{}'; it takes text (the default) or json",
                    other.escape_debug()
                ),
            ));
        }
    };
    Ok(())
}

/// `skilld new`: makes the skill `parent/name` from a template, then says
/// on stderr how to lint and run it.
fn new_skill(parent: &Path, name: &str, dialect: ScaffoldDialect) -> ExitCode {
    let dir = match scaffold::scaffold(parent, name, dialect) {
        Ok(dir) => dir,
        Err(e) => {
            eprintln!("skilld: {e}");
            return ExitCode::from(if e.is_refusal() { 1 } else { 2 });
        }
    };
    println!("{}", dir.display());
    eprintln!("next: edit it, then `skilld check {}`", dir.display());
    if let Some((tool, args)) = scaffold::example_call(name, dialect) {
        eprintln!(
            "try:  skilld run --skills {} {tool} --args '{args}'",
            parent.display()
        );
    }
    ExitCode::SUCCESS
}

fn tools(skills: &[String], format: Format, mode: Option<&str>) -> anyhow::Result<()> {
    let roots = if skills.is_empty() {
        crate::catalog::default_roots(&config::default_workspace(), &config::default_data_dir())
    } else {
        skills
            .iter()
            .map(|s| Root::parse_flag(s))
            .collect::<Result<_, _>>()?
    };
    let backends = server::runtime()?;
    let _entered = backends.enter();
    let catalog = Catalog::build(
        &CatalogOptions {
            roots,
            max_timeout_secs: config::DEFAULT_MAX_TIMEOUT_SECS,
            runtimes: Runtimes::default(),
            launcher: crate::invoke::standalone_launcher(&server::standalone_settings()),
            rules: SkillRules::default(),
        },
        None,
    );
    for d in catalog.diagnostics.iter().filter(|d| d.is_error()) {
        eprintln!("{d}");
    }
    let body = catalog.exports.body(format, mode, None);
    let mut out = std::io::stdout().lock();
    out.write_all(&body)?;
    if format != Format::Prompt {
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// `skilld run`: the same pipeline as the invoke route, in this process.
/// Returns whether the tool succeeded.
fn run_one(args: &ServeArgs, tool: &str, json: &str, mode: Option<&str>) -> anyhow::Result<bool> {
    let arguments: serde_json::Value =
        serde_json::from_str(json).map_err(|e| anyhow::anyhow!("--args is not JSON: {e}"))?;
    let config = Config::resolve(args)?;
    server::harden(&config);
    let runtime = server::runtime()?;
    runtime.block_on(async move {
        let server::Pipeline {
            invoker,
            catalog: handle,
            ..
        } = server::pipeline(&config, false).await?;
        let catalog = handle.current();
        // The person at the terminal is the one asking: `skilld run` runs
        // the tool without holding it for approval, and records it as
        // requested by the local user.
        let call = Call {
            target: Target::Tool(tool.to_owned()),
            arguments,
            mode: mode.map(str::to_owned),
            dry_run: false,
            wait: Duration::ZERO,
            delivery: Delivery::Result,
            gate: Gate::Operator,
            asked: Asked {
                by: std::env::var("USER").ok().map(|u| format!("cli:{u}")),
                request_id: None,
            },
            sampler: None,
            budget: None,
            session: None,
        };
        let envelope = match invoker.call(&catalog, call).await {
            Ok(Called::Finished(envelope)) => envelope,
            Ok(_) => anyhow::bail!("the run did not finish"),
            Err(e) => anyhow::bail!("{}", e.sentence()),
        };
        invoker.shutdown(config.shutdown_grace).await;
        let mut out = std::io::stdout().lock();
        serde_json::to_writer_pretty(&mut out, envelope.as_ref())?;
        writeln!(out)?;
        Ok(envelope.success)
    })
}

/// `skilld mcp`: the flags of every command that runs tools here, and
/// the session's own.
fn run_mcp(args: McpArgs) -> anyhow::Result<()> {
    let config = Config::resolve(&ServeArgs {
        local: args.local,
        ..ServeArgs::default()
    })?;
    server::serve_stdio(config, args.mode, args.client_approval)
}

fn print_openapi() -> anyhow::Result<()> {
    let doc = crate::openapi();
    let json = doc
        .to_pretty_json()
        .context("cannot serialise the OpenAPI document")?;
    println!("{json}");
    Ok(())
}
