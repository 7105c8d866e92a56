//! Reading `implementation: {backend: mcp, …}` of a manifest into an
//! [`Upstream`] (`docs/gateway.md`).

use crate::skill::diag::Code;
use crate::skill::parse::Parse;
use crate::skill::upstream::{
    EnvValue, RESERVED_PREFIX, SecretRef, SecretSource, ToolOverride, Transport, Upstream,
};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;

impl Parse<'_, '_> {
    /// The rest of `implementation` when its backend is `mcp`.
    pub(in crate::skill) fn upstream(&mut self, imp: &Map<String, Value>) -> Option<Upstream> {
        let transport = match (imp.get("command"), imp.get("url")) {
            (Some(_), Some(_)) => {
                self.upstream_error(
                    "give either 'command' (a stdio server) or 'url' (a remote one), not both",
                );
                return None;
            }
            (Some(command), None) => self.stdio(command, imp.get("env"))?,
            (None, Some(url)) => self.remote(url, imp.get("headers"))?,
            (None, None) => {
                self.upstream_error(
                    "an mcp backend needs 'command' (a stdio server) or 'url' (a remote one)",
                );
                return None;
            }
        };
        let overrides = self.overrides(imp.get("tools"))?;
        Some(Upstream { transport, overrides })
    }

    fn upstream_error(&mut self, msg: impl Into<String>) {
        let pos = self.key_pos("implementation");
        self.error(Code::InvalidField, pos, msg);
    }

    fn stdio(&mut self, command: &Value, env: Option<&Value>) -> Option<Transport> {
        let command: Option<Vec<String>> = match command {
            Value::Array(items) => items.iter().map(|i| i.as_str().map(str::to_owned)).collect(),
            _ => None,
        };
        let Some(command) = command.filter(|c| c.first().is_some_and(|p| !p.is_empty())) else {
            self.upstream_error(
                "implementation.command must be a list: the program, then its arguments (no shell)",
            );
            return None;
        };
        let mut values = Vec::new();
        for (name, value) in self.mapping(env, "env")? {
            let value = match value {
                Value::String(s) => EnvValue::Literal(s.clone()),
                other => EnvValue::Secret(self.reference(&format!("env.{name}"), other)?),
            };
            values.push((name.clone(), value));
        }
        Some(Transport::Stdio { command, env: values })
    }

    fn remote(&mut self, url: &Value, headers: Option<&Value>) -> Option<Transport> {
        let url = url.as_str().unwrap_or_default();
        if !(url.starts_with("http://") || url.starts_with("https://")) || url.parse::<hyper::Uri>().is_err()
        {
            self.upstream_error(format!(
                "implementation.url must be an http:// or https:// URL of a Streamable HTTP server, not '{url}'"
            ));
            return None;
        }
        let mut values = Vec::new();
        for (name, value) in self.mapping(headers, "headers")? {
            if hyper::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
                self.upstream_error(format!("'{name}' is not a header name"));
                return None;
            }
            values.push((name.clone(), self.reference(&format!("headers.{name}"), value)?));
        }
        Some(Transport::Remote {
            url: url.to_owned(),
            headers: values,
        })
    }

    /// `env` or `headers`: a mapping, or nothing.
    fn mapping<'v>(&mut self, value: Option<&'v Value>, key: &str) -> Option<Vec<(&'v String, &'v Value)>> {
        match value {
            None | Some(Value::Null) => Some(Vec::new()),
            Some(Value::Object(m)) => Some(m.iter().collect()),
            Some(_) => {
                self.upstream_error(format!(
                    "implementation.{key} must be a mapping of names to values"
                ));
                None
            }
        }
    }

    /// `{env: NAME}` or `{file: PATH}`, with an optional `prefix`. A plain
    /// string where a credential goes is refused: it would sit in the
    /// manifest, readable by anyone who can read the skill.
    fn reference(&mut self, what: &str, value: &Value) -> Option<SecretRef> {
        let Value::Object(m) = value else {
            self.upstream_error(format!(
                "implementation.{what} must be a reference, {{env: NAME}} or {{file: PATH}}: \
                 credentials are never written in a manifest"
            ));
            return None;
        };
        let prefix = m.get("prefix").and_then(Value::as_str).unwrap_or("").to_owned();
        let source = match (
            m.get("env").and_then(Value::as_str),
            m.get("file").and_then(Value::as_str),
        ) {
            (Some(name), None) if !name.is_empty() => {
                if name.starts_with(RESERVED_PREFIX) {
                    self.upstream_error(format!(
                        "implementation.{what} names {name}: skilld's own {RESERVED_PREFIX}* variables are never handed on"
                    ));
                    return None;
                }
                SecretSource::Env(name.to_owned())
            }
            (None, Some(path)) if path.starts_with('/') => SecretSource::File(PathBuf::from(path)),
            _ => {
                self.upstream_error(format!(
                    "implementation.{what} must be {{env: NAME}} or {{file: /absolute/path}}, with an optional prefix"
                ));
                return None;
            }
        };
        Some(SecretRef { source, prefix })
    }

    /// `implementation.tools`: `{NAME: {read_only, always_ask}}`.
    fn overrides(&mut self, value: Option<&Value>) -> Option<BTreeMap<String, ToolOverride>> {
        let mut overrides = BTreeMap::new();
        for (name, rule) in self.mapping(value, "tools")? {
            let flag = |key: &str| rule.get(key).and_then(Value::as_bool);
            let known = rule
                .as_object()
                .is_some_and(|r| r.keys().all(|k| k == "read_only" || k == "always_ask"));
            if !known
                || rule
                    .as_object()
                    .is_some_and(|r| r.values().any(|v| !v.is_boolean()))
            {
                self.upstream_error(format!(
                    "implementation.tools.{name} must be a mapping of read_only and always_ask to true or false"
                ));
                return None;
            }
            overrides.insert(
                name.clone(),
                ToolOverride {
                    read_only: flag("read_only"),
                    always_ask: flag("always_ask"),
                },
            );
        }
        Some(overrides)
    }
}
