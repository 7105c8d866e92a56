//! A typed tool server: `GET /tools/openapi.json` is an OpenAPI document
//! with one operation per tool, `POST /tools/{tool}/call`, whose body is
//! the tool's own arguments schema and whose 200 is the envelope. Tool
//! hosts that import OpenAPI tool servers (Open WebUI, as mcpo serves
//! them) and generated clients then see each tool as a typed function.
//! Only what the invoke role may do is in it: no approving, cancelling or
//! reloading. Built from the catalog snapshot at each request, so it
//! follows reloads.

use super::AppState;
use super::auth::{Require, need};
use super::kit::error::Result;
use super::kit::extract::{JsonBody, Path, Query};
use crate::catalog::Catalog;
use crate::export;
use crate::invoke::{Call, Delivery, Gate, Target};
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::sync::OnceLock;
use std::time::Duration;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/tools/openapi.json", get(document))
        .route("/tools/{tool}/call", post(call))
}

/// The component schemas the operations name, copied (with those they
/// refer to) from the API's own document, so the two cannot differ.
const SCHEMAS: [&str; 3] = ["Envelope", "InvokeAccepted", "Problem"];

async fn document(_: Require<need::Read>, State(state): State<AppState>) -> Json<Value> {
    Json(build(&state.catalog.current()))
}

/// [`SCHEMAS`], taken once.
fn schemas() -> &'static Map<String, Value> {
    static SCHEMAS_OF_API: OnceLock<Map<String, Value>> = OnceLock::new();
    SCHEMAS_OF_API.get_or_init(|| {
        let api = serde_json::to_value(super::openapi()).unwrap_or_default();
        let all = &api["components"]["schemas"];
        let mut taken = Map::new();
        let mut wanted: Vec<String> = SCHEMAS.map(str::to_owned).to_vec();
        while let Some(name) = wanted.pop() {
            if taken.contains_key(&name) {
                continue;
            }
            if let Some(schema) = all.get(&name) {
                refs(schema, &mut wanted);
                taken.insert(name, schema.clone());
            }
        }
        taken.insert(export::NUL_FREE_JSON.to_owned(), export::nul_free_json());
        taken
    })
}

/// The component names `value` refers to (`#/components/schemas/<name>`).
fn refs(value: &Value, into: &mut Vec<String>) {
    match value {
        Value::Object(fields) => {
            for (key, v) in fields {
                match (key.as_str(), v.as_str()) {
                    ("$ref", Some(r)) => {
                        into.extend(r.strip_prefix("#/components/schemas/").map(str::to_owned))
                    }
                    _ => refs(v, into),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| refs(v, into)),
        _ => {}
    }
}

/// The document for one catalog snapshot.
pub fn build(catalog: &Catalog) -> Value {
    let paths: Map<String, Value> = catalog
        .tools
        .iter()
        .map(|entry| {
            let skill = &catalog.skills[entry.skill];
            let tool = &skill.tools[entry.tool];
            let path = format!("/tools/{}/call", entry.export_name);
            (
                path,
                json!({ "post": operation(&entry.export_name, &skill.name, tool) }),
            )
        })
        .collect();
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "skilld tools",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Each tool of this skilld server as one typed operation. A call that a person \
                must approve first answers 202 with the approval; pass `wait` to wait for the decision.",
        },
        "paths": paths,
        "components": {
            "schemas": schemas(),
            "securitySchemes": {
                "bearer": { "type": "http", "scheme": "bearer",
                    "description": "`Authorization: Bearer <token>` (invoke role), once the server has tokens." },
            },
        },
        "security": [{ "bearer": [] }],
    })
}

fn operation(name: &str, skill: &str, tool: &crate::skill::Tool) -> Value {
    let problem = |description: &str| {
        json!({ "description": description,
            "content": { "application/problem+json": { "schema": { "$ref": "#/components/schemas/Problem" } } } })
    };
    json!({
        "operationId": name,
        "summary": first_line(&tool.description),
        "description": tool.description,
        "tags": [skill],
        "parameters": [{
            "name": "wait", "in": "query", "required": false,
            "description": "Seconds (at most 300) to wait for a person's decision when the call must be approved.",
            "schema": { "type": "integer", "minimum": 0, "maximum": 300 },
        }],
        "requestBody": {
            "required": false,
            "content": { "application/json": { "schema": export::call_schema(tool) } },
        },
        "responses": {
            "200": { "description": "The tool ran (a failed run too): its envelope",
                "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Envelope" } } } },
            "202": { "description": "Held for a person's approval: the approval's id and URL",
                "content": { "application/json": { "schema": { "$ref": "#/components/schemas/InvokeAccepted" } } } },
            "400": problem("A malformed body or query, or a wait over 300"),
            "401": problem("Tokens are configured, and the request sent none, or an unknown one"),
            "403": problem("The token's role is below invoke, or a standing decision or a person denied the call"),
            "404": problem("The tool is no longer loaded"),
            "409": problem("Several skills define this tool name"),
            "413": problem("The body is over 1 MiB"),
            "415": problem("The body is not sent as application/json"),
            "422": problem("The arguments do not fit the tool's parameters"),
            "429": problem("Too many runs at once, or too many of your calls wait for a person"),
            "503": problem("The server is shutting down"),
        },
    })
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("").trim()
}

#[derive(Debug, Deserialize)]
struct ToolPath {
    tool: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CallQuery {
    wait: Option<u64>,
}

/// `POST /tools/{tool}/call`: the body is the arguments themselves.
async fn call(
    auth: Require<need::Invoke>,
    State(state): State<AppState>,
    Path(p): Path<ToolPath>,
    Query(q): Query<CallQuery>,
    headers: HeaderMap,
    JsonBody(arguments): JsonBody<Value>,
) -> Result<Response> {
    let key = super::invoke::idempotency_key(&headers)?;
    let call = Call {
        target: Target::Tool(p.tool),
        arguments,
        mode: None,
        dry_run: false,
        wait: Duration::from_secs(q.wait.unwrap_or(0)),
        delivery: Delivery::Result,
        gate: Gate::Policy,
        asked: super::invoke::asked(&auth.caller, &headers),
        sampler: None,
        budget: None,
        session: None,
    };
    let catalog = state.catalog.current();
    let called = state.invoker.call_keyed(&catalog, call, key).await?;
    // Answered as invoke answers: 200 the envelope, 202 when held.
    super::invoke::respond(&state, called, None)
}
