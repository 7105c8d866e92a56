//! `skilld test`: a skill's examples run, tool calls in the sandbox and
//! trigger contexts through the match engine; a failure says what it
//! got; `skilld check` places bad examples; the exit codes.

use crate::common::{assert_exit, bundled_dir, skilld, tempdir};
use serde_json::Value;
use std::path::Path;
use std::process::Output;

/// A markdown skill `greet` in `parent`, whose tool prints `Hello, NAME!`,
/// with `extra` frontmatter (its examples).
fn greet(parent: &Path, extra: &str) {
    let dir = parent.join("greet");
    std::fs::create_dir_all(&dir).unwrap();
    let text = format!(
        "---\nname: greet\nversion: 1.0.0\ndescription: Greets people. Use to say hello.\n\
         always_ask: true\ntriggers:\n  keywords: [hello]\n  files: [\"*.greeting\"]\n{extra}---\n\n\
         # Greet\n\n### greet\n\nSay hello.\n\n#### Parameters\n\n\
         | Name | Type | Required | Description |\n|---|---|---|---|\n| name | string | yes | Who |\n\n\
         #### Command\n\n```\nprintf 'Hello, %s!\\n' {{{{name}}}}\n```\n"
    );
    std::fs::write(dir.join("SKILL.md"), text).unwrap();
}

/// `skilld test ARGS… DIR`, with its temporary files under `tmp`.
fn test(dir: &Path, args: &[&str], tmp: &Path) -> Output {
    skilld()
        .arg("test")
        .args(args)
        .arg(dir)
        .env("TMPDIR", tmp)
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const PASSING: &str = "examples:
  calls:
    - tool: greet
      arguments: {name: Ada}
      expect: {output: \"Hello, Ada!\\n\", exit_code: 0}
  triggers:
    match:
      - message: please say Hello to Ada
      - files: [notes/party.greeting]
    not_match:
      - message: write a poem
      - files: [notes/party.txt]
";

#[test]
fn passing_examples_exit_zero_and_leave_nothing_behind() {
    let (skills, tmp) = (tempdir().unwrap(), tempdir().unwrap());
    greet(skills.path(), PASSING);
    let out = test(&skills.path().join("greet"), &[], tmp.path());
    assert_exit(&out, 0, "all pass: ");
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        [
            "ok   match message \"please say Hello to Ada\" (line 16): keyword trigger 'hello' fired",
            "ok   match files [notes/party.greeting] (line 17): file trigger '*.greeting' fired",
            "ok   not_match message \"write a poem\" (line 19): no trigger fired",
            "ok   not_match files [notes/party.txt] (line 20): no trigger fired",
            "ok   call greet {\"name\":\"Ada\"} (line 11)",
            "greet: 5 passed, 0 failed",
        ],
        "{text}"
    );
    // The run log and run directories were temporary; the skill's
    // directory and its parent hold only what they held.
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    let beside: Vec<_> = std::fs::read_dir(skills.path()).unwrap().collect();
    assert_eq!(beside.len(), 1, "{beside:?}");
}

#[test]
fn a_failing_call_prints_what_it_got() {
    let (skills, tmp) = (tempdir().unwrap(), tempdir().unwrap());
    let examples = "examples:
  calls:
    - tool: greet
      arguments: {name: Bob}
      expect: {output_contains: Bobby}
    - tool: greet
      arguments: {name: Ada}
";
    greet(skills.path(), examples);
    let out = test(&skills.path().join("greet"), &[], tmp.path());
    assert_exit(&out, 1, "a call fails: ");
    let text = stdout(&out);
    assert!(
        text.contains(
            "FAIL call greet {\"name\":\"Bob\"} (line 11)\n     expected output_contains: \"Bobby\"\n     \
             got success: true, exit_code: 0, output: \"Hello, Bob!\\n\"\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("ok   call greet {\"name\":\"Ada\"} (line 14)\n"),
        "{text}"
    );
    assert!(text.ends_with("greet: 1 passed, 1 failed\n"), "{text}");
}

#[test]
fn a_trigger_that_does_not_fire_says_which_would() {
    let (skills, tmp) = (tempdir().unwrap(), tempdir().unwrap());
    let examples = "examples:
  triggers:
    match:
      - message: say hi to Ada
      - files: [k8s/deployment.yaml]
    not_match:
      - files: [cards/ada.greeting]
";
    greet(skills.path(), examples);
    let out = test(&skills.path().join("greet"), &[], tmp.path());
    assert_exit(&out, 1, "triggers fail: ");
    let text = stdout(&out);
    let declared = "the skill's triggers are files [*.greeting], keywords [hello]";
    assert_eq!(
        text,
        format!(
            "FAIL match message \"say hi to Ada\" (line 12)\n     expected one of the skill's triggers to fire\n     \
             got no trigger fired; {declared}\n\
             FAIL match files [k8s/deployment.yaml] (line 13)\n     expected one of the skill's triggers to fire\n     \
             got no trigger fired; {declared}\n\
             FAIL not_match files [cards/ada.greeting] (line 15)\n     expected none of the skill's triggers to fire\n     \
             got file trigger '*.greeting' fired\n\
             greet: 0 passed, 3 failed\n"
        )
    );
    // Trigger examples alone start no pipeline: nothing was made.
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
}

/// `skilld check --format json DIR`: its exit code and its findings as
/// (code, line, column).
fn check_json(dir: &Path) -> (Option<i32>, Vec<(String, u64, u64)>, String) {
    let out = skilld()
        .args(["check", "--format", "json"])
        .arg(dir)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let found = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["code"].as_str().unwrap().to_owned(),
                d["line"].as_u64().unwrap_or(0),
                d["column"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    (out.status.code(), found, v["diagnostics"].to_string())
}

fn owned(found: &[(&str, u64, u64)]) -> Vec<(String, u64, u64)> {
    found.iter().map(|(c, l, k)| ((*c).to_owned(), *l, *k)).collect()
}

#[test]
fn check_places_bad_examples_in_skill_md() {
    let skills = tempdir().unwrap();
    let examples = "examples:
  calls:
    - tool: gret
    - tool: greet
      arguments: {nme: Ada}
    - tool: greet
      expect: {success: yes}
  triggers:
    match:
      - {}
";
    greet(skills.path(), examples);
    let dir = skills.path().join("greet");
    let (code, found, messages) = check_json(&dir);
    assert_eq!(code, Some(1), "bad examples are errors: {messages}");
    let want = [
        ("invalid_example", 15, 16),
        ("invalid_example", 18, 7),
        ("unknown_example_tool", 11, 7),
    ];
    assert_eq!(found, owned(&want), "{messages}");
    assert!(
        messages.contains("'gret' is not a tool of this skill; it has greet"),
        "{messages}"
    );

    // `skilld test` lints first: nothing runs, and it says why.
    let tmp = tempdir().unwrap();
    let out = test(&dir, &[], tmp.path());
    assert_exit(&out, 1, "does not lint: ");
    assert!(out.stdout.is_empty(), "{}", stdout(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("error[unknown_example_tool]"), "{stderr}");
    assert!(stderr.contains("does not lint; no example was run"), "{stderr}");

    // Arguments are checked as a call's are, once the rest is right.
    greet(
        skills.path(),
        "examples:\n  calls:\n    - tool: greet\n      arguments: {nme: Ada}\n",
    );
    let (code, found, messages) = check_json(&dir);
    assert_eq!(code, Some(1), "{messages}");
    assert_eq!(
        found,
        owned(&[("invalid_example_arguments", 11, 7)]),
        "{messages}"
    );
    assert!(
        messages.contains(
            "examples.calls[0]: arguments that tool 'greet' refuses: nme: unknown argument; expected one of name; \
             name: required string is missing"
        ),
        "{messages}"
    );
    let out = test(&dir, &[], tmp.path());
    assert_exit(&out, 1, "bad arguments do not lint: ");
    assert!(out.stdout.is_empty(), "{}", stdout(&out));
    let out = skilld()
        .arg("package")
        .arg(&dir)
        .arg("-o")
        .arg(tmp.path().join("g.zip"))
        .output()
        .unwrap();
    assert_exit(&out, 1, "nor package: ");
    assert!(!tmp.path().join("g.zip").exists());
}

/// A manifest skill made by `skilld new`, with `examples` appended.
fn manifest(parent: &Path, examples: &str) -> std::path::PathBuf {
    let out = skilld()
        .args(["new", "--dialect", "manifest", "--dir"])
        .arg(parent)
        .arg("hello-yaml")
        .output()
        .unwrap();
    assert_exit(&out, 0, "new: ");
    let dir = parent.join("hello-yaml");
    let path = dir.join("SKILL.yaml");
    // The template's own examples give way to the test's.
    let text = std::fs::read_to_string(&path).unwrap();
    let text = text.split("# What `skilld test").next().unwrap();
    std::fs::write(
        &path,
        format!("{text}triggers:\n  keywords: [greeting]\n{examples}"),
    )
    .unwrap();
    dir
}

#[test]
fn manifest_examples_run_through_its_backend_as_json_lines() {
    let (skills, tmp) = (tempdir().unwrap(), tempdir().unwrap());
    let dir = manifest(
        skills.path(),
        "examples:
  calls:
    - tool: hello_yaml
      arguments: {name: Ada}
      expect: {output_contains: Ada}
    - tool: hello_yaml
      arguments: {name: Bo}
      expect: {output_contains: Ada}
  triggers:
    match: [send a greeting]
    not_match: [say hello]
",
    );
    let out = test(&dir, &["--format", "json"], tmp.path());
    assert_exit(&out, 1, "one call fails: ");
    let lines: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let summary: Vec<(String, bool)> = lines[..4]
        .iter()
        .map(|l| {
            (
                l["kind"].as_str().unwrap().to_owned(),
                l["passed"].as_bool().unwrap(),
            )
        })
        .collect();
    let want = [
        ("match", true),
        ("not_match", true),
        ("call", true),
        ("call", false),
    ];
    let want: Vec<(String, bool)> = want.iter().map(|(k, p)| ((*k).to_owned(), *p)).collect();
    assert_eq!(summary, want, "{lines:?}");
    assert_eq!(
        lines[3]["expected"],
        serde_json::json!(["output_contains: \"Ada\""])
    );
    assert!(lines[3]["got"].as_str().unwrap().contains("Bo"), "{}", lines[3]);
    assert_eq!(
        lines[4],
        serde_json::json!({"skill": "hello-yaml", "passed": 3, "failed": 1})
    );
}

#[test]
fn check_places_bad_examples_in_skill_yaml() {
    let skills = tempdir().unwrap();
    let dir = manifest(
        skills.path(),
        "examples:
  calls:
    - tool: hello_yaml
      arguments: {name: 3}
    - tool: from_backend
",
    );
    let out = skilld().arg("check").arg(&dir).output().unwrap();
    assert_exit(&out, 1, "bad arguments: ");
    let text = stdout(&out);
    let path = dir.join("SKILL.yaml");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        [
            format!(
                "{}:33:7: warning[unknown_example_tool]: examples.calls[1]: 'from_backend' is not a tool of this skill; it has hello_yaml (its backend was not started here, and may offer it)",
                path.display()
            ),
            format!(
                "{}:31:7: error[invalid_example_arguments]: examples.calls[0]: arguments that tool 'hello_yaml' refuses: name: 3 is not of type \"string\"",
                path.display()
            ),
        ],
        "{text}"
    );
}

#[test]
fn exit_codes_for_what_cannot_be_tested() {
    let (skills, tmp) = (tempdir().unwrap(), tempdir().unwrap());
    let out = test(&skills.path().join("absent"), &[], tmp.path());
    assert_exit(&out, 2, "no skill there: ");
    assert!(String::from_utf8_lossy(&out.stderr).contains("holds no SKILL.md or SKILL.yaml"));

    greet(skills.path(), "");
    let out = test(&skills.path().join("greet"), &[], tmp.path());
    assert_exit(&out, 1, "no examples: ");
    assert!(out.stdout.is_empty());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("greet has no examples, so nothing was tested"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A workspace that is not there is not made: nothing can run.
    greet(skills.path(), PASSING);
    let absent = tmp.path().join("no-workspace");
    let args = ["--workspace", absent.to_str().unwrap()];
    let out = test(&skills.path().join("greet"), &args, tmp.path());
    assert_exit(&out, 2, "no workspace: ");
    assert!(out.stdout.is_empty(), "nothing ran: {}", stdout(&out));
    assert!(!absent.exists());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("is not a directory"), "{stderr}");

    // The definition file names its skill too.
    let out = test(&skills.path().join("greet/SKILL.md"), &[], tmp.path());
    assert_exit(&out, 0, "by its SKILL.md: ");
}

#[test]
fn bundled_skills_with_examples_pass() {
    let tmp = tempdir().unwrap();
    let out = test(&bundled_dir().join("text-tools"), &[], tmp.path());
    assert_exit(&out, 0, &stdout(&out));
    assert!(stdout(&out).contains(" 0 failed"), "{}", stdout(&out));
}

#[test]
fn an_untrusted_manifest_naming_a_backend_tool_still_loads() {
    // Its backend starts only for an approved call, so the tools it would
    // add are unknown at load: naming one must not keep it out.
    let skills = tempdir().unwrap();
    manifest(skills.path(), "examples:\n  calls:\n    - tool: from_backend\n");
    let out = skilld()
        .args(["tools", "--format", "native", "--skills"])
        .arg(format!("untrusted={}", skills.path().display()))
        .output()
        .unwrap();
    assert_exit(&out, 0, "tools: ");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("error["), "{stderr}");
    assert!(stdout(&out).contains("hello_yaml"), "{}", stdout(&out));
}

#[test]
fn the_skill_loads_alone_not_with_its_siblings() {
    // `skilld test` takes the skill's directory as its one root; a root
    // that is a skill's directory is that skill, its folders its own.
    let (skills, tmp) = (tempdir().unwrap(), tempdir().unwrap());
    greet(skills.path(), PASSING);
    manifest(skills.path(), "");
    std::fs::create_dir(skills.path().join("greet/notes")).unwrap();
    let out = skilld()
        .args(["tools", "--format", "native", "--skills"])
        .arg(format!("user={}", skills.path().join("greet").display()))
        .output()
        .unwrap();
    assert_exit(&out, 0, "tools: ");
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let skills_listed: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["skill"].as_str().unwrap())
        .collect();
    assert_eq!(skills_listed, ["greet"], "{listed}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("not_a_skill"), "{stderr}");
    let out = test(&skills.path().join("greet"), &[], tmp.path());
    assert_exit(&out, 0, "beside a manifest: ");
}
