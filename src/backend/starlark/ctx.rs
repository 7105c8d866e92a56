//! What the SDK functions of one evaluation share: its bounds, the
//! server's request it answers, what the script registers while it loads,
//! and the way to the server; and the thread's current evaluation.

use super::bounds::Bounds;
use crate::skill::backend::DeclaredTool;
use anyhow::anyhow;
use serde_json::{Map, Value};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

/// What a script registered while it loaded.
#[derive(Debug, Default)]
pub(super) struct Declared {
    pub tools: Vec<DeclaredTool>,
    pub hooks: Vec<String>,
    pub workflows: Vec<DeclaredTool>,
    pub scanners: Vec<String>,
}

/// The server, asked to act on an evaluation's behalf.
pub(super) trait Remote: Send + Sync {
    /// Asks for `method` (an SDK function) and waits for the answer, or
    /// until `bounds` stop the evaluation.
    fn ask(&self, method: &str, params: Value, bounds: &Bounds) -> Result<Value, String>;
}

/// What the SDK functions of one evaluation work with.
pub(super) struct Ctx {
    pub bounds: Bounds,
    /// The id of the server's request this evaluation answers; the server
    /// acts within that request's scope.
    call: Value,
    /// `Some` while the script loads: only then may it register.
    declared: Option<RefCell<Declared>>,
    remote: Arc<dyn Remote>,
}

impl Ctx {
    pub(super) fn new(bounds: Bounds, call: Value, loading: bool, remote: Arc<dyn Remote>) -> Self {
        Self {
            bounds,
            call,
            declared: loading.then(RefCell::default),
            remote,
        }
    }

    pub(super) fn take_declared(&self) -> Declared {
        self.declared.as_ref().map(RefCell::take).unwrap_or_default()
    }

    pub(super) fn registering(&self, function: &str) -> anyhow::Result<&RefCell<Declared>> {
        self.declared.as_ref().ok_or_else(|| {
            anyhow!("{function} may only be called while the script loads, not from a handler")
        })
    }

    /// Has the server perform SDK function `function` with `args`; the
    /// server checks the skill's permission first.
    pub(super) fn effect(&self, function: &str, mut args: Map<String, Value>) -> anyhow::Result<Value> {
        args.insert("call".to_owned(), self.call.clone());
        self.remote
            .ask(function, Value::Object(args), &self.bounds)
            .map_err(|why| anyhow!(why))
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
