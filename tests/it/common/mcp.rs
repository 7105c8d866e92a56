//! MCP clients of a test: over streamable HTTP, and over stdio to a
//! `skilld mcp` child.

use super::skilld;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Stdio};

/// One MCP session over Streamable HTTP (the handshake era).
pub struct McpHttp {
    pub url: String,
    pub session: String,
    pub next: u64,
}

impl McpHttp {
    pub async fn open(url: &str) -> Self {
        let res = Self::post(url, None, &initialize()).await;
        let session = res
            .headers()
            .get("mcp-session-id")
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned();
        let _ = answer_of(res, 0).await;
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        Self::post(url, Some(&session), &note).await;
        Self {
            url: url.to_owned(),
            session,
            next: 1,
        }
    }

    pub async fn post(url: &str, session: Option<&str>, body: &Value) -> reqwest::Response {
        let mut req = reqwest::Client::new()
            .post(url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", "2025-11-25")
            .body(body.to_string());
        if let Some(session) = session {
            req = req.header("mcp-session-id", session);
        }
        req.send().await.unwrap()
    }

    /// The result of one request.
    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let body = json!({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params});
        let res = Self::post(&self.url, Some(&self.session), &body).await;
        answer_of(res, self.next).await
    }
}

pub fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "modes-test", "version": "0"}}})
}

/// The `result` of the answer to request `id`, from a JSON body or an
/// event stream.
pub async fn answer_of(res: reqwest::Response, id: u64) -> Value {
    let text = res.text().await.unwrap();
    let answer = text
        .lines()
        .map(|l| l.strip_prefix("data:").unwrap_or(l).trim())
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|m| m["id"] == id)
        .unwrap_or_else(|| panic!("no answer to {id} in {text}"));
    answer
        .get("result")
        .cloned()
        .unwrap_or_else(|| panic!("an error: {answer}"))
}

/// `skilld mcp` on stdio: newline-delimited JSON-RPC.
pub struct McpStdio {
    pub child: Child,
    /// `None` once the session is ended.
    pub stdin: Option<ChildStdin>,
    pub stdout: BufReader<ChildStdout>,
    pub next: u64,
}

impl McpStdio {
    pub fn start(args: &[&str], data: &Path, skills: &Path) -> Self {
        let mut child = skilld()
            .arg("mcp")
            .args(args)
            .arg("--no-watch")
            .arg("--skills")
            .arg(format!("bundled={}", skills.display()))
            .arg("--data-dir")
            .arg(data)
            .env_remove("SKILLD_DATABASE_URL")
            .env_remove("SKILLD_PUBLIC_URL")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut mcp = Self {
            child,
            stdin: Some(stdin),
            stdout,
            next: 0,
        };
        mcp.send(&initialize());
        mcp.answer(0);
        mcp.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        mcp
    }

    pub fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    pub fn answer(&mut self, id: u64) -> Value {
        loop {
            let mut line = String::new();
            assert!(self.stdout.read_line(&mut line).unwrap() > 0, "skilld mcp ended");
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                return message
                    .get("result")
                    .cloned()
                    .unwrap_or_else(|| panic!("an error: {message}"));
            }
        }
    }

    pub fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.answer(id)
    }
}

impl McpStdio {
    /// Ends the session as a client does, closing skilld's input, and
    /// waits for it to stop: on its way out it commits the run log.
    pub fn end(mut self) {
        self.stdin = None;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while self.child.try_wait().unwrap().is_none() {
            assert!(std::time::Instant::now() < deadline, "skilld mcp did not stop");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

impl Drop for McpStdio {
    fn drop(&mut self) {
        crate::common::kill(&mut self.child);
    }
}
