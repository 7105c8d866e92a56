//! Retention in the store conformance suite (`store.rs` runs each on both
//! backends): what `prune_runs` deletes, what it keeps, and what it exports.

use super::{decision, envelope, hold, insert, new_run, t0};
use chrono::{DateTime, Duration, Utc};
use serde_json::json;
use skilld::store::{
    ApprovalFilter, ApprovalPage, DecisionFilter, NewApproval, NewNotification, NewRun, PruneExport, Run,
    RunFilter, RunPosition, RunStatus, Scope, StoreError, Stores,
};
use std::sync::{Arc, Mutex};
use uuid::Uuid;

/// An export that keeps what it is given, batch by batch; it can be made
/// to fail, or to take its time (so that prunes overlap).
#[derive(Default)]
struct Collect {
    batches: Mutex<Vec<Vec<Run>>>,
    fail: bool,
    slow: bool,
}

#[async_trait::async_trait]
impl PruneExport for Collect {
    async fn export(&self, runs: &[Run]) -> std::io::Result<()> {
        if self.fail {
            return Err(std::io::Error::other("disk full"));
        }
        if self.slow {
            tokio::time::sleep(std::time::Duration::from_millis(30)).await;
        }
        self.batches.lock().unwrap().push(runs.to_vec());
        Ok(())
    }
}

impl Collect {
    fn runs(&self) -> Vec<Run> {
        self.batches.lock().unwrap().concat()
    }
    fn sizes(&self) -> Vec<usize> {
        self.batches.lock().unwrap().iter().map(Vec::len).collect()
    }
}

/// A run that ran and ended `status`, created at `at`.
async fn finished(store: &Stores, at: DateTime<Utc>, status: RunStatus) -> Run {
    let run = insert(store, new_run("git", "git_log", at)).await;
    store
        .runs
        .finish_run(run.id, status, Some(envelope(run.id, false)), at)
        .await
        .unwrap()
        .unwrap()
}

async fn listed(store: &Stores) -> Vec<Uuid> {
    let page = store
        .runs
        .list_runs(RunFilter {
            limit: 500,
            ..RunFilter::default()
        })
        .await
        .unwrap();
    page.runs.iter().map(|run| run.id).collect()
}

fn decisions() -> DecisionFilter {
    DecisionFilter {
        limit: 100,
        ..DecisionFilter::default()
    }
}

fn before(at: DateTime<Utc>) -> RunPosition {
    RunPosition::created_before(at)
}

pub async fn retention_prunes_only_final_runs_before_the_cutoff(store: Stores) {
    let old = t0() - Duration::days(100);
    let succeeded = finished(&store, old, RunStatus::Succeeded).await;
    let failed = finished(&store, old + Duration::seconds(1), RunStatus::Failed).await;
    let denied = insert(&store, hold_free_denied(old + Duration::seconds(2))).await;
    // Live runs as old: never pruned, whatever their age.
    let queued = insert(&store, new_run("git", "git_log", old)).await;
    let running = insert(&store, new_run("git", "git_log", old)).await;
    store
        .runs
        .start_run(running.id, None, "a", old)
        .await
        .unwrap()
        .unwrap();
    let (pending, _) = hold(&store, "git", "git_log", "h", old).await;
    // A final run just after the cutoff stays.
    let recent = finished(&store, t0(), RunStatus::Succeeded).await;

    let export = Collect::default();
    let pruned = store
        .pruning
        .prune_runs(before(t0()), 100, Some(&export))
        .await
        .unwrap();
    assert_eq!(pruned, 3);
    // Exported oldest first, exactly as they were read.
    assert_eq!(
        export.runs(),
        vec![succeeded.clone(), failed.clone(), denied.clone()]
    );
    for gone in [&succeeded, &failed, &denied] {
        assert!(matches!(
            store.runs.get_run(gone.id).await,
            Err(StoreError::NotFound { .. })
        ));
    }
    let mut left = listed(&store).await;
    left.sort();
    let mut expected = vec![queued.id, running.id, pending.id, recent.id];
    expected.sort();
    assert_eq!(left, expected);
    assert_eq!(
        store.runs.get_run(running.id).await.unwrap().status,
        RunStatus::Running
    );
    // Nothing more is due.
    assert_eq!(
        store
            .pruning
            .prune_runs(before(t0()), 100, Some(&export))
            .await
            .unwrap(),
        0
    );
    assert_eq!(export.sizes(), vec![3]);
}

/// A call a standing deny refused: recorded final at once.
fn hold_free_denied(at: DateTime<Utc>) -> skilld::store::NewRun {
    skilld::store::NewRun {
        status: RunStatus::Denied,
        ..new_run("git", "git_log", at)
    }
}

pub async fn retention_by_count_keeps_the_newest(store: Stores) {
    let mut runs = Vec::new();
    for i in 0..10 {
        runs.push(finished(&store, t0() + Duration::seconds(i), RunStatus::Succeeded).await);
    }
    assert_eq!(store.pruning.nth_newest_run(0).await.unwrap(), None);
    assert_eq!(store.pruning.nth_newest_run(11).await.unwrap(), None);
    let third = store.pruning.nth_newest_run(3).await.unwrap().unwrap();
    assert_eq!(
        third,
        RunPosition {
            created_at: runs[7].created_at,
            id: runs[7].id
        }
    );
    assert_eq!(store.pruning.prune_runs(third, 500, None).await.unwrap(), 7);
    let mut left = listed(&store).await;
    left.reverse();
    assert_eq!(left, runs[7..].iter().map(|r| r.id).collect::<Vec<_>>());
}

pub async fn retention_goes_in_batches(store: Stores) {
    let old = t0() - Duration::days(1);
    let mut runs = Vec::new();
    for i in 0..7 {
        runs.push(finished(&store, old + Duration::seconds(i), RunStatus::Succeeded).await);
    }
    let export = Collect::default();
    let mut deleted = Vec::new();
    loop {
        let n = store
            .pruning
            .prune_runs(before(t0()), 3, Some(&export))
            .await
            .unwrap();
        deleted.push(n);
        if n < 3 {
            break;
        }
    }
    assert_eq!(deleted, vec![3, 3, 1]);
    assert_eq!(export.sizes(), vec![3, 3, 1]);
    assert_eq!(export.runs(), runs);
    assert!(listed(&store).await.is_empty());
}

pub async fn retention_takes_approvals_with_their_runs(store: Stores) {
    let (approvals, outbox) = (&store.approvals, &store.outbox);
    let old = t0() - Duration::days(100);
    let (approved_run, approved, denied) = decided_and_notified(&store, old).await;
    assert_eq!(
        approvals
            .list_decisions(decisions())
            .await
            .unwrap()
            .decisions
            .len(),
        2
    );

    assert_eq!(
        store.pruning.prune_runs(before(t0()), 100, None).await.unwrap(),
        2
    );
    for id in [approved.id, denied.id] {
        assert!(matches!(
            approvals.get_approval(id).await,
            Err(StoreError::NotFound { .. })
        ));
    }
    assert_eq!(approvals.approval_of_run(approved_run.id).await.unwrap(), None);
    // Every read that showed them still answers, without them.
    assert!(
        approvals
            .list_decisions(decisions())
            .await
            .unwrap()
            .decisions
            .is_empty()
    );
    let every_request = ApprovalFilter {
        limit: 100,
        ..ApprovalFilter::default()
    };
    assert_eq!(
        approvals.list_approvals(every_request).await.unwrap(),
        ApprovalPage::default()
    );
    assert!(outbox.list_notifications(None, 100).await.unwrap().is_empty());
    // The approved version stays approved; the denied one never was.
    assert!(
        store
            .holds
            .policy_facts("notes", "other", "v1")
            .await
            .unwrap()
            .hash_approved
    );
    assert!(
        !store
            .holds
            .policy_facts("notes", "read", "v2")
            .await
            .unwrap()
            .hash_approved
    );
}

/// An approved call that ran and a denied one, made at `at`, each with a
/// webhook delivery: what a batch of retention takes along.
async fn decided_and_notified(store: &Stores, at: DateTime<Utc>) -> (NewRun, NewApproval, NewApproval) {
    let (approvals, run_log, outbox) = (&store.approvals, &store.runs, &store.outbox);
    let (approved_run, approved) = hold(store, "notes", "read", "v1", at).await;
    approvals
        .decide(decision(&approved, true, Scope::Once, at))
        .await
        .unwrap()
        .unwrap();
    run_log
        .start_run(approved_run.id, None, "instance-a", at)
        .await
        .unwrap()
        .unwrap();
    run_log
        .finish_run(approved_run.id, RunStatus::Succeeded, None, at)
        .await
        .unwrap()
        .unwrap();
    let (_, denied) = hold(store, "notes", "read", "v2", at).await;
    approvals
        .decide(decision(&denied, false, Scope::Once, at))
        .await
        .unwrap()
        .unwrap();
    for (event, approval) in [("approval.decided", approved.id), ("approval.decided", denied.id)] {
        let n = NewNotification {
            id: Uuid::now_v7(),
            event: event.to_owned(),
            approval_id: approval,
            target: "team".to_owned(),
            payload: json!({"type": event}),
            created_at: at,
        };
        assert!(outbox.enqueue_notification(n).await.unwrap());
    }
    (approved_run, approved, denied)
}

pub async fn retention_deletes_nothing_when_the_export_fails(store: Stores) {
    let run = finished(&store, t0() - Duration::days(100), RunStatus::Succeeded).await;
    let export = Collect {
        fail: true,
        ..Collect::default()
    };
    let err = store
        .pruning
        .prune_runs(before(t0()), 100, Some(&export))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
    assert_eq!(store.runs.get_run(run.id).await.unwrap(), run);
}

/// Two instances (on PostgreSQL; one server owns a SQLite file, so there
/// two tasks share its store) prune at once, each in several batches:
/// every run is exported once and deleted once, and none fails.
pub async fn concurrent_prunes_export_each_run_once(url: String) {
    let a = skilld::store::connect(&url).await.unwrap();
    let b = if url.starts_with("sqlite:") {
        a.clone()
    } else {
        skilld::store::connect(&url).await.unwrap()
    };
    let old = t0() - Duration::days(100);
    let mut runs = Vec::new();
    for i in 0..40 {
        runs.push(finished(&a, old + Duration::milliseconds(i), RunStatus::Succeeded).await);
    }
    let export = Arc::new(Collect {
        slow: true,
        ..Collect::default()
    });
    let pruners = [a.clone(), b.clone(), a, b].map(|store| {
        let export = export.clone();
        tokio::spawn(async move {
            let mut total = 0;
            loop {
                let n = store
                    .pruning
                    .prune_runs(before(t0()), 5, Some(export.as_ref()))
                    .await
                    .unwrap();
                total += n;
                if n == 0 {
                    return total;
                }
            }
        })
    });
    let mut deleted = 0;
    for pruner in pruners {
        deleted += pruner.await.unwrap();
    }
    assert_eq!(deleted, 40);
    let mut exported: Vec<Uuid> = export.runs().iter().map(|run| run.id).collect();
    exported.sort();
    let mut expected: Vec<Uuid> = runs.iter().map(|run| run.id).collect();
    expected.sort();
    assert_eq!(exported, expected, "each run exported exactly once");
}

/// Deliveries of activation requests hold no run: they go with a batch of
/// retention once settled and older than its cutoff. One still pending,
/// or newer, stays.
pub async fn retention_takes_settled_activation_deliveries_before_the_cutoff(store: Stores) {
    let old = t0() - Duration::days(100);
    finished(&store, old, RunStatus::Succeeded).await;
    let delivery = |target: &str, at: DateTime<Utc>| NewNotification {
        id: Uuid::now_v7(),
        event: "activation.requested".to_owned(),
        approval_id: Uuid::now_v7(),
        target: target.to_owned(),
        payload: json!({"type": "activation.requested"}),
        created_at: at,
    };
    for n in [
        delivery("settled", old),
        delivery("waiting", old),
        delivery("recent", t0()),
    ] {
        assert!(store.outbox.enqueue_notification(n).await.unwrap());
    }
    // The old one for `settled` is delivered; the others wait.
    let claimed = store
        .outbox
        .claim_notifications("a", old, old + Duration::minutes(1), 1)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    let settled = claimed[0].target.clone();
    let done = skilld::store::Attempt::Delivered { status: 200 };
    store
        .outbox
        .record_attempt(claimed[0].id, "a", done, old)
        .await
        .unwrap();

    assert_eq!(
        store.pruning.prune_runs(before(t0()), 100, None).await.unwrap(),
        1
    );
    let mut left: Vec<String> = store
        .outbox
        .list_notifications(None, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|n| n.target)
        .collect();
    left.sort();
    let mut expected: Vec<String> = ["settled", "waiting", "recent"]
        .into_iter()
        .filter(|t| *t != settled)
        .map(str::to_owned)
        .collect();
    expected.sort();
    assert_eq!(left, expected);
}
