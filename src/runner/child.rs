//! A long-lived child that talks to the server over its stdin and stdout
//! (a process backend's skill): started like a run, in its own process
//! group and sandbox, but kept until it is stopped, not awaited to its end.

use super::process::{self, Exit};
use super::spawn::{self, Stdin};
use super::{Leader, PidFd, SpawnError, Spec, open_pipe};
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use std::time::Duration;
use tokio::net::unix::pipe;

/// A running child and its three pipes, each taken once by whoever reads
/// or writes it. Dropped, it kills the whole group (and cgroup) and reaps.
pub struct Child {
    leader: Leader,
    pub stdin: Option<pipe::Sender>,
    pub stdout: Option<pipe::Receiver>,
    pub stderr: Option<pipe::Receiver>,
    /// What the child's life depends on, dropped after it (a networked
    /// backend's egress proxy).
    held: Option<Box<dyn std::any::Any + Send + Sync>>,
}

impl Child {
    /// Starts `spec`'s program with piped stdin, stdout and stderr. Its
    /// `timeout` is not used: the owner decides when it ends. Needs a Tokio
    /// runtime (the pipes and the pidfd join its reactor).
    pub fn start(mut spec: Spec) -> Result<Self, SpawnError> {
        let spawned = spawn::spawn(&spec, Stdin::Pipe)?;
        let mut leader = Leader {
            pidfd: Some(PidFd::Plain(spawned.pidfd)),
            pgid: Pid::from_raw(spawned.pid),
            cgroup: spec.confinement.take().and_then(|c| c.cgroup),
        };
        let could_not =
            |e: std::io::Error| SpawnError::Setup(format!("could not watch {}: {e}", spec.program));
        leader.watch().map_err(could_not)?;
        let stdin = spawned
            .stdin
            .map(pipe::Sender::from_owned_fd)
            .transpose()
            .map_err(could_not)?;
        Ok(Self {
            leader,
            stdin,
            stdout: Some(open_pipe(spawned.stdout).map_err(could_not)?),
            stderr: Some(open_pipe(spawned.stderr).map_err(could_not)?),
            held: None,
        })
    }

    /// Keeps `value` for as long as the child is kept.
    #[must_use]
    pub fn holding(mut self, value: impl std::any::Any + Send + Sync) -> Self {
        self.held = Some(Box::new(value));
        self
    }

    /// The process group id (= the leader's pid).
    pub fn pgid(&self) -> i32 {
        self.leader.pgid.as_raw()
    }

    /// Waits for the leader to exit and says how, in words ("exited with
    /// code 1", "was killed by SIGKILL"). The leader stays unreaped, so the
    /// group id cannot be reused while the rest of it is killed.
    pub async fn exited(&self) -> String {
        match self.leader.wait_exit().await {
            Ok(Exit::Code(code)) => format!("exited with code {code}"),
            Ok(Exit::Signal(n)) => format!("was killed by {}", process::signal_name(n)),
            Err(e) => format!("ended, its status lost ({e})"),
        }
    }

    /// SIGKILL to the whole group and its cgroup.
    pub fn kill(&self) {
        self.leader.kill_all();
    }

    /// Ends the child: SIGTERM to its group, SIGKILL after `grace` if the
    /// leader still runs, then whatever is left of the group is killed
    /// and the leader reaped.
    pub async fn stop(mut self, grace: Duration) {
        if tokio::time::timeout(Duration::ZERO, self.leader.wait_exit())
            .await
            .is_err()
        {
            process::signal_group(self.leader.pgid, Signal::SIGTERM);
            if tokio::time::timeout(grace, self.leader.wait_exit())
                .await
                .is_err()
            {
                self.leader.kill_all();
                let _ = self.leader.wait_exit().await;
            }
        }
        self.leader.kill_all();
        self.leader.reap_exited();
    }
}
