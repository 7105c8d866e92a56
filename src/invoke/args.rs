//! Checking a call's arguments against its tool's parameters before
//! anything else happens, with one error per field.

use super::FieldError;
use crate::skill::{Param, ParamType, Tool};
use serde_json::{Map, Value};

/// Validates `args` for `tool` and applies defaults. Every problem is
/// reported, not just the first, so a caller can fix them all at once.
pub fn validate(tool: &Tool, args: &Map<String, Value>) -> Result<Map<String, Value>, Vec<FieldError>> {
    let mut errors = Vec::new();
    let mut out = Map::new();
    if tool.open_object {
        // The object is passed as JSON, where a NUL is escaped, but the
        // run log keeps it too, and PostgreSQL's jsonb cannot hold `\u0000`.
        for (name, value) in args {
            if name.contains('\0') || holds_nul(value) {
                errors.push(field(
                    name,
                    "contains a NUL byte, which the run log cannot record",
                ));
            }
        }
        if let Some(schema) = &tool.schema {
            errors.extend(against_schema(&schema.validator, args));
        }
        return if errors.is_empty() {
            Ok(args.clone())
        } else {
            Err(errors)
        };
    }
    for name in args.keys() {
        if !tool.params.iter().any(|p| &p.name == name) {
            let known: Vec<&str> = tool.params.iter().map(|p| p.name.as_str()).collect();
            let hint = if known.is_empty() {
                "this tool takes no arguments".to_owned()
            } else {
                format!("expected one of {}", known.join(", "))
            };
            errors.push(field(name, format!("unknown argument; {hint}")));
        }
    }
    for p in &tool.params {
        match args.get(&p.name).filter(|v| !v.is_null()) {
            None => {
                if p.required {
                    errors.push(field(&p.name, format!("required {} is missing", p.ty.as_str())));
                } else if let Some(d) = &p.default {
                    out.insert(p.name.clone(), d.clone());
                }
            }
            Some(value) => match check(p, &integral(p, value)) {
                Ok(()) => {
                    out.insert(p.name.clone(), integral(p, value));
                }
                Err(msg) => errors.push(field(&p.name, msg)),
            },
        }
    }
    if errors.is_empty() { Ok(out) } else { Err(errors) }
}

/// Where `args` fails a manifest tool's own JSON Schema, one error per
/// failing place (at most 20), named by its JSON pointer.
fn against_schema(validator: &jsonschema::Validator, args: &Map<String, Value>) -> Vec<FieldError> {
    let instance = Value::Object(args.clone());
    validator
        .iter_errors(&instance)
        .take(20)
        .map(|e| {
            let at = e.instance_path().to_string();
            let name = at
                .trim_start_matches('/')
                .split('/')
                .next()
                .unwrap_or("")
                .to_owned();
            field(&name, e.to_string())
        })
        .collect()
}

fn field(name: &str, message: impl Into<String>) -> FieldError {
    FieldError {
        field: name.to_owned(),
        message: message.into(),
    }
}

/// An integer parameter's value written with a zero fraction (`3.0`),
/// which JSON Schema counts as an integer, as the integer it is; any
/// other value as it came. Only below 2^53, where a float is exact: a
/// literal too large for 64 bits also reads as a float, rounded, and must
/// not pass as a neighbouring integer.
fn integral(p: &Param, value: &Value) -> Value {
    const EXACT: f64 = 9_007_199_254_740_992.0;
    match (p.ty, value.as_f64()) {
        (ParamType::Integer, Some(f)) if value.is_f64() && f.fract() == 0.0 && f.abs() < EXACT => {
            // Exact: `f` is whole and below 2^53.
            Value::from(f as i64)
        }
        _ => value.clone(),
    }
}

fn check(p: &Param, value: &Value) -> Result<(), String> {
    let ok = match p.ty {
        ParamType::String => value.is_string(),
        ParamType::Integer => value.is_i64() || value.is_u64(),
        ParamType::Number => value.is_number(),
        ParamType::Boolean => value.is_boolean(),
        ParamType::Array => value.as_array().is_some_and(|a| a.iter().all(Value::is_string)),
    };
    if !ok {
        let expected = match p.ty {
            ParamType::Array => "array of strings",
            other => other.as_str(),
        };
        return Err(format!("expected {expected}, got {}", shown(value)));
    }
    if holds_nul(value) {
        return Err("contains a NUL byte, which no argument can carry".to_owned());
    }
    if let Some(allowed) = &p.enum_values
        && !allowed.contains(value)
    {
        let list: Vec<String> = allowed.iter().map(shown).collect();
        return Err(format!(
            "expected one of {}, got {}",
            list.join(", "),
            shown(value)
        ));
    }
    Ok(())
}

/// Whether any string or key at any depth of `value` holds a NUL.
fn holds_nul(value: &Value) -> bool {
    match value {
        Value::String(s) => s.contains('\0'),
        Value::Array(items) => items.iter().any(holds_nul),
        Value::Object(fields) => fields.iter().any(|(k, v)| k.contains('\0') || holds_nul(v)),
        _ => false,
    }
}

/// A value as it appears in a message, cut short if long.
fn shown(value: &Value) -> String {
    let s = value.to_string();
    if s.chars().count() > 60 {
        format!("{}…", s.chars().take(60).collect::<String>())
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skill::{Action, template::CommandTemplate};
    use serde_json::json;

    fn tool() -> Tool {
        let p = |name: &str, ty, required, default: Option<Value>| Param {
            name: name.into(),
            ty,
            required,
            description: String::new(),
            default,
            enum_values: None,
        };
        Tool {
            name: "t".into(),
            description: String::new(),
            params: vec![
                p("text", ParamType::String, true, None),
                p("count", ParamType::Integer, false, Some(json!(10))),
                p("ratio", ParamType::Number, false, None),
                p("loud", ParamType::Boolean, false, None),
                p("words", ParamType::Array, false, None),
            ],
            open_object: false,
            schema: None,
            requires_approval: false,
            read_only: None,
            action: Action::Command {
                template: CommandTemplate::parse("echo").unwrap(),
                program: "echo".into(),
            },
        }
    }

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn defaults_apply_and_nulls_are_absent() {
        let out = validate(&tool(), &obj(json!({"text": "hi", "ratio": null}))).unwrap();
        assert_eq!(Value::Object(out), json!({"text": "hi", "count": 10}));
    }

    /// JSON Schema counts `3.0` as an integer; the tool gets `3`.
    #[test]
    fn an_integer_written_with_a_zero_fraction_is_that_integer() {
        let out = validate(&tool(), &obj(json!({"text": "hi", "count": -352.0}))).unwrap();
        assert_eq!(out["count"], json!(-352));
        assert!(out["count"].is_i64());
        assert!(validate(&tool(), &obj(json!({"text": "hi", "count": 3.5}))).is_err());
        // Past 2^53 a float may be a rounded literal out of range: refused.
        let below_i64: Value = serde_json::from_str("-9223372036854775809").unwrap();
        assert!(validate(&tool(), &obj(json!({"text": "hi", "count": below_i64}))).is_err());
        let max_i64: Value = serde_json::from_str("-9223372036854775808").unwrap();
        assert!(validate(&tool(), &obj(json!({"text": "hi", "count": max_i64}))).is_ok());
    }

    #[test]
    fn every_field_is_reported() {
        let errors = validate(
            &tool(),
            &obj(json!({"count": "ten", "words": ["a", 1], "colour": "red", "ratio": 1.5})),
        )
        .unwrap_err();
        let msgs: Vec<(String, String)> = errors.into_iter().map(|e| (e.field, e.message)).collect();
        assert_eq!(
            msgs,
            [
                (
                    "colour".into(),
                    "unknown argument; expected one of text, count, ratio, loud, words".into()
                ),
                ("text".into(), "required string is missing".into()),
                ("count".into(), "expected integer, got \"ten\"".into()),
                ("words".into(), "expected array of strings, got [\"a\",1]".into()),
            ]
        );
    }

    #[test]
    fn integers_are_whole_and_nul_is_refused() {
        assert!(validate(&tool(), &obj(json!({"text": "a", "count": 1.5}))).is_err());
        assert!(validate(&tool(), &obj(json!({"text": "a", "count": -3}))).is_ok());
        let e = validate(&tool(), &obj(json!({"text": "a\u{0}b"}))).unwrap_err();
        assert!(e[0].message.contains("NUL"));
    }

    /// The run log (jsonb on PostgreSQL) cannot keep a NUL anywhere in an
    /// open object: not in a key, not deep inside.
    #[test]
    fn an_open_object_holds_no_nul_at_any_depth() {
        let open = Tool {
            open_object: true,
            schema: None,
            requires_approval: false,
            read_only: None,
            params: vec![],
            ..tool()
        };
        assert!(validate(&open, &obj(json!({"rows": [{"a": 1.5, "b": null}]}))).is_ok());
        for bad in [
            json!({"k\u{0}": 1}),
            json!({"rows": [{"x": "a\u{0}"}]}),
            json!({"rows": [{"x\u{0}": true}]}),
        ] {
            let e = validate(&open, &obj(bad)).unwrap_err();
            assert!(e[0].message.contains("NUL"), "{e:?}");
        }
    }
}
