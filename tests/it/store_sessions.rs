//! The conformance suite's sessions and skill approvals (seed 002, issue
//! 28): a session's life with its optimistic revision, the bound on each
//! caller's live sessions under concurrent creates from two instances,
//! "allow always" approvals, and runs filtered by session, on both
//! backends (run by `store.rs`'s `conformance!`).

use super::{all_pages, new_run, t0};
use chrono::{DateTime, Duration, Utc};
use serde_json::json;
use skilld::store::{
    self, NewRun, NewSession, Run, RunFilter, RunStatus, SessionRecord, SkillApproval, StoreError, Stores,
    TooMany,
};
use std::sync::Arc;
use uuid::Uuid;

/// A session of `caller` created at `at`, living an hour.
fn session(caller: Option<&str>, at: DateTime<Utc>) -> NewSession {
    NewSession {
        id: Uuid::now_v7(),
        caller: caller.map(str::to_owned),
        context: json!({"cwd": "/srv/repo", "files": ["a.rs", "b.rs"], "ünïcode": "✓"}),
        state: json!({}),
        created_at: at,
        expires_at: at + Duration::hours(1),
        secret_sha256: Some("5e".repeat(32)),
    }
}

/// Creates `s` under a generous bound, expecting it to be let in.
async fn create(store: &Stores, s: NewSession) -> SessionRecord {
    store
        .sessions
        .create_session(s, 100, t0())
        .await
        .unwrap()
        .unwrap()
}

pub async fn a_session_is_created_updated_at_its_revision_and_ended(store: Stores) {
    let new = session(Some("alice"), t0());
    let created = create(&store, new.clone()).await;
    assert_eq!(
        created,
        SessionRecord {
            id: new.id,
            caller: Some("alice".to_owned()),
            context: new.context.clone(),
            turn: 0,
            state: json!({}),
            revision: 0,
            created_at: t0(),
            updated_at: t0(),
            expires_at: t0() + Duration::hours(1),
            secret_sha256: Some("5e".repeat(32)),
        }
    );
    assert_eq!(
        store.sessions.get_session(new.id).await.unwrap(),
        Some(created.clone())
    );
    assert!(matches!(
        store.sessions.create_session(new.clone(), 100, t0()).await,
        Err(StoreError::Conflict(_))
    ));

    let later = t0() + Duration::seconds(30);
    let state = json!({"git": {"active": true, "calls": 2}});
    let updated = store
        .sessions
        .update_session(new.id, 0, 1, state.clone(), later + Duration::hours(1), later)
        .await
        .unwrap()
        .unwrap();
    let expected = SessionRecord {
        turn: 1,
        state: state.clone(),
        revision: 1,
        updated_at: later,
        expires_at: later + Duration::hours(1),
        ..created.clone()
    };
    assert_eq!(updated, expected);
    assert_eq!(
        store.sessions.get_session(new.id).await.unwrap(),
        Some(expected.clone())
    );

    // A second writer still at revision 0 loses, and changes nothing.
    let stale = store
        .sessions
        .update_session(new.id, 0, 9, json!({"lost": true}), later, later)
        .await
        .unwrap();
    assert_eq!(stale, None);
    assert_eq!(store.sessions.get_session(new.id).await.unwrap(), Some(expected));

    assert!(store.sessions.end_session(new.id).await.unwrap());
    assert!(!store.sessions.end_session(new.id).await.unwrap());
    assert_eq!(store.sessions.get_session(new.id).await.unwrap(), None);
    let gone = store
        .sessions
        .update_session(new.id, 1, 2, json!({}), later, later)
        .await
        .unwrap();
    assert_eq!(gone, None);
}

/// Of many updates at one revision, on two instances, exactly one wins.
pub async fn concurrent_updates_have_one_winner(url: String) {
    let (a, b) = (
        store::connect(&url).await.unwrap(),
        store::connect(&url).await.unwrap(),
    );
    let s = create(&a, session(Some("alice"), t0())).await;
    let barrier = Arc::new(tokio::sync::Barrier::new(12));
    let tasks: Vec<_> = (0..12u32)
        .map(|task| {
            let store = if task % 2 == 0 { a.clone() } else { b.clone() };
            let barrier = barrier.clone();
            tokio::spawn(async move {
                barrier.wait().await;
                let state = json!({"writer": task});
                store
                    .sessions
                    .update_session(s.id, 0, task, state, t0() + Duration::hours(2), t0())
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut winners = Vec::new();
    for task in tasks {
        winners.extend(task.await.unwrap());
    }
    assert_eq!(winners.len(), 1, "{winners:?}");
    let won = winners.remove(0);
    assert_eq!((won.revision, &won.state), (1, &json!({"writer": won.turn})));
    assert_eq!(b.sessions.get_session(s.id).await.unwrap(), Some(won));
}

pub async fn expired_sessions_are_read_until_swept(store: Stores) {
    let now = t0() + Duration::hours(2);
    let ending = |at: DateTime<Utc>| NewSession {
        expires_at: at,
        ..session(Some("alice"), t0())
    };
    let long_gone = create(&store, ending(now - Duration::minutes(30))).await;
    let just_now = create(&store, ending(now)).await;
    let live = create(&store, ending(now + Duration::microseconds(1))).await;
    // Expired ones still read: the runtime decides what that means.
    assert_eq!(
        store.sessions.get_session(long_gone.id).await.unwrap(),
        Some(long_gone.clone())
    );

    // Each swept session comes back whole, the oldest expiry first.
    let swept = store.sessions.expire_sessions(now).await.unwrap();
    assert_eq!(swept, vec![long_gone.clone(), just_now.clone()]);
    for gone in [long_gone.id, just_now.id] {
        assert_eq!(store.sessions.get_session(gone).await.unwrap(), None);
    }
    assert_eq!(store.sessions.get_session(live.id).await.unwrap(), Some(live));
    assert_eq!(store.sessions.expire_sessions(now).await.unwrap(), []);
}

pub async fn sessions_are_listed_newest_first_by_caller(store: Stores) {
    let mut made = Vec::new();
    for (i, caller) in [Some("alice"), Some("bob"), None, Some("alice"), None]
        .into_iter()
        .enumerate()
    {
        let at = t0() + Duration::seconds(i as i64);
        made.push(create(&store, session(caller, at)).await);
    }
    made.reverse();
    assert_eq!(store.sessions.list_sessions(None, 100).await.unwrap(), made);
    let alice: Vec<_> = made
        .iter()
        .filter(|s| s.caller.as_deref() == Some("alice"))
        .cloned()
        .collect();
    assert_eq!(
        store.sessions.list_sessions(Some("alice"), 100).await.unwrap(),
        alice
    );
    assert_eq!(store.sessions.list_sessions(None, 2).await.unwrap(), made[..2]);
    assert_eq!(store.sessions.list_sessions(None, 0).await.unwrap(), made[..1]);
    assert_eq!(
        store.sessions.list_sessions(Some("carol"), 100).await.unwrap(),
        []
    );
    // No caller holds a NUL: nothing is found, and nothing fails.
    assert_eq!(
        store.sessions.list_sessions(Some("ali\0ce"), 100).await.unwrap(),
        []
    );
}

pub async fn each_caller_holds_at_most_its_bound_of_live_sessions(store: Stores) {
    let now = t0() + Duration::minutes(5);
    let mut alice = Vec::new();
    for _ in 0..2 {
        alice.push(
            store
                .sessions
                .create_session(session(Some("alice"), now), 2, now)
                .await
                .unwrap()
                .unwrap(),
        );
    }
    let refused = store
        .sessions
        .create_session(session(Some("alice"), now), 2, now)
        .await
        .unwrap();
    assert_eq!(refused, Err(TooMany { live: 2, max: 2 }));
    assert_eq!(
        store
            .sessions
            .list_sessions(Some("alice"), 100)
            .await
            .unwrap()
            .len(),
        2
    );

    // Other callers, and calls without a token (a group of their own),
    // each have their own bound.
    for caller in [Some("bob"), None, None] {
        let made = store
            .sessions
            .create_session(session(caller, now), 2, now)
            .await
            .unwrap();
        assert!(made.is_ok(), "{caller:?}: {made:?}");
    }
    let anonymous = store
        .sessions
        .create_session(session(None, now), 2, now)
        .await
        .unwrap();
    assert_eq!(anonymous, Err(TooMany { live: 2, max: 2 }));

    // An expired session no longer counts, even before it is swept; an
    // ended one is gone.
    let expired = NewSession {
        expires_at: now,
        ..session(Some("carol"), t0())
    };
    store
        .sessions
        .create_session(expired, 1, t0())
        .await
        .unwrap()
        .unwrap();
    assert!(
        store
            .sessions
            .create_session(session(Some("carol"), now), 1, now)
            .await
            .unwrap()
            .is_ok()
    );
    assert!(store.sessions.end_session(alice[0].id).await.unwrap());
    assert!(
        store
            .sessions
            .create_session(session(Some("alice"), now), 2, now)
            .await
            .unwrap()
            .is_ok()
    );

    let none_allowed = store
        .sessions
        .create_session(session(Some("dave"), now), 0, now)
        .await
        .unwrap();
    assert_eq!(none_allowed, Err(TooMany { live: 0, max: 0 }));
}

/// Many creates for one caller at once, through two instances (two
/// pools): no more than the bound get in, and exactly the bound do.
pub async fn concurrent_creates_never_pass_the_bound(url: String) {
    let (a, b) = (
        store::connect(&url).await.unwrap(),
        store::connect(&url).await.unwrap(),
    );
    const BOUND: u64 = 3;
    for caller in [Some("alice"), None] {
        let barrier = Arc::new(tokio::sync::Barrier::new(16));
        let tasks: Vec<_> = (0..16)
            .map(|task| {
                let store = if task % 2 == 0 { a.clone() } else { b.clone() };
                let barrier = barrier.clone();
                tokio::spawn(async move {
                    barrier.wait().await;
                    store
                        .sessions
                        .create_session(session(caller, t0()), BOUND, t0())
                        .await
                        .unwrap()
                })
            })
            .collect();
        let mut created = 0;
        for task in tasks {
            match task.await.unwrap() {
                Ok(_) => created += 1,
                Err(too_many) => assert_eq!(
                    too_many,
                    TooMany {
                        live: BOUND,
                        max: BOUND
                    }
                ),
            }
        }
        assert_eq!(created, BOUND, "{caller:?}");
        let held = a.sessions.list_sessions(None, 100).await.unwrap();
        let of_caller = held.iter().filter(|s| s.caller.as_deref() == caller).count();
        assert_eq!(of_caller as u64, BOUND, "{caller:?}");
    }
}

fn approval(skill: &str, hash: &str, by: Option<&str>, at: DateTime<Utc>) -> SkillApproval {
    SkillApproval {
        skill: skill.to_owned(),
        skill_hash: hash.to_owned(),
        permissions: vec!["file:read".to_owned(), "shell:exec".to_owned()],
        decided_by: by.map(str::to_owned),
        decided_at: at,
    }
}

pub async fn skill_approvals_are_replaced_listed_and_revoked_by_skill(store: Stores) {
    let kept = &store.skill_approvals;
    assert_eq!(kept.skill_approval("git", "h1").await.unwrap(), None);
    let first = approval("git", "h1", Some("alice"), t0());
    kept.put_skill_approval(first.clone()).await.unwrap();
    assert_eq!(
        kept.skill_approval("git", "h1").await.unwrap(),
        Some(first.clone())
    );
    // The same version approved again replaces the first decision.
    let again = SkillApproval {
        permissions: vec![],
        decided_by: None,
        decided_at: t0() + Duration::minutes(1),
        ..first
    };
    kept.put_skill_approval(again.clone()).await.unwrap();
    assert_eq!(
        kept.skill_approval("git", "h1").await.unwrap(),
        Some(again.clone())
    );
    assert_eq!(kept.skill_approval("git", "h2").await.unwrap(), None);

    let newer = approval("git", "h2", Some("bob"), t0() + Duration::minutes(2));
    let other = approval("fs", "h1", Some("bob"), t0() + Duration::minutes(3));
    kept.put_skill_approval(newer.clone()).await.unwrap();
    kept.put_skill_approval(other.clone()).await.unwrap();
    assert_eq!(
        kept.list_skill_approvals(None).await.unwrap(),
        [other.clone(), newer.clone(), again.clone()]
    );
    assert_eq!(
        kept.list_skill_approvals(Some("git")).await.unwrap(),
        [newer, again]
    );
    assert_eq!(kept.list_skill_approvals(Some("web")).await.unwrap(), []);

    assert_eq!(kept.revoke_skill_approvals("git").await.unwrap(), 2);
    assert_eq!(kept.revoke_skill_approvals("git").await.unwrap(), 0);
    assert_eq!(kept.skill_approval("git", "h1").await.unwrap(), None);
    assert_eq!(kept.list_skill_approvals(None).await.unwrap(), [other]);
}

/// A NUL byte, which PostgreSQL keeps in no text: a text holding one is
/// refused with `Invalid` and nothing is written; a look-up by one finds
/// nothing; one inside a session's JSON is kept as U+FFFD.
pub async fn nul_bytes_are_refused_in_texts_and_replaced_in_json(store: Stores) {
    let bad = [
        approval("g\0it", "h1", None, t0()),
        approval("git", "h\u{0}1", None, t0()),
        approval("git", "h1", Some("al\0ice"), t0()),
        SkillApproval {
            permissions: vec!["file:read\0".to_owned()],
            ..approval("git", "h1", None, t0())
        },
    ];
    for a in bad {
        let refused = store.skill_approvals.put_skill_approval(a.clone()).await;
        assert!(
            matches!(refused, Err(StoreError::Invalid(ref why)) if why.contains("NUL")),
            "{a:?}: {refused:?}"
        );
    }
    assert_eq!(
        store.skill_approvals.list_skill_approvals(None).await.unwrap(),
        []
    );
    assert_eq!(
        store.skill_approvals.skill_approval("g\0it", "h1").await.unwrap(),
        None
    );
    assert_eq!(
        store
            .skill_approvals
            .list_skill_approvals(Some("g\0"))
            .await
            .unwrap(),
        []
    );
    assert_eq!(
        store.skill_approvals.revoke_skill_approvals("g\0").await.unwrap(),
        0
    );

    let refused = store
        .sessions
        .create_session(session(Some("al\0ice"), t0()), 10, t0())
        .await;
    assert!(matches!(refused, Err(StoreError::Invalid(_))), "{refused:?}");
    assert_eq!(store.sessions.list_sessions(None, 100).await.unwrap(), []);

    let nul = NewSession {
        context: json!({"k\u{0}": ["v\u{0}"]}),
        state: json!({"s": "\u{0}"}),
        ..session(Some("alice"), t0())
    };
    let made = create(&store, nul.clone()).await;
    assert_eq!(
        (&made.context, &made.state),
        (&json!({"k\u{fffd}": ["v\u{fffd}"]}), &json!({"s": "\u{fffd}"}))
    );
    let updated = store
        .sessions
        .update_session(nul.id, 0, 1, json!({"t\u{0}": 1}), t0(), t0())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(updated.state, json!({"t\u{fffd}": 1}));
    assert_eq!(store.sessions.get_session(nul.id).await.unwrap(), Some(updated));
}

pub async fn runs_are_filtered_by_their_session(store: Stores) {
    let (one, two) = (Uuid::now_v7(), Uuid::now_v7());
    let mut runs = Vec::new();
    for (i, in_session) in [Some(one), None, Some(two), Some(one), Some(one)]
        .into_iter()
        .enumerate()
    {
        let new = NewRun {
            session: in_session,
            ..new_run("git", "git_log", t0() + Duration::seconds(i as i64))
        };
        let run = store.runs.insert_run(new).await.unwrap();
        assert_eq!(run.session, in_session);
        assert_eq!(store.runs.get_run(run.id).await.unwrap(), run);
        runs.push(run);
    }
    runs.reverse();
    let of = |session| -> Vec<Uuid> {
        runs.iter()
            .filter(|r| r.session == session)
            .map(|r| r.id)
            .collect()
    };
    let listed = |session, limit| {
        let store = store.clone();
        async move {
            store
                .runs
                .list_runs(RunFilter {
                    session: Some(session),
                    limit,
                    ..RunFilter::default()
                })
                .await
                .unwrap()
        }
    };
    let page = listed(one, 50).await;
    assert_eq!(page.runs.iter().map(|r| r.id).collect::<Vec<_>>(), of(Some(one)));
    assert_eq!(
        listed(two, 50)
            .await
            .runs
            .iter()
            .map(|r| r.id)
            .collect::<Vec<_>>(),
        of(Some(two))
    );
    assert_eq!(listed(Uuid::now_v7(), 50).await.runs, []);
    // Pages of one session, with a cursor.
    let filter = RunFilter {
        session: Some(one),
        limit: 2,
        ..RunFilter::default()
    };
    let (paged, sizes) = all_pages(&store, filter).await;
    let paged: Vec<Uuid> = paged.iter().map(|r| r.id).collect();
    assert_eq!((paged, sizes), (of(Some(one)), vec![2, 1]));
    // With another filter: both must match.
    store
        .runs
        .start_run(runs[0].id, None, "instance-a", t0())
        .await
        .unwrap();
    let running = store
        .runs
        .list_runs(RunFilter {
            session: Some(one),
            status: Some(RunStatus::Running),
            ..RunFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(
        running.runs.iter().map(|r| r.id).collect::<Vec<_>>(),
        [runs[0].id]
    );

    session_is_in_the_run_json(&store, &runs[0], &runs[3]).await;
}

/// In a run's JSON, `session` is there when the call named one.
async fn session_is_in_the_run_json(store: &Stores, in_one: &Run, in_none: &Run) {
    let json = serde_json::to_value(store.runs.get_run(in_one.id).await.unwrap()).unwrap();
    assert_eq!(json["session"], json!(in_one.session.unwrap().to_string()));
    assert_eq!(in_none.session, None);
    let json = serde_json::to_value(in_none).unwrap();
    assert!(json.get("session").is_none(), "{json}");
}
