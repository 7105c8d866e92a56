//! Declarative rules (`security_rules`) over a scan's files: each match
//! a finding at its line, one per rule and line. The patterns were
//! compiled at load within a size bound, and the `regex` crate matches in
//! time linear in the text, so this is bounded by the bytes read.

use super::findings::{MAX_FINDINGS, ScanFinding};
use super::tree::ScanFile;
use crate::skill::Skill;
use crate::skill::security_rule::SecurityRule;
use std::sync::Arc;

/// Every rule of every skill over every file: the findings, and whether
/// [`MAX_FINDINGS`] cut them short.
pub fn run(skills: &[Arc<Skill>], files: &[ScanFile]) -> (Vec<ScanFinding>, bool) {
    let mut out = Vec::new();
    for file in files {
        let lines = LineStarts::of(&file.text);
        for skill in skills {
            for rule in skill.security_rules.iter().filter(|r| r.applies_to(&file.path)) {
                if !matches(&skill.name, rule, file, &lines, &mut out) {
                    return (out, true);
                }
            }
        }
    }
    (out, false)
}

/// Adds `rule`'s findings in `file`; false once the scan holds
/// [`MAX_FINDINGS`].
fn matches(
    skill: &str,
    rule: &SecurityRule,
    file: &ScanFile,
    lines: &LineStarts,
    out: &mut Vec<ScanFinding>,
) -> bool {
    let mut last = 0;
    for m in rule.pattern.find_iter(&file.text) {
        let line = lines.line_of(m.start());
        if line == last {
            continue;
        }
        last = line;
        if out.len() >= MAX_FINDINGS {
            return false;
        }
        out.push(ScanFinding {
            skill: skill.to_owned(),
            rule: rule.id.clone(),
            severity: rule.severity,
            message: rule.message.clone(),
            path: file.path.clone(),
            line: Some(line),
            scanner: None,
        });
    }
    true
}

/// Where each line of a text starts, to number a match's line.
struct LineStarts(Vec<usize>);

impl LineStarts {
    fn of(text: &str) -> Self {
        let breaks = text.match_indices('\n').map(|(at, _)| at + 1);
        Self(std::iter::once(0).chain(breaks).collect())
    }

    /// The 1-based line holding byte `at`.
    fn line_of(&self, at: usize) -> u32 {
        let index = self.0.partition_point(|start| *start <= at);
        u32::try_from(index).unwrap_or(u32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_numbered_from_one_at_every_newline() {
        let lines = LineStarts::of("ab\ncd\n\nef");
        let at = |i| lines.line_of(i);
        assert_eq!([at(0), at(2), at(3), at(6), at(7), at(9)], [1, 1, 2, 3, 4, 4]);
    }
}
