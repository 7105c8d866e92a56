//! The text phases of a session: the prompt a turn builds
//! (`on_before_prompt_build`), the model's response through the transform
//! chain (`on_after_response`) and a wiki section's context
//! (`on_before_wiki_section`; seed 002 defers the wiki itself).

use super::view::{self, Fragment, HookReport, ResponseView, WikiView};
use super::{Open, SessionError, Sessions};
use crate::skill::backend::{BackendError, HookAnswer};
use crate::skill::phases::Phase;
use serde_json::{Value, json};
use std::sync::Arc;
use uuid::Uuid;

/// The most fragments (or context entries) one hook may add, and the
/// longest one: a skill's hook must not flood the prompt.
const MAX_ADDED: usize = 16;
const MAX_ADDED_CHARS: usize = 65_536;

impl Sessions {
    /// The active skills' prompt fragments: each one's own instructions,
    /// then what their `on_before_prompt_build` hooks add, in priority
    /// order.
    pub(super) async fn prompt(
        self: &Arc<Self>,
        open: &Open,
        message: &str,
        reports: &mut Vec<HookReport>,
    ) -> Vec<Fragment> {
        let catalog = self.catalog();
        let active = Self::seated(&catalog, &open.state);
        let mut fragments: Vec<Fragment> = active
            .iter()
            .filter(|s| !s.instructions.trim().is_empty())
            .map(|s| Fragment {
                skill: s.name.clone(),
                source: "instructions".to_owned(),
                text: s.instructions.clone(),
            })
            .collect();
        for skill in &active {
            let texts: Vec<&str> = fragments.iter().map(|f| f.text.as_str()).collect();
            let payload = json!({
                "session": open.record.id, "turn": open.record.turn, "message": message, "fragments": texts,
            });
            let answer = self
                .run_hook(open, skill, Phase::OnBeforePromptBuild, payload, reports)
                .await;
            let added = replaced(answer, "fragments", reports);
            fragments.extend(added.into_iter().map(|text| Fragment {
                skill: skill.name.clone(),
                source: "hook".to_owned(),
                text,
            }));
        }
        fragments
    }

    /// The model's response through the transform chain: every active
    /// skill's `on_after_response`, in priority order, each given the
    /// text the one before it left.
    pub async fn respond(
        self: &Arc<Self>,
        (id, caller, secret): (Uuid, Option<&str>, Option<&str>),
        text: String,
    ) -> Result<ResponseView, SessionError> {
        view::checked_response(&text)?;
        let open = self.open(id, caller, secret).await?;
        let catalog = self.catalog();
        let mut reports = Vec::new();
        let mut text = text;
        for skill in Self::seated(&catalog, &open.state) {
            let payload = json!({"session": id, "turn": open.record.turn, "text": text});
            let answer = self
                .run_hook(&open, &skill, Phase::OnAfterResponse, payload, &mut reports)
                .await;
            if let Some(Ok(HookAnswer::Replace(payload))) = &answer {
                match payload.get("text").and_then(Value::as_str) {
                    Some(new) => text = new.to_owned(),
                    None => mark_failed(&mut reports, "its payload must be {\"text\": \"…\"}"),
                }
            }
        }
        Ok(ResponseView { text, hooks: reports })
    }

    /// A wiki section's context through every active skill's
    /// `on_before_wiki_section`, each adding to it.
    pub async fn wiki_section(
        self: &Arc<Self>,
        (id, caller, secret): (Uuid, Option<&str>, Option<&str>),
        section: String,
        context: Vec<String>,
    ) -> Result<WikiView, SessionError> {
        view::checked_wiki(&section, &context)?;
        let open = self.open(id, caller, secret).await?;
        let catalog = self.catalog();
        let mut reports = Vec::new();
        let mut context = context;
        for skill in Self::seated(&catalog, &open.state) {
            let payload = json!({"session": id, "section": section, "context": context});
            let answer = self
                .run_hook(&open, &skill, Phase::OnBeforeWikiSection, payload, &mut reports)
                .await;
            context.extend(replaced(answer, "context", &mut reports));
        }
        Ok(WikiView {
            section,
            context,
            hooks: reports,
        })
    }
}

/// The strings a hook's `{"payload": {KEY: [...]}}` adds, bounded; an
/// answer of another shape is marked failed in `reports`.
fn replaced(
    answer: Option<Result<HookAnswer, BackendError>>,
    key: &str,
    reports: &mut [HookReport],
) -> Vec<String> {
    let Some(Ok(HookAnswer::Replace(payload))) = answer else {
        return Vec::new();
    };
    let texts: Option<Vec<String>> = payload.get(key).and_then(Value::as_array).and_then(|items| {
        items
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<Vec<String>>>()
    });
    match texts {
        Some(texts)
            if texts.len() <= MAX_ADDED && texts.iter().all(|t| t.chars().count() <= MAX_ADDED_CHARS) =>
        {
            texts
        }
        Some(_) => {
            let why = format!("at most {MAX_ADDED} entries of at most {MAX_ADDED_CHARS} characters");
            mark_failed(reports, &why);
            Vec::new()
        }
        None => {
            mark_failed(reports, &format!("its payload must be {{\"{key}\": [\"…\"]}}"));
            Vec::new()
        }
    }
}

/// Marks the last hook report failed, with why.
fn mark_failed(reports: &mut [HookReport], why: &str) {
    if let Some(last) = reports.last_mut() {
        last.effect = "failed".to_owned();
        last.detail = Some(Value::String(why.to_owned()));
    }
}
