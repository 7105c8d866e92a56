//! Skill archives: zips made in memory, uploaded to a server that takes
//! them, and where installed skills land.

use super::{TestServer, greet_skill, options, root, tempdir};
use serde_json::Value;
use skilld::catalog::{CatalogOptions, Root};
use skilld::skill::Trust;
use std::io::Write;
use std::path::Path;

/// A root laid out for versions, as `<data dir>/installed` is.
pub fn installed_root(path: &Path) -> Root {
    Root {
        name: "installed".to_owned(),
        path: path.to_path_buf(),
        trust: Trust::Untrusted,
        explicit: false,
        installed: true,
    }
}

/// A user root with `greet`, and an empty installed root.
pub fn install_options(user: &Path, installed: &Path) -> CatalogOptions {
    greet_skill(user);
    options(vec![root(user, Trust::User), installed_root(installed)])
}

/// What the generated clients' install scenarios run against: a server
/// with an `admin` and a `reader` token, an installed root, and two
/// versions of `hello` written as zip files into `dir`.
pub struct ClientInstalls {
    pub server: TestServer,
    pub installed: tempfile::TempDir,
    pub _user: tempfile::TempDir,
    pub v1: std::path::PathBuf,
    pub v2: std::path::PathBuf,
}

impl ClientInstalls {
    pub async fn start(dir: &Path, admin: &str, reader: &str) -> Self {
        use skilld::auth::{Auth, Role, Token};
        let (v1, v2) = (dir.join("hello-1.zip"), dir.join("hello-2.zip"));
        std::fs::write(&v1, hello("1.0.0", "one")).unwrap();
        std::fs::write(&v2, hello("2.0.0", "two")).unwrap();
        let (user, installed) = (tempdir().unwrap(), tempdir().unwrap());
        let auth = Auth::new(vec![
            Token::with_secret("admin", Role::Admin, admin, "test").unwrap(),
            Token::with_secret("reader", Role::Read, reader, "test").unwrap(),
        ])
        .unwrap();
        let server = TestServer::builder(install_options(user.path(), installed.path()))
            .auth(auth)
            .start()
            .await;
        Self {
            server,
            installed,
            _user: user,
            v1,
            v2,
        }
    }

    /// Nothing is left of the removed skill, nor in staging.
    pub fn assert_removed(&self) {
        assert!(
            !self.installed.path().join("hello").exists(),
            "nothing is left of the removed skill"
        );
        assert_only_staging(self.installed.path());
    }
}

/// A zip of `files` (path, text, executable), as `zip -r` would make it.
pub fn zip_of(files: &[(&str, &str, bool)]) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    {
        let mut w = zip::ZipWriter::new(&mut out);
        for (path, text, exec) in files {
            let opts =
                zip::write::SimpleFileOptions::default().unix_permissions(if *exec { 0o755 } else { 0o644 });
            w.start_file(*path, opts).unwrap();
            w.write_all(text.as_bytes()).unwrap();
        }
        w.finish().unwrap();
    }
    out.into_inner()
}

/// `hello` at `version`: one read-only tool printing `said`.
pub fn hello(version: &str, said: &str) -> Vec<u8> {
    let md = format!(
        "---\nname: hello\nversion: {version}\ndescription: Says something.\nread_only: true\n---\n\n\
         Says it.\n\n### hello\n\nSays it.\n\n#### Command\n\n```\necho {said}\n```\n"
    );
    zip_of(&[("SKILL.md", &md, false)])
}

/// `POST` of a body to `path` with these `Content-Type` and `Accept`.
pub async fn post_skills(
    server: &TestServer,
    path: &str,
    content_type: &str,
    accept: &str,
    body: Vec<u8>,
) -> reqwest::Response {
    super::Api::of(server)
        .req(reqwest::Method::POST, path)
        .header("content-type", content_type)
        .header("accept", accept)
        .body(body)
        .send()
        .await
        .unwrap()
}

pub async fn upload(
    server: &TestServer,
    zip: Vec<u8>,
    query: &str,
) -> (u16, reqwest::header::HeaderMap, Value) {
    let res = post_skills(
        server,
        &format!("/skills{query}"),
        "application/zip",
        "application/json",
        zip,
    )
    .await;
    let (status, headers) = (res.status().as_u16(), res.headers().clone());
    (status, headers, res.json().await.unwrap_or(Value::Null))
}

pub async fn send(
    server: &TestServer,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = super::Api::of(server).req(method, path);
    if let Some(body) = body {
        req = req.json(&body);
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

/// Nothing but the (empty) staging area is left in the installed root.
pub fn assert_only_staging(installed: &Path) {
    for entry in std::fs::read_dir(installed).unwrap() {
        let entry = entry.unwrap();
        assert_eq!(entry.file_name(), ".staging", "left behind: {:?}", entry.path());
        assert_eq!(
            std::fs::read_dir(entry.path()).unwrap().count(),
            0,
            "staging is not empty"
        );
    }
}
