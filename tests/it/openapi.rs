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
                for (mime, media) in content.into_iter().flatten() {
                    if mime == "application/json" {
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
