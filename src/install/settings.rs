//! How uploads are taken: `[install]` of the config file over the
//! defaults, beside `review_uploads` and the policy of `[signatures]`.

use super::DepsSettings;
use super::signature::SignaturePolicy;
use super::unpack::UnpackLimits;
use serde::Deserialize;
use std::time::Duration;

/// How uploads are taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallSettings {
    pub limits: UnpackLimits,
    /// The largest upload body.
    pub max_upload_bytes: u64,
    /// Untrusted uploads wait for an admin's review before they serve.
    pub review_uploads: bool,
    pub deps: DepsSettings,
    /// The keys trusted to sign uploads, and whether a signature is required.
    pub signatures: SignaturePolicy,
}

impl Default for InstallSettings {
    fn default() -> Self {
        Self {
            limits: UnpackLimits::default(),
            max_upload_bytes: 64 * 1024 * 1024,
            review_uploads: false,
            deps: DepsSettings::default(),
            signatures: SignaturePolicy::default(),
        }
    }
}

/// `[install]`: what an upload may hold, and how its dependencies install.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstallConfig {
    /// The largest upload body (default 64 MiB).
    pub max_upload_bytes: Option<u64>,
    /// Entries an archive may hold (default 1000).
    pub max_entries: Option<usize>,
    /// Bytes it may unpack to (default 64 MiB).
    pub max_unpacked_bytes: Option<u64>,
    /// Unpacked over packed, past 1 MiB (default 100).
    pub max_ratio: Option<u64>,
    /// Each dependency installer's time limit (default 300 s).
    pub deps_timeout_secs: Option<u64>,
    /// What one version's dependencies may take on disk (default 1 GiB).
    pub deps_max_bytes: Option<u64>,
    /// The registry npm installs from, and every package of a
    /// `package-lock.json` must come from (default the npm registry).
    pub npm_registry: Option<String>,
}

impl InstallConfig {
    /// The settings: these over the defaults, with `review_uploads` and
    /// `signatures` as the config gives them.
    pub fn settings(&self, review_uploads: bool, signatures: SignaturePolicy) -> InstallSettings {
        let d = InstallSettings::default();
        InstallSettings {
            limits: UnpackLimits {
                max_entries: self.max_entries.unwrap_or(d.limits.max_entries),
                max_bytes: self.max_unpacked_bytes.unwrap_or(d.limits.max_bytes),
                max_ratio: self.max_ratio.unwrap_or(d.limits.max_ratio),
            },
            max_upload_bytes: self.max_upload_bytes.unwrap_or(d.max_upload_bytes),
            review_uploads,
            deps: DepsSettings {
                timeout: self.deps_timeout_secs.map_or(d.deps.timeout, Duration::from_secs),
                max_bytes: self.deps_max_bytes.unwrap_or(d.deps.max_bytes),
                npm_registry: self.npm_registry.clone().unwrap_or(d.deps.npm_registry),
                ..d.deps
            },
            signatures,
        }
    }
}
