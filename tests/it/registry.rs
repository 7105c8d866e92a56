//! Registries (issue 29): a second skilld as a registry, a static
//! `index.json` served by a real HTTP server (Python's `http.server`),
//! `skilld search`, `install NAME[@VERSION]`, `add`, the cache, and
//! `skills.lock` with `--locked`; tampered archives and lying indexes
//! refused, with nothing installed.

use crate::common::{Static, announced_url, serve_command, tempdir, terminate, zip_of};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn md(version: &str, says: &str) -> String {
    format!(
        "---\nname: hello\nversion: {version}\ndescription: Says {says} to the world.\n\
         read_only: true\n---\n\nSays it.\n\n### hello\n\nSays it.\n\n#### Command\n\n```\necho {says}\n```\n"
    )
}

fn write_zip(dir: &Path, version: &str, says: &str) -> PathBuf {
    let zip = dir.join(format!("hello-{version}.zip"));
    std::fs::write(&zip, zip_of(&[("SKILL.md", &md(version, says), false)])).unwrap();
    zip
}

fn sha256_hex(path: &Path) -> String {
    hex::encode(Sha256::digest(std::fs::read(path).unwrap()))
}

/// `skilld ARGS --data-dir DATA`, HOME there, no bundled skills.
fn skilld(data: &Path, args: &[&str]) -> Output {
    let empty = data.join("no-skills");
    std::fs::create_dir_all(&empty).unwrap();
    crate::common::skilld()
        .args(args)
        .arg("--data-dir")
        .arg(data)
        .env("HOME", data)
        .env("SKILLD_SKILLS", format!("bundled={}", empty.display()))
        .env_remove("SKILLD_DATABASE_URL")
        .env_remove("SKILLD_REGISTRIES")
        .output()
        .unwrap()
}

fn ok(out: &Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn refused(out: &Output, code: i32) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "{err}");
    err
}

/// A static registry of hello 1.0.0 and 1.1.0: the zips and an index
/// with their SHA-256.
fn static_registry(dir: &Path) -> Value {
    let mut versions = Vec::new();
    for (version, says) in [("1.0.0", "hi"), ("1.1.0", "hello")] {
        let zip = write_zip(dir, version, says);
        versions.push(json!({
            "version": version,
            "url": zip.file_name().unwrap().to_str().unwrap(),
            "sha256": sha256_hex(&zip),
        }));
    }
    let index = json!({"format": 1, "skills": [
        {"name": "hello", "description": "Says hello to the world.", "versions": versions},
        {"name": "../evil", "description": "never listed", "versions": versions},
    ]});
    std::fs::write(dir.join("index.json"), index.to_string()).unwrap();
    index
}

fn lock_of(path: &Path) -> toml::Value {
    toml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn a_static_index_is_searched_installed_from_and_locked() {
    let (site, data) = (tempdir().unwrap(), tempdir().unwrap());
    static_registry(site.path());
    let server = Static::start(site.path());
    let registry = format!("{}/index.json", server.url);
    let data = data.path();

    let found = ok(&skilld(
        data,
        &["search", "hello", "world", "--registry", &registry],
    ));
    assert_eq!(
        found,
        format!("hello@1.1.0\tSays hello to the world.\t{registry}\n")
    );
    let err = refused(
        &skilld(data, &["search", "kubernetes", "--registry", &registry]),
        1,
    );
    assert!(err.contains("no skill matches 'kubernetes'"), "{err}");

    let out = ok(&skilld(
        data,
        &["install", "hello@1.0.0", "--registry", &registry],
    ));
    assert!(out.starts_with("hello@1.0.0 ready "), "{out}");
    let out = ok(&skilld(data, &["install", "hello", "--registry", &registry]));
    assert!(
        out.starts_with("hello@1.1.0 ready "),
        "the highest version: {out}"
    );
    let hash = out.trim().rsplit(' ').next().unwrap().to_owned();

    let lock = lock_of(&data.join("skills.lock"));
    let entry = &lock["skill"][0];
    assert_eq!(entry["name"].as_str(), Some("hello"));
    assert_eq!(entry["version"].as_str(), Some("1.1.0"));
    assert_eq!(
        entry["source"].as_str(),
        Some(format!("registry+{registry}").as_str())
    );
    assert_eq!(entry["sha256"].as_str(), Some(hash.as_str()));

    // The lock installs the same again into another data directory.
    let (other, _) = (tempdir().unwrap(), ());
    let lock_file = data.join("skills.lock");
    let out = ok(&skilld(
        other.path(),
        &[
            "install",
            "hello",
            "--locked",
            "--lock",
            lock_file.to_str().unwrap(),
            "--registry",
            &registry,
        ],
    ));
    assert!(out.starts_with("hello@1.1.0 ready "), "{out}");
}

#[test]
fn a_tampered_archive_or_a_lying_index_installs_nothing() {
    let (site, data) = (tempdir().unwrap(), tempdir().unwrap());
    let mut index = static_registry(site.path());
    let server = Static::start(site.path());
    let registry = format!("{}/index.json", server.url);
    let data = data.path();

    // The archive is replaced after the index was written.
    std::fs::write(
        site.path().join("hello-1.0.0.zip"),
        zip_of(&[("SKILL.md", &md("1.0.0", "pwned"), false)]),
    )
    .unwrap();
    let err = refused(
        &skilld(data, &["install", "hello@1.0.0", "--registry", &registry]),
        1,
    );
    assert!(err.contains("is not the archive the registry lists"), "{err}");

    // An index whose skill hash is not the archive's.
    index["skills"][0]["versions"][1]["hash"] = json!("0".repeat(64));
    std::fs::write(site.path().join("index.json"), index.to_string()).unwrap();
    let err = refused(
        &skilld(
            data,
            &["install", "hello@1.1.0", "--registry", &registry, "--refresh"],
        ),
        1,
    );
    assert!(err.contains("hash"), "{err}");

    // A remote index naming a file of this machine.
    index["skills"][0]["versions"][1]["url"] = json!("file:///etc/passwd");
    std::fs::write(site.path().join("index.json"), index.to_string()).unwrap();
    let err = refused(
        &skilld(
            data,
            &["install", "hello@1.1.0", "--registry", &registry, "--refresh"],
        ),
        2,
    );
    assert!(err.contains("only a file:// index may name one"), "{err}");

    let err = refused(&skilld(data, &["install", "evil", "--registry", &registry]), 1);
    assert!(err.contains("no registry has evil"), "{err}");
    assert!(!data.join("installed/hello").exists(), "nothing was installed");
    assert!(!data.join("skills.lock").exists(), "nothing was locked");
}

#[test]
fn the_lock_refuses_what_differs() {
    let (site, data) = (tempdir().unwrap(), tempdir().unwrap());
    static_registry(site.path());
    let server = Static::start(site.path());
    let registry = format!("{}/index.json", server.url);
    let data = data.path();
    ok(&skilld(
        data,
        &["install", "hello@1.0.0", "--registry", &registry],
    ));
    let lock_file = data.join("skills.lock");
    let lock = lock_file.to_str().unwrap();

    // Not in the lock.
    let fresh = tempdir().unwrap();
    let zips = tempdir().unwrap();
    let zip = write_zip(zips.path(), "2.0.0", "other");
    let err = refused(
        &skilld(
            fresh.path(),
            &["install", zip.to_str().unwrap(), "--locked", "--lock", lock],
        ),
        1,
    );
    assert!(err.contains("is not in") && err.contains("--locked"), "{err}");

    // The registry now serves other content for the locked version.
    std::fs::write(
        site.path().join("hello-1.0.0.zip"),
        zip_of(&[("SKILL.md", &md("1.0.0", "changed"), false)]),
    )
    .unwrap();
    let mut index: Value =
        serde_json::from_slice(&std::fs::read(site.path().join("index.json")).unwrap()).unwrap();
    index["skills"][0]["versions"][0]["sha256"] = json!(sha256_hex(&site.path().join("hello-1.0.0.zip")));
    std::fs::write(site.path().join("index.json"), index.to_string()).unwrap();
    let err = refused(
        &skilld(
            fresh.path(),
            &[
                "install",
                "hello",
                "--locked",
                "--lock",
                lock,
                "--registry",
                &registry,
                "--refresh",
            ],
        ),
        1,
    );
    assert!(err.contains("hash"), "{err}");

    // A lock asking for a version the lock does not name.
    let err = refused(
        &skilld(
            fresh.path(),
            &[
                "install",
                "hello@1.1.0",
                "--locked",
                "--lock",
                lock,
                "--registry",
                &registry,
            ],
        ),
        1,
    );
    assert!(err.contains("version is 1.1.0, the lock says 1.0.0"), "{err}");
    assert!(
        !fresh.path().join("installed/hello").exists(),
        "nothing was installed"
    );
}

#[test]
fn the_cache_answers_within_its_ttl_and_when_the_registry_is_gone() {
    let (site, data) = (tempdir().unwrap(), tempdir().unwrap());
    static_registry(site.path());
    let server = Static::start(site.path());
    let registry = format!("{}/index.json", server.url);
    let data = data.path();
    ok(&skilld(data, &["search", "--registry", &registry]));
    drop(server);

    // Within the ttl: from the store, silently.
    let out = skilld(data, &["search", "hello", "--registry", &registry]);
    assert!(ok(&out).starts_with("hello@1.1.0\t"));
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    // Asked afresh: the registry is gone, its last answer is used, said so.
    let out = skilld(data, &["search", "hello", "--registry", &registry, "--refresh"]);
    assert!(ok(&out).starts_with("hello@1.1.0\t"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("its last answer is used"), "{err}");
    // With nothing cached, nothing can be read.
    let fresh = tempdir().unwrap();
    let err = refused(&skilld(fresh.path(), &["search", "--registry", &registry]), 2);
    assert!(
        err.contains("not searched") && err.contains("no registry could be read"),
        "{err}"
    );
    // No registry at all.
    let err = refused(&skilld(fresh.path(), &["search", "x"]), 1);
    assert!(err.contains("no registry is configured"), "{err}");
}

#[test]
fn a_ttl_of_zero_keeps_nothing() {
    let (site, data) = (tempdir().unwrap(), tempdir().unwrap());
    static_registry(site.path());
    let server = Static::start(site.path());
    let config = data.path().join("skilld.toml");
    std::fs::write(
        &config,
        format!(
            "registry_ttl_secs = 0\n[[registries]]\nurl = \"{}\"\n",
            server.url
        ),
    )
    .unwrap();
    let config = config.to_str().unwrap();
    ok(&skilld(data.path(), &["search", "hello", "--config", config]));
    drop(server);
    refused(&skilld(data.path(), &["search", "hello", "--config", config]), 2);
}

#[test]
fn a_file_index_and_add_into_a_project() {
    let (site, data, project) = (tempdir().unwrap(), tempdir().unwrap(), tempdir().unwrap());
    static_registry(site.path());
    let registry = format!("file://{}/index.json", site.path().display());
    let ws = project.path().to_str().unwrap();
    let out = ok(&skilld(
        data.path(),
        &["add", "hello@1.0.0", "--workspace", ws, "--registry", &registry],
    ));
    let skill_dir = project.path().join(".agent/skills/hello");
    assert!(
        out.starts_with(&format!("hello@1.0.0 {} ", skill_dir.display())),
        "{out}"
    );
    assert!(
        std::fs::read_to_string(skill_dir.join("SKILL.md"))
            .unwrap()
            .contains("echo hi")
    );
    let lock = lock_of(&project.path().join("skills.lock"));
    assert_eq!(lock["skill"][0]["version"].as_str(), Some("1.0.0"));

    let err = refused(
        &skilld(
            data.path(),
            &["add", "hello", "--workspace", ws, "--registry", &registry],
        ),
        1,
    );
    assert!(err.contains("exists; pass --force"), "{err}");
    let out = ok(&skilld(
        data.path(),
        &[
            "add",
            "hello",
            "--workspace",
            ws,
            "--registry",
            &registry,
            "--force",
        ],
    ));
    assert!(out.starts_with("hello@1.1.0 "), "{out}");
    assert!(
        std::fs::read_to_string(skill_dir.join("SKILL.md"))
            .unwrap()
            .contains("echo hello")
    );
    assert!(
        !project.path().join(".agent/skills/.staging").exists(),
        "no staging area is left behind"
    );
    // The project's skill loads and lints.
    ok(&crate::common::skilld()
        .arg("check")
        .arg(&skill_dir)
        .output()
        .unwrap());
    let err = refused(&skilld(data.path(), &["add", "../x", "--workspace", ws]), 1);
    assert!(err.contains("is not NAME or NAME@VERSION"), "{err}");
}

#[tokio::test]
async fn a_second_skilld_is_a_registry() {
    let (source, skills, zips, data) = (
        tempdir().unwrap(),
        tempdir().unwrap(),
        tempdir().unwrap(),
        tempdir().unwrap(),
    );
    for (version, says) in [("1.0.0", "hi"), ("1.2.0", "hello")] {
        let zip = write_zip(zips.path(), version, says);
        ok(&skilld(
            source.path(),
            &["install", zip.to_str().unwrap(), "--trust", "user"],
        ));
    }
    let mut child = serve_command(source.path(), skills.path())
        .env("HOME", source.path())
        .spawn()
        .unwrap();
    let url = announced_url(&mut child).unwrap();

    let index = served_index(&url).await;
    let hello = &index["skills"][0];
    assert_eq!(index["format"], 1, "{index}");
    assert_eq!(hello["name"], "hello");
    assert_eq!(hello["versions"][1]["url"], "skills/hello@1.2.0/archive");
    assert!(
        hello["versions"][1]["hash"].as_str().unwrap().len() == 64,
        "{index}"
    );

    let data = data.path();
    let found = ok(&skilld(data, &["search", "--registry", &url]));
    assert!(
        found.starts_with("hello@1.2.0\tSays hello to the world.\t"),
        "{found}"
    );
    let json: Value = serde_json::from_str(&ok(&skilld(
        data,
        &["search", "hello", "--registry", &url, "--format", "json"],
    )))
    .unwrap();
    assert_eq!(json[0]["versions"], json!(["1.0.0", "1.2.0"]), "{json}");
    let out = ok(&skilld(data, &["install", "hello@1.0.0", "--registry", &url]));
    assert!(out.starts_with("hello@1.0.0 ready "), "{out}");
    assert_eq!(
        out.trim().rsplit(' ').next(),
        hello["versions"][0]["hash"].as_str(),
        "the same content as at its source"
    );
    let listed = ok(&skilld(data, &["list"]));
    assert!(
        listed.contains("hello@1.0.0\tinstalled\tuntrusted\tSays hi to the world.\n"),
        "{listed}"
    );
    let available = ok(&skilld(data, &["list", "--available", "--registry", &url]));
    assert!(available.starts_with("hello@1.2.0\t"), "{available}");

    install_into_a_third_skilld(&url);
    terminate(&mut child);
}

#[test]
fn skilld_index_writes_a_static_registry_and_remove_unlocks() {
    let (site, data) = (tempdir().unwrap(), tempdir().unwrap());
    let (one, two) = (
        write_zip(site.path(), "1.0.0", "hi"),
        write_zip(site.path(), "1.1.0", "hello"),
    );
    let signature = "untrusted comment: a signature\nRUQ=\ntrusted comment: x\nAA==\n";
    std::fs::write(site.path().join("hello-1.1.0.zip.minisig"), signature).unwrap();
    let out = ok(&crate::common::skilld()
        .arg("index")
        .arg(site.path())
        .output()
        .unwrap());
    assert!(out.ends_with("index.json: 1 skill(s), 2 version(s)\n"), "{out}");
    let index: Value =
        serde_json::from_slice(&std::fs::read(site.path().join("index.json")).unwrap()).unwrap();
    let versions = &index["skills"][0]["versions"];
    assert_eq!(
        index["skills"][0]["description"], "Says hello to the world.",
        "{index}"
    );
    assert_eq!(versions[0]["url"], "hello-1.0.0.zip");
    assert_eq!(versions[0]["sha256"].as_str(), Some(sha256_hex(&one).as_str()));
    assert_eq!(versions[1]["sha256"].as_str(), Some(sha256_hex(&two).as_str()));
    assert_eq!(versions[1]["signature"], signature);
    assert!(versions[0].get("signature").is_none(), "{index}");

    let server = Static::start(site.path());
    let out = ok(&skilld(
        data.path(),
        &["install", "hello", "--registry", &server.url],
    ));
    assert!(out.starts_with("hello@1.1.0 ready "), "{out}");
    assert_eq!(
        out.trim().rsplit(' ').next(),
        versions[1]["hash"].as_str(),
        "skilld index lists the skill's hash"
    );
    let lock = data.path().join("skills.lock");
    assert!(lock_of(&lock)["skill"].as_array().is_some_and(|a| a.len() == 1));
    assert_eq!(ok(&skilld(data.path(), &["remove", "hello"])), "removed hello\n");
    assert!(lock_of(&lock)["skill"].as_array().is_none_or(Vec::is_empty));

    // Two archives of one version, or one that does not lint, are refused.
    std::fs::copy(&one, site.path().join("copy.zip")).unwrap();
    let out = crate::common::skilld()
        .arg("index")
        .arg(site.path())
        .output()
        .unwrap();
    assert!(refused(&out, 1).contains("hello@1.0.0 is in two archives"));
    std::fs::write(
        site.path().join("copy.zip"),
        zip_of(&[("README.md", "no skill", false)]),
    )
    .unwrap();
    let out = crate::common::skilld()
        .arg("index")
        .arg(site.path())
        .output()
        .unwrap();
    assert!(refused(&out, 1).contains("copy.zip"));
}

/// From the registry at `url` into another skilld, with --to: fetched
/// here, checked, pushed with the hash the index gave.
fn install_into_a_third_skilld(url: &str) {
    let (target, target_skills) = (tempdir().unwrap(), tempdir().unwrap());
    let mut other = serve_command(target.path(), target_skills.path())
        .env("HOME", target.path())
        .spawn()
        .unwrap();
    let other_url = announced_url(&mut other).unwrap();
    let out = ok(&skilld(
        target.path(),
        &[
            "install",
            "hello",
            "--registry",
            url,
            "--to",
            &other_url,
            "--trust",
            "user",
        ],
    ));
    assert!(out.starts_with("hello@1.2.0 ready "), "{out}");
    let listed = ok(&skilld(target.path(), &["list", "--to", &other_url]));
    assert!(listed.contains("hello@1.2.0\tinstalled\tuser\t"), "{listed}");
    let json: Value = serde_json::from_str(&ok(&skilld(
        target.path(),
        &["list", "--to", &other_url, "--format", "json"],
    )))
    .unwrap();
    assert_eq!(json["skills"][0]["name"], "hello", "{json}");
    terminate(&mut other);
}

#[test]
fn install_locked_installs_everything_the_lock_names() {
    let (site, data, dirs) = (tempdir().unwrap(), tempdir().unwrap(), tempdir().unwrap());
    static_registry(site.path());
    let server = Static::start(site.path());
    let registry = format!("{}/index.json", server.url);
    let data = data.path();
    ok(&skilld(
        data,
        &["install", "hello@1.0.0", "--registry", &registry],
    ));
    let other = dirs.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let other_md = "---\nname: other\nversion: 0.1.0\ndescription: Another.\n---\n\nAnother.\n";
    std::fs::write(other.join("SKILL.md"), other_md).unwrap();
    ok(&skilld(data, &["install", other.to_str().unwrap()]));
    let lock_file = data.join("skills.lock");
    let lock = lock_file.to_str().unwrap();

    // Another machine: no registry configured; the lock names it.
    let fresh = tempdir().unwrap();
    let out = ok(&skilld(fresh.path(), &["install", "--locked", "--lock", lock]));
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("hello@1.0.0 ready "), "{out}");
    assert!(lines[1].starts_with("other@0.1.0 ready "), "{out}");
    let again = ok(&skilld(fresh.path(), &["install", "--locked", "--lock", lock]));
    assert!(
        again.contains("hello@1.0.0 up to date") && again.contains("other@0.1.0 up to date"),
        "{again}"
    );

    // The directory changed since it was locked: refused, the rest done.
    std::fs::write(
        other.join("SKILL.md"),
        other_md.replace("Another.\n---", "Changed.\n---"),
    )
    .unwrap();
    let third = tempdir().unwrap();
    let out = skilld(third.path(), &["install", "--locked", "--lock", lock]);
    let err = refused(&out, 1);
    assert!(err.contains("other: ") && err.contains("hash"), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("hello@1.0.0 ready "));
    assert!(!third.path().join("installed/other").exists());
    let err = refused(&skilld(third.path(), &["install"]), 1);
    assert!(err.contains("--locked to install everything"), "{err}");
}

/// `skilld ARGS` in `dir`, as a publisher runs it.
fn publish(dir: &Path, args: &[&str]) -> String {
    ok(&crate::common::skilld()
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap())
}

#[tokio::test]
async fn signed_registries_pass_their_signatures_on_and_required_ones_refuse_the_rest() {
    let (keys, site, data, project) = (
        tempdir().unwrap(),
        tempdir().unwrap(),
        tempdir().unwrap(),
        tempdir().unwrap(),
    );
    let public = signed_site(keys.path(), site.path());
    let public = public.as_str();
    let server = Static::start(site.path());
    let (registry, data) = (server.url.clone(), data.path());
    let trusting = [
        "--registry",
        &registry,
        "--trusted-key",
        public,
        "--require-signatures",
    ];
    let with =
        |first: &[&str]| -> Vec<String> { first.iter().chain(&trusting).map(|s| (*s).to_owned()).collect() };
    let run = |args: Vec<String>| skilld(data, &args.iter().map(String::as_str).collect::<Vec<_>>());

    // The signed version installs, verified; the unsigned one is refused.
    let out = ok(&run(with(&["install", "hello@1.0.0"])));
    assert!(out.starts_with("hello@1.0.0 ready "), "{out}");
    let err = refused(&run(with(&["install", "hello@1.1.0"])), 1);
    assert!(err.contains("signature"), "{err}");
    let ws = project.path().to_str().unwrap();
    let err = refused(&run(with(&["add", "hello@1.1.0", "--workspace", ws])), 1);
    assert!(err.contains("signature"), "{err}");
    assert!(!project.path().join(".agent/skills/hello").exists());
    ok(&run(with(&["add", "hello@1.0.0", "--workspace", ws])));

    serve_the_signature_on(data, public).await;

    // A signature by another key, put in the index, is refused.
    let other = std::fs::read_to_string(keys.path().join("other.pub")).unwrap();
    let other_key = other.lines().nth(1).unwrap();
    let fourth = tempdir().unwrap();
    let args = [
        "install",
        "hello@1.0.0",
        "--registry",
        &registry,
        "--trusted-key",
        other_key,
    ];
    let err = refused(&skilld(fourth.path(), &args), 1);
    assert!(err.contains("not among this server's trusted keys"), "{err}");
}

/// A key pair `pub` (and `other`) in `keys`, and in `site` a static
/// registry of hello 1.0.0, signed by `pub`, and 1.1.0, unsigned: the
/// public key.
fn signed_site(keys: &Path, site: &Path) -> String {
    let public = publish(keys, &["keygen", "--out", "pub"]);
    publish(keys, &["keygen", "--out", "other"]);
    let src = site.join("src/hello");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("SKILL.md"), md("1.0.0", "hi")).unwrap();
    let key = keys.join("pub.key");
    publish(
        site,
        &[
            "package",
            "src/hello",
            "-o",
            "hello-1.0.0.zip",
            "--sign",
            key.to_str().unwrap(),
        ],
    );
    std::fs::write(src.join("SKILL.md"), md("1.1.0", "hello")).unwrap();
    publish(site, &["package", "src/hello", "-o", "hello-1.1.0.zip"]);
    publish(site, &["index", "."]);
    public.trim().to_owned()
}

/// This skilld (`data`), as a registry, serves the signature it verified;
/// a third one requiring it installs from there.
async fn serve_the_signature_on(data: &Path, public: &str) {
    let skills = tempdir().unwrap();
    let mut child = serve_command(data, skills.path())
        .env("HOME", data)
        .spawn()
        .unwrap();
    let url = announced_url(&mut child).unwrap();
    let index = served_index(&url).await;
    let served = &index["skills"][0]["versions"][0];
    assert!(
        served["signature"]
            .as_str()
            .is_some_and(|s| s.contains("untrusted comment")),
        "{index}"
    );
    assert_eq!(served["sha256"].as_str().map(str::len), Some(64), "{index}");
    let third = tempdir().unwrap();
    let args = [
        "install",
        "hello",
        "--registry",
        &url,
        "--trusted-key",
        public,
        "--require-signatures",
    ];
    let out = ok(&skilld(third.path(), &args));
    assert!(out.starts_with("hello@1.0.0 ready "), "{out}");
    terminate(&mut child);
}

/// A skilld's `GET /index.json`.
async fn served_index(url: &str) -> Value {
    reqwest::get(format!("{url}/index.json"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[test]
fn an_archive_not_as_listed_is_refused_and_redirects_are_followed() {
    let (site, data, project) = (tempdir().unwrap(), tempdir().unwrap(), tempdir().unwrap());
    let mut index = static_registry(site.path());
    // 1.1.0 as listed, but the archive (with its true sha256) is 1.0.0.
    index["skills"][0]["versions"][1]["url"] = index["skills"][0]["versions"][0]["url"].clone();
    index["skills"][0]["versions"][1]["sha256"] = index["skills"][0]["versions"][0]["sha256"].clone();
    std::fs::write(site.path().join("index.json"), index.to_string()).unwrap();
    let server = Redirecting::start(site.path());
    // Every address under /old/ answers 302 to the same one without it.
    let registry = format!("{}/old/index.json", server.url);
    let data = data.path();
    let err = refused(
        &skilld(data, &["install", "hello@1.1.0", "--registry", &registry]),
        1,
    );
    assert!(err.contains("holds hello@1.0.0, not hello@1.1.0"), "{err}");
    let ws = project.path().to_str().unwrap();
    let err = refused(
        &skilld(
            data,
            &["add", "hello@1.1.0", "--workspace", ws, "--registry", &registry],
        ),
        1,
    );
    assert!(err.contains("holds hello@1.0.0, not hello@1.1.0"), "{err}");
    assert!(!project.path().join(".agent/skills/hello").exists());
    assert!(
        !project.path().join(".agent/skills/.staging").exists(),
        "no staging left"
    );
    // Followed through the redirects, the listed version installs.
    let out = ok(&skilld(
        data,
        &["install", "hello@1.0.0", "--registry", &registry],
    ));
    assert!(out.starts_with("hello@1.0.0 ready "), "{out}");
}

/// A real HTTP server over `dir` that answers every `/old/PATH` with a
/// 302 to `/PATH`, as static hosts redirect release assets.
struct Redirecting;

impl Redirecting {
    fn start(dir: &Path) -> Static {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let script = r#"
import http.server, sys
class H(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):
        if self.path.startswith('/old/'):
            self.send_response(302)
            self.send_header('Location', self.path[4:])
            self.end_headers()
            return
        super().do_GET()
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()
"#;
        let child = Command::new("python3")
            .args(["-c", script, &port.to_string()])
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Static::waiting(child, port)
    }
}
