//! Seed 001's scripts skills: every runtime its table lists runs in a
//! real `skilld serve` (`.ts` through the pinned ts-node of
//! `tests/ts-runner`, found on the server's `PATH`), a `.ts` script with
//! no runner is reported when the skill loads rather than failing at each
//! call, and the file operations skilld performs for a skill keep the
//! seed's limits (read 1 MB, write 100 KB, its list of extensions).

use crate::common::{call, checkout, fails_with, server_over, star_skill, tempdir, write_file};
use serde_json::{Value, json};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

/// `tests/ts-runner`'s `node_modules/.bin`, its pinned ts-node installed
/// (`npm ci`, as `.ci/run` does) where the sandbox's user can read it;
/// `None` without node and npm: skipped loudly, and failed in CI.
pub(crate) fn ts_runner() -> Option<PathBuf> {
    let dir = checkout().join("tests/ts-runner");
    let npm = Command::new("npm")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !npm {
        let message = "the TypeScript runner needs node and npm (apt-get install -y nodejs npm)";
        if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
            panic!("{message}; .ci/run installs them");
        }
        let _ = writeln!(std::io::stderr(), "\n!!!!!!!!!! SKIPPED: {message} !!!!!!!!!!\n");
        return None;
    }
    // One `npm ci` at a time; the lock goes with `lock`, also on panic.
    let lock = File::create(dir.join(".install.lock")).unwrap();
    lock.lock().unwrap();
    let bin = dir.join("node_modules/.bin");
    if !bin.join("ts-node").exists() {
        let out = Command::new("npm")
            .current_dir(&dir)
            .args([
                "ci",
                "--prefer-offline",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "npm ci in tests/ts-runner:\n{}", show(&out));
    }
    Some(bin)
}

fn show(out: &Output) -> String {
    format!(
        "{}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A scripts skill with one script per runtime of seed 001's table, each
/// printing its runtime's name and its arguments.
fn every_runtime(root: &Path) {
    let dir = root.join("runtimes");
    write_file(
        &dir.join("SKILL.md"),
        "---\nname: runtimes\ndescription: One script per runtime of seed 001.\nread_only: true\n---\n\n\
         # Runtimes\n\nEach script prints its runtime and its arguments.\n",
    );
    let scripts = [
        ("py.py", "import sys\nprint(\"py\", *sys.argv[1:])\n"),
        ("sh.sh", "echo sh \"$@\"\n"),
        ("bash.bash", "echo bash \"${@}\"\n"),
        (
            "js.js",
            "console.log([\"js\", ...process.argv.slice(2)].join(\" \"));\n",
        ),
        (
            "ts.ts",
            "// Types that only TypeScript reads.\ninterface Said {\n  words: string[];\n}\n\
             const said: Said = { words: [\"ts\", ...process.argv.slice(2)] };\n\
             const text: string = said.words.join(\" \");\nconsole.log(text);\n",
        ),
    ];
    for (file, text) in scripts {
        write_file(&dir.join("scripts").join(file), text);
    }
}

/// A `skilld serve` of the real binary on port 0 with `path` as its `PATH`,
/// serving `skills` as bundled; stopped when dropped.
struct Served {
    child: Child,
    url: String,
    _data: tempfile::TempDir,
}

impl Served {
    fn start(skills: &Path, path: &str) -> Self {
        let data = tempdir().unwrap();
        let mut child = crate::common::skilld()
            .args(["serve", "--bind", "127.0.0.1:0", "--no-watch", "--data-dir"])
            .arg(data.path())
            .arg("--workspace")
            .arg(skills)
            .arg("--skills")
            .arg(format!("bundled={}", skills.display()))
            .env("PATH", path)
            .env_remove("SKILLD_DATABASE_URL")
            .env_remove("SKILLD_DATA_DIR")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let url = crate::common::announced_url(&mut child).unwrap();
        Self {
            child,
            url,
            _data: data,
        }
    }

    async fn get(&self, path: &str) -> Value {
        reqwest::get(format!("{}{path}", self.url))
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    async fn invoke(&self, tool: &str, args: &[&str]) -> (u16, Value) {
        let res = reqwest::Client::new()
            .post(format!("{}/tools/{tool}/invoke", self.url))
            .json(&json!({"arguments": {"args": args}}))
            .send()
            .await
            .unwrap();
        (res.status().as_u16(), res.json().await.unwrap())
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = self.child.wait();
    }
}

fn diagnostics_of(all: &Value, code: &str) -> Vec<String> {
    all["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["code"] == code)
        .map(|d| {
            format!(
                "{}: {}",
                d["path"].as_str().unwrap(),
                d["message"].as_str().unwrap()
            )
        })
        .collect()
}

#[tokio::test]
async fn every_runtime_seed_001_lists_runs_in_a_real_server() {
    let Some(runner) = ts_runner() else { return };
    let skills = tempdir().unwrap();
    every_runtime(skills.path());
    // The pinned runner on the server's PATH, as a global ts-node would be.
    let path = format!(
        "{}:{}",
        runner.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let server = Served::start(skills.path(), &path);
    let diagnostics = server.get("/diagnostics").await;
    assert_eq!(
        diagnostics_of(&diagnostics, "program_not_found"),
        Vec::<String>::new(),
        "{diagnostics}"
    );
    for runtime in ["py", "sh", "bash", "js", "ts"] {
        let (status, envelope) = server.invoke(&format!("runtimes_{runtime}"), &["a b", "c"]).await;
        assert_eq!(status, 200, "{envelope}");
        assert_eq!(
            (envelope["success"].as_bool(), envelope["output"].as_str()),
            (Some(true), Some(format!("{runtime} a b c\n").as_str())),
            "{runtime}: {envelope}"
        );
    }
}

/// Whether this host's `node` strips TypeScript types itself (22.6 and
/// later): then `.ts` runs without any runner.
fn node_strips_types() -> bool {
    let out = Command::new("node").arg("--version").output();
    let version = out.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    let parse = |v: &str| -> Option<(u32, u32)> {
        let mut parts = v.strip_prefix('v')?.split('.');
        Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
    };
    version.ok().and_then(|v| parse(&v)).is_some_and(|v| v >= (22, 6))
}

/// The system's own directories as `PATH`: its interpreters, and no
/// TypeScript runner unless the system has one installed there.
const SYSTEM_PATH: &str = "/usr/bin:/bin";

fn system_has_a_runner() -> bool {
    ["/usr/bin", "/bin"]
        .iter()
        .any(|d| Path::new(d).join("ts-node").exists())
}

#[tokio::test]
async fn a_ts_script_without_a_runner_is_reported_when_it_loads() {
    let skills = tempdir().unwrap();
    every_runtime(skills.path());
    if system_has_a_runner() {
        eprintln!("skipped: this system has its own ts-node in {SYSTEM_PATH}");
        return;
    }
    let path = SYSTEM_PATH;
    let strips = node_strips_types();

    let out = crate::common::skilld()
        .arg("check")
        .arg(skills.path())
        .env("PATH", path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let warned = stdout
        .lines()
        .find(|l| l.contains("warning[program_not_found]") && l.contains("ts.ts"));
    if strips {
        assert!(warned.is_none(), "node strips types here: {}", show(&out));
    } else {
        let line = warned.unwrap_or_else(|| panic!("no warning for ts.ts: {}", show(&out)));
        for says in ["ts-node", "runtimes.ts", "Node 22.6"] {
            assert!(line.contains(says), "{says:?} not in {line}");
        }
        assert_eq!(
            out.status.code(),
            Some(0),
            "a warning, not an error: {}",
            show(&out)
        );
    }
    assert!(
        !stdout.contains("py.py") && !stdout.contains("js.js"),
        "the other runtimes are found: {stdout}"
    );

    let server = Served::start(skills.path(), path);
    let diagnostics = server.get("/diagnostics").await;
    let found = diagnostics_of(&diagnostics, "program_not_found");
    let (status, envelope) = server.invoke("runtimes_ts", &["x"]).await;
    assert_eq!(status, 200, "{envelope}");
    if strips {
        assert_eq!(found, Vec::<String>::new(), "{diagnostics}");
        assert_eq!(envelope["output"], "ts x\n", "{envelope}");
    } else {
        assert_eq!(found.len(), 1, "{diagnostics}");
        assert!(
            found[0].contains("ts.ts") && found[0].contains("ts-node"),
            "{found:?}"
        );
        assert_eq!(envelope["success"], false, "{envelope}");
        assert_eq!(envelope["error"], "command not found: ts-node", "{envelope}");
    }
    let (_, js) = server.invoke("runtimes_js", &["x"]).await;
    assert_eq!(js["output"], "js x\n", "{js}");
}

const FILES: &str = r#"
def size(args):
    return str(len(read_file(args["path"])))

def write(args):
    write_file(args["path"], "x" * args["size"])
    return "wrote " + args["path"]

register_tool("limits_size", "Reads a file, and says its size.", {"type": "object"}, size)
register_tool("limits_write", "Writes a file of a size.", {"type": "object"}, write)
"#;

#[tokio::test]
async fn seed_001s_file_limits_hold_for_what_skilld_reads_and_writes() {
    const MIB: usize = 1024 * 1024;
    let (server, _skills) = server_over(|root| {
        star_skill(root, "limits", "permissions: [file:read, file:write]\n", FILES);
        let refs = root.join("limits/references");
        std::fs::create_dir_all(&refs).unwrap();
        std::fs::write(refs.join("exact.md"), "x".repeat(MIB)).unwrap();
        std::fs::write(refs.join("big.md"), "x".repeat(MIB + 1)).unwrap();
        std::fs::write(refs.join("tool.exe"), "MZ").unwrap();
        std::fs::write(refs.join(".env"), "KEY=1").unwrap();
    })
    .await;

    // Starlark's read_file: 1 MiB, and only the seed's kinds of file.
    let exact = call(&server, "limits_size", json!({"path": "references/exact.md"})).await;
    assert_eq!(exact["output"], MIB.to_string(), "{exact}");
    fails_with(
        &server,
        "limits_size",
        json!({"path": "references/big.md"}),
        &format!("is larger than {MIB} bytes"),
    )
    .await;
    for kind in ["references/tool.exe", "references/.env"] {
        fails_with(
            &server,
            "limits_size",
            json!({"path": kind}),
            "not a kind of file a skill reads or writes",
        )
        .await;
    }

    // Its write_file: 100 KiB, and the same kinds.
    let wrote = call(
        &server,
        "limits_write",
        json!({"path": "out.txt", "size": 100 * 1024}),
    )
    .await;
    assert_eq!(wrote["output"], "wrote out.txt", "{wrote}");
    fails_with(
        &server,
        "limits_write",
        json!({"path": "out.txt", "size": 100 * 1024 + 1}),
        "larger than 102400 bytes",
    )
    .await;
    fails_with(
        &server,
        "limits_write",
        json!({"path": "out.exe", "size": 1}),
        "not a kind of file a skill reads or writes",
    )
    .await;

    // The files route serves references by the same rules.
    let client = reqwest::Client::new();
    let status = |path: &str| {
        let url = server.url(&format!("/skills/limits/files/{path}"));
        let client = client.clone();
        async move { client.get(url).send().await.unwrap().status().as_u16() }
    };
    assert_eq!(status("references/exact.md").await, 200);
    assert_eq!(status("references/big.md").await, 413);
    assert_eq!(status("references/tool.exe").await, 403);
}
