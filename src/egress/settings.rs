//! `[egress]` in the configuration: names the proxy resolves itself,
//! ranges it may reach that it otherwise refuses, and each run's bounds;
//! and what they make, the [`Egress`] every networked run's proxy starts
//! from.

use super::ask::Asking;
use super::proxy::Bounds;
use super::ranges::Ranges;
use super::resolve::Resolver;
use crate::setting::SettingError;
use crate::store::EgressDecisions;
use ipnet::IpNet;
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

/// `[egress]` as the file spells it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EgressSettings {
    /// Names the proxy resolves to these addresses without asking DNS,
    /// as `curl --resolve` does: `hosts = { "api.internal" = ["10.0.0.5"] }`.
    pub hosts: BTreeMap<String, Vec<String>>,
    /// Address ranges the proxy may reach although they are loopback,
    /// link-local, private or reserved: `allow_ranges = ["10.1.0.0/16"]`.
    pub allow_ranges: Vec<String>,
    /// Connections one run may hold open at once (default 32).
    pub max_connections: Option<usize>,
    /// Bytes one run may send and receive in all (default 256 MiB).
    pub max_bytes: Option<u64>,
    /// The longest one connection may stay open (default 600 s).
    pub connection_secs: Option<u64>,
    /// Skills whose `network: true` keeps its old meaning, the host's
    /// network with no proxy, as bundled skills' does: an operator's
    /// explicit choice, shown as "unrestricted" wherever a person decides.
    pub unrestricted: Vec<String>,
    /// Where package runners fetch what they run, by ecosystem: what
    /// `skilld import` lists for an `npx` or `uvx` server, rather than
    /// `network: true`.
    pub registries: Registries,
}

/// The registries' hosts, as `network.allow` patterns.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Registries {
    /// `npx`, `pnpx`, `bunx`: default `registry.npmjs.org`.
    pub npm: Vec<String>,
    /// `uvx`, `pipx`: default `pypi.org` and `files.pythonhosted.org`.
    pub pypi: Vec<String>,
}

impl Default for Registries {
    fn default() -> Self {
        Self {
            npm: vec!["registry.npmjs.org".to_owned()],
            pypi: vec!["pypi.org".to_owned(), "files.pythonhosted.org".to_owned()],
        }
    }
}

impl Registries {
    /// The hosts package runner `runner` fetches from; `None` for one
    /// that fetches elsewhere (`docker` pulls through its daemon).
    pub fn of_runner(&self, runner: &str) -> Option<&[String]> {
        match runner {
            "npx" | "pnpx" | "bunx" => Some(&self.npm),
            "uvx" | "pipx" => Some(&self.pypi),
            _ => None,
        }
    }
}

/// How long a held destination waits for a person by default.
pub const DEFAULT_WAIT_SECS: u64 = 120;

impl EgressSettings {
    /// What these settings make, or the first value refused.
    pub fn compile(&self) -> Result<Egress, SettingError> {
        for host in self.registries.npm.iter().chain(&self.registries.pypi) {
            super::allow::Pattern::parse(host).map_err(|e| {
                SettingError::new("egress.registries", format!("egress.registries holds {e}"))
            })?;
        }
        let mut pinned = HashMap::new();
        for (name, addrs) in &self.hosts {
            let ips = addrs
                .iter()
                .map(|a| a.parse::<IpAddr>())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|_| {
                    SettingError::new(
                        "egress.hosts",
                        format!(
                            "egress.hosts.{name} must list IP addresses, as [\"192.0.2.7\"]; got {addrs:?}"
                        ),
                    )
                })?;
            pinned.insert(name.clone(), ips);
        }
        let opened = self
            .allow_ranges
            .iter()
            .map(|r| {
                r.parse::<IpNet>().or_else(|_| r.parse::<IpAddr>().map(IpNet::from)).map_err(|_| {
                    SettingError::new(
                        "egress.allow_ranges",
                        format!("egress.allow_ranges holds {r:?}, which is no address range (as \"10.1.0.0/16\")"),
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let defaults = Bounds::default();
        let bounds = Bounds {
            connections: self.max_connections.unwrap_or(defaults.connections).max(1),
            bytes: self.max_bytes.unwrap_or(defaults.bytes),
            connection_time: self
                .connection_secs
                .map_or(defaults.connection_time, |s| Duration::from_secs(s.max(1))),
            connect_timeout: defaults.connect_timeout,
        };
        Ok(Egress {
            resolver: Resolver::new(pinned, Ranges::new(opened)),
            bounds,
            wait: Duration::from_secs(DEFAULT_WAIT_SECS),
            asking: None,
        })
    }
}

/// What every networked run's proxy starts from on this server.
#[derive(Debug, Clone)]
pub struct Egress {
    pub resolver: Resolver,
    pub bounds: Bounds,
    /// How long a held destination waits for a person
    /// (`egress_wait_secs`); zero holds nothing: what the list lacks is
    /// refused at once.
    pub wait: Duration,
    /// Where destinations beyond a run's list are held, once the server
    /// has a store ([`Egress::asking_in`]); `None` refuses them.
    pub asking: Option<Asking>,
}

impl Default for Egress {
    fn default() -> Self {
        Self {
            resolver: Resolver::default(),
            bounds: Bounds::default(),
            wait: Duration::from_secs(DEFAULT_WAIT_SECS),
            asking: None,
        }
    }
}

impl Egress {
    /// These settings, holding what a list lacks in `store` for a person.
    pub fn asking_in(mut self, store: Arc<dyn EgressDecisions>) -> Self {
        self.asking = (!self.wait.is_zero()).then(|| Asking::new(store, self.wait));
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pinned_name_and_an_opened_range_compile() {
        let s: EgressSettings =
            toml::from_str("hosts = { \"api.test\" = [\"127.0.0.2\"] }\nallow_ranges = [\"127.0.0.2/32\"]")
                .unwrap_or_else(|e| panic!("{e}"));
        let e = s.compile().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(e.bounds.connections, 32);
    }

    #[test]
    fn a_bad_address_or_range_is_named() {
        let bad_host = EgressSettings {
            hosts: BTreeMap::from([("api.test".to_owned(), vec!["nowhere".to_owned()])]),
            ..EgressSettings::default()
        };
        let err = bad_host.compile().err().map(|e| e.why).unwrap_or_default();
        assert!(err.contains("egress.hosts.api.test"), "{err}");
        let bad_range = EgressSettings {
            allow_ranges: vec!["10.0.0.0/99".to_owned()],
            ..EgressSettings::default()
        };
        let err = bad_range.compile().err().map(|e| e.key);
        assert_eq!(err, Some("egress.allow_ranges"));
    }
}
