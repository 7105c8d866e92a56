//! What bounds one evaluation: a deadline, a cancellation and a heap
//! budget. Starlark checks them every thousand loop turns or calls (its
//! cancellation hook and heap limit); a before-statement hook checks them
//! before every statement too, so that a few statements that each double a
//! string cannot outgrow the budget between two of Starlark's own checks.

use starlark::codemap::FileSpanRef;
use starlark::eval::{BeforeStmtFunc, BeforeStmtFuncDyn, Evaluator};
use starlark::values::Value;
use starlark::values::dict::DictRef;
use starlark::values::list::ListRef;
use starlark::values::tuple::TupleRef;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The Starlark heap one evaluation may fill.
pub(super) const MAX_HEAP: usize = 64 * 1024 * 1024;

/// The deepest value made JSON: as deep as any JSON the server parses
/// (serde_json's limit), which its threads walk recursively.
const MAX_DEPTH: usize = 128;
/// The most values, and bytes of strings, a value made JSON may hold:
/// shared parts count each time they appear, as they would in the text.
const MAX_NODES: usize = 1_000_000;
const MAX_TEXT: usize = 16 * 1024 * 1024;

/// A deadline and a cancellation.
#[derive(Debug, Clone)]
pub(super) struct Bounds {
    pub deadline: Instant,
    pub cancel: CancellationToken,
}

/// Why an evaluation gave no value.
#[derive(Debug)]
pub(super) enum Failure {
    TimedOut,
    Cancelled,
    Error(String),
}

impl Bounds {
    pub(super) fn new(timeout: Duration, cancel: CancellationToken) -> Self {
        let now = Instant::now();
        // A timeout too long to add is as good as a day.
        let deadline = now
            .checked_add(timeout)
            .unwrap_or_else(|| now + Duration::from_secs(86_400));
        Self { deadline, cancel }
    }

    /// Why the evaluation must stop now, if it must.
    pub(super) fn stopped(&self) -> Option<Failure> {
        if self.cancel.is_cancelled() {
            Some(Failure::Cancelled)
        } else if Instant::now() >= self.deadline {
            Some(Failure::TimedOut)
        } else {
            None
        }
    }

    /// The time left before the deadline.
    pub(super) fn left(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }
}

/// Bounds `eval` by `bounds` and [`MAX_HEAP`].
pub(super) fn apply(eval: &mut Evaluator<'_, '_, '_>, bounds: &Bounds) -> Result<(), Failure> {
    eval.set_max_heap_size(MAX_HEAP)
        .map_err(|e| Failure::Error(format!("cannot bound its memory: {e}")))?;
    let checked = bounds.clone();
    eval.set_check_cancelled(Box::new(move || checked.stopped().is_some()));
    eval.before_stmt_for_dap(BeforeStmtFunc::from_dyn(Box::new(Guard(bounds.clone()))));
    Ok(())
}

/// The bytes `eval`'s heaps hold.
fn heap_used(eval: &Evaluator<'_, '_, '_>) -> usize {
    eval.heap()
        .allocated_bytes()
        .saturating_add(eval.frozen_heap().allocated_bytes())
}

fn over_budget() -> String {
    format!(
        "the script used more than {} MiB of memory",
        MAX_HEAP / (1024 * 1024)
    )
}

/// Checks the bounds before each statement.
struct Guard(Bounds);

impl<'e> BeforeStmtFuncDyn<'e> for Guard {
    fn call<'v>(
        &mut self,
        _span: FileSpanRef,
        _continued: bool,
        eval: &mut Evaluator<'v, '_, 'e>,
    ) -> starlark::Result<()> {
        match self.0.stopped() {
            Some(Failure::Cancelled) => Err(stop("cancelled")),
            Some(_) => Err(stop("timed out")),
            None if heap_used(eval) > MAX_HEAP => Err(stop(&over_budget())),
            None => Ok(()),
        }
    }
}

fn stop(why: &str) -> starlark::Error {
    starlark::Error::new_other(anyhow::anyhow!("{why}"))
}

/// What an error that ended an evaluation means: a bound that was reached,
/// or the script's own error.
pub(super) fn failure(e: &starlark::Error, eval: &Evaluator<'_, '_, '_>, bounds: &Bounds) -> Failure {
    if let Some(stopped) = bounds.stopped() {
        return stopped;
    }
    if heap_used(eval) > MAX_HEAP {
        return Failure::Error(over_budget());
    }
    let why = describe(e);
    if why.starts_with("Immutable") {
        return Failure::Error(format!(
            "{why}: the script's globals are frozen once it has loaded, so a handler cannot change them"
        ));
    }
    Failure::Error(why)
}

/// An error as one line: its message and where it arose.
pub(super) fn describe(e: &starlark::Error) -> String {
    let message = e.without_diagnostic().to_string();
    let message = message.split_whitespace().collect::<Vec<_>>().join(" ");
    let message: String = message.chars().take(1000).collect();
    match e.span() {
        Some(span) => format!("{message} (at {span})"),
        None => message,
    }
}

/// Fails when `value` made JSON would nest deeper than [`MAX_DEPTH`] or
/// outgrow [`MAX_NODES`] or [`MAX_TEXT`]; walked without recursion, so
/// that neither a deep value nor one that shares its parts many times over
/// can exhaust the stack or the memory in the conversion.
pub(super) fn check_json(value: Value<'_>) -> Result<(), String> {
    let mut todo = vec![(value, 1)];
    let (mut nodes, mut text) = (0usize, 0usize);
    while let Some((v, depth)) = todo.pop() {
        nodes += 1;
        if depth > MAX_DEPTH {
            return Err(format!("nests deeper than {MAX_DEPTH} levels"));
        }
        if nodes > MAX_NODES {
            return Err(format!("holds more than {MAX_NODES} values"));
        }
        if let Some(s) = v.unpack_str() {
            text = text.saturating_add(s.len());
            if text > MAX_TEXT {
                return Err(format!(
                    "holds more than {} MiB of text",
                    MAX_TEXT / (1024 * 1024)
                ));
            }
        } else if let Some(list) = ListRef::from_value(v) {
            todo.extend(list.iter().map(|i| (i, depth + 1)));
        } else if let Some(tuple) = TupleRef::from_value(v) {
            todo.extend(tuple.iter().map(|i| (i, depth + 1)));
        } else if let Some(dict) = DictRef::from_value(v) {
            todo.extend(dict.iter().flat_map(|(k, i)| [(k, depth + 1), (i, depth + 1)]));
        }
    }
    Ok(())
}
