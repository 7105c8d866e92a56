//! Runs a tool as a child process and reports what it did (`docs/design.md` §3).
//!
//! The runner owns child processes and nothing else: no HTTP, no storage.
//! Each run gets its own process group, stdin from `/dev/null`, an
//! environment built from an allowlist ([`child_env`]), and bounded output
//! capture. Every signal goes to the whole group, and the group id stays
//! pinned (the leader is not reaped) until the last kill has been sent, so
//! a late kill can never hit a recycled id.

mod capture;
mod child;
mod clone3;
mod env;
mod limits;
mod private_tmp;
mod process;
mod spawn;

pub use crate::program::runnable_by_anyone;
pub use child::Child;
pub use env::{DEFAULT_PATH, child_env, deps_command, is_secret_name, with_deps};
pub use limits::{Limits, network_isolation_available};

use bytes::Bytes;
use capture::{Capture, Stream};
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use process::Exit;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use tokio::io::unix::AsyncFd;
use tokio::net::unix::pipe;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

/// Why a program did not start. Each carries the sentence a run's
/// envelope shows (`command not found: x`); the variant says whose the
/// fault is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpawnError {
    /// The program, its interpreter or its working directory is missing
    /// or not executable.
    #[error("{0}")]
    NotFound(String),
    /// Its sandbox or its set-up failed (a namespace, a limit, a pipe).
    #[error("{0}")]
    Setup(String),
    /// Its command cannot be handed to the kernel (a NUL byte).
    #[error("{0}")]
    Invalid(String),
}

/// Bytes of the start of the merged output kept in [`Outcome::output`].
pub const HEAD_BYTES: usize = 2048;
/// Bytes of the end of the merged output kept in [`Outcome::output`].
pub const TAIL_BYTES: usize = 2048;
/// How long output is still read after the leader has exited. Background
/// grandchildren (`sleep 1000 &`) can hold the pipes open forever; past
/// this bound the group is killed and reading stops, so a call never hangs
/// on them.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(1);

/// One read from a pipe: a pipe's capacity, so a fast writer is drained in
/// few wake-ups.
const READ_CHUNK: usize = 64 * 1024;

/// What to run and how.
#[derive(Debug)]
pub struct Spec {
    /// An absolute path, a path relative to `cwd` (with a slash), or a bare
    /// name looked up on the PATH in `env` — the child's PATH decides.
    pub program: String,
    /// Passed to the program as they are; no shell sees them.
    pub args: Vec<String>,
    /// The working directory of the child.
    pub cwd: PathBuf,
    /// The complete environment of the child (see [`child_env`]); nothing
    /// else is inherited.
    pub env: Vec<(String, String)>,
    /// After this the group gets SIGTERM.
    pub timeout: Duration,
    /// SIGTERM → SIGKILL delay, for timeouts and cancellation alike.
    pub grace: Duration,
    pub limits: Limits,
    /// Run in a fresh network namespace (only `lo`, down) when
    /// [`network_isolation_available`]; advisory otherwise.
    pub isolate_network: bool,
    /// The run's own network namespace (`network: {allow: [...]}`), whose
    /// one way out is the egress proxy; it stands in for
    /// `isolate_network`'s shared empty one.
    pub egress_ns: Option<Arc<OwnedFd>>,
    /// The sandbox the child applies to itself before exec, if any; its
    /// cgroup (when it has one) also ends the run.
    pub confinement: Option<crate::sandbox::Confinement>,
}

/// A clone carries no confinement: its ruleset and cgroup belong to the
/// one run they were made for.
impl Clone for Spec {
    fn clone(&self) -> Self {
        Self {
            program: self.program.clone(),
            args: self.args.clone(),
            cwd: self.cwd.clone(),
            env: self.env.clone(),
            timeout: self.timeout,
            grace: self.grace,
            limits: self.limits,
            isolate_network: self.isolate_network,
            egress_ns: self.egress_ns.clone(),
            confinement: None,
        }
    }
}

/// What a run did. Failures of the tool are results here, not errors.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// The leader's exit code, or 128 + the signal that ended it. `None`
    /// when it never started (see `spawn_error`) or its status was lost.
    pub exit_code: Option<i32>,
    /// The signal that ended the leader: "SIGKILL", "SIGTERM", …
    pub signal: Option<String>,
    /// stdout and stderr merged in arrival order: all of it up to
    /// `HEAD_BYTES + TAIL_BYTES`, else the first [`HEAD_BYTES`], a line
    /// `... [truncated N bytes] ...` and the last [`TAIL_BYTES`], cut on
    /// UTF-8 boundaries, invalid bytes replaced by U+FFFD.
    pub output: String,
    /// Whether `output` left out the middle.
    pub truncated: bool,
    /// Every byte the child wrote to stdout and stderr, kept or not.
    pub output_bytes: u64,
    /// stdout alone parsed as JSON, when all of stdout was kept (at most
    /// `HEAD_BYTES + TAIL_BYTES`, whatever stderr held) and is valid JSON.
    pub stdout_json: Option<serde_json::Value>,
    pub duration: Duration,
    /// The timeout expired and the group was signalled.
    pub timed_out: bool,
    /// The cancellation token fired (before the spawn: nothing was run).
    pub cancelled: bool,
    /// Why the program could not be started: "command not found: foo",
    /// "permission denied: ./x", … (then `exit_code` is `None`).
    pub spawn_error: Option<String>,
    /// The process group (= the leader's pid), once spawned.
    pub pgid: Option<i32>,
    /// Every process of the run is known to have ended: its cgroup, which
    /// none of them could leave, was found empty at the end. Without a
    /// cgroup (or with one still holding a process) this is false, and
    /// nothing the run could reach may be trusted to be left alone.
    pub contained: bool,
}

/// `text` as a run's output is kept: whole up to `HEAD_BYTES +
/// TAIL_BYTES`, else its head and tail around a `[truncated N bytes]`
/// line. Answers the text, whether it was cut, and its length in bytes.
pub fn clip(text: &[u8]) -> (String, bool, u64) {
    let mut capture = Capture::new();
    capture.push(Stream::Stderr, text);
    let c = capture.finish();
    (c.output, c.truncated, c.output_bytes)
}

/// Live output, for streaming to a client.
#[derive(Debug, Clone)]
pub enum Event {
    /// A chunk of the merged stream, as it was read. Chunks are dropped
    /// rather than waited for when the receiver falls behind.
    Output(Bytes),
}

/// Runs `spec` to completion and reports what happened.
///
/// `on_spawn` gets the process group id right after the spawn (to record
/// it, e.g. for a later cancel). On timeout or `cancel`, the group gets
/// SIGTERM, then SIGKILL after `spec.grace` if the leader still runs. After
/// the leader exits, output is drained for at most [`DRAIN_TIMEOUT`], then
/// whatever is left of the group is killed. Chunks of output go to `events`
/// when given, without ever waiting on a slow receiver.
///
/// Dropping the returned future kills the group too. Needs a Tokio runtime
/// with IO and time enabled; the leader's exit is learnt from its pidfd
/// through the reactor, so no thread blocks while it runs.
///
/// A process that leaves the group (`setsid`) cannot be killed through it;
/// it cannot hold the call either, since reading stops after
/// [`DRAIN_TIMEOUT`].
pub async fn run(
    mut spec: Spec,
    cancel: CancellationToken,
    events: Option<mpsc::Sender<Event>>,
    on_spawn: impl FnOnce(i32) + Send,
) -> Outcome {
    let started = Instant::now();
    if cancel.is_cancelled() {
        return Outcome {
            cancelled: true,
            duration: started.elapsed(),
            ..Outcome::default()
        };
    }
    let spawning = tracing::trace_span!("runner.spawn");
    let (mut leader, stdout, stderr) = match start(&mut spec, on_spawn).instrument(spawning).await {
        Ok(running) => running,
        Err(outcome) => {
            return Outcome {
                duration: started.elapsed(),
                ..outcome
            };
        }
    };
    let pgid = leader.pgid;
    let capture = Mutex::new(Capture::new());
    let mut readers = Box::pin(async {
        tokio::join!(
            pump(stdout, Stream::Stdout, &capture, events.as_ref()),
            pump(stderr, Stream::Stderr, &capture, events.as_ref()),
        )
    });
    let mut readers_done = false;
    let mut exited = Box::pin(leader.wait_exit());
    let (exit, ending) = supervise(
        &leader,
        exited.as_mut(),
        readers.as_mut(),
        &mut readers_done,
        &spec,
        &cancel,
    )
    .instrument(tracing::trace_span!("runner.wait"))
    .await;
    let draining = tracing::trace_span!("runner.drain");
    if !readers_done
        && tokio::time::timeout(DRAIN_TIMEOUT, &mut readers)
            .instrument(draining)
            .await
            .is_err()
    {
        tracing::debug!(
            pgid = pgid.as_raw(),
            "output still open after the leader exited; killing the group"
        );
    }
    // The leader is still an unreaped zombie here, so the id is ours (unless
    // its status was lost, warned about in `supervise`: some other wait
    // reaped it).
    drop((readers, exited));
    let _cleanup = tracing::trace_span!("runner.cleanup").entered();
    leader.kill_all();
    leader.reap_exited();
    let captured = capture
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner)
        .finish();
    let contained = leader
        .cgroup
        .as_ref()
        .is_some_and(crate::sandbox::RunCgroup::found_empty);
    Outcome {
        contained,
        ..ending.outcome(exit, captured, started.elapsed(), pgid.as_raw())
    }
}

/// Spawns the leader and gets ready to read it: its guard and its pipes,
/// or the outcome of a run that could not start.
async fn start(
    spec: &mut Spec,
    on_spawn: impl FnOnce(i32) + Send,
) -> Result<(Leader, pipe::Receiver, pipe::Receiver), Outcome> {
    let spawned = spawn::spawn(spec, spawn::Stdin::Null).map_err(|message| {
        tracing::debug!(program = %spec.program, %message, "tool did not start");
        Outcome {
            spawn_error: Some(message.to_string()),
            ..Outcome::default()
        }
    })?;
    let pid = spawned.pid;
    // Guarded before anything else runs, so even a panicking `on_spawn`
    // cannot leave the group behind.
    let mut leader = Leader {
        pidfd: Some(PidFd::Plain(spawned.pidfd)),
        pgid: Pid::from_raw(pid),
        cgroup: spec.confinement.take().and_then(|c| c.cgroup),
    };
    on_spawn(pid);
    tracing::debug!(program = %spec.program, pgid = pid, "tool started");
    let opened = leader
        .watch()
        .and_then(|()| Ok((open_pipe(spawned.stdout)?, open_pipe(spawned.stderr)?)));
    match opened {
        Ok((stdout, stderr)) => Ok((leader, stdout, stderr)),
        Err(err) => {
            leader.kill_and_reap().await;
            Err(Outcome {
                spawn_error: Some(format!("could not watch {}: {err}", spec.program)),
                pgid: Some(pid),
                ..Outcome::default()
            })
        }
    }
}

/// How a run was brought to its end, if not by itself.
#[derive(Debug, Default)]
struct Ending {
    timed_out: bool,
    cancelled: bool,
}

impl Ending {
    fn outcome(
        self,
        exit: Option<Exit>,
        captured: capture::Captured,
        duration: Duration,
        pgid: i32,
    ) -> Outcome {
        let (exit_code, signal) = match exit {
            Some(Exit::Code(code)) => (Some(code), None),
            Some(Exit::Signal(number)) => (Some(128 + number), Some(process::signal_name(number))),
            None => (None, None),
        };
        Outcome {
            exit_code,
            signal,
            output: captured.output,
            truncated: captured.truncated,
            output_bytes: captured.output_bytes,
            stdout_json: captured.stdout_json,
            duration,
            timed_out: self.timed_out,
            cancelled: self.cancelled,
            spawn_error: None,
            pgid: Some(pgid),
            contained: false,
        }
    }
}

/// Waits for the leader to exit, reading its output meanwhile; on timeout
/// or cancel, SIGTERM to the group, then SIGKILL after the grace.
async fn supervise(
    leader: &Leader,
    mut exited: std::pin::Pin<&mut impl Future<Output = std::io::Result<Exit>>>,
    mut readers: std::pin::Pin<&mut impl Future>,
    readers_done: &mut bool,
    spec: &Spec,
    cancel: &CancellationToken,
) -> (Option<Exit>, Ending) {
    let pgid = leader.pgid;
    let deadline = tokio::time::sleep(spec.timeout);
    let kill_timer = tokio::time::sleep(Duration::ZERO);
    tokio::pin!(deadline, kill_timer);
    let mut ending = Ending::default();
    let (mut terminating, mut killed) = (false, false);
    let terminate = |why: &str, kill_timer: std::pin::Pin<&mut tokio::time::Sleep>| {
        tracing::debug!(pgid = pgid.as_raw(), "tool {why}; SIGTERM to its group");
        process::signal_group(pgid, Signal::SIGTERM);
        kill_timer.reset(tokio::time::Instant::now() + spec.grace);
    };
    loop {
        tokio::select! {
            exit = &mut exited => {
                let exit = exit
                    .inspect_err(|err| tracing::warn!(pgid = pgid.as_raw(), %err, "lost the exit status of the tool"))
                    .ok();
                return (exit, ending);
            }
            _ = &mut readers, if !*readers_done => *readers_done = true,
            () = &mut deadline, if !terminating => {
                (ending.timed_out, terminating) = (true, true);
                terminate("timed out", kill_timer.as_mut());
            }
            () = cancel.cancelled(), if !terminating => {
                (ending.cancelled, terminating) = (true, true);
                terminate("cancelled", kill_timer.as_mut());
            }
            () = &mut kill_timer, if terminating && !killed => {
                tracing::debug!(pgid = pgid.as_raw(), "grace period over; SIGKILL to its group");
                killed = true;
                leader.kill_all();
            }
        }
    }
}

/// The group leader, until it is reaped. Dropped unreaped (the `run`
/// future was dropped), it kills the group and reaps on a thread of its own,
/// so neither processes nor a zombie are left behind.
struct Leader {
    /// Pins the pid (and so the group id) until reaped.
    pidfd: Option<PidFd>,
    pgid: Pid,
    /// The run's cgroup: killing it reaches the processes that left the
    /// group; dropping it removes it.
    cgroup: Option<crate::sandbox::RunCgroup>,
}

/// The leader's pidfd, plain or registered with the reactor.
enum PidFd {
    Plain(OwnedFd),
    Watched(AsyncFd<OwnedFd>),
}

impl PidFd {
    fn into_owned(self) -> OwnedFd {
        match self {
            Self::Plain(fd) => fd,
            Self::Watched(fd) => fd.into_inner(),
        }
    }
}

impl Leader {
    /// SIGKILL to the group, and to the cgroup when the run has one.
    fn kill_all(&self) {
        process::signal_group(self.pgid, Signal::SIGKILL);
        if let Some(cgroup) = &self.cgroup {
            cgroup.kill();
        }
    }

    /// Registers the pidfd with the reactor, to learn of the exit without
    /// a blocked thread.
    fn watch(&mut self) -> std::io::Result<()> {
        let Some(PidFd::Plain(fd)) = self.pidfd.take() else {
            return Err(std::io::Error::other(
                "the leader is not in a state to be watched",
            ));
        };
        match spawn::watch_pidfd(fd) {
            Ok(watched) => {
                self.pidfd = Some(PidFd::Watched(watched));
                Ok(())
            }
            Err((fd, err)) => {
                self.pidfd = Some(PidFd::Plain(fd));
                Err(err)
            }
        }
    }

    /// Waits for the exit, leaving the leader unreaped (see `spawn::wait_exit`).
    async fn wait_exit(&self) -> std::io::Result<Exit> {
        match &self.pidfd {
            Some(PidFd::Watched(fd)) => spawn::wait_exit(fd).await,
            _ => Err(std::io::Error::other("the leader is not watched")),
        }
    }

    /// Reaps the leader, which has already exited: waitid returns at once.
    fn reap_exited(&mut self) {
        if let Some(fd) = self.pidfd.take()
            && let Err(err) = spawn::reap(&fd.into_owned())
        {
            tracing::warn!(pgid = self.pgid.as_raw(), %err, "could not reap the tool");
        }
    }

    /// Kills the group and reaps the leader on the blocking pool, which
    /// owns the pidfd, so it completes even if this future is dropped.
    async fn kill_and_reap(mut self) {
        self.kill_all();
        let Some(fd) = self.pidfd.take().map(PidFd::into_owned) else {
            return;
        };
        let pgid = self.pgid.as_raw();
        match tokio::task::spawn_blocking(move || spawn::reap(&fd)).await {
            Ok(Ok(())) => {}
            Ok(Err(err)) => tracing::warn!(pgid, %err, "could not reap the tool"),
            Err(err) => tracing::warn!(pgid, %err, "the reaper failed"),
        }
    }
}

impl Drop for Leader {
    fn drop(&mut self) {
        let Some(fd) = self.pidfd.take().map(PidFd::into_owned) else {
            return;
        };
        self.kill_all();
        let reaper = std::thread::Builder::new()
            .name("skilld-reaper".to_owned())
            .spawn(move || {
                let _ = spawn::reap(&fd);
            });
        if let Err(err) = reaper {
            tracing::warn!(pgid = self.pgid.as_raw(), %err, "could not start a thread to reap the tool");
        }
    }
}

fn open_pipe(fd: OwnedFd) -> std::io::Result<pipe::Receiver> {
    pipe::Receiver::from_owned_fd(fd)
}

/// Reads one pipe to its end, whatever the size: the child must never die
/// of SIGPIPE because it wrote a lot. Only the capture's bounded part is kept.
async fn pump(
    mut pipe: pipe::Receiver,
    stream: Stream,
    capture: &Mutex<Capture>,
    events: Option<&mpsc::Sender<Event>>,
) {
    let mut buf = vec![0u8; READ_CHUNK];
    loop {
        let n = match pipe.read(&mut buf).await {
            Ok(0) => return,
            Ok(n) => n,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(err) => {
                tracing::warn!(?stream, %err, "could not read the tool's output");
                return;
            }
        };
        let chunk = &buf[..n];
        capture
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(stream, chunk);
        if let Some(events) = events {
            // A full channel drops the chunk: a slow consumer must not
            // stall the reader and, through the pipe, the child.
            let _ = events.try_send(Event::Output(Bytes::copy_from_slice(chunk)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn assert_send<T: Send>(_: &T) {}

    #[test]
    fn run_is_send() {
        let spec = Spec {
            program: "true".to_owned(),
            args: Vec::new(),
            cwd: PathBuf::from("/"),
            env: Vec::new(),
            timeout: Duration::from_secs(1),
            grace: Duration::from_secs(1),
            limits: Limits::default(),
            isolate_network: false,
            egress_ns: None,
            confinement: None,
        };
        assert_send(&run(spec, CancellationToken::new(), None, |_| {}));
    }

    fn request(scratch: &Path) -> crate::sandbox::Request<'_> {
        crate::sandbox::Request {
            trust: crate::trust::Trust::User,
            skill_dir: Path::new("/"),
            deps: None,
            workspace: Some(Path::new("/")),
            workspace_write: false,
            scratch,
            network: false,
            egress: false,
            programs: Vec::new(),
            memory_bytes: None,
            cpu: None,
            private_tmp: false,
        }
    }

    /// `program` run sandboxed, or `None` where runs get no cgroup.
    async fn run_confined(
        sandbox: &crate::sandbox::Sandbox,
        program: &str,
        args: &[&str],
    ) -> Option<Outcome> {
        let scratch = std::env::temp_dir();
        let confinement = sandbox.confine(&request(&scratch)).ok()??;
        confinement.cgroup.as_ref()?;
        let spec = Spec {
            program: program.to_owned(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            cwd: PathBuf::from("/"),
            env: Vec::new(),
            timeout: Duration::from_secs(10),
            grace: Duration::from_secs(1),
            limits: Limits::default(),
            isolate_network: false,
            egress_ns: None,
            confinement: Some(confinement),
        };
        Some(run(spec, CancellationToken::new(), None, |_| {}).await)
    }

    /// The lines of `/proc/self/cgroup` as a sandboxed run sees them.
    async fn cgroups_of_a_run(sandbox: &crate::sandbox::Sandbox) -> Option<String> {
        let outcome = run_confined(sandbox, "/bin/cat", &["/proc/self/cgroup"]).await?;
        assert_eq!(outcome.exit_code, Some(0), "{}", outcome.output);
        Some(outcome.output)
    }

    /// Born in its v2 cgroup by `clone3`, or moving itself there after
    /// glibc's `clone`: either way the run is in a run cgroup of every
    /// hierarchy the sandbox uses, before it execs.
    #[tokio::test]
    async fn a_run_is_in_its_cgroups_whichever_way_it_was_cloned() {
        let sandbox = crate::sandbox::Sandbox::detect(crate::sandbox::Settings::default());
        let limits = sandbox.allowance(&request(Path::new("/")));
        for clone3_available in [true, false] {
            clone3::forget(clone3_available);
            let Some(cgroups) = cgroups_of_a_run(&sandbox).await else {
                assert!(std::env::var_os("CI").is_none(), "CI hosts have run cgroups");
                eprintln!("skipped: no run cgroups here");
                return;
            };
            let in_run = |l: &&str| l.contains("/run-");
            assert!(
                cgroups.lines().filter(in_run).any(|l| l.starts_with("0::")),
                "not in a v2 run cgroup (clone3 {clone3_available}): {cgroups}"
            );
            // A controller bound to a v1 hierarchy limits runs there.
            for (limited, controller) in [(limits.pids_max, ":pids:"), (limits.memory_max, ":memory:")] {
                let v1 = cgroups.lines().find(|l| l.contains(controller));
                if let (Some(_), Some(line)) = (limited, v1) {
                    assert!(in_run(&line), "not in a v1 run cgroup: {line}");
                }
            }
        }
        clone3::forget(true);
    }

    /// `network: false` connects through the gate where the host has
    /// user notification (the server found nothing at the path), and
    /// nowhere where it has not (the filter refuses before any lookup);
    /// either way no other family and no datagram socket, and socket
    /// pairs still work.
    #[tokio::test]
    async fn network_false_connects_through_the_gate_or_nowhere() {
        let code = r"
import errno, socket
def attempt(f):
    try:
        f()
        return 'ok'
    except OSError as e:
        return errno.errorcode[e.errno]
print('connect: ' + attempt(lambda: socket.socket(socket.AF_UNIX).connect('/nowhere.sock')))
print('datagram: ' + attempt(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)))
print('inet: ' + attempt(lambda: socket.socket(socket.AF_INET)))
print('pair: ' + attempt(socket.socketpair))
";
        let gated = crate::sandbox::Sandbox::detect(crate::sandbox::Settings::default());
        let refusing =
            crate::sandbox::Sandbox::detect(crate::sandbox::Settings::default()).refusing_connects();
        assert_eq!(refusing.report(true).unix_sockets, "refused");
        let mut outputs = Vec::new();
        for sandbox in [&gated, &refusing] {
            let Some(outcome) = run_confined(sandbox, "/usr/bin/python3", &["-c", code]).await else {
                assert!(std::env::var_os("CI").is_none(), "CI hosts have run cgroups");
                eprintln!("skipped: no run cgroups here");
                return;
            };
            outputs.push((sandbox.report(true).unix_sockets, outcome.output));
        }
        let rest = "datagram: EACCES\ninet: EAFNOSUPPORT\npair: ok\n";
        let gated_connect = match outputs[0].0.as_str() {
            "seccomp_notify" => "ENOENT",
            _ => "EACCES",
        };
        assert_eq!(outputs[0].1, format!("connect: {gated_connect}\n{rest}"));
        assert_eq!(outputs[1].1, format!("connect: EACCES\n{rest}"));
    }

    /// A run that leaves a process behind gets its cgroup killed, and the
    /// kernel would kill every child later born in that cgroup: the next
    /// runs still start and finish.
    #[tokio::test]
    async fn runs_after_a_killed_cgroup_still_run() {
        let sandbox = crate::sandbox::Sandbox::detect(crate::sandbox::Settings::default());
        for _ in 0..3 {
            let left = "sleep 30 >/dev/null 2>&1 & echo left";
            let Some(first) = run_confined(&sandbox, "/bin/sh", &["-c", left]).await else {
                assert!(std::env::var_os("CI").is_none(), "CI hosts have run cgroups");
                eprintln!("skipped: no run cgroups here");
                return;
            };
            assert_eq!((first.exit_code, first.output.as_str()), (Some(0), "left\n"));
            for _ in 0..2 {
                let next = run_confined(&sandbox, "/bin/echo", &["next"]).await;
                let next = next.expect("a cgroup");
                assert_eq!(
                    (next.exit_code, next.signal, next.output.as_str()),
                    (Some(0), None, "next\n")
                );
            }
        }
    }
}
