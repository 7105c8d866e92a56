//! Artifacts in an S3-compatible bucket (AWS S3, MinIO, s3s, …): uploaded
//! when their run ends, handed out as presigned URLs, deleted by a sweep
//! once `artifact_ttl_secs` has passed. Every instance that shares the run
//! log and the bucket serves every run's files.

use super::Artifact;
use crate::fsafe::Listed;
use crate::setting::SettingError;
use chrono::{DateTime, Utc};
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as Key;
use object_store::signer::Signer;
use object_store::{ObjectStore, ObjectStoreExt};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use uuid::Uuid;

/// What the bucket failed at.
#[derive(Debug, thiserror::Error)]
pub enum BucketError {
    /// The file could not be read from the run's directory.
    #[error("{0}")]
    Read(String),
    #[error("no answer from the bucket within {0:?}")]
    Timeout(Duration),
    #[error("cannot presign a URL of the artifact bucket: {0}")]
    Presign(object_store::Error),
    #[error("cannot list the artifact bucket: {0}")]
    List(object_store::Error),
    #[error("cannot delete {key}: {source}")]
    Delete { key: Key, source: object_store::Error },
    /// The bucket refused or did not answer (no such bucket, keys refused).
    #[error(transparent)]
    Store(#[from] object_store::Error),
}

/// The longest a presigned URL may live (SigV4's limit).
const MAX_PRESIGN: Duration = Duration::from_secs(7 * 24 * 3600);
/// How long one upload may take, retries included.
const PUT_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a run's uploads may hold up its end, all together.
const UPLOADS_TIMEOUT: Duration = Duration::from_secs(600);

/// Where the bucket is and who the server is to it.
#[derive(Clone)]
pub struct S3Settings {
    pub bucket: String,
    /// `http(s)://host[:port]` of an S3-compatible service; `None` is AWS.
    pub endpoint: Option<String>,
    /// Default `us-east-1`.
    pub region: Option<String>,
    /// Keys start with it (then `/runs/<id>/<path>`), so that one bucket
    /// can hold several deployments' artifacts.
    pub prefix: String,
    /// `None`: the host's own (an instance role, web identity).
    pub credentials: Option<Credentials>,
}

/// Keys to the bucket.
#[derive(Clone)]
pub struct Credentials {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
    /// Where they came from, for the log.
    pub source: String,
}

/// Never the keys: where they came from.
impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("source", &self.source)
            .field("access_key_id", &"***")
            .field("secret_access_key", &"***")
            .finish()
    }
}

impl fmt::Debug for S3Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Settings")
            .field("bucket", &self.bucket)
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("prefix", &self.prefix)
            .field("credentials", &self.credentials)
            .finish()
    }
}

impl Credentials {
    /// The keys in `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` (and
    /// `AWS_SESSION_TOKEN`) as `env` reads them, else in `profile`
    /// (default `default`) of the shared credentials file `file`, else
    /// none (the host's own are used).
    pub fn resolve(
        env: impl Fn(&str) -> Option<String>,
        file: Option<&Path>,
        profile: Option<&str>,
    ) -> Result<Option<Self>, SettingError> {
        match (env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY")) {
            (Some(access_key_id), Some(secret_access_key)) => {
                return Ok(Some(Self {
                    access_key_id,
                    secret_access_key,
                    session_token: env("AWS_SESSION_TOKEN"),
                    source: "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY".to_owned(),
                }));
            }
            (None, None) => {}
            _ => {
                return Err(SettingError::new(
                    "AWS_ACCESS_KEY_ID",
                    "set both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or neither",
                ));
            }
        }
        let Some(file) = file else { return Ok(None) };
        let refused = |why: String| SettingError::new("artifacts.credentials_file", why);
        let text = std::fs::read_to_string(file).map_err(|e| {
            refused(format!(
                "cannot read the credentials file {}: {e}",
                file.display()
            ))
        })?;
        let profile = profile.unwrap_or("default");
        Self::from_ini(&text, profile)
            .map(|mut c| {
                c.source = format!("{} [{profile}]", file.display());
                Some(c)
            })
            .ok_or_else(|| {
                refused(format!(
                    "the credentials file {} has no aws_access_key_id and aws_secret_access_key in [{profile}]",
                    file.display()
                ))
            })
    }

    /// The keys of section `[profile]` of an AWS shared credentials file.
    fn from_ini(text: &str, profile: &str) -> Option<Self> {
        let (mut id, mut secret, mut token) = (None, None, None);
        let mut inside = false;
        for line in text.lines().map(str::trim) {
            if let Some(section) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                inside = section.trim() == profile;
                continue;
            }
            let Some((name, value)) = line.split_once('=').filter(|_| inside) else {
                continue;
            };
            let value = Some(value.trim().to_owned());
            match name.trim() {
                "aws_access_key_id" => id = value,
                "aws_secret_access_key" => secret = value,
                "aws_session_token" => token = value,
                _ => {}
            }
        }
        Some(Self {
            access_key_id: id?,
            secret_access_key: secret?,
            session_token: token,
            source: String::new(),
        })
    }
}

/// A bucket to keep artifacts in.
pub struct S3Store {
    client: AmazonS3,
    settings: S3Settings,
}

impl fmt::Debug for S3Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.settings.fmt(f)
    }
}

impl S3Store {
    /// A client of the bucket `settings` name; nothing is sent yet.
    pub fn new(settings: S3Settings) -> Result<Self, SettingError> {
        let mut builder = AmazonS3Builder::new()
            .with_bucket_name(&settings.bucket)
            .with_region(settings.region.as_deref().unwrap_or("us-east-1"))
            .with_http_connector(super::connector::Connector)
            .with_retry(object_store::RetryConfig {
                max_retries: 3,
                retry_timeout: Duration::from_secs(30),
                ..Default::default()
            });
        if let Some(endpoint) = &settings.endpoint {
            let http = endpoint.starts_with("http://");
            if !http && !endpoint.starts_with("https://") {
                return Err(SettingError::new(
                    "artifacts.endpoint",
                    format!("artifact endpoint '{endpoint}' is not an http:// or https:// URL"),
                ));
            }
            builder = builder.with_endpoint(endpoint).with_allow_http(http);
        }
        if let Some(c) = &settings.credentials {
            builder = builder
                .with_access_key_id(&c.access_key_id)
                .with_secret_access_key(&c.secret_access_key);
            if let Some(token) = &c.session_token {
                builder = builder.with_token(token);
            }
        }
        let client = builder.build().map_err(|e| {
            SettingError::new(
                "artifacts.bucket",
                format!("cannot use the artifact bucket '{}': {e}", settings.bucket),
            )
        })?;
        Ok(Self { client, settings })
    }

    /// The object of file `path` of run `id`.
    fn key(&self, id: Uuid, path: &str) -> Key {
        let id = id.to_string();
        let parts = self
            .settings
            .prefix
            .split('/')
            .chain(["runs", id.as_str()])
            .chain(path.split('/'))
            .filter(|p| !p.is_empty())
            .map(object_store::path::PathPart::from)
            .collect::<Vec<_>>();
        Key::from_iter(parts)
    }

    /// Where every run's objects lie.
    fn runs_prefix(&self) -> Key {
        let parts = self
            .settings
            .prefix
            .split('/')
            .chain(["runs"])
            .filter(|p| !p.is_empty())
            .map(object_store::path::PathPart::from)
            .collect::<Vec<_>>();
        Key::from_iter(parts)
    }

    /// Uploads the files `found` of run `id` (read beneath `scratch` as
    /// the files route reads them: no link, one link, at most
    /// [`super::MAX_ARTIFACT_BYTES`]) and lists each with a presigned URL
    /// good until `expires_at`. A file that cannot be read or stored is
    /// left out, with a warning, as are those still waiting after
    /// [`UPLOADS_TIMEOUT`].
    pub async fn upload(
        &self,
        scratch: &Path,
        id: Uuid,
        found: Vec<Listed>,
        expires_at: DateTime<Utc>,
    ) -> Vec<Artifact> {
        let mut kept = Vec::with_capacity(found.len());
        let deadline = tokio::time::Instant::now() + UPLOADS_TIMEOUT;
        for file in found {
            if tokio::time::Instant::now() >= deadline {
                tracing::warn!(run = %id, path = %file.path, "the run's uploads took too long; the rest are left out");
                break;
            }
            match self
                .upload_one(scratch.to_path_buf(), id, &file.path, expires_at)
                .await
            {
                Ok(artifact) => kept.push(artifact),
                Err(why) => {
                    tracing::warn!(run = %id, path = %file.path, %why, "an artifact was not uploaded; it is left out")
                }
            }
        }
        kept
    }

    async fn upload_one(
        &self,
        scratch: PathBuf,
        id: Uuid,
        path: &str,
        expires_at: DateTime<Utc>,
    ) -> Result<Artifact, BucketError> {
        let bytes = crate::fsafe::read(
            scratch,
            super::artifact_path(id, path),
            super::MAX_ARTIFACT_BYTES,
            super::READ_TIMEOUT,
        )
        .await
        .map_err(|e| BucketError::Read(e.to_string()))?;
        let size = bytes.len() as u64;
        let key = self.key(id, path);
        tokio::time::timeout(PUT_TIMEOUT, self.client.put(&key, bytes.into()))
            .await
            .map_err(|_| BucketError::Timeout(PUT_TIMEOUT))??;
        Ok(Artifact {
            path: path.to_owned(),
            size,
            url: self.presign(id, path, until(expires_at)).await?,
            expires_at: Some(expires_at),
        })
    }

    /// A presigned GET of file `path` of run `id`, good for `life` (at
    /// most seven days, SigV4's limit).
    pub async fn presign(&self, id: Uuid, path: &str, life: Duration) -> Result<String, BucketError> {
        let life = life.clamp(Duration::from_secs(1), MAX_PRESIGN);
        self.client
            .signed_url(object_store::signer::Method::GET, &self.key(id, path), life)
            .await
            .map(|url| url.to_string())
            .map_err(BucketError::Presign)
    }

    /// Asks the bucket for an object that is not there: `Ok` when it
    /// answers so, else why it cannot be used (no such bucket, keys
    /// refused, unreachable).
    pub async fn probe(&self) -> Result<(), BucketError> {
        let probe = self.runs_prefix().join(".probe");
        match self.client.head(&probe).await {
            Ok(_) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Deletes the objects older than `ttl`; returns how many went.
    pub async fn sweep(&self, ttl: Duration) -> Result<usize, BucketError> {
        use futures_util::StreamExt;
        let cutoff = Utc::now() - chrono::Duration::from_std(ttl).unwrap_or_default();
        let prefix = self.runs_prefix();
        let mut listed = self.client.list(Some(&prefix));
        let mut removed = 0;
        while let Some(meta) = listed.next().await {
            let meta = meta.map_err(BucketError::List)?;
            if meta.last_modified <= cutoff {
                self.client
                    .delete(&meta.location)
                    .await
                    .map_err(|source| BucketError::Delete {
                        key: meta.location.clone(),
                        source,
                    })?;
                removed += 1;
            }
        }
        Ok(removed)
    }
}

/// The time from now to `at`.
fn until(at: DateTime<Utc>) -> Duration {
    (at - Utc::now()).to_std().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_come_from_the_environment_or_a_profile_and_never_show() {
        let none = |_: &str| None;
        assert!(Credentials::resolve(none, None, None).unwrap().is_none());
        let env = |name: &str| match name {
            "AWS_ACCESS_KEY_ID" => Some("AKIDENV".to_owned()),
            "AWS_SECRET_ACCESS_KEY" => Some("env-secret-9f1".to_owned()),
            _ => None,
        };
        let c = Credentials::resolve(env, None, None).unwrap().unwrap();
        assert_eq!(
            (c.access_key_id.as_str(), c.secret_access_key.as_str()),
            ("AKIDENV", "env-secret-9f1")
        );
        let shown = format!("{c:?}");
        assert!(
            !shown.contains("env-secret-9f1") && !shown.contains("AKIDENV"),
            "{shown}"
        );

        let half = |name: &str| (name == "AWS_ACCESS_KEY_ID").then(|| "AKID".to_owned());
        assert_eq!(
            Credentials::resolve(half, None, None).unwrap_err().key,
            "AWS_ACCESS_KEY_ID"
        );

        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("credentials");
        std::fs::write(
            &file,
            "[default]\naws_access_key_id = AKIDDEF\naws_secret_access_key = def-secret\n\n\
             [ci]\naws_access_key_id=AKIDCI\naws_secret_access_key=ci-secret\naws_session_token=tok\n",
        )
        .unwrap();
        let c = Credentials::resolve(none, Some(&file), None).unwrap().unwrap();
        assert_eq!(
            (c.access_key_id.as_str(), c.secret_access_key.as_str()),
            ("AKIDDEF", "def-secret")
        );
        let c = Credentials::resolve(none, Some(&file), Some("ci"))
            .unwrap()
            .unwrap();
        assert_eq!(c.session_token.as_deref(), Some("tok"));
        assert!(format!("{c:?}").contains("[ci]"));
        let err = Credentials::resolve(none, Some(&file), Some("prod")).unwrap_err();
        assert_eq!(err.key, "artifacts.credentials_file");
        assert!(err.why.contains("[prod]"), "{err}");
        // The environment wins over the file.
        let c = Credentials::resolve(env, Some(&file), None).unwrap().unwrap();
        assert_eq!(c.access_key_id, "AKIDENV");
    }

    #[test]
    fn keys_are_per_run_under_the_prefix() {
        let store = S3Store::new(S3Settings {
            bucket: "b".to_owned(),
            endpoint: Some("http://127.0.0.1:9".to_owned()),
            region: None,
            prefix: "team/a/".to_owned(),
            credentials: None,
        })
        .unwrap();
        let id = Uuid::now_v7();
        assert_eq!(
            store.key(id, "deep/r e.txt").to_string(),
            format!("team/a/runs/{id}/deep/r e.txt")
        );
        assert_eq!(store.runs_prefix().to_string(), "team/a/runs");
        let refused = S3Store::new(S3Settings {
            endpoint: Some("ftp://x".to_owned()),
            ..store.settings
        })
        .unwrap_err();
        assert_eq!(refused.key, "artifacts.endpoint");
    }
}
