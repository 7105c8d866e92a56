//! Seed 003's resources as a skill declares them, enforced: `cpu` through
//! the CPU controller, and a private, size-bounded `/tmp` that an
//! entrypoint may write.

use crate::common::{Api, TestServer, options, root};
use serde_json::{Value, json};
use skilld::invoke::RunSettings;
use skilld::skill::Trust;
use std::path::Path;

/// An entrypoint skill `name` with `front` in its frontmatter and
/// `scripts/main.py`.
fn entrypoint(dir: &Path, name: &str, front: &str, main: &str) {
    crate::common::write_file(
        &dir.join(name).join("SKILL.md"),
        &format!("---\nname: {name}\nversion: 1.0.0\ndescription: Uses resources.\n{front}---\n\nRuns.\n"),
    );
    crate::common::write_file(&dir.join(name).join("scripts/main.py"), main);
}

async fn server(dir: &Path) -> TestServer {
    TestServer::builder(options(vec![root(dir, Trust::User)]))
        .settings(RunSettings::default())
        .allowed()
        .start()
        .await
}

/// The envelope of a call that must succeed.
async fn run(server: &TestServer, tool: &str) -> Value {
    let (status, envelope) = server.invoke(tool, json!({})).await;
    assert_eq!(status, 200, "{envelope}");
    assert_eq!(envelope["success"], true, "{envelope}");
    envelope
}

/// Spins for 1.5 s of wall time and prints the CPU seconds it got.
const SPIN: &str = "import json, os, time\nstart, used = time.monotonic(), time.process_time()\n\
while time.monotonic() - start < 1.5:\n    pass\n\
open(os.environ['SANDBOX_OUTPUT'], 'w').write(json.dumps({'cpu': time.process_time() - used}))\n";

/// `resources.cpu` was recorded and shown but not enforced. A skill given
/// a tenth of a core gets about that: 0.15 s of CPU in 1.5 s.
#[tokio::test]
async fn resources_cpu_bounds_the_run() {
    let skills = crate::common::tempdir().unwrap();
    entrypoint(skills.path(), "sipper", "resources:\n  cpu: \"0.1\"\n", SPIN);
    let server = server(skills.path()).await;
    let cpu = server.invoker.sandbox().report(true).cpu;
    if cpu == "unavailable" {
        assert!(std::env::var_os("CI").is_none(), "CI hosts have a CPU controller");
        eprintln!("skipped: no CPU controller here");
        return;
    }
    let ready = server.get_json("/readyz").await;
    assert!(
        ready["sandbox"]["cpu"].as_str().unwrap().starts_with("enforced"),
        "{ready}"
    );
    let dry: Value = Api::anonymous(&server)
        .post_value("/tools/sipper/invoke?dry_run=true", json!({"arguments": {}}))
        .await;
    assert_eq!(dry["sandbox"]["cpu_max"], 0.1, "{dry}");
    let envelope = run(&server, "sipper").await;
    let used = envelope["parsed"]["cpu"].as_f64().unwrap();
    assert!(
        used < 0.3,
        "a tenth of a core used {used} s of CPU in 1.5 s: {envelope}"
    );
}

/// Writes to `/tmp` as seed 003's contract allows: what it can write, how
/// much, whether it can run what it wrote, and what `$TMPDIR` is.
const TMP_USER: &str = r#"import json, os, subprocess
out = {'tmpdir': os.environ.get('TMPDIR')}
mine = 'note-%d.txt' % os.getpid()
open('/tmp/' + mine, 'w').write('mine')
out['wrote'] = open('/tmp/' + mine).read()
# Another run's note would show here; the run's own places (its skill or
# scratch root, when they lie in /tmp) are put back and show too.
out['notes'] = [n == mine for n in os.listdir('/tmp') if n.startswith('note-')]
try:
    with open('/tmp/big', 'wb') as f:
        for _ in range(80):
            f.write(b'x' * (1 << 20))
    out['big'] = 'fit'
except OSError as e:
    out['big'] = e.strerror
os.remove('/tmp/big')
open('/tmp/run.sh', 'w').write('#!/bin/sh\necho ran\n')
os.chmod('/tmp/run.sh', 0o755)
try:
    subprocess.run(['/tmp/run.sh'], check=True)
    out['exec'] = 'ran'
except OSError as e:
    out['exec'] = e.strerror
open(os.environ['SANDBOX_OUTPUT'], 'w').write(json.dumps(out))
"#;

/// Scripts that wrote `/tmp`, as seed 003's contract allows (a 64 MB
/// tmpfs, noexec), got "permission denied". An entrypoint run now gets a
/// `/tmp` of its own: writable, bounded, not executable, unseen by other
/// runs and the host, and `$TMPDIR` is it.
#[tokio::test]
async fn an_entrypoint_gets_a_private_bounded_tmp() {
    let skills = crate::common::tempdir().unwrap();
    entrypoint(skills.path(), "tmp-user", "", TMP_USER);
    let server = std::sync::Arc::new(server(skills.path()).await);
    if server.invoker.sandbox().report(true).mounts != "enforced" {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI hosts have the runs' mount namespace"
        );
        eprintln!("skipped: no mount namespace here");
        return;
    }
    let calls: Vec<_> = (0..2)
        .map(|_| {
            let server = server.clone();
            tokio::spawn(async move { run(&server, "tmp_user").await })
        })
        .collect();
    for call in calls {
        let envelope = call.await.unwrap();
        assert_eq!(
            envelope["parsed"],
            json!({
                "tmpdir": "/tmp",
                "wrote": "mine",
                "notes": [true],
                "big": "No space left on device",
                "exec": "Permission denied",
            }),
            "{envelope}"
        );
    }
    let host: Vec<_> = std::fs::read_dir("/tmp")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("note-"))
        .collect();
    assert!(host.is_empty(), "a run wrote the host's /tmp: {host:?}");
}
