//! `skilld install URL|FILE|DIR|git URL`: one skilld serving another, a
//! zip, a skill's directory or a git repository. The archive is fetched,
//! read or packed, then installed through the same [`Installer`] a
//! server's `POST /skills` uses, here or on the server `--to` names.

use super::progress::Progress;
use super::{pipeline, runtime};
use crate::config::{Config, LocalArgs, ServeArgs};
use crate::install::client::{self, ClientError};
use crate::install::sources::{GitSource, pack_dir};
use crate::install::{InstallError, Installer, Upload};
use crate::skill::Trust;
use clap::Args;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct InstallArgs {
    /// `http://HOST/skills/NAME[@VERSION]` of another skilld, a zip file,
    /// a skill's directory, or `git` followed by `URL[#REF][//SUBDIR]`.
    #[arg(value_name = "URL|FILE|DIR|git")]
    source: String,
    /// After `git`: the repository (`https://`, `http://`, `git://`,
    /// `ssh://` or `file://`), a branch, tag or commit after `#`, and the
    /// skill's directory in it after `//`.
    #[arg(value_name = "URL[#REF][//SUBDIR]")]
    git: Option<String>,
    /// Bearer token for the source skilld (its read role suffices).
    /// Prefer the environment: a flag shows it to anyone who can list
    /// processes.
    #[arg(long, env = "SKILLD_INSTALL_TOKEN", hide_env_values = true, value_name = "T")]
    token: Option<String>,
    /// Install into this running server (`http://HOST:PORT`, its admin
    /// role) instead of this machine's data directory.
    #[arg(long, value_name = "URL")]
    to: Option<String>,
    /// Bearer token for `--to` (prefer the environment). Without one, a
    /// server on this machine (a loopback address) gets the local secret
    /// of the data directory.
    #[arg(
        long = "to-token",
        env = "SKILLD_INSTALL_TO_TOKEN",
        hide_env_values = true,
        value_name = "T"
    )]
    to_token: Option<String>,
    /// The trust the skill gets: `untrusted` or `user`.
    #[arg(long, default_value = "untrusted", value_parser = trust_parser())]
    trust: Trust,
    /// The data directory to install into (as `skilld serve` takes it).
    #[arg(long = "data-dir", env = "SKILLD_DATA_DIR", value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// A config file, for the data directory and the install limits.
    #[arg(long, env = "SKILLD_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
}

fn trust_parser() -> impl clap::builder::TypedValueParser<Value = Trust> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(["untrusted", "user"])
        .try_map(|s| Trust::parse(&s).ok_or_else(|| format!("unknown trust '{s}'")))
}

/// Why a verb that installs or manages skills failed, and the exit code
/// it means.
pub(super) enum Failure {
    /// 1: refused (it does not lint, no such skill, not allowed, …).
    Refused(String),
    /// 2: the source, the server, the disk or the database cannot be reached.
    Unreachable(String),
}

impl From<crate::store::StoreError> for Failure {
    fn from(e: crate::store::StoreError) -> Self {
        Failure::Unreachable(e.to_string())
    }
}

/// Prints `Ok`'s line, or the failure on stderr, and gives the exit code.
pub(super) fn report(outcome: Result<String, Failure>) -> ExitCode {
    match outcome {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(Failure::Refused(why)) => {
            eprintln!("skilld: {why}");
            ExitCode::from(1)
        }
        Err(Failure::Unreachable(why)) => {
            eprintln!("skilld: {why}");
            ExitCode::from(2)
        }
    }
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Self {
        match e {
            ClientError::Usage(_) => Failure::Refused(e.to_string()),
            ClientError::Refused { status, .. } if status < 500 => Failure::Refused(e.to_string()),
            other => Failure::Unreachable(other.to_string()),
        }
    }
}

impl From<InstallError> for Failure {
    fn from(e: InstallError) -> Self {
        let sentence = match &e {
            InstallError::Invalid(diagnostics) => {
                let lines: Vec<String> = diagnostics.iter().map(ToString::to_string).collect();
                format!("{e}:\n{}", lines.join("\n"))
            }
            _ => e.to_string(),
        };
        match e {
            InstallError::Io(_) | InstallError::Store(_) | InstallError::NoRoot => {
                Failure::Unreachable(sentence)
            }
            _ => Failure::Refused(sentence),
        }
    }
}

pub fn run(args: &InstallArgs) -> ExitCode {
    let outcome = match runtime() {
        Ok(rt) => rt.block_on(install(args)),
        Err(e) => Err(Failure::Unreachable(format!("{e:#}"))),
    };
    report(outcome.map(|line| format!("{line}\n")))
}

/// Fetches or reads the archive, then installs it: `NAME@VERSION STATUS HASH`.
async fn install(args: &InstallArgs) -> Result<String, Failure> {
    let config = Config::resolve(&ServeArgs {
        local: LocalArgs {
            config: args.config.clone(),
            data_dir: args.data_dir.clone(),
            no_watch: Some(true),
            ..LocalArgs::default()
        },
        ..ServeArgs::default()
    })
    .map_err(Failure::Refused)?;
    let fetched = fetch(args, config.install.max_upload_bytes).await?;
    match &args.to {
        Some(server) => {
            let token = match &args.to_token {
                Some(token) => Some(token.clone()),
                None => local_secret(server, &config)?,
            };
            push(args, server, token.as_deref(), fetched).await
        }
        None => here(args, config, fetched).await,
    }
}

/// The archive `args` name: fetched from a skilld, read from a zip, or
/// packed from a directory or a git repository's.
async fn fetch(args: &InstallArgs, max: u64) -> Result<client::Fetched, Failure> {
    let source = args.source.as_str();
    let packed = |file| client::Fetched { file, hash: None };
    match (source, &args.git) {
        ("git", Some(spec)) => {
            let git = GitSource::parse(spec)?;
            let clone = tempfile::tempdir().map_err(|e| Failure::Unreachable(e.to_string()))?;
            let _cloning = Progress::spinner(&format!("cloning {} …", git.url));
            let dir = git.fetch(clone.path()).await?;
            Ok(packed(pack_dir(&dir)?))
        }
        ("git", None) => Err(Failure::Refused(
            "give the repository after git: git URL[#REF][//SUBDIR]".to_owned(),
        )),
        (_, Some(extra)) => Err(Failure::Refused(format!("unexpected '{extra}' after {source}"))),
        _ if source.starts_with("http://") || source.starts_with("https://") => {
            let downloading = Progress::bytes("downloading");
            Ok(client::fetch(source, args.token.as_deref(), max, &downloading).await?)
        }
        _ if Path::new(source).is_dir() => Ok(packed(pack_dir(Path::new(source))?)),
        _ => {
            let file = std::fs::File::open(source)
                .map_err(|e| Failure::Refused(format!("cannot read {source}: {e}")))?;
            Ok(packed(file))
        }
    }
}

/// The local secret for `server` when it is on this machine: a server
/// without tokens takes installs only from its holder. Never sent to
/// another host, which would learn it.
pub(super) fn local_secret(server: &str, config: &Config) -> Result<Option<String>, Failure> {
    if !client::is_loopback_url(server) {
        return Ok(None);
    }
    crate::local_secret::read(&config.data_dir).map_err(|e| {
        Failure::Refused(format!(
            "cannot read the local secret of {}: {e}",
            config.data_dir.display()
        ))
    })
}

/// Uploads to `--to`, which checks the hash itself.
async fn push(
    args: &InstallArgs,
    server: &str,
    token: Option<&str>,
    fetched: client::Fetched,
) -> Result<String, Failure> {
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut &fetched.file, &mut bytes)
        .map_err(|e| Failure::Unreachable(e.to_string()))?;
    let mut query = format!("?trust={}", args.trust.as_str());
    if let Some(hash) = &fetched.hash {
        query.push_str(&format!("&expect_hash={hash}"));
    }
    let (detail, status) = client::push(server, token, bytes, &query, Progress::bytes("uploading")).await?;
    let field = |k: &str| detail[k].as_str().unwrap_or_default().to_owned();
    Ok(format!(
        "{}@{} {status} {}",
        field("name"),
        field("version"),
        field("hash")
    ))
}

/// Installs into this machine's data directory.
async fn here(args: &InstallArgs, config: Config, fetched: client::Fetched) -> Result<String, Failure> {
    let (invoker, catalog) = pipeline(&config, false)
        .await
        .map_err(|e| Failure::Unreachable(format!("{e:#}")))?;
    let installer = Installer::new(catalog, invoker.clone(), config.install.clone());
    let installing = Progress::spinner("installing");
    let installed = installer
        .install(Upload {
            archive: fetched.file,
            trust: args.trust,
            by: Some("skilld install".to_owned()),
            follow: installing.follow(),
            expect_hash: fetched.hash,
        })
        .await;
    installing.clear();
    invoker.shutdown(config.shutdown_grace).await;
    let installed = installed?;
    let skill = &installed.skill;
    Ok(format!(
        "{}@{} {} {}",
        skill.name,
        skill.version.as_deref().unwrap_or_default(),
        installed.status.as_str(),
        skill.hash
    ))
}
