//! `skilld import`: the MCP configs of Claude Desktop, Claude Code, Cursor
//! and VS Code, written as `mcp` manifests. Each test reads the whole
//! manifests written, and checks that no secret of the config reached
//! the disk.

use crate::common::{assert_exit, skilld};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

const GITHUB_PAT: &str = "ghp_16C7e42F292c6912E7710c838347Ae178B4a";
const OPENAI_KEY: &str = "sk-proj-Zq8x3Lm1Vb7Nc2Kd9Rf4Tg6Hy0Ju5Wp";

/// A home, a project directory (the working directory) and a skills
/// directory, all empty.
struct Env {
    _dir: tempfile::TempDir,
    home: PathBuf,
    project: PathBuf,
    into: PathBuf,
}

impl Env {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let project = dir.path().join("project");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&project).unwrap();
        let into = dir.path().join("skills");
        Self {
            _dir: dir,
            home,
            project,
            into,
        }
    }

    /// Writes `json` at `path` (relative to the home or the project).
    fn config(&self, path: &Path, json: &str) -> PathBuf {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, json).unwrap();
        path.to_path_buf()
    }

    /// `skilld import ARGS`, run in the project with this home.
    fn import(&self, args: &[&str]) -> Run {
        let out = skilld()
            .arg("import")
            .args(args)
            .current_dir(&self.project)
            .env("HOME", &self.home)
            .env_remove("XDG_CONFIG_HOME")
            .output()
            .unwrap();
        Run {
            code: out.status.code(),
            stdout: String::from_utf8(out.stdout).unwrap(),
            stderr: String::from_utf8(out.stderr).unwrap(),
        }
    }

    /// `skilld import FILE --into INTO`.
    fn import_file(&self, file: &Path, extra: &[&str]) -> Run {
        let mut args = vec![file.to_str().unwrap(), "--into", self.into.to_str().unwrap()];
        args.extend(extra);
        self.import(&args)
    }

    /// The manifest of `skill`, as JSON.
    fn manifest(&self, skill: &str) -> Value {
        manifest_in(&self.into, skill)
    }

    /// `skilld check` of everything imported: the written manifests must
    /// be ones the server loads.
    fn assert_checks(&self) {
        let out = skilld().arg("check").arg(&self.into).output().unwrap();
        let said = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{said}");
        assert!(said.contains(" 0 errors, 0 warnings"), "{said}");
    }
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn manifest_in(dir: &Path, skill: &str) -> Value {
    let text = std::fs::read_to_string(dir.join(skill).join("SKILL.yaml")).unwrap();
    assert!(text.starts_with("# Imported by `skilld import`"), "{text}");
    serde_norway::from_str(&text).unwrap()
}

/// The skill directories of `dir`, sorted.
fn skills(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Fails when `secret` is in any file (or file name) under `dir`.
fn assert_nowhere(dir: &Path, secret: &str) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        assert!(!path.to_string_lossy().contains(secret), "{}", path.display());
        if path.is_dir() {
            assert_nowhere(&path, secret);
        } else {
            let bytes = std::fs::read(&path).unwrap();
            let text = String::from_utf8_lossy(&bytes);
            assert!(
                !text.contains(secret),
                "the secret is in {}:\n{text}",
                path.display()
            );
        }
    }
}

/// `network:` of a server its runner fetches from npm, from PyPI, or of
/// one skilld cannot tell about (each destination asked for).
const NPM: &str = "npm";
const PYPI: &str = "pypi";
const ASKS: &str = "asks";

fn reach(of: &str) -> Value {
    match of {
        NPM => json!({"allow": ["registry.npmjs.org"]}),
        PYPI => json!({"allow": ["pypi.org", "files.pythonhosted.org"]}),
        _ => json!(true),
    }
}

fn stdio(name: &str, origin: &str, network: &str, command: Value, env: Option<Value>) -> Value {
    let mut implementation = json!({"backend": "mcp", "command": command});
    if let Some(env) = env {
        implementation["env"] = env;
    }
    let permissions = json!(["shell:exec", "net:fetch"]);
    json!({
        "name": name,
        "version": "0.1.0",
        "description": format!("The {name} MCP server (imported from {origin})"),
        "types": ["tool"],
        "permissions": permissions,
        "network": reach(network),
        "implementation": implementation,
    })
}

/// A remote server's manifest; `headers` null when it has none.
fn remote(name: &str, origin: &str, url: &str, headers: Value) -> Value {
    let mut implementation = json!({"backend": "mcp", "url": url});
    if !headers.is_null() {
        implementation["headers"] = headers;
    }
    json!({
        "name": name,
        "version": "0.1.0",
        "description": format!("The {name} MCP server (imported from {origin})"),
        "types": ["tool"],
        "permissions": ["net:fetch"],
        "implementation": implementation,
    })
}

/// `manifest` with the description of a server whose key is not its
/// skill's name.
fn described(mut manifest: Value, key: &str, origin: &str) -> Value {
    manifest["description"] = json!(format!("The {key} MCP server (imported from {origin})"));
    manifest
}

#[test]
fn claude_desktop_config_with_a_literal_token() {
    let env = Env::new();
    let file = env.config(
        &env.home.join(".config/Claude/claude_desktop_config.json"),
        &format!(
            r#"{{
  "globalShortcut": "Ctrl+Space",
  "mcpServers": {{
    "filesystem": {{
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/me/Desktop", "/home/me/Downloads"]
    }},
    "github": {{
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-github"],
      "env": {{ "GITHUB_PERSONAL_ACCESS_TOKEN": "{GITHUB_PAT}", "GITHUB_TOOLSETS": "repos,issues" }}
    }},
    "postgres": {{
      "command": "docker",
      "args": ["run", "-i", "--rm", "mcp/postgres"],
      "env": {{ "DATABASE_URL": "postgresql://app:s3cr3t-pw@db:5432/app" }}
    }}
  }}
}}"#
        ),
    );
    let run = env.import_file(&file, &[]);
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    let origin = "Claude Desktop's config";
    assert_eq!(skills(&env.into), ["filesystem", "github", "postgres"]);
    assert_eq!(
        env.manifest("filesystem"),
        stdio(
            "filesystem",
            origin,
            NPM,
            json!([
                "npx",
                "-y",
                "@modelcontextprotocol/server-filesystem",
                "/home/me/Desktop",
                "/home/me/Downloads"
            ]),
            None
        )
    );
    assert_eq!(
        env.manifest("github"),
        stdio(
            "github",
            origin,
            NPM,
            json!(["npx", "-y", "@modelcontextprotocol/server-github"]),
            Some(json!({
                "GITHUB_PERSONAL_ACCESS_TOKEN": {"env": "GITHUB_PERSONAL_ACCESS_TOKEN"},
                "GITHUB_TOOLSETS": "repos,issues",
            }))
        )
    );
    assert_eq!(
        env.manifest("postgres")["implementation"]["env"],
        json!({"DATABASE_URL": {"env": "DATABASE_URL"}})
    );
    env.assert_checks();
    the_notes_are_said_and_no_secret_is_kept(&env, &run);
}

/// The notes in the manifests and on stdout, and no secret anywhere.
fn the_notes_are_said_and_no_secret_is_kept(env: &Env, run: &Run) {
    let text = std::fs::read_to_string(env.into.join("filesystem/SKILL.yaml")).unwrap();
    assert!(
        text.contains("# network.allow: the registry npx downloads the server from at each start"),
        "{text}"
    );
    let text = std::fs::read_to_string(env.into.join("github/SKILL.yaml")).unwrap();
    assert!(
        text.contains("# network.allow: the registry npx downloads the server from at each start"),
        "{text}"
    );
    assert!(
        run.stdout.contains("(Claude Desktop's config): 3 servers"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("needs GITHUB_PERSONAL_ACCESS_TOKEN in skilld's environment")
    );
    assert!(run.stdout.contains("needs DATABASE_URL"));
    for secret in [GITHUB_PAT, "s3cr3t-pw"] {
        assert_nowhere(&env.into, secret);
        assert!(!run.stdout.contains(secret) && !run.stderr.contains(secret));
    }
}

#[test]
fn claude_code_mcp_json_with_placeholders_and_transports() {
    let env = Env::new();
    let file = env.config(
        &env.project.join(".mcp.json"),
        r#"{
  "mcpServers": {
    "sentry": {
      "type": "http",
      "url": "https://mcp.sentry.dev/mcp",
      "headers": { "Authorization": "Bearer ${SENTRY_TOKEN}", "X-Org": "${SENTRY_ORG:-acme}" }
    },
    "linear": { "type": "sse", "url": "https://mcp.linear.app/sse" },
    "asana": { "type": "sse", "url": "https://mcp.asana.com/mcp" },
    "time": { "type": "stdio", "command": "uvx", "args": ["mcp-server-time", "--local-timezone=Europe/Paris"] },
    "api": {
      "type": "stdio",
      "command": "/usr/local/bin/api-server",
      "args": ["--root", "${HOME}/api"],
      "env": { "API_BASE": "${API_BASE_URL:-https://api.example.com}", "OPENAI_API_KEY": "${OPENAI_API_KEY}" }
    }
  }
}"#,
    );
    let run = env.import_file(&file, &[]);
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    env.assert_checks();
    let origin = "Claude Code's .mcp.json";
    assert_eq!(skills(&env.into), ["api", "asana", "sentry", "time"]);
    assert_eq!(
        env.manifest("sentry"),
        remote(
            "sentry",
            origin,
            "https://mcp.sentry.dev/mcp",
            json!({
                "Authorization": {"env": "SENTRY_TOKEN", "prefix": "Bearer "},
                "X-Org": {"env": "SENTRY_ORG"},
            })
        )
    );
    assert_eq!(
        env.manifest("asana"),
        remote("asana", origin, "https://mcp.asana.com/mcp", Value::Null)
    );
    assert_eq!(
        env.manifest("time"),
        stdio(
            "time",
            origin,
            PYPI,
            json!(["uvx", "mcp-server-time", "--local-timezone=Europe/Paris"]),
            None
        )
    );
    assert_eq!(
        env.manifest("api"),
        stdio(
            "api",
            origin,
            ASKS,
            json!(["/usr/local/bin/api-server", "--root", "${HOME}/api"]),
            Some(json!({
                "API_BASE": {"env": "API_BASE_URL"},
                "OPENAI_API_KEY": {"env": "OPENAI_API_KEY"},
            }))
        )
    );
    assert!(
        run.stdout
            .contains("\"linear\": skipped: it uses the SSE transport"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("its default (\"acme\") is not carried over"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("skilld passes as written"), "{}", run.stdout);
}

#[test]
fn cursor_configs_are_found_in_home_and_project() {
    let env = Env::new();
    env.config(
        &env.home.join(".cursor/mcp.json"),
        &format!(
            r#"{{"mcpServers": {{
  "openai-docs": {{ "url": "https://docs.example.com/mcp", "headers": {{ "Authorization": "Bearer {OPENAI_KEY}" }} }},
  "memory": {{ "command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"] }}
}}}}"#
        ),
    );
    env.config(
        &env.project.join(".cursor/mcp.json"),
        r#"{"mcpServers": {
  "brave": { "command": "npx", "args": ["-y", "@modelcontextprotocol/server-brave-search"],
             "env": { "BRAVE_API_KEY": "${env:BRAVE_API_KEY}" } }
}}"#,
    );
    let run = env.import(&["--into", env.into.to_str().unwrap()]);
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    assert_eq!(skills(&env.into), ["brave", "memory", "openai-docs"]);
    assert!(
        run.stdout
            .contains(".cursor/mcp.json (Cursor's mcp.json): 2 servers"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("read .cursor/mcp.json (Cursor's mcp.json): 1 servers"),
        "{}",
        run.stdout
    );
    let origin = "Cursor's mcp.json";
    assert_eq!(
        env.manifest("openai-docs"),
        remote(
            "openai-docs",
            origin,
            "https://docs.example.com/mcp",
            json!({"Authorization": {"env": "OPENAI_DOCS_AUTHORIZATION", "prefix": "Bearer "}})
        )
    );
    assert!(
        run.stdout.contains("needs OPENAI_DOCS_AUTHORIZATION in skilld's environment: the config held the Authorization header's value literally"),
        "{}",
        run.stdout
    );
    assert_eq!(
        env.manifest("brave")["implementation"]["env"],
        json!({"BRAVE_API_KEY": {"env": "BRAVE_API_KEY"}})
    );
    // Started by npx, which downloads it: it reaches the npm registry.
    assert_eq!(env.manifest("memory")["network"], reach(NPM));
    assert_nowhere(&env.into, OPENAI_KEY);
    assert!(!run.stdout.contains(OPENAI_KEY));
}

#[test]
fn vscode_mcp_json_with_inputs_and_comments() {
    let env = Env::new();
    let file = env.config(
        &env.project.join(".vscode/mcp.json"),
        r#"{
  // Inputs VS Code prompts for once, and keeps.
  "inputs": [
    { "type": "promptString", "id": "perplexity-key", "description": "Perplexity API Key", "password": true }
  ],
  "servers": {
    "Perplexity": {
      "type": "stdio",
      "command": "npx",
      "args": ["-y", "server-perplexity-ask"],
      "env": { "PERPLEXITY_API_KEY": "${input:perplexity-key}", "HOME_DIR": "${env:HOME}", },
    },
    "github": {
      "type": "http",
      "url": "https://api.githubcopilot.com/mcp/",
      "headers": { "Authorization": "Bearer ${input:github_pat}" }
    },
    /* a project-local server */
    "git": { "command": "uvx", "args": ["mcp-server-git", "--repository", "${workspaceFolder}"] }
  }
}"#,
    );
    let run = env.import_file(&file, &[]);
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    env.assert_checks();
    assert_eq!(skills(&env.into), ["git", "github", "perplexity"]);
    let origin = "VS Code's mcp.json";
    let perplexity = stdio(
        "perplexity",
        origin,
        NPM,
        json!(["npx", "-y", "server-perplexity-ask"]),
        Some(json!({
            "PERPLEXITY_API_KEY": {"env": "PERPLEXITY_KEY"},
            "HOME_DIR": {"env": "HOME"},
        })),
    );
    assert_eq!(
        env.manifest("perplexity"),
        described(perplexity, "Perplexity", origin)
    );
    assert_eq!(
        env.manifest("github"),
        remote(
            "github",
            origin,
            "https://api.githubcopilot.com/mcp/",
            json!({"Authorization": {"env": "GITHUB_PAT", "prefix": "Bearer "}})
        )
    );
    // Started by uvx, which downloads it: it reaches PyPI.
    assert_eq!(env.manifest("git")["network"], reach(PYPI));
    assert!(run.stdout.contains("needs PERPLEXITY_KEY in skilld's environment: the config's input \"perplexity-key\": Perplexity API Key"), "{}", run.stdout);
    assert!(
        run.stdout.contains("\"Perplexity\": named perplexity"),
        "{}",
        run.stdout
    );
}

#[test]
fn names_are_normalised_and_collisions_numbered() {
    let env = Env::new();
    let file = env.config(
        &env.project.join("servers.json"),
        r#"{"mcpServers": {
  "My_Server (prod)": { "command": "srv", "args": ["a"] },
  "my-server-prod": { "command": "srv", "args": ["b"] },
  "my server prod!": { "command": "srv", "args": ["c"] },
  "@@@": { "command": "srv", "args": ["d"] }
}}"#,
    );
    let other = env.config(
        &env.project.join("again.json"),
        r#"{"mcpServers": {"my-server-prod": { "command": "srv", "args": ["b"] }}}"#,
    );
    let run = env.import(&[
        file.to_str().unwrap(),
        other.to_str().unwrap(),
        "--into",
        env.into.to_str().unwrap(),
    ]);
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    assert_eq!(
        skills(&env.into),
        ["my-server-prod", "my-server-prod-2", "my-server-prod-3", "server"]
    );
    let args = |skill: &str| env.manifest(skill)["implementation"]["command"][1].clone();
    // Keys in byte order: "@@@", "My_Server (prod)", "my server prod!", "my-server-prod".
    assert_eq!(args("server"), json!("d"));
    assert_eq!(args("my-server-prod"), json!("a"));
    assert_eq!(args("my-server-prod-2"), json!("c"));
    assert_eq!(args("my-server-prod-3"), json!("b"));
    assert!(
        run.stdout.contains("\"my-server-prod\": my-server-prod is taken by another server of this import; this one is my-server-prod-3"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("\"my-server-prod\": skipped: the same server as \"my-server-prod\""),
        "{}",
        run.stdout
    );
    assert_eq!(env.manifest("my-server-prod")["name"], json!("my-server-prod"));
}

#[test]
fn existing_skills_are_left_alone_unless_forced() {
    let env = Env::new();
    let file = env.config(
        &env.project.join(".mcp.json"),
        r#"{"mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"]}}}"#,
    );
    std::fs::create_dir_all(env.into.join("time")).unwrap();
    std::fs::write(env.into.join("time/SKILL.md"), "mine").unwrap();
    let run = env.import_file(&file, &[]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(
        run.stdout.contains("\"time\": skipped:") && run.stdout.contains("left alone (--force"),
        "{}",
        run.stdout
    );
    assert_eq!(skills(&env.into.join("time")), ["SKILL.md"]);

    let run = env.import_file(&file, &["--dry-run", "--force"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(run.stdout.contains("would write"), "{}", run.stdout);
    assert!(
        run.stdout.contains("backend: mcp") && run.stdout.contains("- mcp-server-time"),
        "{}",
        run.stdout
    );
    assert_eq!(skills(&env.into.join("time")), ["SKILL.md"]);

    let run = env.import_file(&file, &["--force"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(skills(&env.into.join("time")), ["SKILL.md", "SKILL.yaml"]);
    assert_eq!(
        env.manifest("time")["implementation"]["command"],
        json!(["uvx", "mcp-server-time"])
    );
}

#[test]
fn dry_run_writes_nothing() {
    let env = Env::new();
    let file = env.config(
        &env.project.join(".mcp.json"),
        &format!(
            r#"{{"mcpServers": {{"gh": {{"command": "gh-mcp", "env": {{"GH_TOKEN": "{GITHUB_PAT}"}}}}}}}}"#
        ),
    );
    let run = env.import_file(&file, &["--dry-run"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(!env.into.exists());
    let yaml = run.stdout.split("SKILL.yaml:\n").nth(1).unwrap();
    assert!(yaml.contains("GH_TOKEN:\n      env: GH_TOKEN"), "{}", run.stdout);
    assert!(run.stdout.contains("needs GH_TOKEN"));
    assert!(!run.stdout.contains(GITHUB_PAT));
}

/// The operator names the registries once (`[egress] registries`): an
/// `npx` server's list is the mirror, not the public registry; a bad
/// host there is refused, naming the key.
#[test]
fn the_operators_registries_are_what_package_runners_reach() {
    let env = Env::new();
    let file = env.config(
        &env.project.join(".mcp.json"),
        r#"{"mcpServers": {"memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}}}"#,
    );
    let config = env.project.join("skilld.toml");
    std::fs::write(&config, "[egress.registries]\nnpm = [\"npm.mirror.internal\"]\n").unwrap();
    let run = env.import_file(&file, &["--config", config.to_str().unwrap()]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(
        env.manifest("memory")["network"],
        json!({"allow": ["npm.mirror.internal"]})
    );
    std::fs::write(
        &config,
        "[egress.registries]\nnpm = [\"https://npm.mirror.internal/\"]\n",
    )
    .unwrap();
    let run = env.import_file(&file, &["--config", config.to_str().unwrap(), "--force"]);
    assert_eq!(run.code, Some(1), "{}", run.stdout);
    assert!(
        run.stderr.contains("egress.registries") && run.stderr.contains("scheme"),
        "{}",
        run.stderr
    );
}

#[test]
fn skilld_names_are_never_referenced() {
    let env = Env::new();
    let file = env.config(
        &env.project.join(".mcp.json"),
        r#"{"mcpServers": {
  "inner": { "command": "inner-mcp", "env": { "SKILLD_TOKEN": "hunter2", "MODE": "${SKILLD_MODE}" } },
  "far": { "type": "http", "url": "https://far.example.com/mcp", "headers": { "Authorization": "Bearer ${SKILLD_API_KEY}" } }
}}"#,
    );
    let run = env.import_file(&file, &[]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    env.assert_checks();
    assert_eq!(
        env.manifest("inner")["implementation"]["env"],
        json!({
            "SKILLD_TOKEN": {"env": "UPSTREAM_SKILLD_TOKEN"},
            "MODE": {"env": "UPSTREAM_SKILLD_MODE"},
        })
    );
    assert_eq!(
        env.manifest("far")["implementation"]["headers"],
        json!({"Authorization": {"env": "UPSTREAM_SKILLD_API_KEY", "prefix": "Bearer "}})
    );
    assert!(run.stdout.contains("renamed from SKILLD_TOKEN"), "{}", run.stdout);
    assert_nowhere(&env.into, "hunter2");
}

#[test]
fn bad_inputs_exit_1_with_a_reason() {
    let env = Env::new();
    let into = env.into.to_str().unwrap();
    let cases: [(&str, Option<&str>, &str); 5] = [
        ("missing.json", None, "cannot read"),
        ("broken.json", Some("{\"mcpServers\": {"), "is not JSON"),
        (
            "settings.json",
            Some("{\"editor.fontSize\": 12}"),
            "has no \"mcpServers\" or \"servers\" object",
        ),
        ("empty.json", Some("{\"mcpServers\": {}}"), "lists no MCP servers"),
        ("list.json", Some("[1, 2]"), "has no \"mcpServers\""),
    ];
    for (name, text, message) in cases {
        let path = env.project.join(name);
        if let Some(text) = text {
            std::fs::write(&path, text).unwrap();
        }
        let run = env.import(&[path.to_str().unwrap(), "--into", into]);
        assert_eq!(run.code, Some(1), "{name}: {}", run.stderr);
        assert!(run.stderr.contains(message), "{name}: {}", run.stderr);
        assert!(!env.into.exists(), "{name}");
    }
}

#[test]
fn a_bad_server_exits_1_and_the_others_are_written() {
    let env = Env::new();
    let file = env.config(
        &env.project.join(".mcp.json"),
        &format!(
            r#"{{"mcpServers": {{
  "nothing": {{ "env": {{ "A": "b" }} }},
  "leaky": {{ "command": "mcp-proxy", "args": ["--api-key", "{OPENAI_KEY}"] }},
  "good": {{ "command": "good-mcp" }}
}}}}"#
        ),
    );
    let run = env.import_file(&file, &[]);
    assert_eq!(run.code, Some(1), "{}", run.stdout);
    assert!(run.stderr.contains("server \"nothing\""), "{}", run.stderr);
    assert!(run.stderr.contains("neither a \"command\""), "{}", run.stderr);
    assert!(run.stderr.contains("server \"leaky\"") && run.stderr.contains("looks like a credential"));
    assert_eq!(skills(&env.into), ["good"]);
    assert_nowhere(&env.into, OPENAI_KEY);
    assert!(!run.stderr.contains(OPENAI_KEY));
}

#[test]
fn nothing_found_exits_1_and_says_where_it_looked() {
    let env = Env::new();
    let run = env.import(&["--into", env.into.to_str().unwrap()]);
    assert_eq!(run.code, Some(1));
    assert!(
        run.stderr.contains("no MCP servers found; looked in:"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("claude_desktop_config.json") && run.stderr.contains(".vscode/mcp.json"));
}

#[test]
fn a_write_failure_exits_2() {
    let env = Env::new();
    let file = env.config(
        &env.project.join(".mcp.json"),
        r#"{"mcpServers": {"a": {"command": "a"}}}"#,
    );
    let blocker = env.project.join("not-a-dir");
    std::fs::write(&blocker, "").unwrap();
    let into = blocker.join("skills");
    let run = env.import(&[file.to_str().unwrap(), "--into", into.to_str().unwrap()]);
    assert_eq!(run.code, Some(2), "{}", run.stdout);
    assert!(run.stderr.contains("cannot write"), "{}", run.stderr);
}

#[test]
fn the_default_is_the_users_skills_directory() {
    let env = Env::new();
    env.config(
        &env.home.join(".config/Claude/claude_desktop_config.json"),
        r#"{"mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"]}}}"#,
    );
    let run = env.import(&[]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let home_skills = env.home.join(".config/skilld/skills");
    assert_eq!(manifest_in(&home_skills, "time")["name"], json!("time"));

    let xdg = env.home.join("xdg");
    let out = skilld()
        .arg("import")
        .current_dir(&env.project)
        .env("HOME", &env.home)
        .env("XDG_CONFIG_HOME", &xdg)
        .output()
        .unwrap();
    assert_exit(&out, 0, "");
    assert_eq!(
        manifest_in(&xdg.join("skilld/skills"), "time")["name"],
        json!("time")
    );
}

#[test]
fn a_config_found_twice_is_read_once() {
    let env = Env::new();
    env.config(
        &env.home.join(".cursor/mcp.json"),
        r#"{"mcpServers": {"memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}}}"#,
    );
    // In the home directory, ./.cursor/mcp.json is ~/.cursor/mcp.json.
    let out = skilld()
        .args(["import", "--into", env.into.to_str().unwrap()])
        .current_dir(&env.home)
        .env("HOME", &env.home)
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert_eq!(stdout.matches("read ").count(), 1, "{stdout}");
    assert!(!stdout.contains("skipped"), "{stdout}");
    assert_eq!(skills(&env.into), ["memory"]);
}
