//! `skilld test DIR --to URL`: a directory's examples run against the
//! skill of the same name on a real `skilld serve`, reported and
//! exit-coded as a run here; a served copy that is not the directory's
//! is said; a skill the server does not serve, a call it holds for
//! approval, a token it refuses and a server that is not there.

use crate::common::{Api, announced_url, assert_exit, serve_command, skilld, tempdir, terminate};
use std::path::{Path, PathBuf};
use std::process::{Child, Output};

/// A markdown skill `greet` in `parent`, whose tool prints `Hello,
/// NAME!`, with `extra` frontmatter: its examples, and whatever else. It
/// is read-only, so a server runs its calls without asking.
fn greet(parent: &Path, extra: &str) -> PathBuf {
    let dir = parent.join("greet");
    std::fs::create_dir_all(&dir).unwrap();
    let text = format!(
        "---\nname: greet\nversion: 1.0.0\ndescription: Greets people. Use to say hello.\n\
         read_only: true\ntriggers:\n  keywords: [hello]\n  files: [\"*.greeting\"]\n{extra}---\n\n\
         # Greet\n\n### greet\n\nSay hello.\n\n#### Parameters\n\n\
         | Name | Type | Required | Description |\n|---|---|---|---|\n| name | string | yes | Who |\n\n\
         #### Command\n\n```\nprintf 'Hello, %s!\\n' {{{{name}}}}\n```\n"
    );
    std::fs::write(dir.join("SKILL.md"), text).unwrap();
    dir
}

const EXAMPLES: &str = "examples:
  calls:
    - tool: greet
      arguments: {name: Ada}
      expect: {output: \"Hello, Ada!\\n\", exit_code: 0}
    - tool: greet
      arguments: {name: Bob}
      expect: {output_contains: Bobby}
  triggers:
    match:
      - message: please say Hello to Ada
      - message: say hi to Ada
    not_match:
      - files: [notes/party.txt]
";

/// A server whose bundled root is `skills`, its data in `data`.
struct Served {
    child: Child,
    url: String,
    data: tempfile::TempDir,
}

impl Served {
    fn start(skills: &Path) -> Self {
        Self::with_tokens(skills, None)
    }

    /// With `SKILLD_TOKENS` set to `tokens`: no local secret then.
    fn with_tokens(skills: &Path, tokens: Option<&str>) -> Self {
        let data = tempdir().unwrap();
        let mut command = serve_command(data.path(), skills);
        command.env("HOME", data.path());
        if let Some(tokens) = tokens {
            command.env("SKILLD_TOKENS", tokens);
        }
        let mut child = command.spawn().unwrap();
        let url = announced_url(&mut child).unwrap();
        Self { child, url, data }
    }

    /// `skilld test ARGS… DIR --to` this server, with its data directory
    /// (so its local secret) and temporary files under `tmp`.
    fn test(&self, dir: &Path, args: &[&str], tmp: &Path) -> Output {
        skilld()
            .arg("test")
            .args(args)
            .arg(dir)
            .args(["--to", &self.url, "--data-dir"])
            .arg(self.data.path())
            .env("TMPDIR", tmp)
            .env("HOME", self.data.path())
            .env_remove("SKILLD_TEST_TO_TOKEN")
            .output()
            .unwrap()
    }

    fn api(&self) -> Api {
        let secret = std::fs::read_to_string(self.data.path().join("local-secret")).unwrap();
        Api::new(self.url.clone(), Some(secret.trim()))
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        terminate(&mut self.child);
    }
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The local run's lines, for the same examples.
fn here(dir: &Path, tmp: &Path) -> Output {
    skilld().arg("test").arg(dir).env("TMPDIR", tmp).output().unwrap()
}

#[test]
fn the_examples_judge_the_served_skill_as_they_judge_it_here() {
    let (skills, tmp) = (tempdir().unwrap(), tempdir().unwrap());
    let dir = greet(skills.path(), EXAMPLES);
    let server = Served::start(skills.path());

    let out = server.test(&dir, &[], tmp.path());
    assert_exit(&out, 1, "one call and one trigger fail: ");
    let text = stdout(&out);
    assert_eq!(
        text,
        "ok   match message \"please say Hello to Ada\" (line 19): keyword trigger 'hello' fired\n\
         FAIL match message \"say hi to Ada\" (line 20)\n     \
         expected one of the skill's triggers to fire\n     \
         got no trigger fired; the skill's triggers are files [*.greeting], keywords [hello]\n\
         ok   not_match files [notes/party.txt] (line 22): no trigger fired\n\
         ok   call greet {\"name\":\"Ada\"} (line 11)\n\
         FAIL call greet {\"name\":\"Bob\"} (line 14)\n     \
         expected output_contains: \"Bobby\"\n     \
         got success: true, exit_code: 0, output: \"Hello, Bob!\\n\"\n\
         greet: 3 passed, 2 failed\n"
    );
    // The same examples here print the same lines: only where they ran differs.
    let local = here(&dir, tmp.path());
    assert_exit(&local, 1, "here too: ");
    assert_eq!(stdout(&local), text);
    // The directory is what the server serves: nothing is said of it.
    assert!(!stderr(&out).contains("hash"), "{}", stderr(&out));
    let json = server.test(&dir, &["--format", "json"], tmp.path());
    let last = stdout(&json).lines().last().unwrap().to_owned();
    assert_eq!(last, r#"{"failed":2,"passed":3,"skill":"greet"}"#);
}

#[test]
fn passing_examples_pass_there_and_the_calls_are_the_servers_runs() {
    let (skills, tmp) = (tempdir().unwrap(), tempdir().unwrap());
    let passing = EXAMPLES
        .replace("Bobby", "Bob")
        .replace("      - message: say hi to Ada\n", "");
    let dir = greet(skills.path(), &passing);
    let server = Served::start(skills.path());
    let out = server.test(&dir, &[], tmp.path());
    assert_exit(&out, 0, "all pass: ");
    assert!(
        stdout(&out).ends_with("greet: 4 passed, 0 failed\n"),
        "{}",
        stdout(&out)
    );
    // The calls ran on the server: its run log has them.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (status, runs) = rt.block_on(server.api().get("/runs?skill=greet"));
    assert_eq!(status, 200, "{runs}");
    assert_eq!(runs["runs"].as_array().unwrap().len(), 2, "{runs}");
    // Nothing temporary was left here.
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
}

#[test]
fn a_served_copy_that_differs_is_said_and_still_tested() {
    let (skills, mine, tmp) = (tempdir().unwrap(), tempdir().unwrap(), tempdir().unwrap());
    greet(skills.path(), "");
    let server = Served::start(skills.path());
    let served = Api::new(server.url.clone(), None);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let hash = rt.block_on(served.get("/skills/greet")).1["hash"]
        .as_str()
        .unwrap()
        .to_owned();

    let passing = EXAMPLES.replace("Bobby", "Bob");
    let dir = greet(mine.path(), &passing);
    let out = server.test(&dir, &[], tmp.path());
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "skilld: {} serves greet 1.0.0 with hash {}, not this directory's ",
            server.url,
            &hash[..12]
        )),
        "{err}"
    );
    assert!(err.contains("the examples run against the server's"), "{err}");
    // They ran all the same: one trigger example fails, as it would here.
    assert_exit(&out, 1, "say hi does not fire: ");
    assert!(
        stdout(&out).ends_with("greet: 4 passed, 1 failed\n"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn a_skill_the_server_does_not_serve_runs_nothing() {
    let (skills, mine, tmp) = (tempdir().unwrap(), tempdir().unwrap(), tempdir().unwrap());
    let server = Served::start(skills.path());
    let dir = greet(mine.path(), EXAMPLES);
    let out = server.test(&dir, &[], tmp.path());
    assert_exit(&out, 1, "not served: ");
    assert!(out.stdout.is_empty(), "nothing ran: {}", stdout(&out));
    assert!(
        stderr(&out).contains(&format!(
            "skilld: {} serves no skill named greet, so no example was run",
            server.url
        )),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_call_the_server_holds_for_approval_fails_and_is_withdrawn() {
    let (skills, tmp) = (tempdir().unwrap(), tempdir().unwrap());
    let examples = "always_ask: true\nexamples:\n  calls:\n    - tool: greet\n      arguments: {name: Ada}\n";
    let dir = greet(skills.path(), examples);
    let server = Served::start(skills.path());
    let out = server.test(&dir, &[], tmp.path());
    assert_exit(&out, 1, "held: ");
    let text = stdout(&out);
    assert!(
        text.contains(
            "FAIL call greet {\"name\":\"Ada\"} (line 12)\n     expected the call to run\n     \
             got not run: held for a person's approval; its request was withdrawn;"
        ),
        "{text}"
    );
    // No request is left in the inbox for a result nobody reads.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (_, pending) = rt.block_on(server.api().get("/approvals?status=pending"));
    assert_eq!(pending["approvals"], serde_json::json!([]), "{pending}");
}

const READER: &str = "reader-0123456789abcdef0123456789abcdef";
const AGENT: &str = "agent-0123456789abcdef0123456789abcdef";

#[test]
fn the_token_is_the_servers_to_judge() {
    let (skills, tmp) = (tempdir().unwrap(), tempdir().unwrap());
    let passing = EXAMPLES
        .replace("Bobby", "Bob")
        .replace("      - message: say hi to Ada\n", "");
    let dir = greet(skills.path(), &passing);
    let tokens = format!("reader:read:{READER},agent:invoke:{AGENT}");
    let server = Served::with_tokens(skills.path(), Some(&tokens));

    let out = server.test(&dir, &["--to-token", "wrong"], tmp.path());
    assert_exit(&out, 1, "a wrong token: ");
    assert!(out.stdout.is_empty(), "nothing ran: {}", stdout(&out));
    assert!(stderr(&out).contains("answered 401"), "{}", stderr(&out));

    // The environment's token, as a CI job would give it.
    let mut command = skilld();
    command
        .arg("test")
        .arg(&dir)
        .args(["--to", &server.url])
        .env("SKILLD_TEST_TO_TOKEN", AGENT)
        .env("TMPDIR", tmp.path());
    let out = command.output().unwrap();
    assert_exit(&out, 0, "the invoke token: ");

    // A token that may read but not invoke: the triggers pass, and each
    // call fails with the server's refusal.
    let out = server.test(&dir, &["--to-token", READER], tmp.path());
    assert_exit(&out, 1, "a read token: ");
    let text = stdout(&out);
    assert!(text.contains("ok   match message"), "{text}");
    assert!(
        text.contains("FAIL call greet {\"name\":\"Ada\"} (line 11)\n     expected the call to run\n     got not run: the server refused it (403): "),
        "{text}"
    );
    assert!(text.ends_with("greet: 2 passed, 2 failed\n"), "{text}");
}

#[test]
fn an_absent_server_exits_2() {
    let (skills, tmp) = (tempdir().unwrap(), tempdir().unwrap());
    let dir = greet(skills.path(), EXAMPLES);
    let out = skilld()
        .arg("test")
        .arg(&dir)
        .args(["--to", "http://127.0.0.1:1"])
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    assert_exit(&out, 2, "no server: ");
    assert!(out.stdout.is_empty(), "{}", stdout(&out));
    assert!(stderr(&out).contains("cannot reach"), "{}", stderr(&out));

    let out = skilld()
        .arg("test")
        .arg(&dir)
        .args(["--to", "http://127.0.0.1:1", "--workspace"])
        .arg(tmp.path())
        .output()
        .unwrap();
    assert_exit(&out, 2, "--workspace does not go with --to: ");
    assert!(stderr(&out).contains("--workspace"), "{}", stderr(&out));
}
