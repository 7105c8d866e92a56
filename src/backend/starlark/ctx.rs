//! What the SDK functions of one evaluation share: the skill, the bounds,
//! what the script registers while it loads, and the evaluation's own
//! directory; and the thread's current evaluation.

use super::Shared;
use super::bounds::Bounds;
use crate::skill::backend::DeclaredTool;
use anyhow::{anyhow, bail};
use std::cell::{OnceCell, RefCell};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

/// What a script registered while it loaded.
#[derive(Debug, Default)]
pub(super) struct Declared {
    pub tools: Vec<DeclaredTool>,
    pub hooks: Vec<String>,
}

/// What the SDK functions of one evaluation work with.
pub(super) struct Ctx {
    pub shared: Arc<Shared>,
    pub bounds: Bounds,
    /// `Some` while the script loads: only then may it register.
    declared: Option<RefCell<Declared>>,
    /// The evaluation's own directory, made when first needed.
    pub scratch: Scratch,
}

impl Ctx {
    pub(super) fn new(shared: Arc<Shared>, bounds: Bounds, loading: bool) -> Self {
        let scratch = Scratch::new(&shared);
        Self {
            shared,
            bounds,
            declared: loading.then(RefCell::default),
            scratch,
        }
    }

    pub(super) fn take_declared(&self) -> Declared {
        self.declared.as_ref().map(RefCell::take).unwrap_or_default()
    }

    /// Fails unless the skill declares `permission`.
    pub(super) fn require(&self, function: &str, permission: &str) -> anyhow::Result<()> {
        if self.shared.allows(permission) {
            return Ok(());
        }
        bail!(
            "{function} needs the permission '{permission}', which skill '{}' does not declare",
            self.shared.skill
        )
    }

    pub(super) fn registering(&self, function: &str) -> anyhow::Result<&RefCell<Declared>> {
        self.declared.as_ref().ok_or_else(|| {
            anyhow!("{function} may only be called while the script loads, not from a handler")
        })
    }
}

thread_local! {
    /// The context of the evaluation this thread runs. Not the evaluator's
    /// `extra`: that needs an unsafe trait implementation.
    static CURRENT: RefCell<Option<Rc<Ctx>>> = const { RefCell::new(None) };
}

/// Makes `ctx` the thread's context until the answer is dropped.
pub(super) fn enter(ctx: Rc<Ctx>) -> Entered {
    Entered(CURRENT.with(|c| c.replace(Some(ctx))))
}

/// Restores the context that was current before [`enter`].
pub(super) struct Entered(Option<Rc<Ctx>>);

impl Drop for Entered {
    fn drop(&mut self) {
        let before = self.0.take();
        CURRENT.with(|c| c.replace(before));
    }
}

/// The context of the evaluation this thread runs.
pub(super) fn ctx() -> anyhow::Result<Rc<Ctx>> {
    CURRENT
        .with(|c| c.borrow().clone())
        .ok_or_else(|| anyhow!("the skilld SDK is not available in this evaluation"))
}

/// An evaluation's own directory under the scratch root (the `TMPDIR` and
/// `HOME` of the programs it runs), made when first needed and removed
/// with the evaluation.
pub(super) struct Scratch {
    pub(super) path: PathBuf,
    made: OnceCell<()>,
}

impl Scratch {
    pub(super) fn new(shared: &Shared) -> Self {
        let name = format!("starlark-{}-{}", shared.skill, uuid::Uuid::now_v7());
        Self {
            path: shared.settings.scratch_dir.join(name),
            made: OnceCell::new(),
        }
    }

    /// The directory, made (and given to the sandbox's user) if need be.
    pub(super) fn make(&self, shared: &Shared) -> anyhow::Result<&Path> {
        if self.made.get().is_none() {
            self.create(shared)
                .map_err(|e| anyhow!("cannot make the evaluation's directory: {e}"))?;
            let _ = self.made.set(());
        }
        Ok(&self.path)
    }

    fn create(&self, shared: &Shared) -> std::io::Result<()> {
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        shared
            .sandbox
            .private_dir(&shared.settings.scratch_dir, &name, shared.trust)
            .map(drop)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if self.made.get().is_some()
            && let Err(e) = std::fs::remove_dir_all(&self.path)
        {
            let dir = self.path.display();
            tracing::warn!(%dir, error = %e, "cannot remove a Starlark evaluation's directory");
        }
    }
}
