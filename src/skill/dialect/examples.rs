//! Reading a skill's `examples`, with a positioned diagnostic for each
//! one that is wrong, and checking them against the skill's tools once
//! the dialect has found them. Apart from the types ([`crate::skill::examples`]),
//! which the skill's model holds, so that the model never depends on the
//! parser.

use crate::skill::diag::Code;
use crate::skill::examples::{CallExample, Examples, Expect, TriggerExample};
use crate::skill::parse::{Parse, describe};
use serde_json::{Map, Value};

const EXAMPLE_KEYS: &[&str] = &["calls", "triggers"];
const CALL_KEYS: &[&str] = &["tool", "arguments", "expect"];
const EXPECT_KEYS: &[&str] = &[
    "success",
    "exit_code",
    "output",
    "output_contains",
    "parsed",
    "error_contains",
];
const TRIGGER_KEYS: &[&str] = &["match", "not_match"];
const CONTEXT_KEYS: &[&str] = &["message", "files", "languages", "mode"];

/// Where the reading is in the YAML text: nested values are placed by
/// searching forward from the last one found.
struct Cursor {
    at: usize,
}

impl Parse<'_, '_> {
    /// `examples`, as far as it reads; each problem an `invalid_example`.
    pub(in crate::skill) fn examples(&mut self, fm: &Map<String, Value>) -> Examples {
        let Some(value) = fm.get("examples").filter(|v| !v.is_null()) else {
            return Examples::default();
        };
        let start = self.key_offset("examples").unwrap_or(0);
        let mut cursor = Cursor { at: start };
        let Some(map) = self.example_map(value, "examples", EXAMPLE_KEYS, start) else {
            return Examples::default();
        };
        let calls = self.call_examples(map.get("calls"), &mut cursor);
        let (matches, not_matches) = self.trigger_examples(map.get("triggers"), &mut cursor);
        let examples = Examples {
            calls,
            matches,
            not_matches,
        };
        if examples.is_empty() && !self.has_example_errors() {
            self.example_error(start, "examples: lists no example; give calls or triggers");
        }
        examples
    }

    fn has_example_errors(&self) -> bool {
        self.has_code(Code::InvalidExample)
    }

    fn example_error(&mut self, at: usize, msg: impl Into<String>) {
        let pos = Some(self.yaml_pos(at));
        self.error(Code::InvalidExample, pos, msg);
    }

    /// `value` as a mapping of only `keys`, or an error at `at`.
    fn example_map<'v>(
        &mut self,
        value: &'v Value,
        what: &str,
        keys: &[&str],
        at: usize,
    ) -> Option<&'v Map<String, Value>> {
        let Value::Object(map) = value else {
            self.example_error(
                at,
                format!(
                    "{what}: must be a mapping of {}, not {}",
                    keys.join(", "),
                    describe(value)
                ),
            );
            return None;
        };
        for key in map.keys().filter(|k| !keys.contains(&k.as_str())) {
            let pos = self.nested_key_offset(key, at).unwrap_or(at);
            self.example_error(
                pos,
                format!("{what}: unknown key '{key}'; it takes {}", keys.join(", ")),
            );
        }
        Some(map)
    }

    /// The entries of the list under `what`: none (and an error) when
    /// it is not a list.
    fn example_list<'v>(&mut self, value: Option<&'v Value>, what: &str, at: usize) -> &'v [Value] {
        match value {
            None | Some(Value::Null) => &[],
            Some(Value::Array(items)) => items,
            Some(other) => {
                self.example_error(at, format!("{what}: must be a list, not {}", describe(other)));
                &[]
            }
        }
    }

    /// Where an entry begins (the first of its keys after the cursor),
    /// moving the cursor past the last of them, so that the next entry's
    /// keys are not taken for this one's.
    fn entry_offset(&self, map: &Map<String, Value>, cursor: &mut Cursor) -> usize {
        let found: Vec<usize> = map
            .keys()
            .filter_map(|k| self.nested_key_offset(k, cursor.at))
            .collect();
        let Some(start) = found.iter().copied().min() else {
            // No key to find (`- {}`): the next block list item, if any.
            let item = self.next_item_offset(cursor.at);
            if let Some(at) = item {
                cursor.at = at + 1;
            }
            return item.unwrap_or(cursor.at);
        };
        if let Some(last) = found.iter().max() {
            cursor.at = last + 1;
        }
        start
    }

    /// Offset of the `-` of the first block list item on a line after the
    /// one `from` is on.
    fn next_item_offset(&self, from: usize) -> Option<usize> {
        let rest = self.yaml.get(from..)?;
        let mut at = from + rest.find('\n')? + 1;
        for line in self.yaml.get(at..)?.split_inclusive('\n') {
            let trimmed = line.trim_start();
            if trimmed.starts_with("- ") || trimmed.trim_end() == "-" {
                return Some(at + line.len() - trimmed.len());
            }
            at += line.len();
        }
        None
    }

    fn call_examples(&mut self, value: Option<&Value>, cursor: &mut Cursor) -> Vec<CallExample> {
        let section = self.nested_key_offset("calls", cursor.at).unwrap_or(cursor.at);
        cursor.at = section;
        let items = self.example_list(value, "examples.calls", section);
        let mut calls = Vec::new();
        for (i, item) in items.iter().enumerate() {
            if let Some(call) = self.call_example(item, i, cursor) {
                calls.push(call);
            }
        }
        calls
    }

    fn call_example(&mut self, item: &Value, i: usize, cursor: &mut Cursor) -> Option<CallExample> {
        let what = format!("examples.calls[{i}]");
        let Value::Object(entry) = item else {
            self.example_error(
                cursor.at,
                format!(
                    "{what}: must be a mapping with tool, arguments and expect, not {}",
                    describe(item)
                ),
            );
            return None;
        };
        let at = self.entry_offset(entry, cursor);
        self.example_map(item, &what, CALL_KEYS, at)?;
        let tool = match entry.get("tool") {
            Some(Value::String(t)) if !t.trim().is_empty() => t.trim().to_owned(),
            None | Some(Value::Null) => {
                self.example_error(at, format!("{what}: names no tool; give 'tool'"));
                return None;
            }
            Some(other) => {
                self.example_error(
                    at,
                    format!("{what}.tool: must be a tool name, not {}", describe(other)),
                );
                return None;
            }
        };
        let arguments = match entry.get("arguments") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(args)) => args.clone(),
            Some(other) => {
                let pos = self.nested_key_offset("arguments", at).unwrap_or(at);
                self.example_error(
                    pos,
                    format!(
                        "{what}.arguments: must be a mapping of arguments, not {}",
                        describe(other)
                    ),
                );
                return None;
            }
        };
        let expect = self.expect(entry.get("expect"), &what, at)?;
        Some(CallExample {
            tool,
            arguments,
            expect,
            pos: Some(self.yaml_pos(at)),
        })
    }

    fn expect(&mut self, value: Option<&Value>, what: &str, at: usize) -> Option<Expect> {
        let Some(value) = value.filter(|v| !v.is_null()) else {
            return Some(Expect::default());
        };
        let what = format!("{what}.expect");
        let at = self.nested_key_offset("expect", at).unwrap_or(at);
        let map = self.example_map(value, &what, EXPECT_KEYS, at)?;
        let mut expect = Expect::default();
        let mut wrong: Vec<(&str, &str, &Value)> = Vec::new();
        let mut unknown = false;
        for (key, v) in map {
            match (key.as_str(), v) {
                ("success", Value::Bool(b)) => expect.success = *b,
                ("exit_code", Value::Number(n)) if n.is_i64() => expect.exit_code = n.as_i64(),
                ("output", Value::String(s)) => expect.output = Some(s.clone()),
                ("output_contains", Value::String(s)) => expect.output_contains = vec![s.clone()],
                ("output_contains", Value::Array(items)) if items.iter().all(Value::is_string) => {
                    expect.output_contains = items
                        .iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect();
                }
                ("parsed", v) => expect.parsed = Some(v.clone()),
                ("error_contains", Value::String(s)) => expect.error_contains = Some(s.clone()),
                ("success", v) => wrong.push((key, "true or false", v)),
                ("exit_code", v) => wrong.push((key, "a whole number", v)),
                ("output_contains", v) => wrong.push((key, "a string or a list of strings", v)),
                (_, v) if EXPECT_KEYS.contains(&key.as_str()) => wrong.push((key, "a string", v)),
                // An unknown key: `example_map` said so.
                _ => unknown = true,
            }
        }
        for (key, wanted, got) in &wrong {
            let pos = self.nested_key_offset(key, at).unwrap_or(at);
            self.example_error(
                pos,
                format!("{what}.{key}: must be {wanted}, not {}", describe(got)),
            );
        }
        (wrong.is_empty() && !unknown).then_some(expect)
    }

    fn trigger_examples(
        &mut self,
        value: Option<&Value>,
        cursor: &mut Cursor,
    ) -> (Vec<TriggerExample>, Vec<TriggerExample>) {
        let Some(value) = value.filter(|v| !v.is_null()) else {
            return (Vec::new(), Vec::new());
        };
        let at = self.nested_key_offset("triggers", cursor.at).unwrap_or(cursor.at);
        cursor.at = at;
        let Some(map) = self.example_map(value, "examples.triggers", TRIGGER_KEYS, at) else {
            return (Vec::new(), Vec::new());
        };
        let mut sides = [Vec::new(), Vec::new()];
        for (side, key) in sides.iter_mut().zip(TRIGGER_KEYS) {
            let what = format!("examples.triggers.{key}");
            let start = self.nested_key_offset(key, at).unwrap_or(at);
            let mut here = Cursor { at: start };
            let items = self.example_list(map.get(*key), &what, start);
            for (i, item) in items.iter().enumerate() {
                if let Some(example) = self.context_example(item, &format!("{what}[{i}]"), &mut here) {
                    side.push(example);
                }
            }
        }
        let [matches, not_matches] = sides;
        (matches, not_matches)
    }

    /// One trigger context: a mapping of [`CONTEXT_KEYS`], or a string,
    /// which is its message.
    fn context_example(&mut self, item: &Value, what: &str, cursor: &mut Cursor) -> Option<TriggerExample> {
        if let Value::String(message) = item {
            let at = self.yaml.get(cursor.at..).and_then(|t| t.find(message.as_str()));
            let at = at.map_or(cursor.at, |a| cursor.at + a);
            cursor.at = at + 1;
            return self.context_of(
                TriggerExample {
                    message: message.clone(),
                    pos: Some(self.yaml_pos(at)),
                    ..TriggerExample::default()
                },
                what,
                at,
            );
        }
        let Value::Object(entry) = item else {
            self.example_error(
                cursor.at,
                format!(
                    "{what}: must be a mapping with message or files, not {}",
                    describe(item)
                ),
            );
            return None;
        };
        let at = self.entry_offset(entry, cursor);
        self.example_map(item, what, CONTEXT_KEYS, at)?;
        let text = |p: &mut Self, key: &str| match entry.get(key) {
            None | Some(Value::Null) => Some(String::new()),
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => {
                let pos = p.nested_key_offset(key, at).unwrap_or(at);
                p.example_error(
                    pos,
                    format!("{what}.{key}: must be a string, not {}", describe(other)),
                );
                None
            }
        };
        let list = |p: &mut Self, key: &str| match entry.get(key) {
            None | Some(Value::Null) => Some(Vec::new()),
            Some(Value::String(s)) => Some(vec![s.clone()]),
            Some(Value::Array(items)) if items.iter().all(Value::is_string) => Some(
                items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect(),
            ),
            Some(other) => {
                let pos = p.nested_key_offset(key, at).unwrap_or(at);
                p.example_error(
                    pos,
                    format!("{what}.{key}: must be a list of strings, not {}", describe(other)),
                );
                None
            }
        };
        let example = TriggerExample {
            message: text(self, "message")?,
            files: list(self, "files")?,
            languages: list(self, "languages")?,
            mode: text(self, "mode")?,
            pos: Some(self.yaml_pos(at)),
        };
        self.context_of(example, what, at)
    }

    /// The example, unless it gives no context at all.
    fn context_of(&mut self, example: TriggerExample, what: &str, at: usize) -> Option<TriggerExample> {
        let empty = example.message.trim().is_empty()
            && example.files.is_empty()
            && example.languages.is_empty()
            && example.mode.trim().is_empty();
        if empty {
            self.example_error(at, format!("{what}: gives neither a message nor files"));
            return None;
        }
        Some(example)
    }

    /// Each call example names one of the skill's tools (whether its
    /// arguments fit is for the command line to say: it checks them as
    /// the invoke pipeline would, which this layer cannot reach). `unseen`
    /// says the skill's backend was not started here, so tools it would
    /// add are unknown: a name not among those seen is then a warning.
    pub(in crate::skill) fn check_example_tools(
        &mut self,
        examples: &Examples,
        known: &[&str],
        unseen: bool,
    ) {
        for (i, call) in examples.calls.iter().enumerate() {
            if known.contains(&call.tool.as_str()) {
                continue;
            }
            let have = if known.is_empty() {
                "it has none".to_owned()
            } else {
                format!("it has {}", known.join(", "))
            };
            let msg = format!(
                "examples.calls[{i}]: '{}' is not a tool of this skill; {have}",
                call.tool
            );
            if unseen {
                let msg = format!("{msg} (its backend was not started here, and may offer it)");
                self.warn(Code::UnknownExampleTool, call.pos, msg);
            } else {
                self.error(Code::UnknownExampleTool, call.pos, msg);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skill::diag::Diagnostic;
    use serde_json::json;

    /// The examples of a SKILL.yaml text, and the findings as
    /// `line:column code message`.
    fn read(yaml: &str) -> (Examples, Vec<String>) {
        let mut diags: Vec<Diagnostic> = Vec::new();
        let examples = {
            let mut p = Parse::new("SKILL.yaml".to_owned(), yaml, &mut diags);
            p.yaml = yaml;
            let Ok(Value::Object(map)) = crate::skill::frontmatter::parse_yaml(yaml) else {
                panic!("not a mapping: {yaml}");
            };
            p.examples(&map)
        };
        let found = diags
            .iter()
            .map(|d| {
                format!(
                    "{}:{} {} {}",
                    d.line.unwrap_or(0),
                    d.column.unwrap_or(0),
                    d.code,
                    d.message
                )
            })
            .collect();
        (examples, found)
    }

    #[test]
    fn calls_and_trigger_contexts_are_read() {
        let (examples, found) = read(
            "name: x\nexamples:\n  calls:\n    - tool: greet\n      arguments: {name: Ada}\n      expect:\n        output_contains: [Hello, Ada]\n        exit_code: 0\n    - tool: greet\n  triggers:\n    match:\n      - deploy it\n      - files: [k8s/a.yaml]\n        languages: rust\n    not_match:\n      - message: write a poem\n",
        );
        assert_eq!(found, Vec::<String>::new());
        assert_eq!(examples.calls.len(), 2);
        let first = &examples.calls[0];
        assert_eq!(first.tool, "greet");
        assert_eq!(Value::Object(first.arguments.clone()), json!({"name": "Ada"}));
        assert_eq!(first.expect.output_contains, ["Hello", "Ada"]);
        assert_eq!(first.expect.exit_code, Some(0));
        assert!(first.expect.success);
        assert_eq!(first.pos.map(|p| p.line), Some(4));
        assert_eq!(examples.calls[1].expect, Expect::default());
        assert_eq!(examples.calls[1].pos.map(|p| p.line), Some(9));
        assert_eq!(examples.matches[0].message, "deploy it");
        assert_eq!(examples.matches[0].pos.map(|p| p.line), Some(12));
        assert_eq!(examples.matches[1].files, ["k8s/a.yaml"]);
        assert_eq!(examples.matches[1].languages, ["rust"]);
        assert_eq!(examples.matches[1].pos.map(|p| p.line), Some(13));
        assert_eq!(examples.not_matches[0].message, "write a poem");
        assert_eq!(examples.not_matches[0].pos.map(|p| p.line), Some(16));
    }

    #[test]
    fn no_examples_key_is_no_examples() {
        let (examples, found) = read("name: x\n");
        assert!(examples.is_empty());
        assert!(found.is_empty());
    }

    #[test]
    fn each_wrong_shape_is_placed_where_it_is_written() {
        let (_, found) = read(
            "examples:\n  calls:\n    - arguments: {}\n    - tool: t\n      expect: {success: yes, outptu: 1}\n  triggers:\n    match:\n      - mode: ''\n    not_match:\n      - files: 3\n  extra: 1\n",
        );
        assert_eq!(
            found,
            [
                "11:3 invalid_example examples: unknown key 'extra'; it takes calls, triggers",
                "3:7 invalid_example examples.calls[0]: names no tool; give 'tool'",
                "5:30 invalid_example examples.calls[1].expect: unknown key 'outptu'; it takes success, exit_code, output, output_contains, parsed, error_contains",
                "5:16 invalid_example examples.calls[1].expect.success: must be true or false, not the string 'yes'",
                "8:9 invalid_example examples.triggers.match[0]: gives neither a message nor files",
                "10:9 invalid_example examples.triggers.not_match[0].files: must be a list of strings, not the number 3",
            ]
        );
    }

    #[test]
    fn examples_that_list_nothing_are_an_error() {
        let (_, found) = read("examples:\n  calls: []\n");
        assert_eq!(
            found,
            ["1:1 invalid_example examples: lists no example; give calls or triggers"]
        );
        let (_, found) = read("examples: [a]\n");
        assert_eq!(
            found,
            ["1:1 invalid_example examples: must be a mapping of calls, triggers, not a list"]
        );
    }
}
