//! What the session routes take and answer.

use super::error::SessionError;
use super::state::{ActivationRequest, Allowed, Lifecycle, SessionState, TriggerContext};
use super::{Open, Sessions};
use crate::catalog::Catalog;
use crate::invoke::FieldError;
use crate::skill::backend::{BackendError, HookAnswer};
use crate::skill::phases::Phase;
use crate::skill::triggers::FiredTrigger;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

/// What a request switched on and off.
#[derive(Debug, Default)]
pub struct Changes {
    pub activated: Vec<String>,
    pub deactivated: Vec<String>,
}

impl Changes {
    pub(super) fn absorb(&mut self, other: Changes) {
        self.activated.extend(other.activated);
        self.deactivated.extend(other.deactivated);
    }
}

/// The bounds the request schemas below give, which the routes keep.
const MAX_MESSAGE_CHARS: usize = 100_000;
const MAX_NAMES: usize = 1000;
const MAX_RESPONSE_CHARS: usize = 1_000_000;
const MAX_WIKI_CONTEXT: usize = 100;
const MAX_NOTE_CHARS: usize = 4096;
const MAX_SECTION_CHARS: usize = 256;

/// Field errors for texts and lists past their bounds.
#[derive(Default)]
pub(super) struct Bounds(Vec<FieldError>);

impl Bounds {
    pub(super) fn text(mut self, field: &str, text: &str, max: usize) -> Self {
        if text.chars().count() > max {
            self.refuse(field, format!("at most {max} characters"));
        }
        self
    }

    pub(super) fn list<T>(mut self, field: &str, list: &[T], max: usize) -> Self {
        if list.len() > max {
            self.refuse(field, format!("at most {max} entries"));
        }
        self
    }

    pub(super) fn refuse(&mut self, field: &str, message: String) {
        self.0.push(FieldError {
            field: field.to_owned(),
            message,
        });
    }

    pub(super) fn checked(self) -> Result<(), SessionError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(SessionError::Invalid(self.0))
        }
    }
}

/// A turn: the user's last message, and skills to switch on or off.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnRequest {
    /// The user's last message: keyword triggers match it.
    #[serde(default)]
    #[schema(max_length = 100000)]
    pub message: String,
    /// Skills to activate whatever their triggers.
    #[serde(default)]
    #[schema(max_items = 1000)]
    pub activate: Vec<String>,
    /// Active skills to deactivate.
    #[serde(default)]
    #[schema(max_items = 1000)]
    pub deactivate: Vec<String>,
}

impl TurnRequest {
    pub(super) fn checked(&self) -> Result<(), SessionError> {
        Bounds::default()
            .text("message", &self.message, MAX_MESSAGE_CHARS)
            .list("activate", &self.activate, MAX_NAMES)
            .list("deactivate", &self.deactivate, MAX_NAMES)
            .checked()
    }
}

/// One skill in a session.
#[derive(Debug, Serialize, ToSchema)]
pub struct SkillView {
    pub name: String,
    pub state: Lifecycle,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trigger: Option<FiredTrigger>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed: Option<Allowed>,
    /// The request a person must decide (`POST
    /// /sessions/{id}/activations/{skill}`), while `activating`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<ActivationRequest>,
    /// The content hash of the version it was activated (or asks to be)
    /// at; a decision names it.
    pub hash: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What one skill's hook did.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct HookReport {
    pub skill: String,
    pub phase: Phase,
    /// `kept`, `replaced`, `cancelled` or `failed`.
    pub effect: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub detail: Option<Value>,
}

impl HookReport {
    pub(super) fn of(skill: &str, phase: Phase, answer: &Result<HookAnswer, BackendError>) -> Self {
        let (effect, detail) = match answer {
            Ok(HookAnswer::Keep) => ("kept", None),
            Ok(HookAnswer::Replace(payload)) => ("replaced", Some(payload.clone())),
            Ok(HookAnswer::Cancel(reason)) => ("cancelled", Some(Value::String(reason.clone()))),
            Err(why) => ("failed", Some(Value::String(why.to_string()))),
        };
        Self {
            skill: skill.to_owned(),
            phase,
            effect: effect.to_owned(),
            detail,
        }
    }
}

/// A session as its caller sees it.
#[derive(Debug, Serialize, ToSchema)]
pub struct SessionView {
    pub id: Uuid,
    pub turn: u32,
    pub context: TriggerContext,
    /// Every skill the session has met, by name.
    pub skills: Vec<SkillView>,
    /// Skills this request activated, and those it deactivated.
    pub activated: Vec<String>,
    pub deactivated: Vec<String>,
    /// The hooks this request ran, in the order they ran.
    pub hooks: Vec<HookReport>,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    /// The session's secret, in the answer of `POST /sessions` only: later
    /// requests on the session show it in the `Skilld-Session-Secret`
    /// header (a token of the session's own named caller does instead).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

/// A prompt fragment of an active skill.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Fragment {
    pub skill: String,
    /// `instructions` (the skill's own prompt: a manifest's system prompt
    /// and context files within its token budget) or `hook` (given by its
    /// `on_before_prompt_build`).
    pub source: String,
    pub text: String,
}

/// A tool of an active skill, as a call names it.
#[derive(Debug, Serialize, ToSchema)]
pub struct ActiveTool {
    /// The name to call it by.
    pub name: String,
    pub skill: String,
    pub description: String,
    /// Its arguments' JSON Schema.
    #[schema(value_type = Object)]
    pub input_schema: Value,
}

/// A turn's answer: the session, the prompt and the tools active now.
#[derive(Debug, Serialize, ToSchema)]
pub struct TurnView {
    pub session: SessionView,
    pub prompt: Vec<Fragment>,
    pub tools: Vec<ActiveTool>,
}

/// The model's response, for `on_after_response`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResponseRequest {
    #[schema(max_length = 1000000)]
    pub text: String,
}

/// Refuses a response text past its bound.
pub(super) fn checked_response(text: &str) -> Result<(), SessionError> {
    Bounds::default().text("text", text, MAX_RESPONSE_CHARS).checked()
}

/// Refuses a wiki section's name or context past their bounds.
pub(super) fn checked_wiki(section: &str, context: &[String]) -> Result<(), SessionError> {
    Bounds::default()
        .text("section", section, MAX_SECTION_CHARS)
        .list("context", context, MAX_WIKI_CONTEXT)
        .checked()
}

/// Refuses a decision's note past its bound.
pub(super) fn checked_note(note: Option<&str>) -> Result<(), SessionError> {
    Bounds::default()
        .text("note", note.unwrap_or_default(), MAX_NOTE_CHARS)
        .checked()
}

/// The response as the transform chain left it.
#[derive(Debug, Serialize, ToSchema)]
pub struct ResponseView {
    pub text: String,
    pub hooks: Vec<HookReport>,
}

/// A wiki section about to be generated, for `on_before_wiki_section`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WikiRequest {
    /// Context the caller has for the section already.
    #[serde(default)]
    #[schema(max_items = 100)]
    pub context: Vec<String>,
}

/// The section's context as the hooks left it.
#[derive(Debug, Serialize, ToSchema)]
pub struct WikiView {
    pub section: String,
    pub context: Vec<String>,
    pub hooks: Vec<HookReport>,
}

/// A person's answer to a skill's activation request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ActivationDecision {
    /// For this session.
    AllowOnce,
    /// For this version of the skill, in every session (kept in the store).
    AllowAlways,
    Deny,
}

/// The body of an activation decision: it names the request it decides,
/// as the approver read it, so a decision never lands on a request made
/// since (the skill changed and asked again).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DecideActivation {
    pub decision: ActivationDecision,
    /// Why, for the session's caller (a denial's reason).
    #[schema(max_length = 4096)]
    pub note: Option<String>,
    /// The request's `id` (`GET /activations`, or the skill's `approval`
    /// in the session).
    pub request: Uuid,
    /// The content hash of the skill's version the request shows.
    #[schema(max_length = 128)]
    pub hash: String,
}

impl Sessions {
    pub(super) fn view(&self, open: &Open, changes: Changes, hooks: Vec<HookReport>) -> SessionView {
        SessionView {
            id: open.record.id,
            turn: open.record.turn,
            context: open.context.clone(),
            skills: skills(&open.state),
            activated: changes.activated,
            deactivated: changes.deactivated,
            hooks,
            created_at: open.record.created_at,
            expires_at: open.record.expires_at,
            secret: None,
        }
    }
}

fn skills(state: &SessionState) -> Vec<SkillView> {
    state
        .skills
        .iter()
        .map(|(name, s)| SkillView {
            name: name.clone(),
            state: s.state,
            trigger: s.trigger.clone(),
            allowed: s.allowed,
            approval: s.approval.clone(),
            hash: s.hash.clone(),
            reason: s.reason.clone(),
        })
        .collect()
}

/// The tools of the skills active in `state`.
pub(super) fn active_tools(catalog: &Catalog, state: &SessionState) -> Vec<ActiveTool> {
    catalog
        .tools
        .iter()
        .filter_map(|entry| {
            let skill = &catalog.skills[entry.skill];
            let tool = &skill.tools[entry.tool];
            state.is_active(&skill.name).then(|| ActiveTool {
                name: entry.export_name.clone(),
                skill: skill.name.clone(),
                description: tool.description.clone(),
                input_schema: crate::export::json_schema(tool),
            })
        })
        .collect()
}
