//! How far a skill's source is trusted (its root's level).

use serde::Serialize;
use utoipa::ToSchema;

/// How far a skill's source is trusted; feeds the approval decision.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, ToSchema, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Trust {
    Bundled,
    User,
    Untrusted,
}

impl Trust {
    pub fn as_str(self) -> &'static str {
        match self {
            Trust::Bundled => "bundled",
            Trust::User => "user",
            Trust::Untrusted => "untrusted",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "bundled" => Some(Trust::Bundled),
            "user" => Some(Trust::User),
            "untrusted" => Some(Trust::Untrusted),
            _ => None,
        }
    }
}
