//! The sandbox of every run (`docs/design.md` §9), tried as a hostile tool
//! would: each test runs the attack inside a real server and shows that it
//! failed, and a control where it matters that the same step works when
//! allowed, so that no test passes for the wrong reason.

use crate::common::{TestServer, options, root, working_in};
use serde_json::{Value, json};
use skilld::invoke::RunSettings;
use skilld::skill::Trust;
use std::path::Path;
use std::time::{Duration, Instant};

/// A skill whose tool `name` runs the script it is given with `sh -c`.
fn shell_skill(dir: &Path, name: &str, front: &str) {
    crate::common::one_tool_skill(dir, name, front, "s", "sh -c {{s}}");
}

/// Runs `script` with `tool` and expects the envelope (200).
async fn run(server: &TestServer, tool: &str, script: &str) -> Value {
    let (status, envelope) = server.invoke(tool, json!({ "s": script })).await;
    assert_eq!(status, 200, "{tool}: {envelope}");
    envelope
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

async fn server(dir: &Path, trust: Trust, settings: RunSettings) -> TestServer {
    TestServer::builder(options(vec![root(dir, trust)]))
        .settings(settings)
        .allowed()
        .start()
        .await
}

/// Against `skilld serve` itself, with tokens in its environment and its
/// config: a tool tries to read the database, the config, another skill
/// and the server's environment, to forge a grant, to signal the server
/// and to enter its network namespace; and to write outside its scratch
/// directory. Only its scratch directory and reading the workspace work.
#[tokio::test]
async fn a_tool_cannot_read_or_change_what_is_not_its_own() {
    let skills = crate::common::tempdir().unwrap();
    shell_skill(skills.path(), "probe", "");
    let vault = skills.path().join("vault");
    std::fs::create_dir_all(&vault).unwrap();
    std::fs::write(
        vault.join("SKILL.md"),
        "---\nname: vault\ndescription: Another skill.\n---\n\nSecret instructions.\n",
    )
    .unwrap();
    let data = crate::common::tempdir().unwrap();
    let workspace = crate::common::tempdir().unwrap();
    std::fs::write(workspace.path().join("notes.txt"), "workspace notes\n").unwrap();
    let config = data.path().join("skilld.toml");
    std::fs::write(
        &config,
        "[[tokens]]\nname = \"boss\"\nrole = \"admin\"\nsecret = \"config-secret-xyz\"\n",
    )
    .unwrap();
    let db = data.path().join("skilld.db");
    let mut cmd = crate::common::skilld();
    cmd.args(["serve", "--bind", "127.0.0.1:0", "--no-watch", "--config"])
        .arg(&config)
        .arg("--data-dir")
        .arg(data.path())
        .arg("--workspace")
        .arg(workspace.path())
        .arg("--skills")
        .arg(format!("bundled={}", skills.path().display()))
        .env("SKILLD_TOKENS", "agent:invoke:env-secret-abc");
    let (child, addr) = crate::common::serve(&mut cmd);
    let escape = std::env::temp_dir().join(format!("skilld-escape-{}", std::process::id()));
    let script = format!(
        "for f in '{db}' '{config}' '{vault}/SKILL.md' /proc/$PPID/environ /proc/$PPID/mem; do \
           cat \"$f\" >/dev/null 2>&1 && echo \"read $f\"; done; \
         (echo x > '{escape}') 2>/dev/null && echo 'wrote tmp'; \
         (echo x > '{ws}/new.txt') 2>/dev/null && echo 'wrote workspace'; \
         (echo x > '{data}/planted') 2>/dev/null && echo 'wrote data'; \
         python3 -c \"import sqlite3; c = sqlite3.connect('{db}'); \
c.execute(\\\"insert into grants (id) values ('forged')\\\"); c.commit()\" 2>/dev/null && echo forged; \
         kill -0 $PPID 2>/dev/null && echo 'signalled server'; \
         nsenter --net=/proc/$PPID/ns/net true 2>/dev/null && echo 'entered netns'; \
         echo x > \"$TMPDIR/mine\" && echo scratch; cat '{ws}/notes.txt'",
        db = db.display(),
        config = config.display(),
        vault = vault.display(),
        escape = escape.display(),
        ws = workspace.path().display(),
        data = data.path().display(),
    );
    let res = reqwest::Client::new()
        .post(format!("http://{addr}/tools/probe/invoke"))
        .bearer_auth("env-secret-abc")
        .json(&json!({ "arguments": { "s": script } }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let envelope: Value = res.json().await.unwrap();
    assert_eq!(envelope["output"], "scratch\nworkspace notes\n", "{envelope}");
    assert!(!escape.exists() && !data.path().join("planted").exists());
    assert!(!workspace.path().join("new.txt").exists());
    // The run log is intact and holds no forged grant.
    let grants = reqwest::Client::new()
        .get(format!("http://{addr}/grants"))
        .bearer_auth("config-secret-xyz")
        .send()
        .await
        .unwrap();
    assert_eq!(grants.status(), 200);
    let grants: Value = grants.json().await.unwrap();
    assert_eq!(grants["grants"], json!([]), "{grants}");
    crate::common::stop(child);
}

/// `setsid sleep &` outlived the run; its cgroup now dies with it.
#[tokio::test]
async fn a_process_that_leaves_its_group_dies_with_the_run() {
    let skills = crate::common::tempdir().unwrap();
    shell_skill(skills.path(), "leave", "");
    let server = server(skills.path(), Trust::User, RunSettings::default()).await;
    let kills = server.invoker.sandbox().report(true).kill;
    if kills != "cgroup" {
        assert!(std::env::var_os("CI").is_none(), "CI hosts have cgroup.kill");
        eprintln!("skipped: no cgroup.kill here ({kills})");
        return;
    }
    let tag = format!("97.{}", std::process::id());
    let env = run(&server, "leave", &format!("setsid sleep {tag} & echo left")).await;
    assert_eq!(env["output"], "left\n", "{env}");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let found = std::process::Command::new("pgrep")
            .args(["-f", &format!("sleep {tag}")])
            .output()
            .unwrap();
        if !found.status.success() {
            break;
        }
        assert!(Instant::now() < deadline, "setsid sleep outlived its run");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A fork bomb stops at `pids.max`; memory past `memory.max` is refused.
#[tokio::test]
async fn a_fork_bomb_and_a_memory_hog_hit_the_runs_limits() {
    let skills = crate::common::tempdir().unwrap();
    shell_skill(skills.path(), "hog", "");
    let mut settings = RunSettings::default();
    settings.sandbox.pids_max = 32;
    settings.sandbox.memory_max = 64 * 1024 * 1024;
    let server = server(skills.path(), Trust::User, settings).await;
    let report = server.invoker.sandbox().report(true);
    if report.pids == "unavailable" || report.memory == "rlimit" {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI hosts have pids and memory cgroups"
        );
        eprintln!("skipped: {report:?}");
        return;
    }
    let bomb = [
        "python3 -c \"",
        "import os, time",
        "n = 0",
        "try:",
        "    while n < 10000:",
        "        if os.fork() == 0:",
        "            time.sleep(30)",
        "            os._exit(0)",
        "        n += 1",
        "    print('forked', n)",
        "except OSError:",
        "    print('stopped after', n)",
        "\"",
    ]
    .join("\n");
    let started = Instant::now();
    let env = run(&server, "hog", &bomb).await;
    let out = env["output"].as_str().unwrap();
    let n: u64 = out
        .strip_prefix("stopped after ")
        .unwrap_or_else(|| panic!("the bomb was not stopped: {env}"))
        .trim()
        .parse()
        .unwrap();
    assert!(n < 32, "{n} processes");
    // Its children, asleep for 30 s, died with the run.
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );

    let hog = "python3 -c \"\nb = []\nfor i in range(64):\n    b.append(bytearray(8 << 20))\nprint('allocated all')\n\"";
    let env = run(&server, "hog", hog).await;
    assert_eq!(env["success"], false, "{env}");
    assert!(
        !env["output"].as_str().unwrap().contains("allocated all"),
        "{env}"
    );
}

/// `network: false` refuses IPv4 and IPv6 sockets even where a namespace
/// might leak; the same script with `network: true` connects (control).
#[tokio::test]
async fn network_false_cannot_open_a_socket() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let skills = crate::common::tempdir().unwrap();
    shell_skill(skills.path(), "offline", "network: false\n");
    shell_skill(skills.path(), "online", "network: true\n");
    // The control keeps the host's network, as an operator may let it.
    let mut opts = options(vec![root(skills.path(), Trust::User)]);
    opts.rules.unrestricted_network = vec!["online".to_owned()];
    let server = TestServer::builder(opts).allowed().start().await;
    let connect = format!(
        "python3 -c \"\nimport socket\nfor family in (socket.AF_INET, socket.AF_INET6):\n    try:\n        \
         s = socket.socket(family)\n        print('socket', family)\n    except OSError as e:\n        \
         print('refused', e.errno)\ntry:\n    socket.create_connection(('127.0.0.1', {port}), 2)\n    \
         print('connected')\nexcept OSError as e:\n    print('no connection', e.errno)\n\""
    );
    let env = run(&server, "offline", &connect).await;
    let afnosupport = nix::errno::Errno::EAFNOSUPPORT as i32;
    assert_eq!(
        env["output"],
        format!("refused {afnosupport}\nrefused {afnosupport}\nno connection {afnosupport}\n"),
        "{env}"
    );
    assert!(listener.accept().is_err(), "a connection arrived");
    let env = run(&server, "online", &connect).await;
    assert!(env["output"].as_str().unwrap().ends_with("connected\n"), "{env}");
}

/// The workspace is read-only unless the skill declares `file:write`.
#[tokio::test]
async fn only_a_skill_with_file_write_writes_the_workspace() {
    let skills = crate::common::tempdir().unwrap();
    shell_skill(skills.path(), "reader", "");
    shell_skill(skills.path(), "writer", "permissions: [file:write]\n");
    let workspace = crate::common::writable_tempdir();
    let server = server(skills.path(), Trust::User, working_in(workspace.path())).await;
    let write = "echo x > out.txt && echo wrote";
    let env = run(&server, "reader", write).await;
    assert_eq!(env["success"], false, "{env}");
    assert!(!workspace.path().join("out.txt").exists());
    let env = run(&server, "writer", write).await;
    assert_eq!(env["output"], "wrote\n", "{env}");
    assert!(workspace.path().join("out.txt").exists());
}

/// `sandbox = "off"` trusts user skills, never untrusted ones; a dry run
/// and `/readyz` say what is enforced.
#[tokio::test]
async fn sandbox_off_still_confines_untrusted_skills_and_says_so() {
    let user = crate::common::tempdir().unwrap();
    let untrusted = crate::common::tempdir().unwrap();
    shell_skill(user.path(), "trusted_probe", "");
    shell_skill(untrusted.path(), "stranger", "");
    let mut settings = RunSettings::default();
    settings.sandbox.level = skilld::sandbox::Level::Off;
    let server = TestServer::builder(options(vec![
        root(user.path(), Trust::User),
        root(untrusted.path(), Trust::Untrusted),
    ]))
    .settings(settings)
    .allowed()
    .start()
    .await;
    let data = server.invoker.settings().data_dir.display().to_string();
    let peek = format!("ls '{data}' >/dev/null 2>&1 && echo listed || echo denied");
    let env = run(&server, "trusted_probe", &peek).await;
    assert_eq!(env["output"], "listed\n", "{env}");

    let dry = reqwest::Client::new()
        .post(server.url("/tools/stranger/invoke?dry_run=true"))
        .json(&json!({ "arguments": { "s": peek } }))
        .send()
        .await
        .unwrap();
    let dry: Value = dry.json().await.unwrap();
    let sandbox = &dry["sandbox"];
    assert_eq!(sandbox["confined"], true, "{dry}");
    let read: Vec<&str> = sandbox["read"]
        .as_array()
        .unwrap_or_else(|| panic!("{dry}"))
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        read.iter().any(|p| Path::new(p).ends_with("stranger")),
        "{sandbox}"
    );
    assert!(!read.iter().any(|p| p.starts_with(&data)), "{sandbox}");

    let ready = server.get_json("/readyz").await;
    assert_eq!(ready["sandbox"]["level"], "untrusted-only", "{ready}");
    if is_root() {
        assert_eq!(ready["sandbox"]["identity"], "uid 65534 gid 65534", "{ready}");
    }
    if ready["sandbox"]["files"] == "enforced" {
        // The untrusted tool runs confined: the data directory is closed.
        let env = run(&server, "stranger", &peek).await;
        assert_eq!(env["output"], "denied\n", "{env}");
    }
}

/// As root, a skill where the sandbox's user cannot go (a private
/// directory) does not fail somewhere inside the tool: the run says why.
#[tokio::test]
async fn a_skill_the_sandbox_user_cannot_reach_is_a_clear_error() {
    if !is_root() {
        eprintln!("skipped: only root switches to the sandbox's user");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let private = tempfile::tempdir().unwrap();
    std::fs::set_permissions(private.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let skill = private.path().join("hidden");
    std::fs::create_dir_all(skill.join("scripts")).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: hidden\ndescription: A script out of reach.\nread_only: true\n---\n\nSays so.\n",
    )
    .unwrap();
    std::fs::write(skill.join("scripts/say.sh"), "#!/bin/sh\necho ran\n").unwrap();
    let server = server(private.path(), Trust::User, RunSettings::default()).await;
    let (status, env) = server.invoke("hidden_say", json!({})).await;
    assert_eq!(status, 200, "{env}");
    assert_eq!(env["success"], false, "{env}");
    let error = env["error"].as_str().unwrap();
    assert!(
        error.contains("(uid 65534) cannot reach the skill directory") && error.contains("sandbox_user"),
        "{env}"
    );
}
