//! The approval policy (`docs/design.md` §4): what a tool needs in general, known from
//! its skill, and the decision for one call, which also needs the store's
//! standing grants and first-run approvals. Pure functions, so the table is
//! tested in one place.

use crate::skill::{Skill, Tool, Trust};
use crate::store::{GrantDecision, PolicyFacts};
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

/// `docs/design.md` §4 with no standing grants: untrusted or `always_ask` always ask
/// (a manifest tool's `requires_approval` is its own `always_ask`); a user
/// skill asks on first run; `read_only` runs; anything else asks.
pub fn requires_approval(skill: &Skill, tool: &Tool) -> RequiresApproval {
    if skill.trust == Trust::Untrusted || always_asks(skill, tool) || !reads_only(skill, tool) {
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

/// The decision for one call, before anything runs (`docs/design.md` §4), in the
/// order of its table: a standing deny, a standing allow, untrusted or
/// `always_ask`, a user skill's first run, read-only, else ask.
pub fn decide(skill: &Skill, tool: &Tool, facts: &PolicyFacts) -> Decision {
    let (decision, reason) = match facts.grant {
        Some(GrantDecision::Deny) => (
            Verdict::Deny,
            "a standing deny grant covers this tool of this skill version".to_owned(),
        ),
        Some(GrantDecision::Allow) => (
            Verdict::Run,
            "a standing allow grant covers this tool of this skill version".to_owned(),
        ),
        None if skill.trust == Trust::Untrusted => (Verdict::Ask, "the skill is untrusted".to_owned()),
        None if skill.always_ask => (
            Verdict::Ask,
            "the skill asks for approval of every call (always_ask)".to_owned(),
        ),
        None if tool.requires_approval => (
            Verdict::Ask,
            "the tool asks for approval of every call (requires_approval)".to_owned(),
        ),
        None if skill.trust == Trust::User && !facts.hash_approved => (
            Verdict::Ask,
            "first run of this version of a user skill: its content was never approved".to_owned(),
        ),
        None if tool.read_only == Some(true) => (Verdict::Run, "the tool is read-only".to_owned()),
        None if tool.read_only == Some(false) => (Verdict::Ask, "the tool is not read-only".to_owned()),
        None if skill.read_only => (Verdict::Run, "the skill is read-only".to_owned()),
        None => (Verdict::Ask, "the skill is not read-only".to_owned()),
    };
    Decision { decision, reason }
}

/// Whether a tool only reads: its own word over its skill's.
pub fn reads_only(skill: &Skill, tool: &Tool) -> bool {
    tool.read_only.unwrap_or(skill.read_only)
}

fn always_asks(skill: &Skill, tool: &Tool) -> bool {
    skill.always_ask || tool.requires_approval
}

/// The most `network.allow` patterns a warning names.
const NAMED_HOSTS: usize = 8;

/// What an approver should know beyond the command itself, if anything:
/// how far the skill is trusted, then where its tools may connect.
pub fn warning(skill: &Skill, facts: &PolicyFacts) -> Option<String> {
    let said: Vec<String> = [trust_warning(skill, facts), network_warning(skill)]
        .into_iter()
        .flatten()
        .collect();
    (!said.is_empty()).then(|| said.join(" "))
}

/// Where the skill's tools may connect, when they may connect at all.
/// Where `skill`'s tools may connect, for a person deciding: its list,
/// asking for each destination, or the host's network (unrestricted);
/// `None` without the network.
pub fn network_warning(skill: &Skill) -> Option<String> {
    let Some(list) = &skill.network_allow else {
        return skill.network.then(|| {
            "It has unrestricted network access (network: true, unrestricted): it can reach anything \
             this server can."
                .to_owned()
        });
    };
    let patterns = list.patterns();
    if patterns.is_empty() {
        return Some(
            "It may use the network (network: true) only through skilld's proxy, which holds each \
             destination for a person to allow."
                .to_owned(),
        );
    }
    let mut named: Vec<String> = patterns
        .iter()
        .take(NAMED_HOSTS)
        .map(ToString::to_string)
        .collect();
    if patterns.len() > NAMED_HOSTS {
        named.push(format!("{} more", patterns.len() - NAMED_HOSTS));
    }
    Some(format!(
        "It may connect to {} (network.allow), through skilld's proxy; anywhere else is held for a \
         person to allow.",
        named.join(", ")
    ))
}

fn trust_warning(skill: &Skill, facts: &PolicyFacts) -> Option<String> {
    if skill.trust == Trust::Untrusted {
        return Some(format!(
            "This skill is untrusted (from {}): read the command and its arguments before approving.",
            skill.dir.display()
        ));
    }
    if skill.trust == Trust::User && !facts.hash_approved {
        return Some(
            "First run of this version of the skill: approving it also lets its read-only calls run \
             without asking until its files change."
                .to_owned(),
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skill::{LoadOptions, PathCache, Runtimes, load_skill};
    use std::sync::Arc;

    fn skill(front: &str, trust: Trust) -> Arc<Skill> {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("s");
        std::fs::create_dir(&dir).unwrap();
        let fence = "```";
        std::fs::write(
            dir.join("SKILL.md"),
            format!(
                "---\nname: s\ndescription: A test skill.\n{front}---\n\n### t\n\nDoes it.\n\n{fence}bash\ntrue\n{fence}\n"
            ),
        )
        .unwrap();
        let opts = LoadOptions {
            source: "test",
            trust,
            max_timeout_secs: 600,
            runtimes: &Runtimes::default(),
            installed: false,
            path: &PathCache::new(std::env::var_os("PATH")),
            launcher: None,
            rules: &crate::skill::SkillRules::default(),
        };
        let loaded = load_skill(&dir, &opts);
        loaded.skill.unwrap_or_else(|| panic!("{:?}", loaded.diagnostics))
    }

    fn tool(requires_approval: bool) -> Tool {
        Tool {
            name: "t".to_owned(),
            description: String::new(),
            params: Vec::new(),
            open_object: true,
            schema: None,
            requires_approval,
            read_only: None,
            action: crate::skill::Action::Backend,
        }
    }

    fn verdict(s: &Skill, grant: Option<GrantDecision>, hash_approved: bool) -> Verdict {
        let facts = PolicyFacts {
            grant,
            hash_approved,
            ..PolicyFacts::default()
        };
        decide(s, &tool(false), &facts).decision
    }

    #[test]
    fn the_decision_table() {
        use GrantDecision::{Allow, Deny};
        use Verdict::{Ask, Run};
        let ro_bundled = skill("read_only: true\n", Trust::Bundled);
        let rw_bundled = skill("", Trust::Bundled);
        let ro_user = skill("read_only: true\n", Trust::User);
        let ro_untrusted = skill("read_only: true\n", Trust::Untrusted);
        let always = skill("read_only: true\nalways_ask: true\n", Trust::Bundled);
        // 1. deny beats everything, even read-only bundled.
        assert_eq!(verdict(&ro_bundled, Some(Deny), true), Verdict::Deny);
        // 2. allow beats untrusted, always_ask and not read-only.
        for s in [&ro_untrusted, &always, &rw_bundled] {
            assert_eq!(verdict(s, Some(Allow), false), Run);
        }
        // 3. untrusted and always_ask ask, approved or not; so does a tool
        // that requires approval, and an allow grant still covers it.
        assert_eq!(verdict(&ro_untrusted, None, true), Ask);
        assert_eq!(verdict(&always, None, true), Ask);
        let asks = tool(true);
        assert_eq!(decide(&ro_bundled, &asks, &PolicyFacts::default()).decision, Ask);
        assert_eq!(requires_approval(&ro_bundled, &asks), RequiresApproval::Always);
        let allowed = PolicyFacts {
            grant: Some(Allow),
            ..PolicyFacts::default()
        };
        assert_eq!(decide(&ro_bundled, &asks, &allowed).decision, Run);
        // 4. a user skill asks until its version was approved, 5. then runs read-only.
        assert_eq!(verdict(&ro_user, None, false), Ask);
        assert_eq!(verdict(&ro_user, None, true), Run);
        // 5. read-only bundled runs; 6. anything else asks.
        assert_eq!(verdict(&ro_bundled, None, false), Run);
        assert_eq!(verdict(&rw_bundled, None, true), Ask);
        // Warnings: untrusted, and a user skill's first run.
        let none = PolicyFacts::default();
        assert!(warning(&ro_untrusted, &none).is_some_and(|w| w.contains("untrusted")));
        assert!(warning(&ro_user, &none).is_some_and(|w| w.contains("First run")));
        assert!(
            warning(
                &ro_user,
                &PolicyFacts {
                    hash_approved: true,
                    ..PolicyFacts::default()
                }
            )
            .is_none()
        );
        assert!(warning(&rw_bundled, &none).is_none());
    }

    #[test]
    fn the_warning_says_where_the_tools_may_connect() {
        let facts = PolicyFacts::default();
        assert_eq!(warning(&skill("", Trust::Bundled), &facts), None);
        let listed = skill(
            "network:\n  allow: [api.github.com, \"*.example.com:8443\"]\n",
            Trust::Bundled,
        );
        assert_eq!(
            warning(&listed, &facts).as_deref(),
            Some(
                "It may connect to api.github.com, *.example.com:8443 (network.allow), through \
                 skilld's proxy; anywhere else is held for a person to allow."
            )
        );
        let asking = skill("network: true\n", Trust::Untrusted);
        let said = warning(&asking, &facts).unwrap();
        assert!(said.starts_with("This skill is untrusted"), "{said}");
        assert!(
            said.ends_with("which holds each destination for a person to allow."),
            "{said}"
        );
        // A bundled skill's `network: true` keeps the host's network.
        let open = skill(
            "network: true\nread_only: true\nalways_ask: true\n",
            Trust::Bundled,
        );
        let said = warning(&open, &facts).unwrap();
        assert!(
            said.ends_with("(network: true, unrestricted): it can reach anything this server can."),
            "{said}"
        );
    }
}
