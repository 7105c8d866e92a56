//! Following a run wherever it runs: waiting for it to end, and its
//! events (status changes, live output, the result) as a stream, whether
//! it runs here, on another instance, or has not started yet.

use super::{Envelope, Held, InvokeError, LiveRun, MAX_WAIT, RunEvent, Runs};
use crate::store::{Run, RunLog, RunStatus, StoreError};
use futures_util::stream::{self, BoxStream, StreamExt};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::sync::mpsc;
use tokio::time::Instant;
use uuid::Uuid;

/// Runs wherever they run: waiting for them, their events, cancelling
/// them (`cancel.rs`). What a handler that reads or stops runs holds,
/// apart from the pipeline that makes them ([`super::Invoker::follower`]).
pub struct Follower {
    pub(super) run_log: Arc<dyn RunLog>,
    pub(super) runs: Arc<Runs>,
    /// One share per open event stream.
    streams: Arc<crate::share::Pool>,
    /// How often a waiter re-reads a run it was not told of.
    wait_poll: Duration,
    /// How long an event stream may stay open.
    max_stream: Duration,
    /// SIGTERM → SIGKILL delay of a cancelled run.
    pub(super) grace: Duration,
}

/// Room for one open event stream (see [`Follower::stream_permit`]): the
/// room is given back when this is dropped with its stream.
pub struct StreamPermit {
    _share: crate::share::Share,
}

/// How long `follow` waits for a change before checking that its
/// subscriber is still there.
const FOLLOW_POLL: Duration = Duration::from_secs(15);

impl Follower {
    pub(super) fn new(run_log: Arc<dyn RunLog>, runs: Arc<Runs>, settings: &super::RunSettings) -> Self {
        Self {
            run_log,
            runs,
            streams: crate::share::Pool::new(settings.max_streams, settings.max_streams_per_caller),
            wait_poll: settings.wait_poll,
            max_stream: settings.max_stream,
            grace: settings.grace,
        }
    }

    /// Run `id`; with a wait, once it has ended or the wait has passed.
    /// Through the store, so a run decided or finished on another
    /// instance wakes this waiter too.
    pub async fn run_after(&self, id: Uuid, wait: Duration) -> Result<Run, InvokeError> {
        if wait > MAX_WAIT {
            return Err(InvokeError::WaitTooLong);
        }
        if wait.is_zero() {
            return Ok(self.run_log.get_run(id).await?);
        }
        Ok(self.wait_final(id, wait).await?)
    }

    /// Reads a run, waiting up to `within` for it to reach a final status.
    /// Woken by the store's change notifications (from any instance on
    /// PostgreSQL), and re-reading at least every `wait_poll`.
    pub async fn wait_final(&self, id: Uuid, within: Duration) -> Result<Run, StoreError> {
        self.wait_until(id, within, |run| run.status.is_final()).await
    }

    /// Reads a run, waiting up to `within` until `done` holds for it (see
    /// [`Follower::wait_final`]). Returns the last read either way, and at
    /// once when the server is stopping and the run is not running here
    /// (it would hold the shutdown for as long as a person takes).
    pub async fn wait_until(
        &self,
        id: Uuid,
        within: Duration,
        done: impl Fn(&Run) -> bool,
    ) -> Result<Run, StoreError> {
        let deadline = Instant::now() + within;
        // Subscribed before the first read, so no change can slip between.
        let mut changes = self.run_log.changes();
        loop {
            let run = self.run_log.get_run(id).await?;
            if done(&run) || Instant::now() >= deadline || self.abandons(id) {
                return Ok(run);
            }
            let until = deadline.min(Instant::now() + self.wait_poll);
            let changed = async {
                loop {
                    match changes.recv().await {
                        Ok(changed) if changed == id => return,
                        Ok(_) => {}
                        Err(RecvError::Lagged(_)) => return,
                        Err(RecvError::Closed) => std::future::pending::<()>().await,
                    }
                }
            };
            tokio::select! {
                _ = tokio::time::timeout_at(until, changed) => {}
                () = self.runs.closing() => {}
            }
        }
    }

    /// Whether a waiter for run `id` should stop waiting: the server is
    /// stopping, and the run is not one of those it lets finish.
    fn abandons(&self, id: Uuid) -> bool {
        self.runs.is_closed() && self.runs.get(id).is_none()
    }

    /// The events of run `id` until it ends: live from this instance when
    /// it runs here (subscribed before anything else, so no output is
    /// missed), its stored end when it is over, else followed through the
    /// store, since a run still waiting may end without ever running.
    /// The stream is `holder`'s (see [`crate::share::holder`]).
    pub async fn events(
        self: &Arc<Self>,
        id: Uuid,
        holder: &str,
    ) -> Result<BoxStream<'static, RunEvent>, InvokeError> {
        let permit = self.stream_permit(holder)?;
        if let Some(live) = self.runs.get(id)
            && live.has_started()
        {
            let rx = live.subscribe();
            let run = self.run_log.get_run(id).await?;
            return Ok(self.bounded(live_events(live, rx, Some(run.status)), permit));
        }
        let run = self.run_log.get_run(id).await?;
        if run.status.is_final() {
            let mut events = vec![RunEvent::Status(run.status)];
            events.extend(stored_result(&run).map(RunEvent::Result));
            return Ok(stream::iter(events).boxed());
        }
        Ok(self.bounded(self.follow(id, None), permit))
    }

    /// The events of a call just held for a person: first the request,
    /// then as [`Follower::follow`].
    pub fn held_events(self: &Arc<Self>, held: Held, permit: StreamPermit) -> BoxStream<'static, RunEvent> {
        let events = stream::iter([RunEvent::Held(held)])
            .chain(self.follow(held.run_id, Some(RunStatus::PendingApproval)))
            .boxed();
        self.bounded(events, permit)
    }

    /// The events of a run just started here (see [`live_events`]).
    pub fn started_events(
        &self,
        live: Arc<LiveRun>,
        rx: broadcast::Receiver<RunEvent>,
        permit: StreamPermit,
    ) -> BoxStream<'static, RunEvent> {
        self.bounded(live_events(live, rx, None), permit)
    }

    /// Room for one more event stream of `holder`'s (see
    /// [`crate::share::holder`]): take it before starting a call whose
    /// events will be streamed, so a call never runs for a stream that
    /// cannot be opened.
    pub fn stream_permit(&self, holder: &str) -> Result<StreamPermit, InvokeError> {
        use crate::share::Refused;
        self.streams
            .take(holder)
            .map(|share| StreamPermit { _share: share })
            .map_err(|refused| match refused {
                Refused::Full { total } => InvokeError::TooManyStreams(total),
                Refused::OverShare { per_holder } => InvokeError::StreamShare(per_holder),
            })
    }

    /// A stream that holds its permit while it lasts and ends after
    /// [`RunSettings::max_stream`](super::RunSettings::max_stream).
    pub(super) fn bounded<T: Send + 'static>(
        &self,
        events: BoxStream<'static, T>,
        permit: StreamPermit,
    ) -> BoxStream<'static, T> {
        events
            .take_until(tokio::time::sleep(self.max_stream))
            .map(move |event| {
                let _held = &permit;
                event
            })
            .boxed()
    }

    /// Follows a run that is not (yet) live here: its status changes as the
    /// store sees them (from any instance), its live output once it runs on
    /// this instance, and its result; then the stream ends. A task feeds
    /// the stream and stops when the stream is dropped.
    pub fn follow(self: &Arc<Self>, id: Uuid, known: Option<RunStatus>) -> BoxStream<'static, RunEvent> {
        let (tx, rx) = mpsc::channel::<RunEvent>(16);
        let this = self.clone();
        tokio::spawn(async move { this.feed(id, known, tx).await });
        stream::unfold(
            rx,
            |mut rx| async move { rx.recv().await.map(|event| (event, rx)) },
        )
        .boxed()
    }

    /// The task behind [`Follower::follow`]. Returns when the run has ended
    /// or the subscriber has gone.
    async fn feed(&self, id: Uuid, known: Option<RunStatus>, tx: mpsc::Sender<RunEvent>) {
        // The last status sent, so each is sent once.
        let mut last = known;
        loop {
            let seen = last;
            let changed = |run: &Run| Some(run.status) != seen || run.status.is_final();
            let run = match self.wait_until(id, FOLLOW_POLL, changed).await {
                Ok(run) => run,
                Err(e) => {
                    tracing::warn!(run = %id, error = %e, "cannot follow the run");
                    return;
                }
            };
            // A run that started and ended between two looks still
            // says it ran: its stream shows `running` before its end.
            let ran_unseen = run.status.is_final()
                && run.started_at.is_some()
                && last != Some(RunStatus::Running)
                && last != Some(run.status);
            if ran_unseen && tx.send(RunEvent::Status(RunStatus::Running)).await.is_err() {
                return;
            }
            if last != Some(run.status) {
                last = Some(run.status);
                let event = match run.status {
                    RunStatus::Denied => RunEvent::Denied {
                        note: run.note.clone().filter(|n| !n.is_empty()),
                    },
                    status => RunEvent::Status(status),
                };
                if tx.send(event).await.is_err() {
                    return;
                }
            }
            if run.status.is_final() {
                if let Some(result) = stored_result(&run) {
                    let _ = tx.send(RunEvent::Result(result)).await;
                }
                return;
            }
            if self.abandons(id) {
                return;
            }
            if let Some(live) = self.runs.get(id)
                && relay(&live, &mut last, &tx).await.is_break()
            {
                return;
            }
            if tx.is_closed() {
                return;
            }
        }
    }
}

/// Relays the events of a run live on this instance until it ends. Breaks
/// when the stream is over (its result sent) or the subscriber has gone;
/// continues when the run ended without a result, which the store has.
async fn relay(
    live: &LiveRun,
    last: &mut Option<RunStatus>,
    tx: &mpsc::Sender<RunEvent>,
) -> std::ops::ControlFlow<()> {
    use std::ops::ControlFlow::{Break, Continue};
    let mut events = live.subscribe();
    if live.has_started() && *last != Some(RunStatus::Running) {
        *last = Some(RunStatus::Running);
        if tx.send(RunEvent::Status(RunStatus::Running)).await.is_err() {
            return Break(());
        }
    }
    loop {
        // The end is watched beside the events (a run can end without a
        // result), and so is the subscriber.
        let received = tokio::select! {
            biased;
            received = events.recv() => received,
            _ = live.finished() => return Continue(()),
            () = tx.closed() => return Break(()),
        };
        let event = match received {
            Ok(RunEvent::Result(envelope)) => {
                let _ = tx.send(RunEvent::Status(envelope.run_status())).await;
                let _ = tx.send(RunEvent::Result(envelope)).await;
                return Break(());
            }
            Ok(RunEvent::Status(status)) if *last != Some(status) => {
                *last = Some(status);
                RunEvent::Status(status)
            }
            Ok(RunEvent::Output(chunk)) => RunEvent::Output(chunk),
            Ok(RunEvent::Progress(p)) => RunEvent::Progress(p),
            Ok(RunEvent::Status(_) | RunEvent::Held(_) | RunEvent::Denied { .. })
            | Err(RecvError::Lagged(_)) => {
                continue;
            }
            // Ended: the store has how.
            Err(RecvError::Closed) => return Continue(()),
        };
        if tx.send(event).await.is_err() {
            return Break(());
        }
    }
}

/// The envelope a finished run stored, if it has one.
fn stored_result(run: &Run) -> Option<Arc<Envelope>> {
    let result = run.result.clone()?;
    match serde_json::from_value::<Envelope>(result) {
        Ok(envelope) => Some(Arc::new(envelope)),
        Err(e) => {
            tracing::warn!(run = %run.id, error = %e, "the stored result is not an envelope");
            None
        }
    }
}

/// A live run's events until its result: `initial` first, if given.
fn live_events(
    live: Arc<LiveRun>,
    rx: broadcast::Receiver<RunEvent>,
    initial: Option<RunStatus>,
) -> BoxStream<'static, RunEvent> {
    struct State {
        live: Arc<LiveRun>,
        rx: broadcast::Receiver<RunEvent>,
        initial: Option<RunStatus>,
        done: bool,
    }
    let state = State {
        live,
        rx,
        initial,
        done: false,
    };
    stream::unfold(state, |mut st| async move {
        if st.done {
            return None;
        }
        if let Some(status) = st.initial.take() {
            return Some((RunEvent::Status(status), st));
        }
        let event = next_live(&mut st.rx, &st.live).await?;
        st.done = matches!(event, RunEvent::Result(_));
        Some((event, st))
    })
    .boxed()
}

/// The next event of a live run: `None` once it has ended without a
/// result. The live run holds the sender, so `recv` alone would wait
/// forever for a run that ends without a result (cancelled before it
/// started): its end is watched too, events first.
async fn next_live(rx: &mut broadcast::Receiver<RunEvent>, live: &LiveRun) -> Option<RunEvent> {
    loop {
        let received = tokio::select! {
            biased;
            received = rx.recv() => received,
            ended = live.finished() => return ended.map(RunEvent::Result),
        };
        match received {
            Ok(event) => return Some(event),
            // A slow reader missed some output; the result still comes.
            Err(RecvError::Lagged(_)) => continue,
            Err(RecvError::Closed) => return live.finished().await.map(RunEvent::Result),
        }
    }
}
