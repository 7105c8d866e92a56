//! What a server does to its own process: hardening it against the
//! tools it runs, its open files limit, and the signals that stop it.

use crate::config::Config;

/// Variables that hold secrets, read once at start-up (`ServeArgs`).
const SECRET_VARIABLES: [&str; 2] = ["SKILLD_TOKENS", "SKILLD_DATABASE_URL"];

/// Makes this process non-dumpable: its `/proc/<pid>` entries (memory,
/// environment, file descriptors) then belong to root, so a tool running
/// as the same user cannot read them. And wipes the secrets, already
/// parsed, from its environment and its command line, so that not even
/// root reads them there.
pub fn harden(config: &Config) {
    if let Err(e) = nix::sys::prctl::set_dumpable(false) {
        tracing::warn!(error = %e, "cannot make the process non-dumpable; tools of the same user can read its memory");
    }
    let mut secrets: Vec<&str> = SECRET_VARIABLES.to_vec();
    secrets.extend(config.secret_variables.iter().map(String::as_str));
    if let Err(why) = crate::environ::wipe(&secrets) {
        tracing::warn!(%why, "cannot wipe the secrets from this process's environment");
    }
    let passwords = crate::config::url_passwords(&config.database_url);
    if let Err(why) = crate::environ::mask_arguments(&passwords) {
        tracing::warn!(%why, "cannot mask the database password in this process's command line");
    }
}

/// `limits`, with as many descriptors as this process may have, and at
/// most half of them for connections: the rest are for runs' pipes, the
/// run log and the skills.
pub fn connection_limits(limits: &crate::http::ServerLimits) -> crate::http::ServerLimits {
    let mut limits = limits.clone();
    let Some(files) = crate::http::raise_open_files_limit() else {
        return limits;
    };
    let most = usize::try_from(files / 2).unwrap_or(usize::MAX).max(1);
    if limits.max_connections > most {
        tracing::warn!(
            max_connections = limits.max_connections,
            open_files = files,
            "max_connections is more than half the open files limit; using {most}"
        );
        limits.max_connections = most;
    }
    limits
}

/// Completes on Ctrl-C or SIGTERM. The handlers are installed here, before
/// the server says it is listening, not when the future is first polled:
/// a client that reads the announcement and signals at once must find them
/// (the accept loop may serve a first connection before it polls this).
pub fn shutdown_signal() -> std::io::Result<impl Future<Output = ()> + Send + 'static> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => {},
            _ = terminate.recv() => {},
        }
        tracing::info!("shutting down");
    })
}
