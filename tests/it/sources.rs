//! Roots, precedence and trust (`docs/design.md` §2, "The catalog").

use crate::common::{copy_tree, corpus_dir, options, root};
use skilld::catalog::{AgentTools, Catalog, Root};
use skilld::skill::{Code, Trust};

#[test]
fn the_earlier_root_wins_and_the_loser_is_shadowed() {
    let dir = crate::common::tempdir().unwrap();
    let (first, second) = (dir.path().join("first"), dir.path().join("second"));
    copy_tree(&corpus_dir().join("valid/git"), &first.join("git"));
    copy_tree(&corpus_dir().join("valid/git"), &second.join("git"));
    copy_tree(&corpus_dir().join("valid/echo"), &second.join("echo"));
    let catalog = Catalog::build(
        &options(vec![
            root(&first, Trust::Bundled),
            root(&second, Trust::Untrusted),
        ]),
        None,
    );
    let git = catalog.skill("git").unwrap();
    assert_eq!(git.trust, Trust::Bundled);
    assert_eq!(git.dir, first.join("git"));
    assert_eq!(catalog.skill("echo").unwrap().trust, Trust::Untrusted);
    let shadowed: Vec<_> = catalog
        .diagnostics
        .iter()
        .filter(|d| d.code == Code::Shadowed)
        .collect();
    assert_eq!(shadowed.len(), 1);
    assert_eq!(shadowed[0].skill.as_deref(), Some("git"));
    assert!(shadowed[0].path.starts_with(second.to_str().unwrap()));
    assert!(!shadowed[0].is_error());
    // One git, so its tools are not ambiguous.
    assert!(
        !catalog
            .diagnostics
            .iter()
            .any(|d| d.code == Code::AmbiguousToolName)
    );
}

#[test]
fn a_broken_skill_does_not_fall_back_to_a_lower_root() {
    let dir = crate::common::tempdir().unwrap();
    let (first, second) = (dir.path().join("first"), dir.path().join("second"));
    std::fs::create_dir_all(first.join("git")).unwrap();
    std::fs::write(first.join("git/SKILL.md"), "---\nname: git\n").unwrap();
    copy_tree(&corpus_dir().join("valid/git"), &second.join("git"));
    let catalog = Catalog::build(
        &options(vec![root(&first, Trust::User), root(&second, Trust::Bundled)]),
        None,
    );
    assert!(
        catalog.skill("git").is_none(),
        "no fallback to a lower-precedence skill"
    );
    let codes: Vec<Code> = catalog.diagnostics.iter().map(|d| d.code).collect();
    assert!(
        codes.contains(&Code::InvalidFrontmatter) && codes.contains(&Code::Shadowed),
        "{codes:?}"
    );
}

#[test]
fn skills_flag_parses_trust() {
    assert_eq!(Root::parse_flag("untrusted=/x").unwrap().trust, Trust::Untrusted);
    assert_eq!(
        Root::parse_flag("bundled=/x").unwrap().path,
        std::path::PathBuf::from("/x")
    );
    let plain = Root::parse_flag("/x").unwrap();
    assert_eq!((plain.trust, plain.name.as_str()), (Trust::User, "/x"));
    // An `=` that names no trust level is part of the path.
    assert_eq!(
        Root::parse_flag("a=b").unwrap().path,
        std::env::current_dir().unwrap().join("a=b")
    );
    assert_eq!(Root::parse_flag("user=").unwrap_err().key, "skills");
}

#[test]
fn default_roots_follow_design_order() {
    let roots = skilld::catalog::default_roots(std::path::Path::new("/ws"), std::path::Path::new("/data"));
    let names: Vec<&str> = roots.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["bundled", "user", "project", "installed"]);
    let trust: Vec<Trust> = roots.iter().map(|r| r.trust).collect();
    assert_eq!(
        trust,
        [Trust::Bundled, Trust::User, Trust::User, Trust::Untrusted]
    );
    assert_eq!(roots[2].path, std::path::PathBuf::from("/ws/.agent/skills"));
    assert_eq!(roots[3].path, std::path::PathBuf::from("/data/installed"));
    assert!(
        roots[0].path.join("git/SKILL.md").is_file(),
        "the bundled root is this repository's skills/"
    );
}

#[test]
fn a_required_tool_of_an_excluded_skill_is_missing_under_a_policy() {
    // `dispatcher` is excluded for naming a missing command_tool, and with
    // it goes its tool `run_it`. `needs-plan` requires `run_it`: it loads,
    // since `requires_tools` may name the agent's own tools, but a caller
    // whose tools do not include `run_it` does not get it.
    let dir = crate::common::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("dispatcher")).unwrap();
    std::fs::write(
        dir.path().join("dispatcher/SKILL.md"),
        "---\nname: dispatcher\nversion: 1.0.0\ndescription: d\ninvocation_mode: tool_dispatch\ncommand_tool: ghost\n---\n\n### run_it\n\nRun.\n\n#### Command\n\n```\ntrue\n```\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.path().join("needs-plan")).unwrap();
    std::fs::write(
        dir.path().join("needs-plan/SKILL.md"),
        "---\ndescription: Needs the dispatcher's tool.\nrequires_tools: [run_it]\n---\n# Needs\n",
    )
    .unwrap();
    let catalog = Catalog::build(&options(vec![root(dir.path(), Trust::User)]), None);
    let names: Vec<&str> = catalog.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["needs-plan"]);
    let codes: Vec<(String, Code)> = catalog
        .diagnostics
        .iter()
        .map(|d| (d.skill.clone().unwrap(), d.code))
        .collect();
    assert_eq!(codes, [("dispatcher".to_owned(), Code::UnknownCommandTool)]);
    let needs = catalog.skill("needs-plan").unwrap();
    assert_eq!(catalog.exclusion(needs, &AgentTools::unstated()), None);
    assert_eq!(catalog.exclusion(needs, &AgentTools::parse("run_it")), None);
    let why = catalog
        .exclusion(needs, &AgentTools::parse("read,write"))
        .unwrap();
    assert_eq!(
        (why.code, why.missing),
        (Code::MissingRequiredTool, vec!["run_it".to_owned()])
    );
}

#[test]
fn two_skills_cannot_share_a_command() {
    let dir = crate::common::tempdir().unwrap();
    for name in ["aa", "bb"] {
        std::fs::create_dir_all(dir.path().join(name)).unwrap();
        std::fs::write(
            dir.path().join(name).join("SKILL.md"),
            "---\ncommand: go\n---\n# Go\n",
        )
        .unwrap();
    }
    let catalog = Catalog::build(&options(vec![root(dir.path(), Trust::User)]), None);
    assert!(catalog.skill("aa").is_some());
    assert!(catalog.skill("bb").is_none());
    let d = catalog
        .diagnostics
        .iter()
        .find(|d| d.code == Code::CommandCollision)
        .unwrap();
    assert_eq!(d.skill.as_deref(), Some("bb"));
    assert!(d.message.contains("'aa'"));
}
