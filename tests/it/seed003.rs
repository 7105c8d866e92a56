//! Seed 003's server side of entrypoint skills: `image` must be on the
//! server's allowlist (seed 003's three images unless configured), checked
//! when a skill is linted, loaded and installed; and what a skill does not
//! set of timeout (120 s), memory (256 MiB) and CPU (0.5) comes from the
//! seed's defaults, or the config's, with the memory bounding the run's
//! cgroup rather than its address space (under which Node cannot start).

use crate::common::{Api, TestServer, installed_root, options, root, tempdir, upload, write_file, zip_of};
use serde_json::{Value, json};
use skilld::catalog::CatalogOptions;
use skilld::skill::Trust;
use std::path::Path;

/// Seed 003's own example, verbatim.
const SEED_EXAMPLE: &str = r#"---
name: data-analysis
version: "1.0.0"
description: Analyze CSV data and produce summary statistics
lang: python
image: python:3.12-slim
timeout: 60s
resources:
  memory: 256Mi
  cpu: "0.5"
---

# Data Analysis Skill

Analyze tabular data and produce descriptive statistics per column.

## Input

Provide a JSON object with a `data` field containing an array of records.

## Output

Returns summary statistics for each column including mean, median,
standard deviation, and min/max values.
"#;

/// What the example's entrypoint does, under seed 003's I/O contract.
const SEED_EXAMPLE_MAIN: &str = r#"import json, os, statistics

input_data = json.loads(os.environ.get("SANDBOX_INPUT", "{}"))
rows = input_data.get("data", [])
stats = {}
for column in sorted({k for r in rows for k in r}):
    values = [r[column] for r in rows if isinstance(r.get(column), (int, float))]
    if values:
        stats[column] = {"mean": statistics.mean(values), "median": statistics.median(values),
                         "min": min(values), "max": max(values)}
output_path = os.environ.get("SANDBOX_OUTPUT", "/sandbox/out/output.json")
os.makedirs(os.path.dirname(output_path), exist_ok=True)
with open(output_path, "w") as f:
    json.dump(stats, f)
print(f"{len(rows)} rows")
"#;

/// An entrypoint skill `name` with `front` in its frontmatter and its
/// entrypoint `main` (`scripts/main.py` or `main.js`, by `file`).
fn entrypoint(dir: &Path, name: &str, front: &str, file: &str, main: &str) {
    write_file(
        &dir.join(name).join("SKILL.md"),
        &format!(
            "---\nname: {name}\nversion: 1.0.0\ndescription: An entrypoint.\nread_only: true\n{front}---\n\nRuns.\n"
        ),
    );
    write_file(&dir.join(name).join("scripts").join(file), main);
}

fn seed_example(dir: &Path) {
    write_file(&dir.join("data-analysis/SKILL.md"), SEED_EXAMPLE);
    write_file(&dir.join("data-analysis/scripts/main.py"), SEED_EXAMPLE_MAIN);
}

const PRINTS: &str = "print('ran')\n";

fn codes_of(diagnostics: &Value, skill: &str) -> Vec<String> {
    diagnostics["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["skill"] == skill)
        .map(|d| d["code"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn an_image_off_the_allowlist_is_refused_at_lint_load_and_install() {
    let skills = tempdir().unwrap();
    seed_example(skills.path());
    entrypoint(
        skills.path(),
        "miner",
        "image: evil/miner:latest\n",
        "main.py",
        PRINTS,
    );
    // Without `image`, its language's default image is what must be allowed.
    entrypoint(skills.path(), "plain-node", "", "main.js", "console.log('ran')\n");

    // Lint: `skilld check` fails, pointing at the line.
    let out = crate::common::skilld()
        .arg("check")
        .arg(skills.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let line = stdout
        .lines()
        .find(|l| l.contains("error[image_not_allowed]"))
        .unwrap_or_else(|| panic!("{stdout}"));
    let at = format!("{}:6:1:", skills.path().join("miner/SKILL.md").display());
    assert!(line.starts_with(&at), "{line}");
    for says in [
        "evil/miner:latest",
        "python:3.12-slim, node:20-slim, bash:5",
        "image_allowlist",
    ] {
        assert!(line.contains(says), "{says:?} not in {line}");
    }
    assert_eq!(stdout.matches("image_not_allowed").count(), 1, "{stdout}");
    // With the admin's allowlist it passes.
    let config = tempdir().unwrap();
    let file = config.path().join("skilld.toml");
    std::fs::write(
        &file,
        "image_allowlist = [\"python:3.12-slim\", \"node:20-slim\", \"evil/*\"]\n",
    )
    .unwrap();
    let out = crate::common::skilld()
        .arg("check")
        .arg("--config")
        .arg(&file)
        .arg(skills.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // Load: the server leaves it out and says why.
    let installed = tempdir().unwrap();
    let opts = options(vec![
        root(skills.path(), Trust::User),
        installed_root(installed.path()),
    ]);
    let server = TestServer::builder(opts).start().await;
    let diagnostics = server.get_json("/diagnostics").await;
    assert_eq!(
        codes_of(&diagnostics, "miner"),
        ["image_not_allowed"],
        "{diagnostics}"
    );
    assert_eq!(
        codes_of(&diagnostics, "data-analysis"),
        Vec::<String>::new(),
        "{diagnostics}"
    );
    assert_eq!(
        codes_of(&diagnostics, "plain-node"),
        Vec::<String>::new(),
        "{diagnostics}"
    );
    let (status, _) = server.invoke("miner", json!({})).await;
    assert_eq!(status, 404);

    // Install: the upload is refused with the same finding; nothing stays.
    let md =
        "---\nname: digger\nversion: 1.0.0\ndescription: Mines.\nimage: evil/miner:latest\n---\n\nMines.\n";
    let zip = zip_of(&[("SKILL.md", md, false), ("scripts/main.py", PRINTS, false)]);
    let (status, _, problem) = upload(&server, zip, "?trust=user").await;
    assert_eq!(status, 422, "{problem}");
    let codes: Vec<&str> = problem["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, ["image_not_allowed"], "{problem}");
    assert!(!installed.path().join("digger").exists());
    let (status, _) = server.invoke("digger", json!({})).await;
    assert_eq!(status, 404);

    // The admin's allowlist lets it in.
    let mut opts = options(vec![root(skills.path(), Trust::User)]);
    opts.rules.image_allowlist = vec![
        "python:3.12-slim".to_owned(),
        "node:20-slim".to_owned(),
        "evil/*".to_owned(),
    ];
    let allowing = TestServer::builder(opts).start().await;
    let diagnostics = allowing.get_json("/diagnostics").await;
    assert_eq!(
        codes_of(&diagnostics, "miner"),
        Vec::<String>::new(),
        "{diagnostics}"
    );
    assert_eq!(allowing.get_json("/skills/miner").await["name"], "miner");
}

/// Prints what limits the run has: its address-space rlimit (from
/// `/proc/self/limits`) and its timeout's environment, from Node.
const NODE_LIMITS: &str = r#"const fs = require("fs");
const line = fs.readFileSync("/proc/self/limits", "utf8").split("\n").find((l) => l.startsWith("Max address space"));
fs.writeFileSync(process.env.SANDBOX_OUTPUT, JSON.stringify({ address_space: line.split(/\s{2,}/)[1] }));
console.log("node ran");
"#;

async fn detail(server: &TestServer, skill: &str) -> (u64, Value) {
    let detail = server.get_json(&format!("/skills/{skill}")).await;
    (
        detail["timeout_secs"].as_u64().unwrap(),
        detail["resources"].clone(),
    )
}

async fn dry_run(server: &TestServer, tool: &str) -> Value {
    Api::anonymous(server)
        .post_value(
            &format!("/tools/{tool}/invoke?dry_run=true"),
            json!({"arguments": {}}),
        )
        .await
}

fn defaults_skills(dir: &Path) {
    seed_example(dir);
    entrypoint(dir, "plain-node", "", "main.js", NODE_LIMITS);
    entrypoint(
        dir,
        "own-limits",
        "timeout: 45s\nresources:\n  memory: 512Mi\n  cpu: \"1\"\n",
        "main.py",
        PRINTS,
    );
    crate::common::one_tool_skill(dir, "md_tool", "", "s", "echo {{s}}");
}

fn options_for(dir: &Path) -> CatalogOptions {
    options(vec![root(dir, Trust::Bundled)])
}

#[tokio::test]
async fn entrypoint_defaults_apply_unless_the_skill_or_the_config_says_otherwise() {
    const MIB: u64 = 1024 * 1024;
    let skills = tempdir().unwrap();
    defaults_skills(skills.path());
    let server = TestServer::builder(options_for(skills.path()))
        .allowed()
        .start()
        .await;

    // Seed 003's defaults where the skill says nothing, its own values
    // where it does; other dialects keep theirs.
    assert_eq!(
        detail(&server, "plain-node").await,
        (120, json!({"memory_bytes": 256 * MIB, "cpu": 0.5}))
    );
    assert_eq!(
        detail(&server, "own-limits").await,
        (45, json!({"memory_bytes": 512 * MIB, "cpu": 1.0}))
    );
    assert_eq!(
        detail(&server, "data-analysis").await,
        (60, json!({"memory_bytes": 256 * MIB, "cpu": 0.5}))
    );
    assert_eq!(detail(&server, "md-tool").await.0, 30);
    assert_eq!(server.get_json("/tools/plain_node").await["timeout_secs"], 120);

    // The default memory bounds the cgroup, where there is one.
    let report = server.invoker.sandbox().report(true);
    let dry = dry_run(&server, "plain_node").await;
    assert_eq!(dry["timeout_secs"], 120, "{dry}");
    if report.memory != "rlimit" {
        assert_eq!(dry["sandbox"]["memory_max"], 256 * MIB, "{dry}");
    }
    if report.cpu != "unavailable" {
        assert_eq!(dry["sandbox"]["cpu_max"], 0.5, "{dry}");
    }
    // ...and not the address space: Node starts under it.
    let (status, envelope) = server.invoke("plain_node", json!({})).await;
    assert_eq!(status, 200, "{envelope}");
    assert_eq!(envelope["output"], "node ran\n", "{envelope}");
    assert_eq!(envelope["parsed"]["address_space"], "unlimited", "{envelope}");

    // Seed 003's example runs as the seed says.
    let (status, envelope) = server
        .invoke(
            "data_analysis",
            json!({"data": [{"city": "Oslo", "temp": 4}, {"city": "Rome", "temp": 16}]}),
        )
        .await;
    assert_eq!(status, 200, "{envelope}");
    assert_eq!(envelope["output"], "2 rows\n", "{envelope}");
    assert_eq!(
        envelope["parsed"]["temp"],
        json!({"mean": 10, "median": 10.0, "min": 4, "max": 16}),
        "{envelope}"
    );

    // The config's defaults take the seed's place.
    let mut opts = options_for(skills.path());
    opts.rules.entrypoint.timeout_secs = 90;
    opts.rules.entrypoint.memory_bytes = Some(128 * MIB);
    opts.rules.entrypoint.cpu = Some(2.0);
    let configured = TestServer::builder(opts).start().await;
    assert_eq!(
        detail(&configured, "plain-node").await,
        (90, json!({"memory_bytes": 128 * MIB, "cpu": 2.0}))
    );
    assert_eq!(
        detail(&configured, "own-limits").await,
        (45, json!({"memory_bytes": 512 * MIB, "cpu": 1.0}))
    );
}
