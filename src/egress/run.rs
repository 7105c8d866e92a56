//! One networked run's egress: its namespace, its proxy serving the
//! listener bound inside it, the variables that point programs at it, and
//! what the run did, until the run ends.

use super::allow::AllowList;
use super::ask::{Answer, Asker};
use super::gate::RunGate;
use super::ledger::{Destination, Entry};
use super::netns;
use super::proxy::RunProxy;
use super::settings::Egress;
use crate::runner::Spec;
use std::collections::BTreeMap;
use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use tokio_util::sync::{CancellationToken, DropGuard};

/// The variables that point HTTP clients at the proxy: both spellings,
/// since curl reads only the lowercase `http_proxy` and some clients only
/// the uppercase ones.
const PROXY_VARIABLES: [&str; 6] = [
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
];

/// A run's egress while it lasts; its proxy stops when this is dropped.
pub struct RunEgress {
    namespace: Arc<OwnedFd>,
    proxy_url: String,
    proxy: Arc<RunProxy>,
    gate: Arc<RunGate>,
    _stop: DropGuard,
}

impl Egress {
    /// Starts the egress of one run of `who`'s skill, which may reach
    /// `list`, and beyond it what a person allows; `user`: the runs' user
    /// namespace, when the server is not root. Needs a tokio runtime (the
    /// proxy is served on it).
    pub fn start(&self, who: Asker, list: &AllowList, user: Option<&OwnedFd>) -> io::Result<RunEgress> {
        let made = netns::make(user).map_err(|e| {
            io::Error::other(format!(
                "cannot give the run a network of its own, through which its network.allow list is kept: \
                 {e} (a server makes network namespaces as root, or, not root, in a user namespace of \
                 its own where the host allows them)"
            ))
        })?;
        let proxy_url = made.proxy_url()?;
        let listener = tokio::net::TcpListener::from_std(made.listener)?;
        let gate = Arc::new(RunGate::new(list.clone(), who, self.asking.clone()));
        let proxy = RunProxy::new(gate.clone(), self.resolver.clone(), self.bounds);
        let stop = CancellationToken::new();
        tokio::spawn(proxy.clone().serve(listener, stop.clone()));
        Ok(RunEgress {
            namespace: Arc::new(made.namespace),
            proxy_url,
            proxy,
            gate,
            _stop: stop.drop_guard(),
        })
    }
}

impl Egress {
    /// The egress of a child about to be spawned from `spec` for `who`,
    /// when its skill reaches the network through the proxy (a list, or
    /// `network: true` asking for each destination): started in the runs'
    /// user namespace when the spec has one, with `spec` pointed at it
    /// (its namespace and proxy variables). `None`, and `spec` untouched,
    /// without one. The child must hold what this answers for its life.
    /// `who` is made only for a run that gets a proxy: every other run
    /// (`network: false`, the hot path) pays nothing here.
    pub fn route(
        &self,
        who: impl FnOnce() -> Asker,
        list: Option<&AllowList>,
        spec: &mut Spec,
    ) -> io::Result<Option<RunEgress>> {
        let Some(list) = list else {
            return Ok(None);
        };
        let user = spec.confinement.as_ref().and_then(|c| c.user_ns.clone());
        let egress = self.start(who(), list, user.as_deref())?;
        egress.point(&mut spec.env);
        spec.egress_ns = Some(egress.namespace());
        Ok(Some(egress))
    }
}

impl RunEgress {
    /// The run's network namespace, for its child to enter.
    fn namespace(&self) -> Arc<OwnedFd> {
        self.namespace.clone()
    }

    /// The proxy variables for the run's environment.
    fn env(&self) -> impl Iterator<Item = (String, String)> + '_ {
        PROXY_VARIABLES
            .iter()
            .map(|name| ((*name).to_owned(), self.proxy_url.clone()))
    }

    /// Points `env` at the proxy: every proxy variable it had, and every
    /// exception (`NO_PROXY`) that could route around it, replaced.
    fn point(&self, env: &mut Vec<(String, String)>) {
        env.retain(|(name, _)| {
            !name.eq_ignore_ascii_case("no_proxy") && !name.to_ascii_lowercase().ends_with("_proxy")
        });
        env.extend(self.env());
    }

    /// What the run did through its proxy so far, with how each
    /// destination beyond its list was decided.
    pub fn entries(&self) -> BTreeMap<Destination, (Entry, Option<Answer>)> {
        let mut answers = self.gate.answers();
        self.proxy
            .ledger
            .entries()
            .into_iter()
            .map(|(at, entry)| {
                let answer = answers.remove(&at);
                (at, (entry, answer))
            })
            .collect()
    }
}
