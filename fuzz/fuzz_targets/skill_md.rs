//! Fuzzes the SKILL.md parser: the input is the bytes of a `SKILL.md`.
//!
//! Each iteration writes the input into one skill directory (created once,
//! inside a temporary directory) and loads it with `load_skill`; when the
//! input is UTF-8 it also drives the pure parsers directly — frontmatter
//! splitting, bounded YAML, tool blocks and command templates (parse and
//! render) — and checks the invariants a caller relies on.

#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};
use skilld::skill::frontmatter;
use skilld::skill::{LoadOptions, PathCache, Runtimes};
use skilld::skill::markdown;
use skilld::skill::template::CommandTemplate;
use skilld::skill::{Trust, load_skill};
use std::path::PathBuf;
use std::sync::OnceLock;

/// The temporary directory (kept for the life of the process) and the skill
/// directory inside it. A `scripts/` file lets the scripts dialect and
/// `./`/`scripts/` program resolution be reached.
fn skill_dir() -> &'static (tempfile::TempDir, PathBuf) {
    static DIR: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    DIR.get_or_init(|| {
        let tmp = tempfile::Builder::new()
            .prefix("skilld-fuzz-")
            .tempdir()
            .expect("temp dir");
        let dir = tmp.path().join("fuzz-skill");
        std::fs::create_dir_all(dir.join("scripts")).expect("skill dir");
        std::fs::write(dir.join("scripts/hello.sh"), "#!/bin/sh\necho hello\n").expect("script");
        (tmp, dir)
    })
}

fn runtimes() -> &'static Runtimes {
    static RUNTIMES: OnceLock<Runtimes> = OnceLock::new();
    RUNTIMES.get_or_init(Runtimes::default)
}

fn load(data: &[u8]) {
    let (_, dir) = skill_dir();
    std::fs::write(dir.join("SKILL.md"), data).expect("write SKILL.md");
    // A fresh cache per input, so that lookups do not pile up across runs.
    let path = PathCache::new(Some("/usr/bin:/bin".into()));
    let opts = LoadOptions {
        source: "fuzz",
        trust: Trust::Untrusted,
        max_timeout_secs: 600,
        runtimes: runtimes(),
        installed: false,
        path: &path,
        launcher: None,
    };
    let loaded = load_skill(dir, &opts);
    if let Some(skill) = &loaded.skill {
        assert!(
            !loaded.diagnostics.iter().any(|d| d.is_error()),
            "a loaded skill has no errors"
        );
        assert_eq!(skill.name, "fuzz-skill");
    }
}

/// Renders a template with every placeholder set to a string, then to a
/// boolean, then absent; only checks that nothing panics.
fn render(t: &CommandTemplate) {
    let names: Vec<String> = t.placeholders().map(str::to_owned).collect();
    let mut strings = Map::new();
    let mut bools = Map::new();
    for (i, n) in names.iter().enumerate() {
        strings.insert(n.clone(), Value::String(format!("v{i} {{{{{n}}}}}")));
        bools.insert(n.clone(), Value::Bool(i % 2 == 0));
    }
    let _ = t.render(&strings);
    let _ = t.render(&bools);
    let _ = t.render(&Map::new());
}

fn parse_text(text: &str) {
    match frontmatter::split(text) {
        Ok(s) => {
            if let Some(yaml) = s.yaml {
                assert_eq!(
                    text.get(s.yaml_offset..s.yaml_offset + yaml.len()),
                    Some(yaml),
                    "yaml_offset"
                );
                let _ = frontmatter::parse_yaml(yaml);
            }
            assert_eq!(text.get(s.body_offset..), Some(s.body), "body_offset");
            for block in markdown::tool_blocks(s.body) {
                assert!(s.body.is_char_boundary(block.name_offset.min(s.body.len())));
                for (code, _) in &block.commands {
                    if let Ok(t) = CommandTemplate::parse(code) {
                        render(&t);
                    }
                }
            }
        }
        Err(frontmatter::Unclosed) => {
            // The loader reports it; the body parsers still must not panic.
            let _ = markdown::tool_blocks(text);
        }
    }
    if let Ok(t) = CommandTemplate::parse(text) {
        render(&t);
    }
}

fuzz_target!(|data: &[u8]| {
    load(data);
    if let Ok(text) = std::str::from_utf8(data) {
        parse_text(text);
    }
});
