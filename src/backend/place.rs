//! Where a backend's long-lived child runs, and how: the skill's sandbox
//! request, environment and limits. Shared by the `process` backend (and
//! the Starlark host it starts) and the stdio servers of the `mcp` one.

use super::ChildSettings;
use crate::egress::{Asker, RunEgress};
use crate::runner::{Spec, child_env, with_deps};
use crate::sandbox::{Request, Sandbox};
use crate::skill::Trust;
use crate::skill::backend::LaunchRequest;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// One skill's place for its child.
#[derive(Debug)]
pub(super) struct Place {
    pub skill: String,
    pub dir: PathBuf,
    pub deps: Option<PathBuf>,
    pub trust: Trust,
    pub network: bool,
    /// `network: {allow: [...]}`: the child gets a namespace of its own,
    /// whose one way out is a proxy kept for the child's life.
    network_allow: Option<crate::egress::AllowList>,
    /// The skill version a person is asked about, for what is held.
    version: Option<String>,
    hash: String,
    workspace_write: bool,
    memory_bytes: Option<u64>,
    pub sandbox: Arc<Sandbox>,
    pub settings: ChildSettings,
}

impl Place {
    /// Who the child's held destinations are shown as: its skill, no run.
    fn asker(&self) -> Asker {
        Asker {
            run_id: None,
            skill: self.skill.clone(),
            version: self.version.clone(),
            hash: self.hash.clone(),
            tool: None,
            requested_by: None,
        }
    }

    pub fn new(req: &LaunchRequest<'_>, sandbox: Arc<Sandbox>, settings: ChildSettings) -> Self {
        Self {
            skill: req.skill.to_owned(),
            dir: req.dir.to_path_buf(),
            deps: req.deps.map(Path::to_path_buf),
            trust: req.trust,
            network: req.network,
            network_allow: req.network_allow.cloned(),
            version: req.version.map(str::to_owned),
            hash: req.hash.to_owned(),
            workspace_write: req.permissions.iter().any(|p| p == "file:write"),
            memory_bytes: req.memory_bytes,
            sandbox,
            settings,
        }
    }

    /// The child's own directory under the scratch root, its `TMPDIR` and
    /// `HOME`, owned by the sandbox's user.
    pub fn scratch_dir(&self) -> std::io::Result<PathBuf> {
        let name = format!("backend-{}-{}", self.skill, uuid::Uuid::now_v7());
        self.sandbox
            .private_dir(&self.settings.scratch_dir, &name, self.trust)
    }

    /// Says why a child most likely failed where the sandbox's user cannot
    /// reach the skill's files (a skill in root's home), beside `why`.
    pub fn explain(&self, why: String) -> String {
        match self.sandbox.unreachable(self.trust, &self.dir) {
            Some(hint) => format!("{why}; {hint}"),
            None => why,
        }
    }

    /// The spec of `command` started in the sandbox with `scratch` as its
    /// home, and `more_env` beside the usual environment; with a
    /// `network.allow` list, the egress the child must hold for its life
    /// ([`crate::runner::Child::holding`]). Needs a Tokio runtime.
    pub fn spec(
        &self,
        command: &[String],
        scratch: &Path,
        more_env: Vec<(String, String)>,
    ) -> std::io::Result<(Spec, Option<RunEgress>)> {
        let mut env = child_env(&self.skill, &self.dir, "Global", &self.settings.extra_env);
        if let Some(deps) = &self.deps {
            with_deps(&mut env, deps);
        }
        env.retain(|(name, _)| {
            name != "HOME" && name != "TMPDIR" && !more_env.iter().any(|(n, _)| n == name)
        });
        let scratch_text = scratch.display().to_string();
        env.extend([
            ("HOME".to_owned(), scratch_text.clone()),
            ("TMPDIR".to_owned(), scratch_text),
        ]);
        env.extend(more_env);
        let request = Request {
            trust: self.trust,
            skill_dir: &self.dir,
            deps: self.deps.as_deref(),
            workspace: Some(&self.settings.workspace),
            workspace_write: self.workspace_write,
            scratch,
            network: self.network || self.network_allow.is_some(),
            egress: self.network_allow.is_some(),
            programs: command
                .first()
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .into_iter()
                .collect(),
            memory_bytes: self.memory_bytes.or(self.settings.limits.memory_bytes),
            cpu: None,
            private_tmp: false,
        };
        let mut limits = self.settings.limits;
        limits.memory_bytes = request.memory_bytes;
        // A long-lived child would spend any CPU-seconds limit over its life.
        limits.cpu_secs = None;
        let mut spec = Spec {
            program: command.first().cloned().unwrap_or_default(),
            args: command.iter().skip(1).cloned().collect(),
            cwd: self.settings.workspace.clone(),
            env,
            timeout: Duration::MAX,
            grace: self.settings.grace,
            limits,
            isolate_network: !self.network,
            egress_ns: None,
            confinement: self.sandbox.confine(&request)?,
        };
        let egress = self
            .settings
            .egress
            .route(|| self.asker(), self.network_allow.as_ref(), &mut spec)?;
        Ok((spec, egress))
    }
}
