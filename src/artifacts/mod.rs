//! Where an entrypoint's artifacts live once its run ends, and how callers
//! reach them (seed 003). By default they stay on the disk of the instance
//! that ran them, under its scratch root; with a bucket configured they go
//! to S3-compatible storage, which every instance sharing the run log
//! reaches. Either way the envelope lists each file with a link that works
//! without a token until it expires: a link to this server signed with a
//! key of its data directory, or a presigned URL of the bucket.

mod connector;
mod link;
mod s3;
mod settings;

pub use link::{KEY_FILE, LinkError};
pub use s3::{Credentials, S3Settings, S3Store};
pub use settings::ArtifactsConfig;

use crate::fsafe::{Listed, Refused};
use crate::store::{Run, RunLog, StoreError};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use utoipa::ToSchema;
use uuid::Uuid;

/// The largest artifact served, or uploaded.
pub const MAX_ARTIFACT_BYTES: u64 = 64 * 1024 * 1024;
/// The longest reading an artifact from the disk may take.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// An artifact an entrypoint wrote to `SANDBOX_FILES_DIR`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Artifact {
    /// Relative to the run's `SANDBOX_FILES_DIR`.
    pub path: String,
    pub size: u64,
    /// Where to fetch it without a token until `expires_at`: a presigned
    /// URL of the artifact bucket, or, with artifacts on the server's disk,
    /// `/runs/{id}/files/{path}?expires=…&signature=…` on the instance
    /// that ran it.
    pub url: String,
    /// When `url` stops working and the artifact is deleted
    /// (`artifact_ttl_secs` after the run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub expires_at: Option<DateTime<Utc>>,
}

/// Where artifacts are kept, as configured.
#[derive(Debug, Clone, Default)]
pub enum ArtifactStore {
    /// The disk of the instance that ran the run.
    #[default]
    Local,
    /// An S3-compatible bucket.
    S3(Arc<S3Store>),
}

/// How a request for an artifact showed it may have it.
#[derive(Debug, Clone, Copy)]
pub enum Access<'a> {
    /// A caller who may invoke.
    Caller,
    /// A link's `expires` and `signature`, as given.
    Signed {
        expires: Option<&'a str>,
        signature: Option<&'a str>,
    },
}

/// An artifact, as the files route hands it over.
#[derive(Debug)]
pub enum Served {
    Bytes(Vec<u8>),
    /// A presigned URL of the bucket.
    Redirect(String),
}

/// Why an artifact is not handed over.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("file '{0}' not found among the run's artifacts")]
    NoFile(String),
    #[error(
        "run {id}'s artifacts are on the disk of instance '{instance}', which ran it; ask that instance, \
         or give the instances an artifact bucket (docs/api.md, \"Artifacts\")"
    )]
    Elsewhere { id: Uuid, instance: String },
    #[error("run {0}'s artifacts were deleted: they are kept for artifact_ttl_secs after the run")]
    Expired(Uuid),
    #[error("the link's signature does not match this file; use the url the run's envelope gives")]
    BadSignature,
    #[error("the link has expired; a caller with a token gets a fresh one from GET /runs/{{id}}")]
    LinkExpired,
    #[error("{path} is larger than {limit} bytes")]
    TooLarge { path: String, limit: u64 },
    #[error("{0} could not be read within 10 s; try again later")]
    TimedOut(String),
    #[error("{0}")]
    Bucket(String),
}

/// The artifacts of this instance's runs: where they go, the links to
/// them, and handing them over.
pub struct Artifacts {
    store: ArtifactStore,
    scratch: PathBuf,
    data_dir: PathBuf,
    instance: String,
    ttl: Duration,
    /// Made on first use: a server that runs no entrypoint needs none.
    key: OnceLock<Option<link::Key>>,
}

impl Artifacts {
    pub fn new(
        store: ArtifactStore,
        scratch: PathBuf,
        data_dir: PathBuf,
        instance: String,
        ttl: Duration,
    ) -> Self {
        Self {
            store,
            scratch,
            data_dir,
            instance,
            ttl,
            key: OnceLock::new(),
        }
    }

    /// Whether artifacts stay on this disk (else they are uploaded, and
    /// the run's directory can go once they are).
    pub fn stay_local(&self) -> bool {
        matches!(self.store, ArtifactStore::Local)
    }

    /// The artifacts of run `id`, `found` beneath the scratch root, with
    /// their links (uploaded first when they go to a bucket), by path.
    pub async fn keep(&self, id: Uuid, found: Vec<Listed>) -> Vec<Artifact> {
        let expires_at = Utc::now() + chrono::Duration::from_std(self.ttl).unwrap_or_default();
        let mut files = match &self.store {
            ArtifactStore::Local => found
                .into_iter()
                .map(|f| Artifact {
                    url: self.local_link(id, &f.path, expires_at),
                    path: f.path,
                    size: f.size,
                    expires_at: Some(expires_at),
                })
                .collect(),
            ArtifactStore::S3(bucket) => bucket.upload(&self.scratch, id, found, expires_at).await,
        };
        files.sort_by(|a, b| a.path.cmp(&b.path));
        files
    }

    /// A signed link to this server, or the bare route (a token then
    /// needed) should no key be at hand.
    fn local_link(&self, id: Uuid, path: &str, expires_at: DateTime<Utc>) -> String {
        match self.key() {
            Some(key) => key.link(id, path, expires_at.timestamp()),
            None => format!("/runs/{id}/files/{path}"),
        }
    }

    fn key(&self) -> Option<&link::Key> {
        self.key
            .get_or_init(|| {
                link::Key::load_or_create(&self.data_dir)
                    .or_else(|e| {
                        tracing::warn!(error = %e, "cannot keep the key of artifact links; this process's links end with it");
                        link::Key::ephemeral()
                    })
                    .inspect_err(|e| tracing::error!(error = %e, "cannot make a key for artifact links"))
                    .ok()
            })
            .as_ref()
    }

    /// File `path` of run `id` (its run log `runs`), for a request with
    /// `access`: its bytes, or where the bucket serves it.
    pub async fn serve(
        &self,
        runs: &dyn RunLog,
        id: Uuid,
        path: &str,
        access: Access<'_>,
    ) -> Result<Served, ArtifactError> {
        let run = runs.get_run(id).await?;
        if let Access::Signed { expires, signature } = access {
            let checked = self.key().map_or(Err(LinkError::Bad), |key| {
                key.verify(id, path, expires, signature, Utc::now().timestamp())
            });
            match checked {
                Ok(()) => {}
                Err(LinkError::Expired) => return Err(ArtifactError::LinkExpired),
                // Another instance's key signed it, most likely.
                Err(LinkError::Bad) => {
                    return Err(self.elsewhere(&run).unwrap_or(ArtifactError::BadSignature));
                }
            }
        }
        let file = listed(&run, path).ok_or_else(|| ArtifactError::NoFile(path.to_owned()))?;
        let life = self.life_left(&run);
        if life.is_zero() {
            return Err(ArtifactError::Expired(id));
        }
        match &self.store {
            ArtifactStore::S3(bucket) => bucket
                .presign(id, path, life)
                .await
                .map(Served::Redirect)
                .map_err(|e| ArtifactError::Bucket(e.to_string())),
            ArtifactStore::Local => self.read(&run, &file).await.map(Served::Bytes),
        }
    }

    /// An artifact on this disk, read as `fsafe` reads what a tool
    /// touched: beneath the scratch root, which is the server's (the run's
    /// own directories are the tool's, and a link among them is refused).
    async fn read(&self, run: &Run, file: &Artifact) -> Result<Vec<u8>, ArtifactError> {
        let too_large = || ArtifactError::TooLarge {
            path: file.path.clone(),
            limit: MAX_ARTIFACT_BYTES,
        };
        if file.size > MAX_ARTIFACT_BYTES {
            return Err(too_large());
        }
        let rel = artifact_path(run.id, &file.path);
        match crate::fsafe::read(self.scratch.clone(), rel, MAX_ARTIFACT_BYTES, READ_TIMEOUT).await {
            Ok(bytes) => Ok(bytes),
            Err(Refused::NotFound) => Err(self
                .elsewhere(run)
                .unwrap_or_else(|| ArtifactError::NoFile(file.path.clone()))),
            Err(Refused::TooLarge(_)) => Err(too_large()),
            Err(Refused::TimedOut(_)) => Err(ArtifactError::TimedOut(file.path.clone())),
        }
    }

    /// `Elsewhere` when `run`'s artifacts stay on the disk of another
    /// instance.
    fn elsewhere(&self, run: &Run) -> Option<ArtifactError> {
        let instance = run.instance.as_deref()?;
        (self.stay_local() && instance != self.instance).then(|| ArtifactError::Elsewhere {
            id: run.id,
            instance: instance.to_owned(),
        })
    }

    /// How long `run`'s artifacts are still kept.
    fn life_left(&self, run: &Run) -> Duration {
        let Some(finished) = run.finished_at else {
            return Duration::ZERO;
        };
        let ends = finished + chrono::Duration::from_std(self.ttl).unwrap_or_default();
        (ends - Utc::now()).to_std().unwrap_or_default()
    }

    /// Says in the log, at start-up, when the artifact bucket cannot be
    /// used: runs would then lose their artifacts (each upload is tried,
    /// and a failed one is logged too).
    pub async fn check(&self) {
        if let ArtifactStore::S3(bucket) = &self.store {
            match bucket.probe().await {
                Ok(()) => tracing::info!(store = ?bucket, "artifacts go to the bucket"),
                Err(why) => tracing::error!(store = ?bucket, %why, "the artifact bucket cannot be used; \
                    entrypoints' artifacts will not be kept until it can"),
            }
        }
    }

    /// Deletes the bucket's artifacts older than the retention time (the
    /// scratch root has its own sweep); nothing for artifacts on disk.
    pub async fn sweep(&self) {
        let ArtifactStore::S3(bucket) = &self.store else {
            return;
        };
        match bucket.sweep(self.ttl).await {
            Ok(0) => {}
            Ok(n) => tracing::debug!(count = n, "expired artifacts deleted from the bucket"),
            Err(why) => tracing::warn!(%why, "cannot sweep the artifact bucket"),
        }
    }
}

/// File `path` as `run`'s envelope lists it.
fn listed(run: &Run, path: &str) -> Option<Artifact> {
    let files = run.result.as_ref()?.get("files")?;
    let files: Vec<Artifact> = serde_json::from_value(files.clone()).ok()?;
    files.into_iter().find(|f| f.path == path)
}

/// Where artifact `rel` of run `id` lies beneath the scratch root.
pub fn artifact_path(id: Uuid, rel: &str) -> String {
    format!("{id}/out/files/{rel}")
}
