//! Shared helpers: corpus roots, catalogs, and real servers on port 0.

use skilld::AppState;
use skilld::catalog::{Catalog, CatalogHandle, CatalogOptions, Root};
use skilld::skill::Trust;
use skilld::skill::load::Runtimes;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `../shared/corpus`, beside the checkout.
pub fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus")
}

/// The bundled `skills/` of this repository.
pub fn bundled_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("skills")
}

pub fn root(path: impl Into<PathBuf>, trust: Trust) -> Root {
    let path = path.into();
    Root {
        name: path.display().to_string(),
        path,
        trust,
        explicit: true,
    }
}

pub fn options(roots: Vec<Root>) -> CatalogOptions {
    CatalogOptions {
        roots,
        max_timeout_secs: 600,
        runtimes: Runtimes::default(),
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

pub fn corpus_catalog() -> Catalog {
    Catalog::build(&corpus_options(), None)
}

/// A server on 127.0.0.1 port 0, stopped when dropped.
pub struct TestServer {
    pub addr: SocketAddr,
    pub catalog: Arc<CatalogHandle>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl TestServer {
    pub async fn start(opts: CatalogOptions) -> Self {
        let catalog = Arc::new(
            tokio::task::spawn_blocking(move || CatalogHandle::new(opts))
                .await
                .unwrap(),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let state = AppState {
            catalog: catalog.clone(),
        };
        tokio::spawn(async move {
            skilld::serve(state, listener, async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
        });
        Self {
            addr,
            catalog,
            stop: Some(stop),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Copies a directory tree (for tests that change skills on disk).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
            let mut perms = std::fs::metadata(&target).unwrap().permissions();
            #[allow(clippy::permissions_set_readonly_false)]
            perms.set_readonly(false);
            std::fs::set_permissions(&target, perms).unwrap();
        }
    }
}
