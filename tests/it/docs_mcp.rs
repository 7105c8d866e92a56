//! `docs/mcp.md` cannot drift: every fenced code block in it is run, in
//! the order it comes, as a reader would run it against a real `skilld
//! serve` (a child of this test, with tokens and the bundled skills). A
//! block this harness does not know how to run fails the test, so a new
//! section must be runnable or say that it is not.
//!
//! The convention, by a block's info string:
//!
//! - `sh`, `bash`, `shell`: each command (lines joined at a trailing `\`,
//!   `#` comment lines dropped) runs in bash and must succeed.
//!   `claude …` runs Claude Code's own CLI, pinned in `tests/claude-code`;
//!   after `claude mcp add NAME …`, `claude mcp get NAME` must say it
//!   connected (and the server is removed again). `skilld serve …` starts
//!   another server (on a free port, its own data directory) that must
//!   announce itself. `npx TOOL` runs the pinned TOOL of
//!   `tests/typescript`. Anything else (`openapi-python-client`, `curl`)
//!   runs as it is, the venv's programs first on `PATH`.
//! - `python`: run by the venv's Python in the document's working
//!   directory, so a package an earlier `openapi-python-client generate`
//!   made there is importable. `token` is an invoke token; the snippet
//!   runs inside `asyncio.run` (so top-level `await` works), and no
//!   variable it leaves may be `None`, a `Problem` (an HTTP error a
//!   generated client read) or an error result (`is_error`). A snippet that
//!   imports `agents` (the OpenAI Agents SDK) gets a local stand-in for
//!   OpenAI's model (`tests/python/docs_model.py`) that calls `csv_stats`,
//!   which a person must approve: the tool's result (not a note that the
//!   call waits) must reach it.
//! - `json`: an `mcpServers` config has each entry started or connected
//!   exactly as a client would (`command` + `args` on stdio, `url` +
//!   `headers` over HTTP) by the MCP Python SDK, and its tools listed; a
//!   JSON-RPC request (`method`, `params`) is sent on an `/mcp` session and
//!   must get a result (`tests/python/docs_mcp.py`).
//! - `text`, or any info string with the word `example` (```` ```json
//!   example ````): illustrative output, not run.
//!
//! What a reader substitutes is substituted, nothing else:
//! `http://localhost:8080` (and `localhost:8080`) is the server's address,
//! `$SKILLD_TOKEN`, `token` and `<token>` an invoke token, `$HOME` and
//! `/home/me` a home of the test's own (with `skills/` and `project/`).
//! `skilld` on `PATH` is the binary under test. Meanwhile a person
//! approves, as the approver token, every request the calls file.
//!
//! Needs the venv (`SKILLD_PYTHON_VENV`, as `tests/it/python_client.rs`),
//! Claude Code (`tests/claude-code/node_modules`) and the TypeScript
//! packages (`tests/typescript/node_modules`), all installed by `.ci/run`.
//! Without one, the blocks that need it are skipped with the reason, unless
//! `CI` is set, when they fail.

use crate::common::{announced_url, greet_skill, manifest_dir, show, tempdir, venv};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const AGENT: &str = "docs-agent-secret-0123456789";
const BOSS: &str = "docs-boss-secret-0123456789";

/// One fenced block of the document.
#[derive(Debug)]
struct Block {
    info: String,
    body: String,
    line: usize,
}

/// The fenced blocks of `markdown` (backticks or tildes, three or more,
/// indented as in a list or not).
fn blocks(markdown: &str) -> Vec<Block> {
    let mut out = Vec::new();
    // The open block, with its fence and its indentation.
    let mut open: Option<(String, String, Block)> = None;
    for (i, line) in markdown.lines().enumerate() {
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        let fence: String = trimmed.chars().take_while(|c| *c == '`' || *c == '~').collect();
        if let Some((opened, ind, mut block)) = open.take() {
            if fence.len() >= opened.len() && trimmed.trim() == fence {
                out.push(block);
            } else {
                block
                    .body
                    .push_str(line.strip_prefix(ind.as_str()).unwrap_or(trimmed));
                block.body.push('\n');
                open = Some((opened, ind, block));
            }
        } else if fence.len() >= 3 {
            let block = Block {
                info: trimmed[fence.len()..].trim().to_owned(),
                body: String::new(),
                line: i + 1,
            };
            open = Some((fence, indent.to_owned(), block));
        }
    }
    out
}

/// What a reader has: a running server, tokens, a home, a working
/// directory, and the programs the document names.
struct Reader {
    base: String,
    home: tempfile::TempDir,
    work: tempfile::TempDir,
    venv: Option<PathBuf>,
    server: Child,
    ci: bool,
}

impl Drop for Reader {
    fn drop(&mut self) {
        crate::common::terminate(&mut self.server);
    }
}

impl Reader {
    fn start() -> Self {
        let home = tempdir().unwrap();
        // A repository of its own to work in: the git tools' workspace.
        let project = home.path().join("project");
        std::fs::create_dir_all(&project).unwrap();
        for args in [
            &["init", "-q"][..],
            &[
                "-c",
                "user.name=r",
                "-c",
                "user.email=r@example.org",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "start",
            ],
        ] {
            let status = Command::new("git")
                .args(args)
                .current_dir(&project)
                .status()
                .unwrap();
            assert!(status.success(), "git {args:?}");
        }
        greet_skill(&home.path().join("skills"));
        let work = tempdir().unwrap();
        let ci = std::env::var_os("CI").is_some();
        let venv = (ci || python_ready()).then(venv);
        let mut server = Command::new(env!("CARGO_BIN_EXE_skilld"))
            .args(["serve", "--bind", "127.0.0.1:0", "--workspace"])
            .arg(&project)
            .arg("--data-dir")
            .arg(home.path().join("data"))
            .env("HOME", home.path())
            .env(
                "SKILLD_TOKENS",
                format!("agent:invoke:{AGENT},boss:approve:{BOSS}"),
            )
            .env("SKILLD_LOG", "warn")
            .env_remove("SKILLD_DATABASE_URL")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let base = announced_url(&mut server).unwrap_or_else(|first| panic!("skilld serve said {first:?}"));
        Self {
            base,
            home,
            work,
            venv,
            server,
            ci,
        }
    }

    /// `text` with what a reader substitutes substituted.
    fn substitute(&self, text: &str) -> String {
        let host = self.base.trim_start_matches("http://");
        text.replace("http://localhost:8080", &self.base)
            .replace("localhost:8080", host)
            .replace("<token>", AGENT)
            .replace("/home/me", &self.home.path().display().to_string())
    }

    /// A command in the reader's environment, in the working directory.
    fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new(program);
        let bin = Path::new(env!("CARGO_BIN_EXE_skilld"))
            .parent()
            .unwrap()
            .to_path_buf();
        let mut path = vec![bin, claude_bin()];
        path.extend(self.venv.iter().map(|v| v.join("bin")));
        path.extend(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ));
        cmd.current_dir(self.work.path())
            .env("PATH", std::env::join_paths(path).unwrap())
            .env("HOME", self.home.path())
            .env("SKILLD_TOKEN", AGENT)
            .env("NO_PROXY", "127.0.0.1,localhost")
            .env("no_proxy", "127.0.0.1,localhost")
            .env("DISABLE_TELEMETRY", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(Stdio::null());
        cmd
    }

    /// Skips what needs a missing tool, saying why; under CI, fails.
    fn missing(&self, what: &str, block: &Block) -> bool {
        assert!(!self.ci, "docs/mcp.md:{}: {what} is missing under CI", block.line);
        println!("docs/mcp.md:{}: skipped, {what} is missing", block.line);
        true
    }

    fn run(&self, block: &Block) {
        let kind = block.info.split_whitespace().next().unwrap_or("");
        let illustrative = kind == "text" || block.info.split_whitespace().any(|w| w == "example");
        match kind {
            _ if illustrative => {}
            "sh" | "bash" | "shell" => commands(&block.body)
                .iter()
                .for_each(|c| self.shell(&self.substitute(c), block)),
            "python" => self.python(block),
            "json" => self.json(block),
            other => panic!(
                "docs/mcp.md:{}: a ```{other} block, which tests/it/docs_mcp.rs does not know how to \
                 run: make it runnable, or mark illustrative output ```text",
                block.line
            ),
        }
    }

    fn shell(&self, command: &str, block: &Block) {
        let words: Vec<&str> = command.split_whitespace().collect();
        match words.as_slice() {
            ["claude", ..] => self.claude(command, &words, block),
            ["skilld", "serve", ..] => self.another_server(command),
            ["npx", tool, ..] => {
                let pinned = manifest_dir()
                    .join("tests/typescript/node_modules/.bin")
                    .join(tool);
                if !pinned.is_file() && self.missing(&format!("{}", pinned.display()), block) {
                    return;
                }
                let rest = command.trim_start()["npx".len()..].trim_start()[tool.len()..].to_owned();
                self.bash(&format!("{} {rest}", pinned.display()), block);
            }
            [first, ..] if first.contains("python") || *first == "openapi-python-client" => {
                if self.venv.is_none() && self.missing("the Python venv", block) {
                    return;
                }
                self.bash(command, block);
            }
            _ => {
                self.bash(command, block);
            }
        }
    }

    fn bash(&self, command: &str, block: &Block) -> String {
        let output = self.command("bash").args(["-c", command]).output().unwrap();
        assert!(
            output.status.success(),
            "docs/mcp.md:{}: `{command}` failed: {}",
            block.line,
            show(&output)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// A `claude` line by Claude Code itself; an added server must connect.
    fn claude(&self, command: &str, words: &[&str], block: &Block) {
        if !claude_bin().join("claude").is_file() && self.missing("Claude Code (tests/claude-code)", block) {
            return;
        }
        self.bash(command, block);
        let Some(name) = added_name(words) else {
            return;
        };
        let got = self.bash(&format!("claude mcp get {name}"), block);
        assert!(
            got.contains("Connected") && !got.contains("Failed"),
            "docs/mcp.md:{}: after `{command}`, Claude Code says:\n{got}",
            block.line
        );
        self.bash(&format!("claude mcp remove {name}"), block);
    }

    /// A `skilld serve` line: it must start and announce its address.
    fn another_server(&self, command: &str) {
        let data = tempdir().unwrap();
        let line = format!(
            "exec {command} --bind 127.0.0.1:0 --data-dir {}",
            data.path().display()
        );
        let mut child = self
            .command("bash")
            .args(["-c", &line])
            .env_remove("SKILLD_DATABASE_URL")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let announced = announced_url(&mut child);
        crate::common::terminate(&mut child);
        announced.unwrap_or_else(|first| panic!("`{command}` did not start: {first:?}"));
    }

    fn python(&self, block: &Block) {
        let Some(venv) = &self.venv else {
            self.missing("the Python venv", block);
            return;
        };
        let script = self.work.path().join(format!("snippet_{}.py", block.line));
        std::fs::write(&script, wrap_python(&self.substitute(&block.body))).unwrap();
        let mut path = vec![manifest_dir().join("tests/python")];
        path.extend(generated_projects(self.work.path()));
        let output = self
            .command(venv.join("bin/python"))
            .arg(&script)
            .env("PYTHONPATH", std::env::join_paths(path).unwrap())
            // A tool a person must approve: the snippet must wait for it.
            .env("DOCS_MODEL_TOOL", "csv_stats")
            .env("DOCS_MODEL_ARGS", r#"{"rows": [{"temp": 4.5}, {"temp": 15.5}]}"#)
            .env("DOCS_MODEL_EXPECT", "summarised 2 rows")
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "docs/mcp.md:{}: the Python snippet failed: {}",
            block.line,
            show(&output)
        );
    }

    fn json(&self, block: &Block) {
        let text = self.substitute(&block.body);
        let value: Value = serde_json::from_str(&text).unwrap_or_else(|e| {
            panic!(
                "docs/mcp.md:{}: not JSON ({e}); mark an example ```json example",
                block.line
            )
        });
        if self.venv.is_none() && self.missing("the Python venv", block) {
            return;
        }
        if let Some(servers) = value["mcpServers"].as_object() {
            for entry in servers.values() {
                self.docs_py(&["server", &entry.to_string()], block);
            }
        } else if value["method"].is_string() {
            self.docs_py(&["request", &self.base, AGENT, &value.to_string()], block);
        } else {
            panic!(
                "docs/mcp.md:{}: a JSON block that is neither a client's mcpServers nor a JSON-RPC \
                 request: make it one, or mark it ```json example",
                block.line
            );
        }
    }

    fn docs_py(&self, args: &[&str], block: &Block) {
        let venv = self.venv.as_ref().unwrap();
        let output = self
            .command(venv.join("bin/python"))
            .arg(manifest_dir().join("tests/python/docs_mcp.py"))
            .args(args)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "docs/mcp.md:{}: {}",
            block.line,
            show(&output)
        );
    }
}

/// Where the pinned Claude Code's `claude` is.
fn claude_bin() -> PathBuf {
    manifest_dir().join("tests/claude-code/node_modules/.bin")
}

/// Whether the venv can be had without installing it here (outside CI, a
/// missing venv skips rather than fills one from PyPI).
fn python_ready() -> bool {
    std::env::var_os("SKILLD_PYTHON_VENV").is_some()
        || manifest_dir()
            .join("target/python-venv/.skilld-requirements")
            .is_file()
}

/// The commands of a shell block: continuation lines joined, comments and
/// blank lines dropped.
fn commands(body: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in body.lines() {
        let line = line.trim();
        if current.is_empty() && (line.is_empty() || line.starts_with('#')) {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(head) => {
                current.push_str(head.trim_end());
                current.push(' ');
            }
            None => {
                current.push_str(line);
                out.push(std::mem::take(&mut current));
            }
        }
    }
    out
}

/// The server name `claude mcp add` is given: its first positional
/// argument (options and their values skipped, and nothing after `--`).
fn added_name(words: &[&str]) -> Option<String> {
    let rest = match words {
        ["claude", "mcp", "add", rest @ ..] => rest,
        _ => return None,
    };
    let with_value = [
        "--transport",
        "-t",
        "--header",
        "-H",
        "--env",
        "-e",
        "--scope",
        "-s",
    ];
    let mut i = 0;
    while i < rest.len() {
        let word = rest[i];
        if word == "--" {
            return None;
        }
        if with_value.contains(&word) {
            i += 2;
        } else if word.starts_with('-') {
            i += 1;
        } else {
            return Some(word.trim_matches('"').to_owned());
        }
    }
    None
}

/// What every variable a snippet leaves must not be: nothing, a
/// problem (an HTTP error a generated client read), or an error result.
const PYTHON_CHECK: &str = r#"
for name, value in __names.items():
    kind = type(value).__name__
    if value is None or kind == "Problem" or getattr(value, "is_error", False) is True:
        raise SystemExit(f"FAILED: the snippet's {name} is {value!r}"[:3000])
"#;

/// A snippet as a script: `token` defined, its body run inside
/// `asyncio.run` (so top-level `await` works) and its variables checked
/// ([`PYTHON_CHECK`]); the stand-in model for an agent.
fn wrap_python(snippet: &str) -> String {
    let agent = snippet.contains("from agents") || snippet.contains("import agents");
    let mut script = String::from("import asyncio, os\ntoken = os.environ['SKILLD_TOKEN']\n");
    if agent {
        script.push_str("import docs_model\ndocs_model.start()\n");
    }
    let (imports, body): (Vec<&str>, Vec<&str>) = snippet
        .lines()
        .partition(|l| l.starts_with("import ") || l.starts_with("from "));
    script.push_str(&imports.join("\n"));
    script.push_str("\n\nasync def __snippet():\n");
    for line in body {
        script.push_str("    ");
        script.push_str(line);
        script.push('\n');
    }
    script.push_str("    return locals()\n\n__names = asyncio.run(__snippet())\n");
    script.push_str(PYTHON_CHECK);
    if agent {
        script.push_str("docs_model.check()\n");
    }
    script
}

/// Directories under `work` that a generator made into projects (a
/// `pyproject.toml` beside the package), as a reader who installed them.
fn generated_projects(work: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(work)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.join("pyproject.toml").is_file())
                .collect()
        })
        .unwrap_or_default()
}

/// Approves every pending request as the approver, until `done`.
async fn approve_everything(base: String, done: tokio::sync::watch::Receiver<bool>) {
    let client = reqwest::Client::new();
    while !*done.borrow() {
        let pending: Value = match client
            .get(format!("{base}/approvals?status=pending"))
            .bearer_auth(BOSS)
            .send()
            .await
        {
            Ok(res) => res.json().await.unwrap_or(Value::Null),
            Err(_) => Value::Null,
        };
        for approval in pending["approvals"].as_array().into_iter().flatten() {
            let id = approval["id"].as_str().unwrap_or_default();
            let _ = client
                .post(format!("{base}/approvals/{id}/approve"))
                .bearer_auth(BOSS)
                .json(&serde_json::json!({"scope": "once"}))
                .send()
                .await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
fn the_fences_are_read_as_a_reader_sees_them() {
    let md = "a\n```sh\necho 1 \\\n  two\n# note\necho 3\n```\n\n  ```json example\n  {\"x\": 1}\n  ```\n````markdown\n```\n````\n";
    let found = blocks(md);
    assert_eq!(found.len(), 3, "{found:?}");
    assert_eq!(commands(&found[0].body), ["echo 1 two", "echo 3"]);
    assert_eq!(
        (found[1].info.as_str(), found[1].body.as_str()),
        ("json example", "{\"x\": 1}\n")
    );
    assert_eq!(found[2].body, "```\n");
    let add = [
        "claude",
        "mcp",
        "add",
        "--transport",
        "http",
        "skilld",
        "http://x",
        "--header",
        "A: b",
    ];
    assert_eq!(added_name(&add).as_deref(), Some("skilld"));
    assert_eq!(
        added_name(&["claude", "mcp", "add", "skilld", "--", "skilld", "mcp"]).as_deref(),
        Some("skilld")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_snippet_of_docs_mcp_runs() {
    let markdown = std::fs::read_to_string(manifest_dir().join("docs/mcp.md")).unwrap();
    let found = blocks(&markdown);
    assert!(found.len() >= 10, "docs/mcp.md has {} blocks", found.len());
    let reader = tokio::task::spawn_blocking(Reader::start).await.unwrap();
    let (done, watching) = tokio::sync::watch::channel(false);
    let approver = tokio::spawn(approve_everything(reader.base.clone(), watching));
    let ran = tokio::task::spawn_blocking(move || {
        for block in &found {
            println!("docs/mcp.md:{}: ```{}", block.line, block.info);
            reader.run(block);
        }
        drop(reader);
    })
    .await;
    let _ = done.send(true);
    approver.await.unwrap();
    if let Err(panic) = ran {
        std::panic::resume_unwind(panic.into_panic());
    }
}
