//! The state every step of a load reports through: where things are in the
//! definition file, and the diagnostics found so far.

use super::diag::{Code, Diagnostic, LineIndex, Pos};
use super::model::Dialect;
use serde_json::Value;

/// Parsing state for one definition file: where things are, and findings.
pub(super) struct Parse<'t, 'd> {
    path: String,
    pub(super) index: LineIndex<'t>,
    /// The frontmatter's YAML text (empty until it is read, or without one).
    pub(super) yaml: &'t str,
    pub(super) yaml_offset: usize,
    diags: &'d mut Vec<Diagnostic>,
}

impl<'t, 'd> Parse<'t, 'd> {
    pub(super) fn new(path: String, text: &'t str, diags: &'d mut Vec<Diagnostic>) -> Self {
        Self {
            path,
            index: LineIndex::new(text),
            yaml: "",
            yaml_offset: 0,
            diags,
        }
    }

    /// Whether a finding with `code` has been made so far.
    pub(super) fn has_code(&self, code: Code) -> bool {
        self.diags.iter().any(|d| d.code == code)
    }

    /// Whether an error has been found so far.
    pub(super) fn has_errors(&self) -> bool {
        self.diags.iter().any(Diagnostic::is_error)
    }

    pub(super) fn error(&mut self, code: Code, pos: Option<Pos>, msg: impl Into<String>) {
        self.diags.push(Diagnostic::error(code, &self.path, msg).at(pos));
    }

    /// An error about another file of the skill than the definition.
    pub(super) fn error_in(&mut self, code: Code, path: &str, msg: impl Into<String>) {
        self.diags.push(Diagnostic::error(code, path, msg));
    }

    /// A warning about another file of the skill than the definition.
    pub(super) fn warn_in(&mut self, code: Code, path: &str, msg: impl Into<String>) {
        self.diags.push(Diagnostic::warning(code, path, msg));
    }

    pub(super) fn warn(&mut self, code: Code, pos: Option<Pos>, msg: impl Into<String>) {
        self.diags
            .push(Diagnostic::warning(code, &self.path, msg).at(pos));
    }

    /// A field the dialect needs is absent: placed at the top of the file
    /// when there is frontmatter to add it to.
    pub(super) fn missing(&mut self, field: &str, dialect: Dialect) {
        let kind = match dialect {
            Dialect::Markdown => "a skill with tool blocks",
            Dialect::Entrypoint => "an entrypoint skill",
            Dialect::Scripts => "a scripts skill",
            Dialect::Manifest => "a manifest",
            _ => "this skill",
        };
        let pos = (!self.yaml.is_empty() || self.yaml_offset > 0).then_some(Pos { line: 1, column: 1 });
        let holder = if dialect == Dialect::Manifest {
            "SKILL.yaml"
        } else {
            "frontmatter"
        };
        self.error(
            Code::MissingField,
            pos,
            format!("{holder} needs '{field}' for {kind}"),
        );
    }

    /// Position of a top-level `key:` in the frontmatter.
    pub(super) fn key_pos(&self, key: &str) -> Option<Pos> {
        self.key_offset(key).map(|at| self.yaml_pos(at))
    }

    /// Offset in the YAML text of a top-level `key:`.
    pub(super) fn key_offset(&self, key: &str) -> Option<usize> {
        let mut at = 0;
        for line in self.yaml.split_inclusive('\n') {
            let rest = line.strip_prefix(key).or_else(|| {
                line.strip_prefix('"')
                    .and_then(|l| l.strip_prefix(key))
                    .and_then(|l| l.strip_prefix('"'))
            });
            if rest.is_some_and(|r| r.trim_start().starts_with(':')) {
                return Some(at);
            }
            at += line.len();
        }
        None
    }

    /// Position of an offset in the YAML text.
    pub(super) fn yaml_pos(&self, at: usize) -> Pos {
        self.index.pos(self.yaml_offset + at)
    }

    /// Offset of the first `key:` (a key at any depth, block or flow
    /// style) at or after `from` in the YAML text: how nested values are
    /// placed, since the YAML reader keeps no positions.
    pub(super) fn nested_key_offset(&self, key: &str, from: usize) -> Option<usize> {
        let text = self.yaml.get(from..)?;
        let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '-');
        text.match_indices(key).find_map(|(at, _)| {
            let before = text[..at].chars().next_back();
            let after = text[at + key.len()..].trim_start_matches([' ', '"', '\'']);
            (!word(before) && after.starts_with(':')).then_some(from + at)
        })
    }

    /// Position of the first `value` in the YAML text (a tool's name, a
    /// file's), for a diagnostic about something nested.
    pub(super) fn value_pos(&self, value: &str) -> Option<Pos> {
        if value.is_empty() {
            return None;
        }
        let at = self.yaml.find(value)?;
        Some(self.index.pos(self.yaml_offset + at))
    }

    pub(super) fn invalid(&mut self, key: &str, expected: &str, got: &Value) {
        let pos = self.key_pos(key);
        self.error(
            Code::InvalidField,
            pos,
            format!("'{key}' must be {expected}, not {}", describe(got)),
        );
    }
}

/// A value's kind (and a scalar's value), for a message.
pub(super) fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!("the string '{s}'"),
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "a mapping".into(),
    }
}
