//! Seed 002's runtime as a resource (`docs/sessions.md`): a session is one
//! conversation of an orchestrator. Its turns activate skills by their
//! triggers (asking a person to allow a skill's permissions the first
//! time), build the prompt from the active skills, and dispatch the nine
//! hook phases to every active skill in priority order; the tool calls
//! that name it go through the one pipeline ([`crate::invoke`]), which
//! asks this runtime for the session's hooks ([`SessionSeats`]).

mod activate;
mod dispatch;
mod error;
mod pending;
mod project;
mod prompt;
mod seats;
pub mod secret;
pub mod state;
pub mod view;

pub use error::SessionError;
pub use pending::{PendingActivation, PendingActivations};
pub use view::{
    ActivationDecision, Fragment, HookReport, ResponseView, SessionView, SkillView, TurnView, WikiView,
};

use crate::catalog::{Catalog, CatalogHandle};
use crate::invoke::{Invoker, SessionSeats};
use crate::skill::Skill;
use crate::skill::context::{TurnBudget, TurnLimits};
use crate::store::{NewSession, SessionRecord, SessionStore, SkillApprovals, Stores};
use chrono::Utc;
use serde::Deserialize;
use state::{SessionState, TriggerContext};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;
use uuid::Uuid;

/// `[sessions]` in the configuration.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SessionSettings {
    /// How long a session lives past its last turn.
    pub ttl_secs: u64,
    /// The most live sessions one caller may hold.
    pub max_per_caller: u64,
    /// Skills allowed to activate without asking (seed 002's headless
    /// `--approve-skills`).
    pub approved_skills: Vec<String>,
}

impl Default for SessionSettings {
    fn default() -> Self {
        Self {
            ttl_secs: 3600,
            max_per_caller: 16,
            approved_skills: Vec::new(),
        }
    }
}

/// Activation requests buffered for a slow listener before it misses some.
const REQUESTS_BUFFERED: usize = 256;

/// The session runtime of one server.
pub struct Sessions {
    store: Arc<dyn SessionStore>,
    /// Skills allowed "always": an activation asks no one for them.
    skill_approvals: Arc<dyn SkillApprovals>,
    catalog: Arc<CatalogHandle>,
    invoker: Weak<Invoker>,
    /// Itself, for the contexts it hands to backends.
    me: Weak<Sessions>,
    settings: SessionSettings,
    /// The per-turn limits (`[limits]`), as the invoker has them.
    turn_limits: TurnLimits,
    /// What this instance holds of each session it served: its turn's
    /// budget and the lock that orders its requests.
    live: Mutex<HashMap<Uuid, Arc<Live>>>,
    /// Each activation request as it is made (once written), for the
    /// notifier.
    requests: tokio::sync::broadcast::Sender<PendingActivation>,
}

/// A session as this instance serves it.
#[derive(Debug)]
struct Live {
    turn: Mutex<(u32, Arc<TurnBudget>)>,
    /// One request of a session at a time on this instance; between
    /// instances the store's revision decides.
    order: Arc<tokio::sync::Mutex<()>>,
}

/// A session read for a request: its record and what it holds.
struct Open {
    record: SessionRecord,
    context: TriggerContext,
    state: SessionState,
    /// The skills that changed or went since the session last saw them,
    /// put back to Inactive as it was read.
    refreshed: view::Changes,
    /// The instance's hold on the session, kept for the request.
    _order: tokio::sync::OwnedMutexGuard<()>,
}

impl Sessions {
    /// The runtime over `stores`, seated in `invoker` so that calls may
    /// name sessions.
    pub fn shared(
        invoker: &Arc<Invoker>,
        stores: &Stores,
        catalog: Arc<CatalogHandle>,
        settings: SessionSettings,
    ) -> Arc<Self> {
        let sessions = Arc::new_cyclic(|me| Self {
            store: stores.sessions.clone(),
            skill_approvals: stores.skill_approvals.clone(),
            catalog,
            invoker: Arc::downgrade(invoker),
            me: me.clone(),
            settings,
            turn_limits: invoker.settings().turn_limits,
            live: Mutex::default(),
            requests: tokio::sync::broadcast::channel(REQUESTS_BUFFERED).0,
        });
        let seats: Arc<dyn SessionSeats> = sessions.clone();
        if invoker.seat_sessions(seats).is_err() {
            tracing::warn!("the invoker already has a session runtime; calls name the first one's sessions");
        }
        sessions
    }

    fn me(&self) -> Weak<Self> {
        self.me.clone()
    }

    pub fn settings(&self) -> &SessionSettings {
        &self.settings
    }

    /// Each activation request this instance makes from now on, once it
    /// is written (so a person can decide it).
    pub fn activation_requests(&self) -> tokio::sync::broadcast::Receiver<PendingActivation> {
        self.requests.subscribe()
    }

    fn catalog(&self) -> Arc<Catalog> {
        self.catalog.current()
    }

    fn ttl(&self) -> chrono::Duration {
        let secs = i64::try_from(self.settings.ttl_secs).unwrap_or(i64::MAX);
        chrono::Duration::try_seconds(secs).unwrap_or(chrono::Duration::MAX)
    }

    fn live(&self, id: Uuid) -> Arc<Live> {
        let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        live.entry(id)
            .or_insert_with(|| {
                Arc::new(Live {
                    turn: Mutex::new((0, Arc::new(TurnBudget::new(self.turn_limits)))),
                    order: Arc::default(),
                })
            })
            .clone()
    }

    /// The budget of session `id`'s turn `turn` on this instance: a new
    /// turn starts a new budget.
    fn budget(&self, id: Uuid, turn: u32) -> Arc<TurnBudget> {
        let live = self.live(id);
        let mut held = live.turn.lock().unwrap_or_else(PoisonError::into_inner);
        if held.0 != turn {
            *held = (turn, Arc::new(TurnBudget::new(self.turn_limits)));
        }
        held.1.clone()
    }

    fn forget(&self, id: Uuid) {
        self.live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
    }

    /// Starts a session for `caller`: the context's triggers activate
    /// skills, then `on_conversation_start` runs.
    pub async fn start(
        self: &Arc<Self>,
        caller: Option<&str>,
        context: TriggerContext,
    ) -> Result<SessionView, SessionError> {
        let catalog = self.catalog();
        let context = activate::checked_context(&catalog, context, &self.workspace())?;
        let now = Utc::now();
        let (secret, kept) = secret::fresh().map_err(SessionError::internal)?;
        let new = NewSession {
            id: Uuid::now_v7(),
            caller: caller.map(str::to_owned),
            context: serde_json::to_value(&context).map_err(SessionError::internal)?,
            state: serde_json::to_value(SessionState::default()).map_err(SessionError::internal)?,
            created_at: now,
            expires_at: now + self.ttl(),
            secret_sha256: Some(kept),
        };
        let record = self
            .store
            .create_session(new, self.settings.max_per_caller, now)
            .await?
            .map_err(|too| SessionError::TooMany {
                live: too.live,
                max: too.max,
            })?;
        // New, so no other request can hold it yet: no read again.
        let order = self.live(record.id).order.clone().lock_owned().await;
        let mut open = Open {
            record,
            context,
            state: SessionState::default(),
            refreshed: view::Changes::default(),
            _order: order,
        };
        let mut reports = Vec::new();
        let changes = self.activation_pass(&mut open, "", &[], &mut reports).await;
        self.conversation_start(&open, &mut reports).await;
        let open = self.save(open).await?;
        let mut view = self.view(&open, changes, reports);
        view.secret = Some(secret);
        Ok(view)
    }

    /// Session `id` of `caller`, for a request that shows `secret`:
    /// expired, ended or another caller's are all not found, and one the
    /// request cannot show its right to is locked.
    async fn open(&self, id: Uuid, caller: Option<&str>, secret: Option<&str>) -> Result<Open, SessionError> {
        let open = self.held(id).await?;
        if open.record.caller.as_deref() != caller {
            return Err(SessionError::NotFound(id));
        }
        let proof = crate::invoke::SessionProof::Secret(secret.map(str::to_owned));
        secret::check(&open.record, &proof).map_err(|why| SessionError::Locked { session: id, why })?;
        Ok(open)
    }

    /// Session `id`, unexpired, held for a request and read under the
    /// hold (so a request just before it has written what it changed);
    /// a skill that changed since it was allowed in is Inactive again.
    async fn held(&self, id: Uuid) -> Result<Open, SessionError> {
        let order = self.live(id).order.clone().lock_owned().await;
        let record = self.store.get_session(id).await?;
        let record = record
            .filter(|r| r.expires_at > Utc::now())
            .ok_or(SessionError::NotFound(id))?;
        let context = serde_json::from_value(record.context.clone()).map_err(SessionError::internal)?;
        let state = serde_json::from_value(record.state.clone()).map_err(SessionError::internal)?;
        let mut open = Open {
            record,
            context,
            state,
            refreshed: view::Changes::default(),
            _order: order,
        };
        activate::refresh(&mut open, &self.catalog());
        Ok(open)
    }

    /// Writes what a request changed, and extends the session's life.
    async fn save(&self, open: Open) -> Result<Open, SessionError> {
        let now = Utc::now();
        let state = serde_json::to_value(&open.state).map_err(SessionError::internal)?;
        let saved = self
            .store
            .update_session(
                open.record.id,
                open.record.revision,
                open.record.turn,
                state,
                now + self.ttl(),
                now,
            )
            .await?
            .ok_or(SessionError::Busy(open.record.id))?;
        for request in pending::made(&open.record, &saved, &open.state) {
            // Nobody listening (no [[notify]]) is not an error.
            let _ = self.requests.send(request);
        }
        Ok(Open {
            record: saved,
            ..open
        })
    }

    /// The session as its caller sees it now.
    pub async fn get(
        &self,
        id: Uuid,
        caller: Option<&str>,
        secret: Option<&str>,
    ) -> Result<SessionView, SessionError> {
        let mut open = self.open(id, caller, secret).await?;
        let changes = std::mem::take(&mut open.refreshed);
        Ok(self.view(&open, changes, Vec::new()))
    }

    /// A turn: the user's message fires triggers; `activate` and
    /// `deactivate` name skills to switch on or off whatever their
    /// triggers say. Answers the prompt fragments and tools of the active
    /// skills.
    pub async fn turn(
        self: &Arc<Self>,
        id: Uuid,
        (caller, secret): (Option<&str>, Option<&str>),
        turn: view::TurnRequest,
    ) -> Result<TurnView, SessionError> {
        turn.checked()?;
        let mut open = self.open(id, caller, secret).await?;
        let catalog = self.catalog();
        activate::check_names(&catalog, &turn.activate, "activate")?;
        activate::check_names(&catalog, &turn.deactivate, "deactivate")?;
        open.record.turn = open.record.turn.saturating_add(1);
        let mut reports = Vec::new();
        let mut changes = self.deactivate(&mut open, &turn.deactivate, &mut reports).await;
        let fired = self
            .activation_pass(&mut open, &turn.message, &turn.activate, &mut reports)
            .await;
        changes.absorb(fired);
        let fragments = self.prompt(&open, &turn.message, &mut reports).await;
        let open = self.save(open).await?;
        let session = self.view(&open, changes, reports);
        Ok(TurnView {
            tools: view::active_tools(&self.catalog(), &open.state),
            prompt: fragments,
            session,
        })
    }

    /// Ends a session: its active skills are deactivated.
    pub async fn end(
        self: &Arc<Self>,
        id: Uuid,
        caller: Option<&str>,
        secret: Option<&str>,
    ) -> Result<(), SessionError> {
        let mut open = self.open(id, caller, secret).await?;
        let active: Vec<String> = open.state.active().map(str::to_owned).collect();
        let mut reports = Vec::new();
        self.deactivate(&mut open, &active, &mut reports).await;
        self.store.end_session(id).await?;
        self.forget(id);
        Ok(())
    }

    /// Ends the sessions past their time every 30 s, until `stop`.
    pub async fn housekeeping(self: Arc<Self>, stop: tokio_util::sync::CancellationToken) {
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(Duration::from_secs(30)) => {}
            }
            self.sweep().await;
        }
    }

    /// Ends the sessions past their time now: each is deleted (by one
    /// instance), then its active skills' `on_deactivate` hooks run.
    /// Returns how many ended.
    pub async fn sweep(self: &Arc<Self>) -> usize {
        let mut ended = 0;
        loop {
            let gone = match self.store.expire_sessions(Utc::now()).await {
                Ok(gone) => gone,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot expire sessions");
                    return ended;
                }
            };
            let full = gone.len() >= crate::store::EXPIRE_BATCH as usize;
            ended += gone.len();
            for record in gone {
                self.expired(record).await;
            }
            if !full {
                return ended;
            }
        }
    }

    fn workspace(&self) -> std::path::PathBuf {
        self.invoker
            .upgrade()
            .map(|i| i.settings().workspace.clone())
            .unwrap_or_default()
    }

    /// The loaded skills named, in seed 002's priority order: built-in
    /// (bundled), then user, then project (untrusted); by name within.
    fn ordered<'a>(catalog: &Catalog, names: impl Iterator<Item = &'a str>) -> Vec<Arc<Skill>> {
        let mut skills: Vec<Arc<Skill>> = names.filter_map(|n| catalog.skill(n).cloned()).collect();
        skills.sort_by(|a, b| (a.trust, &a.name).cmp(&(b.trust, &b.name)));
        skills
    }

    /// The skills active in `state` that are still the version a person
    /// (or the configuration) allowed in, in priority order: a skill that
    /// changed since holds no seat, whatever its state says, until a
    /// person allows the new version.
    fn seated(catalog: &Catalog, state: &SessionState) -> Vec<Arc<Skill>> {
        let allowed = state.skills.iter().filter(|(name, s)| {
            s.state == state::Lifecycle::Active && catalog.skill(name).is_some_and(|c| c.hash == s.hash)
        });
        Self::ordered(catalog, allowed.map(|(name, _)| name.as_str()))
    }
}
