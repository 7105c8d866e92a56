//! Progress of the long verbs, drawn on stderr only when stderr is a
//! terminal: pipes, logs and tests that capture stderr get nothing from
//! here, so what they read stays what the verbs say (`docs/api.md`, "The
//! command line").

use crate::install::client::Observer;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;

/// The bar drawn now, if any, by its number, for [`LogWriter`]: the log
/// is set up once, before any verb draws.
static DRAWN: Mutex<Option<(u64, ProgressBar)>> = Mutex::new(None);

/// The number of the next bar drawn.
static NEXT: AtomicU64 = AtomicU64::new(0);

/// How often a spinner turns while nothing else redraws it.
const TICK: Duration = Duration::from_millis(120);

const BYTES_OF_TOTAL: &str = "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec}";
const BYTES_SO_FAR: &str = "{spinner} {msg} {bytes}";
const SPINNER: &str = "{spinner} {wide_msg}";

/// A bar or a spinner on stderr, or nothing away from a terminal. It is
/// cleared when the work ends or when it is dropped, so the verb's own
/// lines are all that stays.
pub struct Progress {
    bar: Option<ProgressBar>,
    /// Its number in [`DRAWN`].
    number: u64,
}

impl Progress {
    /// Bytes moving (`what`: `downloading`, `uploading`), shown against
    /// their total once [`Observer::length`] gives it.
    pub fn bytes(what: &str) -> Self {
        Self::drawn(BYTES_SO_FAR, what)
    }

    /// A spinner saying `message`.
    pub fn spinner(message: &str) -> Self {
        Self::drawn(SPINNER, message)
    }

    fn drawn(template: &str, message: &str) -> Self {
        let number = NEXT.fetch_add(1, Ordering::Relaxed);
        if !shown() {
            return Self { bar: None, number };
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        bar.set_style(style(template));
        bar.set_message(message.to_owned());
        bar.enable_steady_tick(TICK);
        *drawn() = Some((number, bar.clone()));
        Self {
            bar: Some(bar),
            number,
        }
    }

    /// A sender whose lines become the spinner's message (an install's
    /// `Upload::follow`), or `None` when nothing is drawn, so that nobody
    /// sends lines no one reads. Needs the async runtime.
    pub fn follow(&self) -> Option<UnboundedSender<String>> {
        let bar = self.bar.clone()?;
        let (lines, mut read) = tokio::sync::mpsc::unbounded_channel::<String>();
        // A line after the spinner is cleared draws nothing: the cleared
        // bar stays hidden.
        tokio::spawn(async move {
            while let Some(line) = read.recv().await {
                bar.set_message(line);
            }
        });
        Some(lines)
    }

    /// Clears what is drawn.
    pub fn clear(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
            let mut drawn = drawn();
            // A bar drawn since is not this one's to forget.
            if drawn.as_ref().is_some_and(|(n, _)| *n == self.number) {
                *drawn = None;
            }
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.clear();
    }
}

impl Observer for Progress {
    fn length(&self, bytes: Option<u64>) {
        if let (Some(bar), Some(total)) = (&self.bar, bytes) {
            bar.set_length(total);
            bar.set_style(style(BYTES_OF_TOTAL));
            // Shown at once: a small upload can end before the next tick,
            // and the server's lines then take the bar's place.
            bar.force_draw();
        }
    }

    fn advanced(&self, bytes: u64) {
        if let Some(bar) = &self.bar {
            bar.inc(bytes);
        }
    }

    fn follows(&self) -> bool {
        self.bar.is_some()
    }

    /// The server's lines replace the byte count: what is sent is sent.
    fn said(&self, line: &str) {
        if let Some(bar) = &self.bar {
            bar.set_style(style(SPINNER));
            bar.set_message(line.to_owned());
        }
    }

    fn finished(&self) {
        self.clear();
    }
}

fn drawn() -> std::sync::MutexGuard<'static, Option<(u64, ProgressBar)>> {
    DRAWN.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Stderr for the log: a line logged while a bar is drawn goes above the
/// bar, which is drawn again beneath it, instead of running into it.
pub struct LogWriter;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = LogWriter;

    fn make_writer(&'a self) -> Self::Writer {
        LogWriter
    }
}

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // Cloned out, so that the lock is not held while drawing.
        let bar = drawn().as_ref().map(|(_, bar)| bar.clone());
        match bar {
            Some(bar) => bar.suspend(|| std::io::stderr().write(buf)),
            None => std::io::stderr().write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// Whether progress is drawn: stderr is a terminal that can redraw a line.
fn shown() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("TERM").is_none_or(|t| t != "dumb")
}

/// `template`, or indicatif's default should it not parse (it is ours,
/// and a test parses each).
fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_spinner())
        .progress_chars("=> ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_templates_parse() {
        for template in [BYTES_OF_TOTAL, BYTES_SO_FAR, SPINNER] {
            assert!(ProgressStyle::with_template(template).is_ok(), "{template}");
        }
    }

    #[test]
    fn away_from_a_terminal_nothing_is_drawn_or_followed() {
        // `cargo test` captures stderr: it is no terminal.
        if std::io::stderr().is_terminal() {
            return;
        }
        let progress = Progress::spinner("installing");
        assert!(progress.bar.is_none());
        assert!(!progress.follows());
        assert!(progress.follow().is_none());
    }
}
