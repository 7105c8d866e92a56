//! Running one hook phase on the skills of a session, as seed 002's
//! LifecycleManager does: each skill that registered the phase, in
//! priority order, and a report of what each did.

use super::view::HookReport;
use super::{Open, Sessions};
use crate::skill::Skill;
use crate::skill::backend::{BackendError, HookAnswer, HookCall};
use crate::skill::context::CallContext;
use crate::skill::phases::Phase;
use serde_json::Value;
use std::sync::Arc;

/// The longest a session's hook may take.
const TIMEOUT: std::time::Duration = crate::invoke::HOOK_TIMEOUT;

/// Whether `skill`'s backend runs `phase`.
pub(super) fn handles(skill: &Skill, phase: Phase) -> bool {
    skill.backend.is_some() && skill.hooks.iter().any(|h| Phase::parse(h) == Some(phase))
}

impl Sessions {
    /// The context a session's hook or call runs in.
    pub(super) fn context(&self, open: &Open) -> CallContext {
        self.context_of(open.record.id, open.record.turn, open.record.caller.clone())
    }

    /// Runs `phase` of `skill` with `payload`: its answer, or `None` when
    /// the skill does not handle the phase. What it did goes to `reports`.
    pub(super) async fn run_hook(
        self: &Arc<Self>,
        open: &Open,
        skill: &Skill,
        phase: Phase,
        payload: Value,
        reports: &mut Vec<HookReport>,
    ) -> Option<Result<HookAnswer, BackendError>> {
        if !handles(skill, phase) {
            return None;
        }
        let backend = skill.backend.as_ref()?;
        let call = HookCall {
            phase,
            tool: None,
            payload,
            timeout: TIMEOUT,
            context: self.context(open),
        };
        let answer = backend.hook(call).await;
        reports.push(HookReport::of(&skill.name, phase, &answer));
        Some(answer)
    }
}
