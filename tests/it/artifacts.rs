//! Artifacts any instance can serve (issue 25, point 7). Seed 003's
//! entrypoint writes a report to `SANDBOX_FILES_DIR`; the envelope lists it
//! with a link that works without a token until it expires. With an S3
//! bucket (a real one: `s3s-fs`, which `.ci/run` installs) every instance
//! on one PostgreSQL serves every run's files; on local disks, an instance
//! without them says which one has them.

use crate::common::{TestServer, on_postgres, options, root, tempdir, test_store};
use serde_json::{Value, json};
use skilld::artifacts::{ArtifactStore, S3Settings, S3Store};
use skilld::auth::{Auth, Role, Token};
use skilld::invoke::RunSettings;
use skilld::skill::Trust;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const AGENT: &str = "agent-secret-artifacts-0123";
const READER: &str = "reader-secret-artifacts-0123";
const ACCESS_KEY: &str = "skilld-test-access";
const SECRET_KEY: &str = "skilld-test-secret-5b7e0c";
const BUCKET: &str = "artifacts";

/// What seed 003's example writes: a report (its `pdf_bytes`, here made
/// from the input's title) and, beside it, a table in a directory.
fn report_skill(dir: &Path) {
    crate::common::write_file(
        &dir.join("report/SKILL.md"),
        "---\nname: report\nversion: 1.0.0\ndescription: Writes a report.\nlang: python\nread_only: true\n---\n\n\
         # Report\n\nWrites report.pdf.\n",
    );
    crate::common::write_file(
        &dir.join("report/scripts/main.py"),
        r#"import json, os

input_data = json.loads(os.environ.get("SANDBOX_INPUT", "{}"))

output_path = os.environ.get("SANDBOX_OUTPUT", "/sandbox/out/output.json")
os.makedirs(os.path.dirname(output_path), exist_ok=True)
with open(output_path, "w") as f:
    json.dump({"result": "success", "title": input_data.get("title")}, f)

files_dir = os.environ.get("SANDBOX_FILES_DIR", "/sandbox/out/files/")
os.makedirs(files_dir, exist_ok=True)

pdf_bytes = ("%PDF-1.4\n% " + input_data.get("title", "") + "\n").encode()
with open(os.path.join(files_dir, "report.pdf"), "wb") as f:
    f.write(pdf_bytes)
os.makedirs(os.path.join(files_dir, "data"), exist_ok=True)
with open(os.path.join(files_dir, "data", "rows one.csv"), "w") as f:
    f.write("a,b\n1,2\n")
"#,
    );
}

/// What [`report_skill`] writes for `title`, by path.
fn report_files(title: &str) -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("data/rows one.csv", b"a,b\n1,2\n".to_vec()),
        ("report.pdf", format!("%PDF-1.4\n% {title}\n").into_bytes()),
    ]
}

/// A client that follows no redirect, so a 307 can be looked at.
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// `GET url` with `token` (none: anonymous): status, headers, body.
async fn get(url: &str, token: Option<&str>) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
    let mut req = client().get(url);
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    let res = req.send().await.unwrap();
    let (status, headers) = (res.status().as_u16(), res.headers().clone());
    (status, headers, res.bytes().await.unwrap().to_vec())
}

/// A problem's `code`, from a body.
fn code(body: &[u8]) -> String {
    let problem: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    problem["code"].as_str().unwrap_or_default().to_owned()
}

/// Calls `report` on `base` as the agent: the envelope, after checking
/// that the run succeeded and lists the report and the table.
async fn run_report(base: &str, title: &str) -> Value {
    let res = client()
        .post(format!("{base}/tools/report/invoke"))
        .bearer_auth(AGENT)
        .json(&json!({"arguments": {"title": title}}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let env: Value = res.json().await.unwrap();
    assert_eq!(env["success"], true, "{env}");
    assert_eq!(
        env["parsed"],
        json!({"result": "success", "title": title}),
        "{env}"
    );
    let listed: Vec<(&str, u64)> = env["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["path"].as_str().unwrap(), f["size"].as_u64().unwrap()))
        .collect();
    let want: Vec<(&str, u64)> = report_files(title)
        .iter()
        .map(|(p, b)| (*p, b.len() as u64))
        .collect();
    assert_eq!(listed, want, "{env}");
    for file in env["files"].as_array().unwrap() {
        assert!(file["expires_at"].is_string(), "{file}");
    }
    env
}

/// `files[i].url` of an envelope, made absolute against `base` when it
/// is a link to the server.
fn link(env: &Value, i: usize, base: &str) -> String {
    let url = env["files"][i]["url"].as_str().unwrap();
    if url.starts_with('/') {
        format!("{base}{url}")
    } else {
        url.to_owned()
    }
}

// ---- a real S3 server ---------------------------------------------------------------

/// `s3s-fs`, a real S3 server over a directory: `.ci/run` installs it
/// under `target/tools` (or set `SKILLD_S3S_FS`). `None` after a loud
/// notice when it is missing outside CI; a failure under CI.
fn s3s_fs() -> Option<PathBuf> {
    let candidates = [
        std::env::var_os("SKILLD_S3S_FS").map(PathBuf::from),
        Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("target/tools/bin/s3s-fs")),
    ];
    if let Some(found) = candidates.into_iter().flatten().find(|p| p.is_file()) {
        return Some(found);
    }
    let message = "the S3 tests need s3s-fs: cargo install --locked s3s-fs --version 0.14.1 \
                   --features binary --root target/tools (.ci/run does)";
    if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
        panic!("{message}");
    }
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "\n!!!!!!!!!! SKIPPED: {message} !!!!!!!!!!\n");
    None
}

/// `s3s-fs` on a free port with one bucket, [`BUCKET`], its objects as
/// files under `root`; stopped when dropped.
struct S3Server {
    child: Child,
    endpoint: String,
    root: tempfile::TempDir,
}

impl S3Server {
    fn start() -> Option<Self> {
        let program = s3s_fs()?;
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join(BUCKET)).unwrap();
        let mut child = Command::new(program)
            .args(["--host", "127.0.0.1", "--port", "0"])
            .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
            .arg(root.path())
            .env("RUST_LOG", "s3s_fs=info")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // It says where it listens: "… server is running at http://ADDR".
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let endpoint = lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|line| {
                line.split_once("running at ")
                    .map(|(_, url)| url.trim().to_owned())
            })
            .expect("s3s-fs did not say where it listens");
        // Keep reading, so that it never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Some(Self {
            child,
            endpoint,
            root,
        })
    }

    fn settings(&self) -> S3Settings {
        S3Settings {
            bucket: BUCKET.to_owned(),
            endpoint: Some(self.endpoint.clone()),
            region: None,
            prefix: String::new(),
            credentials: Some(skilld::artifacts::Credentials {
                access_key_id: ACCESS_KEY.to_owned(),
                secret_access_key: SECRET_KEY.to_owned(),
                session_token: None,
                source: "test".to_owned(),
            }),
        }
    }

    fn store(&self) -> ArtifactStore {
        ArtifactStore::S3(Arc::new(S3Store::new(self.settings()).unwrap()))
    }

    /// The bucket's objects, as the files `s3s-fs` keeps them in, with
    /// their bytes, by key.
    fn objects(&self) -> Vec<(String, Vec<u8>)> {
        let bucket = self.root.path().join(BUCKET);
        let mut found = Vec::new();
        let mut dirs = vec![bucket.clone()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(dir).unwrap() {
                let entry = entry.unwrap();
                let kind = entry.file_type().unwrap();
                if kind.is_dir() {
                    dirs.push(entry.path());
                } else if kind.is_file() && !entry.file_name().to_string_lossy().starts_with('.') {
                    let key = entry.path().strip_prefix(&bucket).unwrap().display().to_string();
                    found.push((key, std::fs::read(entry.path()).unwrap()));
                }
            }
        }
        found.sort();
        found
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        crate::common::kill(&mut self.child);
    }
}

// ---- real `skilld serve` instances ---------------------------------------------------

/// A `skilld serve` process with the agent's token, sharing `database`,
/// its artifacts in `bucket` when given, with its secret key.
struct Instance {
    child: Child,
    url: String,
    data: tempfile::TempDir,
    stderr: PathBuf,
}

impl Instance {
    fn start(name: &str, database: &str, skills: &Path, bucket: Option<(&S3Server, &str)>) -> Self {
        let data = tempdir().unwrap();
        let stderr = data.path().with_extension("stderr");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_skilld"));
        cmd.args(["serve", "--bind", "127.0.0.1:0", "--no-watch", "--instance", name])
            .args(["--database", database])
            .arg("--data-dir")
            .arg(data.path())
            .arg("--skills")
            .arg(format!("bundled={}", skills.display()))
            .env(
                "SKILLD_TOKENS",
                format!("agent:invoke:{AGENT},reader:read:{READER}"),
            )
            .env("SKILLD_LOG", "debug")
            .env_remove("SKILLD_DATABASE_URL")
            .env_remove("SKILLD_CONFIG")
            .env_remove("AWS_ACCESS_KEY_ID")
            .env_remove("AWS_SECRET_ACCESS_KEY")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap());
        if let Some((s3, secret)) = bucket {
            cmd.args(["--artifact-bucket", BUCKET, "--artifact-endpoint", &s3.endpoint])
                .env("AWS_ACCESS_KEY_ID", ACCESS_KEY)
                .env("AWS_SECRET_ACCESS_KEY", secret);
        }
        let mut child = cmd.spawn().unwrap();
        let url = crate::common::announced_url(&mut child).unwrap_or_else(|first| {
            let log = std::fs::read_to_string(&stderr).unwrap_or_default();
            panic!("{name} did not start: {first:?}\n{log}")
        });
        Self {
            child,
            url,
            data,
            stderr,
        }
    }

    /// Its scratch root: beside its data directory, by default.
    fn scratch(&self) -> PathBuf {
        let mut name = self.data.path().file_name().unwrap().to_os_string();
        name.push("-runs");
        self.data.path().with_file_name(name)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        crate::common::terminate(&mut self.child);
        let _ = std::fs::remove_file(&self.stderr);
    }
}

/// Behind a load balancer, a run's files are asked for on any instance:
/// with a bucket, both instances hand out every run's files (a 307 to a
/// presigned URL), and the envelope's links work without a token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_bucket_every_instance_serves_every_runs_files() {
    let Some(s3) = S3Server::start() else { return };
    on_postgres(|url| async move {
        let skills = tempdir().unwrap();
        report_skill(skills.path());
        let a = Instance::start("artifacts-a", &url, skills.path(), Some((&s3, SECRET_KEY)));
        let b = Instance::start("artifacts-b", &url, skills.path(), Some((&s3, SECRET_KEY)));

        let env = run_report(&a.url, "Q3 in S3").await;
        let id = env["run_id"].as_str().unwrap();
        let want = report_files("Q3 in S3");
        // The seed's presigned URLs: straight to the bucket, no token.
        for (i, (path, bytes)) in want.iter().enumerate() {
            let presigned = link(&env, i, &a.url);
            assert!(
                presigned.starts_with(&format!("{}/{BUCKET}/runs/{id}/", s3.endpoint))
                    && presigned.contains("X-Amz-Signature="),
                "{presigned}"
            );
            let (status, _, body) = get(&presigned, None).await;
            assert_eq!((status, &body), (200, bytes), "{path}");
        }
        // The bucket holds them; nothing of the run stays on A's disk.
        let keys: Vec<String> = s3.objects().into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            keys,
            [
                format!("runs/{id}/data/rows one.csv"),
                format!("runs/{id}/report.pdf")
            ]
        );
        assert!(!a.scratch().join(id).exists(), "the run's directory stayed");

        // Each instance: the route answers a token holder with a fresh
        // presigned URL, which gives the file.
        for instance in [&a, &b] {
            for (path, bytes) in &want {
                let route = format!("{}/runs/{id}/files/{}", instance.url, path.replace(' ', "%20"));
                let (status, headers, body) = get(&route, Some(AGENT)).await;
                assert_eq!(
                    status,
                    307,
                    "{}: {}",
                    instance.url,
                    String::from_utf8_lossy(&body)
                );
                let location = headers["location"].to_str().unwrap();
                assert!(location.starts_with(&s3.endpoint), "{location}");
                let (status, _, body) = get(location, None).await;
                assert_eq!((status, &body), (200, bytes), "{path} via {}", instance.url);
                // Without a token or a link: nothing.
                let (status, _, _) = get(&route, None).await;
                assert_eq!(status, 401);
            }
        }
        // B reads the run as A recorded it, links included.
        let (status, _, body) = get(&format!("{}/runs/{id}", b.url), Some(AGENT)).await;
        let run: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!((status, &run["result"]["files"]), (200, &env["files"]));
        // A presigned URL someone altered is the bucket's to refuse.
        let altered = link(&env, 1, &a.url).replace("report.pdf", "data/rows%20one.csv");
        assert_eq!(get(&altered, None).await.0, 403, "{altered}");
        // The bucket's keys never reach the log, even at debug level, nor
        // stay in the environment a process of the host could read.
        for instance in [&a, &b] {
            let log = instance.log();
            assert!(log.contains("artifacts go to the bucket"), "{log}");
            assert!(log.contains("S3Settings"), "the configuration was not logged");
            assert!(!log.contains(SECRET_KEY), "the secret key was logged");
            let environ = std::fs::read(format!("/proc/{}/environ", instance.child.id())).unwrap();
            let environ = String::from_utf8_lossy(&environ);
            assert!(
                !environ.contains(SECRET_KEY),
                "the secret key stayed in the environment"
            );
        }
    })
    .await;
}

/// Without a bucket the files stay on the disk of the instance that ran
/// the run: that one serves them, and the other says where they are
/// (404 `artifact_elsewhere`) rather than a bare 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_local_disks_the_other_instance_says_where_the_files_are() {
    on_postgres(|url| async move {
        let skills = tempdir().unwrap();
        report_skill(skills.path());
        let a = Instance::start("disk-a", &url, skills.path(), None);
        let b = Instance::start("disk-b", &url, skills.path(), None);
        let env = run_report(&a.url, "Q3 on disk").await;
        let id = env["run_id"].as_str().unwrap();
        let (_, report) = &report_files("Q3 on disk")[1];
        let signed = env["files"][1]["url"].as_str().unwrap();
        assert!(signed.starts_with(&format!("/runs/{id}/files/report.pdf?expires=")));

        // On A: the link works without a token, and so does the token.
        let (status, headers, body) = get(&format!("{}{signed}", a.url), None).await;
        assert_eq!((status, &body), (200, report));
        assert_eq!(
            headers["content-disposition"],
            "attachment; filename=\"report.pdf\""
        );
        let route = format!("/runs/{id}/files/report.pdf");
        assert_eq!(get(&format!("{}{route}", a.url), Some(AGENT)).await.2, *report);

        // On B: neither finds them there, and both say so.
        for (url, token) in [
            (format!("{}{signed}", b.url), None),
            (format!("{}{route}", b.url), Some(AGENT)),
        ] {
            let (status, _, body) = get(&url, token).await;
            assert_eq!(
                (status, code(&body).as_str()),
                (404, "artifact_elsewhere"),
                "{url}"
            );
            let detail = serde_json::from_slice::<Value>(&body).unwrap()["detail"].clone();
            assert!(detail.as_str().unwrap().contains("'disk-a'"), "{detail}");
        }
    })
    .await;
}

/// A server with tokens whose artifacts are kept for `ttl`, in `store`.
async fn server_with_tokens(skills: &Path, ttl: Duration, store: ArtifactStore) -> TestServer {
    let auth = Auth::new(vec![
        Token::with_secret("agent", Role::Invoke, AGENT, "test").unwrap(),
        Token::with_secret("reader", Role::Read, READER, "test").unwrap(),
    ])
    .unwrap();
    let data = tempdir().unwrap();
    let db = test_store(data.path()).await;
    let settings = RunSettings {
        artifact_ttl: ttl,
        artifacts: store,
        ..RunSettings::default()
    };
    TestServer::builder(options(vec![root(skills, Trust::Bundled)]))
        .settings(settings)
        .store(db, data)
        .auth(auth)
        .start()
        .await
}

/// A link opens its one file to anyone who holds it, until it expires:
/// altered, it opens nothing (403 `bad_signature`); late, 403
/// `link_expired`; and once the artifacts are gone, a token holder is told
/// so (404 `artifact_expired`).
#[tokio::test]
async fn signed_links_open_one_file_without_a_token_until_they_expire() {
    let skills = tempdir().unwrap();
    report_skill(skills.path());
    let ttl = Duration::from_secs(4);
    let server = server_with_tokens(skills.path(), ttl, ArtifactStore::Local).await;
    let base = server.url("");
    let env = run_report(&base, "Q4").await;
    let id = env["run_id"].as_str().unwrap();
    let files = report_files("Q4");
    let (table, report) = (link(&env, 0, &base), link(&env, 1, &base));
    assert_eq!(get(&report, None).await.2, files[1].1);
    assert_eq!(get(&table, None).await.2, files[0].1);

    let (path, query) = report.split_once('?').unwrap();
    let signature = query.split_once("signature=").unwrap().1;
    let flipped = format!(
        "{}{}",
        &signature[..63],
        if signature.ends_with('0') { '1' } else { '0' }
    );
    let later = query
        .split('&')
        .find_map(|p| p.strip_prefix("expires="))
        .unwrap()
        .parse::<i64>()
        .unwrap()
        + 3600;
    let forged = [
        // Another signature.
        format!("{path}?{}", query.replace(signature, &flipped)),
        // This signature on another file of the run.
        format!("{}?{query}", table.split_once('?').unwrap().0),
        // A later time under the same signature.
        format!("{path}?expires={later}&signature={signature}"),
        // Half a link.
        format!("{path}?signature={signature}"),
        format!("{path}?expires={later}"),
    ];
    for url in &forged {
        let (status, _, body) = get(url, None).await;
        assert_eq!((status, code(&body).as_str()), (403, "bad_signature"), "{url}");
        assert!(!body.starts_with(b"%PDF"));
    }
    // The route itself still wants a token that may invoke.
    let route = format!("{base}/runs/{id}/files/report.pdf");
    assert_eq!(get(&route, None).await.0, 401);
    assert_eq!(get(&route, Some(READER)).await.0, 403);
    assert_eq!(get(&route, Some(AGENT)).await.2, files[1].1);

    tokio::time::sleep(ttl + Duration::from_secs(1)).await;
    let (status, _, body) = get(&report, None).await;
    assert_eq!((status, code(&body).as_str()), (403, "link_expired"));
    let (status, _, body) = get(&route, Some(AGENT)).await;
    assert_eq!((status, code(&body).as_str()), (404, "artifact_expired"));
}

/// The hostile entrypoint of issue 24, with a bucket: links, a FIFO, a
/// hard-linked file and one over 64 MiB among its artifacts. Only its own
/// regular files are uploaded and listed, and the FIFO blocks nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_tools_own_files_reach_the_bucket() {
    let Some(s3) = S3Server::start() else { return };
    let skills = tempdir().unwrap();
    crate::common::write_file(
        &skills.path().join("hostile/SKILL.md"),
        "---\nname: hostile\nversion: 1.0.0\ndescription: Plants things.\nread_only: true\n---\n\nRuns.\n",
    );
    crate::common::write_file(
        &skills.path().join("hostile/scripts/main.sh"),
        "cd \"$SANDBOX_FILES_DIR\"; ln -s /etc/passwd passwd; ln -s / root; mkfifo pipe; \
         echo mine > own.txt; ln own.txt twin.txt; head -c 67108865 /dev/zero > big.bin; \
         mkdir -p deep && echo real > deep/real.txt; echo planted\n",
    );
    let server = server_with_tokens(skills.path(), Duration::from_secs(3600), s3.store()).await;
    let started = Instant::now();
    let res = client()
        .post(server.url("/tools/hostile/invoke"))
        .bearer_auth(AGENT)
        .json(&json!({"arguments": {}}))
        .send()
        .await
        .unwrap();
    let env: Value = res.json().await.unwrap();
    assert_eq!(env["output"], "planted\n", "{env}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    let id = env["run_id"].as_str().unwrap();
    let listed: Vec<&str> = env["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ["deep/real.txt"], "{env}");
    assert_eq!(
        s3.objects(),
        [(format!("runs/{id}/deep/real.txt"), b"real\n".to_vec())]
    );
    assert_eq!(get(&link(&env, 0, ""), None).await.2, b"real\n");
    for rel in ["passwd", "root/etc/passwd", "pipe", "own.txt", "big.bin"] {
        let route = server.url(&format!("/runs/{id}/files/{rel}"));
        assert_eq!(get(&route, Some(AGENT)).await.0, 404, "{rel}");
    }
}

/// The bucket's artifacts go once `artifact_ttl_secs` has passed, as
/// those on disk do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_buckets_artifacts_expire() {
    let Some(s3) = S3Server::start() else { return };
    let skills = tempdir().unwrap();
    report_skill(skills.path());
    let server = server_with_tokens(skills.path(), Duration::from_secs(2), s3.store()).await;
    let env = run_report(&server.url(""), "brief").await;
    let id = env["run_id"].as_str().unwrap();
    assert_eq!(s3.objects().len(), 2);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !s3.objects().is_empty() {
        assert!(Instant::now() < deadline, "the bucket kept {:?}", s3.objects());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let route = server.url(&format!("/runs/{id}/files/report.pdf"));
    let (status, _, body) = get(&route, Some(AGENT)).await;
    assert_eq!((status, code(&body).as_str()), (404, "artifact_expired"));
    assert_ne!(get(&link(&env, 1, ""), None).await.0, 200);
}

/// A bucket that refuses the server's keys: the log says so at start,
/// runs still end, and their files are left out rather than listed with
/// links that cannot work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bucket_that_refuses_the_keys_is_said_so_and_runs_still_end() {
    let Some(s3) = S3Server::start() else { return };
    let skills = tempdir().unwrap();
    report_skill(skills.path());
    let db = tempdir().unwrap();
    let database = format!("sqlite://{}", db.path().join("skilld.db").display());
    let a = Instance::start(
        "wrong-keys",
        &database,
        skills.path(),
        Some((&s3, "not-the-secret")),
    );
    let res = client()
        .post(format!("{}/tools/report/invoke", a.url))
        .bearer_auth(AGENT)
        .json(&json!({"arguments": {"title": "lost"}}))
        .send()
        .await
        .unwrap();
    let env: Value = res.json().await.unwrap();
    assert_eq!(
        (env["success"].clone(), env["files"].clone()),
        (json!(true), json!([])),
        "{env}"
    );
    assert!(s3.objects().is_empty());
    let log = a.log();
    assert!(log.contains("the artifact bucket cannot be used"), "{log}");
    assert!(log.contains("an artifact was not uploaded"), "{log}");
    assert!(!log.contains("not-the-secret"), "{log}");
}
