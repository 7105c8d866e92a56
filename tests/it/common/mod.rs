//! Shared helpers: corpus roots and catalogs here; the server, its
//! client, fixtures, the run log, assertions and snapshots, child
//! processes, and the kits of several suites (archives, the gateway,
//! MCP clients, the browser, Python, people's tokens) in the modules
//! below. Test modules import helpers from here only, never from one
//! another.

mod archives;
mod assertions;
mod browser;
mod client;
mod database;
mod egress;
mod fixtures;
mod gateway;
mod mcp;
mod notify;
mod people;
mod process;
mod python;
mod registry;
mod served;
mod server;
mod snapshots;
mod starlark;

pub use archives::*;
pub use assertions::*;
pub use browser::*;
pub use client::*;
pub use database::*;
pub use egress::*;
pub use fixtures::*;
pub use gateway::*;
pub use mcp::*;
pub use notify::*;
pub use people::*;
pub use process::*;
pub use python::*;
pub use registry::*;
pub use served::*;
pub use server::*;
pub use snapshots::*;
pub use starlark::*;

use skilld::catalog::{Catalog, CatalogOptions, Root};
use skilld::skill::Runtimes;
use skilld::skill::Trust;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The test corpus, `tests/corpus`.
pub fn corpus_dir() -> PathBuf {
    checkout().join("tests/corpus")
}

/// The bundled `skills/` of this repository.
pub fn bundled_dir() -> PathBuf {
    checkout().join("skills")
}

/// This repository as a sandboxed tool can read it: the checkout itself,
/// or, when it lies where others cannot go (a clone in root's home or a
/// private temporary directory: the tools run as another user), a copy
/// in a world-readable temporary directory, made once per test process.
pub fn checkout() -> &'static Path {
    static CHECKOUT: std::sync::LazyLock<PathBuf> = std::sync::LazyLock::new(|| {
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        if !nix::unistd::geteuid().is_root() || skilld::runner::runnable_by_anyone(here) {
            return here.to_path_buf();
        }
        let base = std::env::temp_dir().join("skilld-test-checkouts");
        let _ = std::fs::create_dir(&base);
        remove_copies_of_dead_processes(&base);
        let copy = base.join(std::process::id().to_string());
        let _ = std::fs::remove_dir_all(&copy);
        copy_readable(here, &copy);
        for dir in [&base, &copy] {
            set_mode(dir, 0o755);
        }
        copy
    });
    &CHECKOUT
}

/// The checkout without its build output, readable by everyone.
fn copy_readable(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    set_mode(to, 0o755);
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        let target = to.join(&name);
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            if name != "target" && name != "node_modules" {
                copy_readable(&entry.path(), &target);
            }
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target).unwrap();
            let exec = std::fs::metadata(entry.path()).unwrap().permissions().mode() & 0o111 != 0;
            set_mode(&target, if exec { 0o755 } else { 0o644 });
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path()).unwrap(), &target).unwrap();
        }
    }
}

pub(crate) fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn remove_copies_of_dead_processes(base: &Path) {
    for entry in std::fs::read_dir(base).into_iter().flatten().flatten() {
        let pid = entry.file_name().to_string_lossy().into_owned();
        if !Path::new("/proc").join(&pid).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

pub fn root(path: impl Into<PathBuf>, trust: Trust) -> Root {
    let path = path.into();
    Root {
        name: path.display().to_string(),
        path,
        trust,
        explicit: true,
        installed: false,
    }
}

pub fn options(roots: Vec<Root>) -> CatalogOptions {
    CatalogOptions {
        roots,
        max_timeout_secs: 600,
        runtimes: Runtimes::default(),
        launcher: None,
        rules: Default::default(),
    }
}

/// The corpus as `expected.json` says to load it: valid, warn and invalid
/// as three roots of one catalog.
pub fn corpus_options() -> CatalogOptions {
    let c = corpus_dir();
    options(vec![
        root(c.join("valid"), Trust::User),
        root(c.join("warn"), Trust::User),
        root(c.join("invalid"), Trust::User),
    ])
}

/// The corpus catalog, its manifests' backends started (and stopped again
/// when the runtime they ran on is dropped, on return).
pub fn corpus_catalog() -> Catalog {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let _entered = runtime.enter();
    let mut opts = corpus_options();
    opts.launcher = skilld::invoke::standalone_launcher(&host_settings());
    Catalog::build(&opts, None)
}
