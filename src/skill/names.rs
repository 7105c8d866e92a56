//! What skill and tool names may be.

/// Whether a name is valid: 1–64 of `[a-z0-9]` with single `-` (or, with a
/// `name_style` warning, `_`) between them.
pub fn check_name(name: &str) -> NameCheck {
    if name.is_empty() || name.len() > 64 {
        return NameCheck::Invalid;
    }
    let mut underscore = false;
    let mut prev_sep = true;
    for c in name.chars() {
        match c {
            'a'..='z' | '0'..='9' => prev_sep = false,
            '-' | '_' if !prev_sep => {
                underscore |= c == '_';
                prev_sep = true;
            }
            _ => return NameCheck::Invalid,
        }
    }
    match (prev_sep, underscore) {
        (true, _) => NameCheck::Invalid,
        (false, true) => NameCheck::Underscore,
        (false, false) => NameCheck::Valid,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameCheck {
    Valid,
    Underscore,
    Invalid,
}

/// Tool names a `SKILL.md` tool block declares: `^[a-z0-9_]{1,32}$`
/// (seed 000's own rule).
pub fn is_tool_name(name: &str) -> bool {
    (1..=32).contains(&name.len()) && tool_name_chars(name)
}

fn tool_name_chars(name: &str) -> bool {
    name.bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// The longest name any provider takes for a tool (OpenAI, Anthropic: 64).
pub const MAX_NAME: usize = 64;

/// `name`, or when it is longer than [`MAX_NAME`], its start and a hash of
/// the whole: stable across reloads, and distinct for distinct names.
/// For names skilld makes itself (from skill and file names).
pub fn fit_name(name: String) -> String {
    use sha2::{Digest, Sha256};
    if name.len() <= MAX_NAME {
        return name;
    }
    let hash = hex::encode(&Sha256::digest(name.as_bytes())[..4]);
    let mut keep = MAX_NAME - hash.len() - 1;
    while !name.is_char_boundary(keep) {
        keep -= 1;
    }
    format!("{}_{hash}", &name[..keep])
}

/// A tool name skilld made, fitted: `^[a-z0-9_]{1,64}$`.
pub fn is_generated_tool_name(name: &str) -> bool {
    (1..=MAX_NAME).contains(&name.len()) && tool_name_chars(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(check_name("git-status"), NameCheck::Valid);
        assert_eq!(check_name("plan_compiler"), NameCheck::Underscore);
        for bad in [
            "",
            "-git",
            "git-",
            "my--tool",
            "Git_Status",
            "a_-b",
            &"a".repeat(65),
        ] {
            assert_eq!(check_name(bad), NameCheck::Invalid, "{bad}");
        }
        assert!(is_tool_name("git_status"));
        assert!(!is_tool_name("git-status"));
        assert!(!is_tool_name(&"a".repeat(33)));
    }
}
