//! Egress approvals: a destination a run's list does not cover is held
//! for a person, like a call. The hold is kept in the store, so that any
//! instance sharing it lists and decides it, and the connection waits for
//! the decision up to `egress_wait_secs`, then fails.

use super::verdict::Verdict;
use crate::store::{
    ApprovalStatus, EgressDecide, EgressDecisions, EgressRequest, EgressUndecidable, NewEgressRequest,
    StoreError,
};
use chrono::Utc;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tokio::sync::{Notify, broadcast};
use uuid::Uuid;

/// How often a waiting connection looks for a decision made by another
/// instance; one made here wakes it at once.
const POLL: Duration = Duration::from_millis(250);

/// Held destinations queued for the notifier before the slowest drops.
const HELD_BACKLOG: usize = 256;

/// Who asks: what a person reads beside the destination.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Asker {
    /// The run; `None` for a long-lived child serving many calls.
    pub run_id: Option<Uuid>,
    pub skill: String,
    pub version: Option<String>,
    pub hash: String,
    pub tool: Option<String>,
    /// The caller (a token's name).
    pub requested_by: Option<String>,
}

/// How a destination beyond a run's list was decided, for its record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub verdict: Verdict,
    /// Let through by its skill version's egress grant, no one asked.
    pub granted: bool,
    /// The request a person was asked, as it ended.
    pub held: Option<Held>,
}

/// A request held for a person, as it ended.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Held {
    pub request_id: Uuid,
    /// `approved` (allowed), `denied` or `expired` (no one answered).
    pub status: String,
    /// `once` or `always`, for an allowance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
}

impl Answer {
    fn plain(verdict: Verdict) -> Self {
        Self {
            verdict,
            granted: false,
            held: None,
        }
    }
}

/// Where held destinations are kept and decided, how long a connection
/// waits, and who hears of each hold. Cheap to clone.
#[derive(Clone)]
pub struct Asking {
    store: Arc<dyn EgressDecisions>,
    wait: Duration,
    held: broadcast::Sender<EgressRequest>,
    decided: Arc<Notify>,
}

impl fmt::Debug for Asking {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Asking")
            .field("wait", &self.wait)
            .finish_non_exhaustive()
    }
}

impl Asking {
    pub fn new(store: Arc<dyn EgressDecisions>, wait: Duration) -> Self {
        Self {
            store,
            wait,
            held: broadcast::channel(HELD_BACKLOG).0,
            decided: Arc::new(Notify::new()),
        }
    }

    /// Each destination held on this instance, as it is held.
    pub fn held(&self) -> broadcast::Receiver<EgressRequest> {
        self.held.subscribe()
    }

    /// The store the holds are kept in.
    pub fn store(&self) -> &Arc<dyn EgressDecisions> {
        &self.store
    }

    /// A person's decision, recorded once, and the waiting connection on
    /// this instance woken.
    pub async fn decide(
        &self,
        decide: EgressDecide,
    ) -> Result<Result<EgressRequest, EgressUndecidable>, StoreError> {
        let decided = self.store.decide_egress(decide).await?;
        self.decided.notify_waiters();
        Ok(decided)
    }

    /// Whether `who` may reach `host:port`: its skill version's grant, or
    /// a person's decision on a new hold. Fails closed on a store error.
    /// A hold spends one of `holds_left`, the run's; none left refuses
    /// what no grant covers, asking no one.
    pub async fn ask(&self, who: &Asker, host: &str, port: u16, holds_left: &AtomicU32) -> Answer {
        match self.ask_inner(who, host, port, holds_left).await {
            Ok(answer) => answer,
            Err(e) => {
                tracing::warn!(skill = %who.skill, host, port, error = %e, "an egress request could not be kept");
                Answer::plain(Verdict::Deny {
                    by: "skilld".to_owned(),
                    why: "the request could not be recorded for a person to decide".to_owned(),
                })
            }
        }
    }

    async fn ask_inner(
        &self,
        who: &Asker,
        host: &str,
        port: u16,
        holds_left: &AtomicU32,
    ) -> Result<Answer, StoreError> {
        if self
            .store
            .egress_granted(&who.skill, &who.hash, host, port)
            .await?
        {
            return Ok(Answer {
                verdict: Verdict::Allow,
                granted: true,
                held: None,
            });
        }
        if holds_left
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_err()
        {
            return Ok(Answer::plain(Verdict::Deny {
                by: "skilld".to_owned(),
                why: "this run already held as many destinations for a person as one run may".to_owned(),
            }));
        }
        let now = Utc::now();
        let request = NewEgressRequest {
            id: Uuid::now_v7(),
            run_id: who.run_id,
            skill: who.skill.clone(),
            skill_version: who.version.clone(),
            skill_hash: who.hash.clone(),
            tool: who.tool.clone(),
            requested_by: who.requested_by.clone(),
            host: host.to_owned(),
            port,
            created_at: now,
            expires_at: now + chrono::Duration::from_std(self.wait).unwrap_or(chrono::Duration::MAX),
        };
        let (id, shown) = (request.id, request.pending());
        self.store.hold_destination(request).await?;
        let mut unheld = Unheld {
            id: Some(id),
            store: self.store.clone(),
        };
        crate::metrics::egress_held(&shown.skill);
        let _ = self.held.send(shown);
        let decided = self.await_decision(id).await?;
        unheld.id = None;
        Ok(Answer {
            verdict: self.verdict(&decided),
            granted: false,
            held: Some(Held {
                request_id: decided.id,
                status: decided.status.as_str().to_owned(),
                scope: decided.scope.map(|s| s.as_str().to_owned()),
                decided_by: decided.decided_by,
            }),
        })
    }

    /// The request once decided, or expired when no one decided in time.
    async fn await_decision(&self, id: Uuid) -> Result<EgressRequest, StoreError> {
        let deadline = tokio::time::Instant::now() + self.wait;
        loop {
            let woken = self.decided.notified();
            let request = self.store.egress_request(id).await?;
            if request.status != ApprovalStatus::Pending {
                return Ok(request);
            }
            if tokio::time::Instant::now() >= deadline {
                return self.store.expire_egress(id, Utc::now()).await;
            }
            let nap = POLL.min(deadline.saturating_duration_since(tokio::time::Instant::now()));
            tokio::select! {
                () = woken => {}
                () = tokio::time::sleep(nap) => {}
            }
        }
    }

    /// What a decided (or expired) request means for the connection.
    fn verdict(&self, request: &EgressRequest) -> Verdict {
        let by = request
            .decided_by
            .clone()
            .unwrap_or_else(|| "a person".to_owned());
        match request.status {
            ApprovalStatus::Approved => Verdict::Allow,
            ApprovalStatus::Denied => Verdict::Deny {
                by,
                why: match &request.note {
                    Some(note) => format!("a person denied it: \"{note}\""),
                    None => "a person denied it".to_owned(),
                },
            },
            ApprovalStatus::Expired | ApprovalStatus::Pending => Verdict::Deny {
                by: "no one".to_owned(),
                why: format!(
                    "it waited {} s for a person to allow it, and no one did",
                    self.wait.as_secs()
                ),
            },
        }
    }
}

/// Marks a hold expired when its connection stops waiting early (the run
/// ended, the program hung up), so the inbox lists no hold nobody waits on.
struct Unheld {
    id: Option<Uuid>,
    store: Arc<dyn EgressDecisions>,
}

impl Drop for Unheld {
    fn drop(&mut self) {
        let (Some(id), Ok(runtime)) = (self.id, tokio::runtime::Handle::try_current()) else {
            return;
        };
        let store = self.store.clone();
        runtime.spawn(async move {
            let _ = store.expire_egress(id, Utc::now()).await;
        });
    }
}
