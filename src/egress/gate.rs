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
use std::sync::atomic::{AtomicU32, Ordering};
use tokio::sync::OnceCell;

/// The most destinations one run may hold for a person: a program that
/// asks for a new name in a loop fills no inbox.
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
            .get_or_init(|| async {
                if self
                    .asks_left
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
                    .is_err()
                {
                    return Answer {
                        verdict: Verdict::Deny {
                            by: "skilld".to_owned(),
                            why: format!(
                                "this run already asked for {MAX_ASKS_PER_RUN} destinations, the most one run may"
                            ),
                        },
                        granted: false,
                        held: None,
                    };
                }
                asking.ask(&self.who, host, port).await
            })
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
