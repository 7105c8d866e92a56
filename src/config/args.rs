//! The flags of the commands that run tools here, each with its
//! environment variable: the top layers of the configuration. An option
//! stays `None` (a list empty) when neither was given, so the file, then
//! the defaults, fill it in.

use crate::auth::TokenList;
use std::path::PathBuf;

/// The flags of every command that runs tools here (`serve`, `mcp`);
/// every one also has an environment variable. Options stay `None` when
/// neither was given, so the file can fill them in.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct LocalArgs {
    /// A TOML config file.
    #[arg(long, env = "SKILLD_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// A skills directory, `[TRUST=]DIR` (trust: bundled, user, untrusted).
    /// Repeat for several; earlier ones win name collisions.
    #[arg(
        long = "skills",
        env = "SKILLD_SKILLS",
        value_delimiter = ',',
        value_name = "[TRUST=]DIR"
    )]
    pub skills: Vec<String>,
    /// Database URL: `sqlite://PATH` (default `<data dir>/skilld.db`) or `postgres://…`.
    #[arg(long, env = "SKILLD_DATABASE_URL", value_name = "URL")]
    pub database: Option<String>,
    /// Working directory for tools (default: the git root of the current
    /// directory, else HOME).
    #[arg(long, env = "SKILLD_WORKSPACE", value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Where skilld keeps its database and installed skills.
    #[arg(long, env = "SKILLD_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Ceiling on any skill's timeout, in seconds.
    #[arg(long, env = "SKILLD_MAX_TIMEOUT_SECS", value_name = "SECS")]
    pub max_timeout_secs: Option<u64>,
    /// Do not watch the skills directories for changes.
    #[arg(long, env = "SKILLD_NO_WATCH", num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub no_watch: Option<bool>,
    /// How long an approval request waits for a decision, in seconds
    /// (default 3600); then it expires and its run with it.
    #[arg(long, env = "SKILLD_APPROVAL_TTL_SECS", value_name = "SECS")]
    pub approval_ttl_secs: Option<u64>,
    /// This instance's name in the run log (default: the host name). Give
    /// each of several instances sharing one database its own.
    #[arg(long, env = "SKILLD_INSTANCE", value_name = "NAME")]
    pub instance: Option<String>,
    /// The address people reach the server at (`https://skilld.example`),
    /// for the links in notifications and in the messages of `skilld mcp`
    /// about calls held for a person; default `http://` and the address
    /// the server listens on (the real port when it picked a free one).
    #[arg(long, env = "SKILLD_PUBLIC_URL", value_name = "URL")]
    pub public_url: Option<String>,
    /// `on` (default): every tool runs sandboxed. `off`: only untrusted
    /// skills' tools do; for setups that trust their own skills.
    #[arg(long, env = "SKILLD_SANDBOX", value_name = "on|off")]
    pub sandbox: Option<String>,
    /// A directory tools may also write, beyond their scratch directory
    /// (a shared output directory). Repeat for several.
    #[arg(
        long = "sandbox-write-path",
        env = "SKILLD_SANDBOX_WRITE_PATHS",
        value_delimiter = ',',
        value_name = "DIR"
    )]
    pub sandbox_write_paths: Vec<PathBuf>,
    /// Where each run gets its own scratch directory (default: beside
    /// the data directory, `<data dir>-runs`).
    #[arg(long, env = "SKILLD_SCRATCH_DIR", value_name = "DIR")]
    pub scratch_dir: Option<PathBuf>,
    /// The tools of the agents that call, comma-separated (`read,write,shell`),
    /// for callers that state none (`?agent_tools=`): a skill whose
    /// `requires_tools` names another tool that no skill serves is left out
    /// of their listings and commands. Default: unstated, nothing left out.
    #[arg(long, env = "SKILLD_AGENT_TOOLS", value_name = "TOOL,…")]
    pub agent_tools: Option<String>,
    /// Pre-approve a skill's tools (`NAME`), or one (`NAME:TOOL`), at the
    /// version loaded at start-up, for servers nobody watches. Repeat, or
    /// separate with commas. See also `[[grants]]`.
    #[arg(
        long = "approve-skill",
        visible_alias = "approve-skills",
        env = "SKILLD_APPROVE_SKILLS",
        value_delimiter = ',',
        value_name = "NAME[:TOOL]"
    )]
    pub approve_skills: Vec<String>,
}

/// The `serve` flags: [`LocalArgs`] and those only a server listening on
/// the network takes.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub local: LocalArgs,
    /// Address to listen on; port 0 picks a free port.
    #[arg(long, env = "SKILLD_BIND", value_name = "ADDR")]
    pub bind: Option<String>,
    /// Allow a non-loopback bind without tokens.
    #[arg(long, env = "SKILLD_INSECURE", num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub insecure: Option<bool>,
    /// An origin (`https://app.example`) whose web pages may call a server
    /// without tokens. Repeat for several.
    #[arg(
        long = "allowed-origin",
        env = "SKILLD_ALLOWED_ORIGINS",
        value_delimiter = ',',
        value_name = "ORIGIN"
    )]
    pub allowed_origins: Vec<String>,
    /// An S3-compatible bucket for entrypoints' artifacts (default: none,
    /// they stay on this server's disk).
    #[arg(long, env = "SKILLD_ARTIFACT_BUCKET", value_name = "BUCKET")]
    pub artifact_bucket: Option<String>,
    /// The bucket's service, `http(s)://host[:port]` (default: AWS S3).
    #[arg(long, env = "SKILLD_ARTIFACT_ENDPOINT", value_name = "URL")]
    pub artifact_endpoint: Option<String>,
    /// The bucket's region (default `us-east-1`).
    #[arg(long, env = "SKILLD_ARTIFACT_REGION", value_name = "REGION")]
    pub artifact_region: Option<String>,
    /// An OAuth issuer whose JWT access tokens the server takes, with the
    /// defaults of `[[oauth.issuers]]`; repeat for several. Replaces the
    /// file's issuers.
    #[arg(
        long = "oauth-issuer",
        env = "SKILLD_OAUTH_ISSUERS",
        value_delimiter = ',',
        value_name = "URL"
    )]
    pub oauth_issuers: Vec<String>,
    /// How long final runs stay in the run log: `90d` (default), `12h`,
    /// `30m`, `45s`, or `off` to keep them whatever their age.
    #[arg(long, env = "SKILLD_RETENTION_MAX_AGE", value_name = "AGE|off")]
    pub retention_max_age: Option<String>,
    /// How many of the newest runs the run log keeps at least; older final
    /// runs are pruned. Default `off`: no limit by count.
    #[arg(long, env = "SKILLD_RETENTION_MAX_RUNS", value_name = "N|off")]
    pub retention_max_runs: Option<String>,
    /// A file pruned runs are appended to, one JSON line each, before they
    /// are deleted (default: none).
    #[arg(long, env = "SKILLD_RETENTION_EXPORT", value_name = "FILE")]
    pub retention_export: Option<PathBuf>,
    #[command(flatten)]
    pub signatures: SignatureArgs,
    /// `SKILLD_TOKENS` (`name:role:secret,…`). Read from the environment
    /// only: a flag would show the secrets to anyone who can list processes.
    #[arg(skip = TokenList::from_env())]
    pub tokens: Option<TokenList>,
}

/// Which signatures installs take: the flags of `serve` and `install`
/// over `[signatures]` (`docs/api.md`, "Installed skills", Signatures).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SignatureArgs {
    /// A minisign public key (`RW…`) or `.pub` file whose signatures of
    /// uploads are checked and recorded. Repeat for several; replaces the
    /// file's `trusted_keys`.
    #[arg(
        long = "trusted-key",
        env = "SKILLD_TRUSTED_KEYS",
        value_delimiter = ',',
        value_name = "KEY"
    )]
    pub trusted_keys: Vec<String>,
    /// Refuse uploads not signed by a trusted key.
    #[arg(long = "require-signatures", env = "SKILLD_REQUIRE_SIGNATURES", num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub require_signatures: Option<bool>,
}
