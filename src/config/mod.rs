//! Typed configuration, resolved and checked once at start-up: each
//! setting's flag (or its environment variable) over the config file over
//! the default. This module only layers: the module that owns a setting
//! parses it, gives its default and says what is wrong with it
//! ([`SettingError`](crate::setting::SettingError)); a refused value
//! comes back as a [`ConfigError`] that says where it was set.

mod args;
mod error;
mod file;
mod places;
mod runs;
mod sections;
#[cfg(test)]
mod tests;

pub use crate::skill::DEFAULT_MAX_TIMEOUT_SECS;
pub use args::{LocalArgs, ServeArgs, SignatureArgs};
pub use error::{ConfigError, Origin};
pub use file::FileConfig;
pub use places::{DEFAULT_BIND, absolute, default_data_dir, default_workspace, redact_url, url_passwords};

use crate::auth::Auth;
use crate::catalog::{AgentTools, Root};
use crate::http::ServerLimits;
use crate::install::InstallSettings;
use crate::invoke::{PreGrant, RunSettings};
use crate::notify::Target;
use crate::oauth::OAuthSettings;
use crate::registry::RegistrySettings;
use crate::retention::RetentionSettings;
use crate::session::SessionSettings;
use crate::skill::{Runtimes, SkillRules};
use places::Places;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The resolved configuration.
#[derive(Clone)]
pub struct Config {
    pub bind: SocketAddr,
    pub roots: Vec<Root>,
    pub database_url: String,
    pub workspace: PathBuf,
    pub data_dir: PathBuf,
    pub insecure: bool,
    pub max_timeout_secs: u64,
    pub watch: bool,
    pub runtimes: Runtimes,
    /// The image allowlist, entrypoint defaults and where plain skills'
    /// dependencies are prepared.
    pub rules: SkillRules,
    pub run: RunSettings,
    pub shutdown_grace: Duration,
    /// See [`FileConfig::run_log_commit_interval_ms`].
    pub run_log_commit_interval: Duration,
    /// The file's and `SKILLD_TOKENS`' tokens, merged; open when none
    /// (and no OAuth issuer is configured).
    pub auth: Arc<Auth>,
    /// The OAuth issuers whose access tokens are taken too; the verifier
    /// is made once the server's address is known.
    pub oauth: Option<OAuthSettings>,
    /// Origins whose pages may call a server without tokens, as
    /// `scheme://host[:port]`, lowercased.
    pub allowed_origins: Vec<String>,
    /// Where people reach this server, without a trailing `/`; `None`:
    /// the address it listens on, once bound (`--bind` may name port 0).
    pub public_url: Option<String>,
    /// The `[[notify]]` webhooks.
    pub notify: Vec<Target>,
    /// Environment variables the config named as holding secrets
    /// (`secret_env`), to wipe once read.
    pub secret_variables: Vec<String>,
    /// How `POST /skills` takes uploads.
    pub install: InstallSettings,
    /// Connections and MCP sessions clients may hold.
    pub limits: ServerLimits,
    /// The tool policy of callers that state none.
    pub agent_tools: AgentTools,
    /// What the run log keeps.
    pub retention: RetentionSettings,
    /// The operator's pre-approvals: `[[grants]]`, then `--approve-skill`.
    pub grants: Vec<PreGrant>,
    /// The `[[registries]]` and how long their indexes are kept.
    pub registries: RegistrySettings,
    /// `[sessions]`.
    pub sessions: SessionSettings,
}

/// Database URLs may carry a password; it never reaches a log.
impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("bind", &self.bind)
            .field("roots", &self.roots)
            .field("database_url", &redact_url(&self.database_url))
            .field("workspace", &self.workspace)
            .field("data_dir", &self.data_dir)
            .field("insecure", &self.insecure)
            .field("max_timeout_secs", &self.max_timeout_secs)
            .field("watch", &self.watch)
            .field("auth", &self.auth)
            .field("oauth", &self.oauth)
            .field("allowed_origins", &self.allowed_origins)
            .field("public_url", &self.public_url)
            .field("notify", &self.notify)
            .field("agent_tools", &self.agent_tools)
            .field("artifacts", &self.run.artifacts)
            .finish()
    }
}

impl Config {
    /// Resolves flags (and their environment variables) over the file over
    /// the defaults, and checks the result.
    pub fn resolve(args: &ServeArgs) -> Result<Self, ConfigError> {
        let file = FileConfig::load(args.local.config.as_deref())?;
        let at = |refused| ConfigError::setting(refused, args);
        let auth =
            Auth::configured(file.tokens.as_deref().unwrap_or_default(), args.tokens.as_ref()).map_err(at)?;
        let oauth = sections::oauth(args, &file).map_err(at)?;
        let insecure = args.insecure.or(file.insecure).unwrap_or(false);
        let places = Places::resolve(args, &file).map_err(at)?;
        // Beyond loopback, callers must be told apart, or the operator
        // must say that anyone may run tools.
        if !places.bind.ip().is_loopback() && !insecure && auth.is_open() && oauth.is_none() {
            return Err(ConfigError::Unprotected { bind: places.bind });
        }
        let roots = sections::roots(args, &file, &places).map_err(at)?;
        let install = sections::install(args, &file).map_err(at)?;
        let rules = sections::rules(&file, &places.data_dir, &install.deps.npm_registry).map_err(at)?;
        let mut run = runs::run(args, &file, &places).map_err(at)?;
        let (artifacts, artifact_secrets) = sections::artifacts(args, &file).map_err(at)?;
        run.artifacts = artifacts;
        let retention = sections::retention(args, &file).map_err(at)?;
        run.sandbox.protected = places.protected(args.local.config.as_deref(), &roots);
        // The export holds the log's history: no tool's to write.
        run.sandbox.protected.extend(retention.export.clone());
        let secret_variables = file
            .notify
            .iter()
            .flatten()
            .filter_map(|n| n.secret_env.clone())
            .chain(artifact_secrets)
            .collect();
        Ok(Self {
            max_timeout_secs: sections::max_timeout(args, &file).map_err(at)?,
            grants: sections::grants(args, &file).map_err(at)?,
            runtimes: sections::runtimes(&file).map_err(at)?,
            run_log_commit_interval: sections::commit_interval(&file).map_err(at)?,
            allowed_origins: sections::allowed_origins(args, &file).map_err(at)?,
            notify: sections::notify(&file).map_err(at)?,
            limits: sections::limits(&file).map_err(at)?,
            agent_tools: sections::agent_tools(args, &file),
            sessions: file.sessions.clone().unwrap_or_default(),
            registries: RegistrySettings::configured(file.registries.clone(), file.registry_ttl_secs),
            watch: !args.local.no_watch.or(file.no_watch).unwrap_or(false),
            shutdown_grace: Duration::from_secs(file.shutdown_grace_secs.unwrap_or(10)),
            auth: Arc::new(auth),
            bind: places.bind,
            public_url: places.public_url,
            database_url: places.database_url,
            workspace: places.workspace,
            data_dir: places.data_dir,
            oauth,
            insecure,
            roots,
            rules,
            run,
            retention,
            install,
            secret_variables,
        })
    }
}

/// What `skilld check` lints by: the runtimes and rules of the config
/// file (`--config`), or the defaults, with plain skills' dependencies
/// looked for where that server would prepare them.
pub fn lint_settings(config: Option<&Path>) -> Result<(Runtimes, SkillRules), ConfigError> {
    let file = FileConfig::load(config)?;
    let args = ServeArgs {
        local: LocalArgs {
            config: config.map(Path::to_path_buf),
            ..LocalArgs::default()
        },
        ..ServeArgs::default()
    };
    let at = |refused| ConfigError::setting(refused, &args);
    let data_dir = std::env::var_os("SKILLD_DATA_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or(file.data_dir.clone())
        .unwrap_or_else(default_data_dir);
    let registry = file
        .install
        .as_ref()
        .and_then(|i| i.npm_registry.clone())
        .unwrap_or_else(|| crate::deps::DEFAULT_NPM_REGISTRY.to_owned());
    let rules = sections::rules(&file, &absolute(data_dir), &registry).map_err(at)?;
    Ok((sections::runtimes(&file).map_err(at)?, rules))
}
