//! Hostile definition files: each answers with its code, without a panic,
//! a hang or unbounded memory.

use skilld::skill::{Code, Loaded, Trust};
use skilld::skill::{LoadOptions, PathCache, Runtimes, load_skill};
use std::path::Path;

fn load_text(dir: &Path, name: &str, text: impl AsRef<[u8]>) -> Loaded {
    let skill = dir.join(name);
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(skill.join("SKILL.md"), text).unwrap();
    let runtimes = Runtimes::default();
    let path = PathCache::new(std::env::var_os("PATH"));
    load_skill(
        &skill,
        &LoadOptions {
            source: "test",
            trust: Trust::User,
            max_timeout_secs: 600,
            runtimes: &runtimes,
            installed: false,
            path: &path,
            launcher: None,
            rules: &Default::default(),
        },
    )
}

fn codes(l: &Loaded) -> Vec<Code> {
    l.diagnostics.iter().map(|d| d.code).collect()
}

#[test]
fn a_wide_deep_alias_bomb_is_refused() {
    let dir = crate::common::tempdir().unwrap();
    // 30 levels of 30 aliases each: 30^30 nodes if expanded.
    let mut yaml = String::from(
        "l0: &l0 [x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x]\n",
    );
    for i in 1..30 {
        let refs = vec![format!("*l{}", i - 1); 30].join(", ");
        yaml.push_str(&format!("l{i}: &l{i} [{refs}]\n"));
    }
    let l = load_text(
        dir.path(),
        "bomb",
        format!("---\nname: bomb\n{yaml}---\n# Bomb\n"),
    );
    assert!(l.skill.is_none());
    assert_eq!(codes(&l), [Code::InvalidYaml]);
}

#[test]
fn one_anchor_aliased_many_times_is_refused() {
    // Many aliases of one large anchor: the YAML crate's own jump limit
    // scales with the document, the node budget does not.
    let dir = crate::common::tempdir().unwrap();
    let big = vec!["x"; 5000].join(", ");
    let refs = vec!["*a"; 5000].join(", ");
    let l = load_text(
        dir.path(),
        "wide",
        format!("---\nname: wide\na: &a [{big}]\nb: [{refs}]\n---\n"),
    );
    assert_eq!(codes(&l), [Code::InvalidYaml]);
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let dir = crate::common::tempdir().unwrap();
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let l = load_text(dir.path(), "deep", format!("---\nname: deep\nx: {deep}\n---\n"));
    assert_eq!(codes(&l), [Code::InvalidYaml]);
    let quotes = format!("{}\n", ">".repeat(100_000));
    let l = load_text(
        dir.path(),
        "quotes",
        format!("---\nname: quotes\ndescription: d\n---\n{quotes}"),
    );
    assert!(l.skill.is_some(), "{:?}", l.diagnostics);
    let lists = "- ".repeat(50_000);
    let l = load_text(dir.path(), "lists", format!("{lists}x\n"));
    assert!(l.skill.is_some());
}

#[test]
fn oversize_definitions_are_not_parsed() {
    let dir = crate::common::tempdir().unwrap();
    let limit = skilld::skill::MAX_DEFINITION_BYTES as usize;
    let head = "---\nname: big\nversion: 1.0.0\ndescription: Big.\n---\n";
    let mut text = head.to_owned();
    text.push_str(&"a".repeat(limit + 1 - head.len()));
    let l = load_text(dir.path(), "big", &text);
    assert_eq!(codes(&l), [Code::TooLarge]);
    text.pop();
    let l = load_text(dir.path(), "big", &text);
    assert!(
        l.skill.is_some(),
        "exactly 1 MiB is still read: {:?}",
        l.diagnostics
    );
}

#[test]
fn unclosed_frontmatter_invalid_utf8_and_empty_files() {
    let dir = crate::common::tempdir().unwrap();
    let l = load_text(
        dir.path(),
        "open",
        format!("---\n{}", "name: open\n".repeat(10_000)),
    );
    assert_eq!(codes(&l), [Code::InvalidFrontmatter]);
    let l = load_text(dir.path(), "bytes", b"---\nname: \xff\xfe\n---\n");
    assert_eq!(codes(&l), [Code::InvalidEncoding]);
    let l = load_text(dir.path(), "empty", "");
    assert!(
        l.skill.is_some(),
        "an empty SKILL.md is a prompt skill with no instructions"
    );
    let l = load_text(dir.path(), "list", "---\n- a\n- b\n---\n");
    assert_eq!(codes(&l), [Code::InvalidFrontmatter]);
}

#[test]
fn many_tool_blocks_and_huge_tables_load() {
    let dir = crate::common::tempdir().unwrap();
    let mut text = String::from("---\nname: many\nversion: 1.0.0\ndescription: Many tools.\n---\n");
    for i in 0..2000 {
        text.push_str(&format!("### t{i}\n\nTool {i}.\n\n#### Parameters\n\n| Name | Type | Required | Description |\n|---|---|---|---|\n| a | string | yes | A |\n\n#### Command\n\n```\necho {{{{a}}}}\n```\n\n"));
    }
    let l = load_text(dir.path(), "many", &text);
    assert_eq!(l.skill.map(|s| s.tools.len()), Some(2000));
}
