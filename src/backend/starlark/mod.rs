//! The `starlark` backend (`docs/design.md` §2 "Manifest backends"): the
//! skill's `*.star` entrypoint, evaluated in the server once per load with
//! the SDK globals of [`sdk`]. Each tool call or hook then runs its handler
//! on a thread of its own in a fresh module, bounded in time, memory and by
//! cancellation ([`bounds`]).

mod bounds;
mod ctx;
mod effects;
mod sdk;

use super::{ChildSettings, INITIALIZE_TIMEOUT};
use crate::backend::process::hook_answer;
use crate::sandbox::Sandbox;
use crate::skill::Trust;
use crate::skill::backend::{
    Backend, BackendCall, BackendResult, BoxFuture, HookAnswer, LaunchRequest, Launched,
};
use bounds::{Bounds, Failure};
use ctx::{Ctx, Declared};
use serde_json::Value;
use starlark::environment::{FrozenModule, Module};
use starlark::eval::Evaluator;
use starlark::syntax::{AstModule, Dialect};
use starlark::values::FrozenValue;
use starlark::values::dict::{AllocDict, FrozenDictRef};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The largest entrypoint evaluated.
const MAX_SOURCE: u64 = 1024 * 1024;
/// The stack of an evaluation's thread. Starlark recurses through nested
/// values (freezing, `str`, JSON) with no bound on the depth, which only
/// the heap budget limits; a thread of tokio's blocking pool (2 MiB) would
/// overflow, and an overflow aborts the server. Reserved, not committed:
/// only the pages a deep value touches are used, until the thread ends.
const EVAL_STACK: usize = 1024 * 1024 * 1024;

/// What every evaluation of one skill's script shares.
#[derive(Debug)]
pub(super) struct Shared {
    pub skill: String,
    pub dir: PathBuf,
    pub entrypoint: PathBuf,
    pub trust: Trust,
    pub network: bool,
    pub permissions: Vec<String>,
    pub memory_bytes: Option<u64>,
    pub sandbox: Arc<Sandbox>,
    pub settings: ChildSettings,
    pub runtime: tokio::runtime::Handle,
}

impl Shared {
    pub(super) fn allows(&self, permission: &str) -> bool {
        self.permissions.iter().any(|p| p == permission)
    }
}

/// A loaded script: its module frozen, with the handlers it registered.
pub struct StarlarkBackend {
    shared: Arc<Shared>,
    module: FrozenModule,
}

/// Not the module's: its values could be many.
impl std::fmt::Debug for StarlarkBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StarlarkBackend")
            .field("skill", &self.shared.skill)
            .field("entrypoint", &self.shared.entrypoint)
            .finish_non_exhaustive()
    }
}

/// Evaluates the skill's script (at most [`INITIALIZE_TIMEOUT`]) and
/// answers the tools and hooks it registered.
pub(super) fn launch(
    req: &LaunchRequest<'_>,
    sandbox: Arc<Sandbox>,
    settings: ChildSettings,
    runtime: tokio::runtime::Handle,
) -> Result<Launched, String> {
    // The evaluator runs inside the server: its heap and time are bounded,
    // but one built-in operation (`"x" * 2**40`) allocates before any
    // check, and a failed allocation aborts the process. Code from an
    // untrusted source is not evaluated until it runs in a child.
    if req.trust == crate::skill::Trust::Untrusted {
        return Err(
            "Starlark skills from untrusted sources are not evaluated: the evaluator runs inside the \
             server, where a single runaway built-in operation could stop it"
                .to_owned(),
        );
    }
    let source = read_source(req.entrypoint)?;
    let shared = Arc::new(Shared {
        skill: req.skill.to_owned(),
        dir: req.dir.to_path_buf(),
        entrypoint: req.entrypoint.to_path_buf(),
        trust: req.trust,
        network: req.network,
        permissions: req.permissions.to_vec(),
        memory_bytes: req.memory_bytes,
        sandbox,
        settings,
        runtime,
    });
    let name = req
        .entrypoint
        .strip_prefix(req.dir)
        .unwrap_or(req.entrypoint)
        .display()
        .to_string();
    let (module, declared) = evaluate_apart(&shared, name, source)?;
    Ok(Launched {
        backend: Arc::new(StarlarkBackend { shared, module }),
        tools: declared.tools,
        hooks: declared.hooks,
    })
}

fn read_source(path: &Path) -> Result<String, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut bytes = Vec::new();
    file.take(MAX_SOURCE + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if bytes.len() as u64 > MAX_SOURCE {
        return Err(format!("{} is larger than {MAX_SOURCE} bytes", path.display()));
    }
    String::from_utf8(bytes).map_err(|_| format!("{} is not UTF-8 text", path.display()))
}

/// Evaluates on a thread of its own, so that the catalog's thread waits at
/// most the bound even if a native operation never reaches a check.
fn evaluate_apart(
    shared: &Arc<Shared>,
    name: String,
    source: String,
) -> Result<(FrozenModule, Declared), String> {
    let (tx, rx) = std::sync::mpsc::channel();
    let loading = shared.clone();
    spawn_evaluation(&shared.skill, move || {
        let _ = tx.send(evaluate(&loading, &name, source));
    })?;
    let late = || {
        format!(
            "its evaluation did not end within {}s",
            INITIALIZE_TIMEOUT.as_secs()
        )
    };
    match rx.recv_timeout(INITIALIZE_TIMEOUT + Duration::from_millis(500)) {
        Ok(Ok(loaded)) => Ok(loaded),
        Ok(Err(Failure::Error(why))) => Err(why),
        Ok(Err(Failure::TimedOut | Failure::Cancelled)) | Err(RecvTimeoutError::Timeout) => Err(late()),
        Err(RecvTimeoutError::Disconnected) => Err("its evaluation stopped unexpectedly".to_owned()),
    }
}

/// Runs `job` on a thread of its own, with [`EVAL_STACK`].
fn spawn_evaluation(skill: &str, job: impl FnOnce() + Send + 'static) -> Result<(), String> {
    std::thread::Builder::new()
        .name(format!("starlark-{skill}"))
        .stack_size(EVAL_STACK)
        .spawn(job)
        .map(drop)
        .map_err(|e| format!("cannot start the script's evaluation: {e}"))
}

/// Evaluates the script in a fresh module and freezes what it defined.
fn evaluate(shared: &Arc<Shared>, name: &str, source: String) -> Result<(FrozenModule, Declared), Failure> {
    let ast = AstModule::parse(name, source, &Dialect::Standard)
        .map_err(|e| Failure::Error(bounds::describe(&e)))?;
    let bounds = Bounds::new(INITIALIZE_TIMEOUT, CancellationToken::new());
    let ctx = Rc::new(Ctx::new(shared.clone(), bounds.clone(), true));
    let _entered = ctx::enter(ctx.clone());
    let globals = sdk::globals();
    let printer = sdk::Printer::new(&shared.skill);
    let frozen = Module::with_temp_heap(|module| {
        // The handlers are kept in the module, so that they are frozen with it.
        module.set_extra_value(module.heap().alloc(AllocDict::EMPTY));
        {
            let mut eval = Evaluator::new(&module);
            bounds::apply(&mut eval, &bounds)?;
            eval.set_print_handler(&printer);
            if let Err(e) = eval.eval_module(ast, &globals) {
                return Err(bounds::failure(&e, &eval, &bounds));
            }
        }
        module
            .freeze()
            .map_err(|e| Failure::Error(format!("cannot keep what it defined: {}", e.err_msg)))
    })?;
    Ok((frozen, ctx.take_declared()))
}

/// The handler registered under `key`.
fn lookup(module: &FrozenModule, key: &str) -> Option<FrozenValue> {
    FrozenDictRef::from_frozen_value(module.extra_value()?)?.get_str(key)
}

/// Calls the handler under `key` with `arg` in a fresh module; answers
/// its result as JSON.
fn call_handler(
    shared: Arc<Shared>,
    frozen: &FrozenModule,
    key: &str,
    arg: &Value,
    bounds: &Bounds,
) -> Result<Value, Failure> {
    let function = lookup(frozen, key).ok_or_else(|| {
        let what = key.replacen(':', " ", 1);
        Failure::Error(format!("the script registered no {what}"))
    })?;
    let printer = sdk::Printer::new(&shared.skill);
    let _entered = ctx::enter(Rc::new(Ctx::new(shared, bounds.clone(), false)));
    Module::with_temp_heap(|module| {
        // The handler's heap lives as long as this module.
        module.frozen_heap().add_reference(frozen.frozen_heap());
        let mut eval = Evaluator::new(&module);
        bounds::apply(&mut eval, bounds)?;
        eval.set_print_handler(&printer);
        let arg = module.heap().alloc(arg);
        let out = match eval.eval_function(function.to_value(), &[arg], &[]) {
            Ok(out) => out,
            Err(e) => return Err(bounds::failure(&e, &eval, bounds)),
        };
        bounds::check_json(out).map_err(|why| Failure::Error(format!("the handler's result {why}")))?;
        out.to_json_value().map_err(|_| {
            Failure::Error(format!(
                "the handler returned a {}, which is not a string, dict, list or None",
                out.get_type()
            ))
        })
    })
}

impl StarlarkBackend {
    /// Runs the handler under `key` on a thread of its own; answers when
    /// it ends, at the deadline, or when the call is cancelled, whichever
    /// comes first.
    async fn run(&self, key: String, arg: Value, bounds: Bounds) -> Result<Value, Failure> {
        let (shared, module, b) = (self.shared.clone(), self.module.clone(), bounds.clone());
        let (tx, rx) = tokio::sync::oneshot::channel();
        spawn_evaluation(&self.shared.skill, move || {
            let _ = tx.send(call_handler(shared, &module, &key, &arg, &b));
        })
        .map_err(Failure::Error)?;
        // A native operation that never reaches a check keeps its thread
        // until it does; the caller does not wait for it.
        let lost = || {
            Err(Failure::Error(
                "the script's evaluation stopped unexpectedly".to_owned(),
            ))
        };
        tokio::select! {
            biased;
            answer = rx => answer.unwrap_or_else(|_| lost()),
            () = tokio::time::sleep_until(bounds.deadline.into()) => Err(Failure::TimedOut),
            () = bounds.cancel.cancelled() => Err(Failure::Cancelled),
        }
    }

    async fn call(&self, call: BackendCall) -> BackendResult {
        let bounds = Bounds::new(call.timeout, call.cancel.clone());
        match self.run(sdk::tool_key(&call.tool), call.input, bounds).await {
            Ok(out) => tool_result(out),
            Err(Failure::Error(why)) => failed(why),
            Err(Failure::TimedOut) => BackendResult {
                timed_out: true,
                error: Some(format!(
                    "timed out after {}s; the script's evaluation was stopped",
                    call.timeout.as_secs()
                )),
                ..BackendResult::default()
            },
            Err(Failure::Cancelled) => BackendResult {
                cancelled: true,
                error: Some("cancelled".to_owned()),
                ..BackendResult::default()
            },
        }
    }

    async fn handle_hook(
        &self,
        phase: &str,
        tool: &str,
        payload: Value,
        timeout: Duration,
    ) -> Result<HookAnswer, String> {
        // The handler learns the tool too: one hook serves every tool.
        let payload = match payload {
            Value::Object(mut p) => {
                p.entry("tool").or_insert_with(|| Value::String(tool.to_owned()));
                Value::Object(p)
            }
            other => other,
        };
        let bounds = Bounds::new(timeout, CancellationToken::new());
        let answer = self
            .run(sdk::hook_key(phase), payload, bounds)
            .await
            .map_err(|f| match f {
                Failure::Error(why) => format!("hook {phase} failed: {why}"),
                Failure::TimedOut | Failure::Cancelled => {
                    format!("hook {phase} timed out after {}s", timeout.as_secs())
                }
            })?;
        hook_answer(&answer).map_err(|why| format!("hook {phase}: {why}"))
    }
}

impl Backend for StarlarkBackend {
    fn execute(&self, call: BackendCall) -> BoxFuture<'_, BackendResult> {
        Box::pin(self.call(call))
    }

    fn hook(
        &self,
        phase: &str,
        tool: &str,
        payload: Value,
        timeout: Duration,
    ) -> BoxFuture<'_, Result<HookAnswer, String>> {
        let (phase, tool) = (phase.to_owned(), tool.to_owned());
        Box::pin(async move { self.handle_hook(&phase, &tool, payload, timeout).await })
    }

    fn command_line(&self) -> Vec<String> {
        vec![
            "starlark".to_owned(),
            self.shared.entrypoint.display().to_string(),
        ]
    }
}

fn failed(why: String) -> BackendResult {
    BackendResult {
        error: Some(why),
        ..BackendResult::default()
    }
}

/// A handler's result: a string is the output; None is no output; any
/// other JSON value is `parsed`, its text the output.
fn tool_result(out: Value) -> BackendResult {
    let (output, parsed) = match out {
        Value::String(s) => (s, None),
        Value::Null => (String::new(), None),
        json => (json.to_string(), Some(json)),
    };
    BackendResult {
        output,
        parsed,
        ..BackendResult::default()
    }
}
