//! The MCP gateway's kit: upstream servers, a gate in front of them, and
//! exchanges through it.

use super::{TestServer, options, root, tempdir};
use serde_json::{Value, json};
use skilld::invoke::RunSettings;
use skilld::skill::Trust;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The kit of real servers, or `None` (with a note) where it was not
/// built; under CI its absence fails the test.
pub fn kit() -> Option<PathBuf> {
    match std::env::var_os("SKILLD_UPSTREAMS").map(PathBuf::from) {
        Some(kit) if kit.join(".ready").is_file() => Some(kit),
        _ if std::env::var_os("CI").is_some() => {
            panic!(
                "SKILLD_UPSTREAMS is not a built kit: run `bash tests/mcp-upstreams/kit.sh` (.ci/run does)"
            )
        }
        _ => {
            eprintln!(
                "skipped: no MCP server kit; export SKILLD_UPSTREAMS=$(bash tests/mcp-upstreams/kit.sh)"
            );
            None
        }
    }
}

/// A gate: a server over one skills directory, its upstreams readable in
/// the sandbox, following upstreams' changes as `skilld serve` does.
pub struct Gate {
    pub server: TestServer,
    pub _skills: tempfile::TempDir,
    pub _follow: Option<tokio::task::JoinHandle<()>>,
}

impl Gate {
    /// `area`'s files are readable in the sandbox, and its logs writable.
    pub async fn start(kit: &Path, skills: tempfile::TempDir, area: &Path) -> Self {
        Self::start_idle(kit, skills, area, Duration::from_secs(60)).await
    }

    /// With servers stopped after `idle` without a call.
    pub async fn start_idle(kit: &Path, skills: tempfile::TempDir, area: &Path, idle: Duration) -> Self {
        let mut settings = RunSettings::default();
        settings
            .sandbox
            .read_paths
            .extend([kit.to_path_buf(), area.to_path_buf()]);
        settings.sandbox.write_paths.push(area.join("logs"));
        settings.backend_idle = idle;
        let server = TestServer::builder(options(vec![root(skills.path(), Trust::User)]))
            .settings(settings)
            .start()
            .await;
        let follow = skilld::watch::follow_offers(server.catalog.clone());
        Self {
            server,
            _skills: skills,
            _follow: follow,
        }
    }

    pub async fn invoke(&self, tool: &str, arguments: Value) -> (u16, Value) {
        self.server.invoke(tool, arguments).await
    }

    /// Invokes, and approves the held call once, answering its run.
    pub async fn approved(&self, tool: &str, arguments: Value) -> Value {
        let (status, held) = self.invoke(tool, arguments).await;
        assert_eq!(status, 202, "{held}");
        self.server.approve_once_and_wait(&held).await
    }

    pub async fn decide(&self, held: &Value, verdict: &str, scope: &str) {
        let id = held["approval_id"].as_str().unwrap();
        let path = format!("/approvals/{id}/{verdict}");
        let (status, body) = super::Api::of(&self.server)
            .post(&path, json!({"scope": scope}))
            .await;
        assert_eq!(status, 200, "{body}");
    }

    /// The tools of `skill` the catalog lists now, by name.
    pub fn tools(&self, skill: &str) -> Vec<String> {
        let catalog = self.server.catalog.current();
        let mut names: Vec<String> = catalog
            .skill(skill)
            .map(|s| s.tools.iter().map(|t| t.name.clone()).collect())
            .unwrap_or_default();
        names.sort();
        names
    }

    pub fn hash(&self, skill: &str) -> String {
        self.server
            .catalog
            .current()
            .skill(skill)
            .map(|s| s.hash.clone())
            .unwrap_or_default()
    }

    /// Waits until the catalog's hash of `skill` is no longer `old`: the
    /// upstream polls its file, announces, and the catalog reloads, which
    /// under a loaded CI machine takes seconds.
    pub async fn rehashed(&self, skill: &str, old: &str) -> String {
        for _ in 0..300 {
            let now = self.hash(skill);
            if !now.is_empty() && now != old {
                return now;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the catalog did not reload {skill} after its upstream changed");
    }
}

/// `SKILL.yaml` of an `mcp` skill.
pub fn manifest(name: &str, implementation: &str, extra: &str) -> String {
    format!(
        "name: {name}\nversion: 1.0.0\ndescription: The {name} MCP server, gated.\ntypes: [tool]\n\
         permissions: [shell:exec]\n{extra}implementation:\n  backend: mcp\n{implementation}"
    )
}

/// Lines of an upstream's log.
pub fn logged(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

pub async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..100 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("never: {what}");
}

/// A scratch area for one test: readable by the sandbox's user, with a
/// writable place for the upstream's log.
pub struct Area {
    pub dir: tempfile::TempDir,
    pub log: PathBuf,
    pub description: PathBuf,
}

pub fn area() -> Area {
    let dir = tempdir().unwrap();
    let logs = dir.path().join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&logs, std::fs::Permissions::from_mode(0o777)).unwrap();
    let log = logs.join("upstream.jsonl");
    let description = dir.path().join("description.txt");
    std::fs::write(&description, "Answers its text.").unwrap();
    Area {
        dir,
        log,
        description,
    }
}

pub fn moved_skills(a: &Area) -> tempfile::TempDir {
    let skills = tempfile::TempDir::new_in(a.dir.path()).unwrap();
    std::fs::remove_dir(skills.path()).unwrap();
    std::fs::rename(a.dir.path().join("skills"), skills.path()).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(skills.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    skills
}

pub async fn mcp_exchange(gate: &Gate, method: &str, mut params: Value) -> (u16, Vec<Value>) {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let mut req = super::Api::of(&gate.server)
        .req(reqwest::Method::POST, "/mcp")
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", method);
    if let Some(name) = params["name"].as_str().or(params["uri"].as_str()) {
        req = req.header("Mcp-Name", name);
    }
    let res = req.body(body.to_string()).send().await.unwrap();
    let status = res.status().as_u16();
    let text = res.text().await.unwrap();
    let messages = text
        .lines()
        .map(|l| l.strip_prefix("data:").unwrap_or(l).trim())
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect();
    (status, messages)
}
