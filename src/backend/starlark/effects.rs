//! The server's side of the SDK: what the host asks for on an
//! evaluation's behalf (`sdk/exec`, …), performed once the skill's
//! permission is checked: run a program or git in the run sandbox, read
//! and write files where a run may, read the allowlisted environment and
//! set variables for the evaluation's children, fetch a URL, and reach
//! back through the call's context ([`super::reach`]: the model, other
//! tools). What a turn may spend is counted before acting. They run on a
//! blocking thread (never a runtime worker), so they may block on the
//! server's runtime.

use super::bounds::Bounds;
use super::{Shared, git, reach};
use crate::runner::{Spec, child_env};
use crate::sandbox::Request;
use crate::skill::context::{CallContext, Spend};
use anyhow::{anyhow, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use serde_json::{Value, json};
use std::cell::OnceCell;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The largest body `fetch` takes.
const MAX_BYTES: usize = 1024 * 1024;
/// The longest a fetch may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// The most variables `set_env` may set in one evaluation, and the
/// longest value.
const MAX_SET_VARS: usize = 64;
const MAX_SET_VALUE: usize = 32 * 1024;

/// What one of the server's requests to the host lets the host's
/// requests use: the skill, the request's bounds, and a directory of the
/// evaluation's own, made when first needed and removed with the scope.
pub(super) struct Scope {
    pub shared: Arc<Shared>,
    pub bounds: Bounds,
    /// Where the call was made: its turn's budget, its session's model and
    /// tools.
    pub context: CallContext,
    scratch: Scratch,
    /// What `set_env` set, for this evaluation's children only.
    set: Vec<(String, String)>,
    /// What decides this evaluation's `fetch()` destinations: its list,
    /// then a person, once per destination.
    egress: Option<Arc<crate::egress::RunGate>>,
}

impl Scope {
    /// What `llm` and `invoke_tool` need of it.
    fn reach(&self) -> reach::Reach<'_> {
        reach::Reach {
            context: &self.context,
            skill: &self.shared.skill,
            bounds: &self.bounds,
            runtime: &self.shared.runtime,
        }
    }

    pub(super) fn new(shared: Arc<Shared>, bounds: Bounds, context: CallContext) -> Self {
        let scratch = Scratch::new(&shared);
        let egress = shared.network_allow.clone().map(|list| {
            Arc::new(crate::egress::RunGate::new(
                list,
                shared.asker.clone(),
                shared.settings.egress.asking.clone(),
            ))
        });
        Self {
            shared,
            bounds,
            context,
            scratch,
            set: Vec::new(),
            egress,
        }
    }

    /// Counts `spend` against the turn, or fails `function` saying why.
    fn spend(&self, function: &str, spend: Spend) -> anyhow::Result<()> {
        self.context
            .budget
            .spend(spend)
            .map_err(|why| anyhow!("{function} is refused: {why}"))
    }

    /// Fails unless the skill declares `permission`.
    fn require(&self, function: &str, permission: &str) -> anyhow::Result<()> {
        if self.shared.allows(permission) {
            return Ok(());
        }
        bail!(
            "{function} needs the permission '{permission}', which skill '{}' does not declare",
            self.shared.skill
        )
    }
}

/// Performs SDK function `method` (`sdk/exec`, …) with the host's
/// `params`, once the skill's permission for it is checked.
pub(super) fn perform(scope: &mut Scope, method: &str, params: &Value) -> anyhow::Result<Value> {
    let function = method.strip_prefix("sdk/").unwrap_or(method);
    let args = Params { function, params };
    match function {
        "exec" => {
            scope.require(function, "shell:exec")?;
            let (program, list) = (args.text("program")?, args.strings("args")?);
            require_git_of(scope, program, &list)?;
            exec(scope, program, list, args.timeout()?)
        }
        "git" => {
            let list = args.strings("args")?;
            git::check_subcommand(&list)?;
            require_git(scope, function, &list)?;
            run_git(scope, list, args.optional_text("cwd")?)
        }
        "read_file" => {
            scope.require(function, "file:read")?;
            read_file(scope, args.text("path")?).map(Value::String)
        }
        "write_file" => {
            scope.require(function, "file:write")?;
            write_file(scope, args.text("path")?, args.text("text")?).map(|()| Value::Null)
        }
        "env" => {
            scope.require(function, "env:read")?;
            Ok(env_var(scope, args.text("name")?).map_or(Value::Null, Value::String))
        }
        "set_env" => {
            scope.require(function, "env:write")?;
            set_env(scope, args.text("name")?, args.text("value")?).map(|()| Value::Null)
        }
        "fetch" => {
            scope.require(function, "net:fetch")?;
            fetch(scope, args.text("url")?)
        }
        "llm" => {
            scope.require(function, "llm:call")?;
            let max_tokens = args.params.get("max_tokens").and_then(Value::as_u64);
            let system = args.optional_text("system")?;
            reach::llm(&scope.reach(), args.text("prompt")?, system, max_tokens)
        }
        "invoke_tool" => {
            scope.require(function, "skill:invoke")?;
            let input = args.params.get("args").cloned().unwrap_or_else(|| json!({}));
            reach::invoke_tool(&scope.reach(), args.text("name")?, input)
        }
        other => bail!("'{other}' is not an SDK function"),
    }
}

/// The host's parameters of one SDK request.
struct Params<'a> {
    function: &'a str,
    params: &'a Value,
}

impl<'a> Params<'a> {
    fn text(&self, key: &str) -> anyhow::Result<&'a str> {
        self.params
            .get(key)
            .and_then(Value::as_str)
            .ok_or_else(|| anyhow!("{}: '{key}' must be a string", self.function))
    }

    fn optional_text(&self, key: &str) -> anyhow::Result<Option<&'a str>> {
        match self.params.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(_) => self.text(key).map(Some),
        }
    }

    fn strings(&self, key: &str) -> anyhow::Result<Vec<String>> {
        match self.params.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(v) => serde_json::from_value::<Vec<String>>(v.clone())
                .map_err(|_| anyhow!("{}: {key} must be a list of strings", self.function)),
        }
    }

    fn timeout(&self) -> anyhow::Result<Option<f64>> {
        match self.params.get("timeout") {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_f64()
                .map(Some)
                .ok_or_else(|| anyhow!("{}: timeout must be a number of seconds", self.function)),
        }
    }
}

/// `exec` of git (by any name or link) needs what `git` would: a skill
/// with `shell:exec` alone runs no git.
fn require_git_of(scope: &Scope, program: &str, args: &[String]) -> anyhow::Result<()> {
    let path = env_var(scope, "PATH").unwrap_or_default();
    let program = resolve_program(&scope.shared.dir, program)?;
    let Some(sub) = git::as_git(&program, &path) else {
        return Ok(());
    };
    let mut with_sub: Vec<String> = sub.into_iter().collect();
    with_sub.extend_from_slice(args);
    require_git(scope, "exec of git", &with_sub)
}

/// Fails unless the skill declares what git with `args` needs, saying why
/// a subcommand that can read needs `git:write` here.
fn require_git(scope: &Scope, function: &str, args: &[String]) -> anyhow::Result<()> {
    let need = git::need(args);
    match (scope.require(function, need.permission()), need) {
        (Err(e), git::Need::Write(Some(why))) => Err(anyhow!("{e}: {why}")),
        (result, _) => result,
    }
}

/// An evaluation's own directory under the scratch root (the `TMPDIR` and
/// `HOME` of the programs it runs), made when first needed and removed
/// with the evaluation.
struct Scratch {
    path: PathBuf,
    made: OnceCell<()>,
}

impl Scratch {
    fn new(shared: &Shared) -> Self {
        let name = format!("starlark-{}-{}", shared.skill, uuid::Uuid::now_v7());
        Self {
            path: shared.settings.scratch_dir.join(name),
            made: OnceCell::new(),
        }
    }

    /// The directory, made (and given to the sandbox's user) if need be.
    fn make(&self, shared: &Shared) -> anyhow::Result<&Path> {
        if self.made.get().is_none() {
            let name = self
                .path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            shared
                .sandbox
                .private_dir(&shared.settings.scratch_dir, &name, shared.trust)
                .map_err(|e| anyhow!("cannot make the evaluation's directory: {e}"))?;
            let _ = self.made.set(());
        }
        Ok(&self.path)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if self.made.get().is_some()
            && let Err(e) = std::fs::remove_dir_all(&self.path)
        {
            let dir = self.path.display();
            tracing::warn!(%dir, error = %e, "cannot remove a Starlark evaluation's directory");
        }
    }
}

/// The environment a child of the skill gets: the allowlist, with `HOME`
/// and `TMPDIR` the evaluation's directory.
fn environment(scope: &Scope) -> Vec<(String, String)> {
    let shared = &scope.shared;
    let mut env = child_env(&shared.skill, &shared.dir, "Global", &shared.settings.extra_env);
    env.retain(|(name, _)| name != "HOME" && name != "TMPDIR");
    let scratch = scope.scratch.path.display().to_string();
    env.extend([
        ("HOME".to_owned(), scratch.clone()),
        ("TMPDIR".to_owned(), scratch),
    ]);
    for (name, value) in &scope.set {
        env.retain(|(n, _)| n != name);
        env.push((name.clone(), value.clone()));
    }
    env
}

/// Sets `name` for the evaluation's later children (never the server's
/// own environment), when it is one a skill may set ([`settable`]).
fn set_env(scope: &mut Scope, name: &str, value: &str) -> anyhow::Result<()> {
    let well_formed = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !well_formed {
        bail!("set_env: '{name}' is not a variable name (letters, digits and _, not first a digit)");
    }
    if !settable(name) {
        bail!(
            "set_env: '{name}' may not be set. A skill sets its own variables as {SKILL_VARIABLES}<NAME>, \
             and of the rest only the locale, TZ and how output looks ({}): any other variable may \
             change how a program finds its configuration, helpers or libraries",
            SETTABLE.join(", ")
        );
    }
    if value.len() > MAX_SET_VALUE || value.contains('\0') {
        bail!("set_env: the value of '{name}' is longer than {MAX_SET_VALUE} bytes or holds a NUL");
    }
    scope.set.retain(|(n, _)| n != name);
    if scope.set.len() >= MAX_SET_VARS {
        bail!("set_env: an evaluation may set at most {MAX_SET_VARS} variables");
    }
    scope.set.push((name.to_owned(), value.to_owned()));
    Ok(())
}

/// The skill's own variables: no program but the skill's reads these,
/// and skilld sets none of them.
const SKILL_VARIABLES: &str = "SKILL_VAR_";

/// The variables a skill may set besides its own: the locale, the time
/// zone, and how output looks. An allowlist, because the variables that
/// change where a program finds its configuration or helpers (`XDG_*`,
/// `PAGER`, `EDITOR`, `GNUPGHOME`, `PYTHON*`, `NODE_OPTIONS`, `LD_*`,
/// `GIT_*`, …) have no end: every program adds its own.
const SETTABLE: [&str; 23] = [
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_NUMERIC",
    "LC_TIME",
    "LC_COLLATE",
    "LC_MONETARY",
    "LC_MESSAGES",
    "LC_PAPER",
    "LC_NAME",
    "LC_ADDRESS",
    "LC_TELEPHONE",
    "LC_MEASUREMENT",
    "LC_IDENTIFICATION",
    "TZ",
    "NO_COLOR",
    "FORCE_COLOR",
    "CLICOLOR",
    "CLICOLOR_FORCE",
    "COLUMNS",
    "LINES",
    "TERM",
];

/// Whether a skill may set `name` for its children (exactly as written:
/// the environment is case-sensitive).
fn settable(name: &str) -> bool {
    SETTABLE.contains(&name)
        || name
            .strip_prefix(SKILL_VARIABLES)
            .is_some_and(|rest| !rest.is_empty())
}

/// `env` with each of `forced` set over it.
fn with_forced(mut env: Vec<(String, String)>, forced: &[(String, String)]) -> Vec<(String, String)> {
    env.retain(|(name, _)| !forced.iter().any(|(f, _)| f == name));
    env.extend_from_slice(forced);
    env
}

fn env_var(scope: &Scope, name: &str) -> Option<String> {
    environment(scope)
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, value)| value)
}

/// Runs `program` with `args` through the runner, in the run sandbox:
/// `{"exit_code", "output", "success"}`.
fn exec(scope: &Scope, program: &str, args: Vec<String>, timeout: Option<f64>) -> anyhow::Result<Value> {
    let mut limit = scope.bounds.left();
    if let Some(secs) = timeout {
        if !(secs.is_finite() && secs > 0.0) {
            bail!("exec: timeout must be a positive number of seconds");
        }
        limit = limit.min(Duration::try_from_secs_f64(secs).unwrap_or(limit));
    }
    if limit.is_zero() {
        bail!("exec: no time is left for '{program}'");
    }
    let program = resolve_program(&scope.shared.dir, program)?;
    let how = Run {
        function: "exec",
        cwd: scope.shared.settings.workspace.clone(),
        workspace_write: scope.shared.allows("file:write"),
        timeout: limit,
        env: Vec::new(),
    };
    run(scope, program, args, how)
}

/// How [`run`] runs a program.
struct Run {
    function: &'static str,
    cwd: PathBuf,
    workspace_write: bool,
    timeout: Duration,
    /// Set over the skill's environment.
    env: Vec<(String, String)>,
}

/// Runs `program` with `args` through the runner, in the run sandbox,
/// once the turn's budget allows: `{"exit_code", "output", "success"}`.
fn run(scope: &Scope, program: String, args: Vec<String>, how: Run) -> anyhow::Result<Value> {
    let outcome = sandboxed(scope, program, args, &how, Some(Spend::ShellExec))?;
    let success = outcome.exit_code == Some(0) && !outcome.timed_out && !outcome.cancelled;
    Ok(json!({"exit_code": outcome.exit_code, "output": outcome.output, "success": success}))
}

/// Runs `program` in the run sandbox and waits for it, spending `spend`
/// of the turn first (none for what skilld runs on the skill's behalf).
fn sandboxed(
    scope: &Scope,
    program: String,
    args: Vec<String>,
    how: &Run,
    spend: Option<Spend>,
) -> anyhow::Result<crate::runner::Outcome> {
    let function = how.function;
    let scratch = scope.scratch.make(&scope.shared)?;
    let spec = spec(scope, scratch, program, args, how)
        .map_err(|e| anyhow!("{function}: cannot prepare its sandbox: {e}"))?;
    if let Some(spend) = spend {
        scope.spend(function, spend)?;
    }
    let cancel = scope.bounds.cancel.child_token();
    let outcome = scope
        .shared
        .runtime
        .block_on(crate::runner::run(spec, cancel, None, |_| {}));
    if let Some(why) = &outcome.spawn_error {
        bail!("{function}: {why}");
    }
    Ok(outcome)
}

/// Runs git with `args` (its subcommand first, checked) in `cwd`, a
/// directory of the workspace (the workspace itself by default): what it
/// may write is the workspace, with `git:write`.
fn run_git(scope: &Scope, args: Vec<String>, cwd: Option<&str>) -> anyhow::Result<Value> {
    let workspace = &scope.shared.settings.workspace;
    let cwd = match cwd {
        None => workspace.clone(),
        Some(rel) => {
            let downward = !rel.is_empty()
                && Path::new(rel)
                    .components()
                    .all(|c| matches!(c, Component::Normal(_)));
            if !downward {
                bail!(
                    "git: cwd '{rel}' must be a directory inside the workspace, relative to it, without '..'"
                );
            }
            workspace.join(rel)
        }
    };
    let limit = scope.bounds.left();
    if limit.is_zero() {
        bail!("git: no time is left");
    }
    let writes = git::permission(&args) == "git:write";
    let how = Run {
        function: "git",
        cwd,
        workspace_write: scope.shared.allows("file:write") || writes,
        timeout: limit,
        env: git::forced_env(),
    };
    let mut argv = git::forced_options();
    argv.extend(repository_programs(scope, &how)?);
    argv.extend(git::with_driver_options(args));
    run(scope, "git".to_owned(), argv, how)
}

/// `-c` settings that empty every program the repository's own
/// configuration names (its includes followed), read with a `git config`
/// of its own: that neither counts against the turn nor runs anything.
fn repository_programs(scope: &Scope, how: &Run) -> anyhow::Result<Vec<String>> {
    let mut argv = git::forced_options();
    argv.extend(["config", "--list", "--name-only", "-z"].map(str::to_owned));
    let outcome = sandboxed(scope, "git".to_owned(), argv, how, None)?;
    if outcome.truncated {
        bail!("git: the repository's configuration is too large to check for the programs it names");
    }
    Ok(git::neutralised(&outcome.output))
}

/// A bare name is looked up on the child's `PATH`; a relative path with a
/// slash is the skill's own program and must stay inside its directory.
fn resolve_program(dir: &Path, program: &str) -> anyhow::Result<String> {
    if program.is_empty() || program.contains('\0') {
        bail!("exec: the program must be a name or a path");
    }
    if !program.contains('/') || Path::new(program).is_absolute() {
        return Ok(program.to_owned());
    }
    match crate::skill::files::resolve_inside(dir, program) {
        Ok(path) => Ok(path.display().to_string()),
        Err(true) => bail!("exec: '{program}' is outside the skill's directory"),
        Err(false) => bail!("exec: '{program}' does not exist in the skill's directory"),
    }
}

/// A confined spec, as for a run of the skill's tools.
fn spec(
    scope: &Scope,
    scratch: &Path,
    program: String,
    args: Vec<String>,
    how: &Run,
) -> std::io::Result<Spec> {
    let shared = &scope.shared;
    let request = Request {
        trust: shared.trust,
        skill_dir: &shared.dir,
        deps: None,
        workspace: Some(&shared.settings.workspace),
        workspace_write: how.workspace_write,
        scratch,
        network: shared.network,
        egress: false,
        programs: Some(PathBuf::from(&program))
            .filter(|p| p.is_absolute())
            .into_iter()
            .collect(),
        memory_bytes: shared.memory_bytes.or(shared.settings.limits.memory_bytes),
        cpu: None,
        private_tmp: false,
    };
    let mut limits = shared.settings.limits;
    limits.memory_bytes = request.memory_bytes;
    Ok(Spec {
        program,
        args,
        cwd: how.cwd.clone(),
        env: with_forced(environment(scope), &how.env),
        timeout: how.timeout,
        grace: shared.settings.grace,
        limits,
        isolate_network: !shared.network,
        egress_ns: None,
        confinement: shared.sandbox.confine(&request)?,
    })
}

/// Refuses a file whose kind seed 001 does not let skills read or write.
fn allowed_kind(function: &str, path: &str) -> anyhow::Result<()> {
    if crate::skill::files::served_type_of(path).is_some() {
        return Ok(());
    }
    bail!(
        "{function}: '{path}' is not a kind of file a skill reads or writes; those are .{}",
        crate::skill::files::SERVED_EXTENSIONS.join(", .")
    )
}

/// The directory `path` lies in, of the skill's and the evaluation's
/// own, and `path` relative to it: a relative path is the skill's. It is
/// opened beneath that directory ([`crate::fsafe`]), so no link is
/// followed on the way; `None` for a path elsewhere.
fn placed(scope: &Scope, path: &str) -> Option<(PathBuf, String)> {
    let skill = scope.shared.dir.clone();
    if !Path::new(path).is_absolute() {
        return Some((skill, path.to_owned()));
    }
    [skill, scope.scratch.path.clone()].into_iter().find_map(|root| {
        let real = root.canonicalize().unwrap_or_else(|_| root.clone());
        [&root, &real].into_iter().find_map(|r| {
            let rel = Path::new(path).strip_prefix(r).ok()?;
            Some((root.clone(), rel.to_str()?.to_owned()))
        })
    })
}

fn read_file(scope: &Scope, path: &str) -> anyhow::Result<String> {
    use crate::fsafe::Refused;
    use crate::skill::files::MAX_READ_BYTES;
    let outside = || {
        anyhow!(
            "read_file: '{path}' is outside the skill's directory and the evaluation's own, or not a \
             regular file there (links are not followed)"
        )
    };
    let (base, rel) = placed(scope, path).ok_or_else(outside)?;
    if crate::fsafe::downward(&rel).is_none() {
        return Err(outside());
    }
    let base_fd =
        crate::fsafe::open_base(&base).map_err(|e| anyhow!("read_file: cannot open '{path}': {e}"))?;
    let bytes = match crate::fsafe::read_beneath(std::os::fd::AsFd::as_fd(&base_fd), &rel, MAX_READ_BYTES) {
        Ok(bytes) => bytes,
        Err(Refused::TooLarge(limit)) => bail!("read_file: '{path}' is larger than {limit} bytes"),
        Err(_) if base.join(&rel).symlink_metadata().is_err() => {
            bail!("read_file: cannot open '{path}': no such file")
        }
        Err(_) => return Err(outside()),
    };
    allowed_kind("read_file", path)?;
    String::from_utf8(bytes).map_err(|_| anyhow!("read_file: '{path}' is not UTF-8 text"))
}

/// Writes `text` to `path` in the evaluation's own directory (relative to
/// it, or absolute inside it), beneath it with no link followed; its
/// directory must exist.
fn write_file(scope: &Scope, path: &str, text: &str) -> anyhow::Result<()> {
    use crate::skill::files::MAX_WRITE_BYTES;
    if text.len() as u64 > MAX_WRITE_BYTES {
        bail!("write_file: the text is larger than {MAX_WRITE_BYTES} bytes");
    }
    let scratch = scope.scratch.make(&scope.shared)?;
    let rel = Path::new(path).strip_prefix(scratch).unwrap_or(Path::new(path));
    if rel.as_os_str().is_empty() || !rel.components().all(|c| matches!(c, Component::Normal(_))) {
        bail!(
            "write_file: '{path}' is not a file name inside the evaluation's directory ({})",
            scratch.display()
        );
    }
    allowed_kind("write_file", path)?;
    let rel = rel
        .to_str()
        .ok_or_else(|| anyhow!("write_file: '{path}' is not UTF-8"))?;
    let base =
        crate::fsafe::open_base(scratch).map_err(|e| anyhow!("write_file: cannot write '{path}': {e}"))?;
    crate::fsafe::write_beneath(std::os::fd::AsFd::as_fd(&base), rel, text.as_bytes()).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            anyhow!("write_file: the directory of '{path}' does not exist")
        } else {
            anyhow!("write_file: cannot write '{path}': {e} (links and hard links are not written through)")
        }
    })
}

/// An HTTP(S) GET of `url`, bounded in size and time:
/// `{"status", "body", "success"}`. Redirects are not followed. A skill
/// with `network: {allow: [...]}` reaches only those hosts, at addresses
/// its run's proxy would accept (`docs/egress.md`).
fn fetch(scope: &Scope, url: &str) -> anyhow::Result<Value> {
    let gate = scope.egress.clone();
    if !scope.shared.network && gate.is_none() {
        bail!(
            "fetch is refused: skill '{}' runs without the network (network: false)",
            scope.shared.skill
        );
    }
    let uri: hyper::Uri = url
        .parse()
        .map_err(|e| anyhow!("fetch: '{url}' is not a URL: {e}"))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        bail!("fetch: '{url}' is not an http or https URL");
    }
    let route = match gate {
        Some(gate) => Route::Listed {
            gate,
            resolver: scope.shared.settings.egress.resolver.clone(),
            skill: scope.shared.skill.clone(),
        },
        None => Route::Host,
    };
    scope.spend("fetch", Spend::NetFetch)?;
    let limit = scope.bounds.left().min(FETCH_TIMEOUT);
    let cancel = scope.bounds.cancel.clone();
    let late = format!("no answer within {}s", limit.as_secs_f64().ceil());
    let (status, body) = scope
        .shared
        .runtime
        .block_on(async move {
            tokio::select! {
                got = tokio::time::timeout(limit, get(uri, route)) => got.unwrap_or(Err(late)),
                () = cancel.cancelled() => Err("cancelled".to_owned()),
            }
        })
        .map_err(|why| anyhow!("fetch: GET {url}: {why}"))?;
    Ok(json!({"status": status, "body": body, "success": (200..300).contains(&status)}))
}

/// How a fetch finds its destination.
enum Route {
    /// `network: true`: the host's resolver and network.
    Host,
    /// `network: {allow: [...]}`, or `network: true` asking: the list and
    /// a person, then the egress resolver, which refuses what the run's
    /// proxy refuses.
    Listed {
        gate: Arc<crate::egress::RunGate>,
        resolver: crate::egress::Resolver,
        skill: String,
    },
}

/// The addresses a listed fetch of `uri` may connect to, or why none.
async fn listed_addresses(
    uri: &hyper::Uri,
    gate: &crate::egress::RunGate,
    resolver: &crate::egress::Resolver,
) -> Result<Vec<std::net::SocketAddr>, String> {
    use crate::egress::{Gate, Verdict};
    let host = uri
        .host()
        .map(|h| h.trim_start_matches('[').trim_end_matches(']'))
        .and_then(crate::egress::allow::normalize)
        .ok_or_else(|| "the URL names no host a network.allow list can hold".to_owned())?;
    let port = uri.port_u16().unwrap_or(if uri.scheme_str() == Some("https") {
        443
    } else {
        80
    });
    if let Some(refused) = resolver.refused_literal(&host) {
        return Err(format!("{refused}; retrying another way will not help"));
    }
    if let Verdict::Deny { by, why } = gate.decide(&host, port).await {
        return Err(format!(
            "{host}:{port} is refused: {why} (decided by {by}); retrying another way will not help"
        ));
    }
    resolver.resolve(&host, port).await.map_err(|e| e.to_string())
}

/// A resolver that answers every name with addresses checked beforehand.
#[derive(Clone)]
struct Checked(Vec<std::net::SocketAddr>);

impl tower::Service<hyper_util::client::legacy::connect::dns::Name> for Checked {
    type Response = std::vec::IntoIter<std::net::SocketAddr>;
    type Error = std::io::Error;
    type Future = std::future::Ready<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: hyper_util::client::legacy::connect::dns::Name) -> Self::Future {
        std::future::ready(Ok(self.0.clone().into_iter()))
    }
}

async fn get(uri: hyper::Uri, route: Route) -> Result<(u16, String), String> {
    match route {
        Route::Host => {
            send(
                crate::https::client::<Empty<Bytes>>().map_err(|e| e.to_string())?,
                uri,
            )
            .await
        }
        Route::Listed {
            gate,
            resolver,
            skill,
        } => {
            let counted = |t: crate::metrics::EgressTotals| crate::metrics::egress(&skill, t);
            let addrs = listed_addresses(&uri, &gate, &resolver).await.inspect_err(|_| {
                counted(crate::metrics::EgressTotals {
                    denied: 1,
                    ..Default::default()
                });
            })?;
            let http = hyper_util::client::legacy::connect::HttpConnector::new_with_resolver(Checked(addrs));
            let connector = crate::https::connector(http).map_err(|e| e.to_string())?;
            let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build(connector);
            let got = send(client, uri).await;
            counted(crate::metrics::EgressTotals {
                allowed: 1,
                bytes_in: got.as_ref().map_or(0, |(_, body)| body.len() as u64),
                ..Default::default()
            });
            got
        }
    }
}

async fn send<C>(
    client: hyper_util::client::legacy::Client<C, Empty<Bytes>>,
    uri: hyper::Uri,
) -> Result<(u16, String), String>
where
    C: hyper_util::client::legacy::connect::Connect + Clone + Send + Sync + 'static,
{
    let request = hyper::Request::get(uri)
        .header(
            hyper::header::USER_AGENT,
            concat!("skilld/", env!("CARGO_PKG_VERSION")),
        )
        .body(Empty::new())
        .map_err(|e| e.to_string())?;
    let response = client.request(request).await.map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    let body = Limited::new(response.into_body(), MAX_BYTES)
        .collect()
        .await
        .map_err(|e| {
            if e.is::<http_body_util::LengthLimitError>() {
                format!("the body is larger than {MAX_BYTES} bytes")
            } else {
                e.to_string()
            }
        })?
        .to_bytes();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}
