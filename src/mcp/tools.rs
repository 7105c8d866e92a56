//! `tools/list` and `tools/call`: the catalog's MCP export, and calls
//! through the invoke pipeline, answered as MCP tool results.

use super::WAIT_META;
use crate::auth::Caller;
use crate::catalog::Catalog;
use crate::export::Format;
use crate::invoke::{
    Asked, Call, Called, Delivery, Envelope, Gate, Held, InvokeError, Invoker, MAX_WAIT, Target,
};
use rmcp::ErrorData;
use rmcp::model::{CallToolRequestParams, CallToolResult, ListToolsResult, RequestMetaObject};
use serde_json::{Map, Value, json};
use std::sync::Arc;
use std::time::Duration;

/// Every tool, exactly as `GET /tools?format=mcp` exports it.
pub(super) fn list(catalog: &Catalog) -> Result<ListToolsResult, ErrorData> {
    let body = catalog.exports.body(Format::Mcp, None, None);
    let wire = serde_json::from_slice(&body)
        .map_err(|e| ErrorData::internal_error(format!("the tool export: {e}"), None))?;
    super::shaped(wire)
}

/// Runs one `tools/call`. Only a request that names no tool is a protocol
/// error; everything the model can act on (bad arguments, a held call, a
/// denial, a failed run) is a result it reads, with `isError` set.
pub(super) async fn call(
    invoker: &Arc<Invoker>,
    catalog: &Arc<Catalog>,
    caller: &Caller,
    request: CallToolRequestParams,
    wait: Result<Duration, String>,
    origin: Option<&str>,
) -> Result<CallToolResult, ErrorData> {
    let wait = match wait {
        Ok(wait) => wait,
        Err(why) => return Ok(text_error(why)),
    };
    let call = Call {
        target: Target::Tool(request.name.into_owned()),
        arguments: Value::Object(request.arguments.unwrap_or_default()),
        mode: None,
        dry_run: false,
        wait,
        delivery: Delivery::Result,
        gate: Gate::Policy,
        asked: Asked {
            by: caller.name.clone(),
            request_id: None,
        },
    };
    match invoker.call(catalog, call).await {
        Ok(called) => answer(called, origin),
        Err(e @ (InvokeError::NotFound { .. } | InvokeError::Ambiguous { .. })) => {
            Err(ErrorData::invalid_params(e.to_string(), None))
        }
        Err(InvokeError::Store(e)) => {
            tracing::error!(error = %e, "MCP tools/call: the run log failed");
            Err(ErrorData::internal_error("the run log is unavailable", None))
        }
        Err(e) => Ok(text_error(e.sentence())),
    }
}

/// `_meta["skilld/wait"]`: whole seconds, at most [`MAX_WAIT`].
pub(super) fn wait(meta: &RequestMetaObject) -> Result<Duration, String> {
    let Some(value) = meta.0.get(WAIT_META) else {
        return Ok(Duration::ZERO);
    };
    value
        .as_u64()
        .filter(|&secs| secs <= MAX_WAIT.as_secs())
        .map(Duration::from_secs)
        .ok_or_else(|| {
            format!(
                "_meta \"{WAIT_META}\" must be a whole number of seconds from 0 to {}",
                MAX_WAIT.as_secs()
            )
        })
}

fn answer(called: Called, origin: Option<&str>) -> Result<CallToolResult, ErrorData> {
    match called {
        Called::Finished(envelope) => Ok(finished(&envelope)),
        Called::Held(held) => Ok(held_for_a_person(&held, origin)),
        Called::Refused { run_id, reason } => Ok(text_error(format!(
            "{reason}; nothing ran (run {run_id} is recorded as denied)"
        ))),
        Called::DryRun(_) | Called::Started { .. } => Err(ErrorData::internal_error(
            "the pipeline answered a call that waits for its result with something else",
            None,
        )),
    }
}

/// The run's output for the model, and its whole envelope as structured
/// content for the program.
fn finished(envelope: &Envelope) -> CallToolResult {
    let mut text = envelope.output.clone();
    if let Some(error) = &envelope.error {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!("[skilld: {error}]"));
    }
    result(text, serde_json::to_value(envelope).ok(), !envelope.success)
}

/// Why nothing ran yet, and where a person decides.
fn held_for_a_person(held: &Held, origin: Option<&str>) -> CallToolResult {
    // Over stdio there is no address: the inbox is that of the server
    // sharing the run log.
    let inbox = origin.map_or_else(
        || "/ui of the skilld server that shares this run log".to_owned(),
        |o| format!("{o}/ui"),
    );
    let origin = origin.unwrap_or("");
    let approval_url = format!("{origin}/approvals/{}", held.approval_id);
    let text = format!(
        "This call is waiting for a person to approve it; nothing has run yet. \
         Approval {id} can be decided in the inbox at {inbox} or at {approval_url}. \
         Once approved it runs as run {run}. To receive the result in the same call, \
         call with _meta {{\"{WAIT_META}\": <seconds up to {max}>}}.",
        id = held.approval_id,
        run = held.run_id,
        max = MAX_WAIT.as_secs(),
    );
    let structured = json!({
        "status": "pending_approval",
        "run_id": held.run_id,
        "approval_id": held.approval_id,
        "approval_url": approval_url,
        "run_url": format!("{origin}/runs/{}", held.run_id),
    });
    result(text, Some(structured), true)
}

fn text_error(text: String) -> CallToolResult {
    result(text, None, true)
}

fn result(text: String, structured: Option<Value>, is_error: bool) -> CallToolResult {
    let mut body = Map::new();
    body.insert("content".into(), json!([{ "type": "text", "text": text }]));
    if let Some(s) = structured {
        body.insert("structuredContent".into(), s);
    }
    body.insert("isError".into(), Value::Bool(is_error));
    // The shape above is fixed: it always reads as a CallToolResult.
    super::shaped(Value::Object(body)).unwrap_or_else(|_| CallToolResult::error(Vec::new()))
}

/// `scheme://host` of the request, for links a person can open.
pub(super) fn origin(parts: &axum::http::request::Parts) -> Option<String> {
    let host = parts.headers.get(axum::http::header::HOST)?.to_str().ok()?;
    let scheme = parts
        .headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .filter(|p| matches!(*p, "http" | "https"))
        .unwrap_or("http");
    Some(format!("{scheme}://{host}"))
}
