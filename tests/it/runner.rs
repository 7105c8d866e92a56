//! The runner against real processes: kills reach the whole group and leave
//! nothing running, output stays bounded, secrets stay out, argv is literal,
//! spawn failures are sentences.
//!
//! Measurements of the whole process (RSS, descriptors, children, its
//! environment) run in a fresh copy of this test binary (`probe_*`, run by
//! [`run_probe`]), so the rest of the suite running beside them cannot
//! disturb the figures.

use serde_json::json;
use skilld::runner::{
    self, DEFAULT_PATH, DRAIN_TIMEOUT, Event, HEAD_BYTES, Limits, Outcome, Spec, TAIL_BYTES, child_env,
    is_secret_name, run,
};
use skilld::sandbox::{Request, Sandbox, Settings};
use skilld::skill::Trust;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Hang detector: no run here comes anywhere near it.
const HANG: Duration = Duration::from_secs(60);

fn spec(program: &str, args: &[&str]) -> Spec {
    confined(Spec {
        program: program.to_owned(),
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        cwd: std::env::temp_dir(),
        env: child_env("runner-test", Path::new("/skills/runner-test"), "dev", &[]),
        timeout: Duration::from_secs(30),
        grace: Duration::from_secs(1),
        limits: Limits::default(),
        isolate_network: false,
        egress_ns: None,
        confinement: None,
    })
}

/// `spec` inside the sandbox skilld gives every tool (identity, Landlock,
/// cgroup, seccomp when isolated), with the temporary directory as its
/// workspace and scratch: the runner's tests hold inside it too. A clone
/// of a spec has no confinement (it belongs to one run), so the helpers
/// that run a spec add one.
fn confined(mut spec: Spec) -> Spec {
    static SANDBOX: LazyLock<Sandbox> = LazyLock::new(|| Sandbox::detect(Settings::default()));
    if spec.confinement.is_none() {
        let tmp = std::env::temp_dir();
        let request = Request {
            trust: Trust::User,
            skill_dir: &tmp,
            deps: None,
            workspace: Some(&tmp),
            workspace_write: true,
            scratch: &tmp,
            network: !spec.isolate_network,
            egress: false,
            programs: Vec::new(),
            memory_bytes: spec.limits.memory_bytes,
            cpu: None,
            private_tmp: false,
        };
        spec.confinement = SANDBOX.confine(&request).unwrap();
    }
    spec
}
fn sh(script: &str) -> Spec {
    spec("sh", &["-c", script])
}

async fn go(spec: Spec) -> Outcome {
    tokio::time::timeout(HANG, run(confined(spec), CancellationToken::new(), None, |_| {}))
        .await
        .expect("run hung")
}

// ---------------------------------------------------------------- /proc

#[derive(Debug, Clone, Copy)]
struct Stat {
    pid: i32,
    state: char,
    ppid: i32,
    pgrp: i32,
}

fn stat(pid: i32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces and parentheses; it ends at the last ')'.
    let mut fields = text.get(text.rfind(')')? + 2..)?.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some(Stat {
        pid,
        state,
        ppid,
        pgrp,
    })
}

fn processes() -> Vec<Stat> {
    std::fs::read_dir("/proc")
        .expect("read /proc")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter_map(stat)
        .collect()
}

/// Killed processes whose parent (the leader) has gone are re-parented to
/// init, and some inits (this VM's among them) never reap them: a zombie is
/// dead, holds no pipe and runs nothing, so it counts as gone.
fn running(s: &Stat) -> bool {
    !matches!(s.state, 'Z' | 'X' | 'x')
}

fn running_in_group(pgid: i32) -> Vec<Stat> {
    processes()
        .into_iter()
        .filter(|s| s.pgrp == pgid && running(s))
        .collect()
}

/// SIGKILL is delivered at once, but the exits take a moment: poll for them
/// (bounded, as a hang detector), then return whatever still runs.
async fn group_after_kill(pgid: i32) -> Vec<Stat> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = running_in_group(pgid);
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs `spec` and, while it runs, waits until its group has at least
/// `members` running processes — proof the test built the situation it
/// claims — and returns them.
async fn run_observing(spec: Spec, cancel: CancellationToken, members: usize) -> (Outcome, Vec<Stat>) {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let runner = run(confined(spec), cancel, None, move |pgid| {
        let _ = tx.send(pgid);
    });
    let observer = async move {
        let Ok(pgid) = rx.await else { return Vec::new() };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let seen = running_in_group(pgid);
            if seen.len() >= members || Instant::now() > deadline {
                return seen;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(HANG, async { tokio::join!(runner, observer) })
        .await
        .expect("run hung")
}

// ---------------------------------------------------------------- probes

const PROBE_MARKER: &str = "SKILLD_RUNNER_PROBE";

/// Runs the `#[ignore]`d test `runner::{name}` in a fresh process of this
/// binary, with `env` added and `remove` taken out of its environment, and
/// returns its stdout once it has passed.
fn run_probe(name: &str, env: &[(&str, &str)], remove: &[&str]) -> String {
    let exe = std::env::current_exe().expect("path of the test binary");
    let mut command = std::process::Command::new(exe);
    command
        .args([
            &format!("runner::{name}"),
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(PROBE_MARKER, name)
        .stdin(std::process::Stdio::null());
    for (k, v) in env {
        command.env(k, v);
    }
    for k in remove {
        command.env_remove(k);
    }
    let out = command.output().expect("start the probe");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains(&format!("PROBE-OK {name}")),
        "probe {name} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    stdout
}

/// Probes do process-wide measurements; run directly among other tests
/// (`cargo test -- --ignored`) they would measure the others, so they only
/// run when [`run_probe`] started them.
fn started_by_run_probe(name: &str) -> bool {
    let ours = std::env::var(PROBE_MARKER).is_ok_and(|v| v == name);
    if !ours {
        eprintln!("{name} is a probe: it runs in its own process through run_probe");
    }
    ours
}

fn vm_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status")
}

fn count_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("read /proc/self/fd")
        .count()
}

/// The line of a probe's stdout from `marker` on (libtest may have put
/// `test … ... ` in front of it).
fn figure(stdout: &str, marker: &str) -> String {
    stdout
        .lines()
        .find_map(|l| l.find(marker).map(|i| l[i..].to_owned()))
        .unwrap_or_default()
}

// ---------------------------------------------------------------- 1–3: kills and drains

#[tokio::test]
async fn a_child_that_ignores_sigterm_is_killed_with_sigkill() {
    let mut s = sh(r#"trap "" TERM; sleep 1000"#);
    s.timeout = Duration::from_secs(1);
    s.grace = Duration::from_secs(1);
    let (out, seen) = run_observing(s, CancellationToken::new(), 1).await;

    assert!(out.timed_out && !out.cancelled, "{out:?}");
    assert_eq!(out.signal.as_deref(), Some("SIGKILL"), "{out:?}");
    assert_eq!(out.exit_code, Some(137));
    let pgid = out.pgid.expect("pgid");
    assert!(!seen.is_empty(), "the group never ran");
    // The leader is reaped, not left a zombie of ours.
    assert!(
        stat(pgid).is_none_or(|s| s.ppid != std::process::id() as i32),
        "{:?}",
        stat(pgid)
    );
    assert_eq!(group_after_kill(pgid).await.len(), 0, "group {pgid} still runs");
    for s in &seen {
        assert!(stat(s.pid).is_none_or(|now| !running(&now)), "{s:?} survived");
    }
}

#[tokio::test]
async fn a_timeout_leaves_no_process_of_the_group() {
    let mut s = sh("sleep 1000 & sleep 1000");
    s.timeout = Duration::from_secs(1);
    let (out, seen) = run_observing(s, CancellationToken::new(), 2).await;

    assert!(out.timed_out, "{out:?}");
    assert!(out.exit_code.is_some_and(|c| c > 128), "{out:?}");
    assert!(
        seen.len() >= 2,
        "expected sh and its background sleep, saw {seen:?}"
    );
    let pgid = out.pgid.expect("pgid");
    assert_eq!(group_after_kill(pgid).await.len(), 0, "group {pgid} still runs");
}

#[tokio::test]
async fn a_grandchild_holding_the_pipe_does_not_hold_the_call() {
    let dir = crate::common::writable_tempdir();
    let mut s = sh("sleep 1000 & echo $! > grandchild.pid; echo started");
    s.cwd = dir.path().to_owned();
    let started = Instant::now();
    let out = go(s).await;
    let took = started.elapsed();
    println!("grandchild test: returned after {took:?} (DRAIN_TIMEOUT {DRAIN_TIMEOUT:?})");

    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert_eq!(out.signal, None);
    assert_eq!(out.output, "started\n");
    assert!(!out.timed_out);
    assert!(took < DRAIN_TIMEOUT + Duration::from_secs(5), "took {took:?}");

    let grandchild: i32 = std::fs::read_to_string(dir.path().join("grandchild.pid"))
        .expect("pid file")
        .trim()
        .parse()
        .expect("pid");
    let pgid = out.pgid.expect("pgid");
    assert_eq!(group_after_kill(pgid).await.len(), 0, "group {pgid} still runs");
    if let Some(s) = stat(grandchild) {
        assert_eq!(s.pgrp, pgid, "the grandchild was in the group");
        assert!(!running(&s), "grandchild {s:?} survived");
    }
}

// ---------------------------------------------------------------- 4: 1 GiB of output

#[test]
fn one_gib_of_output_keeps_memory_bounded() {
    let stdout = run_probe("probe_one_gib", &[], &[]);
    println!("{}", figure(&stdout, "RSS"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "probe: run in its own process by one_gib_of_output_keeps_memory_bounded"]
async fn probe_one_gib() {
    if !started_by_run_probe("probe_one_gib") {
        return;
    }
    go(spec("true", &[])).await; // warm up the runtime's lazily built parts
    let before = vm_rss_kib();
    let peak = Arc::new(AtomicU64::new(before));
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = tokio::spawn({
        let (peak, stop) = (peak.clone(), stop.clone());
        async move {
            while !stop.load(Ordering::Relaxed) {
                peak.fetch_max(vm_rss_kib(), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    });

    let mut s = sh(r#"head -c 1073741824 /dev/zero | tr "\0" a; echo; echo LAST LINE"#);
    s.timeout = Duration::from_secs(600);
    let started = Instant::now();
    let out = tokio::time::timeout(
        Duration::from_secs(600),
        run(s, CancellationToken::new(), None, |_| {}),
    )
    .await
    .expect("run hung");
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    sampler.await.expect("sampler");
    let after = vm_rss_kib();
    let peak = peak.load(Ordering::Relaxed).max(after);
    println!(
        "RSS before={before} KiB peak={peak} KiB after={after} KiB growth={} KiB; 1 GiB in {took:?}",
        peak - before
    );

    let total: u64 = (1 << 30) + 1 + "LAST LINE\n".len() as u64;
    let tail = format!("{}\nLAST LINE\n", "a".repeat(TAIL_BYTES - 11));
    let expected = format!(
        "{}\n... [truncated {} bytes] ...\n{tail}",
        "a".repeat(HEAD_BYTES),
        total - (HEAD_BYTES + TAIL_BYTES) as u64
    );
    assert_eq!(out.exit_code, Some(0), "{:?}", out.spawn_error);
    assert!(out.truncated);
    assert_eq!(out.output_bytes, total);
    assert!(out.output == expected, "output is not head + marker + tail");
    assert!(out.output.ends_with("LAST LINE\n"));
    assert_eq!(out.stdout_json, None);
    assert!(peak - before < 32 * 1024, "RSS grew by {} KiB", peak - before);
    println!("PROBE-OK probe_one_gib");
}

// ---------------------------------------------------------------- 5: environment

const SECRETS: [(&str, &str); 7] = [
    ("MY_API_KEY", "s3cr3t-api-key"),
    ("GITHUB_TOKEN", "s3cr3t-github"),
    ("DB_PASSWORD", "s3cr3t-db"),
    ("AWS_REGION", "s3cr3t-aws"),
    ("OPENAI_ORG", "s3cr3t-openai"),
    ("ANTHROPIC_API_KEY", "s3cr3t-anthropic"),
    ("my_client_secret", "s3cr3t-lowercase"),
];

#[test]
fn secrets_never_reach_the_child() {
    let mut env: Vec<(&str, &str)> = SECRETS.to_vec();
    env.extend([
        ("LANG", "C.UTF-8"),
        ("LC_ALL", "C.UTF-8"),
        ("HARMLESS_EXTRA", "fine"),
        ("NOT_ALLOWED", "s3cr3t-unlisted"),
    ]);
    run_probe("probe_env", &env, &[]);
    let stdout = run_probe("probe_env_without_path", &[], &["PATH"]);
    println!("{}", figure(&stdout, "PATH="));
}

#[tokio::test]
#[ignore = "probe: run in its own process by secrets_never_reach_the_child"]
async fn probe_env() {
    if !started_by_run_probe("probe_env") {
        return;
    }
    // Configuring secrets in must not let them through either.
    let mut extra: Vec<String> = SECRETS.iter().map(|(n, _)| (*n).to_owned()).collect();
    extra.push("HARMLESS_EXTRA".to_owned());
    let env = child_env("env-skill", Path::new("/skills/env-skill"), "dev", &extra);
    let mut s = spec("env", &[]);
    s.env = env.clone();
    let out = go(s).await;
    assert_eq!(out.exit_code, Some(0), "{out:?}");

    let seen: BTreeMap<&str, &str> = out.output.lines().filter_map(|l| l.split_once('=')).collect();
    for (name, value) in SECRETS.iter().chain(&[("NOT_ALLOWED", "s3cr3t-unlisted")]) {
        assert!(!seen.contains_key(name), "{name} reached the child");
        assert!(
            !out.output.contains(value),
            "the value of {name} reached the child"
        );
        assert!(env.iter().all(|(n, _)| n != name), "child_env kept {name}");
    }
    assert!(!out.output.contains("s3cr3t"));
    let path = std::env::var("PATH").expect("PATH");
    assert_eq!(seen.get("PATH"), Some(&path.as_str()));
    assert_eq!(seen.get("LANG"), Some(&"C.UTF-8"));
    assert_eq!(seen.get("LC_ALL"), Some(&"C.UTF-8"));
    assert_eq!(seen.get("HARMLESS_EXTRA"), Some(&"fine"));
    for (name, value) in [
        ("SKILL_NAME", "env-skill"),
        ("GIBBERISH_SKILL_NAME", "env-skill"),
        ("SKILL_DIR", "/skills/env-skill"),
        ("GIBBERISH_SKILL_DIR", "/skills/env-skill"),
        ("SKILL_MODE", "dev"),
        ("GIBBERISH_MODE", "dev"),
    ] {
        assert_eq!(seen.get(name), Some(&value), "{name}");
    }
    // Nothing else: not the test harness's CARGO_*, not RUST_*, nothing.
    let allowed = |n: &str| {
        ["PATH", "HOME", "USER", "LANG", "TERM", "HARMLESS_EXTRA"].contains(&n)
            || n.starts_with("LC_")
            || n.starts_with("SKILL_")
            || n.starts_with("GIBBERISH_")
    };
    let unexpected: Vec<&&str> = seen.keys().filter(|n| !allowed(n)).collect();
    assert!(unexpected.is_empty(), "unexpected variables: {unexpected:?}");
    println!("PROBE-OK probe_env");
}

#[tokio::test]
#[ignore = "probe: run in its own process by secrets_never_reach_the_child"]
async fn probe_env_without_path() {
    if !started_by_run_probe("probe_env_without_path") {
        return;
    }
    let out = go(spec("env", &[])).await;
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    let line = format!("PATH={DEFAULT_PATH}");
    assert!(out.output.lines().any(|l| l == line), "{}", out.output);
    println!("{line}");
    println!("PROBE-OK probe_env_without_path");
}

#[test]
fn secret_names_are_recognised_case_insensitively() {
    for name in [
        "GITHUB_TOKEN",
        "my_api_key",
        "Client_Secret",
        "db_password",
        "aws_region",
        "OpenAI_Org",
    ] {
        assert!(is_secret_name(name), "{name}");
    }
    for name in ["PATH", "LANG", "LC_ALL", "KEYMAP", "TOKENIZERS_PARALLELISM"] {
        assert!(!is_secret_name(name), "{name}");
    }
}

// ---------------------------------------------------------------- 6: argv

#[tokio::test]
async fn arguments_reach_the_program_literally() {
    let hostile = [
        "; rm -rf /",
        "$(id)",
        "*",
        "a b",
        "`touch pwned`",
        "'\"",
        "--help",
    ];
    let mut args = vec!["%s\\n"];
    args.extend(hostile);
    let dir = crate::common::tempdir().expect("tempdir");
    let mut s = spec("printf", &args);
    s.cwd = dir.path().to_owned();
    let out = go(s).await;
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert_eq!(out.output.lines().collect::<Vec<_>>(), hostile);
    assert!(!dir.path().join("pwned").exists());
}

// ---------------------------------------------------------------- 7: many at once

#[test]
fn many_concurrent_runs_leave_no_zombies_or_descriptors() {
    let stdout = run_probe("probe_many", &[], &[]);
    println!("{}", figure(&stdout, "FDS"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "probe: run in its own process by many_concurrent_runs_leave_no_zombies_or_descriptors"]
async fn probe_many() {
    if !started_by_run_probe("probe_many") {
        return;
    }
    go(spec("true", &[])).await; // warm up
    tokio::time::sleep(Duration::from_millis(100)).await;
    let before = count_fds();

    let mut set = tokio::task::JoinSet::new();
    for i in 0..200 {
        let n = i.to_string();
        let s = if i % 2 == 0 {
            spec("true", &[])
        } else {
            spec("echo", &[&n])
        };
        set.spawn(async move { (i, run(s, CancellationToken::new(), None, |_| {}).await) });
    }
    let all = tokio::time::timeout(HANG, set.join_all())
        .await
        .expect("runs hung");
    assert_eq!(all.len(), 200);
    for (i, out) in &all {
        assert_eq!(out.exit_code, Some(0), "run {i}: {out:?}");
        let expected = if i % 2 == 0 {
            String::new()
        } else {
            format!("{i}\n")
        };
        assert_eq!(out.output, expected, "run {i}");
    }

    tokio::time::sleep(Duration::from_millis(200)).await;
    let after = count_fds();
    let me = std::process::id() as i32;
    let children: Vec<Stat> = processes().into_iter().filter(|s| s.ppid == me).collect();
    println!(
        "FDS before={before} after={after}; children left={}",
        children.len()
    );
    assert!(
        children.is_empty(),
        "children left (zombies or not): {children:?}"
    );
    assert!(
        after <= before,
        "descriptors leaked: {before} before, {after} after"
    );
    println!("PROBE-OK probe_many");
}

// ---------------------------------------------------------------- 8: cancel

#[tokio::test]
async fn cancelling_kills_the_group_promptly() {
    let cancel = CancellationToken::new();
    let started = Instant::now();
    let trigger = {
        let cancel = cancel.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            cancel.cancel();
        }
    };
    let mut s = spec("sleep", &["1000"]);
    s.grace = Duration::from_secs(5);
    let ((out, seen), ()) = tokio::join!(run_observing(s, cancel, 1), trigger);
    let took = started.elapsed();

    assert!(out.cancelled && !out.timed_out, "{out:?}");
    assert_eq!(out.signal.as_deref(), Some("SIGTERM"));
    assert_eq!(out.exit_code, Some(143));
    assert!(
        took < Duration::from_secs(5),
        "took {took:?}: SIGTERM alone should end sleep"
    );
    assert_eq!(seen.len(), 1);
    assert_eq!(group_after_kill(out.pgid.expect("pgid")).await.len(), 0);
}

#[tokio::test]
async fn cancelling_a_child_that_ignores_sigterm_ends_in_sigkill() {
    let cancel = CancellationToken::new();
    cancel_after(&cancel, Duration::from_millis(300));
    let mut s = sh(r#"trap "" TERM; sleep 1000 & wait"#);
    s.grace = Duration::from_millis(500);
    let (out, seen) = run_observing(s, cancel, 2).await;

    assert!(out.cancelled, "{out:?}");
    assert_eq!(out.signal.as_deref(), Some("SIGKILL"));
    assert!(seen.len() >= 2, "{seen:?}");
    assert_eq!(group_after_kill(out.pgid.expect("pgid")).await.len(), 0);
}

#[tokio::test]
async fn a_token_cancelled_before_the_start_runs_nothing() {
    let cancel = CancellationToken::new();
    cancel.cancel();
    let spawned = Arc::new(AtomicBool::new(false));
    let flag = spawned.clone();
    let out = run(spec("true", &[]), cancel, None, move |_| {
        flag.store(true, Ordering::SeqCst)
    })
    .await;
    assert!(out.cancelled);
    assert_eq!((out.exit_code, out.pgid), (None, None));
    assert!(!spawned.load(Ordering::SeqCst));
}

#[tokio::test]
async fn dropping_the_run_kills_the_group_and_reaps_the_leader() {
    let (tx, rx) = std::sync::mpsc::channel();
    let fut = run(
        sh("sleep 1000 & sleep 1000"),
        CancellationToken::new(),
        None,
        move |pgid| {
            let _ = tx.send(pgid);
        },
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(500), fut)
            .await
            .is_err()
    );
    let pgid = rx.recv().expect("spawned");
    assert_eq!(group_after_kill(pgid).await.len(), 0);
    // The reaper thread collects the leader: no zombie of ours is left.
    let deadline = Instant::now() + Duration::from_secs(10);
    while stat(pgid).is_some_and(|s| s.ppid == std::process::id() as i32) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        stat(pgid).is_none_or(|s| s.ppid != std::process::id() as i32),
        "{:?}",
        stat(pgid)
    );
}

fn cancel_after(cancel: &CancellationToken, after: Duration) {
    let cancel = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        cancel.cancel();
    });
}

// ---------------------------------------------------------------- 9: spawn failures

#[tokio::test]
async fn a_missing_program_is_a_sentence_not_a_panic() {
    let out = go(spec("skilld-no-such-program", &[])).await;
    assert_eq!(
        out.spawn_error.as_deref(),
        Some("command not found: skilld-no-such-program")
    );
    assert_eq!((out.exit_code, out.pgid), (None, None));

    let out = go(spec("/nonexistent/bin/tool", &[])).await;
    assert_eq!(
        out.spawn_error.as_deref(),
        Some("command not found: /nonexistent/bin/tool")
    );

    // The child's PATH decides, not the server's.
    let mut s = spec("sh", &["-c", "true"]);
    s.env = vec![("PATH".to_owned(), "/nonexistent".to_owned())];
    assert_eq!(go(s).await.spawn_error.as_deref(), Some("command not found: sh"));

    let mut s = spec("true", &[]);
    s.cwd = "/nonexistent/workspace".into();
    assert_eq!(
        go(s).await.spawn_error.as_deref(),
        Some("working directory not found: /nonexistent/workspace")
    );
}

#[tokio::test]
async fn a_file_that_is_not_executable_is_a_permission_error() {
    let dir = crate::common::tempdir().expect("tempdir");
    let file = dir.path().join("x");
    std::fs::write(&file, "#!/bin/sh\necho ran\n").expect("write");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).expect("chmod");

    let mut s = spec("./x", &[]);
    s.cwd = dir.path().to_owned();
    let out = go(s).await;
    assert_eq!(out.spawn_error.as_deref(), Some("permission denied: ./x"));
    assert_eq!(out.exit_code, None);

    let path = file.display().to_string();
    let out = go(spec(&path, &[])).await;
    assert_eq!(out.spawn_error, Some(format!("permission denied: {path}")));

    let mut s = spec("x", &[]);
    s.env = vec![("PATH".to_owned(), dir.path().display().to_string())];
    assert_eq!(go(s).await.spawn_error.as_deref(), Some("permission denied: x"));
}

/// Runs a script written just now. Another thread's fork can briefly hold
/// the file open for writing (ETXTBSY); that is the test's race, not the
/// runner's, so retry it.
async fn go_fresh_script(spec: Spec) -> Outcome {
    for _ in 0..20 {
        let out = go(spec.clone()).await;
        if !out
            .spawn_error
            .as_deref()
            .is_some_and(|e| e.starts_with("text file busy"))
        {
            return out;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("script stayed busy");
}

#[tokio::test]
async fn a_bare_name_is_found_on_the_childs_path() {
    let dir = crate::common::tempdir().expect("tempdir");
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).expect("mkdir");
    let script = bin.join("skilld-hello");
    std::fs::write(&script, "#!/bin/sh\necho \"hello from $0\"\n").expect("write");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");

    let mut s = spec("skilld-hello", &[]);
    s.env = vec![("PATH".to_owned(), format!("{}:/usr/bin:/bin", bin.display()))];
    let out = go_fresh_script(s).await;
    assert_eq!(out.spawn_error, None);
    assert_eq!(out.output, format!("hello from {}\n", script.display()));
}

#[tokio::test]
async fn a_script_without_a_shebang_is_an_exec_format_error() {
    let dir = crate::common::tempdir().expect("tempdir");
    let script = dir.path().join("plain");
    std::fs::write(&script, "echo ran\n").expect("write");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let mut s = spec("./plain", &[]);
    s.cwd = dir.path().to_owned();
    let out = go_fresh_script(s).await;
    let error = out.spawn_error.expect("a spawn error");
    assert!(error.starts_with("exec format error: ./plain"), "{error}");
}

// ---------------------------------------------------------------- 10: stdout_json

#[tokio::test]
async fn stdout_json_is_parsed_from_stdout_alone_when_whole() {
    let out = go(spec("printf", &[r#"{"a": 1}"#])).await;
    assert_eq!(out.stdout_json, Some(json!({"a": 1})));
    assert_eq!(out.output, r#"{"a": 1}"#);

    // Logs on stderr do not stop stdout from being parsed.
    let out = go(sh(r#"echo warming up >&2; printf '{"ok": true}\n'"#)).await;
    assert_eq!(out.stdout_json, Some(json!({"ok": true})));

    let out = go(sh(r#"printf '{"a": 1}' >&2"#)).await;
    assert_eq!(out.output, r#"{"a": 1}"#);
    assert_eq!(out.stdout_json, None, "JSON on stderr is not structured output");

    let long = r#"printf '"'; head -c 5000 /dev/zero | tr "\0" a; printf '"'"#;
    let out = go(sh(long)).await;
    assert!(out.truncated);
    assert_eq!(out.stdout_json, None, "truncated JSON is not structured output");

    let short = r#"printf '"'; head -c 3000 /dev/zero | tr "\0" a; printf '"'"#;
    let out = go(sh(short)).await;
    assert!(!out.truncated);
    assert_eq!(out.stdout_json, Some(json!("a".repeat(3000))));

    assert_eq!(go(spec("echo", &["not json"])).await.stdout_json, None);
}

// ---------------------------------------------------------------- 11: resource limits

#[tokio::test]
async fn the_file_size_limit_stops_a_big_write() {
    let dir = crate::common::writable_tempdir();
    let mut s = sh("head -c 4096 /dev/zero > f");
    s.cwd = dir.path().to_owned();
    s.limits.file_size_bytes = Some(1024);
    let out = go(s.clone()).await;
    println!(
        "file size limit: exit {:?}, signal {:?}",
        out.exit_code, out.signal
    );
    assert_ne!(out.exit_code, Some(0), "{out:?}");
    let size = std::fs::metadata(dir.path().join("f"))
        .map(|m| m.len())
        .unwrap_or(0);
    assert!(size <= 1024, "wrote {size} bytes");

    s.limits = Limits::default();
    assert_eq!(go(s).await.exit_code, Some(0));
    assert_eq!(std::fs::metadata(dir.path().join("f")).expect("f").len(), 4096);
}

#[tokio::test]
async fn the_memory_limit_stops_a_big_allocation() {
    let mut s = spec(
        "python3",
        &["-c", "b = bytearray(512 * 1024 * 1024); print('allocated')"],
    );
    s.timeout = Duration::from_secs(60);
    let unlimited = go(s.clone()).await;
    if unlimited.exit_code != Some(0) {
        println!(
            "python3 is not usable here ({unlimited:?}); the memory limit is checked with ulimit -v only"
        );
    } else {
        s.limits.memory_bytes = Some(256 * 1024 * 1024);
        let out = go(s).await;
        assert_ne!(out.exit_code, Some(0), "{out:?}");
        assert!(out.output.contains("MemoryError"), "{}", out.output);
        assert!(!out.output.contains("allocated"));
        println!(
            "memory limit: exit {:?}, {}",
            out.exit_code,
            out.output.lines().last().unwrap_or_default()
        );
    }

    let mut s = sh("ulimit -v");
    s.limits.memory_bytes = Some(256 * 1024 * 1024);
    assert_eq!(go(s).await.output, format!("{}\n", 256 * 1024));
}

#[tokio::test]
async fn cpu_and_open_file_limits_apply() {
    let mut s = sh("while :; do :; done");
    s.limits.cpu_secs = Some(1);
    let out = go(s).await;
    assert!(!out.timed_out, "{out:?}");
    assert!(
        matches!(out.signal.as_deref(), Some("SIGXCPU" | "SIGKILL")),
        "{out:?}"
    );

    let mut s = sh("ulimit -n; ulimit -t");
    s.limits.open_files = Some(64);
    s.limits.cpu_secs = Some(7);
    assert_eq!(go(s).await.output, "64\n7\n");
}

// ---------------------------------------------------------------- 12: network

#[tokio::test]
async fn network_isolation_leaves_only_a_loopback() {
    let mut s = sh("cat /proc/net/dev; echo ---; cat /proc/net/route");
    s.isolate_network = true;
    let out = go(s).await;
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    let (dev, route) = out.output.split_once("---\n").expect("both files");
    let interfaces: Vec<&str> = dev
        .lines()
        .skip(2)
        .filter_map(|l| l.split_once(':'))
        .map(|(name, _)| name.trim())
        .collect();

    if runner::network_isolation_available() {
        assert_eq!(interfaces, ["lo"]);
        // No route at all: `lo` is down, and there is nothing else.
        let routes = route.lines().filter(|l| !l.starts_with("Iface")).count();
        assert_eq!(routes, 0, "routes in the namespace: {route}");
        let host = go(sh("cat /proc/net/dev")).await.output;
        println!(
            "isolated: {interfaces:?}; host: {} interfaces",
            host.lines().count().saturating_sub(2)
        );
    } else {
        println!("network isolation is unavailable here; the child ran with the host network");
        assert!(interfaces.contains(&"lo"), "{interfaces:?}");
    }
}

// ---------------------------------------------------------------- more behaviour

#[tokio::test]
async fn exit_codes_and_signals() {
    let out = go(sh("exit 3")).await;
    assert_eq!((out.exit_code, out.signal), (Some(3), None));
    let out = go(sh("kill -USR1 $$")).await;
    assert_eq!(
        (out.exit_code, out.signal.as_deref()),
        (Some(138), Some("SIGUSR1"))
    );
}

/// The child is cloned from a server that ignores SIGPIPE, has signal
/// handlers installed and (for the clone) blocks every signal: none of it
/// may reach the tool, or `yes | head` would loop and a SIGTERM could be lost.
#[tokio::test]
async fn the_child_starts_with_default_signals_and_only_stdio_open() {
    // Install a handler in this process, as the server's runtime does.
    let _sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).unwrap();
    let out = go(spec("cat", &["/proc/self/status"])).await;
    assert_eq!(out.exit_code, Some(0), "{}", out.output);
    let mask = |field: &str| {
        let line = out.output.lines().find(|l| l.starts_with(field)).unwrap();
        u64::from_str_radix(line.rsplit('\t').next().unwrap(), 16).unwrap()
    };
    // Nothing blocked, no handler of ours; SIGPIPE (13) back to its
    // default. Other ignored signals stay ignored across exec, as POSIX
    // and std's Command keep them.
    assert_eq!((mask("SigBlk:"), mask("SigCgt:")), (0, 0), "{}", out.output);
    assert_eq!(mask("SigIgn:") & (1 << (libc::SIGPIPE - 1)), 0, "{}", out.output);
    // Descriptors: 0, 1, 2 and the one `ls` opens for the directory.
    let out = go(spec("ls", &["/proc/self/fd"])).await;
    let fds: Vec<&str> = out.output.split_whitespace().collect();
    assert_eq!(fds, ["0", "1", "2", "3"], "{}", out.output);
}

#[tokio::test]
async fn stdin_is_empty() {
    let out = go(spec("cat", &[])).await;
    assert_eq!((out.exit_code, out.output.as_str()), (Some(0), ""));
}

#[tokio::test]
async fn stdout_and_stderr_merge_in_arrival_order() {
    let out = go(sh("echo out1; sleep 0.2; echo err1 >&2; sleep 0.2; echo out2")).await;
    assert_eq!(out.output, "out1\nerr1\nout2\n");
    assert_eq!(out.output_bytes, 15);
}

#[tokio::test]
async fn events_carry_the_output_live() {
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    let out = run(
        sh("echo one; sleep 0.1; echo two >&2"),
        CancellationToken::new(),
        Some(tx),
        |_| {},
    )
    .await;
    let mut streamed = Vec::new();
    while let Some(Event::Output(chunk)) = rx.recv().await {
        streamed.extend_from_slice(&chunk);
    }
    assert_eq!(String::from_utf8(streamed).expect("utf-8"), out.output);
    assert_eq!(out.output, "one\ntwo\n");
}

#[tokio::test]
async fn a_consumer_that_never_reads_does_not_block_the_child() {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    let out = tokio::time::timeout(
        HANG,
        run(
            sh("head -c 8388608 /dev/zero"),
            CancellationToken::new(),
            Some(tx),
            |_| {},
        ),
    )
    .await
    .expect("a slow consumer stalled the run");
    assert_eq!(out.exit_code, Some(0));
    assert_eq!(out.output_bytes, 8 << 20);
    assert!(rx.len() <= 1);
}

/// The runs of this file are confined (see [`confined`]): as root, another
/// user without capabilities, and only the temporary directory writable.
#[tokio::test]
async fn runs_here_are_inside_the_sandbox() {
    let out = go(sh(
        "id -u; grep CapEff /proc/self/status; (: > /etc/skilld-probe) 2>/dev/null || echo denied",
    ))
    .await;
    let uid = if nix::unistd::geteuid().is_root() {
        "65534"
    } else {
        ""
    };
    let expected_uid = if uid.is_empty() {
        nix::unistd::geteuid().to_string()
    } else {
        uid.to_owned()
    };
    assert_eq!(
        out.output,
        format!("{expected_uid}\nCapEff:\t0000000000000000\ndenied\n"),
        "{out:?}"
    );
}
