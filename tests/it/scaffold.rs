//! `skilld new`: every dialect's template passes `skilld check` without a
//! finding and its tool runs; a bad name or a taken directory is refused
//! and changes nothing.

use crate::common::{assert_exit, skilld};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Output;

/// `skilld new NAME --dialect DIALECT --dir PARENT`.
fn new(parent: &Path, name: &str, dialect: &str) -> Output {
    skilld()
        .args(["new", "--dialect", dialect, "--dir"])
        .arg(parent)
        .args(["--", name])
        .output()
        .unwrap()
}

/// `skilld check --format json DIR`, as JSON.
fn check(dir: &Path) -> Value {
    let out = skilld()
        .args(["check", "--format", "json"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `skilld run` of `tool` over the skills of `parent`: its envelope.
fn run(parent: &Path, data: &Path, tool: &str, args: &Value) -> Value {
    let out = skilld()
        .args(["run", "--skills"])
        .arg(parent)
        .arg("--data-dir")
        .arg(data)
        .arg("--workspace")
        .arg(parent)
        .args([tool, "--args", &args.to_string()])
        .output()
        .unwrap();
    let envelope: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{tool}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(out.status.code(), Some(0), "{tool}: {envelope}");
    envelope
}

/// The names of the entries of `dir`, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// `skilld test DIR` passes: the template's examples hold as written.
fn examples_pass(dir: &Path, tmp: &Path, dialect: &str) {
    let out = skilld().arg("test").arg(dir).env("TMPDIR", tmp).output().unwrap();
    let printed = String::from_utf8_lossy(&out.stdout);
    assert_exit(&out, 0, &format!("{dialect}: {printed}"));
}

#[test]
fn every_dialect_checks_clean_and_runs() {
    let parent = crate::common::tempdir().unwrap();
    let data = crate::common::tempdir().unwrap();
    let clean = json!({"skills": 1, "errors": 0, "warnings": 0, "diagnostics": []});
    // (dialect, skill, tool, arguments, the envelope's output)
    let cases = [
        (
            "markdown",
            "greet-md",
            Some("greet_md"),
            json!({"name": "Ada"}),
            "Hello, Ada!\n",
        ),
        (
            "entrypoint",
            "greet-entry",
            Some("greet_entry"),
            json!({"name": "Ada"}),
            "Hello, Ada!\n",
        ),
        (
            "scripts",
            "greet-scripts",
            Some("greet_scripts_greet"),
            json!({"args": ["Ada", "Grace"]}),
            "Hello, Ada!\nHello, Grace!\n",
        ),
        ("prompt", "greet-prompt", None, json!({}), ""),
        (
            "manifest",
            "greet-manifest",
            Some("greet_manifest"),
            json!({"name": "Ada"}),
            "Hello, Ada!",
        ),
    ];
    for (dialect, name, _, _, _) in &cases {
        let out = new(parent.path(), name, dialect);
        assert_exit(&out, 0, &format!("{dialect}: "));
        let made = parent.path().join(name);
        assert_eq!(
            String::from_utf8(out.stdout).unwrap(),
            format!("{}\n", made.display())
        );
        assert_eq!(check(&made), clean, "{dialect}");
        examples_pass(&made, data.path(), dialect);
    }
    // Together too: five skills, no finding between them.
    let all = check(parent.path());
    assert_eq!(
        all,
        json!({"skills": 5, "errors": 0, "warnings": 0, "diagnostics": []})
    );
    let mut names: Vec<&str> = cases.iter().map(|c| c.1).collect();
    names.sort_unstable();
    assert_eq!(
        entries(parent.path()),
        names,
        "nothing staged is left beside them"
    );

    for (dialect, _, tool, args, output) in &cases {
        let Some(tool) = tool else { continue };
        let envelope = run(parent.path(), data.path(), tool, args);
        assert_eq!(envelope["success"], true, "{dialect}: {envelope}");
        assert_eq!(envelope["output"], *output, "{dialect}: {envelope}");
        if *dialect == "entrypoint" {
            assert_eq!(envelope["parsed"], json!({"greeting": "Hello, Ada!"}));
        }
    }
    // The markdown template's optional parameter and its default.
    let envelope = run(
        parent.path(),
        data.path(),
        "greet_md",
        &json!({"name": "Ada", "greeting": "Hi"}),
    );
    assert_eq!(envelope["output"], "Hi, Ada!\n");
}

#[test]
fn markdown_in_the_current_directory_by_default() {
    let parent = crate::common::tempdir().unwrap();
    let out = skilld()
        .args(["new", "notes"])
        .current_dir(parent.path())
        .output()
        .unwrap();
    assert_exit(&out, 0, "");
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "./notes\n");
    assert_eq!(entries(&parent.path().join("notes")), ["SKILL.md"]);
    let text = std::fs::read_to_string(parent.path().join("notes/SKILL.md")).unwrap();
    assert!(
        text.contains("### notes\n") && text.contains("#### Command"),
        "{text}"
    );
}

#[test]
fn bad_names_are_refused_and_write_nothing() {
    let parent = crate::common::tempdir().unwrap();
    for bad in ["Greet", "greet--me", "-greet", "greet_me", "../escape", ""] {
        let out = new(parent.path(), bad, "markdown");
        assert_eq!(out.status.code(), Some(1), "{bad:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("is not a valid skill name"), "{bad:?}: {stderr}");
        assert!(out.stdout.is_empty());
    }
    assert!(entries(parent.path()).is_empty());
    assert!(!parent.path().parent().unwrap().join("escape").exists());
}

#[test]
fn an_existing_directory_is_refused_and_left_as_it_was() {
    let parent = crate::common::tempdir().unwrap();
    let taken = parent.path().join("taken");
    std::fs::create_dir(&taken).unwrap();
    std::fs::write(taken.join("SKILL.md"), "mine\n").unwrap();
    let empty = parent.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    for (name, dialect) in [("taken", "markdown"), ("taken", "manifest"), ("empty", "scripts")] {
        let out = new(parent.path(), name, dialect);
        assert_eq!(out.status.code(), Some(1), "{name} {dialect}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("already exists"));
        assert!(out.stdout.is_empty());
    }
    assert_eq!(entries(&taken), ["SKILL.md"]);
    assert_eq!(std::fs::read_to_string(taken.join("SKILL.md")).unwrap(), "mine\n");
    assert!(entries(&empty).is_empty());
    assert_eq!(entries(parent.path()), ["empty", "taken"]);
}

#[test]
fn a_missing_parent_cannot_be_written() {
    let parent = crate::common::tempdir().unwrap();
    let missing = parent.path().join("not-here");
    let out = new(&missing, "greet", "prompt");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot write"));
    assert!(!missing.exists());
}
