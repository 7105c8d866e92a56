//! The caller's tool policy (seed 004 §3.5): which tools the agent that
//! asks has. A skill's `requires_tools` names the agent's own tools
//! (`read`, `write`, `shell`) as well as skilld's, so only the caller can
//! say whether they are there. Without a stated policy every skill is
//! listed with what it requires; under one, a skill that needs a tool that
//! neither the policy names nor skilld serves is left out, and says why.

use super::Catalog;
use crate::skill::{Code, Skill};
use serde::Serialize;
use std::collections::BTreeSet;
use utoipa::ToSchema;

/// The query parameter (`?agent_tools=`) that states a policy.
pub const QUERY: &str = "agent_tools";

/// The tools the calling agent has, when it said so.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentTools(Option<BTreeSet<String>>);

impl AgentTools {
    /// No policy stated: nothing is left out for it.
    pub fn unstated() -> Self {
        Self(None)
    }

    /// A stated policy from names; blank ones are skipped.
    pub fn stated<S: AsRef<str>>(names: impl IntoIterator<Item = S>) -> Self {
        Self(Some(
            names
                .into_iter()
                .map(|n| n.as_ref().trim().to_owned())
                .filter(|n| !n.is_empty())
                .collect(),
        ))
    }

    /// A stated policy from a comma-separated list, as `?agent_tools=`
    /// and `--agent-tools` take it. An empty list is a policy too: an
    /// agent with no tools of its own.
    pub fn parse(list: &str) -> Self {
        Self::stated(list.split(','))
    }

    /// The policy a query string states (`?agent_tools=`, repeated: the
    /// lists join), if it does.
    pub fn from_query(query: Option<&str>) -> Self {
        let lists: Vec<String> = form_urlencoded::parse(query.unwrap_or_default().as_bytes())
            .filter(|(name, _)| name == QUERY)
            .map(|(_, list)| list.into_owned())
            .collect();
        if lists.is_empty() {
            return Self::unstated();
        }
        Self::parse(&lists.join(","))
    }

    pub fn is_stated(&self) -> bool {
        self.0.is_some()
    }

    /// This policy if stated, else `fallback` (the server's default).
    pub fn or(self, fallback: &AgentTools) -> AgentTools {
        if self.is_stated() { self } else { fallback.clone() }
    }

    /// The names, sorted; `None` when unstated.
    pub fn names(&self) -> Option<&BTreeSet<String>> {
        self.0.as_ref()
    }
}

/// Why a skill is left out under the caller's tool policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct Exclusion {
    pub skill: String,
    /// `missing_required_tool`.
    #[schema(value_type = String, example = "missing_required_tool")]
    pub code: Code,
    /// The `requires_tools` entries that the policy lacks and no loaded
    /// skill provides.
    pub missing: Vec<String>,
    pub message: String,
}

impl Catalog {
    /// Why `skill` is left out under `policy`, if it is: a required tool
    /// that the policy does not name and skilld does not serve. An
    /// unstated policy leaves nothing out.
    pub fn exclusion(&self, skill: &Skill, policy: &AgentTools) -> Option<Exclusion> {
        let granted = policy.names()?;
        let missing: Vec<String> = skill
            .requires_tools
            .iter()
            .filter(|t| !granted.contains(*t) && self.tool_index.get(*t).is_none_or(Vec::is_empty))
            .cloned()
            .collect();
        if missing.is_empty() {
            return None;
        }
        let stated = granted.iter().map(String::as_str).collect::<Vec<_>>().join(", ");
        Some(Exclusion {
            skill: skill.name.clone(),
            code: Code::MissingRequiredTool,
            message: format!(
                "skill '{}' requires {}, which the agent's tools ({}) do not include and no loaded skill \
                 provides",
                skill.name,
                missing.join(", "),
                if stated.is_empty() { "none" } else { &stated },
            ),
            missing,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::AgentTools;

    #[test]
    fn lists_parse_trimmed_and_blank_means_none() {
        let p = AgentTools::parse(" read, write ,,shell");
        let names: Vec<&str> = p.names().unwrap().iter().map(String::as_str).collect();
        assert_eq!(names, ["read", "shell", "write"]);
        assert!(AgentTools::parse("").names().unwrap().is_empty());
        assert!(!AgentTools::unstated().is_stated());
        let default = AgentTools::parse("read");
        assert_eq!(AgentTools::unstated().or(&default), default);
        assert_eq!(AgentTools::parse("").or(&default), AgentTools::parse(""));
        assert_eq!(
            AgentTools::from_query(Some("x=1&agent_tools=read&agent_tools=write%2Cshell")),
            AgentTools::parse("read,write,shell")
        );
        assert_eq!(
            AgentTools::from_query(Some("agent_tools=")),
            AgentTools::parse("")
        );
        assert!(!AgentTools::from_query(Some("x=1")).is_stated());
    }
}
