//! The store conformance suite: one set of tests, written against
//! `Stores`, run on SQLite (a fresh file per test) and on PostgreSQL
//! (a fresh schema per test, in the database `SKILLD_TEST_POSTGRES_URL`
//! names), so both backends keep exactly the same contract.

use crate::common::{on_postgres, postgres_url};
use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::{Value, json};
use skilld::store::{
    self, Approval, ApprovalFilter, ApprovalStatus, CachedIndex, Decide, DecisionFilter, Grant,
    GrantDecision, NewApproval, NewRun, PolicyFacts, Run, RunEnd, RunFilter, RunPage, RunStatus, SameCall,
    Scope, StoreError, Stores, Undecidable,
};
use sqlx::Connection;
use std::future::Future;
use std::sync::Arc;
use uuid::Uuid;

/// For each test function, `sqlite::<name>` and `postgres::<name>`. Those
/// under `store:` take a ready store; those under `url:` take the URL, for
/// tests that open the store themselves (e.g. to reopen it).
macro_rules! conformance {
    (store: [$($store_test:ident),* $(,)?], url: [$($url_test:ident),* $(,)?] $(,)?) => {
        conformance!(@backend sqlite, on_sqlite, [$($store_test),*], [$($url_test),*]);
        conformance!(@backend postgres, on_postgres, [$($store_test),*], [$($url_test),*]);
    };
    (@backend $backend:ident, $harness:ident, [$($store_test:ident),*], [$($url_test:ident),*]) => {
        mod $backend {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $store_test() {
                    super::$harness(|url| async move { super::$store_test(super::open(&url).await).await })
                        .await;
                }
            )*
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $url_test() {
                    super::$harness(super::$url_test).await;
                }
            )*
        }
    };
}

conformance! {
    store: [
        insert_and_get_round_trip_every_field,
        run_json_is_the_api_shape,
        duplicate_id_conflicts,
        unknown_run_is_not_found,
        new_run_must_be_live,
        start_only_from_queued,
        set_pgid_only_while_running,
        finish_only_once,
        pending_approval_can_be_denied,
        list_newest_first_with_cursor_pages,
        list_filters,
        list_limit_is_clamped,
        invalid_cursor,
        interrupt_running_marks_only_running,
        concurrent_start_has_one_winner,
        concurrent_writes_fail_alone,
        concurrent_finish_has_one_winner,
        ping_works,
        a_held_call_is_approved_once,
        pending_requests_are_counted_per_caller,
        a_caller_that_stops_waiting_is_noted_once,
        deny_always_leaves_a_standing_deny_until_revoked,
        a_later_always_replaces_the_grant,
        grants_are_listed_and_revoked_by_skill,
        a_registry_index_is_cached_and_replaced,
        expired_requests_cannot_be_decided,
        cancelling_a_held_run_withdraws_its_request,
        concurrent_decisions_have_one_winner,
        first_run_approval_is_per_skill_version,
        changes_are_announced,
        end_waiting_never_touches_a_started_run,
        an_approved_run_still_queued_is_recovered_after_a_crash,
        a_result_with_nul_bytes_is_recorded,
        decisions_are_listed_newest_first_with_their_runs,
        a_request_is_found_by_its_run_and_its_changes_announced,
        notifications_are_recorded_once_and_claimed_by_one,
        a_retry_finds_the_pending_request_of_the_same_call,
        a_retry_of_an_anonymous_call_finds_its_request,
        an_idempotency_key_names_one_run_per_caller_for_a_day,
        retention_prunes_only_final_runs_before_the_cutoff,
        retention_by_count_keeps_the_newest,
        retention_goes_in_batches,
        retention_takes_approvals_with_their_runs,
        retention_takes_settled_activation_deliveries_before_the_cutoff,
        retention_deletes_nothing_when_the_export_fails,
        many_ends_commit_together_over_live_runs_only,
        pending_requests_are_paged_oldest_first_through_ties,
        a_request_made_while_paging_is_on_a_later_page,
        a_bad_approvals_cursor_is_refused,
        a_retry_finds_its_call_among_many_of_the_caller,
        a_session_is_created_updated_at_its_revision_and_ended,
        expired_sessions_are_read_until_swept,
        sessions_are_listed_newest_first_by_caller,
        each_caller_holds_at_most_its_bound_of_live_sessions,
        skill_approvals_are_replaced_listed_and_revoked_by_skill,
        nul_bytes_are_refused_in_texts_and_replaced_in_json,
        runs_are_filtered_by_their_session,
        an_egress_request_round_trips_every_field,
        pending_egress_is_listed_oldest_first_until_it_expires,
        an_allow_once_leaves_no_grant,
        an_allow_always_grants_exactly_its_destination_once,
        a_denial_keeps_its_note_and_grants_nothing,
        an_egress_request_is_decided_once_and_not_after_its_time,
        expiring_an_egress_request_leaves_a_decided_one,
        nul_bytes_are_refused_in_egress_texts,
        egress_grants_are_listed_newest_first_and_revoked_by_skill,
    ],
    url: [
        restart_keeps_every_run,
        changes_reach_every_instance,
        concurrent_prunes_export_each_run_once,
        an_end_reads_here_at_once_and_elsewhere_once_committed,
        an_end_never_overwrites_a_final_run,
        a_flush_commits_every_end_given_before_it,
        a_request_recorded_before_digests_is_still_found,
        concurrent_updates_have_one_winner,
        concurrent_creates_never_pass_the_bound,
        concurrent_egress_decisions_have_one_winner,
    ],
}

#[path = "store_approvals.rs"]
mod inbox;
use inbox::{
    a_bad_approvals_cursor_is_refused, a_request_made_while_paging_is_on_a_later_page,
    a_request_recorded_before_digests_is_still_found, a_retry_finds_its_call_among_many_of_the_caller,
    pending_requests_are_paged_oldest_first_through_ties,
};

#[path = "store_sessions.rs"]
mod sessions;
use sessions::{
    a_session_is_created_updated_at_its_revision_and_ended, concurrent_creates_never_pass_the_bound,
    concurrent_updates_have_one_winner, each_caller_holds_at_most_its_bound_of_live_sessions,
    expired_sessions_are_read_until_swept, nul_bytes_are_refused_in_texts_and_replaced_in_json,
    runs_are_filtered_by_their_session, sessions_are_listed_newest_first_by_caller,
    skill_approvals_are_replaced_listed_and_revoked_by_skill,
};

#[path = "store_egress.rs"]
mod egress;
use egress::{
    a_denial_keeps_its_note_and_grants_nothing, an_allow_always_grants_exactly_its_destination_once,
    an_allow_once_leaves_no_grant, an_egress_request_is_decided_once_and_not_after_its_time,
    an_egress_request_round_trips_every_field, concurrent_egress_decisions_have_one_winner,
    egress_grants_are_listed_newest_first_and_revoked_by_skill,
    expiring_an_egress_request_leaves_a_decided_one, nul_bytes_are_refused_in_egress_texts,
    pending_egress_is_listed_oldest_first_until_it_expires,
};

#[path = "store_retention.rs"]
mod retention;
use retention::{
    concurrent_prunes_export_each_run_once, retention_by_count_keeps_the_newest,
    retention_deletes_nothing_when_the_export_fails, retention_goes_in_batches,
    retention_prunes_only_final_runs_before_the_cutoff, retention_takes_approvals_with_their_runs,
    retention_takes_settled_activation_deliveries_before_the_cutoff,
};

// ---- harnesses -------------------------------------------------------------

/// Runs `body` with the URL of a fresh SQLite file, removed afterwards.
async fn on_sqlite<F, Fut>(body: F)
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = ()>,
{
    let dir = crate::common::tempdir().unwrap();
    body(format!("sqlite://{}/skilld.db", dir.path().display())).await;
}

/// Opens the store and checks it is the backend the URL asked for.
async fn open(url: &str) -> Stores {
    let store = store::connect(url).await.unwrap();
    let expected = if url.starts_with("sqlite:") {
        "sqlite"
    } else {
        "postgres"
    };
    assert_eq!(store.runs.backend(), expected);
    store
}

// ---- helpers ---------------------------------------------------------------

/// A fixed instant with a non-zero microsecond part, so that precision and
/// ordering problems show.
fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2024, 11, 22, 4, 41, 0).unwrap() + Duration::microseconds(123_456)
}

fn new_run(skill: &str, tool: &str, created_at: DateTime<Utc>) -> NewRun {
    NewRun {
        id: Uuid::now_v7(),
        skill: skill.to_owned(),
        tool: tool.to_owned(),
        skill_hash: "sha256:0f1e2d".to_owned(),
        arguments: json!({"count": 3}),
        argv: vec![
            "git".to_owned(),
            "log".to_owned(),
            "-n".to_owned(),
            "3".to_owned(),
        ],
        cwd: "/srv/repo".to_owned(),
        status: RunStatus::Queued,
        requested_by: None,
        approval_id: None,
        created_at,
        started_at: None,
        instance: None,
        mode: None,
        request_id: None,
        skill_version: None,
        idempotency_key: None,
        session: None,
    }
}

/// The `Run` a just-inserted `NewRun` must read back as.
fn as_inserted(new: &NewRun) -> Run {
    Run {
        id: new.id,
        skill: new.skill.clone(),
        tool: new.tool.clone(),
        skill_hash: new.skill_hash.clone(),
        arguments: new.arguments.clone(),
        argv: new.argv.clone(),
        cwd: new.cwd.clone(),
        status: new.status,
        requested_by: new.requested_by.clone(),
        approval_id: new.approval_id,
        created_at: new.created_at,
        started_at: new.started_at,
        finished_at: (new.status == RunStatus::Denied).then_some(new.created_at),
        result: None,
        pgid: None,
        instance: new.instance.clone(),
        mode: new.mode.clone(),
        request_id: new.request_id.clone(),
        note: None,
        skill_version: new.skill_version.clone(),
        session: new.session,
    }
}

fn envelope(id: Uuid, success: bool) -> Value {
    json!({
        "run_id": id, "skill": "git", "tool": "git_log", "success": success,
        "exit_code": if success { 0 } else { 1 }, "output": "ok\n", "truncated": false,
        "output_bytes": 3, "duration_ms": 12, "timed_out": false, "signal": null
    })
}

async fn insert(store: &Stores, new: NewRun) -> Run {
    let run = store.runs.insert_run(new.clone()).await.unwrap();
    assert_eq!(run, as_inserted(&new));
    run
}

async fn all_pages(store: &Stores, filter: RunFilter) -> (Vec<Run>, Vec<usize>) {
    let mut runs = Vec::new();
    let mut sizes = Vec::new();
    let mut filter = filter;
    loop {
        let RunPage {
            runs: page,
            next_cursor,
        } = store.runs.list_runs(filter.clone()).await.unwrap();
        sizes.push(page.len());
        runs.extend(page);
        match next_cursor {
            Some(cursor) => filter.cursor = Some(cursor),
            None => return (runs, sizes),
        }
        assert!(sizes.len() <= 1000, "pagination does not end");
    }
}

fn ids(runs: &[Run]) -> Vec<Uuid> {
    runs.iter().map(|run| run.id).collect()
}

/// The newest-first order the store promises: created_at desc, then id desc.
fn newest_first(mut runs: Vec<Run>) -> Vec<Run> {
    runs.sort_by_key(|run| std::cmp::Reverse((run.created_at, run.id)));
    runs
}

// ---- the suite -------------------------------------------------------------

async fn insert_and_get_round_trip_every_field(store: Stores) {
    // Every optional field set, and values that trip up naive encodings.
    let full = NewRun {
        id: Uuid::now_v7(),
        skill: "git".to_owned(),
        tool: "git_log".to_owned(),
        skill_hash: "sha256:9c56cc51b374c3ba189210d5b6d4bf57790d351c96c47c02190ecf1e430635ab".to_owned(),
        arguments: json!({
            "count": 10, "ratio": 0.25, "big": 9_007_199_254_740_993_i64, "path": "a b/\"c\"",
            "unicode": "héllo ✓ 𝄞", "nested": {"list": [1, "two", null, true], "empty": {}}, "nul": null
        }),
        argv: vec![
            "git".to_owned(),
            "log".to_owned(),
            "--format=%H %s".to_owned(),
            "it's".to_owned(),
        ],
        cwd: "/srv/my repo".to_owned(),
        status: RunStatus::PendingApproval,
        requested_by: Some("token:ci-agent".to_owned()),
        approval_id: Some(Uuid::now_v7()),
        created_at: t0(),
        started_at: None,
        instance: None,
        mode: Some("Dev".to_owned()),
        request_id: Some("01937b2e-7c1a-7d2e-9f00-5a1c2b3d4e5f".to_owned()),
        skill_version: Some("1.2.0-rc.1".to_owned()),
        idempotency_key: None,
        session: Some(Uuid::now_v7()),
    };
    let inserted = insert(&store, full.clone()).await;
    assert_eq!(store.runs.get_run(full.id).await.unwrap(), inserted);

    // Every optional field empty, and arguments that are not an object.
    let bare = NewRun {
        arguments: json!([]),
        argv: vec![],
        ..new_run("fs", "read", t0() + Duration::seconds(1))
    };
    let inserted = insert(&store, bare.clone()).await;
    assert_eq!(store.runs.get_run(bare.id).await.unwrap(), inserted);

    // Through its whole life, every field still reads back as written.
    let started_at = t0() + Duration::milliseconds(1500);
    let finished_at = started_at + Duration::microseconds(2_000_001);
    let started = store
        .runs
        .start_run(bare.id, Some(4242), "instance-a", started_at)
        .await
        .unwrap();
    let expected = Run {
        status: RunStatus::Running,
        started_at: Some(started_at),
        pgid: Some(4242),
        instance: Some("instance-a".to_owned()),
        ..inserted.clone()
    };
    assert_eq!(started, Some(expected.clone()));
    assert_eq!(store.runs.get_run(bare.id).await.unwrap(), expected);

    let result = envelope(bare.id, true);
    let finished = store
        .runs
        .finish_run(bare.id, RunStatus::Succeeded, Some(result.clone()), finished_at)
        .await
        .unwrap();
    let expected = Run {
        status: RunStatus::Succeeded,
        finished_at: Some(finished_at),
        result: Some(result),
        ..expected
    };
    assert_eq!(finished, Some(expected.clone()));
    assert_eq!(store.runs.get_run(bare.id).await.unwrap(), expected);

    // Nanoseconds are not kept: times come back at microsecond precision,
    // the same on both backends.
    let fine = new_run("fs", "read", t0() + Duration::nanoseconds(999));
    let stored = store.runs.insert_run(fine.clone()).await.unwrap();
    assert_eq!(stored.created_at, t0());
    assert_eq!(store.runs.get_run(fine.id).await.unwrap(), stored);
}

async fn run_json_is_the_api_shape(store: Stores) {
    let new = NewRun {
        requested_by: Some("alice".to_owned()),
        request_id: Some("req-7".to_owned()),
        ..new_run("git", "git_log", t0())
    };
    let id = new.id;
    store.runs.insert_run(new).await.unwrap();
    store
        .runs
        .start_run(id, Some(77), "instance-a", t0())
        .await
        .unwrap();
    let run = store
        .runs
        .finish_run(
            id,
            RunStatus::Failed,
            Some(json!({"success": false})),
            t0() + Duration::seconds(2),
        )
        .await
        .unwrap()
        .unwrap();
    // pgid and instance stay inside the server.
    assert_eq!(
        serde_json::to_value(&run).unwrap(),
        json!({
            "id": id.to_string(), "skill": "git", "tool": "git_log", "skill_hash": "sha256:0f1e2d",
            "arguments": {"count": 3}, "argv": ["git", "log", "-n", "3"], "cwd": "/srv/repo",
            "status": "failed", "requested_by": "alice", "approval_id": null,
            "created_at": "2024-11-22T04:41:00.123456Z", "started_at": "2024-11-22T04:41:00.123456Z",
            "finished_at": "2024-11-22T04:41:02.123456Z", "result": {"success": false},
            "request_id": "req-7", "note": null, "skill_version": null
        })
    );
}

async fn duplicate_id_conflicts(store: Stores) {
    let first = new_run("git", "git_log", t0());
    let stored = insert(&store, first.clone()).await;
    let again = NewRun {
        tool: "git_status".to_owned(),
        ..first.clone()
    };
    let err = store.runs.insert_run(again).await.unwrap_err();
    assert!(matches!(err, StoreError::Conflict(_)), "{err:?}");
    assert_eq!(store.runs.get_run(first.id).await.unwrap(), stored);
}

async fn unknown_run_is_not_found(store: Stores) {
    let id = Uuid::now_v7();
    let err = store.runs.get_run(id).await.unwrap_err();
    assert!(matches!(err, StoreError::NotFound { .. }), "{err:?}");
    let err = store
        .runs
        .start_run(id, None, "instance-a", t0())
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound { .. }), "{err:?}");
    let err = store.runs.set_pgid(id, 1).await.unwrap_err();
    assert!(matches!(err, StoreError::NotFound { .. }), "{err:?}");
    let err = store
        .runs
        .finish_run(id, RunStatus::Cancelled, None, t0())
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound { .. }), "{err:?}");
    assert_eq!(
        store.runs.list_runs(RunFilter::default()).await.unwrap().runs,
        vec![]
    );
}

async fn new_run_must_be_live(store: Stores) {
    // Running only with its start recorded: one write instead of two.
    let started = NewRun {
        status: RunStatus::Running,
        started_at: Some(t0()),
        instance: Some("here".to_owned()),
        ..new_run("git", "git_log", t0())
    };
    assert_eq!(
        store.runs.insert_run(started.clone()).await.unwrap(),
        as_inserted(&started)
    );
    for status in RunStatus::ALL {
        let new = NewRun {
            status,
            ..new_run("git", "git_log", t0())
        };
        let outcome = store.runs.insert_run(new.clone()).await;
        // Denied is recorded finished: a standing deny refused the call.
        if matches!(
            status,
            RunStatus::Queued | RunStatus::PendingApproval | RunStatus::Denied
        ) {
            assert_eq!(outcome.unwrap(), as_inserted(&new));
        } else {
            assert!(
                matches!(outcome, Err(StoreError::Other(_))),
                "{status}: {outcome:?}"
            );
            assert!(
                matches!(store.runs.get_run(new.id).await, Err(StoreError::NotFound { .. })),
                "{status}"
            );
        }
    }
}

async fn start_only_from_queued(store: Stores) {
    let queued = insert(&store, new_run("git", "git_log", t0())).await;
    let at = t0() + Duration::seconds(1);
    let started = store
        .runs
        .start_run(queued.id, None, "instance-a", at)
        .await
        .unwrap();
    let expected = Run {
        status: RunStatus::Running,
        started_at: Some(at),
        instance: Some("instance-a".to_owned()),
        ..queued.clone()
    };
    assert_eq!(started, Some(expected.clone()));

    // A second claim, from anywhere, gets nothing and changes nothing.
    let again = store
        .runs
        .start_run(queued.id, Some(9), "instance-b", at + Duration::seconds(1))
        .await
        .unwrap();
    assert_eq!(again, None);
    assert_eq!(store.runs.get_run(queued.id).await.unwrap(), expected);

    // Not before approval, and not after the end.
    let pending = insert(
        &store,
        NewRun {
            status: RunStatus::PendingApproval,
            ..new_run("git", "git_log", t0())
        },
    )
    .await;
    assert_eq!(
        store
            .runs
            .start_run(pending.id, None, "instance-a", at)
            .await
            .unwrap(),
        None
    );
    assert_eq!(store.runs.get_run(pending.id).await.unwrap(), pending);

    let done = insert(&store, new_run("git", "git_log", t0())).await;
    let done = store
        .runs
        .finish_run(done.id, RunStatus::Cancelled, None, at)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        store
            .runs
            .start_run(done.id, None, "instance-a", at)
            .await
            .unwrap(),
        None
    );
    assert_eq!(store.runs.get_run(done.id).await.unwrap(), done);
}

async fn set_pgid_only_while_running(store: Stores) {
    let run = insert(&store, new_run("git", "git_log", t0())).await;
    // Not yet running: nothing to record a process group for.
    let err = store.runs.set_pgid(run.id, 100).await.unwrap_err();
    assert!(matches!(err, StoreError::Conflict(_)), "{err:?}");

    let started = store
        .runs
        .start_run(run.id, None, "instance-a", t0())
        .await
        .unwrap()
        .unwrap();
    store.runs.set_pgid(run.id, 4321).await.unwrap();
    let expected = Run {
        pgid: Some(4321),
        ..started
    };
    assert_eq!(store.runs.get_run(run.id).await.unwrap(), expected);

    // Cancelled between claim and spawn: the caller learns it must not keep
    // the child, and the finished run is left as it was.
    let finished = store
        .runs
        .finish_run(run.id, RunStatus::Cancelled, None, t0() + Duration::seconds(1))
        .await
        .unwrap()
        .unwrap();
    let err = store.runs.set_pgid(run.id, 999).await.unwrap_err();
    assert!(matches!(err, StoreError::Conflict(_)), "{err:?}");
    assert_eq!(store.runs.get_run(run.id).await.unwrap(), finished);
    assert_eq!(finished.pgid, Some(4321));
}

async fn finish_only_once(store: Stores) {
    let run = insert(&store, new_run("git", "git_log", t0())).await;
    let started_at = t0() + Duration::seconds(1);
    store
        .runs
        .start_run(run.id, Some(55), "instance-a", started_at)
        .await
        .unwrap()
        .unwrap();

    let finished_at = t0() + Duration::seconds(3);
    let result = envelope(run.id, true);
    let finished = store
        .runs
        .finish_run(run.id, RunStatus::Succeeded, Some(result.clone()), finished_at)
        .await
        .unwrap();
    let expected = Run {
        status: RunStatus::Succeeded,
        started_at: Some(started_at),
        finished_at: Some(finished_at),
        result: Some(result),
        pgid: Some(55),
        instance: Some("instance-a".to_owned()),
        ..run.clone()
    };
    assert_eq!(finished, Some(expected.clone()));

    // Whatever comes later (a timeout firing late, a cancel) changes nothing.
    for status in [
        RunStatus::Failed,
        RunStatus::TimedOut,
        RunStatus::Cancelled,
        RunStatus::Interrupted,
    ] {
        let late = store
            .runs
            .finish_run(
                run.id,
                status,
                Some(envelope(run.id, false)),
                finished_at + Duration::seconds(1),
            )
            .await
            .unwrap();
        assert_eq!(late, None, "{status}");
    }
    assert_eq!(
        store
            .runs
            .start_run(run.id, None, "instance-b", finished_at)
            .await
            .unwrap(),
        None
    );
    assert_eq!(store.runs.interrupt_running(None, finished_at).await.unwrap(), 0);
    assert_eq!(store.runs.get_run(run.id).await.unwrap(), expected);

    // "Finishing" into a live status is a bug in the caller, refused.
    let other = insert(&store, new_run("git", "git_log", t0())).await;
    for status in [RunStatus::PendingApproval, RunStatus::Queued, RunStatus::Running] {
        let err = store
            .runs
            .finish_run(other.id, status, None, finished_at)
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Other(_)), "{status}: {err:?}");
    }
    assert_eq!(store.runs.get_run(other.id).await.unwrap(), other);
}

async fn pending_approval_can_be_denied(store: Stores) {
    let pending = insert(
        &store,
        NewRun {
            status: RunStatus::PendingApproval,
            approval_id: Some(Uuid::now_v7()),
            ..new_run("git", "git_log", t0())
        },
    )
    .await;
    let at = t0() + Duration::seconds(30);
    let denied = store
        .runs
        .finish_run(pending.id, RunStatus::Denied, None, at)
        .await
        .unwrap();
    let expected = Run {
        status: RunStatus::Denied,
        finished_at: Some(at),
        ..pending.clone()
    };
    assert_eq!(denied, Some(expected.clone()));
    // A denied run never starts, and cannot be approved into anything else.
    assert_eq!(
        store
            .runs
            .start_run(pending.id, None, "instance-a", at)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .runs
            .finish_run(pending.id, RunStatus::Expired, None, at)
            .await
            .unwrap(),
        None
    );
    assert_eq!(store.runs.get_run(pending.id).await.unwrap(), expected);

    // The other ways out of pending_approval.
    for status in [RunStatus::Expired, RunStatus::Cancelled] {
        let pending = insert(
            &store,
            NewRun {
                status: RunStatus::PendingApproval,
                ..new_run("git", "git_log", t0())
            },
        )
        .await;
        let ended = store
            .runs
            .finish_run(pending.id, status, None, at)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            ended,
            Run {
                status,
                finished_at: Some(at),
                ..pending
            }
        );
    }
}

async fn list_newest_first_with_cursor_pages(store: Stores) {
    // 25 runs, two per second: one on the whole second, one half a second
    // later (a text encoding that drops trailing zeros sorts these wrongly),
    // and two with the very same created_at, which only the id orders.
    let base = Utc.with_ymd_and_hms(2024, 11, 22, 4, 41, 0).unwrap();
    let mut created: Vec<DateTime<Utc>> = (0..25).map(|i| base + Duration::milliseconds(500 * i)).collect();
    created[18] = created[17];
    let mut news: Vec<NewRun> = created.iter().map(|at| new_run("git", "git_log", *at)).collect();
    // Insertion order is not creation order.
    news.reverse();
    news.swap(3, 20);
    news.swap(0, 12);
    let mut inserted = Vec::new();
    for new in news {
        inserted.push(insert(&store, new).await);
    }
    let expected = newest_first(inserted);
    // The tie sits at positions 6 and 7: exactly across the first page break.
    assert_eq!(expected[6].created_at, expected[7].created_at);

    let (runs, sizes) = all_pages(
        &store,
        RunFilter {
            limit: 7,
            ..RunFilter::default()
        },
    )
    .await;
    assert_eq!(sizes, [7, 7, 7, 4]);
    assert_eq!(runs, expected);

    // One page holding everything has no next page, even when full.
    for limit in [25, 26, 500] {
        let page = store
            .runs
            .list_runs(RunFilter {
                limit,
                ..RunFilter::default()
            })
            .await
            .unwrap();
        assert_eq!(page.runs, expected, "limit {limit}");
        assert_eq!(page.next_cursor, None, "limit {limit}");
    }

    // A cursor is a position, not a snapshot: a run created later does not
    // shift the pages after it.
    let first = store
        .runs
        .list_runs(RunFilter {
            limit: 10,
            ..RunFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(first.runs, expected[..10]);
    insert(&store, new_run("git", "git_log", base + Duration::hours(1))).await;
    let second = store
        .runs
        .list_runs(RunFilter {
            limit: 10,
            cursor: first.next_cursor.clone(),
            ..RunFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(second.runs, expected[10..20]);
}

/// Which runs a filter should let through, checked in Rust.
type Keep = Box<dyn Fn(&Run) -> bool + Send + Sync>;

/// 24 runs of eight shapes (skill, tool, final status), a second apart,
/// newest first: what [`list_filters`] filters.
async fn runs_of_every_shape(store: &Stores) -> Vec<Run> {
    let shapes = [
        ("git", "git_log", RunStatus::Queued),
        ("git", "git_log", RunStatus::Succeeded),
        ("git", "git_status", RunStatus::Running),
        ("git", "git_status", RunStatus::Succeeded),
        ("fs", "read", RunStatus::PendingApproval),
        ("fs", "read", RunStatus::Failed),
        ("fs", "write", RunStatus::Denied),
        ("web", "git_log", RunStatus::Succeeded), // the same tool name in another skill
    ];
    let mut runs = Vec::new();
    for (i, (skill, tool, status)) in shapes.into_iter().cycle().take(24).enumerate() {
        let at = t0() + Duration::seconds(i as i64);
        let initial = if status == RunStatus::PendingApproval {
            RunStatus::PendingApproval
        } else {
            RunStatus::Queued
        };
        let run = insert(
            store,
            NewRun {
                status: initial,
                ..new_run(skill, tool, at)
            },
        )
        .await;
        let run = match status {
            RunStatus::Queued | RunStatus::PendingApproval => run,
            RunStatus::Running => store
                .runs
                .start_run(run.id, None, "instance-a", at)
                .await
                .unwrap()
                .unwrap(),
            other => store
                .runs
                .finish_run(run.id, other, None, at)
                .await
                .unwrap()
                .unwrap(),
        };
        runs.push(run);
    }
    newest_first(runs)
}

async fn list_filters(store: Stores) {
    let runs = runs_of_every_shape(&store).await;

    let cases: Vec<(RunFilter, Keep)> = vec![
        (RunFilter::default(), Box::new(|_| true)),
        (
            RunFilter {
                tool: Some("git_log".to_owned()),
                ..RunFilter::default()
            },
            Box::new(|r| r.tool == "git_log"),
        ),
        (
            RunFilter {
                skill: Some("fs".to_owned()),
                ..RunFilter::default()
            },
            Box::new(|r| r.skill == "fs"),
        ),
        (
            RunFilter {
                status: Some(RunStatus::Succeeded),
                ..RunFilter::default()
            },
            Box::new(|r| r.status == RunStatus::Succeeded),
        ),
        (
            RunFilter {
                skill: Some("git".to_owned()),
                tool: Some("git_log".to_owned()),
                status: Some(RunStatus::Succeeded),
                ..RunFilter::default()
            },
            Box::new(|r| r.skill == "git" && r.tool == "git_log" && r.status == RunStatus::Succeeded),
        ),
        (
            RunFilter {
                tool: Some("nope".to_owned()),
                ..RunFilter::default()
            },
            Box::new(|_| false),
        ),
        (
            RunFilter {
                status: Some(RunStatus::Interrupted),
                ..RunFilter::default()
            },
            Box::new(|_| false),
        ),
    ];
    for (filter, keep) in cases {
        let expected: Vec<Run> = runs.iter().filter(|r| keep(r)).cloned().collect();
        // In one page, and in pages of 2 (filters and cursor together).
        let page = store.runs.list_runs(filter.clone()).await.unwrap();
        assert_eq!(page.runs, expected, "{filter:?}");
        assert_eq!(page.next_cursor, None, "{filter:?}");
        let (paged, _) = all_pages(
            &store,
            RunFilter {
                limit: 2,
                ..filter.clone()
            },
        )
        .await;
        assert_eq!(ids(&paged), ids(&expected), "{filter:?}");
    }
}

async fn list_limit_is_clamped(store: Stores) {
    for i in 0..3 {
        insert(&store, new_run("git", "git_log", t0() + Duration::seconds(i))).await;
    }
    let page = store
        .runs
        .list_runs(RunFilter {
            limit: 0,
            ..RunFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(page.runs.len(), 1);
    assert!(page.next_cursor.is_some());
    let page = store
        .runs
        .list_runs(RunFilter {
            limit: u32::MAX,
            ..RunFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(page.runs.len(), 3);
    assert_eq!(page.next_cursor, None);
}

async fn invalid_cursor(store: Stores) {
    insert(&store, new_run("git", "git_log", t0())).await;
    let valid = Uuid::now_v7().simple().to_string();
    let bad = [
        String::new(),
        "garbage".to_owned(),
        "12345".to_owned(),
        format!("notanumber_{valid}"),
        "1732249260123456_notauuid".to_owned(),
        format!("99999999999999999999_{valid}"),
        "'; drop table runs; --".to_owned(),
    ];
    for cursor in bad {
        let err = store
            .runs
            .list_runs(RunFilter {
                cursor: Some(cursor.clone()),
                ..RunFilter::default()
            })
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::InvalidCursor), "{cursor:?}: {err:?}");
    }
    assert_eq!(
        store
            .runs
            .list_runs(RunFilter::default())
            .await
            .unwrap()
            .runs
            .len(),
        1
    );
}

async fn interrupt_running_marks_only_running(store: Stores) {
    let run_log = &store.runs;
    let mut make = Vec::new();
    for (i, state) in [
        "running@a",
        "running@a",
        "running@b",
        "queued",
        "pending",
        "succeeded@a",
    ]
    .into_iter()
    .enumerate()
    {
        let at = t0() + Duration::seconds(i as i64);
        let status = if state == "pending" {
            RunStatus::PendingApproval
        } else {
            RunStatus::Queued
        };
        let run = insert(
            &store,
            NewRun {
                status,
                ..new_run("git", "git_log", at)
            },
        )
        .await;
        let run = match state.split_once('@') {
            Some((what, instance)) => {
                let run = run_log
                    .start_run(run.id, Some(i as i32 + 100), instance, at)
                    .await
                    .unwrap()
                    .unwrap();
                if what == "succeeded" {
                    run_log
                        .finish_run(run.id, RunStatus::Succeeded, Some(json!({"success": true})), at)
                        .await
                        .unwrap()
                        .unwrap()
                } else {
                    run
                }
            }
            None => run,
        };
        make.push(run);
    }
    let before = make;
    let now = t0() + Duration::minutes(5);

    // This instance's crash leaves the other instance's runs alone.
    assert_eq!(run_log.interrupt_running(Some("a"), now).await.unwrap(), 2);
    let interrupted = |run: &Run| Run {
        status: RunStatus::Interrupted,
        finished_at: Some(now),
        ..run.clone()
    };
    let mut expected = before.clone();
    expected[0] = interrupted(&before[0]);
    expected[1] = interrupted(&before[1]);
    for run in &expected {
        assert_eq!(&run_log.get_run(run.id).await.unwrap(), run);
    }
    assert_eq!(run_log.interrupt_running(Some("a"), now).await.unwrap(), 0);
    assert_eq!(run_log.interrupt_running(Some("nobody"), now).await.unwrap(), 0);

    // Without an instance, every running run.
    assert_eq!(run_log.interrupt_running(None, now).await.unwrap(), 1);
    expected[2] = interrupted(&before[2]);
    for run in &expected {
        assert_eq!(&run_log.get_run(run.id).await.unwrap(), run);
    }
    assert_eq!(run_log.interrupt_running(None, now).await.unwrap(), 0);
    // Interrupted is final.
    assert_eq!(
        run_log
            .finish_run(before[0].id, RunStatus::Succeeded, None, now)
            .await
            .unwrap(),
        None
    );
}

async fn concurrent_start_has_one_winner(store: Stores) {
    for round in 0..10 {
        let run = insert(&store, new_run("git", "git_log", t0() + Duration::seconds(round))).await;
        let barrier = Arc::new(tokio::sync::Barrier::new(8));
        let tasks: Vec<_> = (0..8)
            .map(|task| {
                let store = store.clone();
                let barrier = barrier.clone();
                tokio::spawn(async move {
                    let instance = format!("instance-{task}");
                    barrier.wait().await;
                    let won = store
                        .runs
                        .start_run(run.id, Some(task), &instance, t0())
                        .await
                        .unwrap();
                    won.map(|run| (task, run))
                })
            })
            .collect();
        let mut winners = Vec::new();
        for task in tasks {
            winners.extend(task.await.unwrap());
        }
        assert_eq!(winners.len(), 1, "round {round}: {winners:?}");
        let (task, won) = winners.remove(0);
        assert_eq!(won.instance, Some(format!("instance-{task}")));
        assert_eq!(won.pgid, Some(task));
        assert_eq!(store.runs.get_run(run.id).await.unwrap(), won);
    }
}

/// Many writes at once, some of them bound to fail (a duplicate id, a run
/// already finished): each failure is its caller's alone, and every other
/// write is kept, however the store groups them into transactions.
async fn concurrent_writes_fail_alone(store: Stores) {
    let first = insert(&store, new_run("git", "git_log", t0())).await;
    let barrier = Arc::new(tokio::sync::Barrier::new(48));
    let tasks: Vec<_> = (0..48)
        .map(|i| {
            let (store, barrier) = (store.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                let mut new = new_run("git", "git_log", t0() + Duration::milliseconds(i));
                if i % 3 == 0 {
                    new.id = first.id;
                }
                let inserted = store.runs.insert_run(new.clone()).await;
                if i % 3 == 0 {
                    assert!(matches!(inserted, Err(StoreError::Conflict(_))), "{inserted:?}");
                    return None;
                }
                let run = inserted.unwrap();
                let ended = store
                    .runs
                    .finish_run(run.id, RunStatus::Succeeded, None, t0())
                    .await;
                assert_eq!(ended.unwrap().unwrap().status, RunStatus::Succeeded);
                let again = store.runs.finish_run(run.id, RunStatus::Failed, None, t0()).await;
                assert_eq!(again.unwrap(), None);
                Some(run.id)
            })
        })
        .collect();
    let mut kept = vec![first.id];
    for task in tasks {
        kept.extend(task.await.unwrap());
    }
    let (runs, _) = all_pages(&store, RunFilter::default()).await;
    let mut listed = ids(&runs);
    listed.sort();
    kept.sort();
    assert_eq!(listed, kept);
    assert_eq!(store.runs.get_run(first.id).await.unwrap(), first);
}

async fn concurrent_finish_has_one_winner(store: Stores) {
    let statuses = [
        RunStatus::Succeeded,
        RunStatus::Failed,
        RunStatus::TimedOut,
        RunStatus::Cancelled,
        RunStatus::Succeeded,
        RunStatus::Failed,
        RunStatus::TimedOut,
        RunStatus::Cancelled,
    ];
    for round in 0..5 {
        let run = insert(&store, new_run("git", "git_log", t0() + Duration::seconds(round))).await;
        store
            .runs
            .start_run(run.id, None, "instance-a", t0())
            .await
            .unwrap()
            .unwrap();
        let barrier = Arc::new(tokio::sync::Barrier::new(statuses.len()));
        let tasks: Vec<_> = statuses
            .into_iter()
            .enumerate()
            .map(|(task, status)| {
                let store = store.clone();
                let barrier = barrier.clone();
                tokio::spawn(async move {
                    barrier.wait().await;
                    let result = json!({"task": task});
                    store
                        .runs
                        .finish_run(run.id, status, Some(result), t0())
                        .await
                        .unwrap()
                })
            })
            .collect();
        let mut winners = Vec::new();
        for task in tasks {
            winners.extend(task.await.unwrap());
        }
        assert_eq!(winners.len(), 1, "round {round}: {winners:?}");
        assert_eq!(store.runs.get_run(run.id).await.unwrap(), winners[0]);
    }
}

async fn ping_works(store: Stores) {
    store.runs.ping().await.unwrap();
    // And keeps working under concurrent use.
    let pings: Vec<_> = (0..16)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move { store.runs.ping().await })
        })
        .collect();
    for ping in pings {
        ping.await.unwrap().unwrap();
    }
}

async fn restart_keeps_every_run(url: String) {
    let store = open(&url).await;
    let queued = insert(&store, new_run("git", "git_log", t0())).await;
    let pending = insert(
        &store,
        NewRun {
            status: RunStatus::PendingApproval,
            requested_by: Some("bob".to_owned()),
            approval_id: Some(Uuid::now_v7()),
            ..new_run("fs", "write", t0() + Duration::seconds(1))
        },
    )
    .await;
    let running = insert(&store, new_run("git", "git_status", t0() + Duration::seconds(2))).await;
    let running = store
        .runs
        .start_run(running.id, Some(31337), "instance-a", t0())
        .await
        .unwrap()
        .unwrap();
    let done = insert(&store, new_run("git", "git_log", t0() + Duration::seconds(3))).await;
    store
        .runs
        .start_run(done.id, None, "instance-a", t0())
        .await
        .unwrap()
        .unwrap();
    let done = store
        .runs
        .finish_run(done.id, RunStatus::Succeeded, Some(envelope(done.id, true)), t0())
        .await
        .unwrap()
        .unwrap();
    let before = store.runs.list_runs(RunFilter::default()).await.unwrap();
    assert_eq!(
        before.runs,
        newest_first(vec![queued, pending, running.clone(), done])
    );
    drop(store);

    // The migrations run again on the same database and change nothing.
    let store = open(&url).await;
    assert_eq!(store.runs.list_runs(RunFilter::default()).await.unwrap(), before);
    for run in &before.runs {
        assert_eq!(&store.runs.get_run(run.id).await.unwrap(), run);
    }
    // The recovery a restart does: the orphaned run is interrupted.
    let now = t0() + Duration::minutes(1);
    assert_eq!(store.runs.interrupt_running(None, now).await.unwrap(), 1);
    assert_eq!(
        store.runs.get_run(running.id).await.unwrap(),
        Run {
            status: RunStatus::Interrupted,
            finished_at: Some(now),
            ..running
        }
    );
}

// ---- backend-specific ------------------------------------------------------

#[tokio::test]
async fn connect_rejects_unknown_schemes() {
    for url in [
        "mysql://root:hunter2@db/skilld",
        "skilld.db",
        "",
        "http://localhost/",
    ] {
        let Err(err) = store::connect(url).await else {
            panic!("{url:?} connected");
        };
        let message = err.to_string();
        assert!(matches!(err, StoreError::Other(_)), "{url:?}: {err:?}");
        assert!(
            message.contains("sqlite://") && message.contains("postgres://"),
            "{message}"
        );
        assert!(!message.contains("hunter2"), "{message}");
    }
    let Err(err) = store::connect("mysql://root:hunter2@db/skilld").await else {
        unreachable!()
    };
    assert!(err.to_string().contains("'mysql'"), "{err}");
}

#[tokio::test]
async fn sqlite_creates_its_directory_and_runs_in_wal_mode() {
    let dir = crate::common::tempdir().unwrap();
    let path = dir.path().join("state/nested/skilld.db");
    let store = store::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    assert_eq!(store.runs.backend(), "sqlite");
    assert!(path.is_file());
    store.runs.ping().await.unwrap();

    // WAL is a property of the file: a plain connection sees it too.
    let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    let mode: String = sqlx::query_scalar("pragma journal_mode")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(mode, "wal");

    // The `sqlite:` form without slashes works too.
    let other = dir.path().join("other.db");
    let store = store::connect(&format!("sqlite:{}", other.display()))
        .await
        .unwrap();
    store.runs.ping().await.unwrap();
    assert!(other.is_file());
}

/// Calls never checkpoint (that was a 100 ms stall on one call in a
/// hundred); a background task does, so the database file takes in what
/// the WAL holds, and the WAL starts over instead of growing.
#[tokio::test]
async fn sqlite_checkpoints_in_the_background() {
    let dir = crate::common::tempdir().unwrap();
    let path = dir.path().join("skilld.db");
    let store = store::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    let size = |p: &std::path::Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    let wal = dir.path().join("skilld.db-wal");
    // Five bursts of writes with a pause after each: checkpointed in the
    // pause, the WAL starts over, so it stays the size of one burst
    // (without checkpoints it would hold all five). The pause lasts until
    // the database file has taken in the burst and held still for longer
    // than a checkpoint period, however slow a loaded machine is.
    let (mut first_burst, mut db_after_first) = (0, 0);
    for round in 0..5 {
        let before = size(&path);
        for _ in 0..100 {
            insert(&store, new_run("git", "git_log", t0())).await;
        }
        if round == 0 {
            first_burst = size(&wal);
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let (mut last, mut still) = (size(&path), 0);
        while still < 4 && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
            let now = size(&path);
            still = if now == last && now > before { still + 1 } else { 0 };
            last = now;
        }
        if round == 0 {
            db_after_first = size(&path);
        }
    }
    assert!(first_burst > 0);
    assert!(
        size(&wal) < first_burst * 5 / 2,
        "WAL is {} bytes after five bursts of {first_burst}",
        size(&wal)
    );
    assert!(
        size(&path) > db_after_first,
        "the database file took in the later runs"
    );
    let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    let interval: i64 = sqlx::query_scalar("pragma wal_autocheckpoint")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert!(interval > 0, "a plain connection keeps SQLite's own checkpoints");
}

/// A call's writes run on the calling thread and never wait there for
/// SQLite's lock: while another connection holds it, the write waits off
/// the runtime (the one thread of this runtime goes on serving timers and
/// tasks), then goes through once the lock is free.
#[tokio::test(flavor = "current_thread")]
async fn sqlite_writes_wait_for_another_writer_off_the_runtime() {
    let dir = crate::common::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("skilld.db").display());
    let store = store::connect(&url).await.unwrap();
    let mut other = sqlx::SqliteConnection::connect(&url).await.unwrap();
    sqlx::query("begin immediate").execute(&mut other).await.unwrap();

    let new = new_run("git", "git_log", t0());
    let writer = tokio::spawn({
        let (store, new) = (store.clone(), new.clone());
        async move { store.runs.insert_run(new).await }
    });
    let ticks = tokio::spawn(async {
        let mut ticks = 0;
        for _ in 0..20 {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            ticks += 1;
        }
        ticks
    });
    assert_eq!(ticks.await.unwrap(), 20, "the runtime kept running");
    assert!(!writer.is_finished(), "the insert waited for the lock");

    sqlx::query("commit").execute(&mut other).await.unwrap();
    let run = writer.await.unwrap().unwrap();
    assert_eq!(run, as_inserted(&new));
    assert_eq!(store.runs.get_run(new.id).await.unwrap(), run);
}

/// `sqlite::memory:` is one database for every connection of the store:
/// what the hot path writes, the reads see.
#[tokio::test]
async fn sqlite_in_memory_is_one_database() {
    let store = store::connect("sqlite::memory:").await.unwrap();
    let run = insert(&store, new_run("git", "git_log", t0())).await;
    let started = store
        .runs
        .start_run(run.id, Some(42), "here", t0())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(started.status, RunStatus::Running);
    store
        .runs
        .finish_run(run.id, RunStatus::Succeeded, Some(envelope(run.id, true)), t0())
        .await
        .unwrap()
        .unwrap();
    let read = store.runs.get_run(run.id).await.unwrap();
    assert_eq!(read.status, RunStatus::Succeeded);
    assert_eq!(read.pgid, Some(42));
    let page = store.runs.list_runs(RunFilter::default()).await.unwrap();
    assert_eq!(ids(&page.runs), vec![run.id]);

    // Another in-memory store is another database.
    let other = store::connect("sqlite::memory:").await.unwrap();
    assert!(matches!(
        other.runs.get_run(run.id).await,
        Err(StoreError::NotFound { .. })
    ));
}

#[tokio::test]
async fn unreachable_postgres_is_unavailable() {
    // Nothing listens on port 1; after the pool's acquire timeout the store
    // reports itself unavailable (HTTP 503), not a generic failure.
    let Err(err) = store::connect("postgres://postgres@127.0.0.1:1/test").await else {
        panic!("connected to port 1");
    };
    assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
}

/// Connections the server closes under the pool (a restart, a failover,
/// an idle timeout) are found out and replaced, with no ping before each
/// statement: the run log goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cut_postgres_connections_are_replaced() {
    on_postgres(|url| async move {
        let name = format!("skilld_cut_{}", Uuid::now_v7().simple());
        let store = open(&format!("{url}&application_name={name}")).await;
        let first = insert(&store, new_run("git", "git_log", t0())).await;
        let base = postgres_url().expect("set, or on_postgres would not run this");
        let mut admin = sqlx::PgConnection::connect(&base).await.unwrap();
        let cut: Vec<bool> = sqlx::query_scalar(
            "select pg_terminate_backend(pid) from pg_stat_activity where application_name = $1",
        )
        .bind(&name)
        .fetch_all(&mut admin)
        .await
        .unwrap();
        assert!(
            !cut.is_empty() && cut.iter().all(|c| *c),
            "no connection of the store was cut"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let second = insert(&store, new_run("git", "git_log", t0())).await;
        assert_eq!(store.runs.get_run(first.id).await.unwrap().id, first.id);
        assert_eq!(store.runs.get_run(second.id).await.unwrap().id, second.id);
    })
    .await;
}

// ---- approvals and grants ------------------------------------------------------

/// A held call of `skill`/`tool` at version `hash`, asked at `at`, valid
/// for an hour: the run and its request.
fn held(skill: &str, tool: &str, hash: &str, at: DateTime<Utc>) -> (NewRun, NewApproval) {
    let approval = NewApproval {
        id: Uuid::now_v7(),
        description: "Shows the log.".to_owned(),
        trust: "user".to_owned(),
        warning: Some("First run".to_owned()),
        permissions: vec!["file:write".to_owned(), "net:fetch".to_owned()],
        expires_at: at + Duration::hours(1),
    };
    let run = NewRun {
        status: RunStatus::PendingApproval,
        approval_id: Some(approval.id),
        requested_by: Some("agent".to_owned()),
        skill_hash: hash.to_owned(),
        mode: Some("Dev".to_owned()),
        request_id: None,
        ..new_run(skill, tool, at)
    };
    (run, approval)
}

async fn hold(
    store: &Stores,
    skill: &str,
    tool: &str,
    hash: &str,
    at: DateTime<Utc>,
) -> (NewRun, NewApproval) {
    let (run, approval) = held(skill, tool, hash, at);
    store
        .holds
        .insert_pending(run.clone(), approval.clone())
        .await
        .unwrap();
    (run, approval)
}

/// The first page of pending requests (of at most 10).
async fn pending(store: &Stores) -> Vec<Approval> {
    let filter = ApprovalFilter {
        status: Some(ApprovalStatus::Pending),
        limit: 10,
        cursor: None,
    };
    store.approvals.list_approvals(filter).await.unwrap().approvals
}

fn decision(approval: &NewApproval, approve: bool, scope: Scope, at: DateTime<Utc>) -> Decide {
    Decide {
        approval_id: approval.id,
        approve,
        scope,
        decided_by: Some("alice".to_owned()),
        note: Some("looks fine".to_owned()),
        instance: "instance-a".to_owned(),
        at,
    }
}

async fn pending_requests_are_counted_per_caller(store: Stores) {
    // `held` makes requests of "agent", expiring an hour after `at`.
    let (_, first) = hold(&store, "git", "git_log", "h1", t0()).await;
    hold(&store, "git", "git_log", "h1", t0()).await;
    let (mut run, approval) = held("git", "git_log", "h1", t0());
    run.requested_by = None;
    store.holds.insert_pending(run, approval).await.unwrap();
    assert_eq!(
        store.holds.count_pending_by(Some("agent"), t0()).await.unwrap(),
        2
    );
    assert_eq!(store.holds.count_pending_by(None, t0()).await.unwrap(), 1);
    assert_eq!(
        store.holds.count_pending_by(Some("other"), t0()).await.unwrap(),
        0
    );
    // Decided and expired requests no longer count.
    store
        .approvals
        .decide(decision(&first, false, Scope::Once, t0()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        store.holds.count_pending_by(Some("agent"), t0()).await.unwrap(),
        1
    );
    let later = first.expires_at + Duration::seconds(1);
    assert_eq!(
        store.holds.count_pending_by(Some("agent"), later).await.unwrap(),
        0
    );
}

async fn a_caller_that_stops_waiting_is_noted_once(store: Stores) {
    let (_, new) = hold(&store, "git", "git_log", "h1", t0()).await;
    let later = t0() + Duration::seconds(30);
    store.holds.mark_caller_left(new.id, later).await.unwrap();
    store
        .holds
        .mark_caller_left(new.id, later + Duration::seconds(5))
        .await
        .unwrap();
    let approval = store.approvals.get_approval(new.id).await.unwrap();
    assert_eq!(approval.caller_left_at, Some(later), "the first time is kept");
    assert_eq!(pending(&store).await[0].caller_left_at, Some(later));
    // Still pending, still decidable.
    store
        .approvals
        .decide(decision(&new, true, Scope::Once, later))
        .await
        .unwrap()
        .unwrap();
    // A decided request is left alone; an unknown one is no error.
    let (_, other) = hold(&store, "git", "git_log", "h1", t0()).await;
    store
        .approvals
        .decide(decision(&other, false, Scope::Once, t0()))
        .await
        .unwrap()
        .unwrap();
    store.holds.mark_caller_left(other.id, later).await.unwrap();
    assert_eq!(
        store
            .approvals
            .get_approval(other.id)
            .await
            .unwrap()
            .caller_left_at,
        None
    );
    store.holds.mark_caller_left(Uuid::now_v7(), later).await.unwrap();
}

async fn a_held_call_is_approved_once(store: Stores) {
    let (run, new) = hold(&store, "git", "git_log", "h1", t0()).await;
    let pending = store.approvals.get_approval(new.id).await.unwrap();
    assert_eq!(
        pending,
        Approval {
            id: new.id,
            run_id: run.id,
            skill: "git".to_owned(),
            tool: "git_log".to_owned(),
            description: new.description.clone(),
            trust: "user".to_owned(),
            warning: Some("First run".to_owned()),
            arguments: run.arguments.clone(),
            argv: run.argv.clone(),
            cwd: run.cwd.clone(),
            permissions: vec!["file:write".to_owned(), "net:fetch".to_owned()],
            skill_hash: "h1".to_owned(),
            status: ApprovalStatus::Pending,
            scope: None,
            requested_by: Some("agent".to_owned()),
            decided_by: None,
            note: None,
            created_at: t0(),
            decided_at: None,
            expires_at: new.expires_at,
            mode: Some("Dev".to_owned()),
            caller_left_at: None,
        }
    );
    assert_eq!(store.runs.get_run(run.id).await.unwrap(), as_inserted(&run));
    assert_eq!(self::pending(&store).await, vec![pending.clone()]);
    assert_eq!(store.approvals.count_pending().await.unwrap(), 1);
    let facts = store.holds.policy_facts("git", "git_log", "h1").await.unwrap();
    assert_eq!(facts, PolicyFacts::default());

    let at = t0() + Duration::seconds(5);
    let approved = store
        .approvals
        .decide(decision(&new, true, Scope::Once, at))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        approved,
        Approval {
            status: ApprovalStatus::Approved,
            scope: Some(Scope::Once),
            decided_by: Some("alice".to_owned()),
            note: Some("looks fine".to_owned()),
            decided_at: Some(at),
            ..pending
        }
    );
    // The run is queued, claimed for the deciding instance, which starts it.
    let claimed = store.runs.get_run(run.id).await.unwrap();
    assert_eq!(
        (claimed.status, claimed.started_at, claimed.instance.as_deref()),
        (RunStatus::Queued, None, Some("instance-a"))
    );
    assert_eq!(claimed.mode.as_deref(), Some("Dev"));
    assert_eq!(
        claimed.note.as_deref(),
        Some("looks fine"),
        "the approver's note is on the run"
    );
    let started = store
        .runs
        .start_run(run.id, None, "instance-a", at)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (started.status, started.started_at),
        (RunStatus::Running, Some(at))
    );
    decided_once_leaves_the_version_approved(&store, new, at).await;
}

/// After [`a_held_call_is_approved_once`]: decided once, the version is
/// approved (first-run) with no standing grant.
async fn decided_once_leaves_the_version_approved(store: &Stores, new: NewApproval, at: DateTime<Utc>) {
    // Decided once: a second approval or a denial is refused.
    for approve in [true, false] {
        assert_eq!(
            store
                .approvals
                .decide(decision(&new, approve, Scope::Always, at))
                .await
                .unwrap(),
            Err(Undecidable::AlreadyDecided(ApprovalStatus::Approved))
        );
    }
    assert_eq!(store.approvals.count_pending().await.unwrap(), 0);
    assert!(
        store.approvals.list_grants(None).await.unwrap().is_empty(),
        "once leaves no grant"
    );
    // The version is now approved (first-run), with no standing grant.
    let facts = store.holds.policy_facts("git", "git_log", "h1").await.unwrap();
    assert_eq!(
        facts,
        PolicyFacts {
            grant: None,
            grant_by: None,
            hash_approved: true
        }
    );
    let unknown = decision(
        &NewApproval {
            id: Uuid::now_v7(),
            ..new
        },
        true,
        Scope::Once,
        at,
    );
    assert!(matches!(
        store.approvals.decide(unknown).await,
        Err(StoreError::NotFound { .. })
    ));
}

async fn deny_always_leaves_a_standing_deny_until_revoked(store: Stores) {
    let (run, new) = hold(&store, "fs", "rm", "h1", t0()).await;
    let at = t0() + Duration::seconds(1);
    let denied = store
        .approvals
        .decide(decision(&new, false, Scope::Always, at))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (denied.status, denied.scope),
        (ApprovalStatus::Denied, Some(Scope::Always))
    );
    let ended = store.runs.get_run(run.id).await.unwrap();
    assert_eq!(
        (
            ended.status,
            ended.finished_at,
            ended.started_at,
            ended.note.as_deref()
        ),
        (RunStatus::Denied, Some(at), None, Some("looks fine"))
    );
    let facts = store.holds.policy_facts("fs", "rm", "h1").await.unwrap();
    assert_eq!(
        facts,
        PolicyFacts {
            grant: Some(GrantDecision::Deny),
            grant_by: Some("alice".to_owned()),
            hash_approved: false
        }
    );
    // Bound to the tool and the version.
    assert_eq!(
        store.holds.policy_facts("fs", "ls", "h1").await.unwrap(),
        PolicyFacts::default()
    );
    assert_eq!(
        store.holds.policy_facts("fs", "rm", "h2").await.unwrap(),
        PolicyFacts::default()
    );

    let grants = store.approvals.list_grants(None).await.unwrap();
    assert_eq!(grants.len(), 1);
    let grant = &grants[0];
    assert_eq!(
        (
            grant.skill.as_str(),
            grant.tool.as_str(),
            grant.skill_hash.as_str(),
            grant.decision,
            grant.created_by.as_deref(),
            grant.created_at
        ),
        ("fs", "rm", "h1", GrantDecision::Deny, Some("alice"), at)
    );
    store.approvals.revoke_grant(grant.id).await.unwrap();
    assert!(matches!(
        store.approvals.revoke_grant(grant.id).await,
        Err(StoreError::NotFound { .. })
    ));
    assert_eq!(
        store.holds.policy_facts("fs", "rm", "h1").await.unwrap(),
        PolicyFacts::default()
    );
}

async fn a_later_always_replaces_the_grant(store: Stores) {
    let (_, first) = hold(&store, "fs", "write", "h1", t0()).await;
    store
        .approvals
        .decide(decision(&first, true, Scope::Always, t0()))
        .await
        .unwrap()
        .unwrap();
    let facts = store.holds.policy_facts("fs", "write", "h1").await.unwrap();
    assert_eq!(
        facts,
        PolicyFacts {
            grant: Some(GrantDecision::Allow),
            grant_by: Some("alice".to_owned()),
            hash_approved: true
        }
    );
    // An allow grant also approves the version for the skill's other tools.
    assert!(
        store
            .holds
            .policy_facts("fs", "other", "h1")
            .await
            .unwrap()
            .hash_approved
    );

    let (_, second) = hold(&store, "fs", "write", "h1", t0() + Duration::seconds(1)).await;
    store
        .approvals
        .decide(decision(
            &second,
            false,
            Scope::Always,
            t0() + Duration::seconds(2),
        ))
        .await
        .unwrap()
        .unwrap();
    let grants = store.approvals.list_grants(None).await.unwrap();
    assert_eq!(grants.len(), 1, "{grants:?}");
    assert_eq!(grants[0].decision, GrantDecision::Deny);
    // The first approval still counts as a first-run approval.
    assert_eq!(
        store.holds.policy_facts("fs", "write", "h1").await.unwrap(),
        PolicyFacts {
            grant: Some(GrantDecision::Deny),
            grant_by: Some("alice".to_owned()),
            hash_approved: true
        }
    );
}

/// `put_grants` records several at once, `list_grants(Some(skill))` and
/// `revoke_grants_of` touch that skill's only, and the facts follow.
async fn grants_are_listed_and_revoked_by_skill(store: Stores) {
    let grant = |skill: &str, tool: &str, hash: &str, by: &str| Grant {
        id: Uuid::now_v7(),
        skill: skill.to_owned(),
        tool: tool.to_owned(),
        skill_hash: hash.to_owned(),
        decision: GrantDecision::Allow,
        created_by: Some(by.to_owned()),
        created_at: t0(),
    };
    store
        .approvals
        .put_grants(vec![
            grant("fs", "ls", "h1", "carol"),
            grant("fs", "rm", "h1", "carol"),
            grant("fs", "ls", "h2", "carol"),
            grant("git", "log", "h1", "config:[[grants]]"),
        ])
        .await
        .unwrap();
    let of = |grants: Vec<Grant>| -> Vec<(String, String, String)> {
        let mut v: Vec<_> = grants
            .into_iter()
            .map(|g| (g.skill, g.tool, g.skill_hash))
            .collect();
        v.sort();
        v
    };
    assert_eq!(store.approvals.list_grants(None).await.unwrap().len(), 4);
    assert_eq!(
        of(store.approvals.list_grants(Some("fs")).await.unwrap()),
        [("fs", "ls", "h1"), ("fs", "ls", "h2"), ("fs", "rm", "h1")].map(|(a, b, c)| (
            a.to_owned(),
            b.to_owned(),
            c.to_owned()
        ))
    );
    assert_eq!(
        store
            .holds
            .policy_facts("git", "log", "h1")
            .await
            .unwrap()
            .grant_by
            .as_deref(),
        Some("config:[[grants]]")
    );
    assert_eq!(store.approvals.revoke_grants_of("fs").await.unwrap(), 3);
    assert_eq!(store.approvals.revoke_grants_of("fs").await.unwrap(), 0);
    assert!(store.approvals.list_grants(Some("fs")).await.unwrap().is_empty());
    assert_eq!(
        store.holds.policy_facts("fs", "ls", "h1").await.unwrap(),
        PolicyFacts::default()
    );
    assert_eq!(
        store.approvals.list_grants(None).await.unwrap().len(),
        1,
        "git's grant stays"
    );
}

async fn expired_requests_cannot_be_decided(store: Stores) {
    let (run, new) = hold(&store, "git", "git_log", "h1", t0()).await;
    let late = new.expires_at + Duration::seconds(1);
    assert_eq!(
        store
            .approvals
            .decide(decision(&new, true, Scope::Once, late))
            .await
            .unwrap(),
        Err(Undecidable::Expired)
    );
    assert_eq!(
        store.approvals.get_approval(new.id).await.unwrap().status,
        ApprovalStatus::Expired
    );
    let ended = store.runs.get_run(run.id).await.unwrap();
    assert_eq!(
        (ended.status, ended.finished_at),
        (RunStatus::Expired, Some(late))
    );
    assert_eq!(
        store
            .approvals
            .decide(decision(&new, true, Scope::Once, late))
            .await
            .unwrap(),
        Err(Undecidable::AlreadyDecided(ApprovalStatus::Expired))
    );

    // The sweep: only what is due, each once.
    let (due_run, due) = hold(&store, "git", "a", "h1", t0()).await;
    let (later_run, later) = hold(&store, "git", "b", "h1", t0() + Duration::minutes(30)).await;
    let now = t0() + Duration::minutes(61);
    assert_eq!(
        store.approvals.expire_approvals(now).await.unwrap(),
        vec![due_run.id]
    );
    assert_eq!(
        store.approvals.expire_approvals(now).await.unwrap(),
        Vec::<Uuid>::new()
    );
    assert_eq!(
        store.approvals.get_approval(due.id).await.unwrap().status,
        ApprovalStatus::Expired
    );
    assert_eq!(
        store.runs.get_run(due_run.id).await.unwrap().status,
        RunStatus::Expired
    );
    assert_eq!(
        store.approvals.get_approval(later.id).await.unwrap().status,
        ApprovalStatus::Pending
    );
    assert_eq!(
        store.runs.get_run(later_run.id).await.unwrap().status,
        RunStatus::PendingApproval
    );
    assert_eq!(store.approvals.count_pending().await.unwrap(), 1);
    // Expired requests never count as approvals.
    assert!(
        !store
            .holds
            .policy_facts("git", "a", "h1")
            .await
            .unwrap()
            .hash_approved
    );
}

async fn cancelling_a_held_run_withdraws_its_request(store: Stores) {
    let (run, new) = hold(&store, "git", "git_log", "h1", t0()).await;
    let at = t0() + Duration::seconds(3);
    let cancelled = store
        .runs
        .finish_run(run.id, RunStatus::Cancelled, None, at)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cancelled.status, RunStatus::Cancelled);
    let withdrawn = store.approvals.get_approval(new.id).await.unwrap();
    assert_eq!(
        (withdrawn.status, withdrawn.decided_at),
        (ApprovalStatus::Expired, Some(at))
    );
    assert_eq!(
        store
            .approvals
            .decide(decision(&new, true, Scope::Once, at))
            .await
            .unwrap(),
        Err(Undecidable::AlreadyDecided(ApprovalStatus::Expired))
    );
    assert_eq!(
        store.runs.get_run(run.id).await.unwrap().status,
        RunStatus::Cancelled
    );
}

async fn concurrent_decisions_have_one_winner(store: Stores) {
    for round in 0..5 {
        let (run, new) = hold(&store, "git", "git_log", "h1", t0() + Duration::seconds(round)).await;
        let barrier = Arc::new(tokio::sync::Barrier::new(8));
        let tasks: Vec<_> = (0..8)
            .map(|task| {
                let store = store.clone();
                let barrier = barrier.clone();
                let d = Decide {
                    approve: task % 2 == 0,
                    instance: format!("instance-{task}"),
                    ..decision(&new, true, Scope::Once, t0() + Duration::seconds(round))
                };
                tokio::spawn(async move {
                    barrier.wait().await;
                    store
                        .approvals
                        .decide(d)
                        .await
                        .unwrap()
                        .ok()
                        .map(|approval| (task, approval))
                })
            })
            .collect();
        let mut winners = Vec::new();
        for task in tasks {
            winners.extend(task.await.unwrap());
        }
        assert_eq!(winners.len(), 1, "round {round}: {winners:?}");
        let (task, approval) = winners.remove(0);
        let ended = store.runs.get_run(run.id).await.unwrap();
        if task % 2 == 0 {
            assert_eq!(approval.status, ApprovalStatus::Approved);
            assert_eq!(
                (ended.status, ended.instance),
                (RunStatus::Queued, Some(format!("instance-{task}")))
            );
        } else {
            assert_eq!(approval.status, ApprovalStatus::Denied);
            assert_eq!(ended.status, RunStatus::Denied);
        }
    }
}

async fn first_run_approval_is_per_skill_version(store: Stores) {
    let (_, new) = hold(&store, "notes", "read", "v1", t0()).await;
    store
        .approvals
        .decide(decision(&new, true, Scope::Once, t0()))
        .await
        .unwrap()
        .unwrap();
    // Any tool of that version; not another version, not another skill.
    assert!(
        store
            .holds
            .policy_facts("notes", "search", "v1")
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
    assert!(
        !store
            .holds
            .policy_facts("other", "read", "v1")
            .await
            .unwrap()
            .hash_approved
    );
    // A denial approves nothing.
    let (_, denied) = hold(&store, "notes", "read", "v2", t0()).await;
    store
        .approvals
        .decide(decision(&denied, false, Scope::Once, t0()))
        .await
        .unwrap()
        .unwrap();
    assert!(
        !store
            .holds
            .policy_facts("notes", "read", "v2")
            .await
            .unwrap()
            .hash_approved
    );
}

/// Waits for `id` on `changes`, skipping others; panics after 10 s.
async fn announced(changes: &mut tokio::sync::broadcast::Receiver<Uuid>, id: Uuid) {
    tokio::time::timeout(std::time::Duration::from_secs(10), async {
        loop {
            match changes.recv().await {
                Ok(changed) if changed == id => return,
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(err) => panic!("{err}"),
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no change announced for {id}"));
}

async fn changes_are_announced(store: Stores) {
    let mut changes = store.runs.changes();
    let (run, new) = hold(&store, "git", "git_log", "h1", t0()).await;
    announced(&mut changes, run.id).await;
    store
        .approvals
        .decide(decision(&new, true, Scope::Once, t0()))
        .await
        .unwrap()
        .unwrap();
    announced(&mut changes, run.id).await;
    store
        .runs
        .finish_run(run.id, RunStatus::Succeeded, None, t0())
        .await
        .unwrap()
        .unwrap();
    announced(&mut changes, run.id).await;
}

/// Two stores on one database, as two instances: a change made through one
/// reaches a waiter on the other (on PostgreSQL through LISTEN/NOTIFY; two
/// SQLite stores are two processes' worth of state and share nothing but
/// the file, so there it is only checked that the change is stored).
async fn changes_reach_every_instance(url: String) {
    let a = store::connect(&url).await.unwrap();
    let b = store::connect(&url).await.unwrap();
    let mut on_b = b.runs.changes();
    let (run, new) = hold(&a, "git", "git_log", "h1", t0()).await;
    if a.runs.backend() == "postgres" {
        announced(&mut on_b, run.id).await;
    }
    a.approvals
        .decide(decision(&new, false, Scope::Once, t0()))
        .await
        .unwrap()
        .unwrap();
    if a.runs.backend() == "postgres" {
        announced(&mut on_b, run.id).await;
    }
    assert_eq!(b.runs.get_run(run.id).await.unwrap().status, RunStatus::Denied);
}

async fn end_waiting_never_touches_a_started_run(store: Stores) {
    let at = t0() + Duration::seconds(1);
    // Held, then withdrawn: the run ends, its request with it.
    let (run, new) = hold(&store, "git", "git_log", "h1", t0()).await;
    let ended = store
        .runs
        .end_waiting(run.id, RunStatus::Cancelled, at)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (ended.status, ended.finished_at, ended.result),
        (RunStatus::Cancelled, Some(at), None)
    );
    assert_eq!(
        store.approvals.get_approval(new.id).await.unwrap().status,
        ApprovalStatus::Expired
    );
    // Approved and started: untouched.
    let (run, new) = hold(&store, "git", "git_log", "h1", t0()).await;
    store
        .approvals
        .decide(decision(&new, true, Scope::Once, t0()))
        .await
        .unwrap()
        .unwrap();
    store
        .runs
        .start_run(run.id, None, "instance-a", at)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        store
            .runs
            .end_waiting(run.id, RunStatus::Expired, at)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store.runs.get_run(run.id).await.unwrap().status,
        RunStatus::Running
    );
    // Queued: ends. Final: untouched. Unknown: not found. Live status: refused.
    let queued = insert(&store, new_run("git", "git_log", t0())).await;
    assert!(
        store
            .runs
            .end_waiting(queued.id, RunStatus::Cancelled, at)
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(
        store
            .runs
            .end_waiting(queued.id, RunStatus::Expired, at)
            .await
            .unwrap(),
        None
    );
    assert!(matches!(
        store
            .runs
            .end_waiting(Uuid::now_v7(), RunStatus::Cancelled, at)
            .await,
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        store.runs.end_waiting(run.id, RunStatus::Running, at).await,
        Err(StoreError::Other(_))
    ));
}

async fn an_approved_run_still_queued_is_recovered_after_a_crash(store: Stores) {
    let (run, new) = hold(&store, "git", "git_log", "h1", t0()).await;
    store
        .approvals
        .decide(decision(&new, true, Scope::Once, t0()))
        .await
        .unwrap()
        .unwrap();
    // Another instance's restart leaves it alone; its own recovers it.
    assert_eq!(
        store
            .runs
            .interrupt_running(Some("instance-b"), t0())
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        store
            .runs
            .interrupt_running(Some("instance-a"), t0())
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        store.runs.get_run(run.id).await.unwrap().status,
        RunStatus::Interrupted
    );
    // A queued run no instance has claimed is not an orphan.
    let unclaimed = insert(&store, new_run("git", "git_log", t0())).await;
    assert_eq!(store.runs.interrupt_running(None, t0()).await.unwrap(), 0);
    assert_eq!(
        store.runs.get_run(unclaimed.id).await.unwrap().status,
        RunStatus::Queued
    );
}

/// A tool may print NUL bytes, or JSON that holds `\u0000`; PostgreSQL's
/// jsonb cannot store that code point, and the run must still finish,
/// recorded the same on both backends.
async fn a_result_with_nul_bytes_is_recorded(store: Stores) {
    let run = insert(&store, new_run("git", "git_log", t0())).await;
    store
        .runs
        .start_run(run.id, Some(7), "a", t0())
        .await
        .unwrap()
        .unwrap();
    let mut result = envelope(run.id, true);
    result["output"] = json!("a\u{0}b");
    result["parsed"] = json!({"k\u{0}": ["\u{0}", {"x": "y\u{0}"}]});
    let finished = store
        .runs
        .finish_run(run.id, RunStatus::Succeeded, Some(result), t0())
        .await
        .unwrap()
        .unwrap();
    let mut expected = envelope(run.id, true);
    expected["output"] = json!("a\u{fffd}b");
    expected["parsed"] = json!({"k\u{fffd}": ["\u{fffd}", {"x": "y\u{fffd}"}]});
    assert_eq!(finished.result, Some(expected.clone()));
    assert_eq!(store.runs.get_run(run.id).await.unwrap().result, Some(expected));
}

/// The approvers' history: decided requests only, newest decision first,
/// each with its run's status, filtered and paged like the run log.
async fn decisions_are_listed_newest_first_with_their_runs(store: Stores) {
    let (approvals, run_log) = (&store.approvals, &store.runs);
    let mut decided = Vec::new();
    for (i, (skill, approve)) in [("git", true), ("web", false), ("git", false)]
        .into_iter()
        .enumerate()
    {
        let at = t0() + Duration::seconds(i64::try_from(i).unwrap());
        let (run, new) = hold(&store, skill, "show", "h1", at).await;
        let decide = decision(&new, approve, Scope::Once, at + Duration::seconds(10));
        approvals.decide(decide).await.unwrap().unwrap();
        decided.push((run.id, new.id));
    }
    // The approved run ran and succeeded: its outcome is in the history.
    let (approved_run, _) = decided[0];
    run_log
        .start_run(approved_run, None, "instance-a", t0())
        .await
        .unwrap()
        .unwrap();
    run_log
        .finish_run(
            approved_run,
            RunStatus::Succeeded,
            None,
            t0() + Duration::seconds(20),
        )
        .await
        .unwrap()
        .unwrap();
    hold(&store, "git", "show", "h1", t0()).await; // pending: not history

    let page = |skill: Option<&str>, limit, cursor: Option<String>| DecisionFilter {
        skill: skill.map(str::to_owned),
        tool: None,
        limit,
        cursor,
    };
    let first = approvals.list_decisions(page(None, 2, None)).await.unwrap();
    let ids: Vec<Uuid> = first.decisions.iter().map(|d| d.approval.id).collect();
    assert_eq!(ids, [decided[2].1, decided[1].1]);
    assert_eq!(first.decisions[0].approval.decided_by.as_deref(), Some("alice"));
    assert_eq!(first.decisions[0].approval.note.as_deref(), Some("looks fine"));
    assert_eq!(first.decisions[0].run_status, RunStatus::Denied);
    let second = approvals
        .list_decisions(page(None, 2, first.next_cursor))
        .await
        .unwrap();
    let ids: Vec<Uuid> = second.decisions.iter().map(|d| d.approval.id).collect();
    assert_eq!(ids, [decided[0].1]);
    assert_eq!(second.decisions[0].approval.status, ApprovalStatus::Approved);
    assert_eq!(second.decisions[0].run_status, RunStatus::Succeeded);
    assert_eq!(second.next_cursor, None);

    let git = approvals
        .list_decisions(page(Some("git"), 50, None))
        .await
        .unwrap();
    let ids: Vec<Uuid> = git.decisions.iter().map(|d| d.approval.id).collect();
    assert_eq!(ids, [decided[2].1, decided[0].1]);
    for nothing in [
        DecisionFilter {
            tool: Some("other".into()),
            ..page(None, 50, None)
        },
        page(Some("git\u{0}"), 50, None),
    ] {
        assert!(
            approvals
                .list_decisions(nothing)
                .await
                .unwrap()
                .decisions
                .is_empty()
        );
    }
    let err = approvals
        .list_decisions(page(None, 50, Some("garbage".into())))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::InvalidCursor), "{err:?}");
}

/// The inbox stream finds a changed run's request, and hears of a caller
/// that stopped waiting.
async fn a_request_is_found_by_its_run_and_its_changes_announced(store: Stores) {
    let (run, new) = hold(&store, "git", "git_log", "h1", t0()).await;
    let found = store.approvals.approval_of_run(run.id).await.unwrap().unwrap();
    assert_eq!((found.id, found.status), (new.id, ApprovalStatus::Pending));
    let plain = insert(&store, new_run("git", "git_log", t0())).await;
    assert_eq!(store.approvals.approval_of_run(plain.id).await.unwrap(), None);
    assert_eq!(
        store.approvals.approval_of_run(Uuid::now_v7()).await.unwrap(),
        None
    );

    let mut changes = store.runs.changes();
    store.holds.mark_caller_left(new.id, t0()).await.unwrap();
    announced(&mut changes, run.id).await;
    let found = store.approvals.approval_of_run(run.id).await.unwrap().unwrap();
    assert_eq!(found.caller_left_at, Some(t0()));
}

/// Webhook deliveries: one per event and target however often recorded,
/// claimed by one instance while its lease holds, retried when due, and
/// listed newest first by status.
async fn notifications_are_recorded_once_and_claimed_by_one(store: Stores) {
    let outbox = &store.outbox;
    use skilld::store::{Attempt, NewNotification, NotificationStatus};
    let approval = Uuid::now_v7();
    let new = |event: &str| NewNotification {
        id: Uuid::now_v7(),
        event: event.to_owned(),
        approval_id: approval,
        target: "team".to_owned(),
        payload: json!({"type": event, "data": {"x": "a\u{0}"}}),
        created_at: t0(),
    };
    assert!(
        outbox
            .enqueue_notification(new("approval.requested"))
            .await
            .unwrap()
    );
    assert!(
        !outbox
            .enqueue_notification(new("approval.requested"))
            .await
            .unwrap()
    );
    let decided_event = new("approval.decided");
    assert!(outbox.enqueue_notification(decided_event).await.unwrap());

    let lease = t0() + Duration::seconds(60);
    let a = outbox.claim_notifications("a", t0(), lease, 10).await.unwrap();
    assert_eq!(a.len(), 2);
    assert!(
        a.iter()
            .all(|n| n.attempts == 1 && n.status == NotificationStatus::Pending)
    );
    // Claimed: another instance gets nothing until the lease runs out.
    assert!(
        outbox
            .claim_notifications("b", t0(), lease, 10)
            .await
            .unwrap()
            .is_empty()
    );
    let (requested, decided) = (a[0].id, a[1].id);

    let delivered = Attempt::Delivered { status: 204 };
    outbox
        .record_attempt(requested, "a", delivered, t0())
        .await
        .unwrap();
    let retry = Attempt::Retry {
        status: Some(500),
        error: "answered 500".into(),
        next: t0() + Duration::seconds(5),
    };
    outbox.record_attempt(decided, "a", retry, t0()).await.unwrap();
    // Not due yet; then due, and claimed again (by whoever asks first).
    assert!(
        outbox
            .claim_notifications("b", t0(), lease, 10)
            .await
            .unwrap()
            .is_empty()
    );
    let later = t0() + Duration::seconds(6);
    let b = outbox
        .claim_notifications("b", later, later + Duration::seconds(60), 10)
        .await
        .unwrap();
    assert_eq!((b.len(), b[0].id, b[0].attempts), (1, decided, 2));
    assert_eq!(
        (b[0].last_status, b[0].last_error.as_deref()),
        (Some(500), Some("answered 500"))
    );
    // An instance whose claim was taken over records nothing.
    let stale = Attempt::Delivered { status: 200 };
    outbox.record_attempt(decided, "a", stale, later).await.unwrap();
    let failed = Attempt::Failed {
        status: None,
        error: "no answer".into(),
    };
    outbox.record_attempt(decided, "b", failed, later).await.unwrap();

    notifications_are_listed_by_status(&store, requested, decided).await;
}

/// The deliveries of [`notifications_are_recorded_once_and_claimed_by_one`],
/// listed all together and by status.
async fn notifications_are_listed_by_status(store: &Stores, requested: Uuid, decided: Uuid) {
    use skilld::store::NotificationStatus;
    let all = store.outbox.list_notifications(None, 10).await.unwrap();
    assert_eq!(all.len(), 2);
    let only = |status| {
        let store = store.clone();
        async move { store.outbox.list_notifications(Some(status), 10).await.unwrap() }
    };
    let done = only(NotificationStatus::Delivered).await;
    assert_eq!(
        (done[0].id, done[0].last_status, done[0].delivered_at),
        (requested, Some(204), Some(t0()))
    );
    assert_eq!(done[0].payload["data"]["x"], "a\u{fffd}");
    let failed = only(NotificationStatus::Failed).await;
    assert_eq!((failed[0].id, failed[0].attempts), (decided, 2));
    assert_eq!(failed[0].last_error.as_deref(), Some("no answer"));
    assert!(only(NotificationStatus::Pending).await.is_empty());
}

// ---- retries -------------------------------------------------------------------

/// The call `run` records, as a retry of it would be looked up.
/// `call` with each thing that makes a call another changed in turn
/// (`other_args` for its arguments).
fn other_calls<'a>(call: SameCall<'a>, other_args: &'a Value) -> [SameCall<'a>; 7] {
    [
        SameCall {
            arguments: other_args,
            ..call
        },
        SameCall {
            tool: "git_status",
            ..call
        },
        SameCall { skill: "gut", ..call },
        SameCall {
            skill_hash: "h2",
            ..call
        },
        SameCall {
            mode: Some("Global"),
            ..call
        },
        SameCall {
            requested_by: Some("third"),
            ..call
        },
        SameCall {
            requested_by: None,
            ..call
        },
    ]
}

fn same_call<'a>(run: &'a NewRun, arguments: &'a Value) -> SameCall<'a> {
    SameCall {
        requested_by: run.requested_by.as_deref(),
        skill: &run.skill,
        tool: &run.tool,
        skill_hash: &run.skill_hash,
        mode: run.mode.as_deref(),
        arguments,
    }
}

async fn a_retry_finds_the_pending_request_of_the_same_call(store: Stores) {
    let approvals = &store.approvals;
    let (mut run, approval) = held("git", "git_log", "h1", t0());
    run.arguments = json!({"count": 3, "path": "src", "flags": {"a": 1, "b": [1, 2]}});
    store
        .holds
        .insert_pending(run.clone(), approval.clone())
        .await
        .unwrap();
    // Another caller's, and an older one of another call, are not it.
    let (mut theirs, theirs_approval) = held("git", "git_log", "h1", t0());
    theirs.requested_by = Some("other".to_owned());
    theirs.arguments = run.arguments.clone();
    store.holds.insert_pending(theirs, theirs_approval).await.unwrap();
    hold(&store, "git", "git_log", "h1", t0() - Duration::seconds(1)).await;

    // The same arguments in another key order are the same call.
    let reordered: Value =
        serde_json::from_str(r#"{"flags": {"b": [1, 2], "a": 1}, "path": "src", "count": 3}"#).unwrap();
    let at = t0() + Duration::seconds(5);
    let found = store
        .holds
        .pending_like(&same_call(&run, &reordered), at, 20)
        .await
        .unwrap()
        .expect("the pending request of the same call");
    assert_eq!((found.id, found.run_id), (approval.id, run.id));

    // Anything else that differs is another call.
    let other_args = json!({"count": 4, "path": "src", "flags": {"a": 1, "b": [1, 2]}});
    for call in other_calls(same_call(&run, &reordered), &other_args) {
        let found = store.holds.pending_like(&call, at, 20).await.unwrap();
        assert_eq!(found, None, "{call:?}");
    }

    // Found by its digest: the older request of other arguments is not
    // even looked at, so one look-up is enough.
    let first = store
        .holds
        .pending_like(&same_call(&run, &reordered), at, 1)
        .await
        .unwrap()
        .expect("the request, past an older one of other arguments");
    assert_eq!(first.id, approval.id);

    // Past its time, or decided, it no longer waits: nothing to join.
    let late = approval.expires_at + Duration::seconds(1);
    assert_eq!(
        store
            .holds
            .pending_like(&same_call(&run, &reordered), late, 20)
            .await
            .unwrap(),
        None
    );
    approvals
        .decide(decision(&approval, false, Scope::Once, at))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        store
            .holds
            .pending_like(&same_call(&run, &reordered), at, 20)
            .await
            .unwrap(),
        None
    );
}

async fn a_retry_of_an_anonymous_call_finds_its_request(store: Stores) {
    let (mut run, approval) = held("git", "git_log", "h1", t0());
    run.requested_by = None;
    run.mode = None;
    store
        .holds
        .insert_pending(run.clone(), approval.clone())
        .await
        .unwrap();
    let found = store
        .holds
        .pending_like(&same_call(&run, &run.arguments), t0(), 20)
        .await
        .unwrap()
        .expect("the anonymous caller's request");
    assert_eq!(found.id, approval.id);
    let named = SameCall {
        requested_by: Some("agent"),
        ..same_call(&run, &run.arguments)
    };
    assert_eq!(store.holds.pending_like(&named, t0(), 20).await.unwrap(), None);
    // Cancelling the run withdraws the request: nothing to join.
    store
        .runs
        .end_waiting(run.id, RunStatus::Cancelled, t0())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        store
            .holds
            .pending_like(&same_call(&run, &run.arguments), t0(), 20)
            .await
            .unwrap(),
        None
    );
}

/// A day before `at`: how far back a caller's idempotency key reaches.
fn day_before(at: DateTime<Utc>) -> DateTime<Utc> {
    at - Duration::hours(24)
}

/// A run of `git_log` at `at` that `by` asked for under `key`.
fn keyed(by: Option<&str>, key: &str, at: DateTime<Utc>) -> NewRun {
    NewRun {
        requested_by: by.map(str::to_owned),
        idempotency_key: Some(key.to_owned()),
        ..new_run("git", "git_log", at)
    }
}

async fn an_idempotency_key_names_one_run_per_caller_for_a_day(store: Stores) {
    let (run_log, approvals) = (&store.runs, &store.approvals);
    let first = run_log
        .insert_run(keyed(Some("agent"), "k-1", t0()))
        .await
        .unwrap();
    let later = t0() + Duration::hours(1);
    let found = run_log
        .run_by_key(Some("agent"), "k-1", day_before(later))
        .await
        .unwrap();
    assert_eq!(found, Some(first.clone()));

    // A second run with the caller's key is refused, held or not, so of
    // two racing requests one records its run.
    let again = run_log.insert_run(keyed(Some("agent"), "k-1", later)).await;
    assert!(matches!(again, Err(StoreError::Conflict(_))), "{again:?}");
    let (mut run, approval) = held("git", "git_log", "h1", later);
    run.idempotency_key = Some("k-1".to_owned());
    let again = store.holds.insert_pending(run, approval.clone()).await;
    assert!(matches!(again, Err(StoreError::Conflict(_))), "{again:?}");
    assert!(
        approvals.get_approval(approval.id).await.is_err(),
        "nothing of the refused pair is kept"
    );

    // Keys are per caller: another caller (or none) has its own.
    assert_eq!(
        run_log
            .run_by_key(Some("other"), "k-1", day_before(later))
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        run_log.run_by_key(None, "k-1", day_before(later)).await.unwrap(),
        None
    );
    let theirs = run_log
        .insert_run(keyed(Some("other"), "k-1", later))
        .await
        .unwrap();
    let anonymous = run_log.insert_run(keyed(None, "k-1", later)).await.unwrap();
    assert_eq!(
        run_log
            .run_by_key(None, "k-1", day_before(later))
            .await
            .unwrap()
            .map(|r| r.id),
        Some(anonymous.id)
    );
    let again = run_log.insert_run(keyed(None, "k-1", later)).await;
    assert!(matches!(again, Err(StoreError::Conflict(_))), "{again:?}");
    assert_eq!(
        run_log
            .run_by_key(Some("other"), "k-1", day_before(later))
            .await
            .unwrap()
            .map(|r| r.id),
        Some(theirs.id)
    );
    // Runs without a key never conflict.
    insert(&store, new_run("git", "git_log", later)).await;
    insert(&store, new_run("git", "git_log", later)).await;

    // A day on, the key is forgotten: it names nothing, and a new run
    // may take it.
    let next_day = t0() + Duration::hours(24) + Duration::seconds(1);
    assert_eq!(
        run_log
            .run_by_key(Some("agent"), "k-1", day_before(next_day))
            .await
            .unwrap(),
        None
    );
    let fresh = run_log
        .insert_run(keyed(Some("agent"), "k-1", next_day))
        .await
        .unwrap();
    assert_eq!(
        run_log
            .run_by_key(Some("agent"), "k-1", day_before(next_day))
            .await
            .unwrap()
            .map(|r| r.id),
        Some(fresh.id)
    );
    // The old run is kept, only without its key.
    assert_eq!(run_log.get_run(first.id).await.unwrap(), first);
}

// ---- ends committed after the answer ---------------------------------------

/// A run recorded as running on `instance`, as a call that starts at once.
async fn running(store: &Stores, instance: &str) -> Run {
    let mut new = new_run("git", "git_log", t0());
    new.status = RunStatus::Running;
    new.started_at = Some(t0());
    new.instance = Some(instance.to_owned());
    insert(store, new).await
}

/// A store whose ends wait `ms` before they commit, and a plain one on the
/// same database: the instance that ran the call, and another.
async fn here_and_elsewhere(url: &str, ms: u64) -> (Stores, Stores) {
    let here = store::connect_with(url, std::time::Duration::from_millis(ms))
        .await
        .unwrap();
    let elsewhere = store::open(url).await.unwrap();
    (here, elsewhere)
}

/// The decision of issue 30: the answer goes out before the end commits.
/// Until it does, the instance that ran the call reads the end from
/// memory (one run, a listing, an idempotent retry) and its waiters are
/// woken; another instance reads `running`; after the commit both read
/// the very same run.
async fn an_end_reads_here_at_once_and_elsewhere_once_committed(url: String) {
    let (here, elsewhere) = here_and_elsewhere(&url, 60_000).await;
    let mut changes = here.runs.changes();
    let run = running(&here, "a").await;
    let at = t0() + Duration::milliseconds(1500);
    here.runs
        .finish_run_soon(run.id, RunStatus::Succeeded, Some(envelope(run.id, true)), at)
        .await
        .unwrap();
    announced(&mut changes, run.id).await;
    let read = here.runs.get_run(run.id).await.unwrap();
    assert_eq!(
        (read.status, read.finished_at, read.result.clone()),
        (RunStatus::Succeeded, Some(at), Some(envelope(run.id, true)))
    );
    assert_eq!(
        elsewhere.runs.get_run(run.id).await.unwrap().status,
        RunStatus::Running
    );
    let listed = |status| RunFilter {
        status,
        ..RunFilter::default()
    };
    assert_eq!(
        here.runs.list_runs(listed(None)).await.unwrap().runs,
        vec![read.clone()]
    );
    assert!(
        here.runs
            .list_runs(listed(Some(RunStatus::Running)))
            .await
            .unwrap()
            .runs
            .is_empty()
    );
    assert_eq!(
        ids(&elsewhere
            .runs
            .list_runs(listed(Some(RunStatus::Running)))
            .await
            .unwrap()
            .runs),
        vec![run.id]
    );
    here.runs.flush().await.unwrap();
    assert_eq!(elsewhere.runs.get_run(run.id).await.unwrap(), read);
    assert_eq!(here.runs.get_run(run.id).await.unwrap(), read);
}

/// An end written over a run that is already final (cancelled, or
/// interrupted by recovery meanwhile) changes it neither in memory nor in
/// the store; a live status is refused at once.
async fn an_end_never_overwrites_a_final_run(url: String) {
    let (here, elsewhere) = here_and_elsewhere(&url, 60_000).await;
    let run = running(&here, "a").await;
    elsewhere.runs.interrupt_running(Some("a"), t0()).await.unwrap();
    here.runs
        .finish_run_soon(run.id, RunStatus::Succeeded, Some(envelope(run.id, true)), t0())
        .await
        .unwrap();
    assert_eq!(
        here.runs.get_run(run.id).await.unwrap().status,
        RunStatus::Interrupted
    );
    here.runs.flush().await.unwrap();
    let stored = elsewhere.runs.get_run(run.id).await.unwrap();
    assert_eq!((stored.status, stored.result), (RunStatus::Interrupted, None));
    assert!(matches!(
        here.runs
            .finish_run_soon(run.id, RunStatus::Running, None, t0())
            .await,
        Err(StoreError::Other(_))
    ));
}

/// Many ends at once, more than one commit takes: a flush returns when
/// every one of them is in the store, each exactly as it was given.
async fn a_flush_commits_every_end_given_before_it(url: String) {
    let (here, elsewhere) = here_and_elsewhere(&url, 0).await;
    let mut runs = Vec::new();
    for _ in 0..300 {
        runs.push(running(&here, "a").await);
    }
    let mut ending = tokio::task::JoinSet::new();
    for (i, run) in runs.iter().enumerate() {
        let (here, id) = (here.clone(), run.id);
        let status = if i % 2 == 0 {
            RunStatus::Succeeded
        } else {
            RunStatus::Failed
        };
        ending.spawn(async move {
            here.runs
                .finish_run_soon(id, status, Some(envelope(id, i % 2 == 0)), t0())
                .await
                .unwrap();
        });
    }
    ending.join_all().await;
    here.runs.flush().await.unwrap();
    for (i, run) in runs.iter().enumerate() {
        let stored = elsewhere.runs.get_run(run.id).await.unwrap();
        assert_eq!(stored.result, Some(envelope(run.id, i % 2 == 0)));
        assert_eq!(stored, here.runs.get_run(run.id).await.unwrap());
    }
}

/// Ends committed together: each live run ends as it would alone, a run
/// already final stays as it ended, an unknown id is passed over, and each
/// change is announced.
async fn many_ends_commit_together_over_live_runs_only(store: Stores) {
    let (a, b, done) = (
        running(&store, "a").await,
        running(&store, "a").await,
        running(&store, "a").await,
    );
    store
        .runs
        .finish_run(done.id, RunStatus::Cancelled, None, t0())
        .await
        .unwrap();
    let mut changes = store.runs.changes();
    let at = t0() + Duration::seconds(2);
    let end = |id, status, success| RunEnd {
        id,
        status,
        result: Some(envelope(id, success)),
        at,
    };
    store
        .runs
        .finish_runs(&[
            end(a.id, RunStatus::Succeeded, true),
            end(Uuid::now_v7(), RunStatus::Succeeded, true),
            end(done.id, RunStatus::Succeeded, true),
            end(b.id, RunStatus::Failed, false),
        ])
        .await
        .unwrap();
    announced(&mut changes, a.id).await;
    announced(&mut changes, b.id).await;
    for (run, status, success) in [(&a, RunStatus::Succeeded, true), (&b, RunStatus::Failed, false)] {
        let stored = store.runs.get_run(run.id).await.unwrap();
        assert_eq!(
            (stored.status, stored.finished_at, stored.result),
            (status, Some(at), Some(envelope(run.id, success)))
        );
    }
    let kept = store.runs.get_run(done.id).await.unwrap();
    assert_eq!((kept.status, kept.result), (RunStatus::Cancelled, None));
    assert!(matches!(
        store
            .runs
            .finish_runs(&[end(a.id, RunStatus::Running, true)])
            .await,
        Err(StoreError::Other(_))
    ));
}

async fn a_registry_index_is_cached_and_replaced(store: Stores) {
    let url = "http://registry.test/index.json";
    assert_eq!(store.index_cache.cached_index(url).await.unwrap(), None);
    let first = CachedIndex {
        url: url.to_owned(),
        body: r#"{"format": 1, "skills": []}"#.to_owned(),
        fetched_at: t0(),
    };
    store.index_cache.cache_index(first.clone()).await.unwrap();
    assert_eq!(
        store.index_cache.cached_index(url).await.unwrap(),
        Some(first.clone())
    );
    let later = CachedIndex {
        body: "{\"format\": 1, \"skills\": [\"ünïcode\"]}".to_owned(),
        fetched_at: t0() + Duration::hours(2),
        ..first
    };
    store.index_cache.cache_index(later.clone()).await.unwrap();
    assert_eq!(store.index_cache.cached_index(url).await.unwrap(), Some(later));
    assert_eq!(
        store
            .index_cache
            .cached_index("http://other.test/index.json")
            .await
            .unwrap(),
        None
    );
}
