//! Seed 002's nine lifecycle hook phases, by the names a manifest's
//! backend registers them under (`docs/skills.md` "Hooks").

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A lifecycle hook phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// The skill was just activated in a session.
    OnActivate,
    /// The skill is being deactivated.
    OnDeactivate,
    /// A session (a conversation) begins.
    OnConversationStart,
    /// A turn's prompt is being built: may add prompt fragments.
    OnBeforePromptBuild,
    /// Before a tool runs: may change its input or cancel it.
    BeforeToolCall,
    /// After a tool ran: may change its result.
    AfterToolResult,
    /// The model's response is complete: may transform its text.
    OnAfterResponse,
    /// Before a wiki section is generated: may add context.
    OnBeforeWikiSection,
    /// A security scan finished: may add and filter findings.
    OnSecurityScanComplete,
}

impl Phase {
    pub const ALL: [Phase; 9] = [
        Phase::OnActivate,
        Phase::OnDeactivate,
        Phase::OnConversationStart,
        Phase::OnBeforePromptBuild,
        Phase::BeforeToolCall,
        Phase::AfterToolResult,
        Phase::OnAfterResponse,
        Phase::OnBeforeWikiSection,
        Phase::OnSecurityScanComplete,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Phase::OnActivate => "on_activate",
            Phase::OnDeactivate => "on_deactivate",
            Phase::OnConversationStart => "on_conversation_start",
            Phase::OnBeforePromptBuild => "on_before_prompt_build",
            Phase::BeforeToolCall => "before_tool_call",
            Phase::AfterToolResult => "after_tool_result",
            Phase::OnAfterResponse => "on_after_response",
            Phase::OnBeforeWikiSection => "on_before_wiki_section",
            Phase::OnSecurityScanComplete => "on_security_scan_complete",
        }
    }

    /// The phase a name spells: its own, or the seed's `on_` spelling of
    /// the two tool phases (`on_before_tool_call`, `on_after_tool_result`).
    pub fn parse(name: &str) -> Option<Self> {
        let name = match name {
            "on_before_tool_call" => "before_tool_call",
            "on_after_tool_result" => "after_tool_result",
            other => other,
        };
        Self::ALL.into_iter().find(|p| p.as_str() == name)
    }

    /// Whether the phase wraps a call of a tool.
    pub fn is_tool_phase(self) -> bool {
        matches!(self, Phase::BeforeToolCall | Phase::AfterToolResult)
    }

    /// The phases among `names` that skilld knows, each once, by its own
    /// name (a backend may list the seed's spellings).
    pub fn known(names: &[String]) -> Vec<String> {
        let mut known: Vec<String> = Vec::new();
        for phase in names.iter().filter_map(|n| Self::parse(n)) {
            if !known.iter().any(|k| k == phase.as_str()) {
                known.push(phase.as_str().to_owned());
            }
        }
        known
    }

    /// The names of every phase, for messages.
    pub fn names() -> String {
        Self::ALL.map(Phase::as_str).join(", ")
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_phase_parses_from_its_name_and_the_tool_phases_from_the_seeds() {
        for p in Phase::ALL {
            assert_eq!(Phase::parse(p.as_str()), Some(p));
        }
        assert_eq!(Phase::parse("on_before_tool_call"), Some(Phase::BeforeToolCall));
        assert_eq!(Phase::parse("on_after_tool_result"), Some(Phase::AfterToolResult));
        assert_eq!(Phase::parse("OnActivate"), None);
        let listed = ["on_before_tool_call", "before_tool_call", "on_activate", "nope"].map(String::from);
        assert_eq!(Phase::known(&listed), ["before_tool_call", "on_activate"]);
    }
}
