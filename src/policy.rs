//! The approval policy (DESIGN §4). Issue-level decisions about a single
//! call come later; what a tool needs in general is known from its skill.

use crate::skill::{Skill, Trust};
use serde::Serialize;
use utoipa::ToSchema;

/// Whether calls of a tool need a person's approval, in general.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RequiresApproval {
    /// Runs without asking (a bundled, read-only skill).
    Never,
    /// Asks once per content hash, then runs (a user skill, read-only).
    FirstRun,
    /// Asks every time (untrusted, `always_ask`, or not read-only).
    Always,
}

/// DESIGN §4 with no standing grants: untrusted or `always_ask` always ask;
/// a user skill asks on first run; `read_only` runs; anything else asks.
pub fn requires_approval(skill: &Skill) -> RequiresApproval {
    if skill.trust == Trust::Untrusted || skill.always_ask || !skill.read_only {
        return RequiresApproval::Always;
    }
    match skill.trust {
        Trust::User => RequiresApproval::FirstRun,
        _ => RequiresApproval::Never,
    }
}

/// What the policy says about one call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct Decision {
    pub decision: Verdict,
    /// Why, in a sentence.
    pub reason: String,
}

/// Run now, ask a person first, or refuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Run,
    Ask,
    Deny,
}

/// The decision for a call, before anything runs (DESIGN §4). Approval
/// requests are not stored yet, so a call the policy would ask about runs
/// now, and the reason says what a person will be asked once they are.
pub fn decide(skill: &Skill) -> Decision {
    let would = match requires_approval(skill) {
        RequiresApproval::Never => {
            return Decision {
                decision: Verdict::Run,
                reason: "a bundled read-only skill runs without approval".to_owned(),
            };
        }
        RequiresApproval::FirstRun => "a first-run approval of this user skill",
        RequiresApproval::Always if skill.trust == Trust::Untrusted => "approval (untrusted skill)",
        RequiresApproval::Always if skill.always_ask => "approval (always_ask)",
        RequiresApproval::Always => "approval (the skill is not read-only)",
    };
    Decision {
        decision: Verdict::Run,
        reason: format!("this server does not hold calls for approval yet; the policy would ask for {would}"),
    }
}
