//! `[artifacts]` of the config file: an S3-compatible bucket for
//! entrypoints' artifacts, or none, and they stay on this server's disk.
//! The keys come from `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY`, or
//! from a shared credentials file; never from the config file itself.

use super::{ArtifactStore, Credentials, S3Settings, S3Store};
use crate::setting::SettingError;
use serde::Deserialize;
use std::path::PathBuf;
use std::sync::Arc;

/// `[artifacts]`, with the flags of its keys already over it.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArtifactsConfig {
    /// The bucket (default: none, artifacts stay on this server's disk).
    pub bucket: Option<String>,
    /// The bucket's service, `http(s)://host[:port]` (default: AWS S3).
    pub endpoint: Option<String>,
    /// The bucket's region (default `us-east-1`).
    pub region: Option<String>,
    /// Object keys start with it: `<prefix>/runs/<run id>/<path>`.
    pub prefix: Option<String>,
    /// An AWS shared credentials file (`aws_access_key_id`,
    /// `aws_secret_access_key`, `aws_session_token`).
    pub credentials_file: Option<PathBuf>,
    /// Its section to read (default `default`).
    pub profile: Option<String>,
}

impl ArtifactsConfig {
    /// Where artifacts go: the bucket when one is named, else this
    /// server's disk; with the environment variables (read through `env`)
    /// the bucket's keys came from, to wipe once read.
    pub fn resolve(
        self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<(ArtifactStore, Vec<String>), SettingError> {
        let Some(bucket) = self.bucket else {
            if self.endpoint.is_some() || self.region.is_some() || self.credentials_file.is_some() {
                return Err(SettingError::new(
                    "artifacts.bucket",
                    "the artifact endpoint, region or credentials are set, but no artifact bucket",
                ));
            }
            return Ok((ArtifactStore::Local, Vec::new()));
        };
        let credentials =
            Credentials::resolve(env, self.credentials_file.as_deref(), self.profile.as_deref())?;
        let from_env = credentials.as_ref().is_some_and(|c| c.source.starts_with("AWS_"));
        let secrets = if from_env {
            vec!["AWS_SECRET_ACCESS_KEY".to_owned(), "AWS_SESSION_TOKEN".to_owned()]
        } else {
            Vec::new()
        };
        let store = S3Store::new(S3Settings {
            bucket,
            endpoint: self.endpoint,
            region: self.region,
            prefix: self.prefix.unwrap_or_default(),
            credentials,
        })?;
        Ok((ArtifactStore::S3(Arc::new(store)), secrets))
    }
}
