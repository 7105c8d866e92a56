//! `POST /skills/match`: each trigger kind, their order, whole-word
//! keywords, file globs by path and by name, and the refusals.

use crate::common::{Api, TestServer, options, root, tempdir, write_file};
use serde_json::{Value, json};
use skilld::skill::Trust;
use std::path::Path;

/// A prompt skill with `triggers` as given (YAML flow mapping).
fn triggered(dir: &Path, name: &str, triggers: &str) {
    write_file(
        &dir.join(format!("{name}/SKILL.md")),
        &format!(
            "---\nname: {name}\ndescription: Guidance on {name}.\ntriggers: {triggers}\n---\n\nAdvice.\n"
        ),
    );
}

async fn matches(server: &TestServer, body: Value) -> (u16, Value) {
    Api::anonymous(server).post("/skills/match", body).await
}

/// `(skill, kind, value)` of each match.
fn hits(list: &Value) -> Vec<(String, String, String)> {
    list["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let s = |v: &Value| v.as_str().unwrap().to_owned();
            (
                s(&m["skill"]),
                s(&m["trigger"]["kind"]),
                s(&m["trigger"]["value"]),
            )
        })
        .collect()
}

fn hit(skill: &str, kind: &str, value: &str) -> (String, String, String) {
    (skill.to_owned(), kind.to_owned(), value.to_owned())
}

#[tokio::test]
async fn each_trigger_kind_fires_in_order() {
    let dir = tempdir().unwrap();
    triggered(
        dir.path(),
        "ddd",
        "{keywords: [aggregate, bounded context], languages: [Rust, go]}",
    );
    triggered(
        dir.path(),
        "notes",
        "{files: [NOTES.md, '*.notes'], keywords: [note], modes: [interactive]}",
    );
    triggered(
        dir.path(),
        "k8s",
        "{files: ['deploy/**/*.yaml'], keywords: [kubectl]}",
    );
    triggered(dir.path(), "quiet", "{keywords: [never-said]}");
    let server = TestServer::builder(options(vec![root(dir.path(), Trust::User)]))
        .start()
        .await;
    let m = |body| matches(&server, body);

    let (status, list) = m(json!({})).await;
    assert_eq!((status, hits(&list)), (200, vec![]));

    // Keywords: whole words, any case, phrases too; not inside a word.
    let (_, list) = m(json!({"message": "Where does this Bounded Context end? A footnote."})).await;
    assert_eq!(hits(&list), [hit("ddd", "keyword", "bounded context")]);

    // Files: by whole path, or by name alone; the first glob that matched.
    let files = json!(["docs/NOTES.md", "deploy/prod/app.yaml", "src/main.rs"]);
    let (_, list) = m(json!({"files": files})).await;
    assert_eq!(
        hits(&list),
        [
            hit("k8s", "file", "deploy/**/*.yaml"),
            hit("notes", "file", "NOTES.md")
        ]
    );

    // A file trigger is tried before a keyword of the same skill.
    let (_, list) = m(json!({"files": ["x.notes"], "message": "take a note"})).await;
    assert_eq!(hits(&list), [hit("notes", "file", "*.notes")]);

    // Languages and modes, ignoring case.
    let (_, list) = m(json!({"languages": ["RUST"], "mode": "Interactive"})).await;
    assert_eq!(
        hits(&list),
        [
            hit("ddd", "language", "Rust"),
            hit("notes", "mode", "interactive")
        ]
    );

    // An explicit request always fires, after the skill's own triggers.
    let (_, list) = m(json!({"explicit": ["quiet", "ddd"], "languages": ["go"]})).await;
    assert_eq!(
        hits(&list),
        [hit("ddd", "language", "go"), hit("quiet", "explicit", "quiet")]
    );
}

#[tokio::test]
async fn bad_requests_and_bad_globs_are_said() {
    let dir = tempdir().unwrap();
    triggered(dir.path(), "globby", "{files: ['src/[broken'], keywords: [glob]}");
    let server = TestServer::builder(options(vec![root(dir.path(), Trust::User)]))
        .start()
        .await;

    // The skill loads with a warning; its broken glob never matches.
    let diags = server.get_json("/diagnostics").await;
    let codes: Vec<&str> = diags["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, ["invalid_trigger"], "{diags}");
    let (_, list) = matches(&server, json!({"files": ["src/[broken"]})).await;
    assert_eq!(hits(&list), vec![]);

    let (status, problem) = matches(&server, json!({"explicit": ["globby", "nope"]})).await;
    assert_eq!(status, 422, "{problem}");
    assert_eq!(problem["code"], "unknown_skill");
    assert_eq!(problem["errors"][0]["field"], "explicit[1]");
    let many: Vec<String> = (0..10_001).map(|i| format!("f{i}")).collect();
    let (status, problem) = matches(&server, json!({"files": many})).await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (422, Some("too_many_entries"))
    );
    let (status, _) = matches(&server, json!({"files": "NOTES.md"})).await;
    assert_eq!(status, 400);
    let (status, _) = matches(&server, json!({"colour": "red"})).await;
    assert_eq!(status, 400);
}
