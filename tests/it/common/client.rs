//! The one HTTP client of the tests: it knows its server's base URL and
//! sends a bearer token (the local secret, or a token of its own), and
//! answers every request with its status and JSON body.

use super::TestServer;
use serde_json::{Value, json};
use std::path::Path;

/// An HTTP client for one server, with or without a bearer token.
#[derive(Clone)]
pub struct Api {
    base: String,
    token: Option<String>,
    http: reqwest::Client,
}

impl Api {
    pub fn new(base: impl Into<String>, token: Option<&str>) -> Self {
        Self {
            base: base.into(),
            token: token.map(str::to_owned),
            http: reqwest::Client::new(),
        }
    }

    /// The person at the inbox (with the local secret of a server without
    /// tokens), who also makes the calls.
    pub fn of(server: &TestServer) -> Self {
        Self::new(server.url(""), server.secret.as_deref())
    }

    /// A caller who sends no token at all.
    pub fn anonymous(server: &TestServer) -> Self {
        Self::new(server.url(""), None)
    }

    /// The same server, as the holder of `token`.
    pub fn as_(&self, token: &str) -> Self {
        Self::new(self.base.clone(), Some(token))
    }

    /// A request to `path` with this client's token, to send as it is or
    /// with more set.
    pub fn req(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let req = self.http.request(method, format!("{}{path}", self.base));
        match &self.token {
            Some(t) => req.bearer_auth(t),
            None => req,
        }
    }

    pub async fn send(req: reqwest::RequestBuilder) -> (u16, Value) {
        let res = req.send().await.unwrap();
        let status = res.status().as_u16();
        let text = res.text().await.unwrap();
        // An empty body (204, say) is null; any other must be JSON.
        let body = match text.is_empty() {
            true => Value::Null,
            false => serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}")),
        };
        (status, body)
    }

    /// `POST path` with `body`, whose answer must be JSON: only the body.
    pub async fn post_value(&self, path: &str, body: Value) -> Value {
        let req = self.req(reqwest::Method::POST, path).json(&body);
        req.send().await.unwrap().json().await.unwrap()
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        Self::send(self.req(reqwest::Method::GET, path)).await
    }

    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        Self::send(self.req(reqwest::Method::POST, path).json(&body)).await
    }

    /// `POST path` with no body at all.
    pub async fn post_empty(&self, path: &str) -> (u16, Value) {
        Self::send(self.req(reqwest::Method::POST, path)).await
    }

    /// `DELETE path`.
    pub async fn delete(&self, path: &str) -> (u16, Value) {
        Self::send(self.req(reqwest::Method::DELETE, path)).await
    }

    /// `POST /tools/{tool}/invoke` with `arguments`: the status and the
    /// envelope (or problem).
    pub async fn invoke(&self, tool: &str, arguments: Value) -> (u16, Value) {
        self.post(
            &format!("/tools/{tool}/invoke"),
            json!({ "arguments": arguments }),
        )
        .await
    }

    /// A `method` request to `path` with `headers` and, given one, a JSON
    /// body: the response as it came, for what is not a JSON body alone
    /// (a status with no body, headers, an event stream).
    pub async fn raw(
        &self,
        method: reqwest::Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<Value>,
    ) -> reqwest::Response {
        let mut req = self.req(method, path);
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        if let Some(body) = body {
            req = req.json(&body);
        }
        req.send().await.unwrap()
    }

    pub async fn call(&self, tool: &str, path: &Path) -> (u16, Value) {
        self.post(
            &format!("/tools/{tool}/invoke"),
            json!({"arguments": {"path": path}}),
        )
        .await
    }

    pub async fn approve(&self, approval: &Value, scope: &str) -> (u16, Value) {
        self.post(
            &format!("/approvals/{}/approve", approval.as_str().unwrap()),
            json!({"scope": scope, "note": "ok by me"}),
        )
        .await
    }

    pub async fn deny(&self, approval: &Value, scope: &str) -> (u16, Value) {
        self.post(
            &format!("/approvals/{}/deny", approval.as_str().unwrap()),
            json!({"scope": scope, "note": "no"}),
        )
        .await
    }

    /// The run, once final (at most 30 s).
    pub async fn finished_run(&self, run: &Value) -> Value {
        let (status, run) = self
            .get(&format!("/runs/{}?wait=30", run.as_str().unwrap()))
            .await;
        assert_eq!(status, 200, "{run}");
        run
    }
}

/// A plain reqwest client that sends `secret` as a bearer token on every
/// request (and nothing without one).
pub fn bearer_client(secret: Option<&str>) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(secret) = secret {
        headers.insert(
            reqwest::header::AUTHORIZATION,
            format!("Bearer {secret}").parse().unwrap(),
        );
    }
    reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .unwrap()
}
