//! Every exported schema is valid JSON Schema 2020-12 (checked against the
//! meta-schema by a real validator), and says what the tool takes.

use crate::common::{bundled_dir, corpus_catalog, options, plain, redacted, root};
use insta::{assert_json_snapshot, assert_snapshot};
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
                Format::OpenaiResponses => (&t["name"], t.get("parameters")),
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
            Format::OpenaiResponses,
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
        Format::Native,
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
    let schema = &echo_args["parameters"];
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

/// The echo skill as each provider reads it, whole: every tool's name,
/// description and argument schema (strict where the format has strict
/// mode), in the native, OpenAI (chat and responses), Anthropic, Gemini
/// and MCP shapes, and the prompt manifest.
#[test]
fn the_echo_skill_in_every_format() {
    let catalog = corpus_catalog();
    let echo = catalog.skill_index("echo").unwrap();
    for format in Format::ALL {
        let body = catalog.exports.body(format, None, Some(echo));
        let name = format!("echo_{}", format.as_str());
        if format == Format::Prompt {
            let text = String::from_utf8(body.to_vec()).unwrap();
            redacted().bind(|| assert_snapshot!(name, text));
        } else {
            let value: Value = serde_json::from_slice(&body).unwrap();
            redacted().bind(|| assert_json_snapshot!(name, plain(&value)));
        }
    }
}

/// Strict mode (OpenAI, Anthropic) for every tool with declared
/// parameters: all required, the optional ones nullable, no defaults, a
/// closed object; and the strict schema takes what the full one takes,
/// with null standing for an argument not given.
#[test]
fn strict_mode_wherever_parameters_are_declared() {
    let catalog = corpus_catalog();
    let native: Value = serde_json::from_slice(&catalog.exports.body(Format::Native, None, None)).unwrap();
    let mut strict_tools = 0;
    for format in [Format::Openai, Format::OpenaiResponses, Format::Anthropic] {
        let body: Value = serde_json::from_slice(&catalog.exports.body(format, None, None)).unwrap();
        for (t, full) in body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .zip(native["tools"].as_array().unwrap())
        {
            let (tool, schema) = match format {
                Format::Openai => (&t["function"], &t["function"]["parameters"]),
                Format::OpenaiResponses => (t, &t["parameters"]),
                _ => (t, &t["input_schema"]),
            };
            // A manifest tool keeps its own schema, which strict mode's
            // rules may not fit: it is never strict.
            let own_schema = catalog
                .skill(full["skill"].as_str().unwrap())
                .is_some_and(|s| s.dialect == skilld::skill::Dialect::Manifest);
            let full = &full["parameters"];
            let open = full["additionalProperties"] == json!(true) || own_schema;
            assert_eq!(tool["strict"], json!(!open), "{format:?} {}", tool["name"]);
            if open {
                continue;
            }
            strict_tools += 1;
            let props = schema["properties"].as_object().unwrap();
            #[expect(clippy::needless_collect, reason = "collecting unwraps each name as a string")]
            let required: Vec<&str> = schema["required"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap())
                .collect();
            assert_eq!(
                required.len(),
                props.len(),
                "{}: every property required",
                tool["name"]
            );
            assert_eq!(schema["additionalProperties"], json!(false));
            let full_required = full["required"].as_array().unwrap();
            let mut nulls = serde_json::Map::new();
            for (name, p) in props {
                assert!(
                    p.get("default").is_none(),
                    "{}.{name}: no default in strict mode",
                    tool["name"]
                );
                let optional = !full_required.contains(&json!(name));
                assert_eq!(
                    p["type"].is_array(),
                    optional,
                    "{}.{name}: nullable exactly when optional",
                    tool["name"]
                );
                if optional {
                    nulls.insert(name.clone(), Value::Null);
                }
            }
            let v = jsonschema::draft202012::new(schema).unwrap();
            if nulls.len() == props.len() {
                assert!(
                    v.is_valid(&Value::Object(nulls)),
                    "{}: all-null is \"none given\"",
                    tool["name"]
                );
            }
        }
    }
    assert!(strict_tools > 20, "{strict_tools}");
}

/// Names fit every provider (64 characters), and Gemini's enums are
/// strings.
#[test]
fn names_fit_and_gemini_enums_are_strings() {
    for catalog in catalogs() {
        for e in &catalog.tools {
            assert!(
                e.export_name.len() <= skilld::export::MAX_NAME,
                "{}",
                e.export_name
            );
        }
        let body: Value = serde_json::from_slice(&catalog.exports.body(Format::Gemini, None, None)).unwrap();
        for f in body["function_declarations"].as_array().unwrap() {
            for p in f["parameters"]["properties"]
                .as_object()
                .into_iter()
                .flat_map(|p| p.values())
            {
                if let Some(values) = p.get("enum") {
                    assert!(values.as_array().unwrap().iter().all(Value::is_string), "{f}");
                    assert_eq!(p["format"], "enum", "{f}");
                }
            }
        }
    }
    let long = "a".repeat(40) + "__" + &"b".repeat(32);
    let fitted = skilld::export::fit_name(long.clone());
    assert_eq!(fitted.len(), skilld::export::MAX_NAME);
    assert_eq!(fitted, skilld::export::fit_name(long.clone()), "stable");
    assert_ne!(
        fitted,
        skilld::export::fit_name(long.replace('b', "c")),
        "distinct"
    );
    assert_eq!(skilld::export::fit_name("short".into()), "short");
}

/// `Exports` finds a format's bodies by its discriminant.
#[test]
fn every_format_has_its_own_bodies() {
    let catalog = corpus_catalog();
    for (i, format) in Format::ALL.into_iter().enumerate() {
        assert_eq!(format as usize, i, "{format:?} out of order in Format::ALL");
    }
    let responses: Value =
        serde_json::from_slice(&catalog.exports.body(Format::OpenaiResponses, None, None)).unwrap();
    let chat: Value = serde_json::from_slice(&catalog.exports.body(Format::Openai, None, None)).unwrap();
    let flat: Vec<Value> = chat["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let mut tool = t["function"].as_object().unwrap().clone();
            tool.insert("type".into(), json!("function"));
            Value::Object(tool)
        })
        .collect();
    assert_eq!(responses["tools"], json!(flat), "the openai tools, flat");
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

/// Every export of the bundled skills and the test corpus, as the
/// providers' own SDKs read it (`tests/python/provider_exports.py`).
#[tokio::test]
async fn every_provider_sdk_accepts_every_export() {
    use crate::common::{TestServer, corpus_options};
    let corpus = TestServer::builder(corpus_options()).start().await;
    let bundled = TestServer::builder(options(vec![root(bundled_dir(), Trust::Bundled)]))
        .start()
        .await;
    let (corpus, bundled) = (corpus.url(""), bundled.url(""));
    let bases = [corpus.trim_end_matches('/'), bundled.trim_end_matches('/')];
    crate::common::run_script(
        "provider_exports.py",
        &bases,
        &[],
        std::time::Duration::from_secs(120),
    )
    .await;
}
