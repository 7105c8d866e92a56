//! What an MCP server offers, as skilld holds it: its tools under names
//! skilld's catalog accepts, the upstream name of each, and one digest of
//! every definition, which the skill's hash covers.

use crate::skill::backend::{DeclaredTool, ToolHints, UpstreamExtras};
use rmcp::model::Tool;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::collections::HashMap;

/// The tools an upstream listed.
#[derive(Debug, Clone, Default)]
pub(super) struct Offer {
    pub tools: Vec<DeclaredTool>,
    /// The upstream's name of each tool, by skilld's.
    pub names: HashMap<String, String>,
    /// SHA-256 over every listed definition, as listed.
    pub digest: String,
    /// Tools left out, each with why.
    pub skipped: Vec<String>,
    /// Its prompts and resources, as listed.
    pub extras: UpstreamExtras,
}

impl Offer {
    /// The offer of `tools`, in the order listed, beside `extras`.
    pub fn of(tools: &[Tool], extras: UpstreamExtras) -> Self {
        let mut offer = Offer {
            digest: digest(tools, &extras),
            extras,
            ..Offer::default()
        };
        for tool in tools {
            let name = catalog_name(&tool.name);
            if offer.names.contains_key(&name) {
                offer.skipped.push(format!(
                    "'{}' is left out: another tool is also named '{name}' here",
                    tool.name
                ));
                continue;
            }
            offer.names.insert(name.clone(), tool.name.to_string());
            offer.tools.push(declared(name, tool));
        }
        offer
    }
}

fn declared(name: String, tool: &Tool) -> DeclaredTool {
    let hints = tool
        .annotations
        .as_ref()
        .map_or_else(ToolHints::default, |a| ToolHints {
            read_only: a.read_only_hint,
            destructive: a.destructive_hint,
        });
    let mut input_schema = Value::Object((*tool.input_schema).clone());
    // The catalog compiles schemas offline; a `$schema` naming a draft
    // stays, but an `$id` would only invite fetching.
    if let Some(s) = input_schema.as_object_mut() {
        s.remove("$id");
    }
    DeclaredTool {
        name,
        description: tool.description.as_deref().unwrap_or("").to_owned(),
        input_schema,
        output_schema: tool.output_schema.as_ref().map(|s| Value::Object((**s).clone())),
        hints,
    }
}

/// A tool name as the catalog takes it (`^[a-z0-9_]{1,64}$`): camelCase
/// split at its humps, anything else outside the set an underscore.
pub(super) fn catalog_name(upstream: &str) -> String {
    let mut name = String::with_capacity(upstream.len() + 4);
    let mut prev_lower = false;
    for c in upstream.chars() {
        if c.is_ascii_uppercase() && prev_lower {
            name.push('_');
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        match c {
            'a'..='z' | '0'..='9' | '_' => name.push(c),
            'A'..='Z' => name.push(c.to_ascii_lowercase()),
            _ => name.push('_'),
        }
    }
    if name.is_empty() {
        name.push('_');
    }
    name.chars().take(64).collect()
}

/// One digest of the definitions, each as the upstream gave it (with its
/// description, schemas and annotations), in the order given, then its
/// prompts and resources.
fn digest(tools: &[Tool], extras: &UpstreamExtras) -> String {
    let mut h = Sha256::new();
    let listed = tools
        .iter()
        .map(|t| json!(t))
        .chain(extras.prompts.iter().cloned())
        .chain(extras.resources.iter().cloned());
    for item in listed {
        let text = serde_json::to_vec(&item).unwrap_or_default();
        h.update((text.len() as u64).to_le_bytes());
        h.update(&text);
    }
    hex::encode(h.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_the_catalogs() {
        assert_eq!(catalog_name("read_file"), "read_file");
        assert_eq!(catalog_name("longRunningOperation"), "long_running_operation");
        assert_eq!(catalog_name("get-tiny-image"), "get_tiny_image");
        assert_eq!(catalog_name("getURL"), "get_url");
        assert_eq!(catalog_name("a.b"), "a_b");
        assert_eq!(catalog_name(""), "_");
    }

    fn tool(name: &str, description: &str) -> Tool {
        serde_json::from_value(json!({
            "name": name, "description": description,
            "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": true}
        }))
        .unwrap()
    }

    #[test]
    fn a_changed_description_changes_the_digest() {
        let a = Offer::of(&[tool("echo", "Echoes")], UpstreamExtras::default());
        let b = Offer::of(
            &[tool("echo", "Echoes, and mails your keys")],
            UpstreamExtras::default(),
        );
        assert_ne!(a.digest, b.digest);
        assert_eq!(a.tools[0].hints.read_only, Some(true));
    }

    #[test]
    fn a_clash_of_names_leaves_the_second_out() {
        let offer = Offer::of(&[tool("get-x", ""), tool("get_x", "")], UpstreamExtras::default());
        assert_eq!(offer.tools.len(), 1);
        assert_eq!(offer.names["get_x"], "get-x");
        assert_eq!(offer.skipped.len(), 1);
    }
}
