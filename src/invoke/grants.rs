//! Standing grants given ahead of any call: by an approver
//! (`POST /grants`), or by the operator at start-up (`[[grants]]`,
//! `--approve-skill`: seed 002's headless pre-approval). Each binds to
//! one tool of one skill version, as an `always` decision does.

use super::{Approver, InvokeError};
use crate::setting::SettingError;
use crate::skill::Skill;
use crate::store::{Grant, GrantDecision, StoreError};
use chrono::Utc;
use uuid::Uuid;

/// What a grant is asked for, of one loaded skill.
#[derive(Debug, Clone)]
pub struct GrantAsk<'a> {
    /// One tool, or every tool the skill has now.
    pub tool: Option<&'a str>,
    pub decision: GrantDecision,
    /// The hash the asker reviewed: the grant is refused when the skill is
    /// no longer that version. `None` binds to the version loaded now.
    pub expect_hash: Option<&'a str>,
    /// Who grants: a token's name, or `config:…` for the operator's.
    pub by: Option<String>,
}

impl Approver {
    /// Records the grants `ask` describes, all or none, and returns them.
    pub async fn grant(&self, skill: &Skill, ask: GrantAsk<'_>) -> Result<Vec<Grant>, InvokeError> {
        if let Some(expected) = ask.expect_hash
            && expected != skill.hash
        {
            return Err(InvokeError::HashMismatch {
                skill: skill.name.clone(),
                expected: expected.to_owned(),
                current: skill.hash.clone(),
            });
        }
        let now = Utc::now();
        let grants: Vec<Grant> = tools_granted(skill, ask.tool)?
            .into_iter()
            .map(|tool| Grant {
                id: Uuid::now_v7(),
                skill: skill.name.clone(),
                tool,
                skill_hash: skill.hash.clone(),
                decision: ask.decision,
                created_by: ask.by.clone(),
                created_at: now,
            })
            .collect();
        self.approvals.put_grants(grants.clone()).await?;
        Ok(grants)
    }

    /// Revokes every grant of `skill` (any tool, any version) and every
    /// "allow always" of its permissions (seed 002's `Revoke(skill)`);
    /// returns how many of each went.
    pub async fn revoke_grants_of(&self, skill: &str) -> Result<(u64, u64), StoreError> {
        let approvals = self.skill_approvals.revoke_skill_approvals(skill).await?;
        let grants = self.approvals.revoke_grants_of(skill).await?;
        Ok((grants, approvals))
    }
}

/// The tools a grant covers: the one named, or all of them.
fn tools_granted(skill: &Skill, tool: Option<&str>) -> Result<Vec<String>, InvokeError> {
    let names: Vec<String> = match tool {
        Some(name) => skill
            .tools
            .iter()
            .find(|t| t.name == name)
            .map(|t| vec![t.name.clone()])
            .ok_or_else(|| InvokeError::NotFound {
                what: "tool",
                name: format!("{}/{name}", skill.name),
            })?,
        None => skill.tools.iter().map(|t| t.name.clone()).collect(),
    };
    if names.is_empty() {
        return Err(InvokeError::NothingToGrant(skill.name.clone()));
    }
    Ok(names)
}

/// Who a pre-approval of the config file is recorded as: not a token's
/// name (those cannot hold ':'), so no token's own calls lose it.
const FROM_CONFIG: &str = "config:[[grants]]";
/// … and one of `--approve-skill`.
const FROM_FLAG: &str = "config:--approve-skill";

/// An operator's pre-approval, for headless servers: a `[[grants]]` table
/// of the config file, or an `--approve-skill NAME[:TOOL]` flag.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreGrant {
    /// `name`, or `name@version` for an installed version.
    pub skill: String,
    /// One tool; all of the skill's when left out.
    #[serde(default)]
    pub tool: Option<String>,
    #[serde(default = "allow")]
    pub decision: GrantDecision,
    /// The reviewed hash; start-up fails when the skill is not at it. Left
    /// out, the grant binds to the hash loaded at start-up.
    #[serde(default)]
    pub skill_hash: Option<String>,
    #[serde(skip, default = "from_config")]
    from: &'static str,
}

fn allow() -> GrantDecision {
    GrantDecision::Allow
}

fn from_config() -> &'static str {
    FROM_CONFIG
}

impl PreGrant {
    /// The operator's pre-approvals: the config file's `[[grants]]`, then
    /// those of `--approve-skill` (`SKILLD_APPROVE_SKILLS`); both count.
    pub fn configured(file: &[PreGrant], flags: &[String]) -> Result<Vec<Self>, SettingError> {
        let flagged = flags
            .iter()
            .map(|v| Self::from_flag(v))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(file.iter().cloned().chain(flagged).collect())
    }

    /// `NAME[:TOOL]` of `--approve-skill`: an allow at the loaded hash.
    fn from_flag(value: &str) -> Result<Self, SettingError> {
        let (skill, tool) = match value.split_once(':') {
            Some((skill, tool)) => (skill, Some(tool)),
            None => (value, None),
        };
        if skill.is_empty() || tool.is_some_and(str::is_empty) {
            return Err(SettingError::new(
                "grants",
                format!("--approve-skill '{value}': expected NAME or NAME:TOOL"),
            ));
        }
        Ok(Self {
            skill: skill.to_owned(),
            tool: tool.map(str::to_owned),
            decision: GrantDecision::Allow,
            skill_hash: None,
            from: FROM_FLAG,
        })
    }

    fn describe(&self) -> String {
        let what = match &self.tool {
            Some(tool) => format!("{}:{tool}", self.skill),
            None => self.skill.clone(),
        };
        format!(
            "pre-approval {what} ({})",
            self.from.trim_start_matches("config:")
        )
    }
}

impl Approver {
    /// Records the operator's pre-approvals against the catalog loaded at
    /// start-up. Any that names no loaded skill or tool, or a hash the
    /// skill is not at, fails start-up: a headless server would otherwise
    /// hold calls nobody is there to decide.
    pub async fn pre_grant(
        &self,
        catalog: &crate::catalog::Catalog,
        pre: &[PreGrant],
    ) -> Result<(), SettingError> {
        for one in pre {
            let skill = catalog
                .find(&one.skill)
                .map_err(|e| SettingError::new("grants", format!("{}: {e}", one.describe())))?
                .skill;
            let ask = GrantAsk {
                tool: one.tool.as_deref(),
                decision: one.decision,
                expect_hash: one.skill_hash.as_deref(),
                by: Some(one.from.to_owned()),
            };
            let grants = self
                .grant(&skill, ask)
                .await
                .map_err(|e| SettingError::new("grants", format!("{}: {e}", one.describe())))?;
            let tools: Vec<&str> = grants.iter().map(|g| g.tool.as_str()).collect();
            if one.skill_hash.is_none() {
                tracing::info!(
                    skill = %skill.name, hash = %skill.hash, tools = ?tools, decision = one.decision.as_str(),
                    "{} gave no hash: it binds to the version loaded now; a changed skill asks again",
                    one.describe()
                );
            } else {
                tracing::info!(skill = %skill.name, hash = %skill.hash, tools = ?tools, "{} recorded", one.describe());
            }
        }
        Ok(())
    }
}
