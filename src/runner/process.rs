//! Finding the program, naming failures and signals, signalling groups.

use super::SpawnError;
use super::env::DEFAULT_PATH;
use crate::program::{Lookup, lookup};
use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::{AccessFlags, Pid, access};
use std::io;
use std::path::{Path, PathBuf};

/// Which step failed in the child, reported back through shared memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub(super) enum Step {
    None = 0,
    Group = 1,
    Network = 2,
    Limits = 3,
    Redirect = 4,
    Directory = 5,
    Exec = 6,
    Cgroup = 7,
    Identity = 8,
    Landlock = 9,
    Seccomp = 10,
    Mounts = 11,
    Tmp = 12,
}

impl Step {
    pub(super) fn from_raw(raw: i32) -> Self {
        match raw {
            1 => Self::Group,
            2 => Self::Network,
            3 => Self::Limits,
            4 => Self::Redirect,
            5 => Self::Directory,
            6 => Self::Exec,
            7 => Self::Cgroup,
            8 => Self::Identity,
            9 => Self::Landlock,
            10 => Self::Seccomp,
            11 => Self::Mounts,
            12 => Self::Tmp,
            _ => Self::None,
        }
    }
}

/// How the leader ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Exit {
    Code(i32),
    Signal(i32),
}

/// The path to execute. A name with a slash is taken as it is (relative to
/// the child's working directory); a bare name is looked up on the PATH the
/// child will have, as the child's own shell would, so the skill's
/// environment decides which program runs, not the server's; but only in
/// its absolute directories.
pub(super) fn resolve(program: &str, cwd: &Path, env: &[(String, String)]) -> Result<PathBuf, SpawnError> {
    if program.is_empty() {
        return Err(SpawnError::NotFound(
            "command not found: the program name is empty".to_owned(),
        ));
    }
    if program.contains('/') {
        return Ok(cwd.join(program));
    }
    let path_var = env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map_or(DEFAULT_PATH, |(_, v)| v.as_str());
    match lookup(path_var.as_ref(), program, |p| {
        access(p, AccessFlags::X_OK).is_ok()
    }) {
        Lookup::Found(found) => Ok(found),
        Lookup::NotExecutable => Err(SpawnError::NotFound(format!("permission denied: {program}"))),
        Lookup::NotFound => Err(SpawnError::NotFound(format!("command not found: {program}"))),
    }
}

/// One sentence for a child that failed at `step` with `errno`.
pub(super) fn describe_errno(errno: i32, step: Step, program: &str, path: &Path) -> String {
    let err = io::Error::from_raw_os_error(errno);
    match step {
        Step::Exec => match Errno::from_raw(errno) {
            Errno::ENOENT if path.exists() => format!(
                "interpreter not found: {program} exists but its #! line (or ELF interpreter) names a missing program"
            ),
            Errno::ENOENT | Errno::ENOTDIR => format!("command not found: {program}"),
            Errno::EACCES => format!("permission denied: {program}"),
            Errno::ENOEXEC => {
                format!("exec format error: {program} is neither a binary nor a script with a #! line")
            }
            Errno::E2BIG => format!("argument list too long for {program}"),
            Errno::ETXTBSY => format!("text file busy: {program} is open for writing"),
            _ => format!("could not start {program}: {err}"),
        },
        Step::Limits => format!("could not apply resource limits to {program}: {err}"),
        Step::Network => format!("could not isolate the network of {program}: {err}"),
        Step::Directory => format!("could not enter the working directory of {program}: {err}"),
        Step::Group => format!("could not give {program} its own session: {err}"),
        Step::Cgroup => format!("could not put {program} into its cgroup: {err}"),
        Step::Identity => format!("could not drop the privileges of {program}: {err}"),
        Step::Landlock => format!("could not confine the files of {program}: {err}"),
        Step::Seccomp => format!("could not filter the system calls of {program}: {err}"),
        Step::Mounts => format!("could not enter the runs' mount namespace for {program}: {err}"),
        Step::Tmp => format!("could not make the own /tmp of {program}: {err}"),
        Step::Redirect | Step::None => format!("could not start {program}: {err}"),
    }
}

/// Sends `signal` to the whole group. A group that is already gone is not
/// an error.
pub(super) fn signal_group(pgid: Pid, signal: Signal) {
    match killpg(pgid, signal) {
        Ok(()) | Err(Errno::ESRCH) => {}
        Err(err) => tracing::warn!(pgid = pgid.as_raw(), %signal, %err, "could not signal the process group"),
    }
}

/// "SIGKILL", "SIGRTMIN+3", …
pub(super) fn signal_name(number: i32) -> String {
    match Signal::try_from(number) {
        Ok(signal) => signal.as_str().to_owned(),
        Err(_) if (libc::SIGRTMIN()..=libc::SIGRTMAX()).contains(&number) => {
            format!("SIGRTMIN+{}", number - libc::SIGRTMIN())
        }
        Err(_) => format!("SIG{number}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_signals() {
        assert_eq!(signal_name(9), "SIGKILL");
        assert_eq!(signal_name(15), "SIGTERM");
        assert_eq!(signal_name(libc::SIGRTMIN() + 2), "SIGRTMIN+2");
    }

    #[test]
    fn resolves_on_the_childs_path() {
        let env = vec![("PATH".to_owned(), "/nonexistent:/bin:/usr/bin".to_owned())];
        let found = resolve("sh", Path::new("/"), &env).unwrap_or_default();
        assert!(found.ends_with("sh") && found.is_absolute(), "{found:?}");

        let env = vec![("PATH".to_owned(), "/nonexistent".to_owned())];
        assert_eq!(
            resolve("sh", Path::new("/"), &env),
            Err(SpawnError::NotFound("command not found: sh".to_owned()))
        );
        assert_eq!(
            resolve("./x", Path::new("/tmp"), &env),
            Ok(PathBuf::from("/tmp/./x"))
        );
    }
}
