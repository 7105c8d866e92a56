//! Registries: where `skilld search`, `skilld install NAME[@VERSION]` and
//! `skilld add` find skills. A registry is an index (`index.json`, see
//! [`index`]) at an address: a static file on any host, a `file://` path,
//! or another skilld (`http://HOST:PORT`, which serves `/index.json`).
//! Registries are asked in the order configured; each index is kept in the
//! store for a ttl (seed 002: one hour), and a registry that cannot be
//! reached is answered from what it said last.

pub mod index;
pub mod lock;

use crate::install::client::{self, ClientError, Fetched};
use crate::store::{CachedIndex, IndexCache, StoreError};
use chrono::Utc;
use index::{Index, IndexError, IndexSkill, IndexVersion};
use serde::Deserialize;
use std::io::{Read, Seek};
use std::sync::Arc;
use std::time::Duration;

/// Seed 002's registry cache ttl.
pub const DEFAULT_TTL: Duration = Duration::from_secs(3600);

/// `[[registries]]`: one registry, and the token it takes.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistrySource {
    /// The index's address; one not ending in `.json` gets `/index.json`.
    pub url: String,
    /// A bearer token, sent to this registry's own host only.
    #[serde(default)]
    pub token: Option<String>,
}

impl RegistrySource {
    pub fn new(url: &str) -> Self {
        Self {
            url: url.to_owned(),
            token: None,
        }
    }

    /// The index's address.
    pub fn index_url(&self) -> String {
        let url = self.url.trim();
        if url.ends_with(".json") {
            url.to_owned()
        } else {
            format!("{}/index.json", url.trim_end_matches('/'))
        }
    }
}

/// The registries, in the order they are asked, and how long an index is
/// kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistrySettings {
    pub sources: Vec<RegistrySource>,
    pub ttl: Duration,
}

impl RegistrySettings {
    /// The config's `[[registries]]` and `registry_ttl_secs` (0 keeps
    /// nothing), over the defaults: none, kept an hour.
    pub fn configured(sources: Option<Vec<RegistrySource>>, ttl_secs: Option<u64>) -> Self {
        Self {
            sources: sources.unwrap_or_default(),
            ttl: ttl_secs.map_or(DEFAULT_TTL, Duration::from_secs),
        }
    }
}

impl Default for RegistrySettings {
    fn default() -> Self {
        Self {
            sources: Vec::new(),
            ttl: DEFAULT_TTL,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("no registry is configured: give --registry URL, or [[registries]] in the config")]
    NoRegistries,
    #[error("{url}: {why}")]
    Unreachable { url: String, why: String },
    #[error("{url}: {why}")]
    BadIndex {
        url: String,
        #[source]
        why: IndexError,
    },
    #[error("no registry has {0}")]
    NotFound(String),
    #[error("{0}")]
    Tampered(String),
    /// The archive's host refused it (404, 403, …).
    #[error("the archive: {0}")]
    Archive(String),
    #[error("the registry cache: {0}")]
    Store(#[from] StoreError),
}

/// An index as read, and whether it came from the cache.
pub struct Loaded {
    pub url: String,
    pub index: Index,
    /// Versions left out as unusable, each with why.
    pub skipped: Vec<String>,
    /// `Some(why)` when the registry could not be asked and its last
    /// answer was used.
    pub stale: Option<String>,
}

/// A version chosen to install: where its archive is, and what it must be.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The registry's index address (the lock's `registry+` source).
    pub registry: String,
    pub name: String,
    pub description: String,
    pub version: IndexVersion,
    /// The archive's absolute address.
    pub archive_url: String,
    /// The registry's token, when the archive is on the registry's host.
    pub token: Option<String>,
    /// What the user should hear: an index read from the cache because
    /// the registry could not be asked, versions of this skill left out.
    pub notes: Vec<String>,
}

impl Resolved {
    /// `registry+INDEX_URL`, as `skills.lock` records it.
    pub fn source(&self) -> String {
        format!("registry+{}", self.registry)
    }
}

/// The registries over the store that caches them.
pub struct Registries {
    settings: RegistrySettings,
    /// Each index as last fetched: all this holds of the store.
    cache: Arc<dyn IndexCache>,
    /// Ask every registry afresh, whatever the cache holds.
    pub refresh: bool,
}

impl Registries {
    pub fn new(settings: RegistrySettings, cache: Arc<dyn IndexCache>) -> Self {
        Self {
            settings,
            cache,
            refresh: false,
        }
    }

    pub fn sources(&self) -> &[RegistrySource] {
        &self.settings.sources
    }

    /// Asks `url` too (last), unless it is configured already.
    pub fn add_source(&mut self, url: &str) {
        if !self.settings.sources.iter().any(|s| s.index_url() == url) {
            self.settings.sources.push(RegistrySource::new(url));
        }
    }

    /// Every registry's index, in order: those that cannot be read at all
    /// are in the second list, with why.
    pub async fn load_all(&self) -> Result<(Vec<Loaded>, Vec<RegistryError>), RegistryError> {
        if self.settings.sources.is_empty() {
            return Err(RegistryError::NoRegistries);
        }
        let (mut loaded, mut failed) = (Vec::new(), Vec::new());
        for source in &self.settings.sources {
            match self.load(source).await {
                Ok(l) => loaded.push(l),
                Err(RegistryError::Store(e)) => return Err(RegistryError::Store(e)),
                Err(e) => failed.push(e),
            }
        }
        Ok((loaded, failed))
    }

    /// The skills of every registry matching `query`, registry by registry.
    pub async fn search(
        &self,
        query: &str,
    ) -> Result<(Vec<(String, IndexSkill)>, Vec<RegistryError>), RegistryError> {
        let (loaded, failed) = self.load_all().await?;
        let hits = loaded
            .iter()
            .flat_map(|l| l.index.search(query).map(|s| (l.url.clone(), s.clone())))
            .collect();
        Ok((hits, failed))
    }

    /// The first registry, in order, holding `name` (at `version`, or its
    /// highest release); `only` limits the search to one index address.
    pub async fn resolve(
        &self,
        name: &str,
        version: Option<&str>,
        only: Option<&str>,
    ) -> Result<Resolved, RegistryError> {
        let wanted = match version {
            Some(v) => format!("{name}@{v}"),
            None => name.to_owned(),
        };
        let (mut unreachable, mut left_out) = (Vec::new(), Vec::new());
        for source in &self.settings.sources {
            if only.is_some_and(|url| url != source.index_url()) {
                continue;
            }
            let loaded = match self.load(source).await {
                Ok(l) => l,
                Err(RegistryError::Store(e)) => return Err(RegistryError::Store(e)),
                Err(e) => {
                    unreachable.push(e.to_string());
                    continue;
                }
            };
            let skipped = loaded
                .skipped
                .iter()
                .filter(|n| n.starts_with(&format!("{name}@")));
            left_out.extend(skipped.map(|n| format!("{}: {n}", loaded.url)));
            if let Some(mut found) = resolved_in(&loaded, source, name, version)? {
                found.notes.extend(
                    loaded
                        .stale
                        .iter()
                        .map(|why| format!("{}: its last answer is used: {why}", loaded.url)),
                );
                found.notes.append(&mut left_out);
                return Ok(found);
            }
        }
        if self.settings.sources.is_empty() {
            return Err(RegistryError::NoRegistries);
        }
        let why = match (only, unreachable.is_empty()) {
            (Some(url), _) if !self.settings.sources.iter().any(|s| s.index_url() == url) => {
                format!("{wanted} (the registry {url} is not configured)")
            }
            (_, true) => wanted,
            (_, false) => format!("{wanted} (not asked: {})", unreachable.join("; ")),
        };
        let why = match left_out.is_empty() {
            true => why,
            false => format!("{why} (left out as unusable: {})", left_out.join("; ")),
        };
        Err(RegistryError::NotFound(why))
    }

    /// A registry's index: from the cache while it is fresh, else asked
    /// (and cached); the cache's last copy when the registry cannot answer.
    pub async fn load(&self, source: &RegistrySource) -> Result<Loaded, RegistryError> {
        let url = source.index_url();
        let cached = self.cache.cached_index(&url).await?;
        let fresh = cached.as_ref().filter(|c| {
            let age = Utc::now().signed_duration_since(c.fetched_at);
            !self.refresh && age.to_std().is_ok_and(|age| age < self.settings.ttl)
        });
        if let Some(c) = fresh {
            return parsed(&url, c.body.as_bytes(), None);
        }
        match fetch_index(&url, source.token.as_deref()).await {
            Ok(body) => {
                let loaded = parsed(&url, &body, None)?;
                self.keep(&url, body).await?;
                Ok(loaded)
            }
            Err(e) => match cached {
                Some(c) => parsed(&url, c.body.as_bytes(), Some(e.to_string())),
                None => Err(e),
            },
        }
    }

    async fn keep(&self, url: &str, body: Vec<u8>) -> Result<(), RegistryError> {
        // A file on this machine is as quick to read as the cache.
        if self.settings.ttl.is_zero() || file_path(url).is_some() {
            return Ok(());
        }
        let body = String::from_utf8(body).map_err(|e| RegistryError::BadIndex {
            url: url.to_owned(),
            why: IndexError::Malformed(e.to_string()),
        })?;
        let at = Utc::now();
        self.cache
            .cache_index(CachedIndex {
                url: url.to_owned(),
                body,
                fetched_at: at,
            })
            .await?;
        Ok(())
    }
}

fn parsed(url: &str, body: &[u8], stale: Option<String>) -> Result<Loaded, RegistryError> {
    let (index, skipped) = Index::parse(body).map_err(|why| RegistryError::BadIndex {
        url: url.to_owned(),
        why,
    })?;
    Ok(Loaded {
        url: url.to_owned(),
        index,
        skipped,
        stale,
    })
}

/// `name` in one loaded index, its archive's address made absolute.
fn resolved_in(
    loaded: &Loaded,
    source: &RegistrySource,
    name: &str,
    version: Option<&str>,
) -> Result<Option<Resolved>, RegistryError> {
    let Some(skill) = loaded.index.skill(name) else {
        return Ok(None);
    };
    let Some(chosen) = skill.version(version) else {
        return Ok(None);
    };
    let archive_url = join(&loaded.url, &chosen.url)?;
    let same_host = same_origin(&loaded.url, &archive_url);
    Ok(Some(Resolved {
        registry: loaded.url.clone(),
        name: skill.name.clone(),
        description: skill.description.clone(),
        version: chosen.clone(),
        archive_url,
        token: source.token.clone().filter(|_| same_host),
        notes: Vec::new(),
    }))
}

/// `relative` resolved against the index's address.
fn join(base: &str, relative: &str) -> Result<String, RegistryError> {
    let bad = |why: String| RegistryError::BadIndex {
        url: base.to_owned(),
        why: IndexError::Malformed(why),
    };
    let base_url = url::Url::parse(base).map_err(|e| bad(format!("its address: {e}")))?;
    let joined = base_url
        .join(relative)
        .map_err(|e| bad(format!("the archive address {relative}: {e}")))?;
    match joined.scheme() {
        // A remote index must not make this machine read its own files.
        "file" if base_url.scheme() != "file" => Err(bad(format!(
            "the archive address {relative} is a local file; only a file:// index may name one"
        ))),
        "http" | "https" | "file" => Ok(joined.to_string()),
        other => Err(bad(format!("the archive address {relative} is {other}:"))),
    }
}

fn same_origin(a: &str, b: &str) -> bool {
    match (url::Url::parse(a), url::Url::parse(b)) {
        (Ok(a), Ok(b)) => a.origin() == b.origin(),
        _ => false,
    }
}

/// Reads an index from its address: `http(s)://` or `file://`.
async fn fetch_index(url: &str, token: Option<&str>) -> Result<Vec<u8>, RegistryError> {
    let unreachable = |why: String| RegistryError::Unreachable {
        url: url.to_owned(),
        why,
    };
    if let Some(path) = file_path(url) {
        let path = path?;
        let mut body = Vec::new();
        std::fs::File::open(&path)
            .and_then(|f| f.take(index::MAX_INDEX_BYTES as u64 + 1).read_to_end(&mut body))
            .map_err(|e| unreachable(e.to_string()))?;
        return Ok(body);
    }
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(unreachable(
            "a registry's address is http://, https:// or file://".to_owned(),
        ));
    }
    client::get(url, token, index::MAX_INDEX_BYTES + 1)
        .await
        .map_err(|e| match e {
            ClientError::Unreachable { why, .. } => unreachable(why),
            other => unreachable(other.to_string()),
        })
}

/// `Some` for a `file://` address: its path, or why it has none.
fn file_path(url: &str) -> Option<Result<std::path::PathBuf, RegistryError>> {
    let parsed = url::Url::parse(url).ok().filter(|u| u.scheme() == "file")?;
    Some(parsed.to_file_path().map_err(|()| RegistryError::Unreachable {
        url: url.to_owned(),
        why: format!("{url} is not a local path"),
    }))
}

/// Downloads a resolved version's archive (telling `observer` how it
/// goes) and checks its SHA-256 against the index's; the skill hash, if the index gives one, goes on to the
/// installer, which checks it after unpacking.
pub async fn download(
    resolved: &Resolved,
    max_bytes: u64,
    observer: &dyn client::Observer,
) -> Result<Fetched, RegistryError> {
    let url = &resolved.archive_url;
    let mut fetched = match file_path(url) {
        Some(path) => read_local(url, path, max_bytes)?,
        None => client::download(url, resolved.token.as_deref(), max_bytes, observer)
            .await
            .map_err(|e| match e {
                ClientError::Refused { status, .. } if status < 500 => RegistryError::Archive(e.to_string()),
                other => RegistryError::Unreachable {
                    url: url.clone(),
                    why: other.to_string(),
                },
            })?,
    };
    if let Some(want) = &resolved.version.sha256 {
        let got = crate::install::archive::sha256_of(&mut fetched.file).map_err(|e| {
            RegistryError::Unreachable {
                url: url.clone(),
                why: e.to_string(),
            }
        })?;
        if !got.eq_ignore_ascii_case(want) {
            return Err(RegistryError::Tampered(format!(
                "{url} is not the archive the registry lists: its sha256 is {got}, the index says {want}"
            )));
        }
    }
    fetched.hash = resolved.version.hash.clone();
    Ok(fetched)
}

fn read_local(
    url: &str,
    path: Result<std::path::PathBuf, RegistryError>,
    max_bytes: u64,
) -> Result<Fetched, RegistryError> {
    let unreachable = |why: String| RegistryError::Unreachable {
        url: url.to_owned(),
        why,
    };
    let path = path?;
    let mut file = tempfile::tempfile().map_err(|e| unreachable(e.to_string()))?;
    let copied = std::fs::File::open(&path)
        .and_then(|f| std::io::copy(&mut f.take(max_bytes + 1), &mut file))
        .map_err(|e| unreachable(e.to_string()))?;
    if copied > max_bytes {
        return Err(unreachable(format!("it is over {max_bytes} bytes")));
    }
    file.rewind().map_err(|e| unreachable(e.to_string()))?;
    Ok(Fetched { file, hash: None })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_names_its_index() {
        assert_eq!(
            RegistrySource::new("http://h:1").index_url(),
            "http://h:1/index.json"
        );
        assert_eq!(
            RegistrySource::new("http://h:1/api/").index_url(),
            "http://h:1/api/index.json"
        );
        assert_eq!(
            RegistrySource::new("https://h/skills.json").index_url(),
            "https://h/skills.json"
        );
    }

    #[test]
    fn archive_addresses_resolve_against_the_index() {
        let base = "http://h:1/api/index.json";
        assert_eq!(
            join(base, "skills/a@1.0.0/archive").unwrap(),
            "http://h:1/api/skills/a@1.0.0/archive"
        );
        assert_eq!(join(base, "/x.zip").unwrap(), "http://h:1/x.zip");
        assert_eq!(join(base, "https://cdn/x.zip").unwrap(), "https://cdn/x.zip");
        assert!(join(base, "javascript:alert(1)").is_err());
        assert!(join(base, "file:///etc/passwd").is_err());
        assert_eq!(
            join("file:///srv/r/index.json", "a.zip").unwrap(),
            "file:///srv/r/a.zip"
        );
        assert!(same_origin(base, "http://h:1/x.zip"));
        assert!(!same_origin(base, "http://h:2/x.zip"));
        assert!(!same_origin(base, "https://h:1/x.zip"));
    }
}
