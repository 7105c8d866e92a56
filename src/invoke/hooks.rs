//! A manifest skill's hooks around a call of its tools (`docs/skills.md`
//! "Hooks"): `before_tool_call` may change the input or cancel the call,
//! `after_tool_result` may change the result. Each one's effect goes into
//! the envelope, so the run log keeps it.

use super::{Envelope, Prepared, args};
use crate::skill::backend::{Backend, BackendError, HookAnswer, HookCall};
use crate::skill::context::CallContext;
use crate::skill::phases::Phase;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::time::Duration;
use utoipa::ToSchema;

/// The longest a hook may take.
pub const HOOK_TIMEOUT: Duration = Duration::from_secs(10);

pub const BEFORE: &str = "before_tool_call";
pub const AFTER: &str = "after_tool_result";

/// What one hook did to a call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct HookEffect {
    /// `before_tool_call` or `after_tool_result`.
    pub phase: String,
    /// `kept`, `replaced_input`, `replaced_result`, `cancelled` or `failed`.
    pub effect: String,
    /// The new input or result, the reason of a cancel, or why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<serde_json::Value>)]
    pub detail: Option<Value>,
    /// The skill whose hook it was, for a call made in a session (whose
    /// hooks may be other skills').
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill: Option<String>,
}

/// How the call goes on after `before_tool_call`.
pub(super) enum Before {
    Go,
    Cancel(String),
    Failed(BackendError),
}

fn hook_call(phase: Phase, p: &Prepared, payload: Value, context: &CallContext) -> HookCall {
    HookCall {
        phase,
        tool: Some(p.tool().name.clone()),
        payload,
        timeout: HOOK_TIMEOUT,
        context: context.clone(),
    }
}

fn effect(phase: &str, effect: &str, detail: Option<Value>) -> HookEffect {
    HookEffect {
        phase: phase.to_owned(),
        effect: effect.to_owned(),
        detail,
        skill: None,
    }
}

/// Runs `before_tool_call` if the backend has it (among `hooks`),
/// replacing `p`'s arguments with a changed input (checked again like the
/// caller's).
pub(super) async fn before(
    p: &mut Prepared,
    backend: &dyn Backend,
    hooks: &[String],
    context: &CallContext,
    effects: &mut Vec<HookEffect>,
) -> Before {
    if !hooks.iter().any(|h| h == BEFORE) {
        return Before::Go;
    }
    // The same fields as in a session (src/invoke/session.rs), no session.
    let payload = json!({
        "input": p.arguments, "tool": p.tool().name, "skill": p.skill.name, "session": Value::Null,
    });
    let answer = backend
        .hook(hook_call(Phase::BeforeToolCall, p, payload, context))
        .await;
    let (done, step) = read_before(p, answer);
    effects.push(done);
    match step {
        Step::Keep => Before::Go,
        Step::Input(input) => {
            p.arguments = input;
            Before::Go
        }
        Step::Cancel(reason) => Before::Cancel(reason),
        Step::Failed(why) => {
            Before::Failed(why.reworded(|w| format!("the skill's {BEFORE} hook failed: {w}")))
        }
    }
}

/// What one `before_tool_call` answer does to a call.
pub(super) enum Step {
    Keep,
    /// Its input is this (checked against the tool).
    Input(Map<String, Value>),
    Cancel(String),
    Failed(BackendError),
}

/// Reads one `before_tool_call` answer to a call of `p`: what it did, for
/// the envelope, and the step it asks for.
pub(super) fn read_before(p: &Prepared, answer: Result<HookAnswer, BackendError>) -> (HookEffect, Step) {
    let text = |t: &dyn std::fmt::Display| Some(Value::String(t.to_string()));
    match answer {
        Err(why) => (effect(BEFORE, "failed", text(&why)), Step::Failed(why)),
        Ok(HookAnswer::Keep) => (effect(BEFORE, "kept", None), Step::Keep),
        Ok(HookAnswer::Cancel(reason)) => (effect(BEFORE, "cancelled", text(&reason)), Step::Cancel(reason)),
        Ok(HookAnswer::Replace(payload)) => match new_input(p, &payload) {
            Ok(input) => {
                let detail = Some(Value::Object(input.clone()));
                (effect(BEFORE, "replaced_input", detail), Step::Input(input))
            }
            Err(why) => (effect(BEFORE, "failed", text(&why)), Step::Failed(why)),
        },
    }
}

/// The input of a `{"payload": {"input": {...}}}` answer, valid for the
/// tool. Anything else is an answer out of the hook protocol.
pub(super) fn new_input(p: &Prepared, payload: &Value) -> Result<Map<String, Value>, BackendError> {
    let Some(Value::Object(input)) = payload.get("input") else {
        return Err(BackendError::Protocol(
            "its payload must be {\"input\": {...}}".to_owned(),
        ));
    };
    args::validate(p.tool(), input).map_err(|errors| {
        let said: Vec<String> = errors
            .iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect();
        BackendError::Protocol(format!(
            "the input it gave is not valid for the tool ({})",
            said.join("; ")
        ))
    })
}

/// Runs `after_tool_result` if the backend has it (among `hooks`): a
/// payload's `result` replaces the envelope's `output` and `parsed` with
/// those it gives. A failing hook fails the call, its result kept for the
/// record.
pub(super) async fn after(
    p: &Prepared,
    backend: &dyn Backend,
    hooks: &[String],
    context: &CallContext,
    envelope: &mut Envelope,
    effects: &mut Vec<HookEffect>,
) {
    if !hooks.iter().any(|h| h == AFTER) {
        return;
    }
    let payload = json!({
        "input": p.arguments, "result": envelope, "tool": p.tool().name, "skill": p.skill.name,
        "session": Value::Null,
    });
    let outcome = backend
        .hook(hook_call(Phase::AfterToolResult, p, payload, context))
        .await
        .and_then(|answer| apply(answer, envelope));
    match outcome {
        Ok(e) => effects.push(e),
        Err(why) => {
            effects.push(effect(AFTER, "failed", Some(Value::String(why.to_string()))));
            envelope.fail_for_backend(&why.reworded(|w| format!("the skill's {AFTER} hook failed: {w}")));
        }
    }
}

/// What an `after_tool_result` answer does to `envelope`. An answer the
/// phase cannot take is out of the hook protocol.
pub(super) fn apply(answer: HookAnswer, envelope: &mut Envelope) -> Result<HookEffect, BackendError> {
    let wrong = |why: &str| BackendError::Protocol(why.to_owned());
    match answer {
        HookAnswer::Keep => Ok(effect(AFTER, "kept", None)),
        HookAnswer::Cancel(_) => Err(wrong("a result cannot be cancelled; it ran")),
        HookAnswer::Replace(payload) => {
            let Some(Value::Object(result)) = payload.get("result") else {
                return Err(wrong(
                    "its payload must be {\"result\": {\"output\", \"parsed\"}}",
                ));
            };
            if let Some(output) = result.get("output") {
                let text = output.as_str().map_or_else(|| output.to_string(), str::to_owned);
                let (kept, truncated, bytes) = crate::runner::clip(text.as_bytes());
                (envelope.output, envelope.truncated, envelope.output_bytes) = (kept, truncated, bytes);
            }
            if let Some(parsed) = result.get("parsed") {
                envelope.parsed = (!parsed.is_null()).then(|| parsed.clone());
            }
            Ok(effect(
                AFTER,
                "replaced_result",
                Some(Value::Object(result.clone())),
            ))
        }
    }
}
