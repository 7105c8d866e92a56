//! The conformance suite's inbox at scale: pending requests paged oldest
//! first with a cursor, and a retry's same-call look-up by the call's
//! digest, on both backends (run by `store.rs`'s `conformance!`).

use super::{decision, held, hold, t0};
use chrono::Duration;
use serde_json::{Value, json};
use skilld::store::{
    Approval, ApprovalFilter, ApprovalStatus, NewApproval, NewRun, SameCall, Scope, StoreError, Stores,
};
use sqlx::Connection;
use uuid::Uuid;

/// Every page of `filter`, in order, and each page's size.
async fn every_page(store: &Stores, mut filter: ApprovalFilter) -> (Vec<Approval>, Vec<usize>) {
    let (mut all, mut sizes) = (Vec::new(), Vec::new());
    loop {
        let page = store.approvals.list_approvals(filter.clone()).await.unwrap();
        sizes.push(page.approvals.len());
        all.extend(page.approvals);
        match page.next_cursor {
            Some(cursor) => filter.cursor = Some(cursor),
            None => return (all, sizes),
        }
    }
}

/// Oldest first: by creation, then by id.
fn oldest_first(mut approvals: Vec<Approval>) -> Vec<Approval> {
    approvals.sort_by_key(|a| (a.created_at, a.id));
    approvals
}

/// A held call whose request has id `id`.
fn held_as(id: Uuid, at: chrono::DateTime<chrono::Utc>) -> (NewRun, NewApproval) {
    let (mut run, mut approval) = held("git", "git_log", "h1", at);
    approval.id = id;
    run.approval_id = Some(id);
    (run, approval)
}

pub(super) async fn pending_requests_are_paged_oldest_first_through_ties(store: Stores) {
    // Four requests made in one microsecond, recorded against the order of
    // their ids, so only the id can order them; others before and after,
    // and two decided ones among them.
    let mut tied: Vec<Uuid> = (0..4).map(|_| Uuid::now_v7()).collect();
    tied.reverse();
    for id in &tied {
        let (run, approval) = held_as(*id, t0());
        store.holds.insert_pending(run, approval).await.unwrap();
    }
    hold(&store, "git", "git_log", "h1", t0() - Duration::seconds(1)).await;
    for micros in [1, 1, 2] {
        hold(
            &store,
            "git",
            "git_log",
            "h1",
            t0() + Duration::microseconds(micros),
        )
        .await;
    }
    for at in [t0(), t0() + Duration::microseconds(1)] {
        let (_, decided) = hold(&store, "git", "git_log", "h1", at).await;
        store
            .approvals
            .decide(decision(&decided, true, Scope::Once, t0()))
            .await
            .unwrap()
            .unwrap();
    }

    let pending = ApprovalFilter {
        status: Some(ApprovalStatus::Pending),
        limit: 3,
        cursor: None,
    };
    let (paged, sizes) = every_page(&store, pending.clone()).await;
    assert_eq!(sizes, [3, 3, 2], "8 pending, 3 a page");
    assert!(paged.iter().all(|a| a.status == ApprovalStatus::Pending));
    assert_eq!(paged, oldest_first(paged.clone()), "oldest first, ties by id");
    let whole = ApprovalFilter {
        limit: 500,
        ..pending
    };
    assert_eq!(
        store.approvals.list_approvals(whole).await.unwrap().approvals,
        paged
    );

    // Unfiltered, the decided ones are on their pages too.
    let every = ApprovalFilter {
        status: None,
        limit: 4,
        cursor: None,
    };
    let (all, sizes) = every_page(&store, every).await;
    assert_eq!(sizes, [4, 4, 2]);
    assert_eq!(all, oldest_first(all.clone()));
    assert_eq!(
        all.iter()
            .filter(|a| a.status == ApprovalStatus::Approved)
            .count(),
        2
    );
}

pub(super) async fn a_request_made_while_paging_is_on_a_later_page(store: Stores) {
    for s in 0..3 {
        hold(&store, "git", "git_log", "h1", t0() + Duration::seconds(s)).await;
    }
    let filter = ApprovalFilter {
        status: Some(ApprovalStatus::Pending),
        limit: 2,
        cursor: None,
    };
    let first = store.approvals.list_approvals(filter.clone()).await.unwrap();
    // One decided and one made meanwhile: the next page goes on from where
    // the first ended, without the one decided, with the one made.
    let (_, newer) = hold(&store, "git", "git_log", "h1", t0() + Duration::seconds(10)).await;
    let shown = &first.approvals[1];
    let decided = NewApproval {
        id: shown.id,
        ..held("git", "git_log", "h1", t0()).1
    };
    store
        .approvals
        .decide(decision(&decided, false, Scope::Once, t0()))
        .await
        .unwrap()
        .unwrap();
    let next = ApprovalFilter {
        cursor: first.next_cursor,
        ..filter
    };
    let second = store.approvals.list_approvals(next).await.unwrap();
    assert_eq!(second.approvals.len(), 2);
    assert_eq!(second.approvals[1].id, newer.id);
    assert_eq!(second.next_cursor, None);
}

pub(super) async fn a_bad_approvals_cursor_is_refused(store: Stores) {
    hold(&store, "git", "git_log", "h1", t0()).await;
    let valid = Uuid::now_v7().simple().to_string();
    for cursor in [
        String::new(),
        "garbage".to_owned(),
        format!("notanumber_{valid}"),
        "1732249260123456_notauuid".to_owned(),
        format!("99999999999999999999_{valid}"),
        "'; drop table approvals; --".to_owned(),
    ] {
        let filter = ApprovalFilter {
            status: Some(ApprovalStatus::Pending),
            limit: 10,
            cursor: Some(cursor.clone()),
        };
        let err = store.approvals.list_approvals(filter).await.unwrap_err();
        assert!(matches!(err, StoreError::InvalidCursor), "{cursor:?}: {err:?}");
    }
}

/// The call `run` records, asked with `arguments`.
fn asked<'a>(run: &'a NewRun, arguments: &'a Value) -> SameCall<'a> {
    SameCall {
        arguments,
        ..SameCall::of_run(run)
    }
}

pub(super) async fn a_retry_finds_its_call_among_many_of_the_caller(store: Stores) {
    // One caller, one tool, many calls that differ only in their arguments.
    let mut runs = Vec::new();
    for n in 0..200 {
        let (mut run, approval) = held("git", "git_log", "h1", t0() + Duration::milliseconds(n));
        run.arguments = json!({"n": n, "path": "src", "flags": {"a": true, "b": [1, 2]}});
        store
            .holds
            .insert_pending(run.clone(), approval.clone())
            .await
            .unwrap();
        runs.push((run, approval));
    }
    let (run, approval) = &runs[150];
    let at = t0() + Duration::seconds(5);
    // Key order does not matter, at any depth; one look-up finds it.
    let reordered: Value =
        serde_json::from_str(r#"{"flags": {"b": [1, 2], "a": true}, "path": "src", "n": 150}"#).unwrap();
    let found = store
        .holds
        .pending_like(&asked(run, &reordered), at, 1)
        .await
        .unwrap();
    assert_eq!(found.map(|a| a.id), Some(approval.id));
    // A value that differs is another call: a number, a nested value, a
    // number of another kind (JSON equality: 150 is not 150.0).
    for other in [
        json!({"n": 1000, "path": "src", "flags": {"a": true, "b": [1, 2]}}),
        json!({"n": 150, "path": "src", "flags": {"a": false, "b": [1, 2]}}),
        json!({"n": 150, "path": "src", "flags": {"a": true, "b": [2, 1]}}),
        json!({"n": 150.0, "path": "src", "flags": {"a": true, "b": [1, 2]}}),
        json!({"n": 150, "path": "src"}),
    ] {
        let found = store
            .holds
            .pending_like(&asked(run, &other), at, 20)
            .await
            .unwrap();
        assert_eq!(found, None, "{other}");
    }
}

/// Runs `sql` on the database `url` names, as an older skilld would have
/// left it.
async fn execute(url: &str, sql: String) {
    if url.starts_with("sqlite:") {
        let mut conn = sqlx::SqliteConnection::connect(url).await.unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&mut conn)
            .await
            .unwrap();
    } else {
        let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&mut conn)
            .await
            .unwrap();
    }
}

pub(super) async fn a_request_recorded_before_digests_is_still_found(url: String) {
    let store = super::open(&url).await;
    // Recorded before the digest was kept: an older request of the call,
    // and one of other arguments; then the same call again, with one.
    let (old, old_approval) = hold(&store, "git", "git_log", "h1", t0()).await;
    let (mut other, other_approval) = held("git", "git_log", "h1", t0());
    other.arguments = json!({"count": 4});
    store
        .holds
        .insert_pending(other, other_approval.clone())
        .await
        .unwrap();
    execute(
        &url,
        format!(
            "update approvals set call_digest = null where id in ('{}', '{}')",
            old_approval.id, other_approval.id
        ),
    )
    .await;
    let (_, new_approval) = hold(&store, "git", "git_log", "h1", t0() + Duration::seconds(1)).await;

    let at = t0() + Duration::seconds(5);
    let call = SameCall::of_run(&old);
    let found = store.holds.pending_like(&call, at, 20).await.unwrap();
    assert_eq!(
        found.map(|a| a.id),
        Some(old_approval.id),
        "the oldest, undigested"
    );
    store
        .approvals
        .decide(decision(&old_approval, true, Scope::Once, at))
        .await
        .unwrap()
        .unwrap();
    let found = store.holds.pending_like(&call, at, 20).await.unwrap();
    assert_eq!(found.map(|a| a.id), Some(new_approval.id));
}
