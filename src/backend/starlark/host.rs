//! The Starlark host: `skilld starlark-host ENTRYPOINT`, the child that
//! evaluates a skill's script. The server starts it in the run sandbox like
//! any process backend and speaks the same protocol to it; the host's SDK
//! asks the server for every effect (`sdk/exec`, …), which checks the
//! skill's permissions and acts. A built-in operation that allocates past
//! what the machine gives (`"x" * 2**40`) aborts this child, never the
//! server, which fails the calls in flight and starts a new host.
//!
//! Each request is evaluated on a thread of its own, bounded by the
//! `timeout_ms` the server sends, by `$/cancelRequest`, and by the heap
//! budget ([`super::bounds`]).

use super::bounds::{self, Bounds, Failure};
use super::ctx::{self, Ctx, Remote};
use super::sdk;
use crate::backend::INITIALIZE_TIMEOUT;
use crate::backend::rpc::{MAX_LINE, SCRIPT_CANCELLED, SCRIPT_FAILED, SCRIPT_TIMED_OUT};
use serde_json::{Value, json};
use starlark::environment::{FrozenModule, Module};
use starlark::eval::Evaluator;
use starlark::syntax::{AstModule, Dialect};
use starlark::values::FrozenValue;
use starlark::values::dict::{AllocDict, FrozenDictRef};
use std::collections::HashMap;
use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The largest entrypoint evaluated.
const MAX_SOURCE: u64 = 1024 * 1024;
/// The longest line the server may send (an effect's answer: a file or a
/// program's output, escaped).
const MAX_INPUT_LINE: usize = 64 * 1024 * 1024;
/// The stack of an evaluation's thread. Starlark recurses through nested
/// values (freezing, `str`) with no bound on the depth but the heap's; an
/// overflow aborts this child only. Reserved, not committed.
const EVAL_STACK: usize = 256 * 1024 * 1024;
/// The longest a request without `timeout_ms` may evaluate.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(86_400);
/// How often a thread waiting for the server looks at its bounds.
const POLL: Duration = Duration::from_millis(20);

/// Runs the host until its stdin ends or the server asks it to shut down.
pub fn run(entrypoint: &Path) -> ExitCode {
    let host = Arc::new(Host {
        entrypoint: entrypoint.to_path_buf(),
        out: Mutex::new(std::io::stdout()),
        module: Mutex::new(None),
        running: Mutex::default(),
        waiting: Mutex::default(),
        next: AtomicU64::new(1),
        pool: Arc::default(),
    });
    let mut input = std::io::stdin().lock();
    loop {
        let line = match read_line(&mut input) {
            Ok(Some(line)) => line,
            Ok(None) => return ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("starlark host: {e}");
                return ExitCode::from(2);
            }
        };
        match serde_json::from_slice::<Value>(&line) {
            Ok(message) => {
                if host.take(message) == Flow::Stop {
                    return ExitCode::SUCCESS;
                }
            }
            Err(e) => eprintln!("starlark host: a line that is not JSON: {e}"),
        }
    }
}

/// One line without its newline, at most [`MAX_INPUT_LINE`] bytes.
fn read_line(input: &mut impl BufRead) -> Result<Option<Vec<u8>>, String> {
    let mut line = Vec::new();
    let limit = u64::try_from(MAX_INPUT_LINE).unwrap_or(u64::MAX) + 1;
    let n = input
        .take(limit)
        .read_until(b'\n', &mut line)
        .map_err(|e| format!("cannot read stdin: {e}"))?;
    if n == 0 {
        return Ok(None);
    }
    if line.last() == Some(&b'\n') {
        line.pop();
    } else if line.len() > MAX_INPUT_LINE {
        return Err(format!(
            "the server sent a line longer than {MAX_INPUT_LINE} bytes"
        ));
    }
    Ok(Some(line))
}

#[derive(Debug, PartialEq, Eq)]
enum Flow {
    Go,
    Stop,
}

/// What a request asks to evaluate.
enum Job {
    Load,
    Tool { name: String, input: Value },
    Workflow { name: String, input: Value },
    Hook { phase: String, payload: Value },
    Scan { scanner: String, files: Value },
}

type Answer = Result<Value, String>;

struct Host {
    entrypoint: PathBuf,
    out: Mutex<std::io::Stdout>,
    /// The script, evaluated and frozen by `initialize`.
    module: Mutex<Option<FrozenModule>>,
    /// Evaluations in flight, by the server's request id.
    running: Mutex<HashMap<String, CancellationToken>>,
    /// This host's requests awaiting the server's answer, by id.
    waiting: Mutex<HashMap<String, Sender<Answer>>>,
    next: AtomicU64,
    pool: Arc<Pool>,
}

type Work = Box<dyn FnOnce() + Send>;

/// Evaluation threads, kept between requests: a thread with a large stack
/// is not free to start, and most calls are short.
#[derive(Default)]
struct Pool {
    /// Threads waiting for work, each by the way to hand it some.
    idle: Mutex<Vec<Sender<Work>>>,
}

/// The most threads kept waiting; more end when their work is done.
const MAX_IDLE: usize = 4;

impl Pool {
    /// Runs `work` on an idle thread, or on a new one.
    fn run(self: &Arc<Self>, mut work: Work) -> std::io::Result<()> {
        loop {
            let Some(thread) = lock(&self.idle).pop() else {
                break;
            };
            match thread.send(work) {
                Ok(()) => return Ok(()),
                Err(std::sync::mpsc::SendError(back)) => work = back,
            }
        }
        let (tx, rx) = channel::<Work>();
        let pool = self.clone();
        std::thread::Builder::new()
            .name("starlark".to_owned())
            .stack_size(EVAL_STACK)
            .spawn(move || {
                let mut next = Some(work);
                while let Some(work) = next.take() {
                    work();
                    let mut idle = lock(&pool.idle);
                    if idle.len() >= MAX_IDLE {
                        return;
                    }
                    idle.push(tx.clone());
                    drop(idle);
                    next = rx.recv().ok();
                }
            })
            .map(drop)
    }
}

impl Host {
    /// Handles one message of the server's.
    fn take(self: &Arc<Self>, message: Value) -> Flow {
        let Some(method) = message.get("method").and_then(Value::as_str) else {
            self.answered(&message);
            return Flow::Go;
        };
        let id = message.get("id").cloned();
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        let job = match method {
            "initialize" => Job::Load,
            "tool/execute" => Job::Tool {
                name: text(&params, "name"),
                input: params.get("input").cloned().unwrap_or_else(|| json!({})),
            },
            "workflow/execute" => Job::Workflow {
                name: text(&params, "name"),
                input: params.get("input").cloned().unwrap_or_else(|| json!({})),
            },
            "hook/handle" => Job::Hook {
                phase: phase(&params),
                payload: hook_payload(&params),
            },
            "scanner/run" => Job::Scan {
                scanner: text(&params, "scanner"),
                files: params.get("files").cloned().unwrap_or_else(|| json!([])),
            },
            "$/cancelRequest" => {
                let key = params.get("id").map(Value::to_string).unwrap_or_default();
                if let Some(cancel) = lock(&self.running).get(&key) {
                    cancel.cancel();
                }
                return Flow::Go;
            }
            "shutdown" => {
                if let Some(id) = id {
                    self.answer(&id, Ok(Value::Null));
                }
                return Flow::Stop;
            }
            other => {
                if let Some(id) = id {
                    self.reply(&id, Err((-32601, format!("unknown method '{other}'"))));
                }
                return Flow::Go;
            }
        };
        if let Some(id) = id {
            self.start(id, &params, job);
        }
        Flow::Go
    }

    /// An answer to one of this host's requests reaches its waiter.
    fn answered(&self, message: &Value) {
        let Some(id) = message.get("id").and_then(Value::as_str) else {
            return;
        };
        let Some(waiter) = lock(&self.waiting).remove(id) else {
            return;
        };
        let answer = match (message.get("result"), message.get("error")) {
            (_, Some(e)) => Err(e
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| e.to_string(), str::to_owned)),
            (Some(result), None) => Ok(result.clone()),
            (None, None) => Err("the server's answer has no result".to_owned()),
        };
        let _ = waiter.send(answer);
    }

    /// Evaluates `job` on a thread of its own and answers request `id`.
    fn start(self: &Arc<Self>, id: Value, params: &Value, job: Job) {
        let timeout = params
            .get("timeout_ms")
            .and_then(Value::as_u64)
            .map_or(DEFAULT_TIMEOUT, Duration::from_millis);
        let timeout = match job {
            Job::Load => timeout.min(INITIALIZE_TIMEOUT),
            _ => timeout,
        };
        let cancel = CancellationToken::new();
        let key = id.to_string();
        lock(&self.running).insert(key.clone(), cancel.clone());
        let bounds = Bounds::new(timeout, cancel);
        let host = self.clone();
        let job_id = id.clone();
        let ran = self.pool.run(Box::new(move || {
            let outcome = host.evaluate(job, &job_id, &bounds);
            lock(&host.running).remove(&key);
            host.reply(&job_id, outcome.map_err(coded));
        }));
        if let Err(e) = ran {
            lock(&self.running).remove(&id.to_string());
            self.reply(
                &id,
                Err((SCRIPT_FAILED, format!("cannot start the evaluation: {e}"))),
            );
        }
    }

    fn evaluate(self: &Arc<Self>, job: Job, id: &Value, bounds: &Bounds) -> Result<Value, Failure> {
        let remote: Arc<dyn Remote> = self.clone();
        match job {
            Job::Load => {
                let ctx = Ctx::new(bounds.clone(), id.clone(), true, remote);
                let (module, declared) = load(&self.entrypoint, ctx).map_err(|f| match f {
                    Failure::TimedOut | Failure::Cancelled => Failure::Error(format!(
                        "its evaluation did not end within {}s",
                        INITIALIZE_TIMEOUT.as_secs()
                    )),
                    other => other,
                })?;
                *lock(&self.module) = Some(module);
                Ok(json!({
                    "tools": described(&declared.tools),
                    "hooks": declared.hooks,
                    "workflows": described(&declared.workflows),
                    "scanners": declared.scanners,
                }))
            }
            Job::Tool { name, input } => {
                let ctx = Ctx::new(bounds.clone(), id.clone(), false, remote);
                let out = self.call(&sdk::tool_key(&name), &input, ctx)?;
                Ok(json!({"output": out, "success": true}))
            }
            Job::Workflow { name, input } => {
                let ctx = Ctx::new(bounds.clone(), id.clone(), false, remote);
                let out = self.call(&sdk::workflow_key(&name), &input, ctx)?;
                Ok(json!({"output": out, "success": true}))
            }
            Job::Hook { phase, payload } => self.call(
                &sdk::hook_key(&phase),
                &payload,
                Ctx::new(bounds.clone(), id.clone(), false, remote),
            ),
            Job::Scan { scanner, files } => {
                let ctx = Ctx::new(bounds.clone(), id.clone(), false, remote);
                let findings = self.call(&sdk::scanner_key(&scanner), &files, ctx)?;
                Ok(json!({"findings": findings}))
            }
        }
    }

    fn call(&self, key: &str, arg: &Value, ctx: Ctx) -> Result<Value, Failure> {
        let module = lock(&self.module)
            .clone()
            .ok_or_else(|| Failure::Error("the script is not loaded".to_owned()))?;
        call_handler(&module, key, arg, ctx)
    }

    fn answer(&self, id: &Value, answer: Answer) {
        self.reply(id, answer.map_err(|why| (SCRIPT_FAILED, why)));
    }

    /// Answers request `id`. An answer too long for the server's lines is
    /// an error instead.
    fn reply(&self, id: &Value, answer: Result<Value, (i64, String)>) {
        let message = match answer {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err((code, message)) => error(id, code, &message),
        };
        if self.send(&message).is_err() {
            let why = format!("the handler's result is larger than {MAX_LINE} bytes");
            let _ = self.send(&error(id, SCRIPT_FAILED, &why));
        }
    }

    /// Writes `message` as one line; `Err` when it is longer than the
    /// server reads (nothing is written).
    fn send(&self, message: &Value) -> Result<(), ()> {
        let mut line = serde_json::to_vec(message).map_err(drop)?;
        if line.len() > MAX_LINE {
            return Err(());
        }
        line.push(b'\n');
        let mut out = lock(&self.out);
        // A server that stopped reading will end this host.
        let _ = out.write_all(&line).and_then(|()| out.flush());
        Ok(())
    }
}

impl Remote for Host {
    fn ask(&self, method: &str, params: Value, bounds: &Bounds) -> Result<Value, String> {
        let id = format!("sdk{}", self.next.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = channel();
        lock(&self.waiting).insert(id.clone(), tx);
        let request =
            json!({"jsonrpc": "2.0", "id": id, "method": format!("sdk/{method}"), "params": params});
        if self.send(&request).is_err() {
            lock(&self.waiting).remove(&id);
            return Err(format!(
                "{method}: its arguments are larger than {MAX_LINE} bytes"
            ));
        }
        let answer = wait(&rx, bounds);
        lock(&self.waiting).remove(&id);
        answer
    }
}

/// The server's answer, unless the bounds stop the evaluation first.
fn wait(rx: &Receiver<Answer>, bounds: &Bounds) -> Answer {
    loop {
        match rx.recv_timeout(POLL) {
            Ok(answer) => return answer,
            Err(RecvTimeoutError::Disconnected) => return Err("the server did not answer".to_owned()),
            Err(RecvTimeoutError::Timeout) => match bounds.stopped() {
                Some(Failure::Cancelled) => return Err("cancelled".to_owned()),
                Some(_) => return Err("timed out".to_owned()),
                None => {}
            },
        }
    }
}

fn error(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

fn coded(failure: Failure) -> (i64, String) {
    match failure {
        Failure::Error(why) => (SCRIPT_FAILED, why),
        Failure::TimedOut => (SCRIPT_TIMED_OUT, "timed out".to_owned()),
        Failure::Cancelled => (SCRIPT_CANCELLED, "cancelled".to_owned()),
    }
}

/// Tools or workflows as `initialize` answers them.
fn described(tools: &[crate::skill::backend::DeclaredTool]) -> Vec<Value> {
    tools
        .iter()
        .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema}))
        .collect()
}

/// The phase a request names, by its own name (the seed's spellings of
/// the tool phases too), as the script's hooks are kept.
fn phase(params: &Value) -> String {
    let named = text(params, "phase");
    crate::skill::phases::Phase::parse(&named).map_or(named, |p| p.as_str().to_owned())
}

fn text(params: &Value, key: &str) -> String {
    params
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// A hook's payload, with the tool it is for: one hook serves every tool.
fn hook_payload(params: &Value) -> Value {
    match params.get("payload").cloned() {
        Some(Value::Object(mut p)) => {
            if let Some(tool) = params.get("tool") {
                p.entry("tool").or_insert_with(|| tool.clone());
            }
            Value::Object(p)
        }
        Some(other) => other,
        None => Value::Null,
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
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

/// Evaluates the script in a fresh module and freezes what it defined.
fn load(entrypoint: &Path, ctx: Ctx) -> Result<(FrozenModule, ctx::Declared), Failure> {
    let source = read_source(entrypoint).map_err(Failure::Error)?;
    let name = entrypoint
        .file_name()
        .map_or_else(|| "script".to_owned(), |n| n.to_string_lossy().into_owned());
    let ast = AstModule::parse(&name, source, &Dialect::Standard)
        .map_err(|e| Failure::Error(bounds::describe(&e)))?;
    let bounds = ctx.bounds.clone();
    let ctx = Rc::new(ctx);
    let _entered = ctx::enter(ctx.clone());
    let globals = sdk::globals();
    let printer = sdk::Printer::default();
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
fn call_handler(frozen: &FrozenModule, key: &str, arg: &Value, ctx: Ctx) -> Result<Value, Failure> {
    let function = lookup(frozen, key).ok_or_else(|| {
        let what = key.replacen(':', " ", 1);
        Failure::Error(format!("the script registered no {what}"))
    })?;
    let bounds = ctx.bounds.clone();
    let printer = sdk::Printer::default();
    let _entered = ctx::enter(Rc::new(ctx));
    Module::with_temp_heap(|module| {
        // The handler's heap lives as long as this module.
        module.frozen_heap().add_reference(frozen.frozen_heap());
        let mut eval = Evaluator::new(&module);
        bounds::apply(&mut eval, &bounds)?;
        eval.set_print_handler(&printer);
        let arg = module.heap().alloc(arg);
        let out = match eval.eval_function(function.to_value(), &[arg], &[]) {
            Ok(out) => out,
            Err(e) => return Err(bounds::failure(&e, &eval, &bounds)),
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
