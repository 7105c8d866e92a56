//! Each setting's layers: its flag (with its environment variable) over
//! the file's value, handed to the module that owns the setting, which
//! parses it, fills in its defaults and says what is wrong with it. For
//! the keys at the file's top level, the defaults they go over are their
//! owner's `Default`.

use super::places::{Places, absolute};
use super::{FileConfig, ServeArgs, SignatureArgs};
use crate::artifacts::{ArtifactStore, ArtifactsConfig};
use crate::catalog::{AgentTools, Root};
use crate::http::ServerLimits;
use crate::http::kit::guard::WebGuard;
use crate::install::InstallSettings;
use crate::install::signature::{SignaturePolicy, SignaturesConfig};
use crate::invoke::PreGrant;
use crate::notify::Target;
use crate::oauth::OAuthSettings;
use crate::oauth::settings::IssuerConfig;
use crate::retention::{RetentionConfig, RetentionSettings};
use crate::setting::{SettingError, at_least_one};
use crate::skill::{DEFAULT_MAX_TIMEOUT_SECS, Runtimes, SkillRules};
use std::path::Path;
use std::time::Duration;

/// A variable of this process's environment, when set to something.
fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// `[oauth]`; issuers given by flag replace the file's, with defaults.
pub fn oauth(args: &ServeArgs, file: &FileConfig) -> Result<Option<OAuthSettings>, SettingError> {
    let mut section = file.oauth.clone().unwrap_or_default();
    if !args.oauth_issuers.is_empty() {
        section.issuers = args
            .oauth_issuers
            .iter()
            .map(|i| i.trim())
            .filter(|i| !i.is_empty())
            .map(IssuerConfig::new)
            .collect();
    }
    section.resolve()
}

/// The skill roots: the flags' `[TRUST=]DIR`s, else the file's, else the
/// default sources.
pub fn roots(args: &ServeArgs, file: &FileConfig, places: &Places) -> Result<Vec<Root>, SettingError> {
    let given = if args.local.skills.is_empty() {
        file.skills.as_deref().unwrap_or_default()
    } else {
        &args.local.skills
    };
    crate::catalog::configured_roots(given, &places.workspace, &places.data_dir)
}

/// `[install]`, `review_uploads` and `[signatures]`.
pub fn install(args: &ServeArgs, file: &FileConfig) -> Result<InstallSettings, SettingError> {
    let section = file.install.clone().unwrap_or_default();
    Ok(section.settings(
        file.review_uploads.unwrap_or(false),
        signatures(&args.signatures, file)?,
    ))
}

/// `[signatures]`; keys given by flag replace the file's.
pub fn signatures(args: &SignatureArgs, file: &FileConfig) -> Result<SignaturePolicy, SettingError> {
    let section = file.signatures.clone().unwrap_or_default();
    SignaturesConfig {
        trusted_keys: if args.trusted_keys.is_empty() {
            section.trusted_keys
        } else {
            Some(args.trusted_keys.clone())
        },
        required: args.require_signatures.or(section.required),
    }
    .resolve()
}

/// `[retention]`, the export made absolute against this directory.
pub fn retention(args: &ServeArgs, file: &FileConfig) -> Result<RetentionSettings, SettingError> {
    let section = file.retention.clone().unwrap_or_default();
    RetentionConfig {
        max_age: args.retention_max_age.clone().or(section.max_age),
        // A flag's count is text, as `"off"` is in the file.
        max_runs: args
            .retention_max_runs
            .clone()
            .map(toml::Value::String)
            .or(section.max_runs),
        export: args.retention_export.clone().or(section.export).map(absolute),
        ..section
    }
    .resolve()
}

/// `[artifacts]`, and the variables its keys were read from, to wipe.
pub fn artifacts(args: &ServeArgs, file: &FileConfig) -> Result<(ArtifactStore, Vec<String>), SettingError> {
    let section = file.artifacts.clone().unwrap_or_default();
    ArtifactsConfig {
        bucket: args.artifact_bucket.clone().or(section.bucket),
        endpoint: args.artifact_endpoint.clone().or(section.endpoint),
        region: args.artifact_region.clone().or(section.region),
        ..section
    }
    .resolve(env)
}

/// `[[grants]]`, then `--approve-skill`'s.
pub fn grants(args: &ServeArgs, file: &FileConfig) -> Result<Vec<PreGrant>, SettingError> {
    PreGrant::configured(
        file.grants.as_deref().unwrap_or_default(),
        &args.local.approve_skills,
    )
}

/// The `[[notify]]` webhooks, their `secret_env`s read now.
pub fn notify(file: &FileConfig) -> Result<Vec<Target>, SettingError> {
    Target::resolve_all(file.notify.as_deref().unwrap_or_default(), env)
}

/// The allowed origins: the flags', else the file's.
pub fn allowed_origins(args: &ServeArgs, file: &FileConfig) -> Result<Vec<String>, SettingError> {
    let given = if args.allowed_origins.is_empty() {
        file.allowed_origins.as_deref().unwrap_or_default()
    } else {
        &args.allowed_origins
    };
    WebGuard::allowed_origins(given)
}

/// The tool policy of callers that state none: the flag's list, else the
/// file's, else unstated.
pub fn agent_tools(args: &ServeArgs, file: &FileConfig) -> AgentTools {
    match (&args.local.agent_tools, &file.agent_tools) {
        (Some(list), _) => AgentTools::parse(list),
        (None, Some(names)) => AgentTools::stated(names),
        (None, None) => AgentTools::unstated(),
    }
}

/// The ceiling on any skill's timeout.
pub fn max_timeout(args: &ServeArgs, file: &FileConfig) -> Result<u64, SettingError> {
    let secs = args.local.max_timeout_secs.or(file.max_timeout_secs);
    at_least_one("max_timeout_secs", secs.unwrap_or(DEFAULT_MAX_TIMEOUT_SECS))
}

/// The script runtimes: the file's replace the defaults by extension.
pub fn runtimes(file: &FileConfig) -> Result<Runtimes, SettingError> {
    Runtimes::configured(file.runtimes.clone().unwrap_or_default())
}

/// What skills must and get (seed 003's image allowlist and entrypoint
/// defaults): the file's over the defaults. Plain skills' dependencies
/// are prepared under `<data dir>/deps`.
pub fn rules(file: &FileConfig, data_dir: &Path, npm_registry: &str) -> Result<SkillRules, SettingError> {
    let mut rules = SkillRules {
        deps_dir: Some(data_dir.join("deps")),
        npm_registry: npm_registry.to_owned(),
        unrestricted_network: file
            .egress
            .as_ref()
            .map(|e| e.unrestricted.clone())
            .unwrap_or_default(),
        ..SkillRules::default()
    };
    if let Some(list) = &file.image_allowlist {
        rules.allow_images(list)?;
    }
    rules.entrypoint = rules.entrypoint.configured(
        file.entrypoint_timeout_secs,
        file.entrypoint_memory_bytes,
        file.entrypoint_cpu,
    )?;
    Ok(rules)
}

/// The run log's commit interval, refused past
/// [`MAX_COMMIT_INTERVAL`](crate::store::MAX_COMMIT_INTERVAL): another
/// instance reads a finished run as `running` for up to that long.
pub fn commit_interval(file: &FileConfig) -> Result<Duration, SettingError> {
    let interval = Duration::from_millis(file.run_log_commit_interval_ms.unwrap_or(0));
    if interval > crate::store::MAX_COMMIT_INTERVAL {
        return Err(SettingError::new(
            "run_log_commit_interval_ms",
            format!(
                "run_log_commit_interval_ms ({}) is more than {}",
                interval.as_millis(),
                crate::store::MAX_COMMIT_INTERVAL.as_millis()
            ),
        ));
    }
    Ok(interval)
}

/// What clients may hold of the server: the file's over the defaults.
pub fn limits(file: &FileConfig) -> Result<ServerLimits, SettingError> {
    let d = ServerLimits::default();
    let secs = |s: u64| Duration::from_secs(s.max(1));
    let max_mcp_sessions = file.max_mcp_sessions.unwrap_or(d.max_mcp_sessions).max(1);
    Ok(ServerLimits {
        max_connections: file.max_connections.unwrap_or(d.max_connections).max(1),
        header_timeout: file.header_timeout_secs.map_or(d.header_timeout, secs),
        max_mcp_sessions,
        max_mcp_sessions_per_caller: crate::share::configured(
            "max_mcp_sessions_per_caller",
            file.max_mcp_sessions_per_caller,
            d.max_mcp_sessions_per_caller,
            "max_mcp_sessions",
            max_mcp_sessions,
        )?,
    })
}
