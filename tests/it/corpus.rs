//! The corpus (`tests/corpus`) holds: every entry of `expected.json` loads
//! or not, with its dialect, tools and diagnostic codes; manifests' process
//! backends are started to list their tools.

use crate::common::{corpus_catalog, corpus_dir};
use serde_json::Value;
use skilld::catalog::AgentTools;
use skilld::skill::{Code, Severity};
use std::collections::BTreeSet;

/// Corpus entries this test leaves out (none: every backend is built).
const MANIFEST: [&str; 0] = [];

/// A warning that the corpus itself causes when its roots load together:
/// `say_hi` is defined by both warn skills, which `docs/design.md` §2 reports.
const CROSS_SKILL: Code = Code::AmbiguousToolName;

fn codes_of(catalog: &skilld::catalog::Catalog, skill: &str, severity: Severity) -> BTreeSet<String> {
    catalog
        .diagnostics
        .iter()
        .filter(|d| d.skill.as_deref() == Some(skill) && d.severity == severity)
        .map(|d| d.code.as_str().to_owned())
        .collect()
}

fn strings(v: &Value) -> BTreeSet<String> {
    v.as_array()
        .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

/// What [`corpus_matches_expected`] checks of a loaded skill's shape: its
/// dialect, tools and warnings; each mismatch added to `failures`.
fn check_shape(
    catalog: &skilld::catalog::Catalog,
    name: &str,
    skill: &skilld::skill::Skill,
    want: &Value,
    want_codes: &BTreeSet<String>,
    failures: &mut Vec<String>,
) {
    let dialect = serde_json::to_value(skill.dialect).unwrap();
    if dialect != want["dialect"] {
        failures.push(format!("{name}: dialect {dialect}, expected {}", want["dialect"]));
    }
    let tools: BTreeSet<String> = skill.tools.iter().map(|t| t.name.clone()).collect();
    if tools != strings(&want["tools"]) {
        failures.push(format!(
            "{name}: tools {tools:?}, expected {:?}",
            strings(&want["tools"])
        ));
    }
    let warnings = codes_of(catalog, name, Severity::Warning);
    let mut unexpected = warnings.clone();
    unexpected.retain(|c| !want_codes.contains(c) && c != CROSS_SKILL.as_str());
    if !want_codes.is_subset(&warnings) || !unexpected.is_empty() {
        failures.push(format!(
            "{name}: warning codes {warnings:?}, expected {want_codes:?}"
        ));
    }
    let skill_warnings: BTreeSet<String> = skill
        .warnings
        .iter()
        .map(|d| d.code.as_str().to_owned())
        .collect();
    if skill_warnings != warnings {
        failures.push(format!(
            "{name}: the skill's own warnings {skill_warnings:?} differ from the catalog's {warnings:?}"
        ));
    }
}

#[test]
fn corpus_matches_expected() {
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(corpus_dir().join("expected.json")).unwrap()).unwrap();
    let catalog = corpus_catalog();
    let policy = AgentTools::stated(strings(&expected["agent_tools"]));
    let mut checked = 0;
    let mut failures = Vec::new();
    for (name, want) in expected["skills"].as_object().unwrap() {
        if MANIFEST.contains(&name.as_str()) {
            continue;
        }
        checked += 1;
        let loads = want["loads"].as_bool().unwrap();
        let want_codes = strings(&want["codes"]);
        let skill = catalog.skill(name);
        if !loads {
            if skill.is_some() {
                failures.push(format!("{name}: loaded, but must be excluded"));
            }
            let errors = codes_of(&catalog, name, Severity::Error);
            if errors != want_codes {
                failures.push(format!("{name}: error codes {errors:?}, expected {want_codes:?}"));
            }
            continue;
        }
        let Some(skill) = skill else {
            let errors: Vec<String> = catalog
                .diagnostics
                .iter()
                .filter(|d| d.skill.as_deref() == Some(name))
                .map(ToString::to_string)
                .collect();
            failures.push(format!("{name}: not loaded: {errors:#?}"));
            continue;
        };
        check_shape(&catalog, name, skill, want, &want_codes, &mut failures);
        if let Some(command) = want.get("command") {
            if skill.command.as_deref() != command.as_str() {
                failures.push(format!("{name}: command {:?}, expected {command}", skill.command));
            }
            if catalog
                .command(command.as_str().unwrap())
                .map(|c| &catalog.skills[c.skill].name)
                != Some(name)
            {
                failures.push(format!("{name}: command {command} is not in the command index"));
            }
        }
        let missing = catalog.exclusion(skill, &policy).map(|why| why.missing);
        let want_missing = want
            .get("missing_under_policy")
            .map(|m| strings(m).into_iter().collect());
        if missing != want_missing {
            failures.push(format!(
                "{name}: under the corpus's agent_tools, missing {missing:?}, expected {want_missing:?}"
            ));
        }
        if let Some(tool) = want.get("command_tool")
            && skill.command_tool.as_deref() != tool.as_str()
        {
            failures.push(format!(
                "{name}: command_tool {:?}, expected {tool}",
                skill.command_tool
            ));
        }
    }
    assert!(failures.is_empty(), "corpus mismatches:\n{}", failures.join("\n"));
    assert_eq!(checked, 41, "the corpus changed; review this test");
}

#[test]
fn every_diagnostic_names_a_file_and_an_actionable_message() {
    let catalog = corpus_catalog();
    for d in &catalog.diagnostics {
        assert!(!d.path.is_empty(), "{d:?}");
        assert!(d.message.len() > 10, "{d:?}");
        let line = d.to_string();
        assert!(line.starts_with(&d.path), "{line}");
        assert!(line.contains(&format!("[{}]", d.code)), "{line}");
    }
}

#[test]
fn positions_point_at_the_offending_line() {
    let catalog = corpus_catalog();
    let at = |skill: &str, code: Code| {
        catalog
            .diagnostics
            .iter()
            .find(|d| d.skill.as_deref() == Some(skill) && d.code == code)
            .map(|d| (d.line, d.column))
            .unwrap_or_else(|| panic!("{skill} has no {code}"))
    };
    // `version: "1.0"` is line 3; the bad `### Say-Hi` heading line 7,
    // its text at column 5; `{{surname}}` at line 20.
    assert_eq!(at("bad-version", Code::InvalidVersion), (Some(3), Some(1)));
    assert_eq!(at("bad-tool-name", Code::InvalidToolName), (Some(7), Some(5)));
    assert_eq!(
        at("unknown-placeholder", Code::UnknownParameter),
        (Some(20), Some(21))
    );
    assert_eq!(
        at("unclosed-frontmatter", Code::InvalidFrontmatter),
        (Some(1), Some(1))
    );
    assert_eq!(at("unknown-field", Code::UnknownField), (Some(5), Some(1)));
    // The YAML error is reported at its line in the file, not in the block.
    let (line, _) = at("bad-yaml", Code::InvalidYaml);
    assert!(matches!(line, Some(4 | 5)), "{line:?}");
}

#[test]
fn the_bundled_skills_load_cleanly() {
    let catalog = skilld::catalog::Catalog::build(
        &crate::common::options(vec![crate::common::root(
            crate::common::bundled_dir(),
            skilld::skill::Trust::Bundled,
        )]),
        None,
    );
    assert!(catalog.diagnostics.is_empty(), "{:#?}", catalog.diagnostics);
    let dialects: BTreeSet<String> = catalog
        .skills
        .iter()
        .map(|s| {
            serde_json::to_value(s.dialect)
                .unwrap()
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert!(
        dialects.len() >= 3,
        "bundled skills should show several dialects: {dialects:?}"
    );
}

/// The Agent Skills specification's fields and habits, as real skills use
/// them: `metadata` version and author, `license`, `compatibility`,
/// `allowed-tools`, `{baseDir}`, descriptions up to 1,024 characters (cut
/// between words beyond), long generated tool names, and script
/// descriptions from inline-metadata, docstring and comment headers.
#[test]
fn agent_skills_fields_are_read_as_the_specification_says() {
    let catalog = corpus_catalog();
    let skill = |name: &str| catalog.skill(name).unwrap_or_else(|| panic!("{name} loads"));
    let spec = skill("agent-spec");
    assert_eq!(spec.version.as_deref(), Some("2.1.0"));
    assert_eq!(spec.author.as_deref(), Some("example-org"));
    assert_eq!(spec.license.as_deref(), Some("Apache-2.0"));
    assert_eq!(
        spec.compatibility.as_deref(),
        Some("Needs git and network access")
    );
    assert_eq!(spec.allowed_tools, ["Read", "Grep", "Bash(git:*)"]);
    let guide = spec.dir.join("references/guide.md");
    assert!(
        spec.instructions.contains(&format!("`{}`", guide.display()))
            && !spec.instructions.contains("{baseDir}"),
        "{}",
        spec.instructions
    );

    let long = skill("long-description");
    let source = std::fs::read_to_string(long.definition.clone()).unwrap();
    assert!(
        long.description.chars().count() <= 1024,
        "{}",
        long.description.len()
    );
    assert!(
        long.description.chars().count() > 900,
        "cut near the limit, not at 256"
    );
    let next = source
        .split_once(long.description.as_str())
        .map(|(_, after)| after.chars().next())
        .unwrap();
    assert!(
        next.is_some_and(|c| c.is_whitespace() || c == ','),
        "cut between words: {next:?}"
    );

    let tool = |skill: &str, name: &str| {
        catalog
            .skill(skill)
            .unwrap()
            .tools
            .iter()
            .find(|t| t.name == name)
            .unwrap()
            .description
            .clone()
    };
    assert_eq!(
        tool("supply-chain-risk-auditor", "supply_chain_risk_auditor_collect"),
        "Collect the dependency list."
    );
    assert_eq!(
        tool("helper-scripts", "helper_scripts_run_report"),
        "Print the report, one section per line."
    );
    assert_eq!(
        tool("explicit-scripts", "explicit_scripts_test_connection"),
        "Test the connection to the server."
    );
}
