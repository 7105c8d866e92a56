//! Dependencies, installed once per version at install time and never at
//! call time: `requirements.txt` into a virtualenv, `package.json` into a
//! `node_modules`, both under the version's `env/`.
//!
//! No package's own code runs while installing: pip takes wheels only
//! (`--only-binary=:all:`, so no `setup.py` is executed) and npm runs no
//! lifecycle scripts (`--ignore-scripts`). The installers get a cleared
//! environment, their own process group, a time limit and a size cap; their
//! output is kept, bounded, as the version's install log.

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

/// How dependencies are installed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DepsSettings {
    /// For each installer run (venv, pip, npm).
    pub timeout: Duration,
    /// What one version's `env/` may hold.
    pub max_bytes: u64,
    pub python: String,
    pub npm: String,
}

impl Default for DepsSettings {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(300),
            max_bytes: 1024 * 1024 * 1024,
            python: "python3".to_owned(),
            npm: "npm".to_owned(),
        }
    }
}

/// The most of an installer's output a version keeps.
pub const MAX_LOG_BYTES: usize = 256 * 1024;

/// The install log: lines kept up to [`MAX_LOG_BYTES`], each also sent to
/// whoever follows the upload.
#[derive(Clone, Default)]
pub struct Log {
    inner: Arc<Mutex<LogInner>>,
}

#[derive(Default)]
struct LogInner {
    text: String,
    cut: bool,
    follow: Option<tokio::sync::mpsc::UnboundedSender<String>>,
}

impl Log {
    pub fn following(follow: Option<tokio::sync::mpsc::UnboundedSender<String>>) -> Self {
        let log = Self::default();
        log.lock().follow = follow;
        log
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LogInner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn line(&self, line: &str) {
        let mut inner = self.lock();
        if let Some(follow) = &inner.follow {
            let _ = follow.send(line.to_owned());
        }
        if inner.text.len() + line.len() + 1 > MAX_LOG_BYTES {
            if !inner.cut {
                inner.cut = true;
                inner.text.push_str("… output cut: the log keeps 256 KiB\n");
            }
            return;
        }
        inner.text.push_str(line);
        inner.text.push('\n');
    }

    pub fn text(&self) -> String {
        self.lock().text.clone()
    }

    /// The last `n` lines, for an error's detail.
    pub fn tail(&self, n: usize) -> String {
        let text = self.text();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}

/// Whether the skill asks for any dependencies.
pub fn wanted(skill_dir: &Path) -> bool {
    skill_dir.join("requirements.txt").is_file() || skill_dir.join("package.json").is_file()
}

/// Installs what `skill_dir` asks for into `env` (which is made), or says
/// why it could not; `env` is removed again on failure.
pub async fn install(skill_dir: &Path, env: &Path, settings: &DepsSettings, log: &Log) -> Result<(), String> {
    let result = install_all(skill_dir, env, settings, log).await;
    if result.is_err() {
        let _ = tokio::fs::remove_dir_all(env).await;
    }
    result
}

async fn install_all(skill_dir: &Path, env: &Path, settings: &DepsSettings, log: &Log) -> Result<(), String> {
    tokio::fs::create_dir_all(env)
        .await
        .map_err(|e| format!("cannot make {}: {e}", env.display()))?;
    let requirements = skill_dir.join("requirements.txt");
    if requirements.is_file() {
        python(&requirements, env, settings, log).await?;
        within_cap(env, settings.max_bytes).await?;
    }
    let package = skill_dir.join("package.json");
    if package.is_file() {
        node(skill_dir, env, settings, log).await?;
        within_cap(env, settings.max_bytes).await?;
    }
    Ok(())
}

async fn python(requirements: &Path, env: &Path, settings: &DepsSettings, log: &Log) -> Result<(), String> {
    let venv = env.join("venv");
    let venv_arg = venv.display().to_string();
    let python = for_the_sandbox(&settings.python);
    log.line(&format!("$ {python} -m venv {venv_arg}"));
    run(&python, &["-m", "venv", &venv_arg], env, settings, log).await?;
    let pip = venv.join("bin").join("python").display().to_string();
    let req = requirements.display().to_string();
    let args = [
        "-m",
        "pip",
        "install",
        "--no-input",
        "--disable-pip-version-check",
        "--no-cache-dir",
        "--only-binary=:all:",
        "-r",
        &req,
    ];
    log.line(&format!("$ {pip} {}", args.join(" ")));
    run(&pip, &args, env, settings, log).await
}

async fn node(skill_dir: &Path, env: &Path, settings: &DepsSettings, log: &Log) -> Result<(), String> {
    copy_file(skill_dir, env, "package.json").await?;
    let locked = copy_file(skill_dir, env, "package-lock.json").await?;
    let cache = env.join(".npm-cache").display().to_string();
    let mut args = vec![if locked { "ci" } else { "install" }];
    args.extend([
        "--ignore-scripts",
        "--no-audit",
        "--no-fund",
        "--omit=dev",
        "--cache",
        &cache,
    ]);
    if !locked {
        args.push("--no-package-lock");
    }
    log.line(&format!("$ {} {}", settings.npm, args.join(" ")));
    let result = run(&settings.npm, &args, env, settings, log).await;
    let _ = tokio::fs::remove_dir_all(env.join(".npm-cache")).await;
    result
}

/// The program `name` as the virtualenv should be made with it: the
/// virtualenv's `python3` links to it, and tools run as the sandbox's user
/// when skilld is root, so it must be one that user can reach (root's own
/// `~/.pyenv` is not). The first on `PATH` that others can run, else the
/// name as given.
fn for_the_sandbox(name: &str) -> String {
    if name.contains('/') || !nix::unistd::geteuid().is_root() {
        return name.to_owned();
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .filter_map(|p| p.canonicalize().ok())
        .find(|p| runnable_by_others(p))
        .map_or_else(|| name.to_owned(), |p| p.display().to_string())
}

/// Whether a user other than the owner may run `program`: it is
/// executable by others and every directory above it lets others through.
fn runnable_by_others(program: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::metadata(p).map(|m| m.permissions().mode()).unwrap_or(0);
    mode(program) & 0o001 != 0 && program.ancestors().skip(1).all(|d| mode(d) & 0o001 != 0)
}

/// Copies `name` from the skill to `env` when the skill has it.
async fn copy_file(skill_dir: &Path, env: &Path, name: &str) -> Result<bool, String> {
    let from = skill_dir.join(name);
    if !from.is_file() {
        return Ok(false);
    }
    tokio::fs::copy(&from, env.join(name))
        .await
        .map_err(|e| format!("cannot copy {name}: {e}"))?;
    Ok(true)
}

/// Runs one installer in `cwd` with a cleared environment, its output
/// logged line by line; killed with its whole group at the time limit.
async fn run(
    program: &str,
    args: &[&str],
    cwd: &Path,
    settings: &DepsSettings,
    log: &Log,
) -> Result<(), String> {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .current_dir(cwd)
        .env_clear()
        .env(
            "PATH",
            std::env::var("PATH").unwrap_or_else(|_| crate::runner::DEFAULT_PATH.to_owned()),
        )
        .env("HOME", cwd)
        .env("LANG", "C.UTF-8")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|e| format!("cannot start {program}: {e}"))?;
    let pgid = child.id().and_then(|id| i32::try_from(id).ok());
    let out = pump(child.stdout.take(), log.clone());
    let err = pump(child.stderr.take(), log.clone());
    let waited = tokio::time::timeout(settings.timeout, async {
        let (status, _, _) = tokio::join!(child.wait(), out, err);
        status
    })
    .await;
    let status = match waited {
        Ok(status) => status.map_err(|e| format!("{program} failed: {e}"))?,
        Err(_) => {
            if let Some(pgid) = pgid {
                let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), nix::sys::signal::SIGKILL);
            }
            let why = format!("{program} did not finish in {}s", settings.timeout.as_secs());
            log.line(&why);
            return Err(why);
        }
    };
    if status.success() {
        Ok(())
    } else {
        let why = format!("{program} exited with {status}");
        log.line(&why);
        Err(why)
    }
}

async fn pump(pipe: Option<impl AsyncRead + Unpin>, log: Log) {
    let Some(pipe) = pipe else { return };
    let mut lines = BufReader::new(pipe).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        log.line(&line);
    }
}

async fn within_cap(env: &Path, max: u64) -> Result<(), String> {
    let dir = env.to_path_buf();
    let size = tokio::task::spawn_blocking(move || tree_size(&dir))
        .await
        .map_err(|e| e.to_string())?;
    if size > max {
        return Err(format!(
            "the dependencies take {size} bytes, over the {max} allowed"
        ));
    }
    Ok(())
}

/// Bytes under `dir`, links not followed.
fn tree_size(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let Ok(meta) = entry.path().symlink_metadata() else {
                continue;
            };
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                total += meta.len();
            }
        }
    }
    total
}
