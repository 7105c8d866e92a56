//! Who decides whether a run may reach a destination: the list its skill
//! declares, then its skill version's egress grants, then a person asked
//! for this destination (`ask`), once per destination per run.

use super::allow::AllowList;
use super::ask::{Answer, Asker, Asking};
use super::ledger::Destination;
pub use super::verdict::Verdict;
use futures_util::future::BoxFuture;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicU32;
use tokio::sync::OnceCell;

/// The most destinations one run may hold for a person: a program that
/// asks for a new name in a loop fills no inbox (what a grant covers is
/// not held, and does not count).
pub const MAX_ASKS_PER_RUN: u32 = 16;

/// Decides each destination a run asks its proxy for.
pub trait Gate: Send + Sync {
    fn decide<'a>(&'a self, host: &'a str, port: u16) -> BoxFuture<'a, Verdict>;
}

/// A skill's `network.allow`, and beyond it a person, when one can be
/// asked. Each destination is decided once for the run: a denied program
/// that retries gets the same answer, without a second hold.
pub struct RunGate {
    pub list: AllowList,
    pub who: Asker,
    pub asking: Option<Asking>,
    decided: Mutex<HashMap<Destination, Arc<OnceCell<Answer>>>>,
    asks_left: AtomicU32,
}

impl RunGate {
    pub fn new(list: AllowList, who: Asker, asking: Option<Asking>) -> Self {
        Self {
            list,
            who,
            asking,
            decided: Mutex::default(),
            asks_left: AtomicU32::new(MAX_ASKS_PER_RUN),
        }
    }

    /// `list` alone, asking no one: what it lacks is refused.
    pub fn listed(skill: &str, list: AllowList) -> Self {
        let who = Asker {
            skill: skill.to_owned(),
            ..Asker::default()
        };
        Self::new(list, who, None)
    }

    /// The run's one decision on `host:port`, made by the first
    /// connection that asks; later ones wait for it.
    async fn beyond_list(&self, host: &str, port: u16) -> Verdict {
        let Some(asking) = &self.asking else {
            return self.unlisted();
        };
        let cell = match self.decided.lock() {
            Ok(mut decided) => decided.entry((host.to_owned(), port)).or_default().clone(),
            Err(_) => return self.unlisted(),
        };
        let answer = cell
            .get_or_init(|| asking.ask(&self.who, host, port, &self.asks_left))
            .await;
        answer.verdict.clone()
    }

    /// How each destination beyond the list was decided so far.
    pub fn answers(&self) -> HashMap<Destination, Answer> {
        let Ok(decided) = self.decided.lock() else {
            return HashMap::new();
        };
        decided
            .iter()
            .filter_map(|(at, cell)| cell.get().map(|a| (at.clone(), a.clone())))
            .collect()
    }

    fn unlisted(&self) -> Verdict {
        Verdict::Deny {
            by: format!("skill {}'s network.allow", self.who.skill),
            why: "it is not listed".to_owned(),
        }
    }
}

impl Gate for RunGate {
    fn decide<'a>(&'a self, host: &'a str, port: u16) -> BoxFuture<'a, Verdict> {
        Box::pin(async move {
            if self.list.find(host, port).is_some() {
                Verdict::Allow
            } else {
                self.beyond_list(host, port).await
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{EgressDecide, Scope};
    use std::time::Duration;

    fn denied_by(v: &Verdict) -> &str {
        match v {
            Verdict::Deny { by, .. } => by,
            Verdict::Allow => "",
        }
    }

    /// A program that asks for one new name after another holds at most
    /// MAX_ASKS_PER_RUN of them; what a grant covers still goes through,
    /// and a destination asked again is not held again.
    #[tokio::test]
    async fn a_run_holds_so_many_destinations_and_grants_do_not_count() {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = format!("sqlite://{}", dir.path().join("log.db").display());
        let stores = crate::store::open(&url).await.expect("store");
        let asking = Asking::new(stores.egress.clone(), Duration::from_millis(20));
        let who = Asker {
            skill: "s".to_owned(),
            hash: "h".to_owned(),
            ..Asker::default()
        };
        // A grant of this version, made by an `always` on an earlier hold.
        let earlier = RunGate::new(AllowList::default(), who.clone(), Some(asking.clone()));
        let mut held = asking.held();
        let waiting = tokio::spawn(async move { earlier.decide("granted.test", 443).await });
        let request = held.recv().await.expect("held");
        let decided = asking
            .decide(EgressDecide {
                id: request.id,
                allow: true,
                scope: Scope::Always,
                decided_by: Some("p".to_owned()),
                note: None,
                at: chrono::Utc::now(),
            })
            .await
            .expect("store");
        assert!(decided.is_ok(), "{decided:?}");
        assert_eq!(waiting.await.expect("task"), Verdict::Allow);

        let gate = RunGate::new(AllowList::default(), who, Some(asking.clone()));
        for i in 0..MAX_ASKS_PER_RUN {
            let v = gate.decide(&format!("h{i}.test"), 443).await;
            assert_eq!(denied_by(&v), "no one", "{v:?}");
        }
        let over = gate.decide("one-more.test", 443).await;
        assert_eq!(denied_by(&over), "skilld", "{over:?}");
        assert_eq!(gate.decide("granted.test", 443).await, Verdict::Allow);
        // Asked again: the run's answer, no new hold.
        let again = gate.decide("h0.test", 443).await;
        assert_eq!(denied_by(&again), "no one");
        assert!(held.try_recv().is_ok(), "the first of the run's holds was told");
        let mut told = 1;
        while held.try_recv().is_ok() {
            told += 1;
        }
        assert_eq!(
            told, MAX_ASKS_PER_RUN,
            "one hold per destination, none past the bound"
        );
        // Every hold that timed out is marked so: none is left pending.
        let an_hour_ago = chrono::Utc::now() - chrono::Duration::hours(1);
        let pending = stores
            .egress
            .pending_egress(an_hour_ago, 100)
            .await
            .expect("store");
        assert!(pending.is_empty(), "{pending:?}");
    }
}
