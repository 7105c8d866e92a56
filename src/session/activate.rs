//! Seed 002's lifecycle in a session: triggers fire, a skill goes from
//! Inactive to Activating, and on to Active (its permissions allowed,
//! `on_activate` run) or Error (denied, or its hook failed); Active to
//! Inactive through `on_deactivate`.

use super::error::SessionError;
use super::state::{ActivationRequest, Allowed, Lifecycle, SkillState, TriggerContext};
use super::view::{ActivationDecision, Bounds, Changes, HookReport};
use super::{Open, Sessions};
use crate::catalog::Catalog;
use crate::invoke::FieldError;
use crate::skill::Skill;
use crate::skill::backend::HookAnswer;
use crate::skill::phases::Phase;
use crate::skill::triggers::{self, Context, FiredTrigger};
use crate::store::{SessionRecord, SkillApproval};
use crate::trust::Trust;
use chrono::Utc;
use serde_json::json;
use std::sync::Arc;
use uuid::Uuid;

/// The most project files a context may have, and the longest entry of
/// its lists; as [`TriggerContext`]'s schema says.
const MAX_FILES: usize = 10_000;
const MAX_ENTRY_CHARS: usize = 4096;

/// A start's context, checked, with the files of its `path` added.
pub(super) fn checked_context(
    catalog: &Catalog,
    mut ctx: TriggerContext,
    workspace: &std::path::Path,
) -> Result<TriggerContext, SessionError> {
    let mut bounds = Bounds::default()
        .list("files", &ctx.files, MAX_FILES)
        .list("languages", &ctx.languages, 100)
        .list("explicit", &ctx.explicit, 1000)
        .text("path", ctx.path.as_deref().unwrap_or_default(), MAX_ENTRY_CHARS);
    for (field, list) in [
        ("files", &ctx.files),
        ("languages", &ctx.languages),
        ("explicit", &ctx.explicit),
    ] {
        if let Some(i) = list.iter().position(|e| bad_text(e)) {
            let why = format!("entries are 1 to {MAX_ENTRY_CHARS} characters, without NUL");
            bounds.refuse(&format!("{field}[{i}]"), why);
        }
    }
    for (field, text) in [
        ("mode", Some(&ctx.mode)),
        ("build_system", ctx.build_system.as_ref()),
    ] {
        if text.is_some_and(|t| t.chars().count() > 64 || t.contains('\0')) {
            bounds.refuse(field, "at most 64 characters, without NUL".to_owned());
        }
    }
    bounds.checked()?;
    check_names(catalog, &ctx.explicit, "explicit")?;
    if let Some(path) = &ctx.path {
        let found = super::project::files(workspace, path, MAX_FILES.saturating_sub(ctx.files.len()))?;
        ctx.files.extend(found);
    }
    Ok(ctx)
}

fn bad_text(entry: &str) -> bool {
    entry.is_empty() || entry.chars().count() > MAX_ENTRY_CHARS || entry.contains('\0')
}

fn field_error(field: &str, message: String) -> FieldError {
    FieldError {
        field: field.to_owned(),
        message,
    }
}

/// Refuses names of no loaded skill, each as a field error.
pub(super) fn check_names(catalog: &Catalog, names: &[String], field: &str) -> Result<(), SessionError> {
    let unknown: Vec<FieldError> = names
        .iter()
        .enumerate()
        .filter(|(_, n)| catalog.skill(n).is_none())
        .map(|(i, n)| {
            field_error(
                &format!("{field}[{i}]"),
                format!("no loaded skill is named '{}'", n.escape_debug()),
            )
        })
        .collect();
    if unknown.is_empty() {
        Ok(())
    } else {
        Err(SessionError::UnknownSkill(unknown))
    }
}

fn state(state: Lifecycle, hash: &str) -> SkillState {
    SkillState {
        state,
        hash: hash.to_owned(),
        trigger: None,
        allowed: None,
        approval: None,
        reason: None,
        switched_off: false,
    }
}

impl Sessions {
    /// Activates the skills whose triggers fire for the session's context
    /// and `message` (and those `explicit` names), after putting back to
    /// Inactive those that changed or are gone.
    pub(super) async fn activation_pass(
        self: &Arc<Self>,
        open: &mut Open,
        message: &str,
        explicit: &[String],
        reports: &mut Vec<HookReport>,
    ) -> Changes {
        let catalog = self.catalog();
        refresh(open, &catalog);
        let mut changes = std::mem::take(&mut open.refreshed);
        let mut named = open.context.explicit.clone();
        named.extend(explicit.iter().cloned());
        let ctx = Context {
            files: &open.context.files,
            message,
            languages: &open.context.languages,
            mode: &open.context.mode,
            explicit: &named,
        };
        let mut fired = Vec::new();
        for skill in Self::ordered(&catalog, catalog.skills.iter().map(|s| s.name.as_str())) {
            let settled = open.state.skills.get(&skill.name).is_some_and(|s| {
                s.state != Lifecycle::Inactive || (s.switched_off && !explicit.contains(&skill.name))
            });
            if settled {
                continue;
            }
            if let Some(trigger) = triggers::fired(&skill, &ctx) {
                fired.push((skill, trigger));
            }
        }
        for (skill, trigger) in fired {
            self.begin(open, &skill, trigger, &mut changes, reports).await;
        }
        changes
    }

    /// A skill whose trigger fired: active at once when nothing needs
    /// asking, else activating, with a request for a person.
    async fn begin(
        self: &Arc<Self>,
        open: &mut Open,
        skill: &Skill,
        trigger: FiredTrigger,
        changes: &mut Changes,
        reports: &mut Vec<HookReport>,
    ) {
        let mut entry = state(Lifecycle::Activating, &skill.hash);
        entry.trigger = Some(trigger);
        match self.allowance(skill).await {
            Ok(Some(allowed)) => {
                entry.allowed = Some(allowed);
                open.state.skills.insert(skill.name.clone(), entry);
                self.activate(open, skill, changes, reports).await;
            }
            Ok(None) => {
                entry.approval = Some(ActivationRequest {
                    id: Uuid::now_v7(),
                    permissions: skill.permissions.clone(),
                    trust: skill.trust,
                    requested_at: Utc::now(),
                    network: crate::policy::network_warning(skill),
                });
                open.state.skills.insert(skill.name.clone(), entry);
            }
            Err(e) => {
                entry.state = Lifecycle::Error;
                entry.reason = Some(format!("its approvals cannot be read: {e}"));
                open.state.skills.insert(skill.name.clone(), entry);
            }
        }
    }

    /// How `skill` may activate without asking anyone, if it may.
    async fn allowance(&self, skill: &Skill) -> Result<Option<Allowed>, crate::store::StoreError> {
        if self.settings.approved_skills.contains(&skill.name) {
            return Ok(Some(Allowed::Configured));
        }
        // An untrusted skill asks even with nothing declared: a person
        // lets its hooks see the session's calls.
        if skill.permissions.is_empty() && skill.trust != Trust::Untrusted {
            return Ok(Some(Allowed::NothingToAsk));
        }
        let kept = self
            .skill_approvals
            .skill_approval(&skill.name, &skill.hash)
            .await?;
        let covers = kept.is_some_and(|a| skill.permissions.iter().all(|p| a.permissions.contains(p)));
        Ok(covers.then_some(Allowed::Always))
    }

    /// Activating → Active, through `on_activate` (a failing or
    /// cancelling hook puts it in Error).
    async fn activate(
        self: &Arc<Self>,
        open: &mut Open,
        skill: &Skill,
        changes: &mut Changes,
        reports: &mut Vec<HookReport>,
    ) {
        let payload = json!({"session": open.record.id, "skill": skill.name});
        let answer = self
            .run_hook(open, skill, Phase::OnActivate, payload, reports)
            .await;
        let Some(entry) = open.state.skills.get_mut(&skill.name) else {
            return;
        };
        entry.approval = None;
        match answer {
            Some(Err(why)) => fail(entry, format!("its on_activate hook failed: {why}")),
            Some(Ok(HookAnswer::Cancel(why))) => fail(entry, format!("its on_activate hook refused: {why}")),
            _ => {
                entry.state = Lifecycle::Active;
                entry.reason = None;
                changes.activated.push(skill.name.clone());
            }
        }
    }

    /// Active → Inactive through `on_deactivate`, for each of `names`
    /// that is active.
    pub(super) async fn deactivate(
        self: &Arc<Self>,
        open: &mut Open,
        names: &[String],
        reports: &mut Vec<HookReport>,
    ) -> Changes {
        let catalog = self.catalog();
        let mut changes = Changes::default();
        let active: Vec<&str> = names
            .iter()
            .map(String::as_str)
            .filter(|n| open.state.is_active(n))
            .collect();
        for skill in Self::ordered(&catalog, active.into_iter()) {
            let payload = json!({"session": open.record.id, "skill": skill.name});
            self.run_hook(open, &skill, Phase::OnDeactivate, payload, reports)
                .await;
            if let Some(entry) = open.state.skills.get_mut(&skill.name) {
                entry.state = Lifecycle::Inactive;
                entry.reason = Some("deactivated by the session's caller".to_owned());
                entry.switched_off = true;
                changes.deactivated.push(skill.name.clone());
            }
        }
        changes
    }

    /// A session past its time, already deleted by the sweep: its active
    /// skills' `on_deactivate` hooks run (with `"expired": true`), and
    /// nothing is saved.
    pub(super) async fn expired(self: &Arc<Self>, record: SessionRecord) {
        let id = record.id;
        let order = self.live(id).order.clone().lock_owned().await;
        let context = serde_json::from_value(record.context.clone());
        let state = serde_json::from_value(record.state.clone());
        let (Ok(context), Ok(state)) = (context, state) else {
            tracing::warn!(session = %id, "an expired session's state cannot be read; its skills are not told");
            return self.forget(id);
        };
        let open = Open {
            record,
            context,
            state,
            refreshed: Changes::default(),
            _order: order,
        };
        let catalog = self.catalog();
        let mut reports = Vec::new();
        for skill in Self::seated(&catalog, &open.state) {
            let payload = json!({"session": id, "skill": skill.name, "expired": true});
            self.run_hook(&open, &skill, Phase::OnDeactivate, payload, &mut reports)
                .await;
        }
        self.forget(id);
    }

    /// `on_conversation_start` of every active skill.
    pub(super) async fn conversation_start(self: &Arc<Self>, open: &Open, reports: &mut Vec<HookReport>) {
        let catalog = self.catalog();
        let payload = json!({"session": open.record.id, "context": open.context});
        for skill in Self::seated(&catalog, &open.state) {
            self.run_hook(open, &skill, Phase::OnConversationStart, payload.clone(), reports)
                .await;
        }
    }

    /// A person's decision on activation request `asked` of `skill` in
    /// session `id`: it must be the request that waits now, for the
    /// version it showed. The session's own caller cannot decide it.
    pub async fn decide(
        self: &Arc<Self>,
        (id, skill): (Uuid, &str),
        decided_by: Option<&str>,
        asked: &super::view::DecideActivation,
    ) -> Result<super::SessionView, SessionError> {
        super::view::checked_note(asked.note.as_deref())?;
        let mut open = self.held(id).await?;
        if decided_by.is_some() && open.record.caller.as_deref() == decided_by {
            return Err(SessionError::SelfApproval(
                decided_by.unwrap_or_default().to_owned(),
            ));
        }
        let waiting = waiting(&open, id, skill, asked)?;
        let catalog = self.catalog();
        let loaded = catalog.skill(skill).cloned();
        let Some(loaded) = loaded.filter(|s| s.hash == waiting.hash) else {
            return Err(SessionError::SkillChanged(skill.to_owned()));
        };
        let mut changes = std::mem::take(&mut open.refreshed);
        let mut reports = Vec::new();
        let ruling = Ruling {
            by: decided_by,
            decision: asked.decision,
            note: asked.note.clone(),
        };
        self.rule(&mut open, &loaded, ruling, &mut changes, &mut reports)
            .await?;
        let open = self.save(open).await?;
        Ok(self.view(&open, changes, reports))
    }

    /// Carries out a person's ruling on `skill`'s activation.
    async fn rule(
        self: &Arc<Self>,
        open: &mut Open,
        skill: &Skill,
        ruling: Ruling<'_>,
        changes: &mut Changes,
        reports: &mut Vec<HookReport>,
    ) -> Result<(), SessionError> {
        let Ruling {
            by: decided_by,
            decision,
            note,
        } = ruling;
        let allowed = match decision {
            ActivationDecision::AllowOnce => Allowed::Once,
            ActivationDecision::AllowAlways => {
                self.skill_approvals
                    .put_skill_approval(SkillApproval {
                        skill: skill.name.clone(),
                        skill_hash: skill.hash.clone(),
                        permissions: skill.permissions.clone(),
                        decided_by: decided_by.map(str::to_owned),
                        decided_at: Utc::now(),
                    })
                    .await?;
                Allowed::Always
            }
            ActivationDecision::Deny => {
                if let Some(entry) = open.state.skills.get_mut(&skill.name) {
                    let by = decided_by.unwrap_or("a person");
                    let why = note.filter(|n| !n.is_empty()).map(|n| format!(": {n}"));
                    fail(entry, format!("denied by {by}{}", why.unwrap_or_default()));
                }
                return Ok(());
            }
        };
        if let Some(entry) = open.state.skills.get_mut(&skill.name) {
            entry.allowed = Some(allowed);
        }
        self.activate(open, skill, changes, reports).await;
        Ok(())
    }
}

/// The state of `skill` in `open` when `asked` decides the request that
/// waits there now: one that no longer waits (the skill changed and asked
/// again, or went) is refused, saying what waits instead.
fn waiting(
    open: &Open,
    session: Uuid,
    skill: &str,
    asked: &super::view::DecideActivation,
) -> Result<SkillState, SessionError> {
    let entry = open.state.skills.get(skill);
    let now = entry
        .filter(|s| s.state == Lifecycle::Activating)
        .and_then(|s| Some((s, s.approval.as_ref()?)));
    match now {
        Some((s, request)) if request.id == asked.request && s.hash == asked.hash => Ok(s.clone()),
        Some((s, request)) => Err(SessionError::RequestGone {
            skill: skill.to_owned(),
            session,
            request: asked.request,
            instead: Some(super::error::Instead {
                request: request.id,
                hash: s.hash.clone(),
                permissions: request.permissions.clone(),
            }),
        }),
        None if entry.is_some_and(|s| s.state == Lifecycle::Inactive && s.reason.is_some()) => {
            Err(SessionError::RequestGone {
                skill: skill.to_owned(),
                session,
                request: asked.request,
                instead: None,
            })
        }
        None => Err(SessionError::NotActivating {
            skill: skill.to_owned(),
            session,
        }),
    }
}

/// A person's decision on an activation request.
struct Ruling<'a> {
    by: Option<&'a str>,
    decision: ActivationDecision,
    note: Option<String>,
}

fn fail(entry: &mut SkillState, why: String) {
    entry.state = Lifecycle::Error;
    entry.approval = None;
    entry.reason = Some(why);
}

/// Skills that are gone from the catalog, or changed since they were
/// activated (or asked for), go back to Inactive: a changed skill asks
/// again, as its new content was never allowed. Those that were active
/// go to `open.refreshed`.
pub(super) fn refresh(open: &mut Open, catalog: &Catalog) {
    let changes = &mut open.refreshed;
    for (name, entry) in open.state.skills.iter_mut() {
        if entry.state == Lifecycle::Inactive {
            continue;
        }
        let why = match catalog.skill(name) {
            None => "it is no longer loaded",
            Some(s) if s.hash != entry.hash => "it changed since it was activated",
            Some(_) => continue,
        };
        if entry.state == Lifecycle::Active {
            changes.deactivated.push(name.clone());
        }
        *entry = state(Lifecycle::Inactive, &entry.hash);
        entry.reason = Some(why.to_owned());
    }
}
