//! Preparing the dependencies of skills outside the installed root: a
//! `requirements.txt` or `package.json` in a plain skills directory is
//! installed the way an upload's is ([`super::packages::install`]: checked
//! first, in the run sandbox, as the sandbox's user, no package's code
//! run), once per content ([`crate::skill::prepared`]), in the background
//! after a load finds it missing; a reload then serves the skill with it.
//! Nothing is installed at call time: until they are ready, calls answer
//! 409 `dependencies_not_ready`.

use super::packages::{self, Confines, Log};
use super::{InstallError, Installer};
use crate::skill::prepared::{self, ENV, FAILED, LOG, READY, State};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

impl Installer {
    /// Prepares, one at a time, the dependencies the current catalog
    /// waits for, and again after each reload, until `stop`. Each is tried
    /// once per server start: a failure stays until the server restarts or
    /// the files change (a new key), rather than retry without end.
    pub async fn prepare_dependencies(self: Arc<Self>, stop: CancellationToken) {
        let Some(deps_dir) = self.catalog.options().rules.deps_dir.clone() else {
            return;
        };
        let mut reloads = self.catalog.reloads();
        let mut tried: HashSet<String> = HashSet::new();
        loop {
            reloads.borrow_and_update();
            let waiting = self.catalog.current().waiting_dependencies();
            let mut prepared = false;
            for (key, skill_dir) in waiting {
                if stop.is_cancelled() {
                    return;
                }
                if tried.insert(key.clone()) {
                    self.prepare(&deps_dir, &key, &skill_dir).await;
                    prepared = true;
                }
            }
            if prepared {
                if let Err(e) = self.reload().await {
                    tracing::warn!(error = %e, "cannot reload the catalog after preparing dependencies");
                }
                continue;
            }
            tokio::select! {
                changed = reloads.changed() => if changed.is_err() { return },
                () = stop.cancelled() => return,
            }
        }
    }

    /// Installs the dependencies `skill_dir` asks for as preparation `key`,
    /// leaving `ready` or `failed` beside them, and the installers' log.
    async fn prepare(&self, deps_dir: &Path, key: &str, skill_dir: &Path) {
        // Another server on the same data directory (`skilld mcp` beside
        // `skilld serve`) may be preparing the same: one at a time, and
        // what one made the other takes.
        let _lock = match lock(deps_dir, key).await {
            Ok(lock) => lock,
            Err(e) => {
                tracing::warn!(key, error = %e, "cannot prepare a skill's dependencies");
                return;
            }
        };
        if matches!(prepared::state(deps_dir, key), State::Ready(_)) {
            return;
        }
        let place = prepared::dir_of(deps_dir, key);
        let log = Log::default();
        log.line(&format!("preparing the dependencies of {}", skill_dir.display()));
        tracing::info!(skill = %skill_dir.display(), key, "preparing a skill's dependencies");
        let outcome = match fresh_place(&place).await {
            Ok(()) => {
                let confines = Confines {
                    sandbox: self.invoker.sandbox().clone(),
                    limits: self.invoker.settings().limits,
                    grace: self.invoker.settings().grace,
                };
                packages::install(skill_dir, &place.join(ENV), &self.settings.deps, &confines, &log).await
            }
            Err(e) => Err(packages::DepsError::Other(e.to_string())),
        };
        let (marker, text) = match &outcome {
            Ok(()) => (READY, String::new()),
            Err(why) => {
                log.line(&format!("dependencies failed: {why}"));
                (FAILED, format!("{why}\n"))
            }
        };
        let written = tokio::fs::write(place.join(LOG), log.text())
            .await
            .and(tokio::fs::write(place.join(marker), text).await);
        match (outcome, written) {
            (Ok(()), Ok(())) => tracing::info!(key, "dependencies prepared"),
            (Err(why), _) => tracing::warn!(key, error = %why, "cannot prepare a skill's dependencies"),
            (_, Err(e)) => tracing::warn!(key, error = %e, "cannot record a preparation"),
        }
    }
}

/// Makes `deps/` (others may pass it, not list it: the tools that use
/// what is installed there run as the sandbox's user) and holds the lock
/// of preparation `key` in it, waiting for another process's.
async fn lock(deps_dir: &Path, key: &str) -> Result<std::fs::File, InstallError> {
    let (deps_dir, key) = (deps_dir.to_path_buf(), key.to_owned());
    super::blocking(move || {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(&deps_dir)?;
        std::fs::set_permissions(&deps_dir, std::fs::Permissions::from_mode(0o711))?;
        let file = std::fs::File::create(deps_dir.join(format!("{key}.lock")))?;
        file.lock()?;
        Ok(file)
    })
    .await
}

/// Makes `place` empty (a crash or a failure may have left one) and
/// readable by others, whatever the umask.
async fn fresh_place(place: &Path) -> Result<(), InstallError> {
    let place: PathBuf = place.to_path_buf();
    super::blocking(move || {
        use std::os::unix::fs::PermissionsExt;
        match std::fs::remove_dir_all(&place) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
            _ => {}
        }
        std::fs::create_dir_all(&place)?;
        std::fs::set_permissions(&place, std::fs::Permissions::from_mode(0o755))?;
        Ok(())
    })
    .await
}
