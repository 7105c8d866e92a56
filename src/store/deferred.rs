//! Answering before a run's end commits (`docs/design.md` §5): the one
//! durable write on a call's critical path is its start.
//!
//! [`Deferred`] wraps either backend's [`RunLog`], and nothing else: the
//! ends it holds are of runs that started, which no other aggregate ends (a
//! decision or an expiry ends only runs still waiting), and the reads that
//! must show them are the run log's. [`RunLog::finish_run_soon`] keeps the
//! end in memory, tells this instance's waiters, and queues the write; a
//! task commits queued ends in batches (after the configured commit
//! interval, if any) while the answer is already on its way. Until an end
//! commits, this wrapper's own reads of the run (`get_run`, `list_runs`,
//! `run_by_key`) show it ended; another instance reads `running` for at
//! most one commit interval; a crash in that window leaves the run
//! `running` with its start intact, and start-up recovery marks it
//! `interrupted`.

use super::runs::check_final;
use super::{NewRun, Run, RunEnd, RunFilter, RunLog, RunPage, RunStatus, StoreError};
use chrono::{DateTime, SubsecRound, Utc};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio_util::sync::{CancellationToken, DropGuard};
use uuid::Uuid;

/// Ends held in memory at most; past it a caller waits for room, so a
/// database that stopped answering slows calls instead of growing memory.
const MAX_QUEUED: usize = 4096;
/// Ends committed together at most.
const MAX_BATCH: usize = 256;
/// How long an end keeps being retried while the database cannot take
/// it; then it is given up (the log says so) and the run stays `running`
/// until recovery marks it `interrupted`.
const GIVE_UP_AFTER: Duration = Duration::from_secs(60);
/// The longest commit interval a configuration may ask for: another
/// instance may read a stale `running` for this long.
pub const MAX_COMMIT_INTERVAL: Duration = Duration::from_secs(10);

/// `run` as it reads once `end` commits; a run already final in the store
/// stays as it is (an end is written only over a live run).
fn apply(end: &RunEnd, run: &mut Run) {
    if run.status.is_final() {
        return;
    }
    run.status = end.status;
    run.result.clone_from(&end.result);
    run.finished_at = Some(end.at);
}

/// Ends not yet committed, by run id; shared, so that a read's snapshot
/// of them copies no result.
type Ends = Arc<Mutex<HashMap<Uuid, Arc<RunEnd>>>>;

/// What the committing task is asked to do.
enum Job {
    /// Commit the end of this run (held in [`Ends`]).
    End(Uuid),
    /// Answer once every end queued before this one has committed.
    Flush(oneshot::Sender<()>),
}

/// A run log whose runs' ends commit after the answer (see the module).
pub struct Deferred {
    inner: Arc<dyn RunLog>,
    ends: Ends,
    queue: mpsc::Sender<Job>,
    changes: broadcast::Sender<Uuid>,
    /// Stops forwarding the inner store's changes with the last handle.
    _forwarding: DropGuard,
}

impl Deferred {
    /// Wraps `inner`; queued ends wait `interval` before they commit, so
    /// that more of them share a commit. Needs a Tokio runtime.
    pub fn wrap(inner: Arc<dyn RunLog>, interval: Duration) -> Arc<dyn RunLog> {
        let ends = Ends::default();
        let (queue, jobs) = mpsc::channel(MAX_QUEUED);
        let changes = broadcast::channel(super::CHANGES_CAPACITY).0;
        let stop = CancellationToken::new();
        tokio::spawn(forward_changes(inner.changes(), changes.clone(), stop.clone()));
        tokio::spawn(commit_ends(inner.clone(), ends.clone(), jobs, interval));
        Arc::new(Self {
            inner,
            ends,
            queue,
            changes,
            _forwarding: stop.drop_guard(),
        })
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, Arc<RunEnd>>> {
        self.ends.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The uncommitted end of run `id`, read before the store is: an end
    /// that commits meanwhile is then still applied, never missed.
    fn end_of(&self, id: Uuid) -> Option<Arc<RunEnd>> {
        self.held().get(&id).cloned()
    }

    /// Every uncommitted end, read before a listing (usually none).
    fn all_ends(&self) -> HashMap<Uuid, Arc<RunEnd>> {
        let held = self.held();
        if held.is_empty() {
            HashMap::new()
        } else {
            held.clone()
        }
    }
}

/// Brings the inner store's changes (its own commits and, on PostgreSQL,
/// other instances') to this wrapper's subscribers.
async fn forward_changes(
    mut from: broadcast::Receiver<Uuid>,
    to: broadcast::Sender<Uuid>,
    stop: CancellationToken,
) {
    loop {
        let changed = tokio::select! {
            () = stop.cancelled() => return,
            changed = from.recv() => changed,
        };
        match changed {
            Ok(id) => {
                let _ = to.send(id);
            }
            // Waiters also re-read on a timer; a lost change only delays one.
            Err(broadcast::error::RecvError::Lagged(_)) => {}
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

/// The committing task: waits for a queued end, lets the interval gather
/// more, commits them together, then answers any flush that waited. Ends
/// when every handle of the wrapper is gone and the queue is drained.
async fn commit_ends(inner: Arc<dyn RunLog>, ends: Ends, mut jobs: mpsc::Receiver<Job>, interval: Duration) {
    while let Some(first) = jobs.recv().await {
        let mut ids = Vec::new();
        let mut flushed = Vec::new();
        for job in gather(&mut jobs, first, interval).await {
            match job {
                Job::End(id) => ids.push(id),
                Job::Flush(done) => flushed.push(done),
            }
        }
        if !ids.is_empty() {
            commit(&inner, &ends, &ids).await;
        }
        for done in flushed {
            let _ = done.send(());
        }
    }
}

/// `first` and what arrives within `interval` after it (a flush cuts the
/// wait short), then whatever is queued already: one batch.
async fn gather(jobs: &mut mpsc::Receiver<Job>, first: Job, interval: Duration) -> Vec<Job> {
    let deadline = tokio::time::Instant::now() + interval;
    let mut flushing = matches!(first, Job::Flush(_));
    let mut batch = vec![first];
    while !flushing && batch.len() < MAX_BATCH {
        match tokio::time::timeout_at(deadline, jobs.recv()).await {
            Ok(Some(job)) => {
                flushing = matches!(job, Job::Flush(_));
                batch.push(job);
            }
            Ok(None) | Err(_) => break,
        }
    }
    while batch.len() < MAX_BATCH {
        match jobs.try_recv() {
            Ok(job) => batch.push(job),
            Err(_) => break,
        }
    }
    batch
}

/// Writes the held ends of `ids` together, then lets them go from
/// memory: from now on the store has them.
async fn commit(inner: &Arc<dyn RunLog>, ends: &Ends, ids: &[Uuid]) {
    let batch: Vec<RunEnd> = {
        let held = ends.lock().unwrap_or_else(PoisonError::into_inner);
        ids.iter()
            .filter_map(|id| held.get(id).map(|end| RunEnd::clone(end)))
            .collect()
    };
    write_ends(inner, &batch).await;
    let mut held = ends.lock().unwrap_or_else(PoisonError::into_inner);
    for id in ids {
        held.remove(id);
    }
}

/// Retries while the database cannot take the batch; any other error is
/// one end's, so each is then written alone and only that one is lost.
async fn write_ends(inner: &Arc<dyn RunLog>, batch: &[RunEnd]) {
    let started = tokio::time::Instant::now();
    let mut pause = Duration::from_millis(50);
    loop {
        match inner.finish_runs(batch).await {
            Ok(()) => return,
            Err(e @ StoreError::Unavailable(_)) if started.elapsed() < GIVE_UP_AFTER => {
                tracing::warn!(runs = batch.len(), error = %e, "cannot record runs' ends yet; retrying");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(5));
            }
            Err(e) if batch.len() > 1 => {
                tracing::warn!(error = %e, "recording runs' ends one by one");
                for end in batch {
                    Box::pin(write_ends(inner, std::slice::from_ref(end))).await;
                }
                return;
            }
            Err(e) => {
                let run = batch.first().map(|end| end.id);
                tracing::error!(run = ?run, error = %e, "giving up recording the run's end");
                return;
            }
        }
    }
}

#[async_trait::async_trait]
impl RunLog for Deferred {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.inner.ping().await
    }

    fn changes(&self) -> broadcast::Receiver<Uuid> {
        self.changes.subscribe()
    }

    async fn finish_run_soon(
        &self,
        id: Uuid,
        status: RunStatus,
        result: Option<Value>,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        check_final(status)?;
        // As the store will give it back: to the microsecond.
        let at = at.trunc_subsecs(6);
        self.held().insert(
            id,
            Arc::new(RunEnd {
                id,
                status,
                result,
                at,
            }),
        );
        if self.queue.send(Job::End(id)).await.is_err() {
            // The committing task is gone (the runtime is stopping): write
            // it here, before the answer.
            let end = self.held().remove(&id);
            let Some(end) = end else { return Ok(()) };
            let result = end.result.clone();
            return self
                .inner
                .finish_run(id, status, result, end.at)
                .await
                .map(|_| ());
        }
        let _ = self.changes.send(id);
        Ok(())
    }

    async fn flush(&self) -> Result<(), StoreError> {
        let (done, flushed) = oneshot::channel();
        if self.queue.send(Job::Flush(done)).await.is_ok() {
            let _ = flushed.await;
        }
        self.inner.flush().await
    }

    async fn get_run(&self, id: Uuid) -> Result<Run, StoreError> {
        let end = self.end_of(id);
        let mut run = self.inner.get_run(id).await?;
        if let Some(end) = end {
            apply(&end, &mut run);
        }
        Ok(run)
    }

    async fn list_runs(&self, filter: RunFilter) -> Result<RunPage, StoreError> {
        let ends = self.all_ends();
        let wanted = filter.status;
        let mut page = self.inner.list_runs(filter).await?;
        if ends.is_empty() {
            return Ok(page);
        }
        for run in &mut page.runs {
            if let Some(end) = ends.get(&run.id) {
                apply(end, run);
            }
        }
        // A run that ended here no longer matches a filter on a live status.
        page.runs
            .retain(|run| wanted.is_none_or(|status| run.status == status));
        Ok(page)
    }

    async fn run_by_key(
        &self,
        requested_by: Option<&str>,
        key: &str,
        since: DateTime<Utc>,
    ) -> Result<Option<Run>, StoreError> {
        let ends = self.all_ends();
        let mut run = self.inner.run_by_key(requested_by, key, since).await?;
        if let Some(run) = &mut run
            && let Some(end) = ends.get(&run.id)
        {
            apply(end, run);
        }
        Ok(run)
    }

    // The rest is the inner log's, unchanged.

    async fn insert_run(&self, run: NewRun) -> Result<Run, StoreError> {
        self.inner.insert_run(run).await
    }

    async fn start_run(
        &self,
        id: Uuid,
        pgid: Option<i32>,
        instance: &str,
        at: DateTime<Utc>,
    ) -> Result<Option<Run>, StoreError> {
        self.inner.start_run(id, pgid, instance, at).await
    }

    async fn set_pgid(&self, id: Uuid, pgid: i32) -> Result<(), StoreError> {
        self.inner.set_pgid(id, pgid).await
    }

    async fn finish_run(
        &self,
        id: Uuid,
        status: RunStatus,
        result: Option<Value>,
        at: DateTime<Utc>,
    ) -> Result<Option<Run>, StoreError> {
        self.inner.finish_run(id, status, result, at).await
    }

    async fn finish_runs(&self, ends: &[RunEnd]) -> Result<(), StoreError> {
        self.inner.finish_runs(ends).await
    }

    async fn end_waiting(
        &self,
        id: Uuid,
        status: RunStatus,
        at: DateTime<Utc>,
    ) -> Result<Option<Run>, StoreError> {
        self.inner.end_waiting(id, status, at).await
    }

    async fn interrupt_running(&self, instance: Option<&str>, at: DateTime<Utc>) -> Result<u64, StoreError> {
        self.inner.interrupt_running(instance, at).await
    }
}
