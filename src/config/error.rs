//! Why the configuration cannot be resolved, and where a refused value
//! was set: the module owning the setting says what is wrong with it
//! ([`SettingError`]); only the layering knows which layer gave it.

use super::ServeArgs;
use crate::setting::SettingError;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Why the configuration cannot be resolved. Each variant prints its
/// cause in its own message, so none is also its `source`: it would print
/// twice through `anyhow`'s `{:#}`.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file `--config` names cannot be read.
    #[error("cannot read config {}: {cause}", path.display())]
    Read { path: PathBuf, cause: std::io::Error },
    /// The file is not TOML, or holds a key or a type the format does not
    /// have (toml's message names the line and the key).
    #[error("invalid config {}: {cause}", path.display())]
    Parse {
        path: PathBuf,
        cause: Box<toml::de::Error>,
    },
    /// A value refused by the module that owns its setting.
    #[error("{refused}{origin}")]
    Setting { refused: SettingError, origin: Origin },
    /// A listening address beyond loopback, without tokens to tell
    /// callers apart and without `--insecure`.
    #[error(
        "refusing to listen on {bind} without tokens: anyone who can reach it could run tools; \
         configure tokens, bind to a loopback address, or pass --insecure"
    )]
    Unprotected { bind: SocketAddr },
}

impl ConfigError {
    /// `refused`, with where its value was set: the flag (or its
    /// variable) of its key when one was given, else the file.
    pub(super) fn setting(refused: SettingError, args: &ServeArgs) -> Self {
        let origin = match (flag_of(args, refused.key), &args.local.config) {
            (Some(Given::Flag(flag)), _) => Origin::Flag(flag),
            (Some(Given::Elsewhere), _) | (None, None) => Origin::Elsewhere,
            (None, Some(path)) => Origin::File(path.clone()),
        };
        Self::Setting { refused, origin }
    }

    /// The key of the setting refused, as the file spells it.
    pub fn key(&self) -> Option<&'static str> {
        match self {
            Self::Setting { refused, .. } => Some(refused.key),
            Self::Unprotected { .. } => Some("bind"),
            Self::Read { .. } | Self::Parse { .. } => None,
        }
    }
}

/// Where a refused value was set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A flag or its environment variable, both named.
    Flag(&'static str),
    /// The config file.
    File(PathBuf),
    /// A variable of its own (`SKILLD_TOKENS`, `AWS_ACCESS_KEY_ID`), which
    /// the message names.
    Elsewhere,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Flag(flag) => write!(f, " (from {flag})"),
            Self::File(path) => write!(f, " (in {})", path.display()),
            Self::Elsewhere => Ok(()),
        }
    }
}

/// What set a key when the file did not.
enum Given {
    Flag(&'static str),
    Elsewhere,
}

/// The flag (or variable) that set the file's `key`, when it was given.
fn flag_of(args: &ServeArgs, key: &str) -> Option<Given> {
    let (local, signatures) = (&args.local, &args.signatures);
    let (given, flag) = match key {
        "SKILLD_TOKENS" | "AWS_ACCESS_KEY_ID" => return Some(Given::Elsewhere),
        "bind" => (args.bind.is_some(), "--bind or SKILLD_BIND"),
        "skills" => (!local.skills.is_empty(), "--skills or SKILLD_SKILLS"),
        "max_timeout_secs" => (
            local.max_timeout_secs.is_some(),
            "--max-timeout-secs or SKILLD_MAX_TIMEOUT_SECS",
        ),
        "public_url" => (local.public_url.is_some(), "--public-url or SKILLD_PUBLIC_URL"),
        "sandbox" => (local.sandbox.is_some(), "--sandbox or SKILLD_SANDBOX"),
        "grants" => (
            !local.approve_skills.is_empty(),
            "--approve-skill or SKILLD_APPROVE_SKILLS",
        ),
        "allowed_origins" => (
            !args.allowed_origins.is_empty(),
            "--allowed-origin or SKILLD_ALLOWED_ORIGINS",
        ),
        "artifacts.bucket" => (
            args.artifact_bucket.is_some(),
            "--artifact-bucket or SKILLD_ARTIFACT_BUCKET",
        ),
        "artifacts.endpoint" => (
            args.artifact_endpoint.is_some(),
            "--artifact-endpoint or SKILLD_ARTIFACT_ENDPOINT",
        ),
        "oauth.issuers" => (
            !args.oauth_issuers.is_empty(),
            "--oauth-issuer or SKILLD_OAUTH_ISSUERS",
        ),
        "retention.max_age" => (
            args.retention_max_age.is_some(),
            "--retention-max-age or SKILLD_RETENTION_MAX_AGE",
        ),
        "retention.max_runs" => (
            args.retention_max_runs.is_some(),
            "--retention-max-runs or SKILLD_RETENTION_MAX_RUNS",
        ),
        "retention.export" => (
            args.retention_export.is_some(),
            "--retention-export or SKILLD_RETENTION_EXPORT",
        ),
        "signatures.trusted_keys" => (
            !signatures.trusted_keys.is_empty(),
            "--trusted-key or SKILLD_TRUSTED_KEYS",
        ),
        "signatures.required" => (
            signatures.require_signatures.is_some(),
            "--require-signatures or SKILLD_REQUIRE_SIGNATURES",
        ),
        _ => (false, ""),
    };
    given.then_some(Given::Flag(flag))
}
