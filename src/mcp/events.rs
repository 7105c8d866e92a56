//! A `tools/call` whose client listens: the run's events (its status and
//! each line of its output) as `notifications/message` at or above the
//! client's log level, and as `notifications/progress` when the request
//! carries a `progressToken`. Bounded: at most [`MAX_NOTES`] of each kind
//! per call, each line cut at [`MAX_LINE`] bytes.
#![expect(
    deprecated,
    reason = "MCP logging is deprecated by SEP-2577, and still part of the protocol"
)]

use super::logging::rank;
use crate::catalog::Catalog;
use crate::invoke::{Call, Called, Delivery, InvokeError, Invoker, LiveRun, RunEvent};
use crate::store::RunStatus;
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam, ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};
use std::sync::Arc;
use tokio::sync::broadcast::{self, error::RecvError};

/// Notifications of each kind one call sends at most; a note says when
/// more were left out.
pub const MAX_NOTES: u32 = 1000;

/// The longest output line sent whole, in bytes.
pub const MAX_LINE: usize = 4096;

/// Who hears of a call's run, and how.
pub(super) struct Listener {
    peer: Peer<RoleServer>,
    progress: Option<ProgressToken>,
    level: Option<LoggingLevel>,
    /// The logger name: the tool's.
    logger: String,
    sent: u32,
    steps: u32,
    /// Output not yet ended by a newline.
    partial: Vec<u8>,
    /// Whether the line being written was sent cut at [`MAX_LINE`].
    cut: bool,
}

impl Listener {
    /// A listener, when the request asks for progress or a log level.
    pub(super) fn new(
        peer: Peer<RoleServer>,
        progress: Option<ProgressToken>,
        level: Option<LoggingLevel>,
        tool: &str,
    ) -> Option<Self> {
        (progress.is_some() || level.is_some()).then(|| Self {
            peer,
            progress,
            level,
            logger: tool.to_owned(),
            sent: 0,
            steps: 0,
            partial: Vec::new(),
            cut: false,
        })
    }

    async fn tell(&mut self, level: LoggingLevel, text: String) {
        self.step(&text).await;
        if self.level.is_none_or(|wanted| rank(level) < rank(wanted)) {
            return;
        }
        self.sent += 1;
        let text = match self.sent {
            n if n < MAX_NOTES => text,
            MAX_NOTES => format!("[skilld: more than {MAX_NOTES} messages; the rest are in the run log]"),
            _ => return,
        };
        let mut param = LoggingMessageNotificationParam::new(level, text.into());
        param.logger = Some(self.logger.clone());
        // A client that went away stops nothing: the run goes on.
        let _ = self.peer.notify_logging_message(param).await;
    }

    async fn step(&mut self, text: &str) {
        let Some(token) = self.progress.clone() else {
            return;
        };
        self.steps += 1;
        if self.steps > MAX_NOTES {
            return;
        }
        let mut param = ProgressNotificationParam::new(token, f64::from(self.steps));
        param.message = Some(text.to_owned());
        let _ = self.peer.notify_progress(param).await;
    }

    async fn output(&mut self, mut chunk: &[u8]) {
        if self.cut {
            // The rest of a line already sent cut.
            let Some(end) = chunk.iter().position(|&b| b == b'\n') else {
                return;
            };
            self.cut = false;
            chunk = &chunk[end + 1..];
        }
        self.partial.extend_from_slice(chunk);
        while let Some(end) = self.partial.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=end).collect();
            self.line(&line[..end]).await;
        }
        if self.partial.len() > MAX_LINE {
            let line = std::mem::take(&mut self.partial);
            self.line(&line).await;
            self.cut = true;
        }
    }

    async fn line(&mut self, bytes: &[u8]) {
        let cut = &bytes[..bytes.len().min(MAX_LINE)];
        let text = String::from_utf8_lossy(cut).trim_end_matches('\r').to_owned();
        self.tell(LoggingLevel::Info, text).await;
    }

    async fn event(&mut self, event: RunEvent) {
        match event {
            RunEvent::Output(chunk) => self.output(&chunk).await,
            RunEvent::Status(RunStatus::Running) => {
                self.tell(LoggingLevel::Info, "run started".to_owned()).await;
            }
            RunEvent::Status(status) => {
                self.tell(LoggingLevel::Info, format!("run {}", status.as_str()))
                    .await
            }
            RunEvent::Result(envelope) => {
                if !self.partial.is_empty() {
                    let rest = std::mem::take(&mut self.partial);
                    self.line(&rest).await;
                }
                let (level, text) = match &envelope.error {
                    None => (LoggingLevel::Info, format!("run {} succeeded", envelope.run_id)),
                    Some(e) => (
                        LoggingLevel::Error,
                        format!("run {} failed: {e}", envelope.run_id),
                    ),
                };
                self.tell(level, text).await;
            }
            RunEvent::Progress(p) => self.tell(LoggingLevel::Info, progress_text(&p)).await,
            RunEvent::Held(_) | RunEvent::Denied { .. } => {}
        }
    }

    /// Passes the run's events on until it ends.
    async fn follow(&mut self, live: &LiveRun, mut events: broadcast::Receiver<RunEvent>) {
        loop {
            tokio::select! {
                biased;
                event = events.recv() => match event {
                    Ok(RunEvent::Result(envelope)) => return self.event(RunEvent::Result(envelope)).await,
                    Ok(event) => self.event(event).await,
                    Err(RecvError::Lagged(n)) => {
                        self.tell(LoggingLevel::Warning, format!("[skilld: {n} events skipped]")).await;
                    }
                    Err(RecvError::Closed) => return,
                },
                _ = live.finished() => {
                    while let Ok(event) = events.try_recv() {
                        self.event(event).await;
                    }
                    return;
                }
            }
        }
    }
}

/// Runs `call` as [`Invoker::call`] does; with a listener (and no wait for
/// a person), it follows the run to tell the client of its events.
pub(super) async fn call(
    invoker: &Arc<Invoker>,
    catalog: &Arc<Catalog>,
    mut call: Call,
    listener: Option<Listener>,
) -> Result<Called, InvokeError> {
    // A waited call follows no events: it may never run.
    let Some(mut listener) = listener.filter(|_| call.wait.is_zero()) else {
        return invoker.call(catalog, call).await;
    };
    call.delivery = Delivery::Started;
    let (live, events) = match invoker.call(catalog, call).await? {
        Called::Started { live, events } => (live, events),
        other => return Ok(other),
    };
    listener.follow(&live, events).await;
    Called::when_finished(&live).await
}

/// An upstream's progress report, in words: "3/10: copying".
fn progress_text(p: &crate::skill::backend::Progress) -> String {
    let done = match p.total {
        Some(total) => format!("{}/{total}", p.progress),
        None => p.progress.to_string(),
    };
    match &p.message {
        Some(m) => format!("progress {done}: {m}"),
        None => format!("progress {done}"),
    }
}
