//! A minimal MCP client over Streamable HTTP for the benches
//! (`#[path]`-included): one session, JSON-RPC POSTs on it.

#![allow(dead_code, reason = "each bench uses its own part of this module")]

use serde_json::{Value, json};
use std::sync::atomic::{AtomicU64, Ordering};

/// The protocol revision spoken: the handshake era, with sessions.
pub const PROTOCOL: &str = "2025-11-25";

/// The JSON-RPC answer in a Streamable HTTP body: plain JSON, or the
/// `data:` line of an SSE stream that carries it.
pub fn rpc_answer(body: &[u8]) -> Option<Value> {
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        return Some(v);
    }
    String::from_utf8_lossy(body)
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v.get("id").is_some())
}

pub struct Session {
    url: String,
    pub id: String,
    next: AtomicU64,
}

impl Session {
    /// `initialize`, then `notifications/initialized`.
    pub async fn open(http: &reqwest::Client, url: &str) -> Result<Self, String> {
        let res = http
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .json(
                &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": PROTOCOL, "capabilities": {},
                "clientInfo": {"name": "skilld-bench", "version": "1"}}}),
            )
            .send()
            .await
            .map_err(|e| format!("initialize: {e}"))?;
        let status = res.status();
        let id = res
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = res.bytes().await.map_err(|e| e.to_string())?;
        let answer = rpc_answer(&body).filter(|a| a.get("result").is_some());
        let (Some(id), Some(_)) = (id, answer) else {
            return Err(format!("initialize: {status} {}", String::from_utf8_lossy(&body)));
        };
        let session = Self {
            url: url.to_owned(),
            id,
            next: AtomicU64::new(1),
        };
        let res = session
            .post(
                http,
                json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            )
            .send()
            .await
            .map_err(|e| format!("initialized: {e}"))?;
        if !res.status().is_success() {
            return Err(format!("initialized: {}", res.status()));
        }
        Ok(session)
    }

    fn post(&self, http: &reqwest::Client, body: Value) -> reqwest::RequestBuilder {
        http.post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", PROTOCOL)
            .header("mcp-session-id", &self.id)
            .json(&body)
    }

    /// A request on the session; its `result`, or why not.
    pub async fn request(
        &self,
        http: &reqwest::Client,
        method: &str,
        params: Value,
    ) -> Result<Value, String> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let res = self
            .post(
                http,
                json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
            )
            .send()
            .await
            .map_err(|e| format!("{method}: {e}"))?;
        let status = res.status();
        let body = res.bytes().await.map_err(|e| e.to_string())?;
        match rpc_answer(&body) {
            Some(mut a) if a.get("result").is_some() => Ok(a["result"].take()),
            _ => Err(format!("{method}: {status} {}", String::from_utf8_lossy(&body))),
        }
    }

    /// Ends the session (`DELETE`).
    pub async fn close(&self, http: &reqwest::Client) {
        let _ = http
            .delete(&self.url)
            .header("mcp-session-id", &self.id)
            .header("mcp-protocol-version", PROTOCOL)
            .send()
            .await;
    }
}
