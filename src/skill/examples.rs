//! `examples`: the tool calls and trigger contexts a skill carries for
//! `skilld test` (`docs/skills.md`, "Examples"). Read by
//! [`super::dialect::examples`].

use super::diag::Pos;
use serde_json::{Map, Value};

/// What `skilld test` runs of a skill.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Examples {
    pub calls: Vec<CallExample>,
    /// Contexts in which the skill's triggers must fire.
    pub matches: Vec<TriggerExample>,
    /// Contexts in which none of them may fire.
    pub not_matches: Vec<TriggerExample>,
}

impl Examples {
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty() && self.matches.is_empty() && self.not_matches.is_empty()
    }
}

/// A call of one of the skill's tools and what its envelope must show.
#[derive(Debug, Clone, PartialEq)]
pub struct CallExample {
    pub tool: String,
    pub arguments: Map<String, Value>,
    pub expect: Expect,
    /// Where it is written in the definition file.
    pub pos: Option<Pos>,
}

/// What a call's envelope must show; every field given must hold.
#[derive(Debug, Clone, PartialEq)]
pub struct Expect {
    /// The envelope's `success` (default `true`).
    pub success: bool,
    pub exit_code: Option<i64>,
    /// The whole `output`, exactly.
    pub output: Option<String>,
    /// Texts the `output` must each contain.
    pub output_contains: Vec<String>,
    /// The output read as JSON (`parsed`), exactly.
    pub parsed: Option<Value>,
    /// A text the envelope's `error` must contain.
    pub error_contains: Option<String>,
}

impl Default for Expect {
    fn default() -> Self {
        Self {
            success: true,
            exit_code: None,
            output: None,
            output_contains: Vec::new(),
            parsed: None,
            error_contains: None,
        }
    }
}

/// A context for the trigger engine, with `POST /skills/match`'s fields.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TriggerExample {
    pub message: String,
    pub files: Vec<String>,
    pub languages: Vec<String>,
    pub mode: String,
    pub pos: Option<Pos>,
}
