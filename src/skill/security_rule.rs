//! A security-rule skill's declarative rule, compiled, and how serious its
//! findings are (parsed from a manifest by [`super::dialect::security_rules`]).

use globset::GlobSet;
use regex::Regex;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// How serious a finding is, lowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RuleSeverity {
    Info,
    Low,
    Medium,
    High,
    Critical,
}

impl RuleSeverity {
    pub const ALL: [RuleSeverity; 5] = [
        RuleSeverity::Info,
        RuleSeverity::Low,
        RuleSeverity::Medium,
        RuleSeverity::High,
        RuleSeverity::Critical,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RuleSeverity::Info => "info",
            RuleSeverity::Low => "low",
            RuleSeverity::Medium => "medium",
            RuleSeverity::High => "high",
            RuleSeverity::Critical => "critical",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

/// One declarative rule, compiled.
#[derive(Debug, Clone)]
pub struct SecurityRule {
    /// Unique within its skill; a skill name's form.
    pub id: String,
    /// Matched with `^` and `$` at line ends (`\r\n` too).
    pub pattern: Regex,
    pub severity: RuleSeverity,
    pub message: String,
    /// The globs of `files`, as written; empty: every file.
    pub globs: Vec<String>,
    /// `globs`, compiled; `None`: every file.
    pub files: Option<GlobSet>,
}

impl SecurityRule {
    /// Whether the rule looks at `path` ('/'-separated): every file, or
    /// one a glob of `files` matches by its whole path or by its name
    /// alone, as trigger globs do (`*.py` matches `src/a.py`).
    pub fn applies_to(&self, path: &str) -> bool {
        let Some(set) = &self.files else {
            return true;
        };
        let name = path.rsplit('/').next().unwrap_or(path);
        set.is_match(path) || set.is_match(name)
    }
}
