//! What a manifest's backend is to the rest of skilld: something that was
//! started when the catalog loaded, lists tools and hooks, and runs them;
//! or, for an untrusted skill, something its first call starts, once a
//! person approved it, whose tools are those the manifest lists. The skill
//! layer only reads manifests; starting children and evaluating scripts
//! belongs to the server, which hands the catalog a [`Launch`].

use super::context::CallContext;
use super::phases::Phase;
use super::upstream::Upstream;
use crate::trust::Trust;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt::Debug;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use utoipa::ToSchema;
use uuid::Uuid;

pub use super::context::BoxFuture;

/// The backends a manifest may name in `implementation.backend`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    /// A child speaking JSON-RPC 2.0 on stdin and stdout.
    Process,
    /// A Starlark script evaluated in the server.
    Starlark,
    /// An MCP server, on stdio or over Streamable HTTP.
    Mcp,
}

impl BackendKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Process => "process",
            BackendKind::Starlark => "starlark",
            BackendKind::Mcp => "mcp",
        }
    }
}

/// Everything a backend needs to start for one skill.
#[derive(Debug, Clone)]
pub struct LaunchRequest<'a> {
    pub skill: &'a str,
    pub dir: &'a Path,
    /// An installed version's dependencies, put on the child's paths.
    pub deps: Option<&'a Path>,
    pub kind: BackendKind,
    /// The entrypoint, inside `dir`.
    pub entrypoint: &'a Path,
    /// How the entrypoint is run: its extension's runtime and its path,
    /// or its path alone.
    pub command: Vec<String>,
    /// The parsed manifest, as `initialize` sends it.
    pub manifest: &'a Value,
    pub trust: Trust,
    /// The skill's content hash: the same hash may reuse a running backend.
    pub hash: &'a str,
    /// The skill's version, shown beside what its child holds for a person.
    pub version: Option<&'a str>,
    pub network: bool,
    /// `network: {allow: [...]}`: where a Starlark `fetch()` may go.
    pub network_allow: Option<&'a crate::egress::AllowList>,
    pub permissions: &'a [String],
    pub memory_bytes: Option<u64>,
    /// The MCP server an `mcp` backend fronts.
    pub upstream: Option<&'a Upstream>,
}

/// A tool a backend declared.
#[derive(Debug, Clone, PartialEq)]
pub struct DeclaredTool {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
    /// The JSON Schema of its result, if it declares one.
    pub output_schema: Option<Value>,
    /// An MCP server's `readOnlyHint` and `destructiveHint`, as given.
    pub hints: ToolHints,
}

/// What an MCP server's annotations say of a tool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ToolHints {
    pub read_only: Option<bool>,
    pub destructive: Option<bool>,
}

/// A started backend and what it declared.
#[derive(Debug, Clone)]
pub struct Launched {
    pub backend: Arc<dyn Backend>,
    pub tools: Vec<DeclaredTool>,
    pub hooks: Vec<String>,
    /// Workflows (seed 002's `register_workflow`), called by name like
    /// tools, through [`Backend::workflow`].
    pub workflows: Vec<DeclaredTool>,
    /// Scanners (`register_scanner`), run by [`Backend::scan`].
    pub scanners: Vec<String>,
    /// What an MCP server offered, as one digest: it is part of the
    /// skill's hash, so a changed definition asks again.
    pub offered: Option<String>,
    /// An MCP server's prompts and resources, as it listed them.
    pub extras: Option<Arc<UpstreamExtras>>,
}

/// An MCP server's prompts and resources (each as the server listed it,
/// in MCP's JSON, but for a resource's `uri` and `name`: skilld's, see
/// `docs/gateway.md`), served beside skilld's own.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UpstreamExtras {
    pub prompts: Vec<Value>,
    pub resources: Vec<Value>,
}

/// Why a launcher starts no backend at all: the skill loads with the
/// tools its manifest lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeldBack {
    /// An upload waiting for review runs nothing (said as a warning).
    UntilReviewed,
    /// A linter runs nothing, whatever the skill (nothing is said).
    Linting,
}

/// Starts backends. Blocking: the catalog loads on plain threads.
pub trait Launch: Send + Sync + Debug {
    /// Starts (or reuses) the backend of a skill and asks it what it
    /// offers, or says why it could not.
    fn launch(&self, req: &LaunchRequest<'_>) -> Result<Launched, BackendError>;

    /// The backend of a skill, not started: its first call starts it (an
    /// untrusted skill's, whose code runs only for a call a person let
    /// run). Reuses one running unchanged, as [`Launch::launch`] does.
    fn unstarted(&self, req: &LaunchRequest<'_>) -> Result<Arc<dyn Backend>, BackendError>;

    /// Whether backends are held back on purpose, and why.
    fn held_back(&self) -> Option<HeldBack> {
        None
    }

    /// Ticks when an upstream's offer changed: the catalog should reload.
    fn offer_changes(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        None
    }
}

/// Starts nothing: for a skill version no one has reviewed yet, whose code
/// must not run, not even to list its tools.
#[derive(Debug, Clone, Copy, Default)]
pub struct Unreviewed;

impl Launch for Unreviewed {
    fn launch(&self, _: &LaunchRequest<'_>) -> Result<Launched, BackendError> {
        Err(BackendError::NotRunning(
            "backends start once this version is reviewed".to_owned(),
        ))
    }

    fn unstarted(&self, _: &LaunchRequest<'_>) -> Result<Arc<dyn Backend>, BackendError> {
        Err(BackendError::NotRunning(
            "backends start once this version is reviewed".to_owned(),
        ))
    }

    fn held_back(&self) -> Option<HeldBack> {
        Some(HeldBack::UntilReviewed)
    }
}

/// Starts nothing and says nothing of it: `skilld check` and `skilld
/// package` lint a manifest as it is written, never running its code.
#[derive(Debug, Clone, Copy, Default)]
pub struct Linting;

impl Launch for Linting {
    fn launch(&self, _: &LaunchRequest<'_>) -> Result<Launched, BackendError> {
        Err(BackendError::NotRunning("a linter starts no backend".to_owned()))
    }

    fn unstarted(&self, _: &LaunchRequest<'_>) -> Result<Arc<dyn Backend>, BackendError> {
        Err(BackendError::NotRunning("a linter starts no backend".to_owned()))
    }

    fn held_back(&self) -> Option<HeldBack> {
        Some(HeldBack::Linting)
    }
}

/// One call of a backend's tool.
#[derive(Debug, Clone)]
pub struct BackendCall {
    pub tool: String,
    pub input: Value,
    pub run_id: Uuid,
    pub timeout: Duration,
    pub cancel: CancellationToken,
    /// Where the tool's progress goes (an MCP server's notifications).
    pub progress: Option<ProgressSink>,
    /// The session and turn it was made in.
    pub context: CallContext,
}

/// One run of a hook.
#[derive(Debug, Clone)]
pub struct HookCall {
    pub phase: Phase,
    /// The tool of a tool phase (`before_tool_call`, `after_tool_result`).
    pub tool: Option<String>,
    pub payload: Value,
    pub timeout: Duration,
    pub context: CallContext,
}

/// One run of a scanner over files.
#[derive(Debug, Clone)]
pub struct ScanCall {
    pub scanner: String,
    /// Each file as `{"path", "text"}`, its path relative to what is scanned.
    pub files: Vec<Value>,
    pub timeout: Duration,
    pub context: CallContext,
}

/// A tool's report of how far it got.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// Takes a call's progress reports.
#[derive(Clone)]
pub struct ProgressSink(pub Arc<dyn Fn(Progress) + Send + Sync>);

impl ProgressSink {
    pub fn report(&self, progress: Progress) {
        (self.0)(progress);
    }
}

impl Debug for ProgressSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressSink")
    }
}

/// What a backend's tool gave. A failure of the tool is a result here.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BackendResult {
    /// The output as text (a JSON output as its JSON text).
    pub output: String,
    /// A JSON output (an object, array, number, …), as it came.
    pub parsed: Option<Value>,
    /// Why it failed, when it did.
    pub error: Option<String>,
    /// How the backend failed, when the call failed for the backend's
    /// sake rather than the tool's.
    pub fault: Option<BackendErrorKind>,
    pub timed_out: bool,
    pub cancelled: bool,
}

impl BackendResult {
    /// A call the backend failed: no output, `why` as its error.
    pub fn failed(why: BackendError) -> Self {
        Self {
            error: Some(why.to_string()),
            fault: Some(why.kind()),
            timed_out: why.kind() == BackendErrorKind::TimedOut,
            ..Self::default()
        }
    }
}

/// What waking a backend found ([`Backend::wake`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wake {
    /// It was started when its skill loaded: its hooks are its skill's.
    AtLoad,
    /// Its first call started it just now, and it declared these hooks.
    Started { hooks: Vec<String> },
}

/// Why a backend did not do what it was asked. Each carries the sentence
/// a person reads; the variant is what the pipeline tells apart, so that
/// a crashed backend does not read as a refusing one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    /// It is not running and could not be started (or may not be yet).
    #[error("{0}")]
    NotRunning(String),
    /// It was running and ended under the request: it exited, crashed or
    /// was killed, as the sentence says (`exited with code 3`).
    #[error("{0}")]
    Crashed(String),
    /// It did not answer in time.
    #[error("{0}")]
    TimedOut(String),
    /// It answered with a refusal: an error of its protocol, a failed
    /// script, an offer it does not have.
    #[error("{0}")]
    Refused(String),
    /// It answered something that is not an answer.
    #[error("{0}")]
    Protocol(String),
}

/// [`BackendError`]'s variant alone, as an envelope names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum BackendErrorKind {
    NotRunning,
    Crashed,
    TimedOut,
    Refused,
    Protocol,
}

impl BackendError {
    pub fn kind(&self) -> BackendErrorKind {
        match self {
            BackendError::NotRunning(_) => BackendErrorKind::NotRunning,
            BackendError::Crashed(_) => BackendErrorKind::Crashed,
            BackendError::TimedOut(_) => BackendErrorKind::TimedOut,
            BackendError::Refused(_) => BackendErrorKind::Refused,
            BackendError::Protocol(_) => BackendErrorKind::Protocol,
        }
    }

    /// The same failure, its sentence rewritten by `say` (to name the
    /// hook or the server it happened in).
    #[must_use]
    pub fn reworded(self, say: impl FnOnce(String) -> String) -> Self {
        match self {
            BackendError::NotRunning(s) => BackendError::NotRunning(say(s)),
            BackendError::Crashed(s) => BackendError::Crashed(say(s)),
            BackendError::TimedOut(s) => BackendError::TimedOut(say(s)),
            BackendError::Refused(s) => BackendError::Refused(say(s)),
            BackendError::Protocol(s) => BackendError::Protocol(say(s)),
        }
    }
}

/// What a hook answered (`hook/handle`'s result).
#[derive(Debug, Clone, PartialEq)]
pub enum HookAnswer {
    /// `{}`: nothing changes.
    Keep,
    /// `{"payload": P}`: the input (before) or the result (after) is P.
    Replace(Value),
    /// `{"cancel": reason}`: the call is refused before it runs.
    Cancel(String),
}

/// A running backend.
pub trait Backend: Send + Sync + Debug {
    /// Runs one tool call to its end (or its timeout or cancellation).
    fn execute(&self, call: BackendCall) -> BoxFuture<'_, BackendResult>;

    /// Runs a hook, bounded by its timeout.
    fn hook(&self, call: HookCall) -> BoxFuture<'_, Result<HookAnswer, BackendError>>;

    /// Runs workflow `call.tool` to its end, as [`Backend::execute`] runs
    /// a tool.
    fn workflow(&self, call: BackendCall) -> BoxFuture<'_, BackendResult> {
        let why = format!("the backend offers no workflow '{}'", call.tool);
        Box::pin(std::future::ready(BackendResult::failed(BackendError::Refused(
            why,
        ))))
    }

    /// Runs scanner `call.scanner`: its findings, each a JSON object
    /// (`rule`, `severity`, `message`, `path`, `line`), or why it failed.
    fn scan(&self, call: ScanCall) -> BoxFuture<'_, Result<Vec<Value>, BackendError>> {
        let why = format!("the backend offers no scanner '{}'", call.scanner);
        Box::pin(std::future::ready(Err(BackendError::Refused(why))))
    }

    /// An MCP server's prompt `name` with `arguments`: its
    /// `prompts/get` result.
    fn get_prompt(&self, name: &str, arguments: Value) -> BoxFuture<'_, Result<Value, BackendError>> {
        let _ = arguments;
        let why = format!("the backend offers no prompt '{name}'");
        Box::pin(std::future::ready(Err(BackendError::Refused(why))))
    }

    /// An MCP server's resource `uri`, as skilld serves it (an
    /// `upstream://` URI): its `resources/read` result.
    fn read_resource(&self, uri: &str) -> BoxFuture<'_, Result<Value, BackendError>> {
        let why = format!("the backend offers no resource '{uri}'");
        Box::pin(std::future::ready(Err(BackendError::Refused(why))))
    }

    /// Why skilld last dropped the backend's server, when it has: an MCP
    /// server that sent past a bound. `/diagnostics` says it of the skill.
    fn last_drop(&self) -> Option<String> {
        None
    }

    /// How the backend runs, for the run log's `argv` (the child's command
    /// line, or the script evaluated).
    fn command_line(&self) -> Vec<String>;

    /// For a backend its first call starts ([`Launch::unstarted`]): starts
    /// it, within `timeout`, and says the hooks it declared then.
    fn wake(&self, timeout: Duration) -> BoxFuture<'_, Result<Wake, BackendError>> {
        let _ = timeout;
        Box::pin(std::future::ready(Ok(Wake::AtLoad)))
    }
}
