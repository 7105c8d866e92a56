//! `skilld search` and `skilld add` (seed 002's `skill search` and `skill
//! add`), and the registry flags `skilld install NAME` shares with them.

use super::failure::{Failure, report};
use crate::config::{Config, LocalArgs, ServeArgs, SignatureArgs};
use crate::install::project::{self, AddError, Adding};
use crate::registry::lock::{Lock, Locked};
use crate::registry::{Registries, RegistrySource, Resolved};
use crate::server::{open_store, runtime};
use clap::Args;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Which registries to ask, and where the cache and config are.
#[derive(Debug, Clone, Default, Args)]
pub struct RegistryArgs {
    /// A registry: an `index.json` address (`https://…/index.json`,
    /// `file:///…/index.json`) or a skilld (`http://HOST:PORT`). Repeat
    /// for several, asked in order; replaces the config's `[[registries]]`.
    #[arg(
        long = "registry",
        env = "SKILLD_REGISTRIES",
        value_delimiter = ',',
        value_name = "URL"
    )]
    pub registries: Vec<String>,
    /// Ask every registry afresh, whatever the cache holds.
    #[arg(long)]
    pub refresh: bool,
    /// The data directory, whose database caches the registries' indexes.
    #[arg(long = "data-dir", env = "SKILLD_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// A config file: `[[registries]]`, `registry_ttl_secs`, the data
    /// directory and the install limits.
    #[arg(long, env = "SKILLD_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
}

impl RegistryArgs {
    /// The config these flags name.
    pub fn resolve(&self) -> Result<Config, Failure> {
        self.resolve_with(&SignatureArgs::default())
    }

    /// The config these flags and the trusted keys' name.
    pub fn resolve_with(&self, signatures: &SignatureArgs) -> Result<Config, Failure> {
        let mut config = Config::resolve(&ServeArgs {
            local: LocalArgs {
                config: self.config.clone(),
                data_dir: self.data_dir.clone(),
                no_watch: Some(true),
                ..LocalArgs::default()
            },
            signatures: signatures.clone(),
            ..ServeArgs::default()
        })
        .map_err(Failure::from)?;
        if !self.registries.is_empty() {
            config.registries.sources = self.registries.iter().map(|u| RegistrySource::new(u)).collect();
        }
        Ok(config)
    }

    /// The registries, over the data directory's store.
    pub async fn open(&self, config: &Config) -> Result<Registries, Failure> {
        let store = open_store(config, false)
            .await
            .map_err(|e| Failure::Unreachable(format!("{e:#}")))?;
        Ok(self.over(config, &store))
    }

    /// The registries, over a store already open.
    pub fn over(&self, config: &Config, store: &crate::store::Stores) -> Registries {
        let mut registries = Registries::new(config.registries.clone(), store.index_cache.clone());
        registries.refresh = self.refresh;
        registries
    }
}

#[derive(Debug, Args)]
pub struct SearchArgs {
    /// Words that must all be in a skill's name or description; none
    /// lists every skill.
    #[arg(value_name = "QUERY")]
    query: Vec<String>,
    /// `text` (default) or `json`.
    #[arg(long, value_enum, default_value_t = super::manage::Output::Text)]
    format: super::manage::Output,
    #[command(flatten)]
    registry: RegistryArgs,
}

pub fn search(args: &SearchArgs) -> ExitCode {
    let outcome = match runtime() {
        Ok(rt) => rt.block_on(search_registries(args)),
        Err(e) => Err(Failure::Unreachable(format!("{e:#}"))),
    };
    report(outcome)
}

async fn search_registries(args: &SearchArgs) -> Result<String, Failure> {
    let config = args.registry.resolve()?;
    let registries = args.registry.open(&config).await?;
    let (loaded, failed) = registries.load_all().await?;
    for e in &failed {
        eprintln!("skilld: not searched: {e}");
    }
    for l in &loaded {
        if let Some(why) = &l.stale {
            eprintln!("skilld: {}: its last answer is used: {why}", l.url);
        }
    }
    if loaded.is_empty() {
        return Err(Failure::Unreachable("no registry could be read".to_owned()));
    }
    let query = args.query.join(" ");
    let hits: Vec<_> = loaded
        .iter()
        .flat_map(|l| l.index.search(&query).map(move |s| (l.url.as_str(), s)))
        .collect();
    if hits.is_empty() {
        return Err(Failure::Refused(format!("no skill matches '{query}'")));
    }
    let (json, text) = offered(hits.into_iter());
    Ok(match args.format {
        super::manage::Output::Json => format!("{json}\n"),
        super::manage::Output::Text => text,
    })
}

/// Skills the registries offer, as JSON (`{registry, name, description,
/// versions, latest}` each) and as lines (`NAME@LATEST  DESCRIPTION
/// REGISTRY`, tab-separated).
pub(super) fn offered<'a>(
    hits: impl Iterator<Item = (&'a str, &'a crate::registry::index::IndexSkill)>,
) -> (serde_json::Value, String) {
    let (mut list, mut text) = (Vec::new(), String::new());
    for (url, s) in hits {
        let latest = s.version(None).map_or("", |v| v.version.as_str());
        text.push_str(&format!(
            "{}@{latest}\t{}\t{url}\n",
            s.name,
            s.description.replace(['\n', '\t'], " ")
        ));
        list.push(
            serde_json::json!({"registry": url, "name": s.name, "description": s.description,
            "versions": s.versions.iter().map(|v| &v.version).collect::<Vec<_>>(), "latest": latest}),
        );
    }
    (serde_json::Value::Array(list), text)
}

/// `NAME[@VERSION]` when `spec` reads as one (a skill name, then
/// optionally `@` and a semver version); `None` for anything else.
pub fn registry_spec(spec: &str) -> Option<(&str, Option<&str>)> {
    let (name, version) = match spec.split_once('@') {
        Some((n, v)) => (n, Some(v)),
        None => (spec, None),
    };
    let named = matches!(
        crate::skill::names::check_name(name),
        crate::skill::names::NameCheck::Valid
    );
    let versioned = version.is_none_or(crate::catalog::installed::valid_version);
    (named && versioned).then_some((name, version))
}

/// Finds `NAME[@VERSION]` in the registries, or only in the one the lock
/// names when `locked` has an entry; with `--locked`, that entry must
/// exist.
pub async fn resolve(
    registries: &mut Registries,
    name: &str,
    version: Option<&str>,
    locked: Option<&Locked>,
) -> Result<Resolved, Failure> {
    let only = locked.and_then(|l| l.source.strip_prefix("registry+"));
    let version = version.or(locked.map(|l| l.version.as_str()));
    if let Some(l) = locked
        && only.is_none()
    {
        return Err(Failure::Refused(format!(
            "the lock installs {name} from {}, not from a registry",
            l.source
        )));
    }
    // A lock names its registry: it is asked even when not configured.
    if let Some(url) = only {
        registries.add_source(url);
    }
    let resolved = registries.resolve(name, version, only).await?;
    for note in &resolved.notes {
        eprintln!("skilld: {note}");
    }
    Ok(resolved)
}

/// The lock's entry for `name` under `--locked`: refused when there is none.
pub fn locked_entry<'a>(lock: &'a Lock, name: &str, path: &Path) -> Result<&'a Locked, Failure> {
    lock.entry(name).ok_or_else(|| {
        Failure::Refused(format!(
            "{name} is not in {}; --locked installs only what the lock names",
            path.display()
        ))
    })
}

/// What the lock would say of a resolved version whose hash is `sha256`.
pub fn as_locked(resolved: &Resolved, sha256: &str) -> Locked {
    Locked {
        name: resolved.name.clone(),
        version: resolved.version.version.clone(),
        source: resolved.source(),
        sha256: sha256.to_owned(),
    }
}

/// Refuses what differs from the lock's entry, before anything is placed.
pub fn check_locked(locked: &Locked, got: &Locked, path: &Path) -> Result<(), Failure> {
    let differences = locked.differences(got);
    if differences.is_empty() {
        return Ok(());
    }
    Err(Failure::Refused(format!(
        "{} differs from {}: {}; nothing was installed",
        got.name,
        path.display(),
        differences.join("; ")
    )))
}

#[derive(Debug, Args)]
pub struct AddArgs {
    /// The skill, `NAME` or `NAME@VERSION`, from the registries.
    #[arg(value_name = "NAME[@VERSION]")]
    name: String,
    /// The project: its skills go to `DIR/.agent/skills` (default: the
    /// current directory).
    #[arg(long, value_name = "DIR", default_value = ".")]
    workspace: PathBuf,
    /// Replace the skill if the project has it already.
    #[arg(long)]
    force: bool,
    /// The lock file to record it in (default `WORKSPACE/skills.lock`).
    #[arg(long, value_name = "FILE")]
    lock: Option<PathBuf>,
    /// Add only what the lock names, with its version and hash.
    #[arg(long)]
    locked: bool,
    #[command(flatten)]
    registry: RegistryArgs,
    /// The keys trusted to sign what is added (`serve`'s flags).
    #[command(flatten)]
    signatures: SignatureArgs,
}

pub fn add(args: &AddArgs) -> ExitCode {
    let outcome = match runtime() {
        Ok(rt) => rt.block_on(add_to_project(args)),
        Err(e) => Err(Failure::Unreachable(format!("{e:#}"))),
    };
    report(outcome.map(|line| format!("{line}\n")))
}

/// `NAME@VERSION DIR HASH`.
async fn add_to_project(args: &AddArgs) -> Result<String, Failure> {
    let (name, version) = registry_spec(&args.name).ok_or_else(|| {
        Failure::Refused(format!(
            "'{}' is not NAME or NAME@VERSION (a skill name, then a semver version)",
            args.name
        ))
    })?;
    let lock_path = args
        .lock
        .clone()
        .unwrap_or_else(|| args.workspace.join("skills.lock"));
    let mut lock = Lock::read(&lock_path).map_err(|e| Failure::Refused(e.to_string()))?;
    let locked = match args.locked {
        true => Some(locked_entry(&lock, name, &lock_path)?.clone()),
        false => None,
    };
    let config = args.registry.resolve_with(&args.signatures)?;
    let mut registries = args.registry.open(&config).await?;
    let resolved = resolve(&mut registries, name, version, locked.as_ref()).await?;
    if let Some(l) = &locked {
        check_locked(l, &as_locked(&resolved, &l.sha256), &lock_path)?;
    }
    let downloading = super::progress::Progress::bytes("downloading");
    let fetched = crate::registry::download(&resolved, config.install.max_upload_bytes, &downloading).await?;
    let skills_dir = args.workspace.join(project::PROJECT_SKILLS);
    std::fs::create_dir_all(&skills_dir)
        .map_err(|e| Failure::Unreachable(format!("cannot make {}: {e}", skills_dir.display())))?;
    project::clear_staging(&skills_dir);
    let expect = locked.as_ref().map(|l| l.sha256.clone()).or(fetched.hash.clone());
    let added = project::add(Adding {
        archive: fetched.file,
        skills_dir: &skills_dir,
        name,
        version: &resolved.version.version,
        expect_hash: expect.as_deref(),
        force: args.force,
        limits: config.install.limits,
        npm_registry: &config.install.deps.npm_registry,
        signature: resolved.version.signature.as_deref(),
        policy: &config.install.signatures,
    })
    .map_err(|e| match e {
        AddError::Install(e) => Failure::from(e),
        other => Failure::Refused(other.to_string()),
    });
    project::clear_staging(&skills_dir);
    let added = added?;
    let entry = Locked {
        name: name.to_owned(),
        version: added.version.clone().unwrap_or_default(),
        source: resolved.source(),
        sha256: added.hash.clone(),
    };
    lock.put(entry);
    lock.write(&lock_path)
        .map_err(|e| Failure::Unreachable(format!("added, but {e}")))?;
    Ok(format!(
        "{name}@{} {} {}",
        added.version.unwrap_or_default(),
        added.dir.display(),
        added.hash
    ))
}

#[derive(Debug, Args)]
pub struct IndexArgs {
    /// A directory of skill archives (`*.zip`, as `skilld package` writes
    /// them), each with its signature (`ARCHIVE.minisig`) beside it when
    /// signed.
    #[arg(value_name = "DIR")]
    dir: PathBuf,
    /// Where to write the index (default `DIR/index.json`); `-` prints it.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
}

/// Writes a static registry's index of the archives in a directory.
pub fn index(args: &IndexArgs) -> ExitCode {
    report(write_index(args))
}

fn write_index(args: &IndexArgs) -> Result<String, Failure> {
    let index = index_of_dir(&args.dir)?;
    let mut text = serde_json::to_string_pretty(&index).map_err(|e| Failure::Unreachable(e.to_string()))?;
    text.push('\n');
    let output = args.output.clone().unwrap_or_else(|| args.dir.join("index.json"));
    if output.as_os_str() == "-" {
        return Ok(text);
    }
    std::fs::write(&output, text)
        .map_err(|e| Failure::Unreachable(format!("cannot write {}: {e}", output.display())))?;
    let versions: usize = index.skills.iter().map(|s| s.versions.len()).sum();
    Ok(format!(
        "{}: {} skill(s), {versions} version(s)\n",
        output.display(),
        index.skills.len()
    ))
}

/// Every archive of `dir`, checked, as an index: versions oldest first,
/// each skill's description its highest version's.
fn index_of_dir(dir: &Path) -> Result<crate::registry::index::Index, Failure> {
    use crate::registry::index::{FORMAT, Index, IndexSkill};
    let unreadable = |e: std::io::Error| Failure::Unreachable(format!("cannot read {}: {e}", dir.display()));
    let mut zips: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(unreadable)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "zip") && p.is_file())
        .collect();
    zips.sort();
    let mut skills: Vec<IndexSkill> = Vec::new();
    for zip in &zips {
        let (inspected, version) = archive_entry(zip)?;
        let skill = match skills.iter_mut().position(|s| s.name == inspected.name) {
            Some(i) => &mut skills[i],
            None => {
                skills.push(IndexSkill {
                    name: inspected.name.clone(),
                    description: String::new(),
                    versions: Vec::new(),
                });
                skills
                    .last_mut()
                    .ok_or_else(|| Failure::Unreachable("no skill".to_owned()))?
            }
        };
        if skill.versions.iter().any(|v| v.version == version.version) {
            return Err(Failure::Refused(format!(
                "{}@{} is in two archives; keep one",
                skill.name, version.version
            )));
        }
        skill.versions.push(version);
        skill.versions.sort_by(|a, b| semver_cmp(&a.version, &b.version));
        if skill
            .versions
            .last()
            .is_some_and(|v| v.hash.as_deref() == Some(&inspected.hash))
        {
            skill.description = inspected.description;
        }
    }
    skills.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Index {
        format: FORMAT,
        skills,
    })
}

fn semver_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    semver::Version::parse(a)
        .ok()
        .cmp(&semver::Version::parse(b).ok())
}

/// One archive: what it holds, and its index entry.
fn archive_entry(zip: &Path) -> Result<(project::Inspected, crate::registry::index::IndexVersion), Failure> {
    let name = zip.display();
    let mut file = std::fs::File::open(zip).map_err(|e| Failure::Unreachable(format!("{name}: {e}")))?;
    let sha256 = crate::install::archive::sha256_of(&mut file)
        .map_err(|e| Failure::Unreachable(format!("{name}: {e}")))?;
    let inspected = project::inspect(file, &crate::install::unpack::UnpackLimits::default())
        .map_err(|e| Failure::Refused(format!("{name}: {}", Failure::from(e).sentence())))?;
    let Some(version) = inspected
        .version
        .clone()
        .filter(|v| crate::catalog::installed::valid_version(v))
    else {
        return Err(Failure::Refused(format!(
            "{name}: its skill has no semver version"
        )));
    };
    let signature_file = PathBuf::from(format!("{}.minisig", zip.display()));
    let signature = match std::fs::read_to_string(&signature_file) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Failure::Unreachable(format!("{}: {e}", signature_file.display()))),
    };
    let file_name = zip
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let entry = crate::registry::index::IndexVersion {
        version,
        url: utf8_percent_encode(&file_name),
        sha256: Some(sha256),
        hash: Some(inspected.hash.clone()),
        signature,
    };
    Ok((inspected, entry))
}

/// A file name as a relative URL.
fn utf8_percent_encode(name: &str) -> String {
    percent_encoding::utf8_percent_encode(name, percent_encoding::NON_ALPHANUMERIC)
        .to_string()
        .replace("%2E", ".")
        .replace("%2D", "-")
        .replace("%5F", "_")
}
