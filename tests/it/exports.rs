//! Every exported schema is valid JSON Schema 2020-12 (checked against the
//! meta-schema by a real validator), and says what the tool takes.

use crate::common::{bundled_dir, corpus_catalog, options, root};
use serde_json::{Value, json};
use skilld::catalog::Catalog;
use skilld::export::Format;
use skilld::skill::Trust;

fn catalogs() -> Vec<Catalog> {
    vec![
        corpus_catalog(),
        Catalog::build(&options(vec![root(bundled_dir(), Trust::Bundled)]), None),
    ]
}

/// The argument schemas of one export body, by tool name.
fn schemas(format: Format, body: &Value) -> Vec<(String, Value)> {
    let list = match format {
        Format::Gemini => &body["function_declarations"],
        _ => &body["tools"],
    };
    list.as_array()
        .unwrap()
        .iter()
        .filter_map(|t| {
            let (name, schema) = match format {
                Format::Native => (&t["name"], t.get("parameters")),
                Format::Openai => (&t["function"]["name"], t["function"].get("parameters")),
                Format::Anthropic => (&t["name"], t.get("input_schema")),
                Format::Gemini => (&t["name"], t.get("parameters")),
                Format::Mcp => (&t["name"], t.get("inputSchema")),
                Format::Prompt => unreachable!(),
            };
            schema.map(|s| (name.as_str().unwrap().to_owned(), s.clone()))
        })
        .collect()
}

#[test]
fn every_schema_is_valid_json_schema_2020_12() {
    let mut checked = 0;
    for catalog in catalogs() {
        for format in [
            Format::Native,
            Format::Openai,
            Format::Anthropic,
            Format::Gemini,
            Format::Mcp,
        ] {
            let body: Value = serde_json::from_slice(&catalog.exports.body(format, None, None)).unwrap();
            for (name, schema) in schemas(format, &body) {
                if let Err(e) = jsonschema::draft202012::meta::validate(&schema) {
                    panic!("{format:?} {name}: {e}\n{schema:#}");
                }
                let validator = jsonschema::draft202012::new(&schema).unwrap();
                assert_eq!(schema["type"], "object", "{format:?} {name}");
                // Each declared default satisfies its own property schema.
                if let Some(props) = schema["properties"].as_object() {
                    for (p, ps) in props {
                        if let Some(d) = ps.get("default") {
                            assert!(
                                jsonschema::draft202012::is_valid(ps, d),
                                "{name}.{p}: default {d}"
                            );
                        }
                    }
                }
                // An empty object is accepted exactly when nothing is required.
                let required = schema["required"].as_array().map_or(0, Vec::len);
                assert_eq!(validator.is_valid(&json!({})), required == 0, "{format:?} {name}");
                checked += 1;
            }
        }
    }
    assert!(checked > 50, "only {checked} schemas checked");
}

#[test]
fn schemas_have_types_required_defaults_items_and_no_extras() {
    let catalog = corpus_catalog();
    let body: Value = serde_json::from_slice(&catalog.exports.body(
        Format::Anthropic,
        None,
        Some(catalog.skill_index("echo").unwrap()),
    ))
    .unwrap();
    let echo_args = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "echo_args")
        .unwrap();
    let schema = &echo_args["input_schema"];
    assert_eq!(
        schema,
        &json!({
            "type": "object",
            "properties": {
                "text": {"type": "string", "description": "Text to print as one argument."},
                "words": {"type": "array", "items": {"type": "string"}, "description": "Extra words, one argument each."},
                "loud": {"type": "boolean", "description": "Add the flag --loud."},
                "times": {"type": "integer", "description": "Repeat count (default: 1)", "default": 1},
                "ratio": {"type": "number", "description": "A decimal ratio."},
            },
            "required": ["text"],
            "additionalProperties": false,
        })
    );
    let v = jsonschema::draft202012::new(schema).unwrap();
    assert!(v.is_valid(&json!({"text": "hi", "words": ["a", "b"], "loud": true, "times": 2, "ratio": 0.5})));
    assert!(
        !v.is_valid(&json!({"text": "hi", "colour": "red"})),
        "unknown names are refused"
    );
    assert!(!v.is_valid(&json!({"text": 5})), "types are enforced");
    assert!(
        !v.is_valid(&json!({"text": "hi", "words": [1]})),
        "array items are strings"
    );
    assert!(!v.is_valid(&json!({"words": []})), "text is required");
}

#[test]
fn openai_strict_only_where_the_schema_allows_it() {
    let catalog = corpus_catalog();
    let body: Value = serde_json::from_slice(&catalog.exports.body(Format::Openai, None, None)).unwrap();
    for t in body["tools"].as_array().unwrap() {
        let f = &t["function"];
        let schema = &f["parameters"];
        let props = schema["properties"].as_object().map_or(0, |p| p.len());
        let required = schema["required"].as_array().map_or(0, Vec::len);
        let has_default = schema["properties"]
            .as_object()
            .is_some_and(|p| p.values().any(|v| v.get("default").is_some()));
        let closed = schema["additionalProperties"] == json!(false);
        assert_eq!(
            f["strict"],
            json!(closed && props == required && !has_default),
            "{}: strict mode needs every property required, no defaults and a closed object",
            f["name"]
        );
    }
}

#[test]
fn exports_are_built_once_per_snapshot() {
    let catalog = corpus_catalog();
    for format in Format::ALL {
        let a = catalog.exports.body(format, None, None);
        let b = catalog.exports.body(format, None, None);
        assert_eq!(
            a.as_ptr(),
            b.as_ptr(),
            "{format:?}: the unfiltered body is shared, not rebuilt"
        );
        let m1 = catalog.exports.body(format, Some("Dev"), None);
        let m2 = catalog.exports.body(format, Some("dev"), None);
        assert_eq!(
            m1.as_ptr(),
            m2.as_ptr(),
            "{format:?}: per-mode bodies are shared too"
        );
    }
}
