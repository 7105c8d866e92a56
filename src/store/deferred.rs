//! Answering before a run's end commits (`docs/design.md` §5): the one
//! durable write on a call's critical path is its start.
//!
//! [`Deferred`] wraps either store. [`Store::finish_run_soon`] keeps the
//! end in memory, tells this instance's waiters, and queues the write; a
//! task commits queued ends in batches (after the configured commit
//! interval, if any) while the answer is already on its way. Until an end
//! commits, this wrapper's own reads of the run (`get_run`, `list_runs`,
//! `run_by_key`) show it ended; another instance reads `running` for at
//! most one commit interval; a crash in that window leaves the run
//! `running` with its start intact, and start-up recovery marks it
//! `interrupted`.

use super::{
    Approval, ApprovalFilter, ApprovalPage, Attempt, CachedIndex, Decide, DecisionFilter, DecisionPage,
    Grant, NewApproval, NewNotification, NewRun, NewSession, Notification, NotificationStatus, PolicyFacts,
    PruneExport, Run, RunEnd, RunFilter, RunPage, RunPosition, RunStatus, SameCall, SessionRecord,
    SkillApproval, Store, StoreError, TooMany, Undecidable, check_final,
};
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

/// A store whose runs' ends commit after the answer (see the module).
pub struct Deferred {
    inner: Arc<dyn Store>,
    ends: Ends,
    queue: mpsc::Sender<Job>,
    changes: broadcast::Sender<Uuid>,
    /// Stops forwarding the inner store's changes with the last handle.
    _forwarding: DropGuard,
}

impl Deferred {
    /// Wraps `inner`; queued ends wait `interval` before they commit, so
    /// that more of them share a commit. Needs a Tokio runtime.
    pub fn wrap(inner: Arc<dyn Store>, interval: Duration) -> Arc<dyn Store> {
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
async fn commit_ends(inner: Arc<dyn Store>, ends: Ends, mut jobs: mpsc::Receiver<Job>, interval: Duration) {
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
async fn commit(inner: &Arc<dyn Store>, ends: &Ends, ids: &[Uuid]) {
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
async fn write_ends(inner: &Arc<dyn Store>, batch: &[RunEnd]) {
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
impl Store for Deferred {
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

    // Everything else is the inner store's, unchanged.

    async fn insert_run(&self, run: NewRun) -> Result<Run, StoreError> {
        self.inner.insert_run(run).await
    }

    async fn insert_pending(&self, run: NewRun, approval: NewApproval) -> Result<(), StoreError> {
        self.inner.insert_pending(run, approval).await
    }

    async fn policy_facts(
        &self,
        skill: &str,
        tool: &str,
        skill_hash: &str,
    ) -> Result<PolicyFacts, StoreError> {
        self.inner.policy_facts(skill, tool, skill_hash).await
    }

    async fn get_approval(&self, id: Uuid) -> Result<Approval, StoreError> {
        self.inner.get_approval(id).await
    }

    async fn approval_of_run(&self, run_id: Uuid) -> Result<Option<Approval>, StoreError> {
        self.inner.approval_of_run(run_id).await
    }

    async fn list_decisions(&self, filter: DecisionFilter) -> Result<DecisionPage, StoreError> {
        self.inner.list_decisions(filter).await
    }

    async fn list_approvals(&self, filter: ApprovalFilter) -> Result<ApprovalPage, StoreError> {
        self.inner.list_approvals(filter).await
    }

    async fn decide(&self, decide: Decide) -> Result<Result<Approval, Undecidable>, StoreError> {
        self.inner.decide(decide).await
    }

    async fn expire_approvals(&self, at: DateTime<Utc>) -> Result<Vec<Uuid>, StoreError> {
        self.inner.expire_approvals(at).await
    }

    async fn mark_caller_left(&self, approval: Uuid, at: DateTime<Utc>) -> Result<(), StoreError> {
        self.inner.mark_caller_left(approval, at).await
    }

    async fn count_pending(&self) -> Result<u64, StoreError> {
        self.inner.count_pending().await
    }

    async fn count_pending_by(
        &self,
        requested_by: Option<&str>,
        at: DateTime<Utc>,
    ) -> Result<u64, StoreError> {
        self.inner.count_pending_by(requested_by, at).await
    }

    async fn pending_like(
        &self,
        call: &SameCall<'_>,
        at: DateTime<Utc>,
        limit: u32,
    ) -> Result<Option<Approval>, StoreError> {
        self.inner.pending_like(call, at, limit).await
    }

    async fn put_grants(&self, grants: Vec<Grant>) -> Result<(), StoreError> {
        self.inner.put_grants(grants).await
    }

    async fn list_grants(&self, skill: Option<&str>) -> Result<Vec<Grant>, StoreError> {
        self.inner.list_grants(skill).await
    }

    async fn revoke_grant(&self, id: Uuid) -> Result<(), StoreError> {
        self.inner.revoke_grant(id).await
    }

    async fn revoke_grants_of(&self, skill: &str) -> Result<u64, StoreError> {
        self.inner.revoke_grants_of(skill).await
    }

    async fn cached_index(&self, url: &str) -> Result<Option<CachedIndex>, StoreError> {
        self.inner.cached_index(url).await
    }

    async fn cache_index(&self, index: CachedIndex) -> Result<(), StoreError> {
        self.inner.cache_index(index).await
    }

    async fn create_session(
        &self,
        s: NewSession,
        max_per_caller: u64,
        now: DateTime<Utc>,
    ) -> Result<Result<SessionRecord, TooMany>, StoreError> {
        self.inner.create_session(s, max_per_caller, now).await
    }

    async fn get_session(&self, id: Uuid) -> Result<Option<SessionRecord>, StoreError> {
        self.inner.get_session(id).await
    }

    async fn update_session(
        &self,
        id: Uuid,
        revision: i64,
        turn: u32,
        state: Value,
        expires_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Option<SessionRecord>, StoreError> {
        self.inner
            .update_session(id, revision, turn, state, expires_at, now)
            .await
    }

    async fn end_session(&self, id: Uuid) -> Result<bool, StoreError> {
        self.inner.end_session(id).await
    }

    async fn expire_sessions(&self, now: DateTime<Utc>) -> Result<Vec<SessionRecord>, StoreError> {
        self.inner.expire_sessions(now).await
    }

    async fn list_sessions(
        &self,
        caller: Option<&str>,
        limit: u32,
    ) -> Result<Vec<SessionRecord>, StoreError> {
        self.inner.list_sessions(caller, limit).await
    }

    async fn put_skill_approval(&self, a: SkillApproval) -> Result<(), StoreError> {
        self.inner.put_skill_approval(a).await
    }

    async fn skill_approval(
        &self,
        skill: &str,
        skill_hash: &str,
    ) -> Result<Option<SkillApproval>, StoreError> {
        self.inner.skill_approval(skill, skill_hash).await
    }

    async fn list_skill_approvals(&self, skill: Option<&str>) -> Result<Vec<SkillApproval>, StoreError> {
        self.inner.list_skill_approvals(skill).await
    }

    async fn revoke_skill_approvals(&self, skill: &str) -> Result<u64, StoreError> {
        self.inner.revoke_skill_approvals(skill).await
    }

    async fn enqueue_notification(&self, n: NewNotification) -> Result<bool, StoreError> {
        self.inner.enqueue_notification(n).await
    }

    async fn claim_notifications(
        &self,
        instance: &str,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        max: u32,
    ) -> Result<Vec<Notification>, StoreError> {
        self.inner
            .claim_notifications(instance, now, lease_until, max)
            .await
    }

    async fn record_attempt(
        &self,
        id: Uuid,
        instance: &str,
        attempt: Attempt,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.inner.record_attempt(id, instance, attempt, at).await
    }

    async fn list_notifications(
        &self,
        status: Option<NotificationStatus>,
        limit: u32,
    ) -> Result<Vec<Notification>, StoreError> {
        self.inner.list_notifications(status, limit).await
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

    async fn nth_newest_run(&self, n: u64) -> Result<Option<RunPosition>, StoreError> {
        self.inner.nth_newest_run(n).await
    }

    /// Only final runs are pruned, and a run whose end is held here is
    /// still live in the store: nothing held can be pruned under it.
    async fn prune_runs(
        &self,
        before: RunPosition,
        batch: u32,
        export: Option<&dyn PruneExport>,
    ) -> Result<u64, StoreError> {
        self.inner.prune_runs(before, batch, export).await
    }
}
