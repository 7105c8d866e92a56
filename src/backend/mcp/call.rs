//! One tool call sent upstream: bounded by the call's timeout and cancel,
//! either of which sends `notifications/cancelled` and then kills a stdio
//! server's group; its progress routed to the run; its result read into
//! the backend's shape.

use super::McpBackend;
use super::session::Session;
use super::uri;
use crate::backend::INITIALIZE_TIMEOUT;
use crate::backend::outcome::{self, cancelled, failed};
use crate::skill::backend::{BackendCall, BackendError, BackendResult};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotification,
    CancelledNotificationParam, ClientNotification, ClientRequest, ContentBlock, GetPromptRequestParams,
    ReadResourceRequestParams, RequestId, ServerResult,
};
use rmcp::service::{PeerRequestOptions, ServiceError};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// How long a stdio server has, after `notifications/cancelled`, before
/// its group is killed.
const CANCEL_GRACE: Duration = Duration::from_millis(100);

/// How long a prompt or a resource may take to come.
const EXTRA_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest first line of a failure kept as the error.
const ERROR_CHARS: usize = 500;

impl McpBackend {
    pub(super) async fn call(&self, call: BackendCall) -> BackendResult {
        // Starting the server has its own bound: a tool's timeout is for
        // the call, which may be shorter than a slow server's start.
        let start_by = Instant::now() + call.timeout.max(INITIALIZE_TIMEOUT);
        let session = tokio::select! {
            s = self.session(start_by) => s,
            () = call.cancel.cancelled() => return cancelled(),
        };
        let session = match session {
            Ok(s) => s,
            Err(why) => return failed(super::not_started(why)),
        };
        if !self.by_first_call && !self.offer_is_served() {
            self.reload.send_modify(|n| *n += 1);
            return failed(BackendError::Refused(
                "the MCP server's tools changed since the catalog listed them, so what was decided is \
                 not what would run; nothing ran: the catalog reloads, call again"
                    .to_owned(),
            ));
        }
        let Some(name) = self.upstream_name(&call.tool) else {
            let why = format!("the MCP server no longer offers '{}'", call.tool);
            return failed(BackendError::Refused(why));
        };
        session.touch();
        let deadline = Instant::now() + call.timeout;
        let answer = self.send(&session, name, &call, deadline).await;
        session.touch();
        answer
    }

    async fn send(
        &self,
        session: &Arc<Session>,
        name: String,
        call: &BackendCall,
        deadline: Instant,
    ) -> BackendResult {
        let arguments = call.input.as_object().cloned();
        let mut params = CallToolRequestParams::new(name);
        params.arguments = arguments;
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let peer = session.service.peer().clone();
        let handle = match peer
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
        {
            Ok(h) => h,
            Err(e) => {
                let why = format!("the MCP server did not take the call: {e}");
                return failed(BackendError::NotRunning(why));
            }
        };
        let _following = call
            .progress
            .clone()
            .map(|sink| self.handler.follow(handle.progress_token.clone(), sink));
        let id = handle.id.clone();
        tokio::select! {
            answer = handle.rx => {
                let answer = answer.unwrap_or(Err(ServiceError::TransportClosed));
                if !matches!(answer, Err(ServiceError::TransportClosed)) {
                    self.answered();
                }
                read_answer(answer, &self.place.skill)
            }
            () = tokio::time::sleep_until(deadline) => {
                self.abandon(session, id, "timed out").await;
                timed_out(call.timeout, self.is_stdio())
            }
            () = call.cancel.cancelled() => {
                self.abandon(session, id, "cancelled").await;
                cancelled()
            }
        }
    }

    /// `prompts/get` of the server, bounded like a call; the URIs of its
    /// messages' resources put in the skill's namespace.
    pub(super) async fn prompt(&self, name: String, arguments: Value) -> Result<Value, BackendError> {
        let session = self.session(Instant::now() + INITIALIZE_TIMEOUT).await?;
        let mut params = GetPromptRequestParams::new(name);
        params.arguments = arguments.as_object().cloned();
        let answer = tokio::time::timeout(EXTRA_TIMEOUT, session.service.peer().get_prompt(params)).await;
        let result = answer.map_err(|_| timed_out_extra("prompts/get"))?;
        let mut result = result
            .map(|r| serde_json::json!(r))
            .map_err(|e| service_error(&e).reworded(|w| format!("prompts/get failed: {w}")))?;
        uri::rewrite_prompt(&self.place.skill, &mut result);
        Ok(result)
    }

    /// `resources/read` of the server, of the resource skilld serves as
    /// `served` (only this skill's namespace maps back to the server's
    /// URI), bounded like a call; every URI of its answer put back in the
    /// namespace.
    pub(super) async fn resource(&self, served: String) -> Result<Value, BackendError> {
        let skill = &self.place.skill;
        let original = uri::original(skill, &served)
            .ok_or_else(|| BackendError::Refused(format!("{served} is not a resource of skill {skill}")))?;
        let session = self.session(Instant::now() + INITIALIZE_TIMEOUT).await?;
        let params = ReadResourceRequestParams::new(original);
        let answer = tokio::time::timeout(EXTRA_TIMEOUT, session.service.peer().read_resource(params)).await;
        let result = answer.map_err(|_| timed_out_extra("resources/read"))?;
        let mut result = result
            .map(|r| serde_json::json!(r))
            .map_err(|e| service_error(&e).reworded(|w| format!("resources/read failed: {w}")))?;
        uri::rewrite_read(skill, &mut result);
        Ok(result)
    }

    fn is_stdio(&self) -> bool {
        matches!(
            self.upstream.transport,
            crate::skill::upstream::Transport::Stdio { .. }
        )
    }

    /// Tells the server the call is off; a stdio server's group is then
    /// killed (the next call starts it again), so nothing it began goes on.
    async fn abandon(&self, session: &Arc<Session>, id: RequestId, reason: &str) {
        let note =
            CancelledNotification::new(CancelledNotificationParam::new(Some(id), Some(reason.to_owned())));
        let peer = session.service.peer();
        if let Err(e) = peer
            .send_notification(ClientNotification::CancelledNotification(note))
            .await
        {
            tracing::warn!(skill = %self.place.skill, "cannot tell the MCP server a call was {reason}: {e}");
        }
        if self.is_stdio() {
            tokio::time::sleep(CANCEL_GRACE).await;
            if let Some(s) = self.forget(session).await {
                s.kill();
            }
        }
    }
}

/// The server's answer as a result: its text, its structured content, and
/// its error when it says the tool failed.
fn read_answer(answer: Result<ServerResult, ServiceError>, skill: &str) -> BackendResult {
    match answer {
        Ok(ServerResult::CallToolResult(result)) => tool_result(result, skill),
        Ok(_) => failed(BackendError::Protocol(
            "the MCP server answered tools/call with something other than a result".to_owned(),
        )),
        Err(ServiceError::McpError(e)) => failed(BackendError::Refused(format!(
            "the MCP server refused the call: {}",
            e.message
        ))),
        Err(ServiceError::TransportClosed) => failed(BackendError::Crashed(
            "the MCP server went away during the call".to_owned(),
        )),
        Err(e) => failed(service_error(&e).reworded(|w| format!("the call failed: {w}"))),
    }
}

/// An rmcp failure as the backend's: the server said no, went away, or
/// answered out of protocol.
fn service_error(e: &ServiceError) -> BackendError {
    let why = e.to_string();
    match e {
        ServiceError::McpError(_) => BackendError::Refused(why),
        ServiceError::TransportClosed | ServiceError::TransportSend(_) => BackendError::Crashed(why),
        ServiceError::Timeout { .. } => BackendError::TimedOut(why),
        _ => BackendError::Protocol(why),
    }
}

fn timed_out_extra(method: &str) -> BackendError {
    BackendError::TimedOut(format!("the MCP server did not answer {method} in time"))
}

fn tool_result(result: CallToolResult, skill: &str) -> BackendResult {
    let all_text = result.content.iter().all(|c| c.as_text().is_some());
    let output = if all_text {
        let texts: Vec<&str> = result
            .content
            .iter()
            .filter_map(|c| c.as_text())
            .map(|t| t.text.as_str())
            .collect();
        texts.join("\n")
    } else {
        content_json(&result.content, skill)
    };
    let parsed = result.structured_content.clone();
    let error = (result.is_error == Some(true)).then(|| {
        let first = output.lines().next().unwrap_or("").trim();
        if first.is_empty() {
            "the tool reported a failure".to_owned()
        } else {
            first.chars().take(ERROR_CHARS).collect()
        }
    });
    BackendResult {
        output,
        parsed,
        error,
        ..BackendResult::default()
    }
}

/// Content that is not all text (images, resources), as its JSON, each
/// resource's URI in `skill`'s namespace: a server's result cannot name
/// skilld's `skill://` files, nor another skill's server's resources.
fn content_json(content: &[ContentBlock], skill: &str) -> String {
    let mut blocks: Vec<Value> = content.iter().map(|c| serde_json::json!(c)).collect();
    uri::rewrite_blocks(skill, &mut blocks);
    serde_json::to_string(&blocks).unwrap_or_default()
}

fn timed_out(timeout: Duration, stdio: bool) -> BackendResult {
    outcome::timed_out(
        timeout,
        if stdio {
            "the server was told and stopped; it starts again on the next call"
        } else {
            "the server was told to cancel it"
        },
    )
}
