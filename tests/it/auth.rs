//! Bearer tokens and roles, over real sockets: what each role may do, what
//! a refused call did not do, and tokens configured the two ways a real
//! `skilld serve` reads them.

use crate::common::{TestServer, options, root, serve, skilld, stop};
use reqwest::Method;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use skilld::auth::{Auth, Role, Token};
use skilld::skill::Trust;
use std::path::Path;

const READ: &str = "read-secret-0123";
const INVOKE: &str = "invoke-secret-4567";
const APPROVE: &str = "approve-secret-89ab";
const ADMIN: &str = "admin-secret-cdef";

fn secret_of(role: Role) -> &'static str {
    match role {
        Role::Read => READ,
        Role::Invoke => INVOKE,
        Role::Approve => APPROVE,
        Role::Admin => ADMIN,
    }
}

fn tokens() -> Auth {
    Auth::new(
        [
            ("reader", Role::Read),
            ("agent", Role::Invoke),
            ("boss", Role::Approve),
            ("ops", Role::Admin),
        ]
        .into_iter()
        .map(|(name, role)| Token::with_secret(name, role, secret_of(role), "test").unwrap())
        .collect(),
    )
    .unwrap()
}

/// A bundled, read-only skill (so its calls run without approval) whose
/// tool `touch_file` creates the file it is given: the effect tells
/// whether a call ran.
fn touch_skill(dir: &Path, name: &str) {
    let skill = dir.join(name);
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        format!(
            "---\nname: {name}\nversion: 1.0.0\ndescription: Creates a file.\nread_only: true\n---\n\n\
             ### {tool}\n\nCreates a file.\n\n#### Parameters\n\n\
             | Name | Type | Required | Description |\n|---|---|---|---|\n\
             | path | string | true | The file to create |\n\n\
             #### Command\n\n```\ntouch {{{{path}}}}\n```\n",
            tool = name.replace('-', "_")
        ),
    )
    .unwrap();
}

async fn call(method: Method, url: &str, token: Option<&str>, body: Option<Value>) -> reqwest::Response {
    let mut req = reqwest::Client::new().request(method, url);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    req.send().await.unwrap()
}

/// Asserts a problem document and returns the response's headers with it.
async fn problem(res: reqwest::Response, status: u16, code: &str) -> (reqwest::header::HeaderMap, Value) {
    assert_eq!(res.status().as_u16(), status);
    let headers = res.headers().clone();
    assert_eq!(headers["content-type"], "application/problem+json");
    assert!(headers.contains_key("x-request-id"));
    let body: Value = res.json().await.unwrap();
    assert_eq!(
        (body["status"].as_u64(), body["code"].as_str()),
        (Some(status.into()), Some(code)),
        "{body}"
    );
    (headers, body)
}

async fn server_with_touch_skill() -> (TestServer, tempfile::TempDir, tempfile::TempDir) {
    let skills = crate::common::tempdir().unwrap();
    touch_skill(skills.path(), "touch-file");
    let out = crate::common::marks_dir();
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::Bundled)]))
        .auth(tokens())
        .start()
        .await;
    (server, skills, out)
}

#[tokio::test]
async fn without_a_valid_token_the_answer_is_401_with_a_challenge() {
    let (server, _skills, _out) = server_with_touch_skill().await;
    let url = server.url("/tools");

    let (headers, body) = problem(call(Method::GET, &url, None, None).await, 401, "unauthorized").await;
    assert_eq!(headers["www-authenticate"], r#"Bearer realm="skilld""#);
    assert_eq!(body["type"], "/problems/unauthorized");
    assert!(
        body["detail"].as_str().unwrap().contains("Authorization: Bearer"),
        "{body}"
    );

    for token in [
        "wrong",
        &READ[..READ.len() - 1],
        &format!("{READ}x"),
        &READ.to_uppercase(),
    ] {
        let (headers, body) = problem(
            call(Method::GET, &url, Some(token), None).await,
            401,
            "unauthorized",
        )
        .await;
        assert_eq!(
            headers["www-authenticate"],
            r#"Bearer realm="skilld", error="invalid_token""#
        );
        assert!(!body.to_string().contains(READ), "{body}");
    }
    for header in [format!("Basic {READ}"), READ.to_owned(), "Bearer".to_owned()] {
        let res = reqwest::Client::new()
            .get(&url)
            .header("authorization", header)
            .send()
            .await
            .unwrap();
        problem(res, 401, "unauthorized").await;
    }
    // The scheme is case-insensitive (RFC 9110 §11.1).
    let res = reqwest::Client::new()
        .get(&url)
        .header("authorization", format!("bearer {READ}"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);

    // The service routes stay open, so probes and docs need no token.
    for path in ["/healthz", "/readyz", "/openapi.json", "/docs/"] {
        let res = call(Method::GET, &server.url(path), None, None).await;
        assert_eq!(res.status(), 200, "{path}");
    }
}

#[tokio::test]
async fn a_read_token_lists_tools_but_cannot_invoke() {
    let (server, _skills, out) = server_with_touch_skill().await;
    let tools: Value = call(Method::GET, &server.url("/tools"), Some(READ), None)
        .await
        .json()
        .await
        .unwrap();
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["touch_file"]);
    let skill = call(Method::GET, &server.url("/skills/touch-file"), Some(READ), None).await;
    assert_eq!(skill.status(), 200);

    let marker = out.path().join("made-by-reader");
    let args = json!({"arguments": {"path": marker.display().to_string()}});
    let (_, body) = problem(
        call(
            Method::POST,
            &server.url("/tools/touch_file/invoke"),
            Some(READ),
            Some(args),
        )
        .await,
        403,
        "forbidden",
    )
    .await;
    assert_eq!(
        body["detail"],
        "the token 'reader' has the role 'read'; this needs 'invoke' or above"
    );
    // Nothing ran and nothing was recorded.
    assert!(!marker.exists());
    problem(
        call(Method::GET, &server.url("/runs"), Some(READ), None).await,
        403,
        "forbidden",
    )
    .await;
    let runs: Value = call(Method::GET, &server.url("/runs"), Some(ADMIN), None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(runs["runs"], json!([]));
}

#[tokio::test]
async fn an_invoke_token_invokes_but_cannot_reload_and_admin_can() {
    let (server, skills, out) = server_with_touch_skill().await;
    let marker = out.path().join("made-by-agent");
    let args = json!({"arguments": {"path": marker.display().to_string()}});
    let res = call(
        Method::POST,
        &server.url("/tools/touch_file/invoke"),
        Some(INVOKE),
        Some(args),
    )
    .await;
    assert_eq!(res.status(), 200);
    let envelope: Value = res.json().await.unwrap();
    assert_eq!(
        (envelope["success"].as_bool(), envelope["exit_code"].as_i64()),
        (Some(true), Some(0))
    );
    assert!(marker.is_file());
    let run_url = server.url(&format!("/runs/{}", envelope["run_id"].as_str().unwrap()));
    let run: Value = call(Method::GET, &run_url, Some(INVOKE), None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(run["status"], "succeeded");

    // A new skill on disk appears only when an admin reloads.
    touch_skill(skills.path(), "touch-other");
    let reload = server.url("/skills/reload");
    for weaker in [INVOKE, APPROVE] {
        problem(
            call(Method::POST, &reload, Some(weaker), None).await,
            403,
            "forbidden",
        )
        .await;
    }
    let count = || async {
        let v: Value = call(Method::GET, &server.url("/skills"), Some(READ), None)
            .await
            .json()
            .await
            .unwrap();
        v["skills"].as_array().unwrap().len()
    };
    assert_eq!(count().await, 1);
    let res = call(Method::POST, &reload, Some(ADMIN), None).await;
    assert_eq!(res.status(), 200);
    assert_eq!(
        res.json::<Value>().await.unwrap(),
        json!({"skills": 2, "errors": 0})
    );
    assert_eq!(count().await, 2);
}

/// Placeholder values for a path template of the document.
fn concrete(path: &str) -> String {
    path.replace("{skill}", "no-such-skill")
        .replace("{tool}", "no_such_tool")
        .replace("{command}", "no-such-command")
        .replace("{id}", "0190a0a0-0000-7000-8000-000000000000")
        .replace("{path}", "references/none.md")
}

/// The document and the server agree: every operation that lists a role
/// answers 401 without a token, 403 to each lower role and neither to its
/// own role; every operation that lists none is open. A handler whose
/// extractor and `security` disagree fails here.
#[tokio::test]
async fn every_documented_role_is_the_one_enforced() {
    let (server, _skills, _out) = server_with_touch_skill().await;
    let doc = serde_json::to_value(skilld::openapi()).unwrap();
    let mut open = Vec::new();
    let mut needs = std::collections::BTreeMap::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let method: Method = method.to_uppercase().parse().unwrap();
            let url = server.url(&concrete(path));
            let role = op["security"][0]["bearer"][0].as_str();
            let anonymous = call(method.clone(), &url, None, None).await.status();
            let Some(role) = role else {
                assert_ne!(anonymous, 401, "{method} {path} is documented as open");
                open.push(format!("{method} {path}"));
                continue;
            };
            needs.insert(format!("{method} {path}"), role.to_owned());
            assert_eq!(anonymous, 401, "{method} {path}");
            let need: Role = role.parse().unwrap();
            for r in Role::ALL {
                let status = call(method.clone(), &url, Some(secret_of(r)), None)
                    .await
                    .status();
                if r < need {
                    assert_eq!(status, 403, "{method} {path} as {r}");
                } else {
                    assert!(status != 401 && status != 403, "{method} {path} as {r}: {status}");
                }
            }
            let responses = &op["responses"];
            assert_eq!(
                responses["401"]["content"]["application/problem+json"]["schema"]["$ref"],
                "#/components/schemas/Problem"
            );
            assert!(
                responses["401"]["headers"]["WWW-Authenticate"].is_object(),
                "{method} {path}"
            );
            assert!(
                responses["403"]["description"].as_str().unwrap().contains(role),
                "{method} {path}"
            );
        }
    }
    assert_eq!(open, ["GET /healthz", "GET /readyz"]);
    // The table of `docs/api.md` "Auth", for the routes that exist.
    for (op, role) in [
        ("GET /skills", "read"),
        ("GET /skills/{skill}/files/{path}", "read"),
        ("GET /tools", "read"),
        ("GET /tools/{tool}", "read"),
        ("POST /tools/{tool}/invoke", "invoke"),
        ("POST /skills/{skill}/tools/{tool}/invoke", "invoke"),
        ("POST /commands/{command}", "invoke"),
        ("GET /runs", "invoke"),
        ("GET /runs/{id}/events", "invoke"),
        ("GET /runs/{id}/files/{path}", "invoke"),
        ("POST /runs/{id}/cancel", "invoke"),
        ("POST /scan", "invoke"),
        ("POST /skills/reload", "admin"),
    ] {
        assert_eq!(needs.get(op).map(String::as_str), Some(role), "{op}");
    }
    let scheme = &doc["components"]["securitySchemes"]["bearer"];
    assert_eq!(
        (scheme["type"].as_str(), scheme["scheme"].as_str()),
        (Some("http"), Some("bearer"))
    );
}

/// `name:role:secret` from the environment and `[[tokens]]` from the file
/// (one by its secret, one by its SHA-256) all work in one real server.
#[tokio::test]
async fn tokens_from_the_environment_and_the_config_file_work_in_skilld_serve() {
    let skills = crate::common::tempdir().unwrap();
    touch_skill(skills.path(), "touch-file");
    let data = crate::common::tempdir().unwrap();
    let config = data.path().join("skilld.toml");
    let ops_secret = "file-admin-secret";
    let sha = hex::encode(Sha256::digest(ops_secret.as_bytes()));
    std::fs::write(
        &config,
        format!(
            "[[tokens]]\nname = \"viewer\"\nrole = \"read\"\nsecret = \"file-read-secret\"\n\n\
             [[tokens]]\nname = \"ops\"\nrole = \"admin\"\nsecret_sha256 = \"{sha}\"\n"
        ),
    )
    .unwrap();
    let (child, addr) = serve(
        skilld()
            .args(["serve", "--bind", "127.0.0.1:0", "--no-watch", "--config"])
            .arg(&config)
            .arg("--data-dir")
            .arg(data.path())
            .arg("--skills")
            .arg(format!("bundled={}", skills.path().display()))
            .env_remove("SKILLD_DATABASE_URL")
            .env("SKILLD_TOKENS", "agent:invoke:env-invoke-secret"),
    );
    let url = |p: &str| format!("http://{addr}{p}");
    let tools = url("/tools");
    let invoke = url("/tools/touch_file/invoke");
    let out = crate::common::marks_dir();
    let marker = out.path().join("made");
    let args = json!({"arguments": {"path": marker.display().to_string()}});

    problem(call(Method::GET, &tools, None, None).await, 401, "unauthorized").await;
    assert_eq!(
        call(Method::GET, &tools, Some("file-read-secret"), None)
            .await
            .status(),
        200
    );
    problem(
        call(
            Method::POST,
            &invoke,
            Some("file-read-secret"),
            Some(args.clone()),
        )
        .await,
        403,
        "forbidden",
    )
    .await;
    assert!(!marker.exists());
    let res = call(Method::POST, &invoke, Some("env-invoke-secret"), Some(args)).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.json::<Value>().await.unwrap()["success"], true);
    assert!(marker.is_file());
    problem(
        call(
            Method::POST,
            &url("/skills/reload"),
            Some("env-invoke-secret"),
            None,
        )
        .await,
        403,
        "forbidden",
    )
    .await;
    // The file holds only the digest; the secret itself is what is sent.
    problem(
        call(Method::POST, &url("/skills/reload"), Some(&sha), None).await,
        401,
        "unauthorized",
    )
    .await;
    let res = call(Method::POST, &url("/skills/reload"), Some(ops_secret), None).await;
    assert_eq!(res.status(), 200);
    assert!(stop(child).success());
}

#[test]
fn token_config_errors_stop_skilld_serve_with_a_clear_message() {
    let data = crate::common::tempdir().unwrap();
    let run = |config: Option<&str>, env: Option<&str>| {
        let file = data.path().join("skilld.toml");
        let mut cmd = skilld();
        cmd.args(["serve", "--bind", "127.0.0.1:0", "--no-watch", "--data-dir"])
            .arg(data.path());
        if let Some(text) = config {
            std::fs::write(&file, text).unwrap();
            cmd.arg("--config").arg(&file);
        }
        if let Some(env) = env {
            cmd.env("SKILLD_TOKENS", env);
        }
        let out = cmd.output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{config:?} {env:?}");
        assert!(out.stdout.is_empty(), "it must not have started listening");
        String::from_utf8(out.stderr).unwrap()
    };
    let err = run(None, Some("agent:writer:hunter2-secret"));
    assert!(
        err.contains(
            "token 'agent' (SKILLD_TOKENS): unknown role 'writer'; expected read, invoke, approve or admin"
        ),
        "{err}"
    );
    assert!(!err.contains("hunter2"), "{err}");
    let err = run(None, Some("agent:read:ok,hunter2-secret"));
    assert!(
        err.contains("SKILLD_TOKENS entry 2 is not name:role:secret"),
        "{err}"
    );
    assert!(!err.contains("hunter2"), "{err}");
    let err = run(
        Some("[[tokens]]\nname = \"ci\"\nrole = \"invoke\"\nsecret_sha256 = \"not-hex\"\n"),
        None,
    );
    assert!(
        err.contains("token 'ci' (config file): secret_sha256 must be 64 hexadecimal digits"),
        "{err}"
    );
    let err = run(
        Some("[[tokens]]\nname = \"ci\"\nrole = \"invoke\"\nsecret = \"\"\n"),
        None,
    );
    assert!(
        err.contains("token 'ci' (config file): the secret is empty"),
        "{err}"
    );
    let err = run(
        Some("[[tokens]]\nname = \"ci\"\nrole = \"invoke\"\nsecret = \"a-secret\"\n"),
        Some("ci:admin:b-secret"),
    );
    assert!(
        err.contains("token 'ci' is defined twice (config file and SKILLD_TOKENS)"),
        "{err}"
    );
}
