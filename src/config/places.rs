//! Where the server keeps its files and its run log, and where it is
//! reached: the top-level keys no other module owns, layered here over
//! defaults read from this machine (its home, the git root of the current
//! directory).

use super::{FileConfig, ServeArgs};
use crate::catalog::Root;
use crate::setting::SettingError;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// The default `--bind`.
pub const DEFAULT_BIND: &str = "127.0.0.1:8080";

/// Where the server keeps its files and its run log, and where it is
/// reached.
pub(super) struct Places {
    pub data_dir: PathBuf,
    pub workspace: PathBuf,
    pub scratch_dir: PathBuf,
    pub database_url: String,
    /// Not yet checked for tokens: see [`super::ConfigError::Unprotected`].
    pub bind: SocketAddr,
    pub public_url: Option<String>,
}

impl Places {
    /// Each flag over the file over the default. Paths are absolute,
    /// because children run elsewhere: a relative path handed to one (its
    /// run directory, its working directory) would be read against the
    /// child's working directory, not the server's.
    pub fn resolve(args: &ServeArgs, file: &FileConfig) -> Result<Self, SettingError> {
        let local = &args.local;
        let data_dir = absolute(
            local
                .data_dir
                .clone()
                .or(file.data_dir.clone())
                .unwrap_or_else(default_data_dir),
        );
        let workspace = absolute(
            local
                .workspace
                .clone()
                .or(file.workspace.clone())
                .unwrap_or_else(default_workspace),
        );
        let database_url = local
            .database
            .clone()
            .or(file.database.clone())
            .unwrap_or_else(|| format!("sqlite://{}", data_dir.join("skilld.db").display()));
        let scratch_dir = absolute(
            local
                .scratch_dir
                .clone()
                .or(file.scratch_dir.clone())
                .unwrap_or_else(|| default_scratch_dir(&data_dir)),
        );
        Ok(Self {
            bind: parse_bind(args.bind.as_ref().or(file.bind.as_ref()))?,
            public_url: public_url(local.public_url.as_ref().or(file.public_url.as_ref()))?,
            data_dir,
            workspace,
            scratch_dir,
            database_url,
        })
    }

    /// What no tool may touch: the server's own directories, its config
    /// file (`config`), the skills' `roots`, and a run log kept outside
    /// the data directory.
    pub fn protected(&self, config: Option<&Path>, roots: &[Root]) -> Vec<PathBuf> {
        let mut protected = vec![self.data_dir.clone(), self.scratch_dir.clone()];
        protected.extend(config.map(|c| absolute(c.to_path_buf())));
        protected.extend(roots.iter().map(|r| r.path.clone()));
        protected.extend(
            crate::store::sqlite_files(&self.database_url)
                .into_iter()
                .map(absolute),
        );
        protected
    }
}

/// The address to listen on, [`DEFAULT_BIND`] unless given.
fn parse_bind(given: Option<&String>) -> Result<SocketAddr, SettingError> {
    let text = given.map_or(DEFAULT_BIND, String::as_str);
    text.parse().map_err(|_| {
        SettingError::new(
            "bind",
            format!("--bind '{text}' is not an address such as 127.0.0.1:8080"),
        )
    })
}

/// Where people reach the server, if given, without a trailing `/`.
fn public_url(given: Option<&String>) -> Result<Option<String>, SettingError> {
    let Some(url) = given else {
        return Ok(None);
    };
    let ok = url
        .split_once("://")
        .is_some_and(|(scheme, rest)| matches!(scheme, "http" | "https") && !rest.is_empty());
    if !ok {
        return Err(SettingError::new(
            "public_url",
            format!("public_url '{url}' must be an http:// or https:// URL"),
        ));
    }
    Ok(Some(url.trim_end_matches('/').to_owned()))
}

fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// `$XDG_DATA_HOME/skilld`, else `~/.local/share/skilld`, else `./.skilld`.
pub fn default_data_dir() -> PathBuf {
    if let Some(x) = std::env::var_os("XDG_DATA_HOME").filter(|x| !x.is_empty()) {
        return PathBuf::from(x).join("skilld");
    }
    home().map_or_else(|| PathBuf::from(".skilld"), |h| h.join(".local/share/skilld"))
}

/// `path` made absolute against the current directory (as it stands);
/// unchanged when that cannot be read.
pub fn absolute(path: PathBuf) -> PathBuf {
    std::path::absolute(&path).unwrap_or(path)
}

/// The git root holding the current directory, else HOME (`docs/design.md` §3).
pub fn default_workspace() -> PathBuf {
    let cwd = std::env::current_dir().ok();
    if let Some(root) = cwd
        .as_deref()
        .and_then(|c| c.ancestors().find(|a| a.join(".git").exists()))
    {
        return root.to_path_buf();
    }
    home().or(cwd).unwrap_or_else(|| PathBuf::from("/"))
}

/// `<data dir>-runs`: outside the data directory, which no tool may read,
/// and on the same disk as it rather than in a `/tmp` that may be small
/// or shared.
/// Where the data directory's parent is not ours to write (`/data` in a
/// container), `$TMPDIR/skilld-runs-<uid>` instead.
fn default_scratch_dir(data_dir: &Path) -> PathBuf {
    let mut name = data_dir.file_name().unwrap_or_default().to_os_string();
    name.push("-runs");
    let beside = data_dir.with_file_name(name);
    let writable = |dir: &Path| nix::unistd::access(dir, nix::unistd::AccessFlags::W_OK).is_ok();
    if beside.is_dir() || beside.parent().is_some_and(writable) {
        return beside;
    }
    std::env::temp_dir().join(format!("skilld-runs-{}", nix::unistd::geteuid()))
}

/// `scheme://user:secret@host` → `scheme://user:***@host`.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let Some((auth, host)) = rest.split_once('@') else {
        return url.to_owned();
    };
    match auth.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_owned(),
    }
}

/// The secrets a database URL carries: the password of its user
/// (`scheme://user:PASSWORD@host`) and any `password=` parameter.
pub fn url_passwords(url: &str) -> Vec<&str> {
    let mut found = Vec::new();
    if let Some((_, rest)) = url.split_once("://")
        && let Some((auth, _)) = rest.split_once('@')
        && let Some((_, password)) = auth.split_once(':')
    {
        found.push(password);
    }
    if let Some((_, query)) = url.split_once('?') {
        found.extend(
            query
                .split('&')
                .filter_map(|pair| pair.split_once('='))
                .filter(|(key, _)| key.eq_ignore_ascii_case("password"))
                .map(|(_, value)| value),
        );
    }
    found.retain(|p| !p.is_empty());
    found
}
