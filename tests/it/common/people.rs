//! The people and agents of the approval tests (their tokens), and what
//! a held or finished call answers.

use serde_json::Value;
use skilld::auth::{Auth, Role, Token};
use std::path::Path;

/// A markdown skill whose one tool (named like the skill, `-` → `_`)
/// appends a line to the file `path`: the lines say how often it ran.
pub fn mark_skill(dir: &Path, name: &str, front: &str) {
    let skill = dir.join(name);
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        format!(
            "---\nname: {name}\nversion: 1.0.0\ndescription: Leaves a mark.\n{front}---\n\n### {tool}\n\n\
             Appends a line to a file.\n\n#### Parameters\n\n| Name | Type | Required | Description |\n\
             |---|---|---|---|\n| path | string | yes | The file. |\n\n#### Command\n\n\
             ```\nsh -c 'echo ran >> \"$0\"; echo marked' {{{{path}}}}\n```\n",
            tool = name.replace('-', "_")
        ),
    )
    .unwrap();
}

/// How many times the tool wrote to `path`.
pub fn marks(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |s| s.lines().count())
}

/// Asserts a 202 held for approval and returns it.
pub fn held(status: u16, body: &Value) -> Value {
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["status"], "pending_approval", "{body}");
    let approval = body["approval_id"].as_str().unwrap();
    assert_eq!(body["approval_url"], format!("/approvals/{approval}"));
    assert_eq!(
        body["run_url"],
        format!("/runs/{}", body["run_id"].as_str().unwrap())
    );
    body.clone()
}

/// Asserts the tool ran here and now (200, success).
pub fn ran(status: u16, body: &Value) {
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["success"], true, "{body}");
}

pub const AGENT: &str = "agent-secret-0123456789";

pub const BOSS: &str = "boss-secret-0123456789";

pub const CAROL: &str = "carol-secret-0123456789";

pub fn tokens() -> Auth {
    Auth::new(vec![
        Token::with_secret("agent", Role::Invoke, AGENT, "test").unwrap(),
        Token::with_secret("boss", Role::Approve, BOSS, "test").unwrap(),
        Token::with_secret("carol", Role::Approve, CAROL, "test").unwrap(),
    ])
    .unwrap()
}
