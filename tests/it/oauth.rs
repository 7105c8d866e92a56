//! skilld as an OAuth 2.1 resource server (`docs/mcp.md`, "OAuth sign-in"),
//! against a real OpenID provider: `oidc-provider` from npm (pinned in
//! `tests/oidc`, installed by `.ci/run`), started as a node process
//! (`tests/oidc/provider.mjs`), which issues JWT access tokens through the
//! client-credentials grant with resource indicators. Each skilld is a real
//! `skilld serve` whose config file names the provider as its issuer, with
//! a static token beside it. Every case is tried over HTTP and over `/mcp`.
//! The attacker's tokens are made from real ones by `tests/oidc/forge.mjs`.
//! A real MCP client, the official Python SDK (`mcp` 2.3.0) with its
//! client-credentials provider, connects given only the URL and its client
//! id and secret (`tests/python/oauth_client.py`).
//!
//! Without node or the provider's packages the tests are skipped with the
//! reason, except under `CI`, where they fail.

use crate::common::manifest_dir;
use serde_json::{Value, json};
use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The static admin token configured beside the issuer.
const PERSON: &str = "person-0123456789abcdef";

fn oidc_dir() -> PathBuf {
    manifest_dir().join("tests/oidc")
}

/// The provider, started; `None` (the test then returns) when node or its
/// packages are missing outside CI.
fn provider() -> Option<Provider> {
    let node = Command::new("node").arg("--version").output();
    let packages = oidc_dir().join("node_modules/oidc-provider/package.json");
    let missing = if !node.is_ok_and(|o| o.status.success()) {
        Some("node is not on PATH".to_owned())
    } else if !packages.is_file() {
        Some(format!(
            "{} is missing: run `npm ci` in tests/oidc",
            packages.display()
        ))
    } else {
        None
    };
    if let Some(why) = missing {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI needs the OpenID provider: {why}"
        );
        eprintln!("skipping the OAuth test: {why}");
        return None;
    }
    let mut child = Command::new("node")
        .arg(oidc_dir().join("provider.mjs"))
        .current_dir(oidc_dir())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut first)
        .unwrap();
    let issuer = first
        .trim()
        .strip_prefix("issuer ")
        .unwrap_or_else(|| panic!("the provider did not start: {first:?}"))
        .to_owned();
    Some(Provider { child, issuer })
}

/// A running oidc-provider.
struct Provider {
    child: Child,
    issuer: String,
}

impl Drop for Provider {
    fn drop(&mut self) {
        crate::common::kill(&mut self.child);
    }
}

impl Provider {
    /// An access token for `resource` from the client-credentials grant of
    /// `client` (whose secret is `<client>-secret`), asking for every
    /// skilld scope: the provider grants those the client may have.
    async fn token(&self, client: &str, resource: &str) -> String {
        let res = reqwest::Client::new()
            .post(format!("{}/token", self.issuer))
            .basic_auth(client, Some(format!("{client}-secret")))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(format!(
                "grant_type=client_credentials&scope={}&resource={}",
                "skilld%3Aread%20skilld%3Ainvoke%20skilld%3Aapprove%20skilld%3Aadmin",
                percent(resource)
            ))
            .send()
            .await
            .unwrap();
        let body: Value = res.json().await.unwrap();
        body["access_token"]
            .as_str()
            .unwrap_or_else(|| panic!("no token for {client}: {body}"))
            .to_owned()
    }

    async fn get(&self, path: &str) -> Value {
        reqwest::get(format!("{}{path}", self.issuer))
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// How often its discovery document, JWKS and token endpoint were asked.
    async fn stats(&self) -> Value {
        self.get("/test/stats").await
    }

    /// A new signing key replaces the old one.
    async fn rotate(&self) {
        let res = reqwest::Client::new()
            .post(format!("{}/test/rotate", self.issuer))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
    }

    /// Forgeries of `token` (see tests/oidc/forge.mjs).
    async fn forge(&self, token: &str) -> Value {
        let input = json!({"token": token, "jwks": self.get("/jwks").await});
        let mut child = Command::new("node")
            .arg(oidc_dir().join("forge.mjs"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(&mut child.stdin.take().unwrap(), input.to_string().as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

fn percent(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// A `skilld serve` taking the provider's tokens (callers `<sub>@idp`),
/// and the static admin token [`PERSON`], with two skills: `hello` runs
/// at once (read-only), `ask` waits for a person.
struct Skilld {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Drop for Skilld {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

fn skilld(issuer: &str, oauth_extra: &str) -> Skilld {
    let dir = crate::common::tempdir().unwrap();
    let skills = dir.path().join("skills");
    for (name, front) in [("hello", "read_only: true\n"), ("ask", "")] {
        crate::common::write_file(
            &skills.join(name).join("SKILL.md"),
            &format!(
                "---\nname: {name}\nversion: 1.0.0\ndescription: Says hello.\n{front}---\n\n### {name}\n\n\
                 Says hello.\n\n#### Parameters\n\n| Name | Type | Required | Description |\n|---|---|---|---|\n\
                 | who | string | yes | Whom. |\n\n#### Command\n\n```\necho hello {{{{who}}}}\n```\n"
            ),
        );
    }
    let config = dir.path().join("skilld.toml");
    crate::common::write_file(
        &config,
        &format!(
            "skills = [\"bundled={}\"]\n\n[[tokens]]\nname = \"person\"\nrole = \"admin\"\nsecret = \"{PERSON}\"\n\n\
             [oauth]\n{oauth_extra}\n[[oauth.issuers]]\nissuer = \"{issuer}\"\nname = \"idp\"\n",
            skills.display()
        ),
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_skilld"))
        .args(["serve", "--bind", "127.0.0.1:0", "--no-watch", "--config"])
        .arg(&config)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .env("SKILLD_LOG", "warn")
        .env_remove("SKILLD_TOKENS")
        .env_remove("SKILLD_OAUTH_ISSUERS")
        .env_remove("SKILLD_PUBLIC_URL")
        .env_remove("SKILLD_DATABASE_URL")
        .env_remove("SKILLD_CONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let url = crate::common::announced_url(&mut child).unwrap_or_else(|first| panic!("no start: {first:?}"));
    Skilld {
        child,
        url,
        _dir: dir,
    }
}

/// What one request answered: status, `WWW-Authenticate`, body.
#[derive(Debug)]
struct Answer {
    status: u16,
    challenge: String,
    body: Value,
}

async fn answer(res: reqwest::Response) -> Answer {
    let status = res.status().as_u16();
    let challenge = res
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let text = res.text().await.unwrap();
    // An MCP answer may come as one server-sent event.
    let json = text
        .lines()
        .find_map(|l| l.strip_prefix("data: ").filter(|d| d.starts_with('{')))
        .unwrap_or(&text);
    Answer {
        status,
        challenge,
        body: serde_json::from_str(json).unwrap_or(Value::Null),
    }
}

impl Skilld {
    /// `POST /tools/{tool}/invoke` with `who`, as `token`.
    async fn invoke(&self, token: &str, tool: &str) -> Answer {
        let res = reqwest::Client::new()
            .post(format!("{}/tools/{tool}/invoke", self.url))
            .bearer_auth(token)
            .json(&json!({"arguments": {"who": "oauth"}}))
            .send()
            .await
            .unwrap();
        answer(res).await
    }

    async fn get(&self, token: &str, path: &str) -> Answer {
        let res = reqwest::Client::new()
            .get(format!("{}{path}", self.url))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        answer(res).await
    }

    async fn post(&self, token: &str, path: &str, body: Value) -> Answer {
        let res = reqwest::Client::new()
            .post(format!("{}{path}", self.url))
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .unwrap();
        answer(res).await
    }

    /// One JSON-RPC message to `/mcp` as `token`, in `session` if given.
    async fn rpc(&self, token: &str, session: Option<&str>, message: Value) -> (Answer, Option<String>) {
        let mut req = reqwest::Client::new()
            .post(format!("{}/mcp", self.url))
            .bearer_auth(token)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", "2025-11-25")
            .body(message.to_string());
        if let Some(id) = session {
            req = req.header("Mcp-Session-Id", id);
        }
        let res = req.send().await.unwrap();
        let session = res
            .headers()
            .get("mcp-session-id")
            .map(|v| v.to_str().unwrap().to_owned());
        (answer(res).await, session)
    }

    /// Over MCP as `token`: `initialize`, then `tools/call` of `tool`. The
    /// first answer that is not a 200 is returned, else the call's.
    async fn mcp_call(&self, token: &str, tool: &str) -> Answer {
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "oauth-test", "version": "0"}}});
        let (answer, session) = self.rpc(token, None, init).await;
        if answer.status != 200 {
            return answer;
        }
        let session = session.unwrap();
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        self.rpc(token, Some(&session), initialized).await;
        let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": tool, "arguments": {"who": "oauth"}}});
        self.rpc(token, Some(&session), call).await.0
    }

    fn metadata_url(&self, mcp: bool) -> String {
        let suffix = if mcp { "/mcp" } else { "" };
        format!("{}/.well-known/oauth-protected-resource{suffix}", self.url)
    }

    /// That `token` is refused with 401 over HTTP and over MCP, each
    /// challenge pointing at its metadata, with `invalid_token`; and that
    /// the detail says `why`.
    async fn refuses(&self, token: &str, why: &str) {
        let http = self.invoke(token, "hello").await;
        assert_eq!(http.status, 401, "{http:?}");
        assert_eq!(
            http.challenge,
            format!(
                r#"Bearer realm="skilld", error="invalid_token", resource_metadata="{}""#,
                self.metadata_url(false)
            )
        );
        assert!(http.body["detail"].as_str().unwrap().contains(why), "{http:?}");
        let mcp = self.mcp_call(token, "hello").await;
        assert_eq!(mcp.status, 401, "{mcp:?}");
        assert_eq!(
            mcp.challenge,
            format!(
                r#"Bearer realm="skilld", error="invalid_token", resource_metadata="{}""#,
                self.metadata_url(true)
            )
        );
        assert!(mcp.body["detail"].as_str().unwrap().contains(why), "{mcp:?}");
    }
}

/// The text of a `tools/call` result.
fn call_text(answer: &Answer) -> String {
    answer.body["result"]["content"]
        .as_array()
        .unwrap_or_else(|| panic!("no result: {answer:?}"))
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect()
}

/// The metadata names the provider; an answer without a token points at
/// it; a client-credentials token works over HTTP and MCP, its subject the
/// caller in the run record; the static token still works beside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_credentials_token_works_and_names_its_caller() {
    let Some(provider) = provider() else { return };
    let server = skilld(&provider.issuer, "");

    let meta: Value = reqwest::get(server.metadata_url(true))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        meta,
        json!({
            "resource": format!("{}/mcp", server.url),
            "authorization_servers": [provider.issuer],
            "scopes_supported": ["skilld:read", "skilld:invoke", "skilld:approve", "skilld:admin"],
            "bearer_methods_supported": ["header"],
            "resource_name": "skilld",
        })
    );
    let root: Value = reqwest::get(server.metadata_url(false))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(root["resource"], server.url);
    let no_as = reqwest::get(format!("{}/.well-known/oauth-authorization-server", server.url))
        .await
        .unwrap();
    assert_eq!(no_as.status(), 404);
    assert!(no_as.text().await.unwrap().contains("resource server"));

    // No token at all: the challenge names the metadata, and no error.
    let bare = answer(
        reqwest::Client::new()
            .post(format!("{}/mcp", server.url))
            .header("Content-Type", "application/json")
            .body("{}")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(bare.status, 401);
    assert_eq!(
        bare.challenge,
        format!(
            r#"Bearer realm="skilld", resource_metadata="{}""#,
            server.metadata_url(true)
        )
    );

    let token = provider.token("agent", &format!("{}/mcp", server.url)).await;
    let http = server.invoke(&token, "hello").await;
    assert_eq!(http.status, 200, "{http:?}");
    assert!(
        http.body["output"].as_str().unwrap().contains("hello oauth"),
        "{http:?}"
    );
    let run = server
        .get(
            PERSON,
            &format!("/runs/{}", http.body["run_id"].as_str().unwrap()),
        )
        .await;
    assert_eq!(run.body["requested_by"], "agent@idp", "{run:?}");

    let mcp = server.mcp_call(&token, "hello").await;
    assert_eq!(mcp.status, 200, "{mcp:?}");
    assert!(call_text(&mcp).contains("hello oauth"), "{mcp:?}");
    let runs = server.get(PERSON, "/runs?tool=hello").await;
    let callers: Vec<_> = runs.body["runs"]
        .as_array()
        .unwrap_or_else(|| panic!("{runs:?}"))
        .iter()
        .map(|r| r["requested_by"].clone())
        .collect();
    assert_eq!(callers, [json!("agent@idp"), json!("agent@idp")]);

    // A token for the server's root resource is this server's too.
    let root_token = provider.token("agent", &server.url).await;
    assert_eq!(server.invoke(&root_token, "hello").await.status, 200);
    // The static token beside.
    assert_eq!(server.invoke(PERSON, "hello").await.status, 200);
}

/// Scopes map to roles: a read-only token lists but cannot call (403 with
/// the scope it lacks over HTTP; a JSON-RPC error over MCP); a token with
/// no skilld scope at all gets nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scopes_map_to_roles() {
    let Some(provider) = provider() else { return };
    let server = skilld(&provider.issuer, "");
    let reader = provider.token("reader", &format!("{}/mcp", server.url)).await;
    assert_eq!(server.get(&reader, "/tools").await.status, 200);
    let refused = server.invoke(&reader, "hello").await;
    assert_eq!(refused.status, 403, "{refused:?}");
    assert_eq!(refused.body["code"], "forbidden");
    assert_eq!(
        refused.challenge,
        format!(
            r#"Bearer realm="skilld", error="insufficient_scope", scope="skilld:invoke", resource_metadata="{}""#,
            server.metadata_url(false)
        )
    );
    let mcp = server.mcp_call(&reader, "hello").await;
    assert_eq!(mcp.status, 200, "{mcp:?}");
    assert!(
        mcp.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("needs 'invoke'"),
        "{mcp:?}"
    );
    let nobody = provider.token("nobody", &format!("{}/mcp", server.url)).await;
    let none = server.get(&nobody, "/tools").await;
    assert_eq!(none.status, 403, "{none:?}");
    assert!(none.body["detail"].as_str().unwrap().contains("grants no role"));
    assert_eq!(server.mcp_call(&nobody, "hello").await.status, 403);
    // Nothing ran.
    let runs = server.get(PERSON, "/runs?tool=hello").await;
    assert_eq!(runs.body["runs"], json!([]), "{runs:?}");
}

/// An expired token, one for another audience, one with a forged
/// signature, `alg: none` and HS256 keyed with the issuer's public key are
/// all refused with 401 and a challenge, over HTTP and MCP; and nothing ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_tokens_are_refused() {
    let Some(provider) = provider() else { return };
    // No clock skew, so that a one-second token expires at once.
    let server = skilld(&provider.issuer, "clock_skew_secs = 0\n");
    let mcp_resource = format!("{}/mcp", server.url);

    let brief = provider.token("brief", &mcp_resource).await;
    tokio::time::sleep(Duration::from_millis(2100)).await;
    server.refuses(&brief, "the token has expired").await;

    let elsewhere = provider.token("agent", "http://127.0.0.1:9/mcp").await;
    server.refuses(&elsewhere, "another audience").await;

    let good = provider.token("agent", &mcp_resource).await;
    let forged = provider.forge(&good).await;
    server
        .refuses(forged["resigned"].as_str().unwrap(), "signature does not verify")
        .await;
    server
        .refuses(forged["none"].as_str().unwrap(), "not a JWS header")
        .await;
    for hmac in ["hs256_pem", "hs256_jwk"] {
        server
            .refuses(forged[hmac].as_str().unwrap(), "shared-secret algorithm")
            .await;
    }
    server.refuses("not-a-token", "neither a static token").await;
    let runs = server.get(PERSON, "/runs").await;
    assert_eq!(runs.body["runs"], json!([]), "{runs:?}");
    // The real token still works.
    assert_eq!(server.invoke(&good, "hello").await.status, 200);
}

/// The issuer rotates its key: a token under the new key is taken (the
/// JWKS is fetched again for its unknown `kid`), and one under the old,
/// withdrawn key no longer is. A flood of tokens naming made-up key ids
/// makes at most one more fetch of the JWKS within the cooldown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_key_is_followed_and_unknown_keys_do_not_hammer_the_issuer() {
    let Some(provider) = provider() else { return };
    let server = skilld(&provider.issuer, "jwks_cooldown_secs = 1\n");
    let resource = format!("{}/mcp", server.url);
    let old = provider.token("agent", &resource).await;
    assert_eq!(server.invoke(&old, "hello").await.status, 200);
    assert_eq!(provider.stats().await["jwks"], 1);

    provider.rotate().await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let new = provider.token("agent", &resource).await;
    assert_eq!(server.invoke(&new, "hello").await.status, 200);
    assert_eq!(server.mcp_call(&new, "hello").await.status, 200);
    assert_eq!(provider.stats().await["jwks"], 2);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    server.refuses(&old, "a key its issuer does not publish").await;

    // Forty tokens with made-up kids, at once, over HTTP and MCP, at a
    // server with the default cooldown (30 s) that has fetched no key yet:
    // it fetches the JWKS once, and refuses the rest without asking.
    let server = std::sync::Arc::new(skilld(&provider.issuer, ""));
    // (Forging reads the JWKS too.)
    let forged = provider.forge(&new).await;
    let jwks_before = provider.stats().await["jwks"].as_u64().unwrap();
    let unknown = forged["unknown"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_owned());
    let floods = unknown.flat_map(|token| {
        let (a, b) = (server.clone(), server.clone());
        let token2 = token.clone();
        [
            tokio::spawn(async move { a.invoke(&token, "hello").await.status }),
            tokio::spawn(async move { b.mcp_call(&token2, "hello").await.status }),
        ]
    });
    for status in futures_util::future::join_all(floods).await {
        assert_eq!(status.unwrap(), 401);
    }
    let fetched = provider.stats().await["jwks"].as_u64().unwrap() - jwks_before;
    assert_eq!(fetched, 1, "JWKS fetches for a flood of unknown key ids");
    // The keys it fetched serve a real token (for its own audience).
    let real = provider.token("agent", &format!("{}/mcp", server.url)).await;
    assert_eq!(server.invoke(&real, "hello").await.status, 200);
    assert_eq!(provider.stats().await["jwks"].as_u64().unwrap() - jwks_before, 1);
}

/// A call held for a person, made with a token whose subject is X, cannot
/// be approved by another token with the same subject (X's own token
/// with the approve scope); another subject approves it, and is recorded
/// as the approver.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn self_approval_is_forbidden_by_subject() {
    let Some(provider) = provider() else { return };
    let server = skilld(&provider.issuer, "");
    let resource = format!("{}/mcp", server.url);
    let asking = provider.token("approver", &resource).await;
    let held = server.invoke(&asking, "ask").await;
    assert_eq!(held.status, 202, "{held:?}");
    let approval = held.body["approval_id"].as_str().unwrap().to_owned();
    let path = format!("/approvals/{approval}/approve");

    let same_subject = provider.token("approver", &server.url).await;
    assert_ne!(same_subject, asking);
    let refused = server.post(&same_subject, &path, json!({"scope": "once"})).await;
    assert_eq!(refused.status, 403, "{refused:?}");
    assert_eq!(refused.body["code"], "self_approval");

    let other = provider.token("operator", &resource).await;
    let approved = server.post(&other, &path, json!({"scope": "once"})).await;
    assert_eq!(approved.status, 200, "{approved:?}");
    assert_eq!(approved.body["decided_by"], "operator@idp", "{approved:?}");
    assert_eq!(approved.body["requested_by"], "approver@idp", "{approved:?}");
}

/// The official MCP Python SDK, given only `/mcp` and a client id and
/// secret, finds the metadata from the 401, gets a token from the provider
/// and lists and calls a tool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_connects_through_the_metadata_alone() {
    let Some(provider) = provider() else { return };
    let server = skilld(&provider.issuer, "");
    let url = format!("{}/mcp", server.url);
    crate::common::run_script(
        "oauth_client.py",
        &[&url, "agent", "agent-secret", &provider.issuer],
        &[],
        Duration::from_secs(120),
    )
    .await;
    let stats = provider.stats().await;
    assert!(stats["token"].as_u64().unwrap() >= 1, "{stats}");
    let runs = server.get(PERSON, "/runs?tool=hello").await;
    assert_eq!(runs.body["runs"][0]["requested_by"], "agent@idp", "{runs:?}");
}
