//! A run's directory and sandbox, made just before its spawn.

use super::rundir::RunDir;
use super::{Invoker, Prepared};
use crate::runner::Spec;
use crate::sandbox::Request;
use crate::skill::Action;
use std::path::PathBuf;
use uuid::Uuid;

/// The permission (seed 002's vocabulary) with which a skill says its
/// tools write to the workspace; without it the workspace is read-only.
pub const WORKSPACE_WRITE: &str = "file:write";

impl Invoker {
    /// Makes run `id`'s scratch directory (its working directory too, for
    /// an entrypoint) and, where the skill runs sandboxed, the confinement
    /// the child applies to itself.
    pub(super) fn confine(&self, id: Uuid, p: &Prepared, spec: &mut Spec) -> std::io::Result<RunDir> {
        let confined = self.sandbox.applies_to(p.skill.trust);
        let owner = confined.then(|| self.sandbox.identity()).flatten();
        let dir = RunDir::create(&self.settings.scratch_dir, id, p, owner)?;
        if matches!(p.tool().action, Action::Entrypoint { .. }) {
            spec.cwd = dir.root.clone();
        }
        spec.env.extend(dir.env.iter().cloned());
        let request = Request {
            name: id.to_string(),
            trust: p.skill.trust,
            skill_dir: &p.skill.dir,
            workspace: &self.settings.workspace,
            workspace_write: p.skill.permissions.iter().any(|x| x == WORKSPACE_WRITE),
            scratch: &dir.root,
            network: p.skill.network,
            programs: p
                .argv
                .first()
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .into_iter()
                .collect(),
            memory_bytes: spec.limits.memory_bytes,
        };
        spec.confinement = self.sandbox.confine(&request)?;
        Ok(dir)
    }
}
