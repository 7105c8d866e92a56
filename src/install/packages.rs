//! Dependencies, installed once per version at install time and never at
//! call time: `requirements.txt` into a virtualenv, `package.json` into a
//! `node_modules`, both under the version's `env/`.
//!
//! What may be asked for is checked first ([`crate::deps`]):
//! packages of the index or the registry by name and version, never a
//! path, a URL, a VCS source or an option. No package's own code runs
//! while installing: pip takes wheels only (`--only-binary=:all:`) and npm
//! runs no lifecycle scripts (`--ignore-scripts`).
//!
//! And should code run anyway (a bug of an installer, a package that
//! finds a way), it runs in the run sandbox ([`crate::sandbox`]), always,
//! as an untrusted skill's tool would: as the sandbox's user, able to
//! write only `env/`, within the run cgroup's limits and a time limit,
//! with a cleared environment that holds no configuration of pip's or
//! npm's, no proxy and no token. `env/` belongs to the sandbox's user for
//! the install only and is handed back to the server's user after it
//! ([`super::handback`]), so no later run can change its dependencies.

use super::handback;
use crate::deps::{self as allowed, DEFAULT_NPM_REGISTRY};
use crate::runner::{self, Limits, Spec};
use crate::sandbox::{Request, Sandbox};
use crate::skill::Trust;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Why a version's dependencies were not installed. The installer's own
/// output is in the install log; this says which step failed.
#[derive(Debug, thiserror::Error)]
pub enum DepsError {
    #[error("cannot read the dependency files: {0}")]
    Unreadable(std::io::Error),
    /// Checked again before any installer runs.
    #[error("the dependency files ask for what is not installed")]
    Refused,
    #[error("cannot prepare {}: {source}", env.display())]
    Prepare { env: PathBuf, source: std::io::Error },
    #[error("cannot take back {}: {source}", env.display())]
    HandBack { env: PathBuf, source: std::io::Error },
    /// The sandbox could not confine an installer, so it was not run.
    #[error("{0}")]
    Unconfined(String),
    #[error("cannot start {program}: {why}")]
    NotStarted { program: String, why: String },
    #[error("{program} did not finish in {secs}s")]
    TimedOut { program: String, secs: u64 },
    /// `ended`: `exit status N` or `signal SIG…`.
    #[error("{program} exited with {ended}")]
    Failed { program: String, ended: String },
    #[error("the dependencies take {size} bytes, over the {max} allowed")]
    TooLarge { size: u64, max: u64 },
    /// The place for them could not be made, or a task stopped.
    #[error("{0}")]
    Other(String),
}

/// How dependencies are installed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DepsSettings {
    /// For each installer run (venv, pip, npm).
    pub timeout: Duration,
    /// What one version's `env/` may hold.
    pub max_bytes: u64,
    pub python: String,
    pub npm: String,
    /// Where npm fetches packages, and where every package of a
    /// `package-lock.json` must come from.
    pub npm_registry: String,
}

impl Default for DepsSettings {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(300),
            max_bytes: 1024 * 1024 * 1024,
            python: "python3".to_owned(),
            npm: "npm".to_owned(),
            npm_registry: DEFAULT_NPM_REGISTRY.to_owned(),
        }
    }
}

/// The sandbox installers run in, and the limits of a run.
#[derive(Debug, Clone)]
pub struct Confines {
    pub sandbox: Arc<Sandbox>,
    pub limits: Limits,
    /// SIGTERM → SIGKILL at the time limit.
    pub grace: Duration,
}

/// The most of an installer's output a version keeps.
pub const MAX_LOG_BYTES: usize = 256 * 1024;

/// Chunks of an installer's output waiting to be logged; past this the
/// runner drops them rather than wait.
const LOG_BACKLOG: usize = 1024;

/// Directories of the installers' own inside `env/` (their home, their
/// temporary files, npm's cache), removed once they are done.
const SCRATCH: [&str; 3] = [".home", ".tmp", ".npm-cache"];

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
    skill_dir.join(allowed::REQUIREMENTS).is_file() || skill_dir.join(allowed::PACKAGE).is_file()
}

/// What the skill's dependency files ask for that is not installed, each
/// logged; an empty list when everything may be.
pub fn refused(
    skill_dir: &Path,
    settings: &DepsSettings,
    log: &Log,
) -> Result<Vec<allowed::Refusal>, DepsError> {
    let refused = allowed::check_dir(skill_dir, &settings.npm_registry).map_err(DepsError::Unreadable)?;
    for r in &refused {
        log.line(&format!("refused: {r}"));
    }
    Ok(refused)
}

/// Installs what `skill_dir` asks for into `env` (which is made), or says
/// why it could not; `env` is removed again on failure.
pub async fn install(
    skill_dir: &Path,
    env: &Path,
    settings: &DepsSettings,
    confines: &Confines,
    log: &Log,
) -> Result<(), DepsError> {
    // Checked by the installer before, and again here: nothing reaches an
    // installer that was not checked.
    if !refused(skill_dir, settings, log)?.is_empty() {
        return Err(DepsError::Refused);
    }
    let result = install_all(skill_dir, env, settings, confines, log).await;
    if result.is_err() {
        let _ = tokio::fs::remove_dir_all(env).await;
    }
    result
}

async fn install_all(
    skill_dir: &Path,
    env: &Path,
    settings: &DepsSettings,
    confines: &Confines,
    log: &Log,
) -> Result<(), DepsError> {
    let job = Job {
        skill_dir,
        env,
        settings,
        confines,
        log,
    };
    job.prepare().await?;
    let installed = job.installers().await;
    let handed = job.hand_back().await;
    installed?;
    handed?;
    within_cap(env, settings.max_bytes).await
}

/// One version's dependencies being installed.
struct Job<'a> {
    skill_dir: &'a Path,
    env: &'a Path,
    settings: &'a DepsSettings,
    confines: &'a Confines,
    log: &'a Log,
}

impl Job<'_> {
    /// Makes `env/` with the installers' scratch and the npm files, all
    /// the sandbox user's for the install.
    async fn prepare(&self) -> Result<(), DepsError> {
        let env = self.env.to_path_buf();
        let skill_dir = self.skill_dir.to_path_buf();
        let owner = self.confines.sandbox.identity();
        blocking(move || {
            std::fs::create_dir_all(&env)?;
            let mut made = vec![env.clone()];
            for dir in SCRATCH {
                std::fs::create_dir_all(env.join(dir))?;
                made.push(env.join(dir));
            }
            for file in [allowed::PACKAGE, allowed::PACKAGE_LOCK] {
                if skill_dir.join(file).is_file() {
                    std::fs::copy(skill_dir.join(file), env.join(file))?;
                    made.push(env.join(file));
                }
            }
            if let Some((uid, gid)) = owner {
                if !runner::runnable_by_anyone(&env) {
                    return Err(std::io::Error::other(format!(
                        "the sandbox's user (uid {uid}), who runs the installers, cannot reach it: give \
                         others access (o+x on each directory above it) or set sandbox_user"
                    )));
                }
                for path in &made {
                    std::os::unix::fs::lchown(path, Some(uid), Some(gid))?;
                }
            }
            Ok(())
        })
        .await
        .map_err(|source| DepsError::Prepare {
            env: self.env.to_path_buf(),
            source,
        })
    }

    async fn installers(&self) -> Result<(), DepsError> {
        if self.skill_dir.join(allowed::REQUIREMENTS).is_file() {
            self.python().await?;
        }
        if self.skill_dir.join(allowed::PACKAGE).is_file() {
            self.node().await?;
        }
        Ok(())
    }

    /// `env/` handed back to the server's user, and the installers'
    /// scratch removed, whether they succeeded or not.
    async fn hand_back(&self) -> Result<(), DepsError> {
        let env = self.env.to_path_buf();
        let done = blocking(move || {
            handback::hand_back(&env)?;
            for dir in SCRATCH {
                match std::fs::remove_dir_all(env.join(dir)) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                    _ => {}
                }
            }
            Ok(())
        })
        .await;
        done.map_err(|source| {
            let why = DepsError::HandBack {
                env: self.env.to_path_buf(),
                source,
            };
            self.log.line(&why.to_string());
            why
        })
    }

    async fn python(&self) -> Result<(), DepsError> {
        let venv = self.env.join("venv").display().to_string();
        let python = for_the_sandbox(&self.settings.python);
        self.run(&python, &["-m", "venv", &venv]).await?;
        let pip = self
            .env
            .join("venv")
            .join("bin")
            .join("python")
            .display()
            .to_string();
        let req = self.skill_dir.join(allowed::REQUIREMENTS).display().to_string();
        let args = [
            "-m",
            "pip",
            "--isolated",
            "install",
            "--no-input",
            "--disable-pip-version-check",
            "--no-cache-dir",
            "--only-binary=:all:",
            "-r",
            &req,
        ];
        self.run(&pip, &args).await
    }

    async fn node(&self) -> Result<(), DepsError> {
        let locked = self.env.join(allowed::PACKAGE_LOCK).is_file();
        let cache = self.env.join(".npm-cache").display().to_string();
        let mut args = vec![if locked { "ci" } else { "install" }];
        args.extend([
            "--ignore-scripts",
            "--no-audit",
            "--no-fund",
            "--omit=dev",
            "--registry",
            &self.settings.npm_registry,
            "--cache",
            &cache,
        ]);
        if !locked {
            args.push("--no-package-lock");
        }
        let npm = for_the_sandbox(&self.settings.npm);
        self.run(&npm, &args).await
    }

    /// Runs one installer in `env/`, in the sandbox, its output logged
    /// line by line; killed with its whole group and cgroup at the time
    /// limit.
    async fn run(&self, program: &str, args: &[&str]) -> Result<(), DepsError> {
        self.log.line(&format!("$ {program} {}", args.join(" ")));
        let spec = self.spec(program, args)?;
        let (events, chunks) = mpsc::channel(LOG_BACKLOG);
        let logger = tokio::spawn(log_lines(chunks, self.log.clone()));
        let outcome = runner::run(spec, CancellationToken::new(), Some(events), |_| {}).await;
        let _ = logger.await;
        let program = program.to_owned();
        let why = if let Some(why) = outcome.spawn_error {
            DepsError::NotStarted { program, why }
        } else if outcome.timed_out {
            let secs = self.settings.timeout.as_secs();
            DepsError::TimedOut { program, secs }
        } else if outcome.exit_code == Some(0) {
            return Ok(());
        } else {
            let ended = outcome.signal.map_or_else(
                || format!("exit status {}", outcome.exit_code.unwrap_or(-1)),
                |s| format!("signal {s}"),
            );
            DepsError::Failed { program, ended }
        };
        self.log.line(&why.to_string());
        Err(why)
    }

    fn spec(&self, program: &str, args: &[&str]) -> Result<Spec, DepsError> {
        // Always confined, as untrusted, whatever the sandbox level:
        // `sandbox = "off"` trusts the admin's own skills to run, not an
        // upload's build to install.
        let request = Request {
            trust: Trust::Untrusted,
            skill_dir: self.skill_dir,
            deps: None,
            workspace: None,
            workspace_write: false,
            scratch: self.env,
            network: true,
            egress: false,
            programs: located(program).into_iter().collect(),
            memory_bytes: None,
            cpu: None,
            private_tmp: false,
        };
        let confinement = self
            .confines
            .sandbox
            .confine(&request)
            .map_err(|e| DepsError::Unconfined(format!("cannot confine {program}: {e}")))?
            .ok_or_else(|| {
                DepsError::Unconfined(format!(
                    "the sandbox would run {program} unconfined; it is not run"
                ))
            })?;
        Ok(Spec {
            program: program.to_owned(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            cwd: self.env.to_path_buf(),
            env: installer_env(self.env),
            timeout: self.settings.timeout,
            grace: self.confines.grace,
            limits: self.confines.limits,
            isolate_network: false,
            egress_ns: None,
            confinement: Some(confinement),
        })
    }
}

/// Variables of the server's that say which certificate authorities the
/// host trusts (a TLS-inspecting gateway's, say): paths, no secret.
const TRUST_STORE: [&str; 4] = [
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
];

/// The whole environment of an installer: a `PATH`, a home and temporary
/// directory inside `env/`, the host's trusted authorities, and settings
/// that keep pip and npm from reading any configuration (the skill's, the
/// server's user's, the host's), so they reach only the index and
/// registry skilld names. No proxy, token or other variable of the
/// server's passes.
fn installer_env(env: &Path) -> Vec<(String, String)> {
    let inside = |dir: &str| env.join(dir).display().to_string();
    let path = std::env::var("PATH").unwrap_or_else(|_| runner::DEFAULT_PATH.to_owned());
    let trust = TRUST_STORE
        .iter()
        .filter_map(|name| Some(((*name).to_owned(), std::env::var(name).ok()?)));
    [
        ("PATH", path),
        ("HOME", inside(".home")),
        ("TMPDIR", inside(".tmp")),
        ("XDG_CACHE_HOME", inside(".home/.cache")),
        ("XDG_CONFIG_HOME", inside(".home/.config")),
        ("LANG", "C.UTF-8".to_owned()),
        ("PIP_CONFIG_FILE", "/dev/null".to_owned()),
        ("PYTHONNOUSERSITE", "1".to_owned()),
        ("npm_config_userconfig", "/dev/null".to_owned()),
        // npm will not read one file as both: the global one is a file
        // that is never made.
        ("npm_config_globalconfig", inside(".home/no-global-npmrc")),
        ("npm_config_update_notifier", "false".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .chain(trust)
    .collect()
}

/// Logs the output of an installer line by line as it comes.
async fn log_lines(mut chunks: mpsc::Receiver<runner::Event>, log: Log) {
    let mut pending = Vec::new();
    while let Some(runner::Event::Output(chunk)) = chunks.recv().await {
        pending.extend_from_slice(&chunk);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            log.line(String::from_utf8_lossy(&line).trim_end());
        }
    }
    if !pending.is_empty() {
        log.line(String::from_utf8_lossy(&pending).trim_end());
    }
}

/// The program `name` as an installer should be started with it: tools
/// and installers run as the sandbox's user when skilld is root, so it
/// must be one that user can reach (root's own `~/.pyenv` is not), and
/// the virtualenv's `python3` links to it. The first on `PATH` that
/// others can run, else the name as given.
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

/// Where `program` is, for the sandbox to let its installation be read.
fn located(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program)).filter(|p| p.is_absolute());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_absolute() && p.is_file())
}

/// Whether a user other than the owner may run `program`: it is
/// executable by others and every directory above it lets others through.
fn runnable_by_others(program: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::metadata(p).map(|m| m.permissions().mode()).unwrap_or(0);
    mode(program) & 0o001 != 0 && program.ancestors().skip(1).all(|d| mode(d) & 0o001 != 0)
}

async fn within_cap(env: &Path, max: u64) -> Result<(), DepsError> {
    let dir = env.to_path_buf();
    let size = tokio::task::spawn_blocking(move || tree_size(&dir))
        .await
        .map_err(|e| DepsError::Other(e.to_string()))?;
    if size > max {
        return Err(DepsError::TooLarge { size, max });
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

/// Runs disk work on a blocking thread.
async fn blocking(f: impl FnOnce() -> std::io::Result<()> + Send + 'static) -> std::io::Result<()> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| std::io::Error::other(format!("the install stopped: {e}")))?
}
