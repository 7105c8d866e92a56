//! Runs in progress on this instance: their cancel switch, their live
//! output and the moment they end, for waiters, event streams and shutdown.

use super::{Envelope, Held};
use crate::runner;
use crate::skill::backend::{Progress, ProgressSink};
use crate::store::RunStatus;
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{Notify, broadcast, mpsc, watch};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// Events a run keeps for a subscriber that falls behind (who then skips
/// ahead): at most this many output chunks of up to 64 KiB, so a slow
/// stream costs at most 4 MiB, and a run with nobody streaming allocates
/// little.
const EVENTS_CAPACITY: usize = 64;

/// What an event stream carries.
#[derive(Debug, Clone)]
pub enum RunEvent {
    /// The call waits for a person: its request.
    Held(Held),
    Status(RunStatus),
    /// A person denied the call: nothing ran. Their note says why.
    Denied {
        note: Option<String>,
    },
    Output(Bytes),
    /// How far the tool got, as it reported (an MCP server's progress).
    Progress(Progress),
    Result(Arc<Envelope>),
}

/// One run in progress.
pub struct LiveRun {
    pub id: Uuid,
    pub cancel: CancellationToken,
    events: broadcast::Sender<RunEvent>,
    /// `None` until the run ends; then its envelope (if it ran).
    done: watch::Sender<Option<Option<Arc<Envelope>>>>,
    /// Set just before the `running` event is sent, so a late subscriber
    /// can tell whether it missed it.
    started: AtomicBool,
}

impl LiveRun {
    pub fn subscribe(&self) -> broadcast::Receiver<RunEvent> {
        self.events.subscribe()
    }

    /// The child is about to start: tells subscribers, and remembers it
    /// for those who subscribe later (see [`LiveRun::has_started`]).
    pub fn mark_started(&self) {
        self.started.store(true, Ordering::Release);
        self.send(RunEvent::Status(RunStatus::Running));
    }

    /// Whether [`LiveRun::mark_started`] was called. Checked after
    /// subscribing: if false, the `running` event is still to come.
    pub fn has_started(&self) -> bool {
        self.started.load(Ordering::Acquire)
    }

    /// Where the backend's progress reports go: to the event streams.
    pub fn progress_sink(self: &Arc<Self>) -> ProgressSink {
        let live = Arc::downgrade(self);
        ProgressSink(Arc::new(move |p| {
            if let Some(live) = live.upgrade() {
                live.send(RunEvent::Progress(p));
            }
        }))
    }

    pub fn send(&self, event: RunEvent) {
        // No subscriber is fine: nobody is streaming this run.
        let _ = self.events.send(event);
    }

    /// A sender for the runner's output chunks, forwarded as events. The
    /// channel is short (8 reads of at most 64 KiB): the runner drops chunks
    /// rather than wait, so a flood of output stays bounded in memory. Await
    /// the handle after the runner returns (and drops the sender), so every
    /// chunk is out before the result.
    pub fn output_sender(self: &Arc<Self>) -> (mpsc::Sender<runner::Event>, tokio::task::JoinHandle<()>) {
        let (tx, mut rx) = mpsc::channel::<runner::Event>(8);
        let this = self.clone();
        let forwarder = tokio::spawn(async move {
            while let Some(runner::Event::Output(chunk)) = rx.recv().await {
                this.send(RunEvent::Output(chunk));
            }
        });
        (tx, forwarder)
    }

    /// Waits for the end; `None` inside when it never ran.
    pub async fn finished(&self) -> Option<Arc<Envelope>> {
        let mut rx = self.done.subscribe();
        loop {
            if let Some(result) = rx.borrow_and_update().clone() {
                return result;
            }
            if rx.changed().await.is_err() {
                return None;
            }
        }
    }

    pub fn is_finished(&self) -> bool {
        self.done.borrow().is_some()
    }
}

/// The registry of live runs.
#[derive(Default)]
pub struct Runs {
    live: Mutex<HashMap<Uuid, Arc<LiveRun>>>,
    /// Cancelled once the server stops taking calls.
    closed: CancellationToken,
    emptied: Notify,
}

impl Runs {
    /// Registers a run, with a receiver subscribed before anything of the
    /// run can happen.
    pub fn register(&self, id: Uuid) -> (Arc<LiveRun>, broadcast::Receiver<RunEvent>) {
        let (events, first) = broadcast::channel(EVENTS_CAPACITY);
        let (done, _) = watch::channel(None);
        let run = Arc::new(LiveRun {
            id,
            cancel: CancellationToken::new(),
            events,
            done,
            started: AtomicBool::new(false),
        });
        self.lock().insert(id, run.clone());
        (run, first)
    }

    pub fn get(&self, id: Uuid) -> Option<Arc<LiveRun>> {
        self.lock().get(&id).cloned()
    }

    /// Marks a run ended, wakes its waiters and forgets it.
    pub fn finish(&self, run: &LiveRun, envelope: Option<Envelope>) {
        let envelope = envelope.map(Arc::new);
        if let Some(e) = &envelope {
            run.send(RunEvent::Result(e.clone()));
        }
        run.done.send_replace(Some(envelope));
        let mut live = self.lock();
        live.remove(&run.id);
        if live.is_empty() {
            self.emptied.notify_waiters();
        }
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn close(&self) {
        self.closed.cancel();
    }

    /// Completes once the server stops taking calls.
    pub async fn closing(&self) {
        self.closed.cancelled().await;
    }

    pub fn is_closed(&self) -> bool {
        self.closed.is_cancelled()
    }

    pub fn cancel_all(&self) {
        for run in self.lock().values() {
            run.cancel.cancel();
        }
    }

    /// Completes once no run is live.
    pub async fn idle(&self) {
        loop {
            let notified = self.emptied.notified();
            if self.is_empty() {
                return;
            }
            notified.await;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, Arc<LiveRun>>> {
        self.live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
