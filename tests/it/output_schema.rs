//! Tools that declare their output (`docs/skills.md`, "Tools and their
//! schemas"): a manifest's `output_schema` (inline or from a file) and one
//! a process backend declares in its `initialize` answer are exported
//! (`outputSchema` in MCP, `output_schema` natively, Gemini's
//! `response_json_schema`); one that is not an object's valid JSON Schema
//! excludes the skill; and over MCP the official Python SDK, which
//! validates `structuredContent` against `outputSchema`, accepts every
//! result, while output that does not match is an error result saying so
//! (`tests/python/mcp_output.py`).

use crate::common::{TestServer, copy_tree, corpus_dir, options, root, run_script, tempdir};
use serde_json::{Value, json};
use skilld::catalog::Catalog;
use skilld::skill::{Code, Severity, Trust};
use std::time::Duration;

fn stats_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"words": {"type": "integer", "minimum": 0}, "chars": {"type": "integer", "minimum": 0}},
        "required": ["words", "chars"],
        "additionalProperties": false
    })
}

/// A server over `tests/corpus/outputs`, its calls allowed ahead of time.
async fn server() -> (TestServer, tempfile::TempDir) {
    let skills = tempdir().unwrap();
    copy_tree(&corpus_dir().join("outputs"), skills.path());
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::Bundled)]))
        .allowed()
        .start()
        .await;
    (server, skills)
}

fn by_name<'a>(list: &'a Value, key: &str, name: &str) -> &'a Value {
    list[key]
        .as_array()
        .and_then(|tools| {
            tools
                .iter()
                .find(|t| t["name"] == name || t["function"]["name"] == name)
        })
        .unwrap_or_else(|| panic!("{name} is not in {list}"))
}

#[tokio::test]
async fn exports_carry_the_declared_output_schema() {
    let (server, _skills) = server().await;
    let mcp = server.get_json("/tools?format=mcp").await;
    assert_eq!(
        by_name(&mcp, "tools", "text_stats")["outputSchema"],
        stats_schema()
    );
    assert_eq!(
        by_name(&mcp, "tools", "text_stats_wrong")["outputSchema"],
        stats_schema()
    );
    assert_eq!(
        by_name(&mcp, "tools", "text_shout")["outputSchema"]["required"],
        json!(["shout"])
    );
    assert!(by_name(&mcp, "tools", "text_echo").get("outputSchema").is_none());
    let native = server.get_json("/tools?format=native").await;
    assert_eq!(
        by_name(&native, "tools", "text_stats")["output_schema"],
        stats_schema()
    );
    assert!(
        by_name(&native, "tools", "text_echo")
            .get("output_schema")
            .is_none()
    );
    let tool = server.get_json("/tools/text_stats").await;
    assert_eq!(tool["output_schema"], stats_schema());
    let gemini = server.get_json("/tools?format=gemini").await;
    assert_eq!(
        by_name(&gemini, "function_declarations", "text_stats")["response_json_schema"],
        stats_schema()
    );
    // Over HTTP the envelope is as it was: the output is its `parsed`.
    let (status, envelope) = server.invoke("text_stats", json!({"text": "a b c"})).await;
    assert_eq!(status, 200, "{envelope}");
    assert_eq!(envelope["parsed"], json!({"words": 3, "chars": 5}));
}

#[test]
fn an_output_schema_that_is_not_an_objects_excludes_the_skill() {
    for (schema, why) in [
        ("{type: string}", "not an object"),
        (
            "{type: object, properties: {a: {type: 12}}}",
            "not a valid JSON Schema",
        ),
    ] {
        let dir = tempdir().unwrap();
        let skill = dir.path().join("bad-output");
        std::fs::create_dir_all(&skill).unwrap();
        std::fs::write(
            skill.join("SKILL.yaml"),
            format!(
                "name: bad-output\nversion: 1.0.0\ndescription: Declares a bad output schema.\n\
                 types: [tool]\npermissions: [shell:exec]\n\
                 implementation: {{backend: process, entrypoint: main.py}}\n\
                 tools:\n  - name: bad\n    description: Bad.\n    output_schema: {schema}\n"
            ),
        )
        .unwrap();
        std::fs::write(skill.join("main.py"), "").unwrap();
        let catalog = Catalog::build(&options(vec![root(dir.path(), Trust::User)]), None);
        assert!(catalog.skill("bad-output").is_none(), "{why}: loaded");
        let error = catalog
            .diagnostics
            .iter()
            .find(|d| d.severity == Severity::Error && d.message.contains("output_schema"))
            .unwrap_or_else(|| panic!("{why}: no error in {:?}", catalog.diagnostics));
        assert_eq!(error.code, Code::InvalidParameter, "{why}");
        assert!(error.message.contains("tool 'bad'"), "{}", error.message);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_accepts_structured_content_that_it_validates() {
    let (server, _skills) = server().await;
    let base = server.url("");
    run_script(
        "mcp_output.py",
        &["http", base.trim_end_matches('/')],
        &[],
        Duration::from_secs(180),
    )
    .await;
}
