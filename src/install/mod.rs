//! Installing skills from archives into the installed root, and managing
//! the versions there: which one serves, reviews, removal. The layout on
//! disk is [`crate::catalog::installed`]'s; every change ends with a catalog
//! reload, so what serves is always what the state file says.

pub mod archive;
pub mod client;
mod consent;
pub mod diff;
mod error;
mod handback;
pub mod packages;
mod prepare;
pub mod project;
pub mod review;
mod settings;
pub mod signature;
pub mod sources;
mod stage;
pub mod unpack;

use crate::catalog::installed::{self, Review, SignatureRecord, SkillState, VersionState, VersionStatus};
use crate::catalog::{CatalogHandle, Found, Root};
use crate::deps::Refusal;
use crate::install::review::{Finding, dependency_findings, scan_with_registry};
use crate::install::signature::Presented;
use crate::invoke::Invoker;
use crate::skill::backend::Unreviewed;
use crate::skill::{Diagnostic, LoadOptions, PathCache, Runtimes, Skill, SkillRules, Trust, load_skill};
use chrono::Utc;
pub use error::InstallError;
pub use packages::{Confines, DepsSettings, Log};
pub use settings::{InstallConfig, InstallSettings};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The scanner's findings for one version, kept beside it.
const FINDINGS_FILE: &str = "findings.json";

/// One upload.
pub struct Upload {
    pub archive: std::fs::File,
    /// `untrusted` unless the admin says otherwise.
    pub trust: Trust,
    pub by: Option<String>,
    /// Lines of progress, for a client that follows the upload.
    pub follow: Option<tokio::sync::mpsc::UnboundedSender<String>>,
    /// The hash the skill must have (its source's `SkillDetail.hash`):
    /// anything else is refused before it is placed.
    pub expect_hash: Option<String>,
    /// The `.minisig` file's text, signing the skill's canonical archive.
    pub signature: Option<String>,
}

/// What an install made.
pub struct Installed {
    pub skill: Arc<Skill>,
    pub status: VersionStatus,
    pub findings: Vec<Finding>,
}

/// Installs and manages the versions of the installed root. Changes are
/// serialised: each reads the state, writes it whole, and reloads.
pub struct Installer {
    catalog: Arc<CatalogHandle>,
    invoker: Arc<Invoker>,
    settings: InstallSettings,
    changing: tokio::sync::Mutex<()>,
}

impl Installer {
    pub fn new(catalog: Arc<CatalogHandle>, invoker: Arc<Invoker>, settings: InstallSettings) -> Self {
        Self {
            catalog,
            invoker,
            settings,
            changing: tokio::sync::Mutex::new(()),
        }
    }

    /// An installer with the default settings, shared.
    pub fn shared(catalog: &Arc<CatalogHandle>, invoker: &Arc<Invoker>) -> Arc<Self> {
        Arc::new(Self::new(
            catalog.clone(),
            invoker.clone(),
            InstallSettings::default(),
        ))
    }

    pub fn settings(&self) -> &InstallSettings {
        &self.settings
    }

    /// The installed root: the first root laid out for versions.
    pub fn root(&self) -> Result<Root, InstallError> {
        self.catalog
            .options()
            .roots
            .iter()
            .find(|r| r.installed)
            .cloned()
            .ok_or(InstallError::NoRoot)
    }

    /// The state of an installed skill; `NotInstalled` or `NotFound` when
    /// there is none.
    pub fn state(&self, name: &str) -> Result<SkillState, InstallError> {
        let root = self.root()?;
        match installed::read_state(&root.path, name)? {
            Some(state) => Ok(state),
            None => Err(self.not_installed(name)),
        }
    }

    fn not_installed(&self, name: &str) -> InstallError {
        match self.catalog.current().skill(name) {
            Some(s) => InstallError::OtherSource {
                name: name.to_owned(),
                root: s.source.clone(),
            },
            None => InstallError::NotFound(name.to_owned()),
        }
    }

    /// Unpacks, checks and installs an upload; see `docs/api.md`.
    pub async fn install(&self, upload: Upload) -> Result<Installed, InstallError> {
        // A missing, malformed or untrusted signature: refused untouched.
        let presented = self.settings.signatures.screen(upload.signature.as_deref())?;
        let root = self.root()?;
        let _changing = self.changing.lock().await;
        clear_staging(&root.path);
        let log = Log::following(upload.follow.clone());
        let Vetted {
            staged,
            checked,
            findings,
            signed,
        } = self
            .stage_and_check(&root, upload.archive, upload.trust, presented)
            .await?;
        log.line(&format!(
            "unpacked {} files ({} bytes) of skill {}",
            staged.files, staged.bytes, staged.name
        ));
        signed.log_to(&log);
        if let Some(expected) = upload.expect_hash.as_ref().filter(|h| **h != checked.hash) {
            return Err(InstallError::HashMismatch {
                expected: expected.clone(),
                got: checked.hash,
            });
        }
        let version = self.admissible(&root, &staged.name, &checked)?;
        let mut findings = findings;
        findings.extend(self.security_rules(&staged.dir, &log).await);
        findings.sort_by(|a, b| (&a.path, a.line, a.code).cmp(&(&b.path, b.line, b.code)));
        let gated = self.gated(&staged.name, &checked, upload.trust, &mut findings, &log);
        log.line(&format!("review: {} finding(s)", findings.len()));
        let place = Placement::new(&root, &staged.name, &version);
        let (taking, kept) = (place.clone(), findings.clone());
        blocking(move || {
            let taken = taking.take(&staged.dir, &kept);
            drop(staged);
            taken
        })
        .await?;
        let status = if gated {
            log.line("waits for an admin's review before it serves");
            VersionStatus::PendingReview
        } else {
            self.dependencies(&place, &log).await
        };
        place.write_log(&log)?;
        let entry = VersionState {
            version: version.clone(),
            hash: checked.hash.clone(),
            status,
            trust: upload.trust,
            installed_at: Utc::now(),
            review: None,
            signature: signed.record,
            archive_sha256: Some(signed.archive_sha256),
        };
        let skill = self.commit(&place, entry).await.map_err(|e| match e {
            InstallError::Dependencies(_) => InstallError::Dependencies(log.tail(20)),
            other => other,
        })?;
        log.line(&format!(
            "installed {}@{version} ({})",
            place.name,
            status.as_str()
        ));
        Ok(Installed {
            skill,
            status,
            findings,
        })
    }

    /// Unpacks an upload into staging and checks it there, on a blocking
    /// thread: its signature over the canonical archive first, then the
    /// lint, the dependency files and the scan. Nothing of it runs.
    async fn stage_and_check(
        &self,
        root: &Root,
        archive: std::fs::File,
        trust: Trust,
        presented: Presented,
    ) -> Result<Vetted, InstallError> {
        let limits = self.settings.limits;
        let staging = root.path.join(installed::STAGING);
        let options = self.catalog.options();
        let (runtimes, max_timeout) = (options.runtimes.clone(), options.max_timeout_secs);
        // An upload's dependencies install with it, not as a plain skill's.
        let rules = SkillRules {
            deps_dir: None,
            ..options.rules.clone()
        };
        let registry = self.settings.deps.npm_registry.clone();
        blocking(move || {
            let staged = stage::stage(archive, &staging, &limits)?;
            let signed = verify_signature(&staged, &presented)?;
            let checked = check(&staged.dir, trust, &runtimes, &rules, max_timeout)?;
            vet_dependencies(&staged.dir, &registry)?;
            let findings = scan_with_registry(&staged.dir, checked.network, &registry).unwrap_or_default();
            Ok(Vetted {
                staged,
                checked,
                findings,
                signed,
            })
        })
        .await
    }

    /// The findings of the loaded skills' security rules, and of trusted
    /// security-rule skills' scanners, over the staged upload. The
    /// upload's own rules are not loaded and its own code never runs.
    async fn security_rules(&self, dir: &Path, log: &Log) -> Vec<Finding> {
        let skills = self.catalog.current().skills.clone();
        let security =
            |s: &Arc<Skill>| !s.security_rules.is_empty() || s.types.iter().any(|t| t == "security-rule");
        if !skills.iter().any(security) {
            return Vec::new();
        }
        let req = crate::scan::Request {
            skills,
            base: dir.to_path_buf(),
            path: String::new(),
            protected: Vec::new(),
            bounds: crate::scan::Bounds::default(),
            hooks: false,
        };
        let report = match crate::scan::run(req).await {
            Ok(report) => report,
            Err(why) => {
                log.line(&format!("security rules: the upload was not scanned: {why}"));
                return Vec::new();
            }
        };
        for run in report.scanners.iter().filter(|r| r.detail.is_some()) {
            let scanner = run.scanner.as_deref().unwrap_or("");
            let why = run.detail.as_deref().unwrap_or("");
            log.line(&format!(
                "security rules: scanner {scanner} of {} did not count: {why}",
                run.skill
            ));
        }
        review::rule_findings(&report)
    }

    /// Whether a new version waits for an admin's review: an untrusted
    /// upload where uploads are reviewed, or an upgrade asking for more
    /// than the serving version (its finding joins `findings`).
    fn gated(
        &self,
        name: &str,
        checked: &Checked,
        trust: Trust,
        findings: &mut Vec<Finding>,
        log: &Log,
    ) -> bool {
        let asks_more = self.asks_more(name, checked);
        if let Some(more) = &asks_more {
            log.line(&more.message);
            findings.push(more.clone());
        }
        asks_more.is_some() || (self.settings.review_uploads && trust == Trust::Untrusted)
    }

    /// The finding that holds an upgrade asking for capabilities the
    /// installed version serving now does not declare; `None` for a first
    /// install (the admin installing it consents) or one asking no more.
    fn asks_more(&self, name: &str, checked: &Checked) -> Option<Finding> {
        let catalog = self.catalog.current();
        let serving = catalog.skill(name)?;
        let added = checked.capabilities.beyond(&consent::Capabilities::of(serving));
        if added.is_empty() {
            return None;
        }
        let version = serving.version.as_deref().unwrap_or("the version");
        Some(consent::finding(&checked.definition, &added, version))
    }

    /// Refuses an upload whose name another root serves, or whose version
    /// is already installed (a failed one may be replaced).
    fn admissible(&self, root: &Root, name: &str, checked: &Checked) -> Result<String, InstallError> {
        let version = checked.version.clone().ok_or(InstallError::NoVersion)?;
        if !installed::valid_version(&version) {
            return Err(InstallError::BadVersion(version));
        }
        if let Some(s) = self.catalog.current().skill(name)
            && !s.dir.starts_with(&root.path)
        {
            return Err(InstallError::NameTaken {
                name: name.to_owned(),
                root: s.source.clone(),
            });
        }
        let state = installed::read_state(&root.path, name)?.unwrap_or_default();
        if state
            .version(&version)
            .is_some_and(|v| v.status != VersionStatus::Failed)
        {
            return Err(InstallError::Exists {
                name: name.to_owned(),
                version,
            });
        }
        Ok(version)
    }

    /// Installs a version's dependencies: its status after.
    async fn dependencies(&self, place: &Placement, log: &Log) -> VersionStatus {
        let dir = place.skill_dir();
        if !packages::wanted(&dir) {
            log.line("no dependencies");
            return VersionStatus::Ready;
        }
        log.line("installing dependencies");
        let confines = Confines {
            sandbox: self.invoker.sandbox().clone(),
            limits: self.invoker.settings().limits,
            grace: self.invoker.settings().grace,
        };
        match packages::install(&dir, &place.env_dir(), &self.settings.deps, &confines, log).await {
            Ok(()) => {
                log.line("dependencies installed");
                VersionStatus::Ready
            }
            Err(why) => {
                log.line(&format!("dependencies failed: {why}"));
                VersionStatus::Failed
            }
        }
    }

    /// Records a version in the state, makes it serve when it should, and
    /// reloads. A ready version that then does not load is taken back out
    /// and its diagnostics returned.
    async fn commit(&self, place: &Placement, entry: VersionState) -> Result<Arc<Skill>, InstallError> {
        let (root, name) = (place.root.clone(), place.name.clone());
        let before = installed::read_state(&root, &name)?.unwrap_or_default();
        let mut state = before.clone();
        let version = entry.version.clone();
        let ready = entry.status == VersionStatus::Ready;
        state.put(entry);
        if ready && becomes_active(&state, &version) {
            state.active = Some(version.clone());
        }
        save(&root, &name, &state).await?;
        if state
            .version(&version)
            .is_some_and(|v| v.status == VersionStatus::Failed)
        {
            // Kept for its log; nothing of it loads.
            self.reload().await?;
            return Err(InstallError::Dependencies(String::new()));
        }
        let found = self.reload_and_find(&format!("{name}@{version}")).await;
        match found {
            Ok(found) => Ok(found.skill),
            Err(_) if !ready => Err(InstallError::Io(format!(
                "{name}@{version} was recorded but cannot be read back"
            ))),
            Err(_) => {
                let diagnostics = self.diagnostics_of(&name);
                save(&root, &name, &before).await?;
                place.remove()?;
                self.reload().await?;
                Err(InstallError::Invalid(diagnostics))
            }
        }
    }

    fn diagnostics_of(&self, name: &str) -> Vec<Diagnostic> {
        self.catalog
            .current()
            .diagnostics
            .iter()
            .filter(|d| d.skill.as_deref() == Some(name))
            .cloned()
            .collect()
    }

    /// Reloads the catalog on a blocking thread.
    pub async fn reload(&self) -> Result<(), InstallError> {
        let catalog = self.catalog.clone();
        blocking(move || {
            catalog.reload();
            Ok(())
        })
        .await
    }

    async fn reload_and_find(&self, spec: &str) -> Result<Found, InstallError> {
        let (catalog, spec) = (self.catalog.clone(), spec.to_owned());
        blocking(move || {
            let current = catalog.reload();
            current.find(&spec).map_err(|e| InstallError::Io(e.to_string()))
        })
        .await
    }

    /// Chooses the version that serves.
    pub async fn set_active(&self, name: &str, version: &str) -> Result<String, InstallError> {
        let root = self.root()?;
        let _changing = self.changing.lock().await;
        let mut state = self.state(name)?;
        let resolved = state
            .resolve(version)
            .ok_or_else(|| InstallError::NoSuchVersion(name.to_owned(), version.to_owned()))?
            .to_owned();
        let entry = state
            .version(&resolved)
            .ok_or_else(|| InstallError::NoSuchVersion(name.to_owned(), resolved.clone()))?;
        if entry.status != VersionStatus::Ready {
            return Err(InstallError::NotReady {
                spec: format!("{name}@{resolved}"),
                status: entry.status,
            });
        }
        state.active = Some(resolved.clone());
        save(&root.path, name, &state).await?;
        self.reload().await?;
        Ok(resolved)
    }

    /// An admin's review of a version held for one: approving installs its
    /// dependencies and lets it serve; rejecting keeps it from serving.
    pub async fn review(
        &self,
        name: &str,
        version: &str,
        approve: bool,
        by: Option<String>,
        note: Option<String>,
    ) -> Result<VersionState, InstallError> {
        let root = self.root()?;
        let _changing = self.changing.lock().await;
        let state = self.state(name)?;
        let entry = state
            .version(version)
            .ok_or_else(|| InstallError::NoSuchVersion(name.to_owned(), version.to_owned()))?
            .clone();
        if entry.status != VersionStatus::PendingReview {
            return Err(InstallError::NotPending {
                spec: format!("{name}@{version}"),
                status: entry.status,
            });
        }
        let place = Placement::new(&root, name, version);
        let log = Log::following(None);
        log.line(&place.read_log());
        let mut refused = Vec::new();
        let status = if approve {
            log.line(&format!("approved by {}", by.as_deref().unwrap_or("an admin")));
            // Held by an older skilld, it was never checked: an approval
            // does not run what an upload would be refused for.
            refused = self.refusals(&place, &log).await?;
            if refused.is_empty() {
                self.dependencies(&place, &log).await
            } else {
                log.line("dependencies refused; nothing was installed");
                VersionStatus::Failed
            }
        } else {
            log.line(&format!("rejected by {}", by.as_deref().unwrap_or("an admin")));
            VersionStatus::Rejected
        };
        place.write_log(&log)?;
        let entry = VersionState {
            status,
            review: Some(Review {
                approved: approve,
                by,
                note,
                at: Utc::now(),
            }),
            ..entry
        };
        self.commit(&place, entry.clone()).await.map_err(|e| match e {
            InstallError::Dependencies(_) if !refused.is_empty() => InstallError::UnsafeDependencies(refused),
            InstallError::Dependencies(_) => InstallError::Dependencies(log.tail(20)),
            other => other,
        })?;
        Ok(entry)
    }

    /// What a placed version's dependency files ask for that is not
    /// installed, each logged.
    async fn refusals(&self, place: &Placement, log: &Log) -> Result<Vec<Refusal>, InstallError> {
        let (dir, settings, log) = (place.skill_dir(), self.settings.deps.clone(), log.clone());
        blocking(move || {
            packages::refused(&dir, &settings, &log).map_err(|e| InstallError::Io(e.to_string()))
        })
        .await
    }

    /// Removes one version, or every version of a skill. Refused while its
    /// runs are in flight unless `force`, which cancels them first.
    pub async fn remove(&self, name: &str, version: Option<&str>, force: bool) -> Result<(), InstallError> {
        let root = self.root()?;
        let _changing = self.changing.lock().await;
        let mut state = self.state(name)?;
        let version = match version {
            Some(v) => Some(
                state
                    .resolve(v)
                    .filter(|r| state.version(r).is_some())
                    .ok_or_else(|| InstallError::NoSuchVersion(name.to_owned(), v.to_owned()))?
                    .to_owned(),
            ),
            None => None,
        };
        self.in_flight(name, version.as_deref(), force).await?;
        clear_staging(&root.path);
        let trash = root
            .path
            .join(installed::STAGING)
            .join(format!("removed-{}", uuid::Uuid::now_v7()));
        std::fs::create_dir_all(root.path.join(installed::STAGING))?;
        match &version {
            Some(v) => {
                state.versions.retain(|e| &e.version != v);
                if state.active.as_deref() == Some(v.as_str()) {
                    state.active = state.latest().map(|l| l.version.clone());
                }
                save(&root.path, name, &state).await?;
                std::fs::rename(installed::version_dir(&root.path, name, v), &trash)?;
            }
            None => std::fs::rename(root.path.join(name), &trash)?,
        }
        self.reload().await?;
        let _ = tokio::fs::remove_dir_all(&trash).await;
        Ok(())
    }

    /// Refuses (or, with `force`, cancels) the runs of a skill, or of one
    /// of its versions, that are running or queued.
    async fn in_flight(&self, name: &str, version: Option<&str>, force: bool) -> Result<(), InstallError> {
        let runs = self.invoker.follower().live_runs_of(name, version).await?;
        if runs.is_empty() {
            return Ok(());
        }
        if !force {
            return Err(InstallError::InFlight(runs.len()));
        }
        self.invoker.follower().cancel_and_wait(&runs).await?;
        Ok(())
    }

    /// The install log of a version (the active one by default).
    pub fn log(&self, name: &str, version: Option<&str>) -> Result<String, InstallError> {
        let root = self.root()?;
        let state = self.state(name)?;
        let version = match version {
            Some(v) => state.resolve(v).map(str::to_owned),
            None => state.active.clone(),
        }
        .filter(|v| state.version(v).is_some())
        .ok_or_else(|| {
            InstallError::NoSuchVersion(name.to_owned(), version.unwrap_or("active").to_owned())
        })?;
        let place = Placement::new(&root, name, &version);
        Ok(place.read_log())
    }

    /// The scanner's findings for a version.
    pub fn findings(&self, name: &str, version: &str) -> Result<Vec<Finding>, InstallError> {
        let root = self.root()?;
        let path = installed::version_dir(&root.path, name, version).join(FINDINGS_FILE);
        let mut findings: Vec<Finding> = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| InstallError::Io(e.to_string()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        // A version held by an older skilld was scanned without its
        // dependency files: they are checked afresh (two small files).
        let dir = installed::skill_dir(&root.path, name, version);
        for fresh in dependency_findings(&dir, &self.settings.deps.npm_registry)? {
            if !findings.contains(&fresh) {
                findings.push(fresh);
            }
        }
        findings.sort_by(|a, b| (&a.path, a.line, a.code).cmp(&(&b.path, b.line, b.code)));
        Ok(findings)
    }

    /// Every version waiting for review, with the skill's state.
    pub fn pending(&self) -> Result<Vec<(String, SkillState)>, InstallError> {
        let root = self.root()?;
        let names = match installed::names(&root.path) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        let mut out = Vec::new();
        for name in names {
            if let Some(state) = installed::read_state(&root.path, &name)?
                && state
                    .versions
                    .iter()
                    .any(|v| v.status == VersionStatus::PendingReview)
            {
                out.push((name, state));
            }
        }
        Ok(out)
    }

    /// The skill directory of an installed version, for diffs.
    pub fn version_skill_dir(&self, name: &str, version: &str) -> Result<PathBuf, InstallError> {
        let root = self.root()?;
        let state = self.state(name)?;
        let resolved = state
            .resolve(version)
            .filter(|v| {
                state
                    .version(v)
                    .is_some_and(|e| e.status != VersionStatus::Failed)
            })
            .ok_or_else(|| InstallError::NoSuchVersion(name.to_owned(), version.to_owned()))?;
        Ok(installed::skill_dir(&root.path, name, resolved))
    }
}

/// Writes a skill's state on a blocking thread: it syncs the file and its
/// directory.
async fn save(root: &Path, name: &str, state: &SkillState) -> Result<(), InstallError> {
    let (root, name, state) = (root.to_path_buf(), name.to_owned(), state.clone());
    blocking(move || Ok(installed::write_state(&root, &name, &state)?)).await
}

/// Empties the staging area: with changes serialised, whatever is there
/// when one starts was left by a crash (an upload half unpacked, a removed
/// version not yet deleted).
fn clear_staging(root: &Path) {
    let staging = root.join(installed::STAGING);
    let Ok(entries) = std::fs::read_dir(&staging) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let _ = std::fs::remove_dir_all(entry.path());
    }
}

/// A newly ready version serves when none does, or when it is higher than
/// the one that does.
fn becomes_active(state: &SkillState, version: &str) -> bool {
    let Some(active) = state.serving() else {
        return true;
    };
    match (
        semver::Version::parse(version),
        semver::Version::parse(&active.version),
    ) {
        (Ok(new), Ok(old)) => new > old,
        _ => false,
    }
}

/// An upload unpacked and checked, not yet placed.
struct Vetted {
    staged: stage::Staged,
    checked: Checked,
    findings: Vec<Finding>,
    signed: Signed,
}

/// What the signature check of an upload found.
struct Signed {
    record: Option<SignatureRecord>,
    archive_sha256: String,
    /// A signature came, but no key is trusted to check it.
    unchecked: bool,
}

impl Signed {
    fn log_to(&self, log: &Log) {
        log.line(&format!("canonical archive sha256 {}", self.archive_sha256));
        if let Some(record) = &self.record {
            log.line(&format!(
                "signature by trusted key {} verified over the canonical archive",
                record.key_id
            ));
        } else if self.unchecked {
            log.line("a signature came with it, but this server trusts no key: it was not checked");
        }
    }
}

/// Rewrites the staged skill's canonical archive, and verifies a trusted
/// key's signature over it: before the skill is linted, so a refused one
/// is not even read.
fn verify_signature(staged: &stage::Staged, presented: &Presented) -> Result<Signed, InstallError> {
    let mut canonical = signature::canonical(&staged.dir)?;
    let record = presented.verify(&mut canonical, staged.files)?;
    Ok(Signed {
        record,
        archive_sha256: canonical.sha256,
        unchecked: matches!(presented, Presented::Unchecked),
    })
}

/// Refuses an upload whose dependency files ask for anything but
/// packages by name and version, before anything of it runs.
fn vet_dependencies(dir: &Path, npm_registry: &str) -> Result<(), InstallError> {
    let refused = crate::deps::check_dir(dir, npm_registry)?;
    if refused.is_empty() {
        Ok(())
    } else {
        Err(InstallError::UnsafeDependencies(refused))
    }
}

/// What the static check of an upload found.
struct Checked {
    version: Option<String>,
    description: String,
    hash: String,
    network: bool,
    capabilities: consent::Capabilities,
    /// The staged definition file (`SKILL.md` or `SKILL.yaml`).
    definition: PathBuf,
}

/// Lints a staged skill without running any of it: a manifest's backend
/// is not started here (it starts once the version serves).
fn check(
    dir: &Path,
    trust: Trust,
    runtimes: &Runtimes,
    rules: &SkillRules,
    max_timeout_secs: u64,
) -> Result<Checked, InstallError> {
    let path = PathCache::new(std::env::var_os("PATH"));
    let opts = LoadOptions {
        source: "installed",
        trust,
        max_timeout_secs,
        runtimes,
        installed: false,
        path: &path,
        launcher: Some(&Unreviewed),
        rules,
    };
    let loaded = load_skill(dir, &opts);
    match loaded.skill {
        Some(skill) => Ok(Checked {
            version: skill.version.clone(),
            description: skill.description.clone(),
            hash: skill.hash.clone(),
            network: skill.network,
            capabilities: consent::Capabilities::of(&skill),
            definition: skill.definition.clone(),
        }),
        None => Err(InstallError::Invalid(loaded.diagnostics)),
    }
}

/// Where one version lives.
#[derive(Clone)]
struct Placement {
    root: PathBuf,
    name: String,
    version: String,
}

impl Placement {
    fn new(root: &Root, name: &str, version: &str) -> Self {
        Self {
            root: root.path.clone(),
            name: name.to_owned(),
            version: version.to_owned(),
        }
    }

    fn dir(&self) -> PathBuf {
        installed::version_dir(&self.root, &self.name, &self.version)
    }

    fn skill_dir(&self) -> PathBuf {
        installed::skill_dir(&self.root, &self.name, &self.version)
    }

    fn env_dir(&self) -> PathBuf {
        self.dir().join(installed::ENV_DIR)
    }

    /// Moves the staged skill into place (replacing a failed version's
    /// leftovers), with its findings beside it.
    fn take(&self, staged: &Path, findings: &[Finding]) -> Result<(), InstallError> {
        let dir = self.dir();
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        std::fs::create_dir_all(&dir)?;
        open_to_sandbox(&self.root, &dir)?;
        std::fs::write(
            dir.join(FINDINGS_FILE),
            serde_json::to_vec_pretty(findings).map_err(|e| InstallError::Io(e.to_string()))?,
        )?;
        std::fs::rename(staged, self.skill_dir())?;
        installed::sync_dir(&dir)?;
        Ok(())
    }

    fn remove(&self) -> Result<(), InstallError> {
        match std::fs::remove_dir_all(self.dir()) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
    }

    fn write_log(&self, log: &Log) -> Result<(), InstallError> {
        std::fs::write(self.dir().join(installed::INSTALL_LOG), log.text())?;
        Ok(())
    }

    fn read_log(&self) -> String {
        std::fs::read_to_string(self.dir().join(installed::INSTALL_LOG))
            .unwrap_or_default()
            .trim_end()
            .to_owned()
    }
}

/// Installed skills run as the sandbox's user: every directory from the
/// root down to a version must let others through (files are unpacked
/// 0644 or 0755).
fn open_to_sandbox(root: &Path, dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    for d in dir.ancestors().take_while(|d| d.starts_with(root)) {
        let mut perms = std::fs::metadata(d)?.permissions();
        if perms.mode() & 0o005 != 0o005 {
            perms.set_mode(perms.mode() | 0o055);
            std::fs::set_permissions(d, perms)?;
        }
    }
    Ok(())
}

/// Runs disk work on a blocking thread.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, InstallError> + Send + 'static,
) -> Result<T, InstallError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| InstallError::Io(format!("the install stopped: {e}")))?
}
