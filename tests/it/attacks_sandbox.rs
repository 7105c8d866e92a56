//! The sandbox's second pass, tried as an attacker would against a real
//! server: a tool that types into the operator's terminal, makes itself a
//! user namespace, reaches the host's unix sockets, reads other
//! processes' command lines, or widens its grants through the program it
//! names. Each test performs the attack and shows it fail, beside a
//! control that the same step works where it is allowed.

use crate::common::{Api, TestServer, options, root};
use serde_json::{Value, json};
use skilld::invoke::RunSettings;
use skilld::skill::Trust;
use std::path::Path;
use std::time::Duration;

/// A read-only skill `name` whose tool of the same name runs the Python
/// program it is given (`python3 -c CODE`), with `front` added to its
/// frontmatter (`network: true`, say).
fn python_skill(dir: &Path, name: &str, front: &str) {
    crate::common::one_tool_skill(dir, name, front, "code", "python3 -c {{code}}");
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Skips a test that needs root, except under CI, which runs as root.
fn needs_root() -> bool {
    if is_root() {
        return false;
    }
    assert!(std::env::var_os("CI").is_none(), "CI runs as root");
    eprintln!("skipped: needs root");
    true
}

async fn server(dir: &Path) -> TestServer {
    TestServer::builder(options(vec![root(dir, Trust::Bundled)]))
        .settings(RunSettings::default())
        .start()
        .await
}

/// Runs `code` with `tool` and answers its output, expecting success.
async fn run(server: &TestServer, tool: &str, code: &str) -> String {
    let (status, envelope) = server.invoke(tool, json!({ "code": code })).await;
    assert_eq!(status, 200, "{envelope}");
    assert_eq!(envelope["success"], true, "{envelope}");
    envelope["output"].as_str().unwrap().to_owned()
}

/// Prints, one per line, `name: errno` (or `name: ok`) for each attempt.
const ATTEMPTS: &str = r#"
import errno, os
def attempt(name, f):
    try:
        f()
        print(name + ": ok")
    except OSError as e:
        print(name + ": " + errno.errorcode.get(e.errno, str(e.errno)))
"#;

/// `TIOCSTI` on `/dev/tty` typed a command into the shell that started
/// `skilld serve`, which ran it as root. The server now runs under a real
/// terminal as its controlling one: the tool has no terminal of its own,
/// cannot open the server's, and the request is refused outright even on
/// a descriptor it holds; nothing reaches the terminal's input.
#[tokio::test]
async fn a_tool_cannot_type_into_or_read_the_operators_terminal() {
    let skills = crate::common::tempdir().unwrap();
    python_skill(skills.path(), "typist", "");
    let data = crate::common::tempdir().unwrap();
    let pty = nix::pty::openpty(None, None).unwrap();
    let slave = std::fs::File::from(pty.slave);
    // `setsid --ctty` makes the terminal on stdin the server's controlling
    // terminal, as a shell's would be.
    let mut child = std::process::Command::new("setsid")
        .arg("--ctty")
        .arg(env!("CARGO_BIN_EXE_skilld"))
        .args(["serve", "--bind", "127.0.0.1:0", "--no-watch", "--data-dir"])
        .arg(data.path())
        .arg("--skills")
        .arg(format!("bundled={}", skills.path().display()))
        .env("SKILLD_LOG", "warn")
        .env_remove("SKILLD_TOKENS")
        .stdin(slave.try_clone().unwrap())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let addr = first_line_addr(&mut child);
    let code = format!(
        "{ATTEMPTS}
import fcntl, termios
stat = open('/proc/self/stat').read().rsplit(')', 1)[1].split()
print('tty_nr: ' + stat[4])
attempt('open /dev/tty', lambda: os.open('/dev/tty', os.O_RDWR))
attempt('read /dev/tty', lambda: os.open('/dev/tty', os.O_RDONLY))
for fd in (0, 1, 2):
    attempt('TIOCSTI ' + str(fd), lambda: fcntl.ioctl(fd, termios.TIOCSTI, b'x'))
attempt('TIOCLINUX 0', lambda: fcntl.ioctl(0, 0x541C, b'\\x06'))
"
    );
    let envelope = crate::common::invoke_envelope(&addr, "typist", None, json!({ "code": code })).await;
    let output = envelope["output"].as_str().unwrap();
    assert_eq!(
        output,
        "tty_nr: 0\nopen /dev/tty: EACCES\nread /dev/tty: EACCES\nTIOCSTI 0: EPERM\nTIOCSTI 1: EPERM\n\
         TIOCSTI 2: EPERM\nTIOCLINUX 0: EPERM\n",
        "{envelope}"
    );
    // Nothing waits on the terminal's input.
    nix::fcntl::fcntl(
        &slave,
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
    )
    .unwrap();
    let mut buf = [0u8; 64];
    let typed = nix::unistd::read(&slave, &mut buf);
    assert_eq!(typed, Err(nix::errno::Errno::EAGAIN), "{:?}", &buf);
    crate::common::stop(child);
}

/// The address on the first line of a server's stdout (a terminal's line
/// ends in `\r\n`).
fn first_line_addr(child: &mut std::process::Child) -> String {
    use std::io::BufRead;
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut first)
        .unwrap();
    first
        .trim_end()
        .strip_prefix("listening on http://")
        .unwrap_or_else(|| panic!("first line was {first:?}"))
        .to_owned()
}

/// `unshare -U` gave an unprivileged tool every capability in a namespace
/// of its own, and with it nf_tables and the rest of the namespaced
/// kernel surface. Forking (through `clone`, which glibc falls back to
/// when `clone3` is refused) still works.
#[tokio::test]
async fn a_tool_cannot_make_a_user_namespace() {
    let skills = crate::common::tempdir().unwrap();
    python_skill(skills.path(), "userns", "network: true\n");
    let server = server(skills.path()).await;
    let code = format!(
        "{ATTEMPTS}
import subprocess
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
def unshare(flags):
    if libc.unshare(flags) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
attempt('unshare user', lambda: unshare(0x10000000))
attempt('unshare user+net', lambda: unshare(0x10000000 | 0x40000000))
r = subprocess.run(['unshare', '-Ur', 'id', '-u'], capture_output=True)
print('unshare -Ur: ' + str(r.returncode))
r = subprocess.run(['sh', '-c', 'echo forked'], capture_output=True, text=True)
print('fork: ' + r.stdout.strip())
"
    );
    let output = run(&server, "userns", &code).await;
    assert_eq!(
        output,
        "unshare user: EPERM\nunshare user+net: EPERM\nunshare -Ur: 1\nfork: forked\n"
    );
}

/// With `network: false` a tool read the server's database URL and
/// connected to PostgreSQL's unix socket; vsock and netlink sockets were
/// open too. Now the host's `/tmp` and `/run` (with every socket in them)
/// are not in its sight, and no socket family but `AF_UNIX` opens. A
/// socket pair between its own processes still works.
#[tokio::test]
async fn network_false_reaches_no_socket_of_the_host() {
    if needs_root() {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let skills = crate::common::tempdir().unwrap();
    python_skill(skills.path(), "sockets", "");
    let server = server(skills.path()).await;
    // Listening sockets any user may connect to, in /tmp and /run.
    let tmp = std::env::temp_dir().join(format!("skilld-host-{}.sock", std::process::id()));
    let run_dir = Path::new("/run").join(format!("skilld-host-{}", std::process::id()));
    std::fs::create_dir_all(&run_dir).unwrap();
    let in_run = run_dir.join("s.sock");
    let mut listeners = Vec::new();
    for path in [&tmp, &in_run] {
        let _ = std::fs::remove_file(path);
        let listener = std::os::unix::net::UnixListener::bind(path).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).unwrap();
        listener.set_nonblocking(true).unwrap();
        listeners.push(listener);
    }
    std::fs::set_permissions(&run_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let postgres = Path::new("/var/run/postgresql/.s.PGSQL.5432");
    let code = format!(
        "{ATTEMPTS}
import socket
def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
attempt('tmp socket', lambda: connect('{tmp}'))
attempt('run socket', lambda: connect('{in_run}'))
attempt('postgres socket', lambda: connect('{postgres}'))
attempt('netlink', lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0))
attempt('vsock', lambda: socket.socket(40, socket.SOCK_STREAM))
attempt('packet', lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW))
attempt('inet', lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
attempt('socketpair inet6', lambda: socket.socketpair(socket.AF_INET6))
a, b = socket.socketpair()
a.send(b'pair')
print('pair: ' + b.recv(4).decode())
",
        tmp = tmp.display(),
        in_run = in_run.display(),
        postgres = postgres.display(),
    );
    let output = run(&server, "sockets", &code).await;
    assert_eq!(
        output,
        "tmp socket: ENOENT\nrun socket: ENOENT\npostgres socket: ENOENT\nnetlink: EAFNOSUPPORT\n\
         vsock: EAFNOSUPPORT\npacket: EAFNOSUPPORT\ninet: EAFNOSUPPORT\nsocketpair inet6: EAFNOSUPPORT\npair: pair\n"
    );
    for listener in &listeners {
        assert!(listener.accept().is_err(), "a tool connected to a host socket");
    }
    let _ = std::fs::remove_file(&tmp);
    let _ = std::fs::remove_dir_all(&run_dir);
}

/// Tools saw every process's command line, the server's database URL and
/// password among them, and `/proc/1/net/*`. Now `/proc` shows a run only
/// its own processes: not the server, not another run, not pid 1.
#[tokio::test]
async fn a_tool_sees_only_its_own_processes() {
    if needs_root() {
        return;
    }
    let skills = crate::common::tempdir().unwrap();
    python_skill(skills.path(), "ps", "");
    python_skill(skills.path(), "sleeper", "");
    let server = std::sync::Arc::new(server(skills.path()).await);
    let tag = format!("sleeper-{}", std::process::id());
    let other = {
        let server = server.clone();
        let code = format!("import time, sys; sys.argv.append('{tag}'); time.sleep(3)  # {tag}");
        tokio::spawn(async move { server.invoke("sleeper", json!({ "code": code })).await })
    };
    tokio::time::sleep(Duration::from_millis(700)).await;
    let server_pid = std::process::id();
    let code = format!(
        "{ATTEMPTS}
import glob
mine = {{os.getpid(), os.getppid()}}
seen = sorted(int(p.split('/')[2]) for p in glob.glob('/proc/[0-9]*'))
print('own: ' + str(os.getpid() in seen))
print('others: ' + str([p for p in seen if p not in mine]))
print('server: ' + str(os.path.exists('/proc/{server_pid}')))
lines = []
for p in seen:
    try:
        lines.append(open('/proc/%d/cmdline' % p).read())
    except OSError:
        pass
# Split, so that this program's own command line does not hold the tag.
tag = 'sleeper' + '-{pid}'
print('sleeper seen: ' + str(any(tag in l for l in lines)))
attempt('pid 1 net', lambda: open('/proc/1/net/tcp').read())
attempt('server cmdline', lambda: open('/proc/{server_pid}/cmdline').read())
",
        pid = std::process::id()
    );
    let output = run(&server, "ps", &code).await;
    assert_eq!(
        output,
        "own: True\nothers: []\nserver: False\nsleeper seen: False\npid 1 net: ENOENT\nserver cmdline: ENOENT\n"
    );
    let (status, slept) = other.await.unwrap();
    assert_eq!(status, 200, "{slept}");
    assert_eq!(
        server.invoker.sandbox().report(true).processes,
        "enforced",
        "{slept}"
    );
}

/// A server started with its database URL on the command line showed the
/// password to anyone reading `/proc/<pid>/cmdline`. It masks it once it
/// has read it, as it wipes its secrets from its environment.
#[tokio::test]
async fn the_database_password_is_off_the_command_line() {
    let Some(url) = crate::common::postgres_url() else {
        return;
    };
    let with_password = url.replacen("://postgres@", "://postgres:hunter2-never-shown@", 1);
    assert!(
        with_password.contains("hunter2"),
        "{url}: no user to give a password"
    );
    let data = crate::common::tempdir().unwrap();
    let mut cmd = crate::common::skilld();
    cmd.args(["serve", "--bind", "127.0.0.1:0", "--no-watch", "--data-dir"])
        .arg(data.path())
        .arg("--database")
        .arg(&with_password);
    let (child, addr) = crate::common::serve(&mut cmd);
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", child.id())).unwrap();
    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    assert!(!cmdline.contains("hunter2"), "{cmdline}");
    assert!(cmdline.contains("--database postgres://postgres:"), "{cmdline}");
    // It still serves from that database.
    let health = reqwest::get(format!("http://{addr}/readyz")).await.unwrap();
    assert_eq!(health.status(), 200);
    crate::common::stop(child);
}

/// A skill named `bin` got its parent, the skill root, as an "install
/// prefix", and with it every sibling skill; `~/bin/python3` got the
/// home directory, with `~/.ssh` and skilld's config. A program outside
/// the system now brings only its own `bin` and the library directories
/// beside it, minus every protected place.
#[tokio::test]
async fn an_absolute_program_does_not_widen_the_sandbox() {
    use std::os::unix::fs::PermissionsExt;
    let skills = crate::common::tempdir().unwrap();
    let home = crate::common::tempdir().unwrap();
    // A sibling skill with a secret, and a home with a key and a library.
    crate::common::write_file(
        &skills.path().join("vault/SKILL.md"),
        "---\nname: vault\ndescription: Another skill.\n---\n\nvault-secret-instructions\n",
    );
    crate::common::write_file(&home.path().join(".ssh/id_ed25519"), "home-ssh-key\n");
    crate::common::write_file(&home.path().join("lib/helper.txt"), "home-lib-ok\n");
    let reader = "#!/bin/sh\nfor f in \"$@\"; do cat \"$f\" 2>/dev/null || echo \"denied $f\"; done\n";
    for program in [skills.path().join("bin/read.sh"), home.path().join("bin/read")] {
        crate::common::write_file(&program, reader);
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let ssh = home.path().join(".ssh/id_ed25519");
    let vault = skills.path().join("vault/SKILL.md");
    let lib = home.path().join("lib/helper.txt");
    // The skill `bin` runs its own script by absolute path; `homebrew`
    // runs a program from a home's `bin`.
    crate::common::write_file(
        &skills.path().join("bin/SKILL.md"),
        &format!(
            "---\nname: bin\nversion: 1.0.0\ndescription: A skill named bin.\nread_only: true\n---\n\n\
             ### peek\n\nReads.\n\n#### Command\n\n```\n{} {}\n```\n",
            skills.path().join("bin/read.sh").display(),
            vault.display()
        ),
    );
    crate::common::write_file(
        &skills.path().join("homebrew/SKILL.md"),
        &format!(
            "---\nname: homebrew\nversion: 1.0.0\ndescription: A program in a home.\nread_only: true\n---\n\n\
             ### peek_home\n\nReads.\n\n#### Command\n\n```\n{} {} {}\n```\n",
            home.path().join("bin/read").display(),
            ssh.display(),
            lib.display()
        ),
    );
    let server = server(skills.path()).await;
    let (status, envelope) = server.invoke("peek", json!({})).await;
    assert_eq!(status, 200, "{envelope}");
    assert_eq!(envelope["output"], format!("denied {}\n", vault.display()));
    let (status, envelope) = server.invoke("peek_home", json!({})).await;
    assert_eq!(status, 200, "{envelope}");
    assert_eq!(
        envelope["output"],
        format!("denied {}\nhome-lib-ok\n", ssh.display()),
        "{envelope}"
    );
    let dry: Value = Api::anonymous(&server)
        .post_value("/tools/peek_home/invoke?dry_run=true", json!({"arguments": {}}))
        .await;
    let read: Vec<String> = serde_json::from_value(dry["sandbox"]["read"].clone()).unwrap_or_default();
    assert!(
        !read.iter().any(|p| Path::new(p) == home.path()),
        "the home itself is granted: {dry}"
    );
}

/// A SQLite run log kept outside the data directory (inside the
/// workspace, here) was readable by any tool. Its file and the journal
/// beside it are now protected wherever they are.
#[tokio::test]
async fn a_run_log_outside_the_data_directory_is_out_of_reach() {
    let skills = crate::common::tempdir().unwrap();
    python_skill(skills.path(), "dbpeek", "");
    let data = crate::common::tempdir().unwrap();
    let workspace = crate::common::tempdir().unwrap();
    std::fs::write(workspace.path().join("notes.txt"), "workspace notes\n").unwrap();
    let db = workspace.path().join("runs.db");
    let mut cmd = crate::common::skilld();
    cmd.args(["serve", "--bind", "127.0.0.1:0", "--no-watch", "--data-dir"])
        .arg(data.path())
        .arg("--workspace")
        .arg(workspace.path())
        .arg("--database")
        .arg(format!("sqlite://{}", db.display()))
        .arg("--skills")
        .arg(format!("bundled={}", skills.path().display()));
    let (child, addr) = crate::common::serve(&mut cmd);
    let code = format!(
        "{ATTEMPTS}
attempt('db', lambda: open('{db}', 'rb').read(16))
attempt('wal', lambda: open('{db}-wal', 'rb').read(16))
print(open('{ws}/notes.txt').read(), end='')
",
        db = db.display(),
        ws = workspace.path().display()
    );
    let envelope = crate::common::invoke_envelope(&addr, "dbpeek", None, json!({ "code": code })).await;
    assert_eq!(
        envelope["output"], "db: EACCES\nwal: EACCES\nworkspace notes\n",
        "{envelope}"
    );
    assert!(db.exists());
    crate::common::stop(child);
}

/// `/readyz` names each new layer.
#[tokio::test]
async fn readyz_reports_the_new_layers() {
    let skills = crate::common::tempdir().unwrap();
    let server = server(skills.path()).await;
    let ready: Value = server.get_json("/readyz").await;
    let sandbox = &ready["sandbox"];
    let expected = if is_root() { "enforced" } else { "unavailable" };
    assert_eq!(sandbox["mounts"], expected, "{ready}");
    assert_eq!(sandbox["processes"], expected, "{ready}");
    assert_eq!(sandbox["seccomp"], "enforced", "{ready}");
    // This kernel has seccomp user notification (5.0) and pidfd_getfd (5.6).
    assert_eq!(sandbox["unix_sockets"], "seccomp_notify", "{ready}");
    if is_root() {
        assert_eq!(sandbox["egress"], "proxy", "{ready}");
    }
}

/// An installed skill's dependencies came first on `PATH`, outside the
/// hash: the approver saw `ls /usr`, and the skill's own `ls` from its
/// `node_modules/.bin` ran. The version's `env/` is planted here as a
/// package with such a `bin` would leave it. The system's `ls` runs; a
/// command only the dependencies provide is still found.
#[tokio::test]
async fn installed_dependencies_do_not_replace_the_program_the_approver_saw() {
    use skilld::catalog::installed::{SkillState, VersionState, VersionStatus, write_state};
    use std::os::unix::fs::PermissionsExt;
    let installed = crate::common::tempdir().unwrap();
    let version = installed.path().join("lister/1.0.0");
    crate::common::write_file(
        &version.join("lister/SKILL.md"),
        "---\nname: lister\nversion: 1.0.0\ndescription: Lists.\nread_only: true\n---\n\n\
         ### list_root\n\nLists /usr.\n\n#### Command\n\n```\nls /usr\n```\n\n\
         ### from_deps\n\nRuns a dependency's command.\n\n#### Command\n\n```\nonly-in-deps\n```\n",
    );
    let bin = version.join("env/node_modules/.bin");
    for (name, says) in [
        ("ls", "PWNED by a package"),
        ("only-in-deps", "from the dependencies"),
    ] {
        let path = bin.join(name);
        crate::common::write_file(&path, &format!("#!/bin/sh\necho '{says}'\n"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let state = SkillState {
        active: Some("1.0.0".to_owned()),
        versions: vec![VersionState {
            version: "1.0.0".to_owned(),
            hash: "planted".to_owned(),
            status: VersionStatus::Ready,
            trust: Trust::Bundled,
            installed_at: chrono::Utc::now(),
            review: None,
            signature: None,
            archive_sha256: None,
        }],
    };
    write_state(installed.path(), "lister", &state).unwrap();
    let server = TestServer::builder(options(vec![crate::common::installed_root(installed.path())]))
        .settings(RunSettings::default())
        .start()
        .await;
    let (status, listed) = server.invoke("list_root", json!({})).await;
    assert_eq!(status, 200, "{listed}");
    let output = listed["output"].as_str().unwrap();
    assert!(!output.contains("PWNED"), "{listed}");
    assert!(output.lines().any(|l| l == "bin"), "{listed}");
    let (status, deps) = server.invoke("from_deps", json!({})).await;
    assert_eq!(status, 200, "{deps}");
    assert_eq!(deps["output"], "from the dependencies\n", "{deps}");
}

/// Each run had its memory bound, but 64 runs of 2 GiB could take more
/// than the host has. All runs together are bounded too: three runs of
/// 48 MiB under a 100 MiB total cannot all hold their memory, though one
/// alone can.
#[tokio::test]
async fn all_runs_together_are_bounded() {
    let skills = crate::common::tempdir().unwrap();
    python_skill(skills.path(), "hog", "");
    let mut settings = RunSettings::default();
    settings.sandbox.memory_max = 64 << 20;
    settings.sandbox.total_memory_max = 100 << 20;
    let server = std::sync::Arc::new(
        TestServer::builder(options(vec![root(skills.path(), Trust::Bundled)]))
            .settings(settings)
            .allowed()
            .start()
            .await,
    );
    if server.invoker.sandbox().report(true).memory == "rlimit" {
        assert!(std::env::var_os("CI").is_none(), "CI hosts have memory cgroups");
        eprintln!("skipped: no memory cgroup here");
        return;
    }
    let code = "import time\nb = b'x' * (48 << 20)\ntime.sleep(2)\nprint('held', len(b) >> 20)";
    let (status, alone) = server.invoke("hog", json!({ "code": code })).await;
    assert_eq!(
        (status, alone["output"].as_str()),
        (200, Some("held 48\n")),
        "{alone}"
    );
    let calls: Vec<_> = (0..3)
        .map(|_| {
            let server = server.clone();
            tokio::spawn(async move { server.invoke("hog", json!({ "code": code })).await })
        })
        .collect();
    let mut held = 0;
    for call in calls {
        let (status, envelope) = call.await.unwrap();
        assert_eq!(status, 200, "{envelope}");
        if envelope["output"] == "held 48\n" {
            held += 1;
        }
    }
    assert!(held < 3, "three runs held 144 MiB under a 100 MiB bound");
}

/// A server that is not root (the quick start on a laptop) could not hide
/// the host's `/tmp` and `/run`, and its tools run as its own user: the
/// user's agent, multiplexer and session-bus sockets were all in reach.
/// It now makes the runs' mount namespace inside a user namespace of its
/// own: a socket its user owns in `/tmp` is out of sight, while the
/// tool still reads its skill, writes its scratch directory, and reaches
/// its own listener there (the gate's supervisor, not root, may still
/// take the tool's socket: the run's user namespace is the server's).
#[tokio::test]
async fn a_server_that_is_not_root_hides_the_users_sockets_too() {
    use std::os::unix::fs::{PermissionsExt, chown};
    if needs_root() {
        return;
    }
    let (uid, gid) = (65534, 65534);
    let skills = crate::common::tempdir().unwrap();
    python_skill(skills.path(), "sockets_nonroot", "");
    let data = crate::common::tempdir().unwrap();
    chown(data.path(), Some(uid), Some(gid)).unwrap();
    // The user's own socket, as an agent's or tmux's would be.
    let sockets = crate::common::tempdir().unwrap();
    chown(sockets.path(), Some(uid), Some(gid)).unwrap();
    let path = sockets.path().join("agent.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    chown(&path, Some(uid), Some(gid)).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    listener.set_nonblocking(true).unwrap();
    let mut cmd = crate::common::serve_as_nobody(skills.path(), data.path(), skills.path());
    let (child, addr) = crate::common::serve(&mut cmd);
    let ready: Value = reqwest::get(format!("http://{addr}/readyz"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let code = format!(
        "{ATTEMPTS}
import socket
def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
attempt('own socket', lambda: connect('{path}'))
run_socket = os.environ['TMPDIR'] + '/run.sock'
listener = socket.socket(socket.AF_UNIX)
listener.bind(run_socket)
listener.listen(1)
attempt('run socket', lambda: connect(run_socket))
open(os.environ['TMPDIR'] + '/scratch', 'w').write('x')
print('scratch: ok')
print('uid: ' + str(os.getuid()))
",
        path = path.display()
    );
    let envelope =
        crate::common::invoke_envelope(&addr, "sockets_nonroot", None, json!({ "code": code })).await;
    crate::common::stop(child);
    assert_eq!(ready["sandbox"]["mounts"], "enforced", "{ready}");
    assert_eq!(
        envelope["output"], "own socket: ENOENT\nrun socket: ok\nscratch: ok\nuid: 65534\n",
        "{envelope}"
    );
    assert!(listener.accept().is_err(), "the tool reached its user's socket");
}

/// Removes a directory made outside the tests' temporary ones (in `/srv`,
/// `/home`) when the test ends, passed or not.
struct Made(std::path::PathBuf);

impl Drop for Made {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A listening socket anyone may connect to at `path`, non-blocking.
fn open_listener(path: &Path) -> std::os::unix::net::UnixListener {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let listener = std::os::unix::net::UnixListener::bind(path).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).unwrap();
    listener.set_nonblocking(true).unwrap();
    listener
}

/// Whether this host's `/readyz` (`ready`) shows no unix-socket gate by
/// user notification, which a test of the gate then skips; CI hosts have
/// one.
fn no_gate_here(ready: &Value) -> bool {
    if ready["sandbox"]["unix_sockets"] == "seccomp_notify" {
        return false;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI hosts have user notification: {ready}"
    );
    eprintln!("skipped: no gate here: {ready}");
    true
}

/// The run's own directory, once it appears under `scratch`.
async fn run_dir_under(scratch: &Path) -> std::path::PathBuf {
    for _ in 0..200 {
        let made = std::fs::read_dir(scratch)
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            // A run's directory is named by its id; the scratch root also
            // holds others (the Starlark host's copy, for a server run
            // from a place the sandbox's user cannot enter).
            .find(|e| {
                e.file_type().is_ok_and(|t| t.is_dir())
                    && e.file_name()
                        .to_str()
                        .is_some_and(|n| uuid::Uuid::parse_str(n).is_ok())
            });
        if let Some(made) = made {
            return made.path();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no run directory appeared under {}", scratch.display());
}

/// The host's listeners of the unix-socket attack, anyone may connect to
/// each: in the workspace, in `/srv`, in a home directory, one the tool
/// moves out of the workspace, two the test links into the run's own
/// directory; a datagram listener; an abstract name.
struct HostSockets {
    _srv: Made,
    _home: Made,
    workspace: std::path::PathBuf,
    scratch: std::path::PathBuf,
    /// workspace, srv, home, moved, linked, unlinked.
    paths: [std::path::PathBuf; 6],
    listeners: Vec<std::os::unix::net::UnixListener>,
    datagrams: std::os::unix::net::UnixDatagram,
    name: String,
    named: std::os::unix::net::UnixListener,
}

impl HostSockets {
    fn open() -> Self {
        use std::os::unix::fs::PermissionsExt;
        use std::os::unix::net::{UnixDatagram, UnixListener};
        let pid = std::process::id();
        // Outside /tmp, so that the workspace and the scratch root are one
        // mount in the run's view, as they are wherever neither lies in a
        // hidden place: a rename between them works.
        let srv = Made(Path::new("/srv").join(format!("skilld-unix-{pid}")));
        let home = Made(Path::new("/home").join(format!("skilld-fake-{pid}")));
        let (workspace, host) = (srv.0.join("ws"), srv.0.join("host"));
        for dir in [&workspace, &host] {
            std::fs::create_dir_all(dir).unwrap();
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        }
        let paths = [
            workspace.join("ws.sock"),
            srv.0.join("srv.sock"),
            home.0.join(".docker/run/docker.sock"),
            workspace.join("moved.sock"),
            host.join("linked.sock"),
            host.join("unlinked.sock"),
        ];
        let listeners = paths.iter().map(|p| open_listener(p)).collect();
        let datagrams = UnixDatagram::bind(workspace.join("log.sock")).unwrap();
        datagrams.set_nonblocking(true).unwrap();
        let name = format!("skilld-host-{pid}");
        let addr =
            <std::os::unix::net::SocketAddr as std::os::linux::net::SocketAddrExt>::from_abstract_name(
                name.as_bytes(),
            )
            .unwrap();
        let named = UnixListener::bind_addr(&addr).unwrap();
        named.set_nonblocking(true).unwrap();
        Self {
            scratch: srv.0.join("scratch"),
            _srv: srv,
            _home: home,
            workspace,
            paths,
            listeners,
            datagrams,
            name,
            named,
        }
    }

    /// The tool: each attempt, one per line.
    fn attack(&self) -> String {
        format!(
            "{ATTEMPTS}
import socket, time
tmp = os.environ['TMPDIR']
def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(path)
    s.sendall(b'leak')
attempt('workspace', lambda: connect('{ws}'))
attempt('srv', lambda: connect('{srv}'))
attempt('home', lambda: connect('{home}'))
os.symlink('{ws}', tmp + '/symlink.sock')
attempt('symlink in own dir', lambda: connect(tmp + '/symlink.sock'))
os.rename('{moved}', tmp + '/moved.sock')
attempt('renamed into own dir', lambda: connect(tmp + '/moved.sock'))
for name in ('linked.sock', 'unlinked.sock'):
    for _ in range(200):
        if os.path.exists(tmp + '/' + name):
            break
        time.sleep(0.05)
attempt('hard link in own dir', lambda: connect(tmp + '/linked.sock'))
attempt('hard link, host name gone', lambda: connect(tmp + '/unlinked.sock'))
attempt('datagram', lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM))
attempt('datagram pair', lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM))
attempt('raw', lambda: socket.socket(socket.AF_UNIX, socket.SOCK_RAW))
def send_to(kind):
    socket.socket(socket.AF_UNIX, kind).sendto(b'leak', '{log}')
attempt('stream sendto', lambda: send_to(socket.SOCK_STREAM))
attempt('seqpacket sendto', lambda: send_to(socket.SOCK_SEQPACKET))
attempt('abstract', lambda: connect('\\0{name}'))
",
            ws = self.paths[0].display(),
            srv = self.paths[1].display(),
            home = self.paths[2].display(),
            moved = self.paths[3].display(),
            log = self.workspace.join("log.sock").display(),
            name = self.name,
        )
    }

    /// Hard links to two host sockets in the run's directory, once it
    /// exists: one beside the host's name, one whose host name is gone
    /// (so it has one link, as the run's own sockets have).
    async fn plant_links(&self) {
        let run_dir = run_dir_under(&self.scratch).await;
        std::fs::hard_link(&self.paths[4], run_dir.join("linked.sock")).unwrap();
        let part = run_dir.join("unlinked.sock.part");
        std::fs::hard_link(&self.paths[5], &part).unwrap();
        std::fs::remove_file(&self.paths[5]).unwrap();
        std::fs::rename(&part, run_dir.join("unlinked.sock")).unwrap();
    }

    /// No listener got a connection, no datagram arrived.
    fn assert_untouched(&self) {
        for (listener, path) in self.listeners.iter().zip(&self.paths) {
            assert!(
                listener.accept().is_err(),
                "a tool connected to {}",
                path.display()
            );
        }
        assert!(self.named.accept().is_err(), "a tool connected to @{}", self.name);
        assert!(self.datagrams.recv(&mut [0u8; 16]).is_err(), "a datagram arrived");
    }
}

/// Issue 40, point 6: with `network: false` a tool exchanged data with
/// unix-socket listeners in the workspace and in `/srv`; hiding `/tmp`
/// and `/run` is no complete list. The server now decides each `connect`
/// and allows only the run's own sockets. Listeners anyone may connect
/// to, in the workspace, in `/srv`, in a home directory, hard-linked into
/// the run's own directory (the host's name kept, or removed), renamed
/// into it by a tool that may write the workspace, and behind a symbolic
/// link the tool made there: none is reached, none accepts anything.
/// Nor does a datagram listener, which a connectionless socket would
/// reach without any connect (stream and seqpacket sockets refuse an
/// address to send to), nor an abstract name.
#[tokio::test]
async fn network_false_reaches_no_unix_socket_of_the_host_anywhere() {
    if needs_root() {
        return;
    }
    let host = HostSockets::open();
    let skills = crate::common::tempdir().unwrap();
    python_skill(skills.path(), "reach", "permissions: [file:write]\n");
    let settings = RunSettings {
        workspace: host.workspace.clone(),
        scratch_dir: host.scratch.clone(),
        ..RunSettings::default()
    };
    let server = std::sync::Arc::new(
        TestServer::builder(options(vec![root(skills.path(), Trust::Bundled)]))
            .settings(settings)
            .allowed()
            .start()
            .await,
    );
    let code = host.attack();
    let call = {
        let server = server.clone();
        tokio::spawn(async move { server.invoke("reach", json!({ "code": code })).await })
    };
    host.plant_links().await;
    let (status, envelope) = call.await.unwrap();
    assert_eq!(status, 200, "{envelope}");
    assert_eq!(
        envelope["output"],
        "workspace: EACCES\nsrv: EACCES\nhome: EACCES\nsymlink in own dir: EACCES\n\
         renamed into own dir: EACCES\nhard link in own dir: EACCES\nhard link, host name gone: EACCES\n\
         datagram: EACCES\ndatagram pair: EACCES\nraw: EACCES\nstream sendto: ENOTSUP\n\
         seqpacket sendto: ENOTCONN\nabstract: EACCES\n",
        "{envelope}"
    );
    host.assert_untouched();
}

/// What `network: false` keeps: a listener in the run's own `TMPDIR`
/// that a forked child connects to (by absolute and by relative path,
/// stream and seqpacket), eight threads connecting at once to a listener
/// with a backlog of one (the server's connects wait for its accepts),
/// Python's `forkserver` (its socket lies in a
/// temporary directory; Python 3.14 starts processes with it by default),
/// and socket pairs. The same program runs as a
/// tool whose `TMPDIR` is its scratch directory and as an entrypoint
/// whose `TMPDIR` is its own `/tmp`.
#[tokio::test]
async fn network_false_keeps_the_runs_own_unix_sockets() {
    let skills = crate::common::tempdir().unwrap();
    python_skill(skills.path(), "own_sockets", "");
    crate::common::write_file(&skills.path().join("own-entry/scripts/main.py"), OWN_SOCKETS);
    crate::common::write_file(
        &skills.path().join("own-entry/SKILL.md"),
        "---\nname: own-entry\nversion: 1.0.0\ndescription: Own sockets.\n---\n\nRuns.\n",
    );
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::Bundled)]))
        .settings(RunSettings::default())
        .allowed()
        .start()
        .await;
    let ready: Value = server.get_json("/readyz").await;
    if no_gate_here(&ready) {
        return;
    }
    let expected = "own listener: olleh\nrelative: ok\nseqpacket: ok\nconcurrent: 8\nforkserver: [1, 4, 9] [0, 0, 0]\npair: pair\n";
    let output = run(&server, "own_sockets", OWN_SOCKETS).await;
    assert_eq!(output, expected);
    let (status, envelope) = server.invoke("own_entry", json!({})).await;
    assert_eq!(status, 200, "{envelope}");
    assert_eq!(envelope["output"], expected, "{envelope}");
}

/// A run talking to itself over unix sockets; see the test above.
const OWN_SOCKETS: &str = r#"
import multiprocessing, os, socket, threading, time

def serve_once(kind, path, relative):
    server = socket.socket(socket.AF_UNIX, kind)
    server.bind(path)
    server.listen(1)
    if os.fork() == 0:
        client = socket.socket(socket.AF_UNIX, kind)
        client.connect(os.path.basename(path) if relative else path)
        client.sendall(b'hello')
        os._exit(0)
    conn, _ = server.accept()
    got = conn.recv(5)
    os.wait()
    return got

def concurrent(path):
    # A backlog of one: most connects wait until the listener accepts.
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen(1)
    done = []
    def one():
        client = socket.socket(socket.AF_UNIX)
        client.connect(path)
        done.append(client)
    threads = [threading.Thread(target=one) for _ in range(8)]
    for thread in threads:
        thread.start()
    time.sleep(0.3)
    accepted = [server.accept()[0] for _ in threads]
    for thread in threads:
        thread.join()
    return len(done)

def main():
    tmp = os.environ['TMPDIR']
    got = serve_once(socket.SOCK_STREAM, tmp + '/own.sock', False)
    print('own listener: ' + got[::-1].decode())
    os.chdir(tmp)
    got = serve_once(socket.SOCK_STREAM, tmp + '/rel.sock', True)
    print('relative: ' + ('ok' if got == b'hello' else repr(got)))
    got = serve_once(socket.SOCK_SEQPACKET, tmp + '/seq.sock', False)
    print('seqpacket: ' + ('ok' if got == b'hello' else repr(got)))
    print('concurrent: ' + str(concurrent(tmp + '/many.sock')))
    # Processes, not a Pool: a Pool's locks are POSIX semaphores in
    # /dev/shm, which no run has, whatever its start method.
    ctx = multiprocessing.get_context('forkserver')
    reader, writer = ctx.Pipe(duplex=False)
    children = [ctx.Process(target=writer.send, args=(n * n,)) for n in (1, 2, 3)]
    for child in children:
        child.start()
    got = sorted(reader.recv() for _ in children)
    for child in children:
        child.join()
    print('forkserver: ' + str(got) + ' ' + str([c.exitcode for c in children]))
    a, b = socket.socketpair()
    a.send(b'pair')
    print('pair: ' + b.recv(4).decode())

# The forkserver imports this file again, as `__mp_main__`.
if __name__ == '__main__':
    main()
"#;

/// The listeners of a `skilld serve`'s gates (`anon_inode:seccomp notify`).
fn gate_listeners(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter(|target| target.to_string_lossy().contains("seccomp"))
        .count()
}

/// A tool holding its gate's listener could answer its own connects. The
/// listener goes from the child to the server before the tool runs: the
/// tool holds none, the server holds one while the run lives, and none
/// once it has ended (its supervisor ends with it).
#[tokio::test]
async fn only_the_server_holds_a_runs_gate_and_only_while_it_runs() {
    let skills = crate::common::tempdir().unwrap();
    python_skill(skills.path(), "fds", "");
    let data = crate::common::tempdir().unwrap();
    let mut cmd = crate::common::skilld();
    cmd.args(["serve", "--bind", "127.0.0.1:0", "--no-watch", "--data-dir"])
        .arg(data.path())
        .arg("--skills")
        .arg(format!("bundled={}", skills.path().display()));
    let (child, addr) = crate::common::serve(&mut cmd);
    let ready: Value = reqwest::get(format!("http://{addr}/readyz"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    if no_gate_here(&ready) {
        crate::common::stop(child);
        return;
    }
    // The listing's own descriptor is gone by the time it is read.
    let code = r"
import os, time
fds = []
for f in os.listdir('/proc/self/fd'):
    try:
        fds.append(os.readlink('/proc/self/fd/' + f))
    except OSError:
        pass
print('seccomp fds: ' + str(sum('seccomp' in f for f in fds)) + ' of ' + str(len(fds)))
time.sleep(1.5)
";
    let call = {
        let addr = addr.clone();
        tokio::spawn(async move {
            crate::common::invoke_envelope(&addr, "fds", None, json!({ "code": code })).await
        })
    };
    tokio::time::sleep(Duration::from_millis(700)).await;
    let during = gate_listeners(child.id());
    let envelope = call.await.unwrap();
    let mut after = gate_listeners(child.id());
    for _ in 0..50 {
        if after == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        after = gate_listeners(child.id());
    }
    let pid = child.id();
    crate::common::stop(child);
    assert_eq!(envelope["output"], "seccomp fds: 0 of 3\n", "{envelope}");
    assert_eq!((during, after), (1, 0), "listeners held by the server {pid}");
}

/// A process backend's child lives as long as the server wants, and is
/// gated as a run is: from its own directory it reaches its own listener,
/// not the host's socket in the workspace.
#[tokio::test]
async fn a_backends_child_is_gated_too() {
    let workspace = crate::common::tempdir().unwrap();
    let host = workspace.path().join("host.sock");
    let listener = open_listener(&host);
    let skills = crate::common::tempdir().unwrap();
    crate::common::write_file(
        &skills.path().join("gated/SKILL.yaml"),
        "name: gated\nversion: 1.0.0\ndescription: Connects.\ntypes: [tool]\npermissions: [shell:exec]\n\
         implementation:\n  backend: process\n  entrypoint: child.py\n",
    );
    crate::common::write_file(
        &skills.path().join("gated/child.py"),
        &GATED_CHILD.replace("HOST", &host.display().to_string()),
    );
    let settings = RunSettings {
        workspace: workspace.path().to_path_buf(),
        ..RunSettings::default()
    };
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::Bundled)]))
        .settings(settings)
        .allowed()
        .start()
        .await;
    let ready: Value = server.get_json("/readyz").await;
    if no_gate_here(&ready) {
        return;
    }
    for _ in 0..2 {
        let (status, envelope) = server.invoke("reach_out", json!({})).await;
        assert_eq!(status, 200, "{envelope}");
        assert_eq!(envelope["output"], "own: ok\nhost: EACCES", "{envelope}");
    }
    assert!(
        listener.accept().is_err(),
        "a backend connected to the host's socket"
    );
}

/// A process backend whose one tool connects to a listener in its own
/// `TMPDIR` and to `HOST`.
const GATED_CHILD: &str = r#"import errno, json, os, socket, sys
own = os.path.join(os.environ['TMPDIR'], 'own.sock')
server = socket.socket(socket.AF_UNIX)
server.bind(own)
server.listen(8)
def attempt(path):
    try:
        socket.socket(socket.AF_UNIX).connect(path)
        return 'ok'
    except OSError as e:
        return errno.errorcode[e.errno]
TOOLS = [{"name": "reach_out", "description": "Connects.", "input_schema": {"type": "object"}}]
for line in sys.stdin:
    req = json.loads(line)
    method = req.get("method")
    if method == "initialize":
        result = {"tools": TOOLS, "hooks": []}
    elif method == "tool/execute":
        result = {"output": "own: " + attempt(own) + "\nhost: " + attempt("HOST"), "success": True}
    else:
        result = None
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": req["id"], "result": result}) + "\n")
    sys.stdout.flush()
    if method == "shutdown":
        break
"#;

/// A busy server holds more descriptors than a run may. The child is a
/// copy of the server until exec, so the run's low `RLIMIT_NOFILE`, set
/// too early, left it no number for the gate's listener: on a loaded
/// server every `network: false` run failed to start (EMFILE). The limit
/// still holds for the tool itself.
#[tokio::test]
async fn a_server_holding_many_descriptors_still_starts_gated_runs() {
    if needs_root() {
        return;
    }
    let skills = crate::common::tempdir().unwrap();
    python_skill(skills.path(), "fds", "");
    let mut settings = RunSettings::default();
    settings.limits.open_files = Some(32);
    let server = TestServer::builder(options(vec![root(skills.path(), Trust::Bundled)]))
        .settings(settings)
        .start()
        .await;
    // Every number up to 96 taken in the server's process while it runs.
    let held: Vec<std::fs::File> = (0..96)
        .map(|_| std::fs::File::open("/dev/null").unwrap())
        .collect();
    let code = "import resource; print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])";
    let output = run(&server, "fds", code).await;
    drop(held);
    assert_eq!(output, "32\n");
}
