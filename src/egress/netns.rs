//! A networked run's own network namespace, whose one way out is the
//! proxy's listening socket, bound inside it on its loopback.
//!
//! A thread of the server enters a new namespace, brings its `lo` up,
//! binds `127.0.0.1:0` there and hands back the listener and the
//! namespace; the proxy then serves that listener from the server's own
//! namespace (a socket stays in the namespace it was made in). No veth
//! pair, no route, no resolver: a program that ignores the proxy
//! variables reaches nothing, not the host, not DNS, not other runs.
//!
//! A server that is not root makes it inside the runs' user namespace,
//! which a thread of a threaded process cannot join: a cloned child does
//! it there (`sandbox::run_network_in`), and runs join that user namespace
//! before this one.

use std::io;
use std::net::TcpListener;
use std::os::fd::OwnedFd;

/// A run's namespace and the proxy's listener inside it.
#[derive(Debug)]
pub struct RunNet {
    /// For `setns(CLONE_NEWNET)` in the run's child.
    pub namespace: OwnedFd,
    /// `127.0.0.1:port` inside the namespace.
    pub listener: TcpListener,
}

impl RunNet {
    /// The proxy's address, as the run sees it.
    pub fn proxy_url(&self) -> io::Result<String> {
        Ok(format!("http://{}", self.listener.local_addr()?))
    }
}

/// Makes a namespace for one run (see the module's comment): inside the
/// runs' user namespace `user` when the server has one (it is not root).
pub fn make(user: Option<&OwnedFd>) -> io::Result<RunNet> {
    if let Some(user) = user {
        let made = crate::sandbox::run_network_in(user)?;
        return Ok(RunNet {
            namespace: made.namespace,
            listener: TcpListener::from(made.listener),
        });
    }
    std::thread::Builder::new()
        .name("skilld-egress-ns".to_owned())
        .spawn(|| -> io::Result<RunNet> {
            // Changes only this thread, which ends right after.
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).map_err(io::Error::from)?;
            crate::sandbox::set_loopback_up()?;
            let listener = TcpListener::bind("127.0.0.1:0")?;
            listener.set_nonblocking(true)?;
            let namespace = std::fs::File::open("/proc/thread-self/ns/net")?.into();
            Ok(RunNet { namespace, listener })
        })?
        .join()
        .map_err(|_| io::Error::other("the namespace thread panicked"))?
}
