//! `skilld install URL|FILE|DIR|git URL`: one skilld serving another, a
//! zip, a skill's directory or a git repository. The archive is fetched,
//! read or packed, then installed through the same [`Installer`] a
//! server's `POST /skills` uses, here or on the server `--to` names.

use super::failure::{Failure, report};
use super::progress::Progress;
use super::registry::{RegistryArgs, as_locked, check_locked, locked_entry, registry_spec, resolve};
use crate::config::{Config, SignatureArgs};
use crate::install::client;
use crate::install::sources::{GitSource, pack_dir};
use crate::install::{Installer, Upload};
use crate::registry::Resolved;
use crate::registry::lock::{Lock, Locked};
use crate::server::{open_store, pipeline_over, runtime};
use crate::skill::Trust;
use crate::store::Stores;
use clap::Args;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, Clone, Args)]
pub struct InstallArgs {
    /// `NAME[@VERSION]` from the registries, `http://HOST/skills/NAME[@VERSION]`
    /// of another skilld, a zip file, a skill's directory, or `git`
    /// followed by `URL[#REF][//SUBDIR]`.
    /// Without one, `--locked` installs everything the lock names.
    #[arg(value_name = "NAME[@VERSION]|URL|FILE|DIR|git")]
    source: Option<String>,
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
    /// The lock file to record the install in (default
    /// `<data dir>/skills.lock`).
    #[arg(long, value_name = "FILE")]
    lock: Option<PathBuf>,
    /// Install only what the lock names, from its source, with its version
    /// and hash; anything else is refused and nothing is installed.
    #[arg(long)]
    locked: bool,
    /// The registries `NAME[@VERSION]` is looked up in, the data directory
    /// to install into and the config.
    #[command(flatten)]
    registry: RegistryArgs,
    /// The skill's `.minisig` signature (default: the registry's, or
    /// FILE.zip.minisig beside a zip when there is one), sent with it.
    #[arg(long, value_name = "FILE")]
    signature: Option<PathBuf>,
    /// The keys trusted here, without `--to` (`serve`'s flags).
    #[command(flatten)]
    signatures: SignatureArgs,
}

fn trust_parser() -> impl clap::builder::TypedValueParser<Value = Trust> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(["untrusted", "user"])
        .try_map(|s| Trust::parse(&s).ok_or_else(|| format!("unknown trust '{s}'")))
}

pub fn run(args: &InstallArgs) -> ExitCode {
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => return report(Err(Failure::Unreachable(format!("{e:#}")))),
    };
    match &args.source {
        Some(_) => report(rt.block_on(install(args)).map(|line| format!("{line}\n"))),
        None => report(Err(Failure::Refused(
            "give what to install (NAME[@VERSION], a URL, a file, a directory or git URL), \
             or --locked to install everything the lock names"
                .to_owned(),
        ))),
    }
}

impl InstallArgs {
    /// `--locked` with nothing named: everything the lock names.
    pub(super) fn replays_lock(&self) -> bool {
        self.source.is_none() && self.locked
    }

    /// These flags without `--token`.
    pub(super) fn without_source_token(&self) -> Self {
        Self {
            token: None,
            ..self.clone()
        }
    }

    /// These flags, installing `source` (and `git`) instead.
    pub(super) fn of(&self, source: &str, git: Option<&str>) -> Self {
        Self {
            source: Some(source.to_owned()),
            git: git.map(str::to_owned),
            ..self.clone()
        }
    }

    pub(super) fn lock_path(&self, config: &Config) -> PathBuf {
        self.lock
            .clone()
            .unwrap_or_else(|| config.data_dir.join("skills.lock"))
    }

    pub(super) fn registry(&self) -> &RegistryArgs {
        &self.registry
    }

    pub(super) fn to(&self) -> Option<(&str, Option<&str>)> {
        self.to.as_deref().map(|to| (to, self.to_token.as_deref()))
    }
}

/// Fetches or reads the archive, then installs it: `NAME@VERSION STATUS HASH`.
pub(super) async fn install(args: &InstallArgs) -> Result<String, Failure> {
    let config = args.registry.resolve_with(&args.signatures)?;
    let store = open_store(&config, false)
        .await
        .map_err(|e| Failure::Unreachable(format!("{e:#}")))?;
    let lock_path = args.lock_path(&config);
    let mut lock = Lock::read(&lock_path).map_err(|e| Failure::Refused(e.to_string()))?;
    let mut got = fetch(args, &config, &store, &lock, &lock_path).await?;
    if let Some(locked) = &got.locked {
        got.fetched.hash = Some(locked.sha256.clone());
    }
    let (line, entry) = match &args.to {
        Some(server) => {
            let token = match &args.to_token {
                Some(token) => Some(token.clone()),
                None => local_secret(server, &config)?,
            };
            push(args, server, token.as_deref(), got.fetched, got.signature).await?
        }
        None => here(args, store, config, got.fetched, got.signature).await?,
    };
    let entry = Locked {
        source: got.source,
        ..entry
    };
    lock.put(entry);
    lock.write(&lock_path)
        .map_err(|e| Failure::Unreachable(format!("installed, but {e}")))?;
    Ok(line)
}

/// An archive to install, where it came from, and the lock's entry it
/// must match under `--locked`.
struct Got {
    fetched: client::Fetched,
    /// The lock's `source`.
    source: String,
    locked: Option<Locked>,
    /// The `.minisig` text to send with it.
    signature: Option<String>,
}

/// The archive `args` name: found in the registries, fetched from a
/// skilld, read from a zip, or packed from a directory or a git
/// repository's. Under `--locked`, the lock must name it, from there.
async fn fetch(
    args: &InstallArgs,
    config: &Config,
    store: &Stores,
    lock: &Lock,
    lock_path: &Path,
) -> Result<Got, Failure> {
    let source = args.source.as_deref().unwrap_or_default();
    // `git` introduces a repository; a registry's skill named so is `git@VERSION`.
    let by_name = source != "git" && args.git.is_none() && !Path::new(source).exists();
    if let Some((name, version)) = registry_spec(source).filter(|_| by_name) {
        return from_registry(args, config, store, (name, version), lock, lock_path).await;
    }
    let source = lock_source(source, args.git.as_deref());
    let locked = match args.locked {
        true => Some(
            lock.skills
                .iter()
                .find(|l| l.source == source)
                .cloned()
                .ok_or_else(|| {
                    Failure::Refused(format!(
                        "{source} is not in {}; --locked installs only what the lock names",
                        lock_path.display()
                    ))
                })?,
        ),
        false => None,
    };
    let fetched = fetch_other(args, config.install.max_upload_bytes).await?;
    Ok(Got {
        fetched,
        source,
        locked,
        signature: signature(args)?,
    })
}

/// A source as the lock records it, known before anything is fetched.
fn lock_source(source: &str, git: Option<&str>) -> String {
    match git {
        Some(spec) if source == "git" => format!("git+{spec}"),
        _ if source.starts_with("http://") || source.starts_with("https://") => source.to_owned(),
        _ if Path::new(source).is_dir() => format!("path+{}", absolute(source)),
        _ => format!("file+{}", absolute(source)),
    }
}

/// `NAME[@VERSION]` from the registries, its SHA-256 checked.
async fn from_registry(
    args: &InstallArgs,
    config: &Config,
    store: &Stores,
    (name, version): (&str, Option<&str>),
    lock: &Lock,
    lock_path: &Path,
) -> Result<Got, Failure> {
    let locked = match args.locked {
        true => Some(locked_entry(lock, name, lock_path)?.clone()),
        false => None,
    };
    let mut registries = args.registry.over(config, store);
    let resolved = resolve(&mut registries, name, version, locked.as_ref()).await?;
    if let Some(l) = &locked {
        check_locked(l, &as_locked(&resolved, &l.sha256), lock_path)?;
    }
    let downloading = Progress::bytes("downloading");
    let fetched = crate::registry::download(&resolved, config.install.max_upload_bytes, &downloading).await?;
    as_listed(&fetched, &resolved, config)?;
    let signature = match args.signature {
        Some(_) => signature(args)?,
        None => resolved.version.signature.clone(),
    };
    Ok(Got {
        fetched,
        source: resolved.source(),
        locked,
        signature,
    })
}

/// Refuses an archive that is not the skill and version its registry
/// lists: a registry could otherwise hand out another skill, or an old
/// version (signed, once), under a name the user asked for.
fn as_listed(fetched: &client::Fetched, resolved: &Resolved, config: &Config) -> Result<(), Failure> {
    use std::io::Seek;
    let unreadable = |e: std::io::Error| Failure::Unreachable(e.to_string());
    let mut file = fetched.file.try_clone().map_err(unreadable)?;
    let inspected =
        crate::install::project::inspect(file.try_clone().map_err(unreadable)?, &config.install.limits);
    file.rewind().map_err(unreadable)?;
    let inspected = inspected?;
    let (want, got) = (
        format!("{}@{}", resolved.name, resolved.version.version),
        format!(
            "{}@{}",
            inspected.name,
            inspected.version.as_deref().unwrap_or("no version")
        ),
    );
    match want == got {
        true => Ok(()),
        false => Err(Failure::Refused(format!(
            "the archive holds {got}, not {want} as its registry lists it; nothing was installed"
        ))),
    }
}

/// The archive of a skilld's URL, a zip, a directory or a git repository,
/// and its source as the lock records it.
async fn fetch_other(args: &InstallArgs, max: u64) -> Result<client::Fetched, Failure> {
    let source = args.source.as_deref().unwrap_or_default();
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

/// A path as the lock records it: absolute, so the lock reads the same
/// from any directory.
fn absolute(path: &str) -> String {
    std::path::absolute(path)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| path.to_owned())
}

/// The signature `--signature` names, else `FILE.zip.minisig` beside a
/// zip when there is one.
fn signature(args: &InstallArgs) -> Result<Option<String>, Failure> {
    let source = args.source.as_deref().unwrap_or_default();
    let beside = PathBuf::from(format!("{source}.minisig"));
    let path = match &args.signature {
        Some(path) => path.clone(),
        None if args.git.is_none() && Path::new(source).is_file() && beside.is_file() => beside,
        None => return Ok(None),
    };
    let text = std::fs::read_to_string(&path)
        .map_err(|e| Failure::Refused(format!("cannot read the signature {}: {e}", path.display())))?;
    eprintln!("with the signature {}", path.display());
    Ok(Some(text))
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
    signature: Option<String>,
) -> Result<(String, Locked), Failure> {
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut &fetched.file, &mut bytes)
        .map_err(|e| Failure::Unreachable(e.to_string()))?;
    let mut query = format!("?trust={}", args.trust.as_str());
    if let Some(hash) = &fetched.hash {
        query.push_str(&format!("&expect_hash={hash}"));
    }
    let sent = (query.as_str(), signature.as_deref());
    let (detail, status) = client::push(server, token, bytes, sent, Progress::bytes("uploading")).await?;
    let field = |k: &str| detail[k].as_str().unwrap_or_default().to_owned();
    let entry = Locked {
        name: field("name"),
        version: field("version"),
        source: String::new(),
        sha256: field("hash"),
    };
    let line = format!("{}@{} {status} {}", entry.name, entry.version, entry.sha256);
    Ok((line, entry))
}

/// Installs into this machine's data directory.
async fn here(
    args: &InstallArgs,
    store: Stores,
    config: Config,
    fetched: client::Fetched,
    signature: Option<String>,
) -> Result<(String, Locked), Failure> {
    let crate::server::Pipeline { invoker, catalog, .. } = pipeline_over(store, &config)
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
            signature,
        })
        .await;
    installing.clear();
    invoker.shutdown(config.shutdown_grace).await;
    let installed = installed?;
    let skill = &installed.skill;
    let entry = Locked {
        name: skill.name.clone(),
        version: skill.version.clone().unwrap_or_default(),
        source: String::new(),
        sha256: skill.hash.clone(),
    };
    let line = format!(
        "{}@{} {} {}",
        entry.name,
        entry.version,
        installed.status.as_str(),
        entry.sha256
    );
    Ok((line, entry))
}
