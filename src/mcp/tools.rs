//! `tools/list` and `tools/call`: the catalog's MCP export, and calls
//! through the invoke pipeline, answered as MCP tool results.

use super::{Decider, Inbox, WAIT_META};
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

/// Every tool, exactly as `GET /tools?format=mcp` exports it (with
/// `mode`, as `&mode=` does).
pub(super) fn list(catalog: &Catalog, mode: Option<&str>) -> Result<ListToolsResult, ErrorData> {
    let body = catalog.exports.body(Format::Mcp, mode, None);
    let wire = serde_json::from_slice(&body)
        .map_err(|e| ErrorData::internal_error(format!("the tool export: {e}"), None))?;
    super::shaped(wire)
}

/// Who asks for a `tools/call`, and how.
pub(super) struct Asking<'a> {
    pub(super) caller: &'a Caller,
    /// `_meta` `skilld/wait`, or why it is not a wait.
    pub(super) wait: Result<Duration, String>,
    /// The caller's mode, if it named one.
    pub(super) mode: Option<String>,
    /// Where a person decides a call that waits for one.
    pub(super) inbox: Inbox<'a>,
}

/// Runs one `tools/call`. Only a request that names no tool is a protocol
/// error; everything the model can act on (bad arguments, a held call, a
/// denial, a tool of another mode, a failed run) is a result it reads,
/// with `isError` set.
pub(super) async fn call(
    invoker: &Arc<Invoker>,
    catalog: &Arc<Catalog>,
    request: CallToolRequestParams,
    asking: Asking<'_>,
) -> Result<CallToolResult, ErrorData> {
    let wait = match asking.wait {
        Ok(wait) => wait,
        Err(why) => return Ok(text_error(why)),
    };
    let call = Call {
        target: Target::Tool(request.name.into_owned()),
        arguments: Value::Object(request.arguments.unwrap_or_default()),
        mode: asking.mode,
        dry_run: false,
        wait,
        delivery: Delivery::Result,
        gate: Gate::Policy,
        asked: Asked {
            by: asking.caller.name.clone(),
            request_id: None,
        },
    };
    match invoker.call(catalog, call).await {
        Ok(called) => answer(called, &asking.inbox).map(|r| super::output::conform(r, catalog)),
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

/// The mode in the query of an `/mcp` request (`/mcp?mode=Dev`).
pub(super) fn query_mode(parts: &axum::http::request::Parts) -> Option<String> {
    let query = parts.uri.query()?;
    form_urlencoded::parse(query.as_bytes())
        .find(|(name, _)| name == "mode")
        .map(|(_, value)| value.into_owned())
}

fn answer(called: Called, inbox: &Inbox<'_>) -> Result<CallToolResult, ErrorData> {
    match called {
        Called::Finished(envelope) => Ok(finished(&envelope)),
        Called::Held(held) => Ok(held_for_a_person(&held, inbox)),
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

/// Why nothing ran yet, and where a person decides: links that work
/// from anywhere, and, over stdio, whether a server is there to decide.
fn held_for_a_person(held: &Held, inbox: &Inbox<'_>) -> CallToolResult {
    let id = held.approval_id;
    let (origin, where_to) = match inbox.locate() {
        Decider::At(origin) => {
            let text =
                format!("It can be decided in the inbox at {origin}/ui or at {origin}/approvals/{id}.");
            (origin, text)
        }
        Decider::Shared(origin) => {
            let text = format!(
                "It is decided in the inbox of a skilld serve that shares this run log \
                 ({origin}/ui, if that is its address)."
            );
            (origin, text)
        }
        Decider::Nobody(origin) => {
            let text = format!(
                "No skilld serve uses this run log now, so nobody can decide it yet: start one on \
                 the same data directory (skilld serve, with this session's --data-dir, --database \
                 and --config) and open the inbox link it prints ({origin}/ui?secret=…)."
            );
            (origin, text)
        }
    };
    let approval_url = format!("{origin}/approvals/{id}");
    let text = format!(
        "This call is waiting for a person to approve it; nothing has run yet (approval {id}). \
         {where_to} Once approved it runs as run {run}. To receive the result in the same call, \
         call with _meta {{\"{WAIT_META}\": <seconds up to {max}>}}.",
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
