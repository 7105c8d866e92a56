//! Names to addresses, by the proxy itself: a program inside a run has no
//! resolver of its own (no route to any), so what it could learn or leak
//! through DNS goes through the name it hands the proxy, which is checked
//! first. An operator may pin names (`[egress] hosts`, as `curl --resolve`
//! does), which the tests use to reach their loopback upstreams.

use super::ranges::{Ranges, Reserved};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// The longest a lookup may take.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a name gave no address the proxy may use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    #[error("{name} does not resolve")]
    Unknown { name: String },
    #[error("resolving {name} took longer than {secs} s", secs = LOOKUP_TIMEOUT.as_secs())]
    TimedOut { name: String },
    #[error("{name} resolves to {addr}, a {} address the proxy does not reach", why.as_str())]
    Reserved {
        name: String,
        addr: IpAddr,
        why: Reserved,
    },
}

/// Looks names up and keeps only addresses the proxy may connect to.
#[derive(Debug, Clone, Default)]
pub struct Resolver {
    pinned: HashMap<String, Vec<IpAddr>>,
    ranges: Ranges,
}

impl Resolver {
    pub fn new(pinned: HashMap<String, Vec<IpAddr>>, ranges: Ranges) -> Self {
        let pinned = pinned
            .into_iter()
            .map(|(name, addrs)| (name.trim_end_matches('.').to_ascii_lowercase(), addrs))
            .collect();
        Self { pinned, ranges }
    }

    /// The addresses of `name` to try, in order. Every address it resolves
    /// to must be allowed: a name with one refused address among public
    /// ones is refused whole, so no retry lands on the refused one.
    pub async fn resolve(&self, name: &str, port: u16) -> Result<Vec<SocketAddr>, ResolveError> {
        let addrs = match self.pinned.get(name) {
            Some(addrs) => addrs.clone(),
            None => self.lookup(name, port).await?,
        };
        if addrs.is_empty() {
            return Err(ResolveError::Unknown {
                name: name.to_owned(),
            });
        }
        for &addr in &addrs {
            if let Some(why) = self.ranges.refuses(addr) {
                return Err(ResolveError::Reserved {
                    name: name.to_owned(),
                    addr,
                    why,
                });
            }
        }
        Ok(addrs.into_iter().map(|ip| SocketAddr::new(ip, port)).collect())
    }

    /// Why `host`, an address written out (or `localhost`), may not be
    /// reached; `None` for another name, or an address the proxy may
    /// reach. Checked before a person
    /// is asked: no one is asked to let a run reach the host itself.
    pub fn refused_literal(&self, host: &str) -> Option<ResolveError> {
        // RFC 6761 §6.3: `localhost` and the names under it are the host.
        let addr = if (host == "localhost" || host.ends_with(".localhost")) && !self.pinned.contains_key(host)
        {
            IpAddr::from([127, 0, 0, 1])
        } else {
            host.parse::<IpAddr>().ok()?
        };
        self.ranges.refuses(addr).map(|why| ResolveError::Reserved {
            name: host.to_owned(),
            addr,
            why,
        })
    }

    async fn lookup(&self, name: &str, port: u16) -> Result<Vec<IpAddr>, ResolveError> {
        let found = tokio::time::timeout(LOOKUP_TIMEOUT, tokio::net::lookup_host((name, port)))
            .await
            .map_err(|_| ResolveError::TimedOut {
                name: name.to_owned(),
            })?
            .map_err(|_| ResolveError::Unknown {
                name: name.to_owned(),
            })?;
        Ok(found.map(|a| a.ip()).collect())
    }
}
