//! Install benchmark: the three goals of installing skills from archives.
//!
//! 1. `POST /skills` of a ~1 MiB archive without dependencies answers in
//!    100 ms or less. Timed per upload, end to end, against what no
//!    installer can avoid, measured in the same run and interleaved: the
//!    archive written to a file and unpacked with the `zip` crate (and,
//!    beside it, the same 1 MiB body POSTed to a route that reads it and
//!    refuses it, which is the HTTP transfer alone). A breakdown of an
//!    install through public APIs says where the time goes.
//! 2. `GET /skills/{skill}/archive` of a skill holding a 50 MiB file keeps
//!    this process's resident memory within 2 MiB of what it was just
//!    before. The server is in-process, so a thread samples VmRSS; the
//!    client is a bare socket reading into one 16 KiB buffer and hashing
//!    what it reads, keeping none of it, so it adds nothing to the figure.
//!    The same download of a tiny skill is the baseline.
//! 3. `GET /skills/{skill}/versions` with 1,000 installed versions answers
//!    in 20 ms or less, against `GET /healthz`. A few versions are
//!    installed over HTTP; the rest are written into the installed root's
//!    layout directly (`catalog::installed`), as installing 1,000 over HTTP
//!    would only measure goal 1 again.
//!
//! Run with `cargo bench --bench install`. Nothing here asserts on time;
//! it asserts every install answered 201, every version is listed, and
//! the downloaded bytes are the archive's, so the figures cannot silently
//! describe errors.

#![expect(
    clippy::expect_used,
    reason = "a benchmark that cannot measure should stop and say why"
)]

use chrono::Utc;
use sha2::{Digest, Sha256};
use skilld::AppState;
use skilld::catalog::installed::{self, SkillState, VersionState, VersionStatus};
use skilld::catalog::{CatalogHandle, CatalogOptions, Root};
use skilld::http::install::VersionList;
use skilld::install::review::Finding;
use skilld::install::unpack::{UnpackLimits, unpack};
use skilld::install::{InstallSettings, Installer};
use skilld::skill::{LoadOptions, PathCache, Runtimes, Trust, load_skill};
use std::fmt::Write as _;
use std::io::{Seek, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
#[path = "support/rss.rs"]
mod rss;

use rss::{RssSampler, SAMPLE_EVERY, vm_rss_kib};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Goal 1: timed uploads of the 1 MiB skill, after `INSTALL_WARMUP`.
const INSTALLS: usize = 30;
const INSTALL_WARMUP: usize = 2;
/// Runs of each phase of the install breakdown.
const PHASE_RUNS: usize = 10;
/// The 1 MiB skill of data: random bytes stored as they are, and random
/// base64-like text that deflates to about three quarters.
const DATA_BIN: usize = 512 * 1024;
const TEXT_FILES: usize = 4;
const TEXT_FILE: usize = 160 * 1024;
/// The second 1 MiB skill: markdown documents of this size.
const PROSE_FILE: usize = 192 * 1024;
/// Under `POST /skills/match`'s 1 MiB limit, so that it reads the body.
const ARCHIVE_TARGET: usize = 1024 * 1024 - 16 * 1024;
/// Timed uploads of the prose skill.
const PROSE_INSTALLS: usize = 10;

/// Goal 2: the file inside the large skill.
const BIG_FILE: u64 = 50 * 1024 * 1024;
const CLIENT_BUFFER: usize = 16 * 1024;

/// Goal 3.
const LISTED_VERSIONS: usize = 1_000;
const HTTP_VERSIONS: usize = 5;
const LIST_WARMUP: usize = 20;
const LIST_REQUESTS: usize = 200;

const GOAL_INSTALL: Duration = Duration::from_millis(100);
const GOAL_RSS_KIB: u64 = 2 * 1024;
const GOAL_LIST: Duration = Duration::from_millis(20);

// ------------------------------------------------------------------ helpers

fn sorted(mut v: Vec<Duration>) -> Vec<Duration> {
    v.sort();
    v
}

fn median(sorted: &[Duration]) -> Duration {
    sorted[sorted.len() / 2]
}

fn p99(sorted: &[Duration]) -> Duration {
    sorted[(sorted.len() * 99 / 100).min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64().max(1e-9)
}

fn mib_of_bytes(bytes: u64) -> String {
    format!("{:.2} MiB", bytes as f64 / (1024.0 * 1024.0))
}

fn mib(kib: u64) -> String {
    format!("{:.2} MiB", kib as f64 / 1024.0)
}

fn signed_mib(kib: i64) -> String {
    format!("{:+.2} MiB", kib as f64 / 1024.0)
}

/// SplitMix64: enough randomness that deflate cannot shrink it, without a
/// dependency.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let n = self.next().to_le_bytes();
            chunk.copy_from_slice(&n[..chunk.len()]);
        }
    }

    /// An index below `n`, rank r drawn with weight about 1/r (Zipf's law,
    /// as words are in text).
    fn zipf(&mut self, n: usize) -> usize {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        ((n as f64).powf(u) as usize).saturating_sub(1).min(n - 1)
    }

    /// Lines of 76 characters from a 64-letter alphabet.
    fn text(&mut self, len: usize) -> String {
        const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = String::with_capacity(len);
        while out.len() < len {
            if out.len() % 77 == 76 {
                out.push('\n');
            } else {
                out.push(char::from(ALPHABET[(self.next() & 63) as usize]));
            }
        }
        out
    }
}

fn skill_md(name: &str, version: &str, what: &str) -> String {
    let fence = "```";
    format!(
        "---
name: {name}
version: {version}
description: {what}
read_only: true
---

Reference material lives in references/.

### {tool}_hello

Says hello.

#### Parameters

None.

#### Command

{fence}bash
echo hello
{fence}
",
        tool = name.replace('-', "_")
    )
}

/// A zip of `(path, bytes, deflate)`, as `zip -r` makes it: random data
/// stored, text deflated.
fn zip_of(files: &[(&str, &[u8], bool)]) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    {
        let mut w = zip::ZipWriter::new(&mut out);
        for (path, bytes, deflate) in files {
            let method = if *deflate {
                zip::CompressionMethod::Deflated
            } else {
                zip::CompressionMethod::Stored
            };
            let opts = zip::write::SimpleFileOptions::default()
                .compression_method(method)
                .unix_permissions(0o644);
            w.start_file(*path, opts).expect("zip entry");
            w.write_all(bytes).expect("zip write");
        }
        w.finish().expect("zip finish");
    }
    out.into_inner()
}

/// A skill's files besides its `SKILL.md`, the same in every version.
struct Payload {
    name: &'static str,
    what: &'static str,
    /// Path, bytes, and whether to deflate it.
    files: Vec<(String, Vec<u8>, bool)>,
}

impl Payload {
    /// Random bytes stored as they are, and random base64-like text that
    /// deflates to about three quarters: a ~1 MiB archive of ~1.1 MiB.
    fn incompressible() -> Self {
        let mut rng = Random(0x5EED);
        let mut data = vec![0; DATA_BIN];
        rng.fill(&mut data);
        let mut files = vec![("references/data.bin".to_owned(), data, false)];
        for i in 0..TEXT_FILES {
            files.push((
                format!("references/notes-{i}.md"),
                rng.text(TEXT_FILE).into_bytes(),
                true,
            ));
        }
        Self {
            name: "bulk",
            what: "A 1 MiB skill of data for the install benchmark.",
            files,
        }
    }

    /// Markdown prose, which deflates several times over: words drawn as
    /// in natural text (a few common, most rare), in as many `PROSE_FILE`
    /// documents as make a ~1 MiB archive. Each is under the review scan's
    /// 1 MiB cap, so every byte is scanned.
    fn prose() -> Self {
        let mut rng = Random(0x9A0E);
        let vocabulary: Vec<String> = (0..2_000)
            .map(|_| {
                let len = 2 + (rng.next() % 9) as usize;
                (0..len)
                    .map(|_| char::from(b'a' + (rng.next() % 26) as u8))
                    .collect()
            })
            .collect();
        let mut files = Vec::new();
        let mut packed = 0;
        loop {
            let mut doc = String::with_capacity(PROSE_FILE + 100);
            let mut line = 0;
            while doc.len() < PROSE_FILE {
                if line % 24 == 0 {
                    doc.push_str("\n## ");
                } else if line % 24 == 1 {
                    doc.push('\n');
                }
                let mut width = 0;
                while width < 72 {
                    let word = &vocabulary[rng.zipf(vocabulary.len())];
                    doc.push_str(word);
                    doc.push(' ');
                    width += word.len() + 1;
                }
                doc.push('\n');
                line += 1;
            }
            let name = format!("references/doc-{}.md", files.len());
            packed += zip_of(&[(&name, doc.as_bytes(), true)]).len();
            if packed > ARCHIVE_TARGET {
                break;
            }
            files.push((name, doc.into_bytes(), true));
        }
        Self {
            name: "prose",
            what: "A 1 MiB archive of markdown for the install benchmark.",
            files,
        }
    }

    fn archive(&self, version: &str) -> Vec<u8> {
        let md = skill_md(self.name, version, self.what);
        let mut files: Vec<(&str, &[u8], bool)> = vec![("SKILL.md", md.as_bytes(), true)];
        for (path, bytes, deflate) in &self.files {
            files.push((path, bytes, *deflate));
        }
        zip_of(&files)
    }

    fn unpacked_bytes(&self) -> usize {
        self.files.iter().map(|(_, b, _)| b.len()).sum()
    }

    /// The text the review scan reads (the random data is not UTF-8, so it
    /// is skipped).
    fn text_bytes(&self) -> usize {
        self.files
            .iter()
            .filter(|(_, _, text)| *text)
            .map(|(_, b, _)| b.len())
            .sum()
    }
}

fn small_archive(name: &str, version: &str) -> Vec<u8> {
    let md = skill_md(name, version, "A small skill for the install benchmark.");
    zip_of(&[("SKILL.md", md.as_bytes(), true)])
}

fn options(user: &Path, installed: &Path) -> CatalogOptions {
    CatalogOptions {
        roots: vec![
            Root {
                name: user.display().to_string(),
                path: user.to_path_buf(),
                trust: Trust::User,
                explicit: true,
                installed: false,
            },
            Root {
                name: "installed".to_owned(),
                path: installed.to_path_buf(),
                trust: Trust::Untrusted,
                explicit: false,
                installed: true,
            },
        ],
        max_timeout_secs: 600,
        runtimes: Runtimes::default(),
        launcher: None,
        rules: Default::default(),
    }
}

/// The local secret of the benched server: installing is the admin's.
const SECRET: &str = "bench-local-secret-0123456789abcdef";

/// A client of the person holding the server's local secret.
fn client() -> reqwest::Client {
    let mut person = reqwest::header::HeaderMap::new();
    let bearer = format!("Bearer {SECRET}").parse().expect("header");
    person.insert(reqwest::header::AUTHORIZATION, bearer);
    reqwest::Client::builder()
        .pool_max_idle_per_host(1)
        .no_proxy()
        .default_headers(person)
        .build()
        .expect("client")
}

async fn reload(catalog: &Arc<CatalogHandle>) {
    let catalog = catalog.clone();
    tokio::task::spawn_blocking(move || {
        catalog.reload();
    })
    .await
    .expect("reload");
}

/// `POST /skills?trust=user`; the time covers the request and reading the
/// whole answer, which must be 201.
async fn upload(client: &reqwest::Client, url: &str, zip: Vec<u8>) -> Duration {
    let start = Instant::now();
    let res = client
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/zip")
        .body(zip)
        .send()
        .await
        .expect("upload");
    let status = res.status();
    let body = res.bytes().await.expect("upload answer");
    let took = start.elapsed();
    assert_eq!(status.as_u16(), 201, "{url}: {}", String::from_utf8_lossy(&body));
    took
}

// ---------------------------------------------------------- goal 1: install

/// What no installer can avoid: the body written to a file, and the
/// archive unpacked with the `zip` crate.
async fn write_and_extract(zip: Vec<u8>, at: PathBuf) -> Duration {
    let start = Instant::now();
    let file = at.with_extension("zip");
    tokio::fs::write(&file, &zip).await.expect("write archive");
    tokio::task::spawn_blocking(move || {
        let mut archive =
            zip::ZipArchive::new(std::fs::File::open(&file).expect("open archive")).expect("read archive");
        archive.extract(&at).expect("extract");
    })
    .await
    .expect("extract task");
    start.elapsed()
}

/// The same body to a route that reads it whole and refuses it: the HTTP
/// transfer of 1 MiB and nothing else.
async fn transfer(client: &reqwest::Client, url: &str, body: Vec<u8>) -> (Duration, u16) {
    let start = Instant::now();
    let res = client
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body)
        .send()
        .await
        .expect("transfer");
    let status = res.status().as_u16();
    let _ = res.bytes().await.expect("transfer answer");
    (start.elapsed(), status)
}

struct InstallFigures {
    name: &'static str,
    files: usize,
    archive_bytes: usize,
    unpacked_bytes: usize,
    text_bytes: usize,
    installs: Vec<Duration>,
    baseline: Vec<Duration>,
    transfer: Vec<Duration>,
    transfer_status: u16,
    phases: Vec<(&'static str, Duration)>,
    /// What the review scan found in it: none expected.
    findings: usize,
}

/// Times each closure `PHASE_RUNS` times on fresh inputs; the median.
fn phase(mut f: impl FnMut(usize) -> Duration) -> Duration {
    median(&sorted((0..PHASE_RUNS).map(&mut f).collect()))
}

/// receive: the body spooled to a temp file, as `receive` does it.
fn time_receive(zip: &[u8]) -> Duration {
    let start = Instant::now();
    let mut file = tempfile::tempfile().expect("tempfile");
    file.write_all(zip).expect("write body");
    file.rewind().expect("rewind");
    let took = start.elapsed();
    drop(file);
    took
}

/// unpack, checked, from a spooled body into `dir`; the spooling is untimed.
fn time_unpack(zip: &[u8], dir: &Path) -> Duration {
    let mut file = tempfile::tempfile().expect("tempfile");
    file.write_all(zip).expect("write body");
    file.rewind().expect("rewind");
    let start = Instant::now();
    unpack(std::io::BufReader::new(file), dir, &UnpackLimits::default()).expect("unpack");
    start.elapsed()
}

/// load_skill, the lint an install runs on what it unpacked.
fn time_load(dir: &Path, runtimes: &Runtimes, cache: &PathCache) -> Duration {
    let opts = LoadOptions {
        source: "installed",
        trust: Trust::User,
        max_timeout_secs: 600,
        runtimes,
        installed: false,
        path: cache,
        launcher: None,
        rules: &Default::default(),
    };
    let start = Instant::now();
    let loaded = load_skill(dir, &opts);
    let took = start.elapsed();
    assert!(loaded.skill.is_some(), "load: {:?}", loaded.diagnostics);
    took
}

/// Placement::take: the version directory, findings beside it, the
/// rename of the unpacked `dir` into it, and one directory sync.
fn time_place(dir: &Path, version: &Path, name: &str, findings: &[Finding]) -> Duration {
    let start = Instant::now();
    std::fs::create_dir_all(version).expect("version dir");
    let json = serde_json::to_vec_pretty(findings).expect("findings to JSON");
    std::fs::write(version.join("findings.json"), json).expect("findings");
    std::fs::rename(dir, version.join(name)).expect("rename");
    installed::sync_dir(version).expect("sync dir");
    start.elapsed()
}

/// The install's steps one by one, through public APIs, on one archive:
/// what `Installer::install` and `receive` do, in their order.
fn install_phases(
    name: &str,
    zip: &[u8],
    scratch: &Path,
    catalog: &Arc<CatalogHandle>,
    state: &SkillState,
) -> (Vec<(&'static str, Duration)>, usize) {
    let cache = PathCache::new(std::env::var_os("PATH"));
    let runtimes = Runtimes::default();
    let dir_of = |i: usize| scratch.join(format!("stage-{i}")).join(name);
    for i in 0..PHASE_RUNS {
        std::fs::create_dir_all(scratch.join(format!("stage-{i}"))).expect("stage dir");
    }
    let receive = phase(|_| time_receive(zip));
    let unpacked = phase(|i| time_unpack(zip, &dir_of(i)));
    let loaded = phase(|i| time_load(&dir_of(i), &runtimes, &cache));
    let mut findings = Vec::new();
    let scanned = phase(|i| {
        let start = Instant::now();
        findings = skilld::install::review::scan(&dir_of(i), false).expect("scan");
        start.elapsed()
    });
    let placed = phase(|i| time_place(&dir_of(i), &scratch.join(format!("place-{i}")), name, &findings));
    let states = scratch.join("states");
    let recorded = phase(|_| {
        let start = Instant::now();
        installed::write_state(&states, name, state).expect("write state");
        start.elapsed()
    });
    let reloaded = phase(|_| {
        let start = Instant::now();
        let current = catalog.reload();
        let took = start.elapsed();
        assert!(current.skill(name).is_some(), "{name} serves");
        took
    });
    let phases = vec![
        ("receive: body to a temp file", receive),
        ("unpack (install::unpack, checked)", unpacked),
        ("load_skill (the lint)", loaded),
        ("review::scan", scanned),
        ("place: mkdir, findings, rename, fsync dir", placed),
        ("write_state (fsync file + dir)", recorded),
        ("CatalogHandle::reload", reloaded),
    ];
    (phases, findings.len())
}

/// Uploads `installs` versions of `payload` (after `INSTALL_WARMUP`),
/// interleaved with the baselines, then breaks one install down.
async fn goal_install(
    payload: Payload,
    installs: usize,
    addr: SocketAddr,
    client: &reqwest::Client,
    catalog: &Arc<CatalogHandle>,
    installed_root: &Path,
    scratch: &Path,
) -> InstallFigures {
    let name = payload.name;
    let url = format!("http://{addr}/skills?trust=user");
    let match_url = format!("http://{addr}/skills/match");
    for i in 0..INSTALL_WARMUP {
        upload(client, &url, payload.archive(&format!("0.0.{i}"))).await;
    }
    let archives: Vec<Vec<u8>> = (0..installs)
        .map(|i| payload.archive(&format!("1.0.{i}")))
        .collect();
    let archive_bytes = archives[0].len();
    let (mut times, mut baseline, mut transfers) = (Vec::new(), Vec::new(), Vec::new());
    let mut transfer_status = 0;
    // Interleaved, so drift on a shared machine hits every side alike.
    for (i, zip) in archives.into_iter().enumerate() {
        let at = scratch.join(format!("extract-{name}-{i}"));
        baseline.push(write_and_extract(zip.clone(), at).await);
        let (took, status) = transfer(client, &match_url, zip.clone()).await;
        transfers.push(took);
        transfer_status = status;
        times.push(upload(client, &url, zip).await);
    }
    let state = installed::read_state(installed_root, name)
        .expect("read state")
        .expect("the skill is installed");
    assert_eq!(
        state.versions.len(),
        INSTALL_WARMUP + installs,
        "versions of {name}"
    );
    assert_eq!(state.active.as_deref(), Some(&*format!("1.0.{}", installs - 1)));

    let zip = payload.archive("9.9.9");
    let (catalog, scratch) = (catalog.clone(), scratch.join(format!("phases-{name}")));
    let (phases, findings) =
        tokio::task::spawn_blocking(move || install_phases(name, &zip, &scratch, &catalog, &state))
            .await
            .expect("phases");
    InstallFigures {
        name,
        files: payload.files.len() + 1,
        archive_bytes,
        unpacked_bytes: payload.unpacked_bytes(),
        text_bytes: payload.text_bytes(),
        installs: sorted(times),
        baseline: sorted(baseline),
        transfer: sorted(transfers),
        transfer_status,
        phases,
        findings,
    }
}

// ----------------------------------------------------- goal 2: archive RSS

/// What the bare client saw of one download.
struct Download {
    status: String,
    content_length: Option<u64>,
    body: u64,
    digest: Vec<u8>,
    /// Until the end of the headers: the archive is built before them.
    first_byte: Duration,
    took: Duration,
}

/// `GET path` over a plain socket, read into one fixed buffer; the body is
/// hashed and counted, never kept.
async fn download(addr: SocketAddr, path: &str) -> Download {
    let start = Instant::now();
    let mut socket = tokio::net::TcpStream::connect(addr).await.expect("connect");
    socket
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .expect("request");
    let mut buf = vec![0u8; CLIENT_BUFFER];
    let (mut head, mut in_body) = (Vec::new(), false);
    let (mut hasher, mut body) = (Sha256::new(), 0u64);
    let mut first_byte = Duration::ZERO;
    loop {
        let n = socket.read(&mut buf).await.expect("read");
        if n == 0 {
            break;
        }
        if in_body {
            hasher.update(&buf[..n]);
            body += n as u64;
            continue;
        }
        head.extend_from_slice(&buf[..n]);
        if let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = head.split_off(end + 4);
            hasher.update(&rest);
            body += rest.len() as u64;
            in_body = true;
            first_byte = start.elapsed();
        }
    }
    let took = start.elapsed();
    let head = String::from_utf8_lossy(&head).into_owned();
    let status = head.lines().next().unwrap_or_default().to_owned();
    let content_length = head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case("content-length")
            .then(|| v.trim().parse().ok())
            .flatten()
    });
    Download {
        status,
        content_length,
        body,
        digest: hasher.finalize().to_vec(),
        first_byte,
        took,
    }
}

/// The archive the server should send: `write_archive` in-process, its
/// time, size and digest.
fn reference_archive(dir: &Path) -> (Duration, u64, Vec<u8>) {
    let start = Instant::now();
    let mut file = skilld::install::archive::write_archive(dir, tempfile::tempfile().expect("tempfile"))
        .expect("write_archive");
    let took = start.elapsed();
    file.rewind().expect("rewind");
    let (mut hasher, mut size, mut buf) = (Sha256::new(), 0u64, vec![0u8; 64 * 1024]);
    loop {
        let n = std::io::Read::read(&mut file, &mut buf).expect("read archive");
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        size += n as u64;
    }
    (took, size, hasher.finalize().to_vec())
}

struct RssRow {
    label: String,
    idle: u64,
    peak: u64,
    samples: u64,
    bytes: u64,
    first_byte: Duration,
    took: Duration,
}

impl RssRow {
    fn growth(&self) -> u64 {
        self.peak.saturating_sub(self.idle)
    }
}

async fn rss_of(
    label: String,
    sampler: &RssSampler,
    addr: SocketAddr,
    skill: &str,
    expected: &(Duration, u64, Vec<u8>),
) -> RssRow {
    // Let the allocator and the sampler settle first.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let idle = vm_rss_kib();
    sampler.reset(idle);
    let got = download(addr, &format!("/skills/{skill}/archive")).await;
    let (peak, samples) = sampler.read();
    assert!(got.status.contains(" 200 "), "{label}: {}", got.status);
    assert_eq!(got.content_length, Some(got.body), "{label}: Content-Length");
    assert_eq!(got.body, expected.1, "{label}: size of the archive");
    assert!(
        got.digest == expected.2,
        "{label}: the bytes are not the archive's"
    );
    RssRow {
        label,
        idle,
        peak,
        samples,
        bytes: got.body,
        first_byte: got.first_byte,
        took: got.took,
    }
}

struct ArchiveFigures {
    tiny_build: (Duration, u64),
    big_build: (Duration, u64),
    rows: Vec<RssRow>,
}

fn write_big_skill(user: &Path) {
    let dir = user.join("big");
    std::fs::create_dir_all(dir.join("references")).expect("big skill dir");
    std::fs::write(
        dir.join("SKILL.md"),
        skill_md("big", "1.0.0", "A skill holding a 50 MiB file."),
    )
    .expect("write SKILL.md");
    let mut file =
        std::io::BufWriter::new(std::fs::File::create(dir.join("references/data.bin")).expect("data.bin"));
    let mut rng = Random(0xB16);
    let mut chunk = vec![0u8; 1024 * 1024];
    for _ in 0..BIG_FILE / chunk.len() as u64 {
        rng.fill(&mut chunk);
        file.write_all(&chunk).expect("write data.bin");
    }
    file.flush().expect("flush data.bin");
}

async fn goal_archive(addr: SocketAddr, catalog: &Arc<CatalogHandle>, user: PathBuf) -> ArchiveFigures {
    let (tiny, big) = tokio::task::spawn_blocking(move || {
        write_big_skill(&user);
        (
            reference_archive(&user.join("tiny")),
            reference_archive(&user.join("big")),
        )
    })
    .await
    .expect("big skill");
    reload(catalog).await;
    assert!(catalog.current().skill("big").is_some(), "big serves");

    let sampler = RssSampler::start();
    let mut rows = Vec::new();
    rows.push(rss_of("tiny skill (baseline)".to_owned(), &sampler, addr, "tiny", &tiny).await);
    rows.push(
        rss_of(
            "50 MiB skill, first download".to_owned(),
            &sampler,
            addr,
            "big",
            &big,
        )
        .await,
    );
    rows.push(
        rss_of(
            "50 MiB skill, second download".to_owned(),
            &sampler,
            addr,
            "big",
            &big,
        )
        .await,
    );
    rows.push(rss_of("tiny skill again".to_owned(), &sampler, addr, "tiny", &tiny).await);
    ArchiveFigures {
        tiny_build: (tiny.0, tiny.1),
        big_build: (big.0, big.1),
        rows,
    }
}

// ------------------------------------------------------ goal 3: versions

struct ListFigures {
    versions: usize,
    body_bytes: usize,
    state_bytes: u64,
    health: Vec<Duration>,
    list: Vec<Duration>,
    read_state: Duration,
    serialize: Duration,
}

/// Writes versions `from..to` of `many` into the installed root's layout,
/// as an install leaves them, and records them in its state at once.
fn write_versions(root: &Path, from: usize, to: usize) {
    let mut state = installed::read_state(root, "many")
        .expect("read state")
        .expect("many is installed");
    for i in from..to {
        let version = format!("1.0.{i}");
        let dir = installed::version_dir(root, "many", &version);
        std::fs::create_dir_all(installed::skill_dir(root, "many", &version)).expect("version dir");
        let md = skill_md("many", &version, "A skill with a thousand versions.");
        std::fs::write(installed::skill_dir(root, "many", &version).join("SKILL.md"), &md).expect("SKILL.md");
        std::fs::write(dir.join("findings.json"), b"[]").expect("findings");
        std::fs::write(dir.join(installed::INSTALL_LOG), "no dependencies\n").expect("log");
        state.put(VersionState {
            version: version.clone(),
            hash: hex::encode(Sha256::digest(md.as_bytes())),
            status: VersionStatus::Ready,
            trust: Trust::User,
            installed_at: Utc::now(),
            review: None,
            signature: None,
            archive_sha256: None,
        });
    }
    state.active = Some(format!("1.0.{}", to - 1));
    installed::write_state(root, "many", &state).expect("write state");
}

async fn get(client: &reqwest::Client, url: &str) -> (Duration, usize) {
    let start = Instant::now();
    let res = client.get(url).send().await.expect("request");
    let status = res.status();
    let body = res.bytes().await.expect("body");
    let took = start.elapsed();
    assert!(status.is_success(), "{url}: {status}");
    (took, body.len())
}

/// Installs `many` over HTTP a few times, then writes the rest of its
/// `LISTED_VERSIONS` into the installed root, and reloads.
async fn install_many(
    addr: SocketAddr,
    client: &reqwest::Client,
    catalog: &Arc<CatalogHandle>,
    installed_root: &Path,
) {
    let upload_url = format!("http://{addr}/skills?trust=user");
    for i in 0..HTTP_VERSIONS {
        upload(client, &upload_url, small_archive("many", &format!("1.0.{i}"))).await;
    }
    let root = installed_root.to_path_buf();
    tokio::task::spawn_blocking(move || write_versions(&root, HTTP_VERSIONS, LISTED_VERSIONS))
        .await
        .expect("write versions");
    reload(catalog).await;
    let serving = catalog.current().skill("many").and_then(|s| s.version.clone());
    assert_eq!(
        serving,
        Some(format!("1.0.{}", LISTED_VERSIONS - 1)),
        "the highest serves"
    );
}

/// The versions `list_url` lists, which must be all of them.
async fn listed_versions(client: &reqwest::Client, list_url: &str) -> usize {
    let listed: serde_json::Value = client
        .get(list_url)
        .send()
        .await
        .expect("list")
        .json()
        .await
        .expect("list is JSON");
    let versions = listed["versions"].as_array().map_or(0, Vec::len);
    assert_eq!(versions, LISTED_VERSIONS, "versions listed");
    versions
}

/// `LIST_REQUESTS` of each after `LIST_WARMUP`, interleaved so drift hits
/// both alike: the health and list times, and the list's body size.
async fn time_lists(
    client: &reqwest::Client,
    health_url: &str,
    list_url: &str,
) -> (Vec<Duration>, Vec<Duration>, usize) {
    for _ in 0..LIST_WARMUP {
        get(client, health_url).await;
        get(client, list_url).await;
    }
    let (mut health, mut list, mut body_bytes) = (Vec::new(), Vec::new(), 0);
    for _ in 0..LIST_REQUESTS {
        health.push(get(client, health_url).await.0);
        let (took, bytes) = get(client, list_url).await;
        list.push(took);
        body_bytes = bytes;
    }
    (health, list, body_bytes)
}

/// The two halves of the handler's work, in-process: the medians of
/// reading the state and of encoding it, and the state file's size.
fn handler_halves(root: &Path) -> (Duration, Duration, u64) {
    let state_bytes = std::fs::metadata(root.join("many").join(installed::STATE_FILE))
        .expect("state file")
        .len();
    let reads = (0..LIST_REQUESTS)
        .map(|_| {
            let start = Instant::now();
            let state = installed::read_state(root, "many").expect("read").expect("state");
            let took = start.elapsed();
            drop(state);
            took
        })
        .collect();
    let state = installed::read_state(root, "many").expect("read").expect("state");
    let encodes = (0..LIST_REQUESTS)
        .map(|_| {
            let state = state.clone();
            let start = Instant::now();
            let body = serde_json::to_vec(&VersionList::new("many", state)).expect("encode");
            let took = start.elapsed();
            drop(body);
            took
        })
        .collect();
    (median(&sorted(reads)), median(&sorted(encodes)), state_bytes)
}

async fn goal_versions(
    addr: SocketAddr,
    client: &reqwest::Client,
    catalog: &Arc<CatalogHandle>,
    installed_root: &Path,
) -> ListFigures {
    install_many(addr, client, catalog, installed_root).await;
    let list_url = format!("http://{addr}/skills/many/versions");
    let health_url = format!("http://{addr}/healthz");
    let versions = listed_versions(client, &list_url).await;
    let (health, list, body_bytes) = time_lists(client, &health_url, &list_url).await;
    let root = installed_root.to_path_buf();
    let (read_state, serialize, state_bytes) = tokio::task::spawn_blocking(move || handler_halves(&root))
        .await
        .expect("handler halves");
    ListFigures {
        versions,
        body_bytes,
        state_bytes,
        health: sorted(health),
        list: sorted(list),
        read_state,
        serialize,
    }
}

// -------------------------------------------------------------------- main

/// The 1-minute load average, to tell a busy machine from a slow server.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "n/a".to_owned())
}

fn write_tiny_skill(user: &Path) {
    let dir = user.join("tiny");
    std::fs::create_dir_all(&dir).expect("tiny skill dir");
    std::fs::write(dir.join("SKILL.md"), skill_md("tiny", "1.0.0", "A tiny skill.")).expect("write SKILL.md");
}

/// The in-process server the goals are measured against, with the run
/// log's directory, which must outlive it.
struct Server {
    catalog: Arc<CatalogHandle>,
    addr: SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
    _data: tempfile::TempDir,
}

impl Server {
    async fn start(opts: CatalogOptions) -> Self {
        let catalog = Arc::new(
            tokio::task::spawn_blocking(move || CatalogHandle::new(opts))
                .await
                .expect("build catalog"),
        );
        let data = tempfile::tempdir().expect("data dir");
        let store = skilld::store::connect(&format!("sqlite://{}", data.path().join("skilld.db").display()))
            .await
            .expect("run log");
        let invoker = Arc::new(skilld::invoke::Invoker::new(
            store.clone(),
            skilld::invoke::RunSettings::default(),
        ));
        let state = AppState {
            sessions: skilld::session::Sessions::shared(
                &invoker,
                &store,
                catalog.clone(),
                Default::default(),
            ),
            approver: skilld::invoke::Approver::new(&invoker, &store),
            installer: Arc::new(Installer::new(
                catalog.clone(),
                invoker.clone(),
                InstallSettings::default(),
            )),
            catalog: catalog.clone(),
            invoker,
            auth: Arc::new(skilld::auth::Auth::open_with_secret(SECRET).expect("secret")),
            limits: skilld::http::ServerLimits::default(),
            web: Default::default(),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let signal = async {
            let _ = stopped.await;
        };
        let task = tokio::spawn(skilld::serve(state, listener, signal, Duration::from_secs(1)));
        Self {
            catalog,
            addr,
            stop,
            task,
            _data: data,
        }
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.expect("server task").expect("serve");
    }
}

/// What the three goals measured.
struct Figures {
    install: Vec<InstallFigures>,
    archive: ArchiveFigures,
    list: ListFigures,
}

/// The goals on one server, in the order 1, 3, 2; each says when it is
/// done, counted from `started`.
async fn measure(
    opts: CatalogOptions,
    user: &Path,
    installed_root: &Path,
    scratch: &Path,
    started: Instant,
) -> Figures {
    let server = Server::start(opts).await;
    let (addr, catalog) = (server.addr, &server.catalog);
    let client = client();
    let mut install = Vec::new();
    for (payload, n) in [
        (Payload::incompressible(), INSTALLS),
        (Payload::prose(), PROSE_INSTALLS),
    ] {
        install.push(goal_install(payload, n, addr, &client, catalog, installed_root, scratch).await);
    }
    println!("goal 1 measured at {:.1} s", started.elapsed().as_secs_f64());
    let list = goal_versions(addr, &client, catalog, installed_root).await;
    println!("goal 3 measured at {:.1} s", started.elapsed().as_secs_f64());
    drop(client);
    let archive = goal_archive(addr, catalog, user.to_path_buf()).await;
    println!("goal 2 measured at {:.1} s", started.elapsed().as_secs_f64());
    server.stop().await;
    Figures {
        install,
        archive,
        list,
    }
}

/// The verdict on each goal, printed together at the end.
#[derive(Default)]
struct Summary(String);

impl Summary {
    fn goal(&mut self, what: &str, limit: &str, got: &str, met: bool) {
        let verdict = if met { "met" } else { "NOT MET" };
        let _ = writeln!(
            self.0,
            "  {what:<44} goal {limit:>12}   got {got:>12}   {verdict}"
        );
    }
}

/// Goal 1 for one skill: its uploads against the baselines, then where
/// one install's time goes.
fn report_install(f: &InstallFigures, summary: &mut Summary) {
    println!();
    println!(
        "== 1. POST /skills of skill '{}': a {} archive ({} unpacked, {} files), no dependencies; {} uploads after {INSTALL_WARMUP} warm-up ==",
        f.name,
        mib_of_bytes(f.archive_bytes as u64),
        mib_of_bytes(f.unpacked_bytes as u64),
        f.files,
        f.installs.len()
    );
    let row = |label: &str, v: &[Duration]| {
        println!(
            "{label:<52} median {:>11} ({:>5.1}x)   p99 {:>11} ({:>5.1}x)",
            ms(median(v)),
            ratio(median(v), median(&f.baseline)),
            ms(p99(v)),
            ratio(p99(v), p99(&f.baseline)),
        );
    };
    row("baseline: tokio::fs::write + zip extract", &f.baseline);
    row(
        &format!(
            "HTTP transfer: POST /skills/match (answers {})",
            f.transfer_status
        ),
        &f.transfer,
    );
    row("POST /skills (end to end)", &f.installs);
    println!(
        "(p99 of {} samples is their maximum; the review scan found {} finding(s))",
        f.installs.len(),
        f.findings
    );
    report_phases(f);
    for (which, got) in [("median", median(&f.installs)), ("p99", p99(&f.installs))] {
        summary.goal(
            &format!("POST /skills, 1 MiB '{}' ({which})", f.name),
            &format!("<= {}", ms(GOAL_INSTALL)),
            &ms(got),
            got <= GOAL_INSTALL,
        );
    }
}

/// Each phase of one install as a share of the upload's median, the rest
/// by difference, and the review scan's rate.
fn report_phases(f: &InstallFigures) {
    println!("-- phases of one install, in-process (medians of {PHASE_RUNS}; % of POST /skills' median) --");
    let install_median = median(&f.installs);
    for (label, took) in &f.phases {
        println!(
            "  {label:<44} {:>11} {:>5.1}%",
            ms(*took),
            100.0 * ratio(*took, install_median)
        );
    }
    let accounted: Duration = f.phases.iter().map(|(_, t)| *t).sum();
    println!(
        "  {:<44} {:>11} {:>5.1}%   (by difference: HTTP, locks, state read, log; noisy)",
        "rest",
        ms(install_median.saturating_sub(accounted)),
        100.0 * ratio(install_median.saturating_sub(accounted), install_median)
    );
    if let Some((_, scan)) = f
        .phases
        .iter()
        .find(|(label, _)| label.starts_with("review::scan"))
    {
        println!(
            "  review::scan reads {:.1} MiB/s of text ({} of it)",
            f.text_bytes as f64 / (1024.0 * 1024.0) / scan.as_secs_f64().max(1e-9),
            mib_of_bytes(f.text_bytes as u64)
        );
    }
}

/// Goal 2: the growth of RSS over each download, against the tiny skill's.
fn report_archive(a: &ArchiveFigures, summary: &mut Summary) {
    println!();
    println!(
        "== 2. GET /skills/{{skill}}/archive: peak RSS of this process above its level just before (sampled every {} ms) ==",
        SAMPLE_EVERY.as_millis()
    );
    println!(
        "client: a bare socket, one {} KiB buffer, body hashed and counted, never kept",
        CLIENT_BUFFER / 1024
    );
    println!(
        "write_archive in-process: tiny {} in {}; 50 MiB skill {} in {}",
        mib_of_bytes(a.tiny_build.1),
        ms(a.tiny_build.0),
        mib_of_bytes(a.big_build.1),
        ms(a.big_build.0)
    );
    let tiny_growth = a.rows[0].growth();
    for r in &a.rows {
        println!(
            "  {:<30} before {:>10}  peak {:>10}  growth {:>9} ({} vs baseline)  {:>9}: headers after {:>12}, all in {:>12}; {} samples",
            r.label,
            mib(r.idle),
            mib(r.peak),
            mib(r.growth()),
            signed_mib(r.growth() as i64 - tiny_growth as i64),
            mib_of_bytes(r.bytes),
            ms(r.first_byte),
            ms(r.took),
            r.samples
        );
    }
    let worst = a.rows[1..3].iter().map(RssRow::growth).max().unwrap_or_default();
    summary.goal(
        "archive of 50 MiB: peak RSS growth (worst)",
        &format!("<= {}", mib(GOAL_RSS_KIB)),
        &mib(worst),
        worst <= GOAL_RSS_KIB,
    );
}

/// Goal 3: listing the versions against `/healthz`, and the handler's two
/// halves.
fn report_versions(l: &ListFigures, summary: &mut Summary) {
    println!();
    println!(
        "== 3. GET /skills/{{skill}}/versions with {} versions ({LIST_REQUESTS} requests interleaved with /healthz, after {LIST_WARMUP} warm-up; one keep-alive client) ==",
        l.versions
    );
    let row = |label: &str, v: &[Duration], bytes: Option<usize>| {
        println!(
            "{label:<40} median {:>11} ({:>6.1}x)   p99 {:>11} ({:>6.1}x){}",
            ms(median(v)),
            ratio(median(v), median(&l.health)),
            ms(p99(v)),
            ratio(p99(v), p99(&l.health)),
            bytes.map_or_else(String::new, |b| format!("   body {b} bytes"))
        );
    };
    row("GET /healthz (baseline)", &l.health, None);
    row("GET /skills/many/versions", &l.list, Some(l.body_bytes));
    println!(
        "-- the handler's work, in-process (medians of {LIST_REQUESTS}) --\n  read_state (read + parse {} state.json)   {:>11}\n  VersionList to JSON                        {:>11}",
        mib_of_bytes(l.state_bytes),
        ms(l.read_state),
        ms(l.serialize)
    );
    for (which, got) in [("median", median(&l.list)), ("p99", p99(&l.list))] {
        summary.goal(
            &format!("GET versions, 1,000 versions ({which})"),
            &format!("<= {}", ms(GOAL_LIST)),
            &ms(got),
            got <= GOAL_LIST,
        );
    }
}

fn main() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (user, installed_root, scratch) = (
        tmp.path().join("user"),
        tmp.path().join("installed"),
        tmp.path().join("scratch"),
    );
    for d in [&user, &installed_root, &scratch] {
        std::fs::create_dir_all(d).expect("create dir");
    }
    write_tiny_skill(&user);
    let opts = options(&user, &installed_root);
    println!(
        "working under {}; {} CPUs; load average {}",
        tmp.path().display(),
        std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
        load_average()
    );

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let started = Instant::now();
    let figures = rt.block_on(measure(opts, &user, &installed_root, &scratch, started));

    let mut summary = Summary::default();
    for f in &figures.install {
        report_install(f, &mut summary);
    }
    report_archive(&figures.archive, &mut summary);
    report_versions(&figures.list, &mut summary);

    println!();
    println!(
        "== summary: goals (total {:.1} s; load average {}) ==",
        started.elapsed().as_secs_f64(),
        load_average()
    );
    print!("{}", summary.0);
}
