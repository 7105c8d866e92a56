//! Who decides whether a run may reach a destination. The list a skill
//! declares decides here; a person deciding what it does not cover comes
//! with the egress approvals.

use super::allow::AllowList;
use futures_util::future::BoxFuture;

/// A decision on one destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    /// Refused: `by` whom (the list, a person), and why, both said to the
    /// program.
    Deny {
        by: String,
        why: String,
    },
}

/// Decides each destination a run asks its proxy for.
pub trait Gate: Send + Sync {
    fn decide<'a>(&'a self, host: &'a str, port: u16) -> BoxFuture<'a, Verdict>;
}

/// A skill's `network.allow`, and nothing beyond it.
pub struct ListGate {
    pub skill: String,
    pub list: AllowList,
}

impl Gate for ListGate {
    fn decide<'a>(&'a self, host: &'a str, port: u16) -> BoxFuture<'a, Verdict> {
        let verdict = match self.list.find(host, port) {
            Some(_) => Verdict::Allow,
            None => Verdict::Deny {
                by: format!("skill {}'s network.allow", self.skill),
                why: "it is not listed".to_owned(),
            },
        };
        Box::pin(std::future::ready(verdict))
    }
}
