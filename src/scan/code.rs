//! The parts of a scan that run skills' code: security-rule skills'
//! scanners, then `on_security_scan_complete` hooks, bundled skills' first,
//! then users' (each by name). An untrusted skill's code runs only for a
//! call a person approved, so a scan runs neither its scanners nor its
//! hooks and says so. A scanner or hook that fails is reported, and the
//! scan goes on without what it would have given.

use super::findings::{self, By, MAX_FINDINGS, ScanFinding};
use super::tree::ScanFile;
use crate::skill::Skill;
use crate::skill::backend::{HookAnswer, HookCall, ScanCall};
use crate::skill::context::CallContext;
use crate::skill::phases::Phase;
use crate::trust::Trust;
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use utoipa::ToSchema;

/// The longest a hook may take (as around a tool call).
pub const HOOK_TIMEOUT: Duration = Duration::from_secs(10);

/// What a scanner or hook did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ScanEffect {
    /// A scanner ran; its findings joined the scan's.
    Ran,
    /// A hook left the findings as they were.
    Kept,
    /// A hook answered a new list of findings.
    Replaced,
    /// It failed, or answered what is not a list of findings: nothing of
    /// it counts.
    Failed,
    /// Not run: an untrusted skill's code.
    NotRun,
}

/// One scanner or hook of a scan, and what it did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct CodeRun {
    pub skill: String,
    /// The scanner; absent for a hook.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scanner: Option<String>,
    pub effect: ScanEffect,
    /// Why it failed or did not run; for a hook that replaced the
    /// findings, how many it added and removed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Skills in the order their code runs: by trust (bundled, user,
/// untrusted), then name.
fn in_order(skills: &[Arc<Skill>], wanted: impl Fn(&Skill) -> bool) -> Vec<&Arc<Skill>> {
    let mut chosen: Vec<&Arc<Skill>> = skills.iter().filter(|s| wanted(s)).collect();
    chosen.sort_by(|a, b| (a.trust, &a.name).cmp(&(b.trust, &b.name)));
    chosen
}

const NOT_RUN: &str = "an untrusted skill's code runs only for a call a person approved";

/// Runs every security-rule skill's scanners over `files`, adding their
/// findings to `out` (up to [`MAX_FINDINGS`]).
pub async fn scanners(
    skills: &[Arc<Skill>],
    files: &[ScanFile],
    out: &mut Vec<ScanFinding>,
    runs: &mut Vec<CodeRun>,
) {
    let paths: BTreeSet<&str> = files.iter().map(|f| f.path.as_str()).collect();
    let given: Vec<Value> = files
        .iter()
        .map(|f| json!({"path": f.path, "text": f.text}))
        .collect();
    let typed = |s: &Skill| s.types.iter().any(|t| t == "security-rule") && !s.scanners.is_empty();
    for skill in in_order(skills, typed) {
        for scanner in &skill.scanners {
            let run = scan_with(skill, scanner, &given, &paths, out).await;
            runs.push(run);
        }
    }
}

async fn scan_with(
    skill: &Skill,
    scanner: &str,
    given: &[Value],
    paths: &BTreeSet<&str>,
    out: &mut Vec<ScanFinding>,
) -> CodeRun {
    let mut run = CodeRun {
        skill: skill.name.clone(),
        scanner: Some(scanner.to_owned()),
        effect: ScanEffect::Failed,
        detail: None,
    };
    let Some(backend) = skill.backend.as_ref().filter(|_| skill.trust != Trust::Untrusted) else {
        run.effect = ScanEffect::NotRun;
        run.detail = Some(NOT_RUN.to_owned());
        return run;
    };
    let call = ScanCall {
        scanner: scanner.to_owned(),
        files: given.to_vec(),
        timeout: Duration::from_secs(skill.timeout_secs),
        context: CallContext::default(),
    };
    let by = By {
        skill: &skill.name,
        scanner: Some(scanner),
    };
    match backend
        .scan(call)
        .await
        .and_then(|f| findings::from_backend(&f, paths, &by))
    {
        Ok(found) => {
            let room = MAX_FINDINGS.saturating_sub(out.len());
            out.extend(found.into_iter().take(room));
            run.effect = ScanEffect::Ran;
        }
        Err(why) => run.detail = Some(why.to_string()),
    }
    run
}

/// Runs every `on_security_scan_complete` hook, in order, each over the
/// findings the one before left: `{"path", "files", "findings"}` in, and
/// `{"payload": {"findings": [...]}}` to replace them.
pub async fn hooks(
    skills: &[Arc<Skill>],
    path: &str,
    files: &[ScanFile],
    findings: &mut Vec<ScanFinding>,
) -> Vec<CodeRun> {
    let phase = Phase::OnSecurityScanComplete.as_str();
    let paths: BTreeSet<&str> = files.iter().map(|f| f.path.as_str()).collect();
    let mut runs = Vec::new();
    for skill in in_order(skills, |s| s.hooks.iter().any(|h| h == phase)) {
        let mut run = CodeRun {
            skill: skill.name.clone(),
            scanner: None,
            effect: ScanEffect::Failed,
            detail: None,
        };
        match hook(skill, path, &paths, findings).await {
            Ok(Some(replaced)) => {
                run.detail = Some(changes(findings, &replaced));
                run.effect = ScanEffect::Replaced;
                *findings = replaced;
            }
            Ok(None) => run.effect = ScanEffect::Kept,
            Err(None) => {
                run.effect = ScanEffect::NotRun;
                run.detail = Some(NOT_RUN.to_owned());
            }
            Err(Some(why)) => run.detail = Some(why),
        }
        runs.push(run);
    }
    runs
}

/// The hook's new findings (`None`: kept), or why it failed (`None`: it
/// was not run).
async fn hook(
    skill: &Skill,
    path: &str,
    paths: &BTreeSet<&str>,
    findings: &[ScanFinding],
) -> Result<Option<Vec<ScanFinding>>, Option<String>> {
    let Some(backend) = skill.backend.as_ref().filter(|_| skill.trust != Trust::Untrusted) else {
        return Err(None);
    };
    let payload = json!({
        "path": path,
        "files": paths,
        "findings": findings.iter().map(ScanFinding::to_value).collect::<Vec<_>>(),
    });
    let call = HookCall {
        phase: Phase::OnSecurityScanComplete,
        tool: None,
        payload,
        timeout: HOOK_TIMEOUT,
        context: CallContext::default(),
    };
    match backend.hook(call).await.map_err(|e| Some(e.to_string()))? {
        HookAnswer::Keep => Ok(None),
        HookAnswer::Cancel(_) => Err(Some("a scan cannot be cancelled; it ran".to_owned())),
        HookAnswer::Replace(payload) => {
            let Some(Value::Array(given)) = payload.get("findings") else {
                return Err(Some("its payload must be {\"findings\": [...]}".to_owned()));
            };
            findings::from_hook(given, findings, paths, &skill.name)
                .map(Some)
                .map_err(|e| Some(e.to_string()))
        }
    }
}

/// How many findings a hook added and removed, in words.
fn changes(before: &[ScanFinding], after: &[ScanFinding]) -> String {
    let added = after.iter().filter(|f| !before.contains(f)).count();
    let removed = before.iter().filter(|f| !after.contains(f)).count();
    format!("added {added}, removed {removed}")
}
