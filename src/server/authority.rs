//! Who may do what on a server, and where people reach it: its tokens,
//! its OAuth issuers or the local secret, said once it listens.

use crate::config::Config;
use anyhow::Context;
use std::io::Write;
use std::sync::Arc;

/// Where people reach a server listening on `addr`: `--public-url`, else
/// `http://` and the address (loopback for one listening everywhere).
pub fn people_url(config: &Config, addr: std::net::SocketAddr) -> String {
    config
        .public_url
        .clone()
        .unwrap_or_else(|| format!("http://{}", link_host(addr)))
}

/// Who may do what on this server: its tokens, and the access tokens of
/// its OAuth issuers for the resource at `public_url`; without either, the
/// local secret kept in the data directory (made on first start), returned
/// too.
pub fn authority(
    config: &Config,
    public_url: &str,
) -> anyhow::Result<(Arc<crate::auth::Auth>, Option<String>)> {
    if let Some(settings) = &config.oauth {
        let oauth = crate::oauth::OAuth::new(settings, public_url)?;
        tracing::info!(resource = %oauth.resource(), metadata = %oauth.metadata_url(true),
            "OAuth access tokens are taken");
        let auth = (*config.auth)
            .clone()
            .with_oauth(Arc::new(oauth))
            .map_err(anyhow::Error::msg)?;
        return Ok((Arc::new(auth), None));
    }
    if !config.auth.is_open() {
        return Ok((config.auth.clone(), None));
    }
    let secret = crate::local_secret::load_or_create(&config.data_dir)
        .with_context(|| format!("cannot keep the local secret in {}", config.data_dir.display()))?;
    let auth = crate::auth::Auth::open_with_secret(&secret).map_err(anyhow::Error::msg)?;
    Ok((Arc::new(auth), Some(secret)))
}

/// Says who may do what: without tokens, the inbox's link that carries the
/// local secret, on stdout after the address and in the log (the one place
/// the log holds it).
pub fn announce_auth(config: &Config, addr: std::net::SocketAddr, secret: Option<&str>) {
    if !config.auth.is_open() || config.oauth.is_some() {
        let tokens: Vec<String> = config
            .auth
            .tokens()
            .iter()
            .map(|t| format!("{}:{}", t.name(), t.role()))
            .collect();
        if !tokens.is_empty() {
            tracing::info!(tokens = %tokens.join(","), "bearer tokens required");
        }
        return;
    }
    if addr.ip().is_loopback() {
        tracing::info!("no tokens are configured: every local request may list and invoke");
    } else {
        tracing::warn!(%addr, "no tokens are configured (--insecure): anyone who can reach this address can run tools");
    }
    let Some(secret) = secret else { return };
    // In the fragment, which the browser never sends: the page reads it.
    let link = format!("http://{}/ui#secret={secret}", link_host(addr));
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "approve at {link}").and_then(|()| out.flush());
    tracing::info!(%link, "deciding approvals needs the local secret: open the inbox with this link");
}

/// The address a browser on this machine opens for `addr`: loopback for a
/// server listening on every address.
fn link_host(addr: std::net::SocketAddr) -> std::net::SocketAddr {
    let ip: std::net::IpAddr = match addr.ip() {
        std::net::IpAddr::V4(v4) if v4.is_unspecified() => std::net::Ipv4Addr::LOCALHOST.into(),
        std::net::IpAddr::V6(v6) if v6.is_unspecified() => std::net::Ipv6Addr::LOCALHOST.into(),
        ip => ip,
    };
    std::net::SocketAddr::new(ip, addr.port())
}
