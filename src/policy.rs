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
