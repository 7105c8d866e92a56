//! What `skilld info` and `skilld permissions` say of a skill's egress:
//! its `always` decisions, and the `network.allow` they suggest an author
//! commit (issue 42).

use serde_json::{Value, json};

/// The list the skill's version would need to reach, without asking,
/// what people allowed it always: its own patterns, then each granted
/// `host:port` of its current hash not already covered.
pub(super) fn suggested_allow(skill: &Value, grants: &Value) -> Vec<String> {
    let mut list: Vec<String> = skill["network_allow"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p.as_str().map(str::to_owned))
        .collect();
    let hash = skill["hash"].as_str().unwrap_or_default();
    for g in grants.as_array().into_iter().flatten() {
        if g["skill_hash"].as_str() != Some(hash) {
            continue;
        }
        let (Some(host), Some(port)) = (g["host"].as_str(), g["port"].as_u64()) else {
            continue;
        };
        let pattern = format!("{host}:{port}");
        if !list.contains(&pattern) {
            list.push(pattern);
        }
    }
    list
}

/// `suggested` as the line to commit to the skill's frontmatter.
pub(super) fn allow_line(suggested: &[String]) -> Value {
    let quoted: Vec<String> = suggested.iter().map(|p| format!("\"{p}\"")).collect();
    json!(format!("network: {{allow: [{}]}}", quoted.join(", ")))
}

/// The lines of text for a skill's egress grants and the suggestion.
pub(super) fn egress_text(v: &Value) -> String {
    let Some(grants) = v["egress_grants"].as_array() else {
        return String::new();
    };
    let mut out = String::new();
    for g in grants {
        let hash: String = g["skill_hash"]
            .as_str()
            .unwrap_or_default()
            .chars()
            .take(12)
            .collect();
        out.push_str(&format!(
            "  may reach    {}:{} always ({hash}…, by {})\n",
            g["host"].as_str().unwrap_or("?"),
            g["port"],
            g["decided_by"].as_str().unwrap_or("-"),
        ));
    }
    if let Some(line) = v["suggested_network_allow"].as_str() {
        out.push_str(&format!("  suggested    {line}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_suggestion_adds_this_versions_grants_to_its_list() {
        let skill = json!({"hash": "h2", "network_allow": ["api.github.com"]});
        let grants = json!([
            {"skill_hash": "h2", "host": "uploads.github.com", "port": 443},
            {"skill_hash": "h1", "host": "old.example", "port": 443},
            {"skill_hash": "h2", "host": "uploads.github.com", "port": 443},
        ]);
        let suggested = suggested_allow(&skill, &grants);
        assert_eq!(suggested, ["api.github.com", "uploads.github.com:443"]);
        assert_eq!(
            allow_line(&suggested),
            json!("network: {allow: [\"api.github.com\", \"uploads.github.com:443\"]}")
        );
    }
}
