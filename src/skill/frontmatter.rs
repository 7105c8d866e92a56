//! Frontmatter: the YAML block between `---` lines at the very top of a
//! `SKILL.md`, and a bounded reader for it.
//!
//! YAML aliases let a few hundred bytes describe billions of nodes. The YAML
//! crate caps alias jumps relative to the document's size, which still lets a
//! large file expand far beyond memory, so values are read through a
//! [`serde::de::DeserializeSeed`] that counts every node it is handed —
//! expansions included — and stops at [`NODE_BUDGET`].

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::cell::Cell;
use std::fmt;

/// The deepest flow nesting (`[` and `{`) accepted. The YAML parser takes
/// time quadratic in flow depth, so 100,000 `[` would hold a thread for
/// minutes; no real frontmatter nests more than a few levels.
pub const MAX_FLOW_DEPTH: usize = 64;

/// The most YAML nodes (after alias expansion) one frontmatter may produce.
/// Real frontmatter has dozens; this leaves room for generous lists.
pub const NODE_BUDGET: usize = 100_000;

/// A definition file cut into its frontmatter and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split<'a> {
    /// The YAML text between the fences, when the file has frontmatter.
    pub yaml: Option<&'a str>,
    /// Byte offset of `yaml` in the file (the line after the opening fence).
    pub yaml_offset: usize,
    /// The Markdown after the closing fence (the whole file without one).
    pub body: &'a str,
    /// Byte offset of `body` in the file.
    pub body_offset: usize,
}

/// Frontmatter starts with `---` on the first line and never ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unclosed;

/// Splits a definition file. A leading UTF-8 byte-order mark is skipped; the
/// fences may carry trailing blanks and CRLF endings; `...` also closes.
pub fn split(text: &str) -> Result<Split<'_>, Unclosed> {
    let bom = if text.starts_with('\u{feff}') { 3 } else { 0 };
    let rest = &text[bom..];
    let (first, after_first) = next_line(rest, 0);
    if first.trim_end() != "---" {
        return Ok(Split {
            yaml: None,
            yaml_offset: bom,
            body: rest,
            body_offset: bom,
        });
    }
    let yaml_start = after_first;
    let mut at = after_first;
    while at < rest.len() {
        let (line, next) = next_line(rest, at);
        let fence = line.trim_end();
        if fence == "---" || fence == "..." {
            return Ok(Split {
                yaml: Some(&rest[yaml_start..at]),
                yaml_offset: bom + yaml_start,
                body: &rest[next..],
                body_offset: bom + next,
            });
        }
        at = next;
    }
    Err(Unclosed)
}

/// The line starting at `at` (without its newline) and the offset after it.
fn next_line(text: &str, at: usize) -> (&str, usize) {
    match text[at..].find('\n') {
        Some(i) => (&text[at..at + i], at + i + 1),
        None => (&text[at..], text.len()),
    }
}

/// Why frontmatter YAML could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YamlError {
    pub message: String,
    /// 1-based line and column within the YAML text, when known.
    pub location: Option<(u32, u32)>,
}

/// Parses YAML into JSON values, refusing documents that expand past
/// [`NODE_BUDGET`] nodes. Keys must be scalars; they become strings.
pub fn parse_yaml(yaml: &str) -> Result<Value, YamlError> {
    if yaml.trim().is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    if let Some(offset) = too_deep(yaml) {
        return Err(YamlError {
            message: format!("flow collections nest deeper than {MAX_FLOW_DEPTH} levels"),
            location: Some(line_col(yaml, offset)),
        });
    }
    let budget = Cell::new(NODE_BUDGET);
    let de = serde_norway::Deserializer::from_str(yaml);
    Bounded { budget: &budget }.deserialize(de).map_err(|e| {
        let location = e.location().map(|l| {
            (
                u32::try_from(l.line()).unwrap_or(u32::MAX),
                u32::try_from(l.column()).unwrap_or(u32::MAX),
            )
        });
        let message = if budget.get() == 0 {
            format!("YAML expands to more than {NODE_BUDGET} nodes (an alias bomb?)")
        } else {
            e.to_string()
        };
        YamlError { message, location }
    })
}

/// The offset where bracket nesting first exceeds [`MAX_FLOW_DEPTH`].
/// Quotes are ignored on purpose: a quoted bracket only makes this stricter,
/// while honouring quotes would let a stray `'` hide a deep tail.
fn too_deep(yaml: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, b) in yaml.bytes().enumerate() {
        match b {
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_FLOW_DEPTH {
                    return Some(i);
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// 1-based line and column of a byte offset.
fn line_col(text: &str, offset: usize) -> (u32, u32) {
    let before = &text[..offset.min(text.len())];
    let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (
        u32::try_from(line).unwrap_or(u32::MAX),
        u32::try_from(column).unwrap_or(u32::MAX),
    )
}

/// A seed that builds a JSON value while spending one unit of budget per node.
#[derive(Clone, Copy)]
struct Bounded<'b> {
    budget: &'b Cell<usize>,
}

impl Bounded<'_> {
    fn spend<E: de::Error>(self) -> Result<(), E> {
        match self.budget.get().checked_sub(1) {
            Some(left) => {
                self.budget.set(left);
                Ok(())
            }
            None => Err(E::custom("node budget exhausted")),
        }
    }
}

impl<'de> DeserializeSeed<'de> for Bounded<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Bounded<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a YAML value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        self.spend()?;
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        self.spend()?;
        Ok(Value::from(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        self.spend()?;
        Ok(Value::from(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        self.spend()?;
        // JSON has no NaN or infinity; YAML's `.nan`/`.inf` become strings.
        Ok(serde_json::Number::from_f64(v).map_or_else(|| Value::String(v.to_string()), Value::Number))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        self.spend()?;
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        self.spend()?;
        Ok(Value::String(v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        self.spend()?;
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        self.visit_unit()
    }

    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        self.deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.spend()?;
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.spend()?;
        let mut out = Map::new();
        while let Some(key) = map.next_key_seed(self)? {
            let key = match key {
                Value::String(s) => s,
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                Value::Null => "null".to_owned(),
                _ => return Err(de::Error::custom("mapping keys must be scalars")),
            };
            let value = map.next_value_seed(self)?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }

    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<Value, A::Error> {
        // A tagged YAML value (`!tag value`): keep the value, drop the tag.
        let (tag, variant): (String, _) = data.variant()?;
        let _ = tag;
        de::VariantAccess::newtype_variant_seed(variant, self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_frontmatter_and_body() {
        let s = split("---\nname: x\n---\n# Body\n").unwrap();
        assert_eq!(s.yaml, Some("name: x\n"));
        assert_eq!(s.yaml_offset, 4);
        assert_eq!(s.body, "# Body\n");
        assert_eq!(s.body_offset, 16);
    }

    #[test]
    fn no_fence_means_no_frontmatter() {
        let s = split("# Just a body\n---\n").unwrap();
        assert_eq!(s.yaml, None);
        assert_eq!(s.body, "# Just a body\n---\n");
    }

    #[test]
    fn crlf_bom_and_dots_close() {
        let s = split("\u{feff}---\r\na: 1\r\n...\r\nbody").unwrap();
        assert_eq!(s.yaml, Some("a: 1\r\n"));
        assert_eq!(s.body, "body");
    }

    #[test]
    fn unclosed_is_an_error() {
        assert_eq!(split("---\nname: x\n\n### t\n"), Err(Unclosed));
        assert_eq!(split("---"), Err(Unclosed));
    }

    #[test]
    fn alias_bomb_is_refused_quickly() {
        let mut yaml = String::from("a: &a [x,x,x,x,x,x,x,x,x]\n");
        for (prev, cur) in ["a", "b", "c", "d", "e", "f", "g", "h"]
            .iter()
            .zip(["b", "c", "d", "e", "f", "g", "h", "i"])
        {
            yaml.push_str(&format!(
                "{cur}: &{cur} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]\n"
            ));
        }
        let err = parse_yaml(&yaml).unwrap_err();
        assert!(
            err.message.contains("expands") || err.message.contains("limit"),
            "{}",
            err.message
        );
    }

    #[test]
    fn small_aliases_are_fine() {
        let v = parse_yaml("a: &x [1, 2]\nb: *x\n").unwrap();
        assert_eq!(v["b"], serde_json::json!([1, 2]));
    }

    #[test]
    fn deep_flow_nesting_is_refused_before_parsing() {
        let deep = format!("x: {}{}", "[".repeat(100_000), "]".repeat(100_000));
        let err = parse_yaml(&deep).unwrap_err();
        assert_eq!(err.location, Some((1, 68)));
        let ok = format!("x: {}{}", "[".repeat(MAX_FLOW_DEPTH), "]".repeat(MAX_FLOW_DEPTH));
        assert!(parse_yaml(&ok).is_ok());
    }

    #[test]
    fn yaml_errors_carry_a_location() {
        let err = parse_yaml("name: x\ndescription: [unclosed\n").unwrap_err();
        assert!(err.location.is_some());
    }
}
