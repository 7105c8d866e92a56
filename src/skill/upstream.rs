//! `implementation: {backend: mcp, …}` (`docs/gateway.md`): the MCP server
//! a manifest fronts, a command started on stdio or a remote URL, with the
//! references its credentials come from and its per-tool overrides. Read
//! by `dialect/manifest_upstream.rs`; the server starts it (`src/backend/mcp`).

use std::collections::BTreeMap;
use std::path::PathBuf;

/// The MCP server of a manifest, and how its tools are ruled.
#[derive(Debug, Clone, PartialEq)]
pub struct Upstream {
    pub transport: Transport,
    /// `implementation.tools`: overrides by the upstream's tool name.
    pub overrides: BTreeMap<String, ToolOverride>,
}

/// How the upstream is reached.
#[derive(Debug, Clone, PartialEq)]
pub enum Transport {
    /// A program started on stdio in the run sandbox.
    Stdio {
        command: Vec<String>,
        env: Vec<(String, EnvValue)>,
    },
    /// A Streamable HTTP endpoint.
    Remote {
        url: String,
        headers: Vec<(String, SecretRef)>,
    },
}

/// A value of the child's environment.
#[derive(Debug, Clone, PartialEq)]
pub enum EnvValue {
    Literal(String),
    Secret(SecretRef),
}

/// Where a credential comes from when the upstream starts: never the
/// manifest itself.
#[derive(Debug, Clone, PartialEq)]
pub struct SecretRef {
    pub source: SecretSource,
    /// Put before the value (`"Bearer "`).
    pub prefix: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum SecretSource {
    /// A variable of the server's own environment.
    Env(String),
    /// A file, its content trimmed.
    File(PathBuf),
}

/// A tool's rules over the upstream's annotations.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ToolOverride {
    pub read_only: Option<bool>,
    pub always_ask: Option<bool>,
}

/// Variables no reference may name: skilld's own settings and secrets.
pub(super) const RESERVED_PREFIX: &str = "SKILLD_";

impl Upstream {
    /// Whether any value comes from the server's environment or files.
    pub fn has_references(&self) -> bool {
        match &self.transport {
            Transport::Stdio { env, .. } => env.iter().any(|(_, v)| matches!(v, EnvValue::Secret(_))),
            Transport::Remote { headers, .. } => !headers.is_empty(),
        }
    }

    /// Who the upstream is, for the run log and the hash: the command line
    /// or the URL.
    pub fn identity(&self) -> Vec<String> {
        match &self.transport {
            Transport::Stdio { command, .. } => command.clone(),
            Transport::Remote { url, .. } => vec![url.clone()],
        }
    }
}

/// Why a secret could not be read; it names the reference, never a value.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("the environment variable {0} is not set")]
    Unset(String),
    #[error("cannot read the secret file {}: {source}", path.display())]
    Unreadable {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
}

impl SecretRef {
    /// The value, read now.
    pub fn resolve(&self) -> Result<String, SecretError> {
        let value = match &self.source {
            SecretSource::Env(name) => std::env::var(name).map_err(|_| SecretError::Unset(name.clone()))?,
            SecretSource::File(path) => std::fs::read_to_string(path)
                .map_err(|source| SecretError::Unreadable {
                    path: path.clone(),
                    source,
                })?
                .trim()
                .to_owned(),
        };
        Ok(format!("{}{value}", self.prefix))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_reference_is_read_and_trimmed_with_its_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "abc\n").unwrap();
        let r = SecretRef {
            source: SecretSource::File(path),
            prefix: "Bearer ".to_owned(),
        };
        assert_eq!(r.resolve().unwrap(), "Bearer abc");
    }

    #[test]
    fn a_missing_variable_is_named_without_a_value() {
        let r = SecretRef {
            source: SecretSource::Env("SKILLD_TEST_SURELY_UNSET_VARIABLE".to_owned()),
            prefix: String::new(),
        };
        assert!(
            r.resolve()
                .unwrap_err()
                .to_string()
                .contains("SKILLD_TEST_SURELY_UNSET_VARIABLE is not set")
        );
    }
}
