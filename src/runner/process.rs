//! Spawning, waiting and signalling, one system call's worth each.

use super::Spec;
use super::env::DEFAULT_PATH;
use super::limits::ChildSetup;
use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::{AccessFlags, Pid, access};
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// How the leader ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Exit {
    Code(i32),
    Signal(i32),
}

/// Starts the leader of a new process group, or says in one sentence why
/// it could not be started.
pub(super) fn spawn(spec: &Spec) -> Result<Child, String> {
    if !spec.cwd.is_dir() {
        return Err(format!("working directory not found: {}", spec.cwd.display()));
    }
    let path = resolve(&spec.program, &spec.cwd, &spec.env)?;

    let mut command = Command::new(&path);
    command
        .arg0(&spec.program)
        .args(&spec.args)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&spec.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);

    let setup = ChildSetup::plan(&spec.limits, spec.isolate_network);
    if let Some(setup) = setup {
        // SAFETY: `apply` runs between fork and exec and only makes
        // async-signal-safe system calls (setrlimit, unshare) on data that
        // was computed before the fork; it allocates nothing and takes no
        // locks.
        unsafe {
            command.pre_exec(move || setup.apply());
        }
    }

    command
        .spawn()
        .map_err(|err| describe(&err, &spec.program, &path, setup.is_some()))
}

/// The path to execute. A name with a slash is taken as it is (relative to
/// the child's working directory); a bare name is looked up on the PATH the
/// child will have, as the child's own shell would, so the skill's
/// environment decides which program runs, not the server's.
fn resolve(program: &str, cwd: &Path, env: &[(String, String)]) -> Result<PathBuf, String> {
    if program.is_empty() {
        return Err("command not found: the program name is empty".to_owned());
    }
    if program.contains('/') {
        return Ok(cwd.join(program));
    }
    let path_var = env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map_or(DEFAULT_PATH, |(_, v)| v.as_str());
    let mut not_executable = false;
    for dir in path_var.split(':') {
        // An empty entry means the working directory (POSIX).
        let candidate = cwd.join(dir).join(program);
        if !candidate.is_file() {
            continue;
        }
        if access(&candidate, AccessFlags::X_OK).is_ok() {
            return Ok(candidate);
        }
        not_executable = true;
    }
    Err(if not_executable {
        format!("permission denied: {program}")
    } else {
        format!("command not found: {program}")
    })
}

/// One sentence for a failed spawn.
fn describe(err: &io::Error, program: &str, path: &Path, hooked: bool) -> String {
    match err.raw_os_error().map(Errno::from_raw) {
        Some(Errno::ENOENT) if path.exists() => {
            format!(
                "interpreter not found: {program} exists but its #! line (or ELF interpreter) names a missing program"
            )
        }
        Some(Errno::ENOENT | Errno::ENOTDIR) => format!("command not found: {program}"),
        Some(Errno::EACCES) => format!("permission denied: {program}"),
        Some(Errno::ENOEXEC) => {
            format!("exec format error: {program} is neither a binary nor a script with a #! line")
        }
        Some(Errno::E2BIG) => format!("argument list too long for {program}"),
        Some(Errno::ETXTBSY) => format!("text file busy: {program} is open for writing"),
        Some(Errno::EPERM) if hooked => {
            format!("could not apply resource limits or network isolation to {program}: {err}")
        }
        _ if err.kind() == io::ErrorKind::InvalidInput => {
            format!("could not start {program}: an argument or variable contains a NUL byte")
        }
        _ => format!("could not start {program}: {err}"),
    }
}

/// Blocks until the process `pid` (a child of ours) has ended, WITHOUT
/// reaping it: while the zombie exists its pid — which is also the group
/// id — cannot be reused, so killing the group afterwards cannot hit a
/// stranger.
pub(super) fn wait_exit_keeping_zombie(pid: i32) -> io::Result<Exit> {
    let id = libc::id_t::try_from(pid).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    loop {
        // SAFETY: siginfo_t is plain data for which all-zero bytes are a
        // valid value; waitid only writes into it.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: a plain system call with a valid out-pointer.
        let rc = unsafe { libc::waitid(libc::P_PID, id, &mut info, libc::WEXITED | libc::WNOWAIT) };
        if rc != 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        // SAFETY: waitid succeeded for a child state change, so si_status
        // is the field the kernel filled in.
        let status = unsafe { info.si_status() };
        return Ok(match info.si_code {
            libc::CLD_EXITED => Exit::Code(status),
            _ => Exit::Signal(status),
        });
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
            Err("command not found: sh".to_owned())
        );
        assert_eq!(
            resolve("./x", Path::new("/tmp"), &env),
            Ok(PathBuf::from("/tmp/./x"))
        );
    }
}
