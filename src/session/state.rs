//! What a session keeps between requests, as the store holds it (JSON):
//! the trigger context it started with, and each skill's place in seed
//! 002's lifecycle.

use crate::skill::triggers::FiredTrigger;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use utoipa::ToSchema;
use uuid::Uuid;

/// Seed 002's trigger context, as a session was started with it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TriggerContext {
    /// Project files, as paths relative to the project (`src/main.rs`).
    #[serde(default)]
    #[schema(max_items = 10000)]
    pub files: Vec<String>,
    /// A directory of the workspace whose files are the project files
    /// (read once, when the session starts; added to `files`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 4096)]
    pub path: Option<String>,
    /// Languages detected in the project (`rust`, `go`).
    #[serde(default)]
    #[schema(max_items = 100)]
    pub languages: Vec<String>,
    /// The project's build system (`cargo`, `gradle`), for the hooks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 64)]
    pub build_system: Option<String>,
    /// The mode (`interactive`, `headless`, `wiki`).
    #[serde(default)]
    #[schema(max_length = 64)]
    pub mode: String,
    /// Skills asked for by name: they activate whatever their triggers.
    #[serde(default)]
    #[schema(max_items = 1000)]
    pub explicit: Vec<String>,
}

/// Where a skill is in its lifecycle within one session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Lifecycle {
    Inactive,
    /// Its triggers fired; it waits for a person to allow its permissions.
    Activating,
    Active,
    /// Denied, or its backend or `on_activate` failed: `reason` says.
    Error,
}

/// How a skill came to be allowed to activate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Allowed {
    /// It declares no permission and is not untrusted: nothing to ask.
    NothingToAsk,
    /// The configuration's `[sessions] approved_skills` names it.
    Configured,
    /// A person allowed it for this session.
    Once,
    /// A person allowed this version always (kept in the store).
    Always,
}

/// A request to a person to allow a skill's permissions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ActivationRequest {
    pub id: Uuid,
    pub permissions: Vec<String>,
    pub trust: crate::trust::Trust,
    pub requested_at: DateTime<Utc>,
    /// Where its tools may connect, as a person deciding reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
}

/// One skill in a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SkillState {
    pub state: Lifecycle,
    /// The content hash it was activated (or asked for) at: a skill that
    /// changed is activated again, and asks again.
    pub hash: String,
    /// The trigger that activated it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<FiredTrigger>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed: Option<Allowed>,
    /// The request waiting for a person, while `activating`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ActivationRequest>,
    /// Why it is in `error` (or why it left `active`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The caller deactivated it: its triggers do not activate it again,
    /// only a turn's `activate` does.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub switched_off: bool,
}

/// Every skill a session has met, by name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionState {
    pub skills: BTreeMap<String, SkillState>,
}

impl SessionState {
    /// The names of the skills active now.
    pub fn active(&self) -> impl Iterator<Item = &str> {
        self.skills
            .iter()
            .filter(|(_, s)| s.state == Lifecycle::Active)
            .map(|(name, _)| name.as_str())
    }

    pub fn is_active(&self, skill: &str) -> bool {
        self.skills
            .get(skill)
            .is_some_and(|s| s.state == Lifecycle::Active)
    }
}
