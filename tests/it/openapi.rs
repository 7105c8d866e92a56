//! The OpenAPI document: generated from the handlers, committed, and usable
//! by SDK generators.

use serde_json::Value;
use std::path::Path;

fn committed_path() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("openapi/openapi.json")
}

#[test]
fn committed_document_matches_the_code() {
    let generated = skilld::openapi().to_pretty_json().unwrap();
    let committed = std::fs::read_to_string(committed_path()).unwrap_or_default();
    if committed.trim_end() != generated.trim_end() {
        if std::env::var_os("SKILLD_UPDATE_OPENAPI").is_some() {
            std::fs::write(committed_path(), format!("{generated}\n")).unwrap();
            return;
        }
        panic!(
            "openapi/openapi.json is out of date; regenerate it with \
             `cargo run -q -- openapi > openapi/openapi.json` \
             (or run this test with SKILLD_UPDATE_OPENAPI=1)"
        );
    }
}

fn document() -> Value {
    serde_json::to_value(skilld::openapi()).unwrap()
}

#[test]
fn every_operation_is_named_and_every_error_is_a_problem() {
    let doc = document();
    assert_eq!(doc["openapi"], "3.1.0");
    let mut ids = std::collections::HashSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let id = op["operationId"]
                .as_str()
                .unwrap_or_else(|| panic!("{method} {path} has no operationId"));
            assert!(ids.insert(id.to_owned()), "duplicate operationId {id}");
            assert!(
                op["tags"].as_array().is_some_and(|t| !t.is_empty()),
                "{id} has no tag"
            );
            for (status, res) in op["responses"].as_object().unwrap() {
                let content = res["content"].as_object();
                if status.starts_with('4') || status.starts_with('5') {
                    let problem = &content.unwrap_or_else(|| panic!("{id} {status}: no body"))["application/problem+json"];
                    assert_eq!(
                        problem["schema"]["$ref"], "#/components/schemas/Problem",
                        "{id} {status}"
                    );
                    continue;
                }
                // A file download's `application/json` is any JSON file.
                let download = content.is_some_and(|c| c.contains_key("application/octet-stream"));
                for (mime, media) in content.into_iter().flatten() {
                    if mime == "application/json" && !download {
                        let schema = &media["schema"];
                        assert!(
                            schema["$ref"]
                                .as_str()
                                .is_some_and(|r| r.starts_with("#/components/schemas/")),
                            "{id} {status}: the JSON body has no named schema: {schema}"
                        );
                    }
                }
            }
            if let Some(body) = op.get("requestBody") {
                for (_, media) in body["content"].as_object().unwrap() {
                    assert!(
                        media["schema"]["$ref"].is_string(),
                        "{id}: request body has no named schema"
                    );
                }
            }
        }
    }
    for route in [
        "/healthz",
        "/readyz",
        "/skills",
        "/skills/{skill}",
        "/skills/{skill}/prompt",
        "/skills/{skill}/files/{path}",
        "/skills/reload",
        "/diagnostics",
        "/commands",
        "/tools",
        "/tools/prompt",
        "/tools/{tool}",
    ] {
        assert!(
            doc["paths"].get(route).is_some(),
            "{route} is missing from the document"
        );
    }
}

#[test]
fn the_cli_prints_the_same_document() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_skilld"))
        .arg("openapi")
        .output()
        .unwrap();
    assert!(out.status.success());
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed, document());
}

fn schema<'a>(doc: &'a Value, name: &str) -> &'a Value {
    &doc["components"]["schemas"][name]
}

/// Invoke's 200 decodes as exactly one of its members: each has a
/// required field the others lack, so generated clients need not guess.
#[test]
fn invoke_answers_are_disjoint_unions() {
    let doc = document();
    let members = |name: &str| -> Vec<String> {
        schema(&doc, name)["oneOf"]
            .as_array()
            .unwrap_or_else(|| panic!("{name} is not a oneOf"))
            .iter()
            .map(|m| m["$ref"].as_str().unwrap().rsplit('/').next().unwrap().to_owned())
            .collect()
    };
    assert_eq!(members("InvokeOutcome"), ["Envelope", "DryRun"]);
    assert_eq!(
        members("CommandOutcome"),
        ["SkillPrompt", "Envelope", "DryRun", "SkillList", "CommandList"]
    );
    for outcome in ["InvokeOutcome", "CommandOutcome"] {
        let names = members(outcome);
        let required = |n: &str| -> std::collections::BTreeSet<String> {
            serde_json::from_value(schema(&doc, n)["required"].clone()).unwrap()
        };
        for a in &names {
            for b in names.iter().filter(|b| *b != a) {
                assert!(
                    !required(a).is_subset(&required(b)),
                    "{outcome}: every field {a} requires is in {b} too"
                );
            }
        }
    }
    let ops = [
        ("/tools/{tool}/invoke", "InvokeOutcome"),
        ("/skills/{skill}/tools/{tool}/invoke", "InvokeOutcome"),
        ("/commands/{command}", "CommandOutcome"),
    ];
    for (path, outcome) in ops {
        let op = &doc["paths"][path]["post"];
        let ok = &op["responses"]["200"]["content"];
        assert_eq!(
            ok["application/json"]["schema"]["$ref"],
            format!("#/components/schemas/{outcome}"),
            "{path}"
        );
        assert!(ok["text/event-stream"]["itemSchema"].is_object(), "{path}");
        let headers: Vec<&str> = op["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["in"] == "header")
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            headers,
            ["Prefer", "Accept", "Idempotency-Key", "Skilld-Session-Secret"],
            "{path}"
        );
        assert_eq!(
            op["requestBody"]["required"], false,
            "{path}: an empty body is taken"
        );
    }
    assert_eq!(
        schema(&doc, "Run")["properties"]["result"]["oneOf"][0]["$ref"],
        "#/components/schemas/Envelope"
    );
}

/// Event streams describe each event (`itemSchema`) and no single value;
/// downloads are bytes; bounds the server enforces are in the document.
#[test]
fn streams_downloads_and_bounds_are_described() {
    let doc = document();
    let events =
        &doc["paths"]["/runs/{id}/events"]["get"]["responses"]["200"]["content"]["text/event-stream"];
    assert!(events.get("schema").is_none(), "{events}");
    let kinds: Vec<&Value> = events["itemSchema"]["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["properties"]["event"]["enum"][0])
        .collect();
    assert_eq!(kinds, ["status", "output", "result"]);
    for path in ["/skills/{skill}/files/{path}", "/runs/{id}/files/{path}"] {
        let ok = &doc["paths"][path]["get"]["responses"]["200"]["content"];
        assert_eq!(
            ok["application/octet-stream"]["schema"],
            serde_json::json!({"type": "string", "format": "binary"}),
            "{path}"
        );
    }
    let file = &doc["paths"]["/skills/{skill}/files/{path}"]["get"]["responses"]["200"]["content"];
    for mime in ["text/markdown", "text/plain", "application/json", "text/x-python"] {
        assert!(file.get(mime).is_some(), "the skill file route serves {mime}");
    }
    let tools = &doc["paths"]["/tools"]["get"]["responses"]["200"]["content"];
    assert!(
        tools.get("text/plain").is_some(),
        "format=prompt answers text/plain"
    );
    assert!(schema(&doc, "ToolExport")["anyOf"].is_array());
    let param = |path: &str, name: &str| -> Value {
        let op = doc["paths"][path].as_object().unwrap().values().next().unwrap();
        op["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("{path} has no {name}"))["schema"]
            .clone()
    };
    assert_eq!(param("/runs", "limit")["minimum"], 1);
    assert_eq!(param("/runs", "limit")["maximum"], 500);
    assert_eq!(param("/approvals", "limit")["maximum"], 500);
    assert_eq!(param("/runs/{id}", "wait")["maximum"], 300);
    assert_eq!(param("/tools/{tool}/invoke", "wait")["maximum"], 300);
    assert!(param("/runs", "cursor")["pattern"].is_string());
}

/// Every operation that takes a UUID in its path answers 400 for one
/// that is not, and every JSON body may be refused as too large or of the
/// wrong type.
#[test]
fn malformed_ids_and_bodies_are_documented() {
    let doc = document();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let responses = op["responses"].as_object().unwrap();
            let uuid_in_path = op["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|p| p["in"] == "path" && p["schema"]["format"] == "uuid");
            if uuid_in_path {
                assert!(responses.contains_key("400"), "{method} {path}: no 400");
            }
            if op.get("requestBody").is_some() {
                for status in ["400", "408", "413", "415"] {
                    assert!(responses.contains_key(status), "{method} {path}: no {status}");
                }
            }
        }
    }
}

/// A body the document calls optional is one the server takes when left
/// out (it reads nothing as `{}`), so its schema requires no field; a body
/// whose schema requires one is documented as required.
#[test]
fn optional_bodies_are_the_ones_that_need_no_field() {
    let doc = document();
    let mut required_seen = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let Some(body) = op.get("requestBody") else {
                continue;
            };
            let Some(reference) = body["content"]["application/json"]["schema"]["$ref"].as_str() else {
                continue;
            };
            let name = reference.rsplit('/').next().unwrap();
            let needs_field = schema(&doc, name)["required"]
                .as_array()
                .is_some_and(|r| !r.is_empty());
            assert_eq!(body["required"], needs_field, "{method} {path}: {name}");
            if needs_field {
                required_seen.push(format!("{method} {path}"));
            }
        }
    }
    for op in [
        "post /sessions/{id}/responses",
        "post /sessions/{id}/activations/{skill}",
    ] {
        assert!(required_seen.iter().any(|s| s == op), "{op}: {required_seen:?}");
    }
}
