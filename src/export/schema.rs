//! The JSON Schema of a tool's arguments, and the dialects of it each
//! provider takes: OpenAI's and Anthropic's strict mode, and Gemini's
//! OpenAPI 3.0 subset.

use crate::skill::{Param, ParamType, Tool};
use serde_json::{Map, Value, json};

pub use crate::skill::names::{MAX_NAME, fit_name};

/// The JSON Schema (2020-12) of a tool's arguments.
pub fn json_schema(tool: &Tool) -> Value {
    object(tool, Dialect::Full)
}

/// A tool's arguments as an object schema in `dialect`; a manifest tool's
/// own schema, or an entrypoint's open object, in any.
fn object(tool: &Tool, dialect: Dialect) -> Value {
    if let Some(schema) = &tool.schema {
        // As the server checks a call: the schema, and no NUL anywhere.
        return match dialect {
            Dialect::Call => json!({"allOf": [schema.value, nul_free_object()]}),
            _ => schema.value.clone(),
        };
    }
    match (tool.open_object, dialect) {
        (true, Dialect::Call) => return open_call_object(),
        (true, _) => return open_object(),
        _ => {}
    }
    let properties: Map<String, Value> = tool
        .params
        .iter()
        .map(|p| (p.name.clone(), param_schema(p, dialect)))
        .collect();
    // Strict mode lists every property; an optional one is nullable.
    let required: Vec<&str> = match dialect {
        Dialect::Strict => tool.params.iter().map(|p| p.name.as_str()).collect(),
        _ => required(tool),
    };
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

fn open_object() -> Value {
    json!({
        "type": "object",
        "description": "Any JSON object; it is passed to the entrypoint as SANDBOX_INPUT.",
        "additionalProperties": true,
    })
}

/// The open object as the server checks a call of it: no NUL byte in
/// any key or string at any depth, since the run log cannot keep one.
fn open_call_object() -> Value {
    let mut o = open_object();
    o["propertyNames"] = json!({"pattern": NO_NUL});
    o["additionalProperties"] = json!({"$ref": NUL_FREE_REF});
    o
}

/// The same check beside a tool's own schema (a manifest's, an MCP
/// server's), which says itself what the object holds.
fn nul_free_object() -> Value {
    let mut o = open_call_object();
    if let Some(o) = o.as_object_mut() {
        o.remove("description");
    }
    o
}

/// The name under which a document that uses [`call_schema`] must hold
/// [`nul_free_json`] among its component schemas.
pub const NUL_FREE_JSON: &str = "JsonWithoutNul";
const NUL_FREE_REF: &str = "#/components/schemas/JsonWithoutNul";

/// Any JSON value without a NUL byte in a string or key, at any depth.
/// Each keyword applies only to its own type, so one schema says it all.
pub fn nul_free_json() -> Value {
    json!({
        "description": "Any JSON value with no NUL byte in any string or key.",
        "pattern": NO_NUL,
        "items": {"$ref": NUL_FREE_REF},
        "propertyNames": {"pattern": NO_NUL},
        "additionalProperties": {"$ref": NUL_FREE_REF},
    })
}

fn required(tool: &Tool) -> Vec<&str> {
    tool.params
        .iter()
        .filter(|p| p.required)
        .map(|p| p.name.as_str())
        .collect()
}

/// The body of a typed call (`POST /tools/{tool}/call`), exactly as the
/// server checks it: an optional parameter may also be null (not given),
/// an integer fits 64 bits, and no string holds a NUL byte.
pub fn call_schema(tool: &Tool) -> Value {
    object(tool, Dialect::Call)
}

/// The schema for strict mode (OpenAI's structured outputs, Anthropic's
/// strict tools): every property required, an optional one nullable (null
/// means "not given": the server then applies the default), and defaults
/// said in words, since `default` is not among strict mode's keywords.
/// `None` for an entrypoint's open object, which strict mode cannot take.
pub fn strict_schema(tool: &Tool) -> Option<Value> {
    (!tool.open_object).then(|| object(tool, Dialect::Strict))
}

/// Gemini's `parameters`: an OpenAPI 3.0 subset with no `default` and no
/// `additionalProperties`, whose enums are strings (`format: enum` for an
/// integer's). `None` for a tool without parameters, which Gemini wants
/// unset, and for an open object (see [`gemini_json_schema`]).
pub fn gemini_parameters(tool: &Tool) -> Option<Value> {
    if tool.open_object || tool.params.is_empty() {
        return None;
    }
    let properties: Map<String, Value> = tool
        .params
        .iter()
        .map(|p| (p.name.clone(), param_schema(p, Dialect::Gemini)))
        .collect();
    let mut o = json!({"type": "object", "properties": properties});
    let required = required(tool);
    if !required.is_empty() {
        o["required"] = json!(required);
    }
    Some(o)
}

/// Gemini's `parameters_json_schema` (full JSON Schema), for the open
/// object that its OpenAPI subset cannot say.
pub fn gemini_json_schema(tool: &Tool) -> Option<Value> {
    tool.open_object
        .then(|| tool.schema.as_ref().map_or_else(open_object, |s| s.value.clone()))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Dialect {
    Full,
    Strict,
    Gemini,
    Call,
}

fn param_schema(p: &Param, dialect: Dialect) -> Value {
    let mut s = Map::new();
    let nullable = matches!(dialect, Dialect::Strict | Dialect::Call) && !p.required;
    let ty = Value::from(p.ty.as_str());
    s.insert("type".into(), if nullable { json!([ty, "null"]) } else { ty });
    let mut description = p.description.clone();
    if let (Dialect::Strict | Dialect::Gemini, Some(d)) = (dialect, &p.default)
        && !description.to_ascii_lowercase().contains("default")
    {
        description = sentence_with(&description, &format!("Default: {d}."));
    }
    if !description.is_empty() {
        s.insert("description".into(), Value::from(description));
    }
    if p.ty == ParamType::Array {
        let mut items = json!({"type": "string"});
        if dialect == Dialect::Call {
            items["pattern"] = NO_NUL.into();
        }
        s.insert("items".into(), items);
    }
    if dialect == Dialect::Call {
        match p.ty {
            ParamType::String => {
                s.insert("pattern".into(), NO_NUL.into());
            }
            ParamType::Integer => {
                s.insert("minimum".into(), i64::MIN.into());
                s.insert("maximum".into(), u64::MAX.into());
            }
            _ => {}
        }
    }
    if let Some(values) = &p.enum_values {
        s.insert("enum".into(), enum_values(values, dialect, nullable));
        if dialect == Dialect::Gemini {
            s.insert("format".into(), Value::from("enum"));
        }
    }
    if let (Dialect::Full | Dialect::Call, Some(d)) = (dialect, &p.default) {
        s.insert("default".into(), d.clone());
    }
    Value::Object(s)
}

/// No NUL byte: no program argument can carry one, so the server refuses it.
const NO_NUL: &str = "^[^\\u0000]*$";

fn enum_values(values: &[Value], dialect: Dialect, nullable: bool) -> Value {
    let mut values = values.to_vec();
    if dialect == Dialect::Gemini {
        values = values
            .into_iter()
            .map(|v| match v {
                Value::String(s) => Value::String(s),
                other => Value::String(other.to_string()),
            })
            .collect();
    }
    if nullable {
        values.push(Value::Null);
    }
    Value::Array(values)
}

fn sentence_with(text: &str, more: &str) -> String {
    let text = text.trim_end();
    if text.is_empty() {
        more.to_owned()
    } else if text.ends_with(['.', '!', '?']) {
        format!("{text} {more}")
    } else {
        format!("{text}. {more}")
    }
}
