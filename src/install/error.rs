//! What installing or managing installed versions can fail with.

use crate::catalog::installed::VersionStatus;
use crate::deps::Refusal;
use crate::install::unpack::UnpackError;
use crate::skill::Diagnostic;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("this server has no installed root to install into")]
    NoRoot,
    #[error("the archive is refused: {0}")]
    Archive(#[from] UnpackError),
    #[error("the archive holds no skill: no SKILL.md or SKILL.yaml at its root or in its one folder")]
    NoSkill,
    #[error("the archive's skill has no usable name: {0}")]
    Unnamed(String),
    #[error("the archive's skill has hash {got}, not {expected} as its source says; nothing was installed")]
    HashMismatch { expected: String, got: String },
    #[error(
        "this server takes only skills signed by one of its trusted keys, and no signature came \
         (`skilld package --sign`, then send the .minisig with the archive); nothing was installed"
    )]
    SignatureRequired,
    #[error("the signature is refused: {0}; nothing was installed")]
    BadSignature(String),
    #[error("the skill does not lint")]
    Invalid(Vec<Diagnostic>),
    #[error("an installed skill needs a version, so versions can live side by side; add `version: 1.0.0`")]
    NoVersion,
    #[error("version '{0}' is not semver (such as 1.0.0), which an installed skill needs")]
    BadVersion(String),
    #[error("skill '{name}' comes from the {root} root, which takes precedence over installed skills")]
    NameTaken { name: String, root: String },
    #[error("{name}@{version} is already installed; remove it first or raise the version")]
    Exists { name: String, version: String },
    #[error("installing the dependencies failed; the previous version still serves:\n{0}")]
    Dependencies(String),
    /// Dependency files that ask for a path, a URL, a VCS source or an
    /// installer option; nothing of them was run.
    #[error(
        "the skill's dependencies may only be packages of the index or registry by name and version; \
         nothing was installed: {}",
        .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
    )]
    UnsafeDependencies(Vec<Refusal>),
    #[error("skill '{0}' is not installed")]
    NotFound(String),
    #[error(
        "skill '{name}' comes from the {root} root, not the installed one: only installed skills \
         have versions, and only they can be changed or removed here"
    )]
    OtherSource { name: String, root: String },
    #[error("skill '{0}' has no installed version '{1}'")]
    NoSuchVersion(String, String),
    #[error("{spec} is {} and cannot serve", status.as_str())]
    NotReady { spec: String, status: VersionStatus },
    #[error("{spec} is {}, not pending review", status.as_str())]
    NotPending { spec: String, status: VersionStatus },
    #[error(
        "{0} run(s) of it are in flight; wait for them, or force it (`force=true` over HTTP, `--force` on the command line) to cancel them"
    )]
    InFlight(usize),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Runs(#[from] crate::invoke::InvokeError),
    #[error("{0}")]
    Io(String),
}

impl From<std::io::Error> for InstallError {
    fn from(e: std::io::Error) -> Self {
        InstallError::Io(e.to_string())
    }
}
