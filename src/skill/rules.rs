//! What the server asks of skills and gives them beyond their own files:
//! seed 003's image allowlist and its defaults for entrypoint skills, and
//! where the dependencies of skills outside the installed root are
//! prepared. One value per catalog, read by every load.

use crate::deps::DEFAULT_NPM_REGISTRY;
use crate::setting::{SettingError, at_least_one};
use std::path::PathBuf;

/// Seed 003's default image of each `lang`, which is also its default
/// allowlist: an entrypoint skill runs in one of these unless the server
/// allows more.
pub const DEFAULT_IMAGES: [(&str, &str); 3] = [
    ("python", "python:3.12-slim"),
    ("node", "node:20-slim"),
    ("bash", "bash:5"),
];

/// The rules one catalog loads its skills by.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillRules {
    /// The images an entrypoint skill may name (seed 003), as written; an
    /// entry ending in `*` allows every image that starts with the rest
    /// (`ghcr.io/acme/*`, or `*` for any).
    pub image_allowlist: Vec<String>,
    /// Seed 003's defaults for entrypoint skills.
    pub entrypoint: EntrypointDefaults,
    /// Where the dependencies of skills outside the installed root are
    /// prepared (`<data dir>/deps`); `None` where nothing prepares them
    /// (an upload being checked, whose dependencies install with it).
    pub deps_dir: Option<PathBuf>,
    /// Where every package of a `package-lock.json` must come from.
    pub npm_registry: String,
    /// Skills whose `network: true` reaches the host's network unproxied
    /// (`[egress] unrestricted`), as bundled skills' does; every other
    /// `network: true` asks a person for each destination.
    pub unrestricted_network: Vec<String>,
}

impl Default for SkillRules {
    fn default() -> Self {
        Self {
            image_allowlist: DEFAULT_IMAGES.iter().map(|(_, i)| (*i).to_owned()).collect(),
            entrypoint: EntrypointDefaults::default(),
            deps_dir: None,
            npm_registry: DEFAULT_NPM_REGISTRY.to_owned(),
            unrestricted_network: Vec::new(),
        }
    }
}

impl SkillRules {
    /// Whether skill `name` at `trust` keeps `network: true` as the host's
    /// network: a bundled skill, or one the operator named.
    pub fn network_unrestricted(&self, name: &str, trust: crate::trust::Trust) -> bool {
        trust == crate::trust::Trust::Bundled || self.unrestricted_network.iter().any(|n| n == name)
    }

    /// Allows the images of the config's `image_allowlist` instead of the
    /// default ones; every entry must be an image name (or a prefix of
    /// some, ending in `*`).
    pub fn allow_images(&mut self, list: &[String]) -> Result<(), SettingError> {
        if let Some(bad) = list
            .iter()
            .find(|i| i.trim().is_empty() || i.contains(char::is_whitespace))
        {
            return Err(SettingError::new(
                "image_allowlist",
                format!("image_allowlist entry '{bad}' is not an image name"),
            ));
        }
        self.image_allowlist = list.to_vec();
        Ok(())
    }

    /// Whether `image` is on the allowlist.
    pub fn allows_image(&self, image: &str) -> bool {
        self.image_allowlist
            .iter()
            .any(|allowed| match allowed.strip_suffix('*') {
                Some(prefix) => image.starts_with(prefix),
                None => image == allowed,
            })
    }
}

/// What an entrypoint skill gets when neither it nor the server's config
/// says otherwise (seed 003: "Server default").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EntrypointDefaults {
    pub timeout_secs: u64,
    /// Applied as the run's cgroup `memory.max`, never as an address-space
    /// limit: Node reserves more address space than 256 MiB and would not
    /// start under one.
    pub memory_bytes: Option<u64>,
    pub cpu: Option<f64>,
}

impl Default for EntrypointDefaults {
    fn default() -> Self {
        Self {
            timeout_secs: 120,
            memory_bytes: Some(256 * 1024 * 1024),
            cpu: Some(0.5),
        }
    }
}

impl EntrypointDefaults {
    /// These defaults, with the config's `entrypoint_timeout_secs`,
    /// `entrypoint_memory_bytes` and `entrypoint_cpu` over them.
    pub fn configured(
        self,
        timeout_secs: Option<u64>,
        memory_bytes: Option<u64>,
        cpu: Option<f64>,
    ) -> Result<Self, SettingError> {
        let timeout_secs = match timeout_secs {
            Some(secs) => at_least_one("entrypoint_timeout_secs", secs)?,
            None => self.timeout_secs,
        };
        let memory_bytes = match memory_bytes {
            Some(bytes) => Some(at_least_one("entrypoint_memory_bytes", bytes)?),
            None => self.memory_bytes,
        };
        if let Some(cpu) = cpu.filter(|c| !(c.is_finite() && *c > 0.0)) {
            return Err(SettingError::new(
                "entrypoint_cpu",
                format!("entrypoint_cpu must be a positive number of cores, not {cpu}"),
            ));
        }
        Ok(Self {
            timeout_secs,
            memory_bytes,
            cpu: cpu.or(self.cpu),
        })
    }
}

/// The image an entrypoint of `lang` runs in when it names none (seed
/// 003's table; Python when `lang` says nothing).
pub fn default_image(lang: &str) -> &'static str {
    DEFAULT_IMAGES
        .iter()
        .find(|(l, _)| *l == lang)
        .map_or(DEFAULT_IMAGES[0].1, |(_, i)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_allowlist_takes_names_as_written_and_prefixes() {
        let mut rules = SkillRules::default();
        assert!(rules.allows_image("python:3.12-slim"));
        assert!(!rules.allows_image("evil/miner:latest"));
        assert!(!rules.allows_image("python:3.12-slim-evil"));
        rules.image_allowlist = vec!["ghcr.io/acme/*".to_owned()];
        assert!(rules.allows_image("ghcr.io/acme/tool:1"));
        assert!(!rules.allows_image("ghcr.io/other/tool:1"));
        rules.image_allowlist = vec!["*".to_owned()];
        assert!(rules.allows_image("anything"));
    }
}
