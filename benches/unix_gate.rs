//! Unix-socket gate benchmark: what the gate of a `network: false` run
//! costs (issue 40, point 6; `docs/design.md` §9, "Unix sockets").
//!
//! Two figures, each with and without the gate in the same run,
//! interleaved so drift hits both alike:
//! - a sandboxed `network: false` run of `/bin/true` through
//!   `runner::run`, to its spawn (exec'd) and to its reaped exit: the gate
//!   adds a socket pair, a filter with a listener, the listener's hand-off
//!   and its supervisor task;
//! - one `connect` to a run's own listener, timed inside a Python tool
//!   over many connects: through the supervisor, against the kernel alone.
//!
//! "Without" is the same confinement as before the gate: its gate taken
//! out, and in the gate's filter's place the one `network: false` had,
//! refusing every socket family but `AF_UNIX` (compiled here as
//! `src/sandbox/seccomp.rs` compiled it). Needs the sandbox's cgroups
//! (root).
//! Run with `cargo bench --bench unix_gate`; `SKILLD_BENCH_CALLS` sets the
//! runs per side (default 400). Nothing here asserts on time; every run
//! must succeed.

#![expect(
    clippy::expect_used,
    reason = "a benchmark that cannot measure should stop and say why"
)]

use skilld::runner::{self, Limits, Spec};
use skilld::sandbox::{Request, Sandbox, Settings};
use skilld::skill::Trust;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
#[path = "support/stats.rs"]
mod stats;

/// Connects per run in the connect figure.
const CONNECTS: usize = 500;

fn request(scratch: &Path) -> Request<'_> {
    Request {
        trust: Trust::User,
        skill_dir: Path::new("/usr"),
        deps: None,
        workspace: Some(Path::new("/usr")),
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

/// A scratch directory the sandbox's user owns, as a run's is, under a
/// scratch root of its own (which the runs' mount namespace shows).
fn scratch_dir(sandbox: &Sandbox, root: &Path, name: &str) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir(&dir).expect("scratch");
    if let Some((uid, gid)) = sandbox.identity() {
        std::os::unix::fs::chown(&dir, Some(uid), Some(gid)).expect("chown");
    }
    dir
}

/// `network: false`'s filter before the gate: no socket of any family
/// but `AF_UNIX` (`EAFNOSUPPORT`).
fn unix_only() -> std::sync::Arc<seccompiler::BpfProgram> {
    use seccompiler::{
        SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
    };
    static PROGRAM: std::sync::OnceLock<std::sync::Arc<seccompiler::BpfProgram>> = std::sync::OnceLock::new();
    PROGRAM
        .get_or_init(|| {
            let other = || {
                let family = libc::AF_UNIX as u64;
                let not_unix = SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, family);
                vec![SeccompRule::new(vec![not_unix.expect("condition")]).expect("rule")]
            };
            let rules = [(libc::SYS_socket, other()), (libc::SYS_socketpair, other())];
            let errno = SeccompAction::Errno(libc::EAFNOSUPPORT as u32);
            let arch = std::env::consts::ARCH.try_into().expect("arch");
            let filter = SeccompFilter::new(rules.into_iter().collect(), SeccompAction::Allow, errno, arch);
            std::sync::Arc::new(filter.expect("filter").try_into().expect("program"))
        })
        .clone()
}

/// The times of one run: until `runner::run` had spawned it (the child
/// exec'd, its listener handed over and supervised), and to its end.
struct Took {
    spawned: Duration,
    whole: Duration,
}

/// Runs `program` confined as a `network: false` run, with the gate or
/// without: its times from before the spawn, and its output.
async fn run(
    sandbox: &Sandbox,
    scratch: &Path,
    gated: bool,
    program: &str,
    args: &[String],
) -> (Took, String) {
    let mut confinement = sandbox
        .confine(&request(scratch))
        .expect("confine")
        .expect("confined");
    assert!(
        confinement.unix_gate.is_some(),
        "no gate here: nothing to measure"
    );
    if !gated {
        confinement.unix_gate = None;
        confinement.seccomp.push(unix_only());
    }
    let spec = Spec {
        program: program.to_owned(),
        args: args.to_vec(),
        cwd: PathBuf::from("/"),
        env: vec![("TMPDIR".to_owned(), scratch.display().to_string())],
        timeout: Duration::from_secs(60),
        grace: Duration::from_secs(1),
        limits: Limits::default(),
        isolate_network: true,
        egress_ns: None,
        confinement: Some(confinement),
    };
    let started = Instant::now();
    let spawned = std::sync::Mutex::new(Duration::ZERO);
    let out = runner::run(spec, CancellationToken::new(), None, |_| {
        *spawned.lock().expect("lock") = started.elapsed();
    })
    .await;
    let whole = started.elapsed();
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    let spawned = *spawned.lock().expect("lock");
    (Took { spawned, whole }, out.output)
}

/// Times `CONNECTS` connects to a listener in the run's own directory, as
/// microseconds per connect.
const CONNECT_LOOP: &str = r"
import os, socket, sys, time
path = os.environ['TMPDIR'] + '/bench.sock'
server = socket.socket(socket.AF_UNIX)
server.bind(path)
server.listen(1024)
n = int(sys.argv[1])
start = time.perf_counter()
for _ in range(n):
    c = socket.socket(socket.AF_UNIX)
    c.connect(path)
    server.accept()[0].close()
    c.close()
print((time.perf_counter() - start) / n * 1e6)
";

fn line(label: &str, v: &mut [Duration]) {
    println!(
        "{label:<34} median {:>9}  p90 {:>9}  p99 {:>9}  (n={})",
        stats::ms(stats::quantile(v, 0.5)),
        stats::ms(stats::quantile(v, 0.9)),
        stats::ms(stats::quantile(v, 0.99)),
        v.len()
    );
}

async fn spawn_figure(sandbox: &Sandbox, scratch: &Path, calls: usize) {
    for i in 0..calls / 10 {
        run(sandbox, scratch, i % 2 == 0, "/bin/true", &[]).await;
    }
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for _ in 0..calls {
        with.push(run(sandbox, scratch, true, "/bin/true", &[]).await.0);
        without.push(run(sandbox, scratch, false, "/bin/true", &[]).await.0);
    }
    let spawned = |v: &[Took]| v.iter().map(|t| t.spawned).collect::<Vec<_>>();
    let whole = |v: &[Took]| v.iter().map(|t| t.whole).collect::<Vec<_>>();
    println!("network: false run of /bin/true, runner::run:");
    compare(
        "spawned (exec'd, listener handed over)",
        spawned(&without),
        spawned(&with),
    );
    compare("to the reaped exit", whole(&without), whole(&with));
}

/// Both sides of one figure, and what the gate adds.
fn compare(what: &str, mut without: Vec<Duration>, mut with: Vec<Duration>) {
    println!(" {what}:");
    line("  without the gate (baseline)", &mut without);
    line("  with the gate", &mut with);
    let mut added = |q| {
        let (a, b) = (stats::quantile(&mut with, q), stats::quantile(&mut without, q));
        (a.as_secs_f64() - b.as_secs_f64()) * 1e3
    };
    let (median, p99) = (added(0.5), added(0.99));
    println!("  the gate adds                    median {median:+.3} ms  p99 {p99:+.3} ms");
}

async fn connect_figure(sandbox: &Sandbox, root: &Path, rounds: usize) {
    let mut per = [Vec::new(), Vec::new()];
    let args = ["-c".to_owned(), CONNECT_LOOP.to_owned(), CONNECTS.to_string()];
    for round in 0..rounds {
        for (i, gated) in [true, false].into_iter().enumerate() {
            let scratch = scratch_dir(sandbox, root, &format!("connect-{round}-{i}"));
            let (_, out) = run(sandbox, &scratch, gated, "/usr/bin/python3", &args).await;
            let micros: f64 = out.trim().parse().expect("microseconds");
            per[i].push(Duration::from_secs_f64(micros / 1e6));
        }
    }
    let [with, without] = &mut per;
    println!("one connect to the run's own listener (Python, {CONNECTS} per run, mean per run):");
    line("  kernel alone (no gate)", without);
    line("  through the supervisor", with);
}

fn main() {
    let calls = std::env::var("SKILLD_BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    // On a worker thread, as the server's runs start: a task spawned
    // there (the supervisor) waits in that worker's queue.
    let bench = rt.spawn(async move {
        let sandbox = Sandbox::detect(Settings::default());
        println!("unix sockets: {}", sandbox.report(true).unix_sockets);
        let root = tempfile::tempdir().expect("scratch root");
        skilld::sandbox::ensure_scratch_root(root.path()).expect("scratch root");
        let scratch = scratch_dir(&sandbox, root.path(), "spawn");
        spawn_figure(&sandbox, &scratch, calls).await;
        connect_figure(&sandbox, root.path(), 20).await;
    });
    rt.block_on(bench).expect("the bench");
}
