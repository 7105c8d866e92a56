//! The SDK functions that reach back through the call's context: `llm`,
//! the model reached through the session client's MCP sampling, and
//! `invoke_tool`, another tool called through skilld's own pipeline. Both
//! are bounded by the evaluation's deadline and cancel.

use super::bounds::Bounds;
use crate::skill::context::{CallContext, Spend};
use anyhow::{anyhow, bail};
use serde_json::{Value, json};
use std::future::Future;

/// What these functions need of an evaluation's scope.
pub(super) struct Reach<'a> {
    pub context: &'a CallContext,
    /// The skill whose script asks.
    pub skill: &'a str,
    pub bounds: &'a Bounds,
    pub runtime: &'a tokio::runtime::Handle,
}

/// `maxTokens` when the script gives none.
const DEFAULT_MAX_TOKENS: u64 = 1024;

/// Asks the model `prompt` (with `system`), once the turn allows: the
/// answer's text.
pub(super) fn llm(
    scope: &Reach<'_>,
    prompt: &str,
    system: Option<&str>,
    max_tokens: Option<u64>,
) -> anyhow::Result<Value> {
    let Some(sampler) = scope.context.sampler.clone() else {
        bail!("llm: no model: this call's session has no client that offers sampling");
    };
    let max_tokens = max_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
    if max_tokens == 0 {
        bail!("llm: max_tokens must be at least 1");
    }
    let mut params = json!({
        "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
        "maxTokens": max_tokens,
    });
    if let Some(system) = system {
        params["systemPrompt"] = json!(system);
    }
    scope
        .context
        .budget
        .spend(Spend::LlmCall)
        .map_err(|why| anyhow!("llm is refused: {why}"))?;
    let answer =
        bounded(scope, async move { sampler.sample(params).await }).map_err(|why| anyhow!("llm: {why}"))?;
    text_of(&answer).map(Value::String)
}

/// Calls `tool` with `input` on the skill's behalf: the call's envelope.
pub(super) fn invoke_tool(scope: &Reach<'_>, tool: &str, input: Value) -> anyhow::Result<Value> {
    let Some(tools) = scope.context.tools.clone() else {
        bail!("invoke_tool: no tools: this call was made outside a session that lets a skill call tools");
    };
    if !input.is_object() {
        bail!("invoke_tool: args must be a dict");
    }
    let from = scope.skill.to_owned();
    let tool_name = tool.to_owned();
    let budget = scope.context.budget.clone();
    bounded(scope, async move {
        tools.call_tool(&from, &tool_name, input, budget).await
    })
    .map_err(|why| anyhow!("invoke_tool: {tool}: {why}"))
}

/// Runs `work` on the server's runtime until the evaluation's deadline
/// or cancel.
fn bounded<T>(scope: &Reach<'_>, work: impl Future<Output = Result<T, String>>) -> Result<T, String> {
    let left = scope.bounds.left();
    let cancel = scope.bounds.cancel.clone();
    scope.runtime.block_on(async move {
        tokio::select! {
            done = tokio::time::timeout(left, work) => done.unwrap_or_else(|_| Err("timed out".to_owned())),
            () = cancel.cancelled() => Err("cancelled".to_owned()),
        }
    })
}

/// The text of a `sampling/createMessage` result: its content, one block
/// or a list of them, text blocks joined.
fn text_of(result: &Value) -> anyhow::Result<String> {
    let blocks = match result.get("content") {
        Some(Value::Array(blocks)) => blocks.iter().collect(),
        Some(block) => vec![block],
        None => Vec::new(),
    };
    let texts: Vec<&str> = blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect();
    if texts.is_empty() {
        bail!("llm: the model's answer has no text");
    }
    Ok(texts.concat())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_of_an_answer_is_its_text_blocks() {
        let one = json!({"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"});
        assert_eq!(text_of(&one).unwrap(), "hi");
        let many = json!({"content": [{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}]});
        assert_eq!(text_of(&many).unwrap(), "ab");
        assert!(text_of(&json!({"content": {"type": "image"}})).is_err());
    }
}
