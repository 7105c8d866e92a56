//! The shapes of `tools/call` results every path answers with: a run
//! that ended (its output or content blocks, artifacts as links, and its
//! envelope or declared output as structured content), and the plain
//! text ones.

use super::{Decider, Inbox};
use crate::catalog::Catalog;
use crate::invoke::{Envelope, Invoker};
use rmcp::model::CallToolResult;
use serde_json::{Map, Value, json};

/// The run's result for the model: its output or content blocks, its
/// artifacts as links (`content`), and as structured content its
/// envelope, or its JSON output where the tool declares an output schema
/// (`output`). Links point at `origin`.
pub(super) async fn finished(
    invoker: &Invoker,
    catalog: &Catalog,
    envelope: &Envelope,
    origin: &str,
) -> CallToolResult {
    super::output::conform(super::content::finished(invoker, envelope, origin).await, catalog)
}

/// Where links for a person point: the server that decides.
pub(super) fn origin_of(inbox: &Inbox<'_>) -> String {
    match inbox.locate() {
        Decider::At(o) | Decider::Shared(o) | Decider::Nobody(o) => o,
    }
}

/// The result of a run that ended, or `None` while it has not.
pub(super) async fn ended_result(
    invoker: &Invoker,
    catalog: &Catalog,
    run: &crate::store::Run,
    inbox: &Inbox<'_>,
) -> Option<CallToolResult> {
    if !run.status.is_final() {
        return None;
    }
    let envelope: Envelope = serde_json::from_value(run.result.clone()?).ok()?;
    Some(finished(invoker, catalog, &envelope, &origin_of(inbox)).await)
}

pub(super) fn text_error(text: String) -> CallToolResult {
    result(text, None, true)
}

pub(super) fn result(text: String, structured: Option<Value>, is_error: bool) -> CallToolResult {
    let mut body = Map::new();
    body.insert("content".into(), json!([{ "type": "text", "text": text }]));
    if let Some(s) = structured {
        body.insert("structuredContent".into(), s);
    }
    body.insert("isError".into(), Value::Bool(is_error));
    // The shape above is fixed: it always reads as a CallToolResult.
    super::shaped(Value::Object(body)).unwrap_or_else(|_| CallToolResult::error(Vec::new()))
}
