//! Reloads the catalog when files under its roots change, debounced so an
//! editor's burst of writes (or an unpacking archive) costs one rebuild.

use crate::catalog::CatalogHandle;
use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// How long the roots must be quiet before a reload.
pub const DEBOUNCE: Duration = Duration::from_millis(250);

/// Watches every existing root; reloads until the returned watcher drops.
pub fn spawn(handle: Arc<CatalogHandle>) -> notify::Result<RecommendedWatcher> {
    let (tx, mut rx) = mpsc::channel::<()>(1);
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let relevant = event.is_ok_and(|e| !e.kind.is_access());
        if relevant {
            // Full means a reload is already due; dropping the tick is fine.
            let _ = tx.try_send(());
        }
    })?;
    for root in &handle.options().roots {
        if root.path.is_dir() {
            if let Err(e) = watcher.watch(&root.path, RecursiveMode::Recursive) {
                tracing::warn!(root = %root.path.display(), error = %e, "cannot watch skills directory");
            }
        }
    }
    tokio::spawn(async move {
        while rx.recv().await.is_some() {
            loop {
                match tokio::time::timeout(DEBOUNCE, rx.recv()).await {
                    Ok(Some(())) => continue,
                    Ok(None) => return,
                    Err(_) => break,
                }
            }
            let h = handle.clone();
            if let Err(e) = tokio::task::spawn_blocking(move || h.reload()).await {
                tracing::error!(error = %e, "catalog reload failed");
            }
        }
    });
    Ok(watcher)
}
