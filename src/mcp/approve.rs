//! In-client approval (opt-in, `docs/mcp.md`): where the configuration
//! lets a caller decide its own calls (the one local user of `skilld mcp
//! --client-approval`, or a token named in `client_approval_tokens`), a
//! held call asks the person in their client: `elicitation/create` on a
//! session of 2025-11-25 and before, an `input_required` result on
//! 2026-07-28. The decision is recorded as that caller's, as any decision
//! is; everyone else's held calls wait for the inbox as before.

use super::Inbox;
use super::results;
use crate::auth::Caller;
use crate::catalog::Catalog;
use crate::invoke::{Held, InvokeError, MAX_WAIT, Ruling};
use crate::store::{Approval, ApprovalStatus, Scope, StoreReader};
use rmcp::ErrorData;
use rmcp::model::{
    CallToolResult, ElicitRequestParams, ElicitResult, ElicitationAction, InputRequiredResult,
};
use serde_json::{Value, json};
use std::sync::Arc;
use uuid::Uuid;

/// The key of the approval among a result's `inputRequests`.
pub(super) const INPUT_KEY: &str = "skilld/approval";

/// The longest note a person may leave from their client.
const MAX_NOTE: u64 = 2000;

/// What the person answered.
pub(super) enum Answer {
    /// They decided: approve once or always, or deny, with a note.
    Decided {
        approve: bool,
        scope: Scope,
        note: Option<String>,
    },
    /// They put it off: the request stays in the inbox.
    Later,
}

/// The question: what would run, and the three answers.
pub(super) fn question(request: &Approval) -> Result<ElicitRequestParams, ErrorData> {
    let arguments = serde_json::to_string(&request.arguments).unwrap_or_default();
    let mut message = format!(
        "skilld: approve this call? Nothing runs until you decide.\n\nTool {} of skill {} ({} skill, content {})\n\
         Arguments: {arguments}\nCommand: {}\nIn: {}",
        request.tool,
        request.skill,
        request.trust,
        request.skill_hash.get(..12).unwrap_or(&request.skill_hash),
        shlex::try_join(request.argv.iter().map(String::as_str)).unwrap_or_default(),
        request.cwd,
    );
    if !request.permissions.is_empty() {
        message.push_str(&format!("\nPermissions: {}", request.permissions.join(", ")));
    }
    if let Some(warning) = &request.warning {
        message.push_str(&format!("\nWarning: {warning}"));
    }
    let wire = json!({
        "mode": "form",
        "message": message,
        "requestedSchema": {
            "type": "object",
            "properties": {
                "decision": {
                    "type": "string",
                    "title": "Decision",
                    "enum": ["approve_once", "approve_always", "deny"],
                    "enumNames": ["Approve once", "Approve always (this tool, this skill content)", "Deny"],
                },
                "note": { "type": "string", "title": "Note", "maxLength": MAX_NOTE },
            },
            "required": ["decision"],
        },
    });
    serde_json::from_value(wire).map_err(|e| ErrorData::internal_error(format!("an elicitation: {e}"), None))
}

/// The person's answer, from an `ElicitResult` (or its JSON, as an
/// `inputResponses` entry carries it). Anything else is a bad answer.
pub(super) fn answer(result: &ElicitResult) -> Result<Answer, ErrorData> {
    let bad = |why: &str| ErrorData::invalid_params(format!("the approval answer {why}"), None);
    match result.action {
        ElicitationAction::Cancel => return Ok(Answer::Later),
        ElicitationAction::Decline => {
            return Ok(Answer::Decided {
                approve: false,
                scope: Scope::Once,
                note: None,
            });
        }
        ElicitationAction::Accept => {}
        // A later action this server does not know: nothing decided.
        _ => return Ok(Answer::Later),
    }
    let content = result
        .content
        .as_ref()
        .ok_or_else(|| bad("accepts but has no content"))?;
    let (approve, scope) = match content.get("decision").and_then(Value::as_str) {
        Some("approve_once") => (true, Scope::Once),
        Some("approve_always") => (true, Scope::Always),
        Some("deny") => (false, Scope::Once),
        _ => return Err(bad("needs a decision: approve_once, approve_always or deny")),
    };
    let note = match content.get("note") {
        None | Some(Value::Null) => None,
        Some(Value::String(n)) if n.is_empty() => None,
        Some(Value::String(n)) => Some(n.clone()),
        Some(_) => return Err(bad("has a note that is not text")),
    };
    Ok(Answer::Decided { approve, scope, note })
}

/// Records the person's decision as the caller's own, and answers with
/// the run's result once it ends (within [`MAX_WAIT`]); `None` when they
/// put it off or it still runs, so the caller gets the waiting result.
pub(super) async fn decide(
    approver: &crate::invoke::Approver,
    catalog: &Arc<Catalog>,
    caller: &Caller,
    inbox: &Inbox<'_>,
    request: &Approval,
    answer: Answer,
) -> Result<Option<CallToolResult>, ErrorData> {
    let Answer::Decided { approve, scope, note } = answer else {
        return Ok(None);
    };
    let ruling = Ruling {
        approve,
        scope,
        decided_by: caller.name.clone(),
        note,
        own: true,
    };
    let decided = match approver.decide_request(catalog, request.id, ruling).await {
        Ok(decided) => decided,
        Err(InvokeError::Store(e)) => return Err(ErrorData::internal_error(e.to_string(), None)),
        Err(e) => return Ok(Some(results::text_error(e.sentence()))),
    };
    tracing::info!(approval = %decided.id, run = %decided.run_id, status = decided.status.as_str(),
        by = decided.decided_by.as_deref().unwrap_or("-"), "approval decided in the client");
    if decided.status == ApprovalStatus::Denied {
        let note = decided
            .note
            .map(|n| format!(" Your note: {n}"))
            .unwrap_or_default();
        return Ok(Some(results::text_error(format!(
            "You denied this call; nothing ran (run {} is recorded as denied).{note}",
            decided.run_id
        ))));
    }
    let invoker = approver.pipeline();
    let run = invoker
        .follower()
        .wait_final(decided.run_id, MAX_WAIT)
        .await
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
    Ok(results::ended_result(invoker, catalog, &run, inbox).await)
}

/// The approval of `held`, to show the person.
pub(super) async fn request_of(reader: &StoreReader, held: &Held) -> Result<Approval, ErrorData> {
    reader
        .get_approval(held.approval_id)
        .await
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))
}

/// The `input_required` result that asks the person (2026-07-28): the
/// state is the approval's id, which the retry must name again.
pub(super) fn input_required(request: &Approval) -> Result<InputRequiredResult, ErrorData> {
    let params = serde_json::to_value(question(request)?)
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
    let wire = json!({
        "resultType": "input_required",
        "inputRequests": { INPUT_KEY: { "method": "elicitation/create", "params": params } },
        "requestState": request.id.to_string(),
    });
    serde_json::from_value(wire)
        .map_err(|e| ErrorData::internal_error(format!("an input request: {e}"), None))
}

/// The approval a retry's `requestState` names, if it is this caller's
/// pending request for this very call; anything else (another caller's,
/// another call's, a decided one, garbage) is refused as tampered.
pub(super) async fn resumed(
    reader: &StoreReader,
    caller: &Caller,
    state: &str,
    tool: &str,
    arguments: &Value,
) -> Result<Approval, ErrorData> {
    let tampered =
        || ErrorData::invalid_params("requestState does not name a pending request of this call", None);
    let id = Uuid::parse_str(state).map_err(|_| tampered())?;
    let request = reader.get_approval(id).await.map_err(|_| tampered())?;
    let same_call = request.requested_by == caller.name
        && (request.tool == tool || format!("{}__{}", request.skill, request.tool) == tool)
        && &request.arguments == arguments;
    if !same_call || request.status != ApprovalStatus::Pending {
        return Err(tampered());
    }
    Ok(request)
}

/// The person's response among a retry's `inputResponses`.
pub(super) fn response(responses: &rmcp::model::InputResponses) -> Result<ElicitResult, ErrorData> {
    let missing = || ErrorData::invalid_params(format!("inputResponses has no valid \"{INPUT_KEY}\""), None);
    let value = responses.get(INPUT_KEY).ok_or_else(missing)?;
    serde_json::from_value(value.clone()).map_err(|_| missing())
}
