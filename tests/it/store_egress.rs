//! The conformance suite's held destinations and egress grants (issue
//! 42): a request's fields, the pending list, each decision and the grant
//! an `always` allowance leaves, expiry, one winner among racing deciders
//! on two instances, and NUL bytes, on both backends (run by `store.rs`'s
//! `conformance!`).

use super::t0;
use chrono::{DateTime, Duration, Utc};
use skilld::store::{
    self, ApprovalStatus, EgressDecide, EgressGrant, EgressRequest, EgressUndecidable, NewEgressRequest,
    Scope, StoreError, Stores,
};
use std::sync::Arc;
use uuid::Uuid;

const HASH: &str = "sha256:0f1e2d";

/// A destination of skill `skill` held at `at` for five minutes, every
/// optional field set.
fn held(skill: &str, host: &str, port: u16, at: DateTime<Utc>) -> NewEgressRequest {
    NewEgressRequest {
        id: Uuid::now_v7(),
        run_id: Some(Uuid::now_v7()),
        skill: skill.to_owned(),
        skill_version: Some("1.2.0".to_owned()),
        skill_hash: HASH.to_owned(),
        tool: Some("fetch".to_owned()),
        requested_by: Some("alice".to_owned()),
        host: host.to_owned(),
        port,
        created_at: at,
        expires_at: at + Duration::minutes(5),
    }
}

/// A decision on `id` at a minute past `t0`, by `bob`.
fn decision(id: Uuid, allow: bool, scope: Scope) -> EgressDecide {
    EgressDecide {
        id,
        allow,
        scope,
        decided_by: Some("bob".to_owned()),
        note: None,
        at: t0() + Duration::minutes(1),
    }
}

/// Holds `r`, returning it as the store now keeps it.
async fn hold(store: &Stores, r: NewEgressRequest) -> EgressRequest {
    let id = r.id;
    store.egress.hold_destination(r).await.unwrap();
    store.egress.egress_request(id).await.unwrap()
}

/// Decides, expecting the decision to be taken.
async fn decide(store: &Stores, d: EgressDecide) -> EgressRequest {
    store.egress.decide_egress(d).await.unwrap().unwrap()
}

/// `r` as held, still pending.
fn pending(r: &NewEgressRequest) -> EgressRequest {
    EgressRequest {
        id: r.id,
        run_id: r.run_id,
        skill: r.skill.clone(),
        skill_version: r.skill_version.clone(),
        skill_hash: r.skill_hash.clone(),
        tool: r.tool.clone(),
        requested_by: r.requested_by.clone(),
        host: r.host.clone(),
        port: r.port,
        status: ApprovalStatus::Pending,
        scope: None,
        decided_by: None,
        note: None,
        created_at: r.created_at,
        expires_at: r.expires_at,
        decided_at: None,
    }
}

fn is_not_found<T: std::fmt::Debug>(outcome: Result<T, StoreError>, id: Uuid) -> bool {
    matches!(outcome, Err(StoreError::NotFound { what: "egress request", id: got }) if got == id)
}

pub async fn an_egress_request_round_trips_every_field(store: Stores) {
    let full = held("fetcher", "api.example.com", 8443, t0());
    assert_eq!(hold(&store, full.clone()).await, pending(&full));

    // A long-lived child's request: no run, tool, version or caller.
    let bare = NewEgressRequest {
        run_id: None,
        skill_version: None,
        tool: None,
        requested_by: None,
        port: u16::MAX,
        ..held("backend", "ünïcode.example", 0, t0())
    };
    assert_eq!(hold(&store, bare.clone()).await, pending(&bare));

    assert!(matches!(
        store.egress.hold_destination(full.clone()).await,
        Err(StoreError::Conflict(_))
    ));
    let unknown = Uuid::now_v7();
    assert!(is_not_found(store.egress.egress_request(unknown).await, unknown));
    let on_unknown = decision(unknown, true, Scope::Once);
    assert!(is_not_found(
        store.egress.decide_egress(on_unknown).await,
        unknown
    ));
    assert!(is_not_found(
        store.egress.expire_egress(unknown, t0()).await,
        unknown
    ));
}

pub async fn pending_egress_is_listed_oldest_first_until_it_expires(store: Stores) {
    let late = hold(&store, held("s", "c.example", 443, t0() + Duration::seconds(2))).await;
    // Two at one instant: by id.
    let mut tied = [
        hold(&store, held("s", "a.example", 443, t0())).await,
        hold(&store, held("s", "b.example", 443, t0())).await,
    ];
    tied.sort_by_key(|r| r.id);
    let short = NewEgressRequest {
        expires_at: t0() + Duration::seconds(30),
        ..held("s", "short.example", 443, t0() + Duration::seconds(1))
    };
    let short = hold(&store, short).await;
    let decided = hold(&store, held("s", "d.example", 443, t0())).await;
    decide(&store, decision(decided.id, false, Scope::Once)).await;

    let listed = |at, limit| store.egress.pending_egress(at, limit);
    let all = [tied[0].clone(), tied[1].clone(), short.clone(), late.clone()];
    assert_eq!(listed(t0() + Duration::seconds(5), 100).await.unwrap(), all);
    assert_eq!(listed(t0(), 2).await.unwrap(), all[..2]);
    assert_eq!(listed(t0(), 0).await.unwrap(), all[..1], "a limit of 0 lists one");
    // `short` expires at exactly t0 + 30 s: no longer listed then.
    let at_expiry = listed(t0() + Duration::seconds(30), 100).await.unwrap();
    assert_eq!(at_expiry, [tied[0].clone(), tied[1].clone(), late]);
    assert!(listed(t0() + Duration::hours(1), 100).await.unwrap().is_empty());
}

pub async fn an_allow_once_leaves_no_grant(store: Stores) {
    let r = held("fetcher", "api.example.com", 443, t0());
    hold(&store, r.clone()).await;
    let d = decision(r.id, true, Scope::Once);
    let decided = decide(&store, d.clone()).await;
    let expected = EgressRequest {
        status: ApprovalStatus::Approved,
        scope: Some(Scope::Once),
        decided_by: Some("bob".to_owned()),
        decided_at: Some(d.at),
        ..pending(&r)
    };
    assert_eq!(decided, expected);
    assert_eq!(store.egress.egress_request(r.id).await.unwrap(), expected);
    let granted = store
        .egress
        .egress_granted("fetcher", HASH, "api.example.com", 443);
    assert!(!granted.await.unwrap());
    assert!(store.egress.egress_grants(None).await.unwrap().is_empty());
}

pub async fn an_allow_always_grants_exactly_its_destination_once(store: Stores) {
    let first = held("fetcher", "api.example.com", 443, t0());
    hold(&store, first.clone()).await;
    let d = EgressDecide {
        note: Some("the vendor's API".to_owned()),
        ..decision(first.id, true, Scope::Always)
    };
    let decided = decide(&store, d.clone()).await;
    assert_eq!(
        (decided.status, decided.scope),
        (ApprovalStatus::Approved, Some(Scope::Always))
    );
    assert_eq!(decided.note.as_deref(), Some("the vendor's API"));

    let granted = |skill: &'static str, hash: &'static str, host: &'static str, port| {
        let egress = store.egress.clone();
        async move { egress.egress_granted(skill, hash, host, port).await.unwrap() }
    };
    assert!(granted("fetcher", HASH, "api.example.com", 443).await);
    assert!(!granted("fetcher", HASH, "api.example.com", 80).await);
    assert!(!granted("fetcher", HASH, "www.example.com", 443).await);
    assert!(!granted("fetcher", "sha256:other", "api.example.com", 443).await);
    assert!(!granted("fetcher2", HASH, "api.example.com", 443).await);

    // A second `always` for the same destination keeps the first grant.
    let again = held("fetcher", "api.example.com", 443, t0() + Duration::seconds(10));
    hold(&store, again.clone()).await;
    let later = EgressDecide {
        decided_by: Some("carol".to_owned()),
        at: t0() + Duration::minutes(2),
        ..decision(again.id, true, Scope::Always)
    };
    assert_eq!(decide(&store, later).await.status, ApprovalStatus::Approved);
    let kept = EgressGrant {
        skill: "fetcher".to_owned(),
        skill_hash: HASH.to_owned(),
        host: "api.example.com".to_owned(),
        port: 443,
        decided_by: Some("bob".to_owned()),
        note: Some("the vendor's API".to_owned()),
        created_at: d.at,
        request_id: first.id,
    };
    assert_eq!(store.egress.egress_grants(None).await.unwrap(), [kept]);
}

pub async fn a_denial_keeps_its_note_and_grants_nothing(store: Stores) {
    let r = held("fetcher", "evil.example", 443, t0());
    hold(&store, r.clone()).await;
    // The scope of a denial is not kept: it holds for the run that asked.
    let d = EgressDecide {
        note: Some("not on the list".to_owned()),
        ..decision(r.id, false, Scope::Always)
    };
    let expected = EgressRequest {
        status: ApprovalStatus::Denied,
        scope: None,
        decided_by: Some("bob".to_owned()),
        note: Some("not on the list".to_owned()),
        decided_at: Some(d.at),
        ..pending(&r)
    };
    assert_eq!(decide(&store, d).await, expected);
    assert_eq!(store.egress.egress_request(r.id).await.unwrap(), expected);
    assert!(store.egress.egress_grants(None).await.unwrap().is_empty());
}

pub async fn an_egress_request_is_decided_once_and_not_after_its_time(store: Stores) {
    let r = held("fetcher", "api.example.com", 443, t0());
    hold(&store, r.clone()).await;
    let won = decide(&store, decision(r.id, true, Scope::Once)).await;
    let twice = store
        .egress
        .decide_egress(decision(r.id, false, Scope::Once))
        .await;
    assert_eq!(
        twice.unwrap(),
        Err(EgressUndecidable::AlreadyDecided(ApprovalStatus::Approved))
    );
    assert_eq!(store.egress.egress_request(r.id).await.unwrap(), won);

    let overdue = held("fetcher", "api.example.com", 443, t0());
    hold(&store, overdue.clone()).await;
    // At its expiry exactly: too late.
    let late = EgressDecide {
        at: overdue.expires_at,
        ..decision(overdue.id, true, Scope::Always)
    };
    let outcome = store.egress.decide_egress(late.clone()).await.unwrap();
    assert_eq!(outcome, Err(EgressUndecidable::Expired));
    let expired = EgressRequest {
        status: ApprovalStatus::Expired,
        decided_at: Some(overdue.expires_at),
        ..pending(&overdue)
    };
    assert_eq!(store.egress.egress_request(overdue.id).await.unwrap(), expired);
    assert!(store.egress.egress_grants(None).await.unwrap().is_empty());
    let again = store.egress.decide_egress(late).await.unwrap();
    assert_eq!(
        again,
        Err(EgressUndecidable::AlreadyDecided(ApprovalStatus::Expired))
    );
}

pub async fn expiring_an_egress_request_leaves_a_decided_one(store: Stores) {
    let r = held("fetcher", "api.example.com", 443, t0());
    hold(&store, r.clone()).await;
    let gave_up = t0() + Duration::seconds(40);
    let expired = EgressRequest {
        status: ApprovalStatus::Expired,
        decided_at: Some(gave_up),
        ..pending(&r)
    };
    assert_eq!(store.egress.expire_egress(r.id, gave_up).await.unwrap(), expired);
    // Already expired: it keeps its first time.
    let later = gave_up + Duration::seconds(1);
    assert_eq!(store.egress.expire_egress(r.id, later).await.unwrap(), expired);
    assert!(store.egress.pending_egress(t0(), 100).await.unwrap().is_empty());

    let d = held("fetcher", "api.example.com", 443, t0());
    hold(&store, d.clone()).await;
    let decided = decide(&store, decision(d.id, false, Scope::Once)).await;
    assert_eq!(store.egress.expire_egress(d.id, gave_up).await.unwrap(), decided);
    assert_eq!(store.egress.egress_request(d.id).await.unwrap(), decided);
}

/// Of eight deciders racing on two instances, exactly one decides; the
/// others find it decided, and one grant is left.
pub async fn concurrent_egress_decisions_have_one_winner(url: String) {
    let (a, b) = (
        store::connect(&url).await.unwrap(),
        store::connect(&url).await.unwrap(),
    );
    let r = held("fetcher", "api.example.com", 443, t0());
    hold(&a, r.clone()).await;
    let barrier = Arc::new(tokio::sync::Barrier::new(8));
    let tasks: Vec<_> = (0..8u8)
        .map(|task| {
            let egress = if task % 2 == 0 {
                a.egress.clone()
            } else {
                b.egress.clone()
            };
            let barrier = barrier.clone();
            let d = EgressDecide {
                decided_by: Some(format!("decider {task}")),
                ..decision(r.id, task % 3 != 0, Scope::Always)
            };
            tokio::spawn(async move {
                barrier.wait().await;
                egress.decide_egress(d).await.unwrap()
            })
        })
        .collect();
    let (mut winners, mut losers) = (Vec::new(), Vec::new());
    for task in tasks {
        match task.await.unwrap() {
            Ok(won) => winners.push(won),
            Err(lost) => losers.push(lost),
        }
    }
    assert_eq!(winners.len(), 1, "{winners:?}");
    let won = winners.remove(0);
    let already = EgressUndecidable::AlreadyDecided(won.status);
    assert!(losers.iter().all(|lost| *lost == already), "{losers:?}");
    assert_eq!(b.egress.egress_request(r.id).await.unwrap(), won);
    let grants = a.egress.egress_grants(None).await.unwrap();
    let expected = usize::from(won.status == ApprovalStatus::Approved);
    assert_eq!(grants.len(), expected, "{grants:?}");
}

pub async fn nul_bytes_are_refused_in_egress_texts(store: Stores) {
    let fine = held("fetcher", "api.example.com", 443, t0());
    let with_nul: [fn(&mut NewEgressRequest); 6] = [
        |r| r.skill.push('\0'),
        |r| r.skill_version = Some("1\0".to_owned()),
        |r| r.skill_hash.push('\0'),
        |r| r.tool = Some("fe\0tch".to_owned()),
        |r| r.requested_by = Some("\0".to_owned()),
        |r| r.host.push('\0'),
    ];
    for spoil in with_nul {
        let mut r = fine.clone();
        spoil(&mut r);
        let outcome = store.egress.hold_destination(r.clone()).await;
        assert!(
            matches!(outcome, Err(StoreError::Invalid(_))),
            "{r:?}: {outcome:?}"
        );
    }
    assert!(store.egress.pending_egress(t0(), 100).await.unwrap().is_empty());

    hold(&store, fine.clone()).await;
    let by = EgressDecide {
        decided_by: Some("b\0b".to_owned()),
        ..decision(fine.id, true, Scope::Always)
    };
    let note = EgressDecide {
        note: Some("\0".to_owned()),
        ..decision(fine.id, true, Scope::Always)
    };
    for d in [by, note] {
        let outcome = store.egress.decide_egress(d).await;
        assert!(matches!(outcome, Err(StoreError::Invalid(_))), "{outcome:?}");
    }
    assert_eq!(
        store.egress.egress_request(fine.id).await.unwrap(),
        pending(&fine)
    );

    // A look-up by a name holding a NUL finds nothing.
    let granted = store.egress.egress_granted("fe\0", HASH, "api.example.com", 443);
    assert!(!granted.await.unwrap());
    assert!(store.egress.egress_grants(Some("fe\0")).await.unwrap().is_empty());
    assert_eq!(store.egress.revoke_egress_grants_of("fe\0").await.unwrap(), 0);
}

pub async fn egress_grants_are_listed_newest_first_and_revoked_by_skill(store: Stores) {
    let mut made = Vec::new();
    for (minute, skill, host) in [
        (1, "fetcher", "a.example"),
        (3, "mailer", "smtp.example"),
        (2, "fetcher", "b.example"),
        (4, "fetcher", "c.example"),
    ] {
        let r = held(skill, host, 443, t0());
        hold(&store, r.clone()).await;
        let d = EgressDecide {
            at: t0() + Duration::minutes(minute),
            ..decision(r.id, true, Scope::Always)
        };
        decide(&store, d).await;
        made.push((skill, host));
    }
    let listed = |skill| {
        let egress = store.egress.clone();
        async move {
            let grants = egress.egress_grants(skill).await.unwrap();
            grants.into_iter().map(|g| (g.skill, g.host)).collect::<Vec<_>>()
        }
    };
    let pairs = |names: &[(&str, &str)]| -> Vec<(String, String)> {
        names
            .iter()
            .map(|(s, h)| ((*s).to_owned(), (*h).to_owned()))
            .collect()
    };
    let newest_first = [made[3], made[1], made[2], made[0]];
    assert_eq!(listed(None).await, pairs(&newest_first));
    assert_eq!(listed(Some("fetcher")).await, pairs(&[made[3], made[2], made[0]]));
    assert_eq!(listed(Some("nobody")).await, pairs(&[]));

    assert_eq!(store.egress.revoke_egress_grants_of("fetcher").await.unwrap(), 3);
    assert_eq!(store.egress.revoke_egress_grants_of("fetcher").await.unwrap(), 0);
    let granted = store.egress.egress_granted("fetcher", HASH, "a.example", 443);
    assert!(!granted.await.unwrap());
    assert_eq!(listed(None).await, pairs(&[made[1]]));
}
