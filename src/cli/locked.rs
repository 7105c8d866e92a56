//! `skilld install --locked` with nothing named: every skill the lock
//! names, each from its own source, at its version, with its hash, as
//! `npm ci` installs a package lock. What is installed already with that
//! hash is left as it is.

use super::failure::{Failure, report};
use super::install::{InstallArgs, install, local_secret};
use crate::config::Config;
use crate::install::client;
use crate::registry::lock::{Lock, Locked};
use hyper::Method;
use std::process::ExitCode;

/// `skilld install --locked` with nothing named.
pub fn run(args: &InstallArgs) -> ExitCode {
    match crate::server::runtime() {
        Ok(rt) => rt.block_on(install_all(args)),
        Err(e) => report(Err(Failure::Unreachable(format!("{e:#}")))),
    }
}

/// Installs each entry, going on past a failure; the exit code is the
/// worst of them.
async fn install_all(args: &InstallArgs) -> ExitCode {
    let (config, lock) = match read(args) {
        Ok(read) => read,
        Err(failure) => return report(Err(failure)),
    };
    let mut worst = 0u8;
    for entry in &lock.skills {
        let outcome = match up_to_date(args, &config, entry).await {
            Ok(true) => Ok(format!(
                "{}@{} up to date {}",
                entry.name, entry.version, entry.sha256
            )),
            Ok(false) => match args_for(args, entry) {
                Ok(one) => install(&one).await,
                Err(failure) => Err(failure),
            },
            Err(failure) => Err(failure),
        };
        match outcome {
            Ok(line) => println!("{line}"),
            Err(Failure::Refused(why)) => {
                eprintln!("skilld: {}: {why}", entry.name);
                worst = worst.max(1);
            }
            Err(Failure::Unreachable(why)) => {
                eprintln!("skilld: {}: {why}", entry.name);
                worst = 2;
            }
        }
    }
    ExitCode::from(worst)
}

fn read(args: &InstallArgs) -> Result<(Config, Lock), Failure> {
    let config = args.registry().resolve()?;
    let path = args.lock_path(&config);
    let lock = Lock::read(&path).map_err(|e| Failure::Refused(e.to_string()))?;
    if lock.skills.is_empty() {
        return Err(Failure::Refused(format!("{} names no skill", path.display())));
    }
    Ok((config, lock))
}

/// The install of one entry: its source as `skilld install` takes it.
fn args_for(args: &InstallArgs, entry: &Locked) -> Result<InstallArgs, Failure> {
    // `--token` is for a source named on the command line, not for every
    // host a lock file (maybe someone else's) names.
    let args = &args.without_source_token();
    let source = entry.source.as_str();
    let (kind, rest) = source.split_once('+').unwrap_or(("", source));
    Ok(match kind {
        "registry" => args.of(&format!("{}@{}", entry.name, entry.version), None),
        "git" => args.of("git", Some(rest)),
        "path" | "file" => args.of(rest, None),
        _ if source.starts_with("http://") || source.starts_with("https://") => args.of(source, None),
        _ => {
            return Err(Failure::Refused(format!(
                "the lock's source '{source}' is not one skilld installs from"
            )));
        }
    })
}

/// Whether the entry's version is installed already with its hash, here
/// or on `--to`'s server.
async fn up_to_date(args: &InstallArgs, config: &Config, entry: &Locked) -> Result<bool, Failure> {
    let spec = format!("{}@{}", entry.name, entry.version);
    let Some((server, token)) = args.to() else {
        let Some(root) = config.roots.iter().find(|r| r.installed) else {
            return Ok(false);
        };
        let state = crate::catalog::installed::read_state(&root.path, &entry.name)
            .map_err(|e| Failure::Unreachable(e.to_string()))?;
        return Ok(state
            .as_ref()
            .and_then(|s| s.version(&entry.version))
            .is_some_and(|v| v.hash == entry.sha256));
    };
    let token = match token {
        Some(t) => Some(t.to_owned()),
        None => local_secret(server, config)?,
    };
    match client::call(
        server,
        Method::GET,
        &format!("/skills/{spec}"),
        token.as_deref(),
        None,
    )
    .await
    {
        Ok((_, skill)) => Ok(skill["hash"].as_str() == Some(entry.sha256.as_str())),
        Err(client::ClientError::Refused { status: 404, .. }) => Ok(false),
        Err(e) => Err(e.into()),
    }
}
