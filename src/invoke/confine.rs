//! A run's directory and sandbox, made just before its spawn.

use super::rundir::RunDir;
use super::{Invoker, Prepared};
use crate::egress::{Asker, RunEgress};
use crate::runner::Spec;
use crate::sandbox::ensure_scratch_root;
use crate::sandbox::{Allowance, Request};
use crate::skill::Action;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
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
        let runs_a_skill_file = matches!(p.tool().action, Action::Script { .. } | Action::Entrypoint { .. });
        if runs_a_skill_file && let Some(why) = self.sandbox.unreachable(p.skill.trust, &p.skill.dir) {
            return Err(std::io::Error::other(why));
        }
        let dir = self.run_dir(id, p, owner)?;
        if matches!(p.tool().action, Action::Entrypoint { .. }) {
            spec.cwd = dir.root.clone();
        }
        spec.env.extend(dir.env.iter().cloned());
        if owner.is_some() {
            // The server's HOME is not the sandbox user's to read.
            spec.env.retain(|(name, _)| name != "HOME");
            spec.env.push(("HOME".to_owned(), dir.root.display().to_string()));
            // git refuses a repository another user owns ("dubious
            // ownership"); the workspace is the admin's choice, and the
            // sandbox user only ever reads it.
            let workspace = self.settings.workspace.display().to_string();
            spec.env.extend([
                ("GIT_CONFIG_COUNT".to_owned(), "1".to_owned()),
                ("GIT_CONFIG_KEY_0".to_owned(), "safe.directory".to_owned()),
                ("GIT_CONFIG_VALUE_0".to_owned(), workspace),
            ]);
        }
        let request = self.request(p, &dir.root);
        spec.confinement = self.sandbox.confine(&request)?;
        if spec.confinement.as_ref().is_some_and(|c| c.private_tmp.is_some()) {
            // Seed 003's `/tmp`, bounded: temporary files go there.
            spec.env.retain(|(name, _)| name != "TMPDIR");
            spec.env.push(("TMPDIR".to_owned(), "/tmp".to_owned()));
        }
        Ok(dir)
    }

    /// The egress of run `id` whose skill reaches the network through the
    /// proxy (a `network.allow` list, or `network: true` asking for each
    /// destination): a network namespace of its own, whose one way out is
    /// a proxy that lets through the list and what a person allows, and
    /// the variables that point the run's programs at it. `None` for
    /// every other run.
    pub(super) fn egress(
        &self,
        id: Uuid,
        p: &Prepared,
        spec: &mut Spec,
    ) -> std::io::Result<Option<RunEgress>> {
        let who = || Asker {
            run_id: Some(id),
            skill: p.skill.name.clone(),
            version: p.skill.version.clone(),
            hash: p.skill.hash.clone(),
            tool: Some(p.tool().name.clone()),
            requested_by: p.asked.by.clone(),
        };
        self.settings
            .egress
            .route(who, p.skill.network_allow.as_ref(), spec)
    }

    /// Makes the run's directory. The scratch root is checked on the first
    /// run, not on every one, and again should it have vanished since (a
    /// cleaner of `/tmp`).
    fn run_dir(&self, id: Uuid, p: &Prepared, owner: Option<(u32, u32)>) -> std::io::Result<RunDir> {
        let root = &self.settings.scratch_dir;
        if !self.scratch_ready.load(Ordering::Acquire) {
            ensure_scratch_root(root)?;
            self.scratch_ready.store(true, Ordering::Release);
        }
        match RunDir::create(root, id, p, owner, &self.dirs) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                ensure_scratch_root(root)?;
                RunDir::create(root, id, p, owner, &self.dirs)
            }
            made => made,
        }
    }

    /// What a run of `p` would be allowed, for a dry run.
    pub(super) fn allowance(&self, p: &Prepared) -> Allowance {
        let scratch = self.settings.scratch_dir.join("<run id>");
        self.sandbox.allowance(&self.request(p, &scratch))
    }

    fn request<'a>(&'a self, p: &'a Prepared, scratch: &'a Path) -> Request<'a> {
        Request {
            trust: p.skill.trust,
            skill_dir: &p.skill.dir,
            deps: p.skill.deps.as_deref(),
            workspace: Some(&self.settings.workspace),
            workspace_write: p.skill.permissions.iter().any(|x| x == WORKSPACE_WRITE),
            scratch,
            network: p.skill.network,
            egress: p.skill.network_allow.is_some(),
            programs: p
                .argv
                .first()
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .into_iter()
                .collect(),
            memory_bytes: self.cgroup_memory_for(&p.skill),
            cpu: p.skill.resources.cpu,
            private_tmp: matches!(p.tool().action, Action::Entrypoint { .. }),
        }
    }
}
