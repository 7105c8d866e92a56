//! The session's model for a call made over MCP: the SDK's `llm` asks the
//! client that made the call, through MCP sampling
//! (`sampling/createMessage`), when its client offers it. SEP-2577
//! deprecates sampling in favour of what is not yet specified; seed 002's
//! `llm:call` has no other way to the session's model today.
#![allow(deprecated)]

use crate::invoke::CallSession;
use crate::skill::backend::BoxFuture;
use crate::skill::context::Sampler;
use rmcp::model::CreateMessageRequestParams;
use rmcp::service::RequestContext;
use rmcp::{Peer, RoleServer};
use serde_json::Value;
use std::sync::Arc;
use uuid::Uuid;

/// `_meta["skilld/session"]`: the session a `tools/call` is made in.
pub(super) const SESSION_META: &str = "skilld/session";
/// `_meta["skilld/session-secret"]`: the secret its start answered.
pub(super) const SECRET_META: &str = "skilld/session-secret";

/// The client's model, asked on its own MCP session.
struct ClientModel(Peer<RoleServer>);

impl std::fmt::Debug for ClientModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientModel")
    }
}

impl Sampler for ClientModel {
    fn sample(&self, params: Value) -> BoxFuture<'_, Result<Value, String>> {
        Box::pin(async move {
            let params: CreateMessageRequestParams = serde_json::from_value(params)
                .map_err(|e| format!("the sampling request is not one: {e}"))?;
            let answer = self
                .0
                .create_message(params)
                .await
                .map_err(|e| format!("the client's model did not answer: {e}"))?;
            serde_json::to_value(answer).map_err(|e| e.to_string())
        })
    }
}

/// The client's model, when its client said it offers sampling.
pub(super) fn offered(ctx: &RequestContext<RoleServer>) -> Option<Arc<dyn Sampler>> {
    ctx.peer.peer_info()?.capabilities.sampling.as_ref()?;
    Some(Arc::new(ClientModel(ctx.peer.clone())))
}

/// The session `_meta` names, with the secret it shows, or why it names
/// none.
pub(super) fn session(meta: &rmcp::model::RequestMetaObject) -> Result<Option<CallSession>, String> {
    let Some(value) = meta.0.get(SESSION_META) else {
        return Ok(None);
    };
    let id = value
        .as_str()
        .and_then(|s| s.parse::<Uuid>().ok())
        .ok_or_else(|| format!("_meta \"{SESSION_META}\" must be a session's id (a UUID)"))?;
    let secret = match meta.0.get(SECRET_META) {
        None => None,
        Some(Value::String(secret)) => Some(secret.clone()),
        Some(_) => {
            return Err(format!(
                "_meta \"{SECRET_META}\" must be the session's secret, a string"
            ));
        }
    };
    Ok(Some(CallSession::named(id, secret)))
}
