//! Why a verb that installs, finds or manages skills failed, the exit
//! code it means, and how it is printed: one place for every such verb.

use crate::install::InstallError;
use crate::install::client::ClientError;
use crate::registry::RegistryError;
use std::process::ExitCode;

/// Why a verb that installs or manages skills failed, and the exit code
/// it means.
pub enum Failure {
    /// 1: refused (it does not lint, no such skill, not allowed, …).
    Refused(String),
    /// 2: the source, the server, the disk or the database cannot be reached.
    Unreachable(String),
}

impl Failure {
    /// What it says, whichever it is.
    pub fn sentence(self) -> String {
        match self {
            Failure::Refused(why) | Failure::Unreachable(why) => why,
        }
    }
}

/// A config that does not resolve is refused, whatever is wrong with it.
impl From<crate::config::ConfigError> for Failure {
    fn from(e: crate::config::ConfigError) -> Self {
        Failure::Refused(e.to_string())
    }
}

impl From<crate::store::StoreError> for Failure {
    fn from(e: crate::store::StoreError) -> Self {
        Failure::Unreachable(e.to_string())
    }
}

/// Prints `Ok`'s line, or the failure on stderr, and gives the exit code.
pub fn report(outcome: Result<String, Failure>) -> ExitCode {
    match outcome {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(Failure::Refused(why)) => {
            eprintln!("skilld: {why}");
            ExitCode::from(1)
        }
        Err(Failure::Unreachable(why)) => {
            eprintln!("skilld: {why}");
            ExitCode::from(2)
        }
    }
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Self {
        match e {
            ClientError::Usage(_) => Failure::Refused(e.to_string()),
            ClientError::Refused { status, .. } if status < 500 => Failure::Refused(e.to_string()),
            other => Failure::Unreachable(other.to_string()),
        }
    }
}

impl From<InstallError> for Failure {
    fn from(e: InstallError) -> Self {
        let sentence = match &e {
            InstallError::Invalid(diagnostics) => {
                let lines: Vec<String> = diagnostics.iter().map(ToString::to_string).collect();
                format!("{e}:\n{}", lines.join("\n"))
            }
            _ => e.to_string(),
        };
        match e {
            InstallError::Io(_) | InstallError::Store(_) | InstallError::NoRoot => {
                Failure::Unreachable(sentence)
            }
            _ => Failure::Refused(sentence),
        }
    }
}

impl From<RegistryError> for Failure {
    fn from(e: RegistryError) -> Self {
        match e {
            RegistryError::NoRegistries
            | RegistryError::NotFound(_)
            | RegistryError::Tampered(_)
            | RegistryError::Archive(_) => Failure::Refused(e.to_string()),
            _ => Failure::Unreachable(e.to_string()),
        }
    }
}
