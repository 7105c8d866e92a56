//! Skills named with a version (`name@1.2.0`, `name@latest`), as every
//! route that takes a skill accepts them. The serving version is the
//! snapshot's own skill; another installed version is loaded when first
//! named and kept for the life of the snapshot.

use super::installed::{self, SkillState, VersionStatus};
use super::{Catalog, CatalogOptions, Root};
use crate::skill::backend::Unreviewed;
use crate::skill::{LoadOptions, PathCache, Skill, load_skill};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// The installed versions a snapshot has loaded beyond its serving ones.
#[derive(Debug, Default)]
pub(super) struct Versions {
    opts: Option<CatalogOptions>,
    loaded: Mutex<HashMap<PathBuf, Arc<Skill>>>,
}

impl Versions {
    pub(super) fn new(opts: Option<&CatalogOptions>) -> Self {
        Self {
            opts: opts.cloned(),
            loaded: Mutex::default(),
        }
    }

    fn installed_roots(&self) -> impl Iterator<Item = &Root> {
        self.opts
            .iter()
            .flat_map(|o| o.roots.iter())
            .filter(|r| r.installed)
    }
}

/// A skill as a route named it.
#[derive(Debug, Clone)]
pub struct Found {
    pub skill: Arc<Skill>,
    /// It is the version that serves its name.
    pub serving: bool,
    /// Its status, for an installed version.
    pub status: Option<VersionStatus>,
}

impl Found {
    /// Whether its tools may be called: installed versions only once ready.
    pub fn runnable(&self) -> bool {
        self.status.is_none_or(|s| s == VersionStatus::Ready)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotFound {
    #[error("no skill named '{0}'")]
    Skill(String),
    #[error("skill '{name}' has no version '{version}'")]
    Version { name: String, version: String },
    #[error("version {version} of skill '{name}' does not load: {why}")]
    Broken {
        name: String,
        version: String,
        why: String,
    },
}

/// `name@version` split; a bare name has no version.
pub fn split_spec(spec: &str) -> (&str, Option<&str>) {
    match spec.split_once('@') {
        Some((name, version)) => (name, Some(version)),
        None => (spec, None),
    }
}

impl Catalog {
    /// The skill `spec` names: `name` (the serving skill), `name@version`
    /// or `name@latest` (the highest ready installed version, else the
    /// serving skill). Naming another installed version reads its state and
    /// may load it, starting its backend: call from a blocking thread when
    /// `spec` holds an `@`.
    pub fn find(&self, spec: &str) -> Result<Found, NotFound> {
        let (name, version) = split_spec(spec);
        let current = self.skill(name).cloned();
        let Some(version) = version else {
            return current
                .map(|skill| Found {
                    skill,
                    serving: true,
                    status: None,
                })
                .ok_or_else(|| NotFound::Skill(name.to_owned()));
        };
        let missing = || NotFound::Version {
            name: name.to_owned(),
            version: version.to_owned(),
        };
        let installed = self.installed_state(name);
        let Some((root, state)) = installed.filter(|(root, _)| {
            // A skill of another root holds the name: its versions are not
            // these.
            current.as_ref().is_none_or(|c| c.dir.starts_with(&root.path))
        }) else {
            let skill = current.ok_or_else(|| NotFound::Skill(name.to_owned()))?;
            let matches = version == "latest" || skill.version.as_deref() == Some(version);
            return matches
                .then_some(Found {
                    skill,
                    serving: true,
                    status: None,
                })
                .ok_or_else(missing);
        };
        let resolved = state.resolve(version).ok_or_else(missing)?;
        let entry = state.version(resolved).ok_or_else(missing)?;
        let dir = installed::skill_dir(&root.path, name, resolved);
        let status = Some(entry.status);
        if let Some(skill) = current.filter(|c| c.dir == dir) {
            return Ok(Found {
                skill,
                serving: true,
                status,
            });
        }
        if entry.status == VersionStatus::Failed {
            return Err(missing());
        }
        // Code no one has reviewed does not run, not even its backend.
        let defer = entry.status != VersionStatus::Ready;
        let skill = self.load_version(&root, dir, (entry.trust, defer), name, resolved)?;
        Ok(Found {
            skill,
            serving: false,
            status,
        })
    }

    /// The installed root holding `name`, and its state.
    fn installed_state(&self, name: &str) -> Option<(Root, SkillState)> {
        self.versions.installed_roots().find_map(|root| {
            installed::read_state(&root.path, name)
                .ok()
                .flatten()
                .map(|s| (root.clone(), s))
        })
    }

    fn load_version(
        &self,
        root: &Root,
        dir: PathBuf,
        (trust, defer): (crate::skill::Trust, bool),
        name: &str,
        version: &str,
    ) -> Result<Arc<Skill>, NotFound> {
        let mut loaded = self
            .versions
            .loaded
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(skill) = loaded.get(&dir) {
            return Ok(skill.clone());
        }
        let broken = |why: String| NotFound::Broken {
            name: name.to_owned(),
            version: version.to_owned(),
            why,
        };
        let opts = self
            .versions
            .opts
            .as_ref()
            .ok_or_else(|| broken("the catalog is still loading".to_owned()))?;
        let path = PathCache::new(std::env::var_os("PATH"));
        let lo = LoadOptions {
            source: &root.name,
            trust,
            max_timeout_secs: opts.max_timeout_secs,
            runtimes: &opts.runtimes,
            installed: true,
            path: &path,
            launcher: if defer {
                Some(&Unreviewed)
            } else {
                opts.launcher.as_deref()
            },
            rules: &opts.rules,
        };
        let result = load_skill(&dir, &lo);
        let skill = result.skill.ok_or_else(|| {
            let first = result.diagnostics.iter().find(|d| d.is_error());
            broken(first.map_or_else(|| "it has errors".to_owned(), |d| d.message.clone()))
        })?;
        loaded.insert(dir, skill.clone());
        Ok(skill)
    }
}
