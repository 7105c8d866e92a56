//! The `process` backend: a skill's child, started in the run sandbox and
//! kept, restarted with backoff after a crash (`docs/design.md` §2).

use super::backoff::Backoff;
use super::outcome::{cancelled, failed, timed_out};
use super::place::Place;
use super::rpc::{Conn, ConnOptions, Death, RpcFailure, SCRIPT_TIMED_OUT, Serve};
use super::{ChildSettings, INITIALIZE_TIMEOUT};
use crate::runner::Child;
use crate::sandbox::Sandbox;
use crate::skill::backend::{
    Backend, BackendCall, BackendError, BackendResult, BoxFuture, DeclaredTool, HookAnswer, HookCall,
    LaunchRequest, ScanCall, Wake,
};
use crate::skill::context::CallContext;
use crate::skill::phases::Phase;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// What `initialize` declared.
#[derive(Debug, Clone)]
pub(super) struct Declared {
    pub tools: Vec<DeclaredTool>,
    pub hooks: Vec<String>,
    pub workflows: Vec<DeclaredTool>,
    pub scanners: Vec<String>,
}

/// One skill's child, started on demand and kept while its skill is loaded.
#[derive(Debug)]
pub struct ProcessBackend {
    place: Place,
    hash: String,
    command: Vec<String>,
    manifest: Value,
    conn: tokio::sync::Mutex<Option<Arc<Conn>>>,
    declared: Mutex<Option<Declared>>,
    backoff: Backoff,
    /// Cancelled on drop: the running child is shut down.
    stopped: CancellationToken,
    /// Serves the child's own requests (the Starlark host's).
    serve: Option<Arc<dyn Serve>>,
    /// Started by its first call rather than at load: its hooks are those
    /// it declares then ([`Backend::wake`]).
    by_first_call: bool,
}

impl ProcessBackend {
    pub(super) fn new(req: &LaunchRequest<'_>, sandbox: Arc<Sandbox>, settings: ChildSettings) -> Self {
        Self {
            place: Place::new(req, sandbox, settings),
            hash: req.hash.to_owned(),
            command: crate::runner::deps_command(req.command.clone(), req.deps),
            manifest: req.manifest.clone(),
            conn: tokio::sync::Mutex::new(None),
            declared: Mutex::new(None),
            backoff: Backoff::default(),
            stopped: CancellationToken::new(),
            serve: None,
            by_first_call: false,
        }
    }

    /// The same backend, left for its first call to start.
    pub(super) fn started_by_first_call(mut self) -> Self {
        self.by_first_call = true;
        self
    }

    /// The same backend, its child `command` instead, serving the child's
    /// requests with `serve`.
    pub(super) fn serving(mut self, command: Vec<String>, serve: Arc<dyn Serve>) -> Self {
        self.command = command;
        self.serve = Some(serve);
        self
    }

    pub(super) fn hash(&self) -> &str {
        &self.hash
    }

    /// What the child declared at its last `initialize`.
    pub(super) fn declared(&self) -> Option<Declared> {
        lock(&self.declared).clone()
    }

    /// Starts the child and asks what it offers (at catalog load).
    pub(super) async fn initialize(&self) -> Result<Declared, BackendError> {
        self.connection(Instant::now() + INITIALIZE_TIMEOUT).await?;
        self.declared()
            .ok_or_else(|| BackendError::Protocol("the child answered nothing to initialize".to_owned()))
    }

    /// The live connection, started (after the backoff, if it must wait and
    /// may by `deadline`) when there is none.
    async fn connection(&self, deadline: Instant) -> Result<Arc<Conn>, BackendError> {
        let mut slot = self.conn.lock().await;
        if let Some(conn) = slot.as_ref().filter(|c| c.is_alive()) {
            return Ok(conn.clone());
        }
        if let Some(death) = slot.take().and_then(|c| c.death()) {
            self.count(&death);
        }
        self.wait_backoff(deadline).await?;
        match self.start().await {
            Ok(conn) => {
                *slot = Some(conn.clone());
                Ok(conn)
            }
            Err(why) => {
                self.count(&Death {
                    reason: why.to_string(),
                    failed: true,
                    at: Instant::now(),
                });
                Err(why)
            }
        }
    }

    /// Counts a failed child toward the backoff.
    fn count(&self, death: &Death) {
        if death.failed {
            self.backoff.failed(death.at);
        }
    }

    async fn wait_backoff(&self, deadline: Instant) -> Result<(), BackendError> {
        self.backoff.wait(deadline, "the skill's process").await
    }

    /// Starts a child in the sandbox and initializes it. A child that
    /// fails where the sandbox's user cannot reach the skill's files (a
    /// skill in root's home) most likely failed for that: the error says
    /// so, not only the child's "Permission denied".
    async fn start(&self) -> Result<Arc<Conn>, BackendError> {
        self.start_child()
            .await
            .map_err(|why| why.reworded(|w| self.place.explain(w)))
    }

    async fn start_child(&self) -> Result<Arc<Conn>, BackendError> {
        let not_running = BackendError::NotRunning;
        let scratch = self
            .place
            .scratch_dir()
            .map_err(|e| not_running(format!("cannot make its directory: {e}")))?;
        let (spec, egress) = self
            .place
            .spec(&self.command, &scratch, Vec::new())
            .map_err(|e| not_running(format!("cannot prepare its sandbox: {e}")))?;
        let child = Child::start(spec)?.holding(egress);
        let conn = Conn::spawn(
            child,
            ConnOptions {
                skill: self.place.skill.clone(),
                grace: self.place.settings.grace,
                idle: self.place.settings.idle,
                stopped: self.stopped.child_token(),
                scratch,
                serve: self.serve.clone(),
            },
        )?;
        let params = json!({"protocol": "skilld.process/1", "manifest": self.manifest});
        // A script's effects while it loads spend a turn of their own.
        let context = CallContext::alone(self.place.settings.turn_limits);
        let answer = conn
            .request("initialize", params, INITIALIZE_TIMEOUT, None, &context)
            .await
            .map_err(|f| match f {
                RpcFailure::TimedOut => BackendError::TimedOut(format!(
                    "it did not answer initialize within {}s",
                    INITIALIZE_TIMEOUT.as_secs()
                )),
                other => backend_error(other).reworded(|w| format!("initialize failed: {w}")),
            })?;
        let declared =
            declared(&answer).inspect_err(|_| conn.kill_for("answered initialize wrongly".to_owned()))?;
        *lock(&self.declared) = Some(declared);
        Ok(conn)
    }

    /// Runs `call` as `method` (`tool/execute`, `workflow/execute`).
    async fn call(&self, method: &str, call: BackendCall) -> BackendResult {
        let deadline = Instant::now() + call.timeout;
        let conn = tokio::select! {
            conn = self.connection(deadline) => conn,
            () = call.cancel.cancelled() => return cancelled(),
        };
        let conn = match conn {
            Ok(conn) => conn,
            Err(why) => return failed(not_started(why)),
        };
        let params = json!({"name": call.tool, "input": call.input, "run_id": call.run_id});
        let left = deadline.saturating_duration_since(Instant::now());
        let answer = conn
            .request(method, params, left, Some(&call.cancel), &call.context)
            .await;
        if matches!(answer, Ok(_) | Err(RpcFailure::Remote { .. })) {
            // It answered: whatever failed before, it works now.
            self.backoff.answered();
        }
        match answer {
            Ok(result) => tool_result(&result),
            Err(RpcFailure::TimedOut) => timed_out(
                call.timeout,
                "the skill's process was killed and starts again on the next call",
            ),
            Err(RpcFailure::Remote {
                code: Some(SCRIPT_TIMED_OUT),
                ..
            }) => timed_out(call.timeout, "the script's evaluation was stopped"),
            Err(RpcFailure::Cancelled) => cancelled(),
            Err(other) => failed(backend_error(other)),
        }
    }

    async fn handle_hook(&self, call: HookCall) -> Result<HookAnswer, BackendError> {
        let (phase, timeout) = (call.phase, call.timeout);
        let conn = self.connection(Instant::now() + timeout).await?;
        let mut params = json!({"phase": phase.as_str(), "payload": call.payload});
        // Only a tool phase names a tool.
        if let Some(tool) = call.tool {
            params["tool"] = Value::String(tool);
        }
        let answer = conn
            .request("hook/handle", params, timeout, None, &call.context)
            .await
            .map_err(|f| match f {
                RpcFailure::TimedOut
                | RpcFailure::Remote {
                    code: Some(SCRIPT_TIMED_OUT),
                    ..
                } => BackendError::TimedOut(format!("hook {phase} timed out after {}s", timeout.as_secs())),
                other => backend_error(other).reworded(|w| format!("hook {phase} failed: {w}")),
            })?;
        hook_answer(&answer).map_err(|why| why.reworded(|w| format!("hook {phase}: {w}")))
    }

    async fn run_scanner(&self, call: ScanCall) -> Result<Vec<Value>, BackendError> {
        let (scanner, timeout) = (call.scanner, call.timeout);
        let conn = self.connection(Instant::now() + timeout).await?;
        let params = json!({"scanner": scanner, "files": call.files});
        let answer = conn
            .request("scanner/run", params, timeout, None, &call.context)
            .await
            .map_err(|f| match f {
                RpcFailure::TimedOut
                | RpcFailure::Remote {
                    code: Some(SCRIPT_TIMED_OUT),
                    ..
                } => BackendError::TimedOut(format!(
                    "scanner {scanner} timed out after {}s",
                    timeout.as_secs()
                )),
                other => backend_error(other).reworded(|w| format!("scanner {scanner} failed: {w}")),
            })?;
        super::findings::of_answer(&answer).map_err(|why| why.reworded(|w| format!("scanner {scanner}: {w}")))
    }
}

impl Drop for ProcessBackend {
    fn drop(&mut self) {
        self.stopped.cancel();
    }
}

impl Backend for ProcessBackend {
    fn execute(&self, call: BackendCall) -> BoxFuture<'_, BackendResult> {
        Box::pin(self.call("tool/execute", call))
    }

    fn workflow(&self, call: BackendCall) -> BoxFuture<'_, BackendResult> {
        Box::pin(self.call("workflow/execute", call))
    }

    fn scan(&self, call: ScanCall) -> BoxFuture<'_, Result<Vec<Value>, BackendError>> {
        Box::pin(self.run_scanner(call))
    }

    fn hook(&self, call: HookCall) -> BoxFuture<'_, Result<HookAnswer, BackendError>> {
        Box::pin(self.handle_hook(call))
    }

    fn command_line(&self) -> Vec<String> {
        self.command.clone()
    }

    fn wake(&self, timeout: Duration) -> BoxFuture<'_, Result<Wake, BackendError>> {
        Box::pin(async move {
            if !self.by_first_call {
                return Ok(Wake::AtLoad);
            }
            self.connection(Instant::now() + timeout)
                .await
                .map_err(not_started)?;
            let declared = self.declared().map(|d| d.hooks).unwrap_or_default();
            Ok(Wake::Started {
                hooks: Phase::known(&declared),
            })
        })
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Why a call found no child to take it, as the caller is told.
fn not_started(why: BackendError) -> BackendError {
    why.reworded(|w| format!("the skill's process could not be started: {w}"))
}

/// A request's failure as the backend's: what the child answered, or how
/// it ended.
fn backend_error(f: RpcFailure) -> BackendError {
    match f {
        RpcFailure::Remote { message, .. } => BackendError::Refused(message),
        RpcFailure::Died(why) => BackendError::Crashed(format!("the skill's process {why}")),
        RpcFailure::TimedOut => BackendError::TimedOut("timed out".to_owned()),
        // Only a call is cancelled, and `call` answers that itself.
        RpcFailure::Cancelled => BackendError::Refused("cancelled".to_owned()),
    }
}

/// `initialize`'s answer: `{"tools", "hooks", "workflows", "scanners"}`,
/// each an optional list.
fn declared(answer: &Value) -> Result<Declared, BackendError> {
    let bad = |what: &str| BackendError::Protocol(format!("its initialize answer is not valid: {what}"));
    let Value::Object(a) = answer else {
        return Err(bad("not an object"));
    };
    let tools = described(a.get("tools")).map_err(|what| bad(&format!("tools {what}")))?;
    let workflows = described(a.get("workflows")).map_err(|what| bad(&format!("workflows {what}")))?;
    let hooks = names(a.get("hooks")).map_err(|what| bad(&format!("hooks {what}")))?;
    let scanners = names(a.get("scanners")).map_err(|what| bad(&format!("scanners {what}")))?;
    Ok(Declared {
        tools,
        hooks,
        workflows,
        scanners,
    })
}

/// A list of `{"name", "description", "input_schema", "output_schema"}`.
fn described(list: Option<&Value>) -> Result<Vec<DeclaredTool>, &'static str> {
    let items = match list {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => return Err("is not a list"),
    };
    items
        .iter()
        .map(|t| {
            Some(DeclaredTool {
                name: t.get("name")?.as_str()?.to_owned(),
                description: t
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
                input_schema: t
                    .get("input_schema")
                    .cloned()
                    .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
                output_schema: t.get("output_schema").filter(|s| !s.is_null()).cloned(),
                hints: Default::default(),
            })
        })
        .collect::<Option<Vec<_>>>()
        .ok_or("has an entry without a name")
}

/// A list of names.
fn names(list: Option<&Value>) -> Result<Vec<String>, &'static str> {
    match list {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|h| h.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or("is not a list of names"),
        Some(_) => Err("is not a list"),
    }
}

/// `tool/execute`'s result: `{"output": STRING_OR_JSON, "success": bool}`.
fn tool_result(result: &Value) -> BackendResult {
    let output = result.get("output").cloned().unwrap_or(Value::Null);
    let (text, parsed) = match output {
        Value::String(s) => (s, None),
        Value::Null => (String::new(), None),
        json => (json.to_string(), Some(json)),
    };
    let success = result.get("success").and_then(Value::as_bool).unwrap_or(true);
    let error = (!success).then(|| {
        let first = text.lines().next().unwrap_or("").trim();
        if first.is_empty() {
            "the tool reported a failure".to_owned()
        } else {
            first.chars().take(500).collect()
        }
    });
    BackendResult {
        output: text,
        parsed,
        error,
        ..BackendResult::default()
    }
}

/// `hook/handle`'s result: `{}`, `{"payload": P}` or `{"cancel": reason}`.
pub(crate) fn hook_answer(answer: &Value) -> Result<HookAnswer, BackendError> {
    match answer {
        Value::Null => Ok(HookAnswer::Keep),
        Value::Object(a) => {
            if let Some(reason) = a.get("cancel").filter(|c| !c.is_null()) {
                let reason = reason.as_str().map_or_else(|| reason.to_string(), str::to_owned);
                return Ok(HookAnswer::Cancel(reason));
            }
            Ok(a.get("payload")
                .cloned()
                .map_or(HookAnswer::Keep, HookAnswer::Replace))
        }
        _ => Err(BackendError::Protocol("the answer is not an object".to_owned())),
    }
}
