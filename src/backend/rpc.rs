//! One connection to a process backend's child: JSON-RPC 2.0 requests,
//! one JSON object per line, multiplexed by id. A supervisor task owns the
//! child; it reads answers, watches for the exit, and kills the child (its
//! whole group and cgroup) on anything that breaks the protocol.

use crate::runner::Child;
use crate::skill::backend::{BackendError, BoxFuture};
use crate::skill::context::CallContext;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::pipe;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The longest line a child may write (DESIGN §2).
pub const MAX_LINE: usize = 1024 * 1024;
/// Of the child's stderr, this much is logged over its life; the rest is
/// read and dropped, so a chatty child can neither block nor flood the log.
const STDERR_LOG_BUDGET: usize = 64 * 1024;
/// A logged stderr line is cut to this many characters.
const STDERR_LINE_CHARS: usize = 512;

/// Error codes of the Starlark host's answers: the script failed (its
/// message says how), ran out of time, or was cancelled.
pub(super) const SCRIPT_FAILED: i64 = -32000;
pub(super) const SCRIPT_TIMED_OUT: i64 = -32001;
pub(super) const SCRIPT_CANCELLED: i64 = -32800;

/// Requests a child may make of the server (the Starlark host's SDK
/// effects), each on behalf of one of the server's requests in flight.
pub(super) trait Serve: Send + Sync + std::fmt::Debug {
    /// What the child may act within while it answers a request that must
    /// end within `timeout`, stops on `cancel`, and was made in `context`
    /// (whose turn its effects spend).
    fn open(&self, timeout: Duration, cancel: CancellationToken, context: CallContext) -> Arc<dyn Scope>;
}

/// The server's side of one request in flight, serving the child's own.
pub(super) trait Scope: Send + Sync {
    fn handle(self: Arc<Self>, method: String, params: Value) -> BoxFuture<'static, Result<Value, String>>;
}

/// How long past a request's timeout a serving child has to say that it
/// stopped, before it is killed as hung.
const SERVED_SLACK: Duration = Duration::from_secs(1);

/// Why a request got no result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum RpcFailure {
    /// The child answered with a JSON-RPC error.
    Remote {
        code: Option<i64>,
        message: String,
    },
    /// The child is gone (crashed, killed, or broke the protocol).
    Died(String),
    TimedOut,
    Cancelled,
}

type Reply = Result<Value, RpcFailure>;

/// How a connection ended.
#[derive(Debug, Clone)]
pub(super) struct Death {
    pub reason: String,
    /// A crash, a hang or a protocol error (counts toward the backoff), as
    /// opposed to an idle or requested stop.
    pub failed: bool,
    pub at: Instant,
}

/// What the supervisor needs beside the child.
pub(super) struct ConnOptions {
    pub skill: String,
    pub grace: Duration,
    pub idle: Duration,
    /// Fires when the backend is dropped: the child is shut down.
    pub stopped: CancellationToken,
    /// The child's own directory, removed when it ends.
    pub scratch: PathBuf,
    /// Serves the child's requests; with it, requests carry `timeout_ms`
    /// and a cancelled one is announced (`$/cancelRequest`).
    pub serve: Option<Arc<dyn Serve>>,
}

/// The server's side of one child.
pub(super) struct Conn {
    outgoing: mpsc::UnboundedSender<Vec<u8>>,
    /// Requests awaiting their answer; `None` once the child is gone.
    pending: Mutex<Option<HashMap<u64, oneshot::Sender<Reply>>>>,
    next_id: AtomicU64,
    death: Mutex<Option<Death>>,
    /// Asks the supervisor to kill the child, for the reason in `kill_why`.
    kill: CancellationToken,
    kill_why: Mutex<Option<String>>,
    last_used: Mutex<Instant>,
    serve: Option<Arc<dyn Serve>>,
    /// What the child's requests may use, by the server's request id.
    scopes: Mutex<HashMap<u64, Arc<dyn Scope>>>,
}

/// Not the scopes: they hold what the requests in flight may use.
impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("next_id", &self.next_id)
            .field("death", &self.death)
            .field("serving", &self.serve.is_some())
            .finish_non_exhaustive()
    }
}

impl Conn {
    /// Takes over `child` and starts its supervisor.
    pub(super) fn spawn(mut child: Child, opts: ConnOptions) -> Result<Arc<Self>, BackendError> {
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(BackendError::NotRunning(
                "the child's pipes were not open".to_owned(),
            ));
        };
        let (outgoing, queued) = mpsc::unbounded_channel();
        let conn = Arc::new(Self::new(outgoing, opts.serve.clone()));
        let writer_done = CancellationToken::new();
        tokio::spawn(write_requests(stdin, queued, conn.clone(), writer_done.clone()));
        tokio::spawn(log_stderr(stderr, opts.skill.clone(), "process backend"));
        tokio::spawn(supervise(conn.clone(), child, stdout, opts, writer_done));
        Ok(conn)
    }

    /// A connection with nothing in flight, sending on `outgoing`.
    fn new(outgoing: mpsc::UnboundedSender<Vec<u8>>, serve: Option<Arc<dyn Serve>>) -> Self {
        Self {
            outgoing,
            pending: Mutex::new(Some(HashMap::new())),
            next_id: AtomicU64::new(1),
            death: Mutex::new(None),
            kill: CancellationToken::new(),
            kill_why: Mutex::new(None),
            last_used: Mutex::new(Instant::now()),
            serve,
            scopes: Mutex::default(),
        }
    }

    pub(super) fn is_alive(&self) -> bool {
        lock(&self.death).is_none()
    }

    pub(super) fn death(&self) -> Option<Death> {
        lock(&self.death).clone()
    }

    /// Sends `method` and waits for its answer, at most `timeout`: past it
    /// the child is killed (a hung child serves no one). A cancelled wait
    /// leaves the child running; its answer is dropped when it comes, and
    /// it is killed should that not be within `timeout`.
    pub(super) async fn request(
        self: &Arc<Self>,
        method: &str,
        mut params: Value,
        timeout: Duration,
        cancel: Option<&CancellationToken>,
        context: &CallContext,
    ) -> Reply {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, mut rx) = oneshot::channel();
        match lock(&self.pending).as_mut() {
            Some(pending) => pending.insert(id, tx),
            None => return Err(RpcFailure::Died(self.reason())),
        };
        let never = CancellationToken::new();
        let cancel = cancel.unwrap_or(&never);
        let _scope = self.open_scope(id, &mut params, timeout, cancel, context);
        *lock(&self.last_used) = Instant::now();
        if !self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})) {
            return Err(RpcFailure::Died(self.reason()));
        }
        // A serving child stops by itself at the timeout, and says so.
        let slack = if self.serve.is_some() {
            SERVED_SLACK
        } else {
            Duration::ZERO
        };
        let deadline = Instant::now() + timeout + slack;
        let answering = tracing::trace_span!("rpc.answer");
        let reply = tokio::select! {
            reply = &mut rx => reply.unwrap_or_else(|_| Err(RpcFailure::Died(self.reason()))),
            () = tokio::time::sleep_until(deadline) => {
                self.kill_for(format!("did not answer '{method}' within {}s", timeout.as_secs_f64()));
                Err(RpcFailure::TimedOut)
            }
            () = cancel.cancelled() => {
                if self.serve.is_some() {
                    self.send(&json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": id}}));
                }
                self.abandon(method, rx, deadline, timeout);
                Err(RpcFailure::Cancelled)
            }
        };
        drop(answering);
        *lock(&self.last_used) = Instant::now();
        reply
    }

    /// Queues `message` for the child; false once the child is gone.
    fn send(&self, message: &Value) -> bool {
        self.outgoing.send(encode(message)).is_ok()
    }

    /// For a serving connection: opens what the child's requests on behalf
    /// of request `id` may use, until the answer is dropped, and tells the
    /// child its timeout.
    fn open_scope(
        self: &Arc<Self>,
        id: u64,
        params: &mut Value,
        timeout: Duration,
        cancel: &CancellationToken,
        context: &CallContext,
    ) -> Option<ScopeGuard> {
        let serve = self.serve.as_ref()?;
        if let Value::Object(p) = params {
            let ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
            p.insert("timeout_ms".to_owned(), json!(ms));
        }
        let scope = serve.open(timeout, cancel.clone(), context.clone());
        lock(&self.scopes).insert(id, scope);
        Some(ScopeGuard {
            conn: self.clone(),
            id,
        })
    }

    /// Waits on for an answer nobody wants any more, so that a child which
    /// never gives it is still killed at the call's deadline.
    fn abandon(
        self: &Arc<Self>,
        method: &str,
        rx: oneshot::Receiver<Reply>,
        deadline: Instant,
        timeout: Duration,
    ) {
        let this = self.clone();
        let why = format!("did not answer '{method}' within {}s", timeout.as_secs_f64());
        tokio::spawn(async move {
            if tokio::time::timeout_at(deadline, rx).await.is_err() {
                this.kill_for(why);
            }
        });
    }

    /// Has the supervisor kill the child.
    pub(super) fn kill_for(&self, why: String) {
        lock(&self.kill_why).get_or_insert(why);
        self.kill.cancel();
    }

    fn reason(&self) -> String {
        self.death().map_or_else(|| "stopped".to_owned(), |d| d.reason)
    }

    /// Hands an answer to its waiter; `Err` when the line is not a
    /// JSON-RPC answer to a request in flight.
    fn dispatch(&self, line: &[u8]) -> Result<(), BackendError> {
        let msg: Value = serde_json::from_slice(line).map_err(|_| not_rpc(line))?;
        if msg.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err(not_rpc(line));
        }
        if let Some(method) = msg.get("method") {
            if self.serve.is_some() {
                self.serve_request(method.as_str().unwrap_or_default(), &msg);
                return Ok(());
            }
            // A notification or request of the child's: skilld offers it
            // no methods, and it is not an error to send one.
            let shown = crate::logline::escape(&String::from_utf8_lossy(line), STDERR_LINE_CHARS);
            tracing::debug!(message = %shown, "a process backend sent a request; ignored");
            return Ok(());
        }
        let id = msg
            .get("id")
            .and_then(Value::as_u64)
            .ok_or_else(|| not_rpc(line))?;
        let reply = match (msg.get("result"), msg.get("error")) {
            (_, Some(e)) => Err(remote(e)),
            (Some(result), None) => Ok(result.clone()),
            (None, None) => return Err(not_rpc(line)),
        };
        let waiter = lock(&self.pending).as_mut().and_then(|p| p.remove(&id));
        match waiter {
            Some(tx) => {
                let _ = tx.send(reply);
                Ok(())
            }
            None => Err(BackendError::Protocol(format!(
                "answered request {id}, which was not asked"
            ))),
        }
    }

    /// Answers a request of the child's, made on behalf of the server's
    /// request `params.call`, once its scope has handled it. A request for
    /// a call that is over is refused; a notification gets no answer.
    fn serve_request(&self, method: &str, msg: &Value) {
        let Some(id) = msg.get("id").cloned() else {
            return;
        };
        let params = msg.get("params").cloned().unwrap_or(Value::Null);
        let call = params.get("call").and_then(Value::as_u64);
        let scope = call.and_then(|c| lock(&self.scopes).get(&c).cloned());
        let outgoing = self.outgoing.clone();
        let method = method.to_owned();
        tokio::spawn(async move {
            let answer = match scope {
                Some(scope) => scope.handle(method, params).await,
                None => Err(format!("{method}: the call it serves is over")),
            };
            let message = match answer {
                Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
                Err(message) => {
                    json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32000, "message": message}})
                }
            };
            let _ = outgoing.send(encode(&message));
        });
    }

    /// Marks the connection dead and fails every request in flight.
    fn die(&self, death: Death) {
        let why = death.reason.clone();
        lock(&self.death).get_or_insert(death);
        let pending = lock(&self.pending).take().unwrap_or_default();
        for (_, tx) in pending {
            let _ = tx.send(Err(RpcFailure::Died(why.clone())));
        }
    }

    fn idle_for(&self) -> Duration {
        lock(&self.last_used).elapsed()
    }

    fn nothing_in_flight(&self) -> bool {
        lock(&self.pending).as_ref().is_none_or(HashMap::is_empty)
    }
}

/// `message` as one line.
fn encode(message: &Value) -> Vec<u8> {
    let mut line = serde_json::to_vec(message).unwrap_or_default();
    line.push(b'\n');
    line
}

/// Closes a request's scope when the request is over.
pub(super) struct ScopeGuard {
    conn: Arc<Conn>,
    id: u64,
}

impl Drop for ScopeGuard {
    fn drop(&mut self) {
        lock(&self.conn.scopes).remove(&self.id);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn not_rpc(line: &[u8]) -> BackendError {
    // Part of the reason the death is logged with.
    let shown = crate::logline::escape(&String::from_utf8_lossy(line), 120);
    BackendError::Protocol(format!("wrote a line that is not a JSON-RPC 2.0 answer: {shown}"))
}

/// A JSON-RPC error; the Starlark host's own codes need no mention.
fn remote(e: &Value) -> RpcFailure {
    let code = e.get("code").and_then(Value::as_i64);
    let message = match (code, e.get("message").and_then(Value::as_str)) {
        (Some(SCRIPT_FAILED | SCRIPT_TIMED_OUT | SCRIPT_CANCELLED), Some(m)) => m.to_owned(),
        _ => error_text(e),
    };
    RpcFailure::Remote { code, message }
}

fn error_text(e: &Value) -> String {
    match (e.get("message").and_then(Value::as_str), e.get("code")) {
        (Some(m), Some(code)) => format!("{m} (JSON-RPC error {code})"),
        (Some(m), None) => m.to_owned(),
        _ => format!("JSON-RPC error {e}"),
    }
}

/// Owns the child until it ends, then fails what was in flight, stops the
/// child (gracefully when nothing went wrong) and removes its directory.
async fn supervise(
    conn: Arc<Conn>,
    child: Child,
    stdout: pipe::Receiver,
    opts: ConnOptions,
    writer_done: CancellationToken,
) {
    let mut lines = BufReader::with_capacity(64 * 1024, stdout);
    let death = watch(&conn, &child, &mut lines, &opts).await;
    let failed = death.failed;
    if failed {
        tracing::warn!(skill = %opts.skill, pgid = child.pgid(), reason = %death.reason, "process backend killed");
    } else {
        tracing::debug!(skill = %opts.skill, reason = %death.reason, "process backend stopping");
    }
    conn.die(death);
    if failed {
        child.kill();
    } else {
        let id = conn.next_id.fetch_add(1, Ordering::Relaxed);
        conn.send(&json!({"jsonrpc": "2.0", "id": id, "method": "shutdown"}));
        // Time to finish and exit by itself, as `shutdown` asks; what it
        // still writes is read (and dropped), so it never meets a closed pipe.
        let drain = async { while let Ok(Some(_)) = read_line(&mut lines).await {} };
        let _ = tokio::time::timeout(opts.grace, async {
            tokio::join!(drain, child.exited());
        })
        .await;
    }
    child.stop(if failed { Duration::ZERO } else { opts.grace }).await;
    writer_done.cancel();
    if let Err(err) = std::fs::remove_dir_all(&opts.scratch) {
        tracing::warn!(dir = %opts.scratch.display(), %err, "cannot remove a process backend's directory");
    }
}

/// Reads answers until the connection must end, and says why.
async fn watch(
    conn: &Conn,
    child: &Child,
    lines: &mut BufReader<pipe::Receiver>,
    opts: &ConnOptions,
) -> Death {
    let died = |reason: String, failed: bool| Death {
        reason,
        failed,
        at: Instant::now(),
    };
    let mut tick = tokio::time::interval((opts.idle / 2).max(Duration::from_secs(1)));
    loop {
        tokio::select! {
            line = read_line(lines) => match line {
                Ok(Some(line)) => {
                    if let Err(why) = conn.dispatch(&line) {
                        return died(why.to_string(), true);
                    }
                }
                Ok(None) => {
                    // Usually the exit itself: say how it ended, if it does soon.
                    let how = tokio::time::timeout(Duration::from_secs(1), child.exited()).await;
                    return died(how.unwrap_or_else(|_| "closed its stdout".to_owned()), true);
                }
                Err(why) => return died(why.to_string(), true),
            },
            how = child.exited() => return died(how, true),
            () = conn.kill.cancelled() => {
                let why = lock(&conn.kill_why).clone().unwrap_or_else(|| "was killed".to_owned());
                return died(why, true);
            }
            () = opts.stopped.cancelled() => return died("its skill was unloaded".to_owned(), false),
            _ = tick.tick() => {
                if conn.idle_for() >= opts.idle && conn.nothing_in_flight() {
                    return died(format!("was idle for {}s", opts.idle.as_secs()), false);
                }
            }
        }
    }
}

/// One line of at most [`MAX_LINE`] bytes without its newline; `None` at
/// the end of the stream.
async fn read_line(reader: &mut BufReader<pipe::Receiver>) -> Result<Option<Vec<u8>>, BackendError> {
    let mut line = Vec::new();
    let limit = u64::try_from(MAX_LINE).unwrap_or(u64::MAX) + 1;
    let n = (&mut *reader)
        .take(limit)
        .read_until(b'\n', &mut line)
        .await
        .map_err(|e| BackendError::Crashed(format!("could not be read: {e}")))?;
    if n == 0 {
        return Ok(None);
    }
    if line.last() == Some(&b'\n') {
        line.pop();
    } else if line.len() > MAX_LINE {
        return Err(BackendError::Protocol(format!(
            "wrote a line longer than {MAX_LINE} bytes"
        )));
    }
    Ok(Some(line))
}

/// Writes queued requests to the child's stdin, until the connection is
/// over. A child that stops reading its stdin is killed.
async fn write_requests(
    mut stdin: pipe::Sender,
    mut queued: mpsc::UnboundedReceiver<Vec<u8>>,
    conn: Arc<Conn>,
    done: CancellationToken,
) {
    loop {
        let line = tokio::select! {
            line = queued.recv() => line,
            () = done.cancelled() => None,
        };
        let Some(line) = line else { return };
        let written = tokio::select! {
            written = stdin.write_all(&line) => written.map_err(|e| e.to_string()),
            () = done.cancelled() => return,
        };
        if let Err(e) = written {
            conn.kill_for(format!("stopped reading its stdin ({e})"));
            return;
        }
    }
}

/// Logs a child's stderr (`whose`: "process backend", "upstream MCP
/// server"), one event per line, escaped, so no line of it reads as the
/// server's own or reaches the operator's terminal as control codes:
/// split at `\n` only, since a lone `\r` or a `\u{2028}` would start what
/// reads as a line of skilld's. The first [`STDERR_LOG_BUDGET`] bytes are
/// logged, the rest read and dropped; a line is read in bounded pieces,
/// so a line without end costs no memory.
pub(super) async fn log_stderr(stderr: pipe::Receiver, skill: String, whose: &'static str) {
    let mut lines = BufReader::new(stderr);
    let mut logged = 0usize;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match (&mut lines).take(8 * 1024).read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if logged >= STDERR_LOG_BUDGET {
            continue;
        }
        let line = String::from_utf8_lossy(&buf);
        let line = line.trim_end_matches(['\r', '\n']);
        if line.trim().is_empty() {
            continue;
        }
        let text = crate::logline::escape(line, STDERR_LINE_CHARS);
        logged += text.len();
        tracing::info!(skill = %skill, stderr = %text, "{whose}");
        if logged >= STDERR_LOG_BUDGET {
            tracing::warn!(skill = %skill, "{whose}: further stderr is not logged");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::collection::vec;
    use proptest::prelude::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// Writes `bytes` into a real pipe in pieces of `chunk` bytes and reads
    /// lines until the end (or the first error).
    fn read_all(bytes: Vec<u8>, chunk: usize) -> Vec<Result<Option<Vec<u8>>, BackendError>> {
        runtime().block_on(async move {
            let (mut tx, rx) = pipe::pipe().unwrap();
            let writer = tokio::spawn(async move {
                for piece in bytes.chunks(chunk.max(1)) {
                    if tx.write_all(piece).await.is_err() {
                        return;
                    }
                }
            });
            let mut reader = BufReader::new(rx);
            let mut out = Vec::new();
            loop {
                let line = read_line(&mut reader).await;
                let last = !matches!(line, Ok(Some(_)));
                out.push(line);
                if last {
                    break;
                }
            }
            drop(reader);
            let _ = writer.await;
            out
        })
    }

    fn bare_conn() -> Arc<Conn> {
        let (outgoing, _queued) = mpsc::unbounded_channel();
        Arc::new(Conn::new(outgoing, None))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// However the child's writes are cut, each line comes out whole,
        /// in order, without its newline; then the end.
        #[test]
        fn lines_come_out_as_written(
            lines in vec(vec(any::<u8>().prop_filter("no newline", |b| *b != b'\n'), 0..300), 0..20),
            chunk in 1usize..700,
        ) {
            let mut bytes = Vec::new();
            for line in &lines {
                bytes.extend_from_slice(line);
                bytes.push(b'\n');
            }
            let got = read_all(bytes, chunk);
            let mut want: Vec<Result<Option<Vec<u8>>, BackendError>> = lines.into_iter().map(|l| Ok(Some(l))).collect();
            want.push(Ok(None));
            prop_assert_eq!(got, want);
        }

        /// Bytes that are not an answer to a request in flight are refused,
        /// never a panic, and leave the requests in flight alone.
        #[test]
        fn anything_but_an_answer_is_refused(bytes in vec(any::<u8>(), 0..200)) {
            let conn = bare_conn();
            let (tx, _rx) = oneshot::channel();
            lock(&conn.pending).as_mut().unwrap().insert(7, tx);
            let answered_7 = serde_json::from_slice::<Value>(&bytes)
                .ok()
                .is_some_and(|v| v.get("jsonrpc") == Some(&json!("2.0")) && v.get("id") == Some(&json!(7)));
            if conn.dispatch(&bytes).is_ok() && !answered_7 {
                // Only a message of the child's own (a notification) passes.
                let v: Value = serde_json::from_slice(&bytes).unwrap();
                prop_assert!(v.get("method").is_some());
            }
        }

        /// An answer reaches the request with its id, whatever the result.
        #[test]
        fn an_answer_reaches_its_waiter(id in 1u64..10_000, text in ".{0,40}", n in any::<i64>()) {
            let conn = bare_conn();
            let (tx, mut rx) = oneshot::channel();
            lock(&conn.pending).as_mut().unwrap().insert(id, tx);
            let result = json!({"output": text, "n": n});
            let line = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "result": result})).unwrap();
            prop_assert!(conn.dispatch(&line).is_ok());
            prop_assert_eq!(rx.try_recv().unwrap(), Ok(result));
            // The same id again was not asked any more.
            prop_assert!(conn.dispatch(&line).is_err());
        }
    }

    #[test]
    fn a_line_over_the_limit_is_refused_and_one_at_it_is_not() {
        let mut at = vec![b'a'; MAX_LINE];
        at.push(b'\n');
        assert_eq!(
            read_all(at, 64 * 1024)[0]
                .as_ref()
                .map(|l| l.as_ref().map(Vec::len)),
            Ok(Some(MAX_LINE))
        );
        let over = vec![b'a'; MAX_LINE + 1];
        let got = read_all(over, 64 * 1024);
        assert!(
            matches!(&got[0], Err(BackendError::Protocol(e)) if e.contains("longer than")),
            "{got:?}"
        );
    }

    #[test]
    fn an_error_answer_fails_only_its_request() {
        let conn = bare_conn();
        let (tx, mut rx) = oneshot::channel();
        lock(&conn.pending).as_mut().unwrap().insert(3, tx);
        let line = br#"{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"unknown: x"}}"#;
        assert!(conn.dispatch(line).is_ok());
        assert_eq!(
            rx.try_recv().unwrap(),
            Err(RpcFailure::Remote {
                code: Some(-32601),
                message: "unknown: x (JSON-RPC error -32601)".to_owned()
            })
        );
    }
}
