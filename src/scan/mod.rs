//! Security scans (seed 002's security-rule skills, `docs/skills.md`
//! "Security rules"): a directory's files read safely and within bounds
//! ([`tree`]), every loaded skill's declarative rules over them
//! ([`rules`]), then security-rule skills' scanners and the
//! `on_security_scan_complete` hooks ([`code`]). `POST /scan` scans the
//! workspace; the install review scans an upload with the rules and
//! scanners of the skills already loaded, never with the upload's own.

pub mod code;
pub mod findings;
pub mod rules;
pub mod tree;

pub use code::{CodeRun, ScanEffect};
pub use findings::ScanFinding;
pub use tree::{Bounds, Refusal, SkipReason, Skipped, Tree};

use crate::skill::Skill;
use std::path::PathBuf;
use std::sync::Arc;

/// Scans that may run at once: each holds up to its bounds' bytes.
const CONCURRENT_SCANS: usize = 2;
static SCANS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(CONCURRENT_SCANS);

/// What to scan and with what.
#[derive(Debug, Clone)]
pub struct Request {
    /// The loaded skills whose rules, scanners and hooks run.
    pub skills: Vec<Arc<Skill>>,
    /// The directory the server chose (the workspace, a staged upload).
    pub base: PathBuf,
    /// What beneath it: `""` for all of it.
    pub path: String,
    /// Real paths never read (see [`tree::read`]).
    pub protected: Vec<PathBuf>,
    pub bounds: Bounds,
    /// Whether `on_security_scan_complete` hooks run (not in an install
    /// review, whose findings are an admin's, for no skill to filter).
    pub hooks: bool,
}

/// What a scan read, ran and found.
#[derive(Debug, Clone)]
pub struct Report {
    /// Sorted by path, line, skill, rule.
    pub findings: Vec<ScanFinding>,
    pub tree: Tree,
    pub scanners: Vec<CodeRun>,
    pub hooks: Vec<CodeRun>,
    /// The findings reached [`findings::MAX_FINDINGS`]: more were not kept.
    pub truncated: bool,
}

/// Runs a scan: the files read and the rules matched on the blocking
/// pool, then scanners and hooks. Refused when the path cannot be scanned.
pub async fn run(req: Request) -> Result<Report, Refusal> {
    // Never closed, so acquiring only waits.
    let _slot = SCANS.acquire().await.ok();
    let (skills, path, hooks) = (req.skills.clone(), req.path.clone(), req.hooks);
    let read = tokio::task::spawn_blocking(move || {
        let tree = tree::read(&req.base, &req.path, &req.protected, req.bounds)?;
        let (findings, truncated) = rules::run(&req.skills, &tree.files);
        Ok::<_, Refusal>((tree, findings, truncated))
    })
    .await
    .map_err(|e| Refusal::Base(e.to_string()))?;
    let (tree, mut findings, truncated) = read?;
    let mut scanners = Vec::new();
    code::scanners(&skills, &tree.files, &mut findings, &mut scanners).await;
    let truncated = truncated || findings.len() >= findings::MAX_FINDINGS;
    findings::settle(&mut findings);
    let hooks = if hooks {
        let ran = code::hooks(&skills, &path, &tree.files, &mut findings).await;
        findings::settle(&mut findings);
        ran
    } else {
        Vec::new()
    };
    Ok(Report {
        findings,
        tree,
        scanners,
        hooks,
        truncated,
    })
}
