//! Reloads the catalog when files under its roots change, debounced so an
//! editor's burst of writes (or an unpacking archive) costs one rebuild.

use crate::catalog::CatalogHandle;
use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

/// How long the roots must be quiet before a reload.
pub const DEBOUNCE: Duration = Duration::from_millis(250);

/// Keeps the watch alive; dropping it stops watching and reloading.
pub struct Watch {
    _watcher: Arc<Mutex<RecommendedWatcher>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Watches every root. A root that does not exist yet is noticed through
/// its parent, and watched itself from the first reload after it appears.
pub fn spawn(handle: Arc<CatalogHandle>) -> notify::Result<Watch> {
    let (tx, mut rx) = mpsc::channel::<()>(1);
    // A missing root is watched through its parent, which may hold other
    // busy files (the run log lives in the data directory): only changes
    // under a root count.
    // Events name paths as watched or absolute; compare with both forms.
    let roots: Vec<PathBuf> = handle
        .options()
        .roots
        .iter()
        .flat_map(|r| {
            [
                r.path.clone(),
                std::path::absolute(&r.path).unwrap_or_else(|_| r.path.clone()),
            ]
        })
        .collect();
    let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let under_a_root = |e: &notify::Event| e.paths.iter().any(|p| roots.iter().any(|r| p.starts_with(r)));
        if event.is_ok_and(|e| !e.kind.is_access() && under_a_root(&e)) {
            // Full means a reload is already due; dropping the tick is fine.
            let _ = tx.try_send(());
        }
    })?;
    let watcher = Arc::new(Mutex::new(watcher));
    let mut watched = HashSet::new();
    add_watches(&handle, &watcher, &mut watched);
    let task_watcher = watcher.clone();
    let task = tokio::spawn(async move {
        while rx.recv().await.is_some() {
            loop {
                match tokio::time::timeout(DEBOUNCE, rx.recv()).await {
                    Ok(Some(())) => continue,
                    Ok(None) => return,
                    Err(_) => break,
                }
            }
            // Watch a root that has just appeared before reading it: what is
            // written before the watch, the reload reads; what comes after,
            // the watch sees. (The other order lost files written between
            // the reload and the watch, which a loaded machine hit.)
            add_watches(&handle, &task_watcher, &mut watched);
            let h = handle.clone();
            if let Err(e) = tokio::task::spawn_blocking(move || h.reload()).await {
                tracing::error!(error = %e, "catalog reload failed");
            }
        }
    });
    Ok(Watch {
        _watcher: watcher,
        task,
    })
}

/// Watches each root recursively once it exists, else its parent directly.
fn add_watches(handle: &CatalogHandle, watcher: &Mutex<RecommendedWatcher>, watched: &mut HashSet<PathBuf>) {
    let Ok(mut w) = watcher.lock() else { return };
    for root in &handle.options().roots {
        if watched.contains(&root.path) {
            continue;
        }
        if root.path.is_dir() {
            match w.watch(&root.path, RecursiveMode::Recursive) {
                Ok(()) => {
                    watched.insert(root.path.clone());
                }
                Err(e) => {
                    tracing::warn!(root = %root.path.display(), error = %e, "cannot watch skills directory")
                }
            }
        } else if let Some(parent) = root.path.parent().filter(|p| p.is_dir())
            && watched.insert(parent.to_path_buf())
        {
            let _ = w.watch(parent, RecursiveMode::NonRecursive);
        }
    }
}

/// Reloads the catalog whenever an MCP server's tools change (announced,
/// or found when it restarts), debounced like file changes: the hash then
/// covers the new definitions, so grants of the old ones no longer apply.
pub fn follow_offers(handle: Arc<CatalogHandle>) -> Option<tokio::task::JoinHandle<()>> {
    let mut changes = handle.options().launcher.as_ref()?.offer_changes()?;
    let weak = Arc::downgrade(&handle);
    drop(handle);
    Some(tokio::spawn(async move {
        while changes.changed().await.is_ok() {
            tokio::time::sleep(DEBOUNCE).await;
            changes.mark_unchanged();
            let Some(h) = weak.upgrade() else { return };
            if let Err(e) = tokio::task::spawn_blocking(move || h.reload()).await {
                tracing::warn!(error = %e, "reloading after an upstream's change failed");
            }
        }
    }))
}
