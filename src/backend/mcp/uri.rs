//! The URIs an upstream's resources are served under (`docs/gateway.md`,
//! "A server's resources never take skilld's URIs"): `upstream://<skill>/<the server's URI,
//! percent-encoded>`. An upstream names its resources as it likes,
//! `skill://victim/SKILL.md` included; served under its own URIs, they
//! would speak with the authority of skilld's skills (and of other
//! gateways), so every URI a server sends, listed, read or in a tool's or
//! prompt's content, is put in its skill's namespace before it leaves the
//! backend, and only that skill's server is asked for it.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use serde_json::Value;

/// The scheme of every upstream resource skilld serves.
pub const SCHEME: &str = "upstream";

/// What is encoded: all but RFC 3986's unreserved characters, so the
/// server's URI is one path segment whatever it holds (`/`, `?`, `#`).
const ENCODED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// The URI skilld serves the resource `original` of `skill`'s server under.
pub fn served(skill: &str, original: &str) -> String {
    format!("{SCHEME}://{skill}/{}", utf8_percent_encode(original, ENCODED))
}

/// Whether `uri` lies in `skill`'s namespace.
pub fn is_of(skill: &str, uri: &str) -> bool {
    encoded_part(skill, uri).is_some()
}

/// The server's own URI of `uri`, when `uri` is one skilld gave for
/// `skill`: in its one spelling, so no second form reaches the server.
pub fn original(skill: &str, uri: &str) -> Option<String> {
    let decoded = percent_decode_str(encoded_part(skill, uri)?)
        .decode_utf8()
        .ok()?
        .into_owned();
    (served(skill, &decoded) == uri).then_some(decoded)
}

fn encoded_part<'u>(skill: &str, uri: &'u str) -> Option<&'u str> {
    uri.strip_prefix(SCHEME)?
        .strip_prefix("://")?
        .strip_prefix(skill)?
        .strip_prefix('/')
}

/// Puts the `uri` of one listed resource, or of one resource's contents,
/// in `skill`'s namespace; one without a string URI is taken as empty.
pub(super) fn rewrite_uri(skill: &str, item: &mut Value) {
    if let Some(fields) = item.as_object_mut() {
        let original = fields.get("uri").and_then(Value::as_str).unwrap_or_default();
        let uri = served(skill, original);
        fields.insert("uri".into(), uri.into());
    }
}

/// Puts the URIs of content blocks (a tool's result, a prompt's message)
/// in `skill`'s namespace: a `resource_link`'s, and an embedded
/// `resource`'s.
pub(super) fn rewrite_blocks<'v>(skill: &str, blocks: impl IntoIterator<Item = &'v mut Value>) {
    for block in blocks {
        match block.get("type").and_then(Value::as_str) {
            Some("resource_link") => rewrite_uri(skill, block),
            Some("resource") => {
                if let Some(resource) = block.get_mut("resource") {
                    rewrite_uri(skill, resource);
                }
            }
            _ => {}
        }
    }
}

/// A `resources/read` result with every content's URI in `skill`'s
/// namespace.
pub(super) fn rewrite_read(skill: &str, result: &mut Value) {
    if let Some(Value::Array(contents)) = result.get_mut("contents") {
        for content in contents {
            rewrite_uri(skill, content);
        }
    }
}

/// A `prompts/get` result with the URIs of its messages' content in
/// `skill`'s namespace (a message holds one block, or a list of them).
pub(super) fn rewrite_prompt(skill: &str, result: &mut Value) {
    let Some(Value::Array(messages)) = result.get_mut("messages") else {
        return;
    };
    for message in messages {
        match message.get_mut("content") {
            Some(Value::Array(blocks)) => rewrite_blocks(skill, blocks),
            Some(block) => rewrite_blocks(skill, [block]),
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_servers_uri_is_one_segment_of_its_skills_namespace() {
        let uri = served("notes", "skill://victim/SKILL.md?x=1#y");
        assert_eq!(
            uri,
            "upstream://notes/skill%3A%2F%2Fvictim%2FSKILL.md%3Fx%3D1%23y"
        );
        assert_eq!(
            original("notes", &uri).as_deref(),
            Some("skill://victim/SKILL.md?x=1#y")
        );
        assert!(url::Url::parse(&uri).is_ok_and(|u| u.host_str() == Some("notes")));
        assert_eq!(
            served("a", "file:///ü é"),
            "upstream://a/file%3A%2F%2F%2F%C3%BC%20%C3%A9"
        );
    }

    #[test]
    fn only_the_skills_own_spelling_maps_back() {
        let uri = served("notes", "demo://a");
        assert_eq!(original("other", &uri), None);
        assert_eq!(original("note", &uri), None);
        // Another encoding of the same URI is not one skilld gave.
        assert_eq!(original("notes", "upstream://notes/demo%3a%2f%2fa"), None);
        assert_eq!(original("notes", "upstream://notes/demo://a"), None);
        assert_eq!(original("notes", "skill://notes/demo"), None);
        assert!(is_of("notes", &uri) && !is_of("other", &uri));
    }

    #[test]
    fn every_uri_a_server_sends_is_rewritten() {
        let mut blocks = vec![
            json!({"type": "text", "text": "skill://victim/SKILL.md"}),
            json!({"type": "resource_link", "uri": "skill://victim/SKILL.md", "name": "x"}),
            json!({"type": "resource", "resource": {"uri": "upstream://other/x", "text": "t"}}),
            json!({"type": "resource_link", "name": "no uri"}),
        ];
        rewrite_blocks("evil", &mut blocks);
        assert_eq!(blocks[0]["text"], "skill://victim/SKILL.md");
        assert_eq!(
            blocks[1]["uri"],
            "upstream://evil/skill%3A%2F%2Fvictim%2FSKILL.md"
        );
        assert_eq!(
            blocks[2]["resource"]["uri"],
            "upstream://evil/upstream%3A%2F%2Fother%2Fx"
        );
        assert_eq!(blocks[3]["uri"], "upstream://evil/");

        let mut read = json!({"contents": [{"uri": "skill://victim/SKILL.md", "text": "t"}]});
        rewrite_read("evil", &mut read);
        assert_eq!(
            read["contents"][0]["uri"],
            "upstream://evil/skill%3A%2F%2Fvictim%2FSKILL.md"
        );

        let mut prompt = json!({"messages": [
            {"role": "user", "content": {"type": "resource", "resource": {"uri": "skill://v/a", "text": "t"}}},
            {"role": "user", "content": [{"type": "resource_link", "uri": "skill://v/b", "name": "b"}]},
        ]});
        rewrite_prompt("evil", &mut prompt);
        assert_eq!(
            prompt["messages"][0]["content"]["resource"]["uri"],
            "upstream://evil/skill%3A%2F%2Fv%2Fa"
        );
        assert_eq!(
            prompt["messages"][1]["content"][0]["uri"],
            "upstream://evil/skill%3A%2F%2Fv%2Fb"
        );
    }
}
