//! Typed configuration: defaults < TOML file < environment < flags,
//! resolved and validated once at start-up.

use crate::auth::{Auth, TokenConfig, TokenList};
use crate::catalog::{AgentTools, Root};
use crate::skill::Runtimes;
use crate::skill::Trust;
use serde::Deserialize;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// The default `--bind`.
pub const DEFAULT_BIND: &str = "127.0.0.1:8080";
pub use crate::skill::DEFAULT_MAX_TIMEOUT_SECS;

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

/// `[signatures]`: see [`SignatureArgs`].
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignaturesConfig {
    pub trusted_keys: Option<Vec<String>>,
    pub required: Option<bool>,
}

/// The trusted keys, each parsed (one that does not stops start-up), and
/// whether a signature is required, which needs a key.
fn resolve_signatures(
    args: &SignatureArgs,
    file: &FileConfig,
) -> Result<crate::install::signature::SignaturePolicy, String> {
    let section = file.signatures.clone().unwrap_or_default();
    let specs = if args.trusted_keys.is_empty() {
        section.trusted_keys.unwrap_or_default()
    } else {
        args.trusted_keys.clone()
    };
    let keys = specs
        .iter()
        .filter(|k| !k.trim().is_empty())
        .map(|k| crate::install::signature::TrustedKey::parse(k))
        .collect::<Result<Vec<_>, _>>()?;
    let required = args.require_signatures.or(section.required).unwrap_or(false);
    if required && keys.is_empty() {
        return Err(
            "signatures are required, but no key is trusted to check them: give --trusted-key \
             (SKILLD_TRUSTED_KEYS, [signatures] trusted_keys)"
                .to_owned(),
        );
    }
    Ok(crate::install::signature::SignaturePolicy { keys, required })
}

/// The TOML file: the same keys as the flags, in snake_case.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub bind: Option<String>,
    pub skills: Option<Vec<String>>,
    #[serde(alias = "database_url")]
    pub database: Option<String>,
    pub workspace: Option<PathBuf>,
    pub data_dir: Option<PathBuf>,
    pub insecure: Option<bool>,
    pub max_timeout_secs: Option<u64>,
    pub no_watch: Option<bool>,
    /// Script runtimes by extension, e.g. `py = ["python3", "-I"]`.
    pub runtimes: Option<std::collections::HashMap<String, Vec<String>>>,
    /// The images entrypoint skills may name (seed 003's three by
    /// default); an entry ending in `*` allows every image it begins.
    pub image_allowlist: Option<Vec<String>>,
    /// What an entrypoint skill gets when it does not say (seed 003:
    /// 120 s, 256 MiB as its cgroup's memory, 0.5 CPU).
    pub entrypoint_timeout_secs: Option<u64>,
    pub entrypoint_memory_bytes: Option<u64>,
    pub entrypoint_cpu: Option<f64>,
    /// Runs at once over all tools (default 64), and of any one tool (16).
    pub max_concurrent_runs: Option<usize>,
    pub max_concurrent_runs_per_tool: Option<usize>,
    /// How long a call waits for a free slot before 429 (default 10 s).
    pub queue_timeout_secs: Option<u64>,
    /// See [`ServeArgs::approval_ttl_secs`].
    pub approval_ttl_secs: Option<u64>,
    /// Requests one caller may have waiting for a person at once (default 20).
    pub max_pending_approvals_per_caller: Option<u64>,
    /// Callers (token names, or `sub@issuer` of OAuth) who decide their own
    /// held calls in their MCP client rather than in the inbox.
    pub client_approval: Option<Vec<String>>,
    /// MCP offers the tool `load_skill` (default false).
    pub mcp_load_skill_tool: Option<bool>,
    /// Event streams open at once (default 256), how many of them one
    /// caller may hold (default 32), and how long one may stay open
    /// (default 3600 s).
    pub max_event_streams: Option<usize>,
    pub max_event_streams_per_caller: Option<usize>,
    pub max_event_stream_secs: Option<u64>,
    /// Connections open at once (default 1024, and at most half the open
    /// files limit).
    pub max_connections: Option<usize>,
    /// How long a connection may go with no request in flight: from its
    /// accept to a whole request head, or idle between requests (default
    /// 10 s).
    pub header_timeout_secs: Option<u64>,
    /// MCP sessions open at once (default 1000), and how many of them one
    /// caller may hold (default 100).
    pub max_mcp_sessions: Option<usize>,
    pub max_mcp_sessions_per_caller: Option<usize>,
    /// A manifest's child with no call for this long is stopped.
    pub backend_idle_secs: Option<u64>,
    /// How long an entrypoint's artifacts are kept after its run (default
    /// 3600 s).
    pub artifact_ttl_secs: Option<u64>,
    /// SIGTERM → SIGKILL delay for a tool's process group (default 5 s).
    pub kill_grace_secs: Option<u64>,
    /// How long running tools may finish after SIGTERM to skilld (default 10 s).
    pub shutdown_grace_secs: Option<u64>,
    /// How long a run's end waits in memory, after the answer, for others
    /// to share its commit (default 0: committed at once, still after the
    /// answer; at most 10000).
    pub run_log_commit_interval_ms: Option<u64>,
    /// Extra environment variables children may inherit (secret-shaped
    /// names never pass).
    pub env_allow: Option<Vec<String>>,
    /// Limits every child gets unless its skill sets its own.
    pub max_open_files: Option<u64>,
    pub max_file_size_bytes: Option<u64>,
    pub max_memory_bytes: Option<u64>,
    pub max_cpu_secs: Option<u64>,
    /// This instance's name in the run log (default: the host name).
    pub instance: Option<String>,
    /// Bearer tokens: `[[tokens]] name, role, secret | secret_sha256`.
    pub tokens: Option<Vec<TokenConfig>>,
    /// OAuth access tokens: `[oauth]` and its `[[oauth.issuers]]`.
    pub oauth: Option<crate::oauth::OAuthConfig>,
    /// See [`ServeArgs::allowed_origins`].
    pub allowed_origins: Option<Vec<String>>,
    /// See [`ServeArgs::public_url`].
    pub public_url: Option<String>,
    /// Webhooks told of each new request and decision.
    pub notify: Option<Vec<crate::notify::NotifyConfig>>,
    /// What one turn may spend (seed 002's per-turn limits): `[limits]`
    /// `llm_calls_per_turn`, `shell_execs_per_turn`, `net_fetches_per_turn`.
    pub limits: Option<crate::skill::context::TurnLimits>,
    /// See [`ServeArgs::sandbox`].
    pub sandbox: Option<String>,
    /// Who tools run as when skilld is root: `uid:gid` or a user name
    /// (default `65534:65534`, nobody).
    pub sandbox_user: Option<String>,
    /// Processes one run may have at once (default 512).
    pub sandbox_pids_max: Option<u64>,
    /// Memory one run may use unless its skill says (default 2 GiB).
    pub sandbox_memory_bytes: Option<u64>,
    /// Memory all runs together may use (default half the host's).
    pub sandbox_total_memory_bytes: Option<u64>,
    /// Processes all runs together may have (default 8192).
    pub sandbox_total_pids_max: Option<u64>,
    /// The size of an entrypoint run's own `/tmp` (default 64 MiB).
    pub sandbox_tmp_bytes: Option<u64>,
    /// Directories tools may also read and execute, beyond the system's.
    pub sandbox_read_paths: Option<Vec<PathBuf>>,
    /// Directories tools may also write, beyond their scratch directory.
    pub sandbox_write_paths: Option<Vec<PathBuf>>,
    /// See [`ServeArgs::scratch_dir`].
    pub scratch_dir: Option<PathBuf>,
    /// Pre-approvals (`docs/api.md`, "Grants").
    pub grants: Option<Vec<crate::invoke::PreGrant>>,
    /// See [`ServeArgs::agent_tools`]; a list (`["read", "write"]`).
    pub agent_tools: Option<Vec<String>>,
    /// Untrusted uploads (`POST /skills`) wait for an admin's review
    /// before they serve (default false).
    pub review_uploads: Option<bool>,
    /// Limits of uploads and their dependencies.
    pub install: Option<InstallConfig>,
    /// Where entrypoints' artifacts go.
    pub artifacts: Option<ArtifactsConfig>,
    /// How long the run log keeps runs.
    pub retention: Option<RetentionConfig>,
    /// The registries `skilld search`, `install NAME` and `add` ask, in
    /// order: `[[registries]] url, token`.
    pub registries: Option<Vec<crate::registry::RegistrySource>>,
    /// How long a registry's index is kept before it is asked again
    /// (default 3600 s; 0 keeps nothing).
    pub registry_ttl_secs: Option<u64>,
    /// The keys trusted to sign uploads.
    pub signatures: Option<SignaturesConfig>,
    /// Sessions (`docs/sessions.md`): how long they live, how many a
    /// caller holds, and the skills that activate without asking.
    pub sessions: Option<crate::session::SessionSettings>,
}

/// `[retention]`: which final runs the run log keeps, and how the rest is
/// pruned (`docs/api.md`, "Retention").
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetentionConfig {
    /// See [`ServeArgs::retention_max_age`].
    pub max_age: Option<String>,
    /// See [`ServeArgs::retention_max_runs`]; a number, or `"off"`.
    pub max_runs: Option<toml::Value>,
    /// See [`ServeArgs::retention_export`].
    pub export: Option<PathBuf>,
    /// How often a pass looks for runs to prune (default 3600 s).
    pub interval_secs: Option<u64>,
    /// Runs deleted per transaction (default 500).
    pub batch_size: Option<u32>,
    /// The pause between two transactions of a pass (default 100 ms).
    pub pause_ms: Option<u64>,
}

/// `[artifacts]`: an S3-compatible bucket for entrypoints' artifacts. The
/// keys come from `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY`, or from
/// a shared credentials file; never from this file.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArtifactsConfig {
    /// See [`ServeArgs::artifact_bucket`].
    pub bucket: Option<String>,
    /// See [`ServeArgs::artifact_endpoint`].
    pub endpoint: Option<String>,
    /// See [`ServeArgs::artifact_region`].
    pub region: Option<String>,
    /// Object keys start with it: `<prefix>/runs/<run id>/<path>`.
    pub prefix: Option<String>,
    /// An AWS shared credentials file (`aws_access_key_id`,
    /// `aws_secret_access_key`, `aws_session_token`).
    pub credentials_file: Option<PathBuf>,
    /// Its section to read (default `default`).
    pub profile: Option<String>,
}

/// `[install]`: what an upload may hold, and how its dependencies install.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstallConfig {
    /// The largest upload body (default 64 MiB).
    pub max_upload_bytes: Option<u64>,
    /// Entries an archive may hold (default 1000).
    pub max_entries: Option<usize>,
    /// Bytes it may unpack to (default 64 MiB).
    pub max_unpacked_bytes: Option<u64>,
    /// Unpacked over packed, past 1 MiB (default 100).
    pub max_ratio: Option<u64>,
    /// Each dependency installer's time limit (default 300 s).
    pub deps_timeout_secs: Option<u64>,
    /// What one version's dependencies may take on disk (default 1 GiB).
    pub deps_max_bytes: Option<u64>,
    /// The registry npm installs from, and every package of a
    /// `package-lock.json` must come from (default the npm registry).
    pub npm_registry: Option<String>,
}

impl InstallConfig {
    fn settings(&self, review_uploads: bool) -> crate::install::InstallSettings {
        let d = crate::install::InstallSettings::default();
        crate::install::InstallSettings {
            limits: crate::install::unpack::UnpackLimits {
                max_entries: self.max_entries.unwrap_or(d.limits.max_entries),
                max_bytes: self.max_unpacked_bytes.unwrap_or(d.limits.max_bytes),
                max_ratio: self.max_ratio.unwrap_or(d.limits.max_ratio),
            },
            max_upload_bytes: self.max_upload_bytes.unwrap_or(d.max_upload_bytes),
            review_uploads,
            deps: crate::install::DepsSettings {
                timeout: self
                    .deps_timeout_secs
                    .map_or(d.deps.timeout, std::time::Duration::from_secs),
                max_bytes: self.deps_max_bytes.unwrap_or(d.deps.max_bytes),
                npm_registry: self.npm_registry.clone().unwrap_or(d.deps.npm_registry),
                ..d.deps
            },
            // Resolved with their flags, in `resolve_signatures`.
            signatures: crate::install::signature::SignaturePolicy::default(),
        }
    }
}

/// The resolved configuration.
#[derive(Clone)]
pub struct Config {
    pub bind: SocketAddr,
    pub roots: Vec<Root>,
    pub database_url: String,
    pub workspace: PathBuf,
    pub data_dir: PathBuf,
    pub insecure: bool,
    pub max_timeout_secs: u64,
    pub watch: bool,
    pub runtimes: Runtimes,
    /// The image allowlist, entrypoint defaults and where plain skills'
    /// dependencies are prepared.
    pub rules: crate::skill::SkillRules,
    pub run: crate::invoke::RunSettings,
    pub shutdown_grace: std::time::Duration,
    /// See [`FileConfig::run_log_commit_interval_ms`].
    pub run_log_commit_interval: std::time::Duration,
    /// The file's and `SKILLD_TOKENS`' tokens, merged; open when none
    /// (and no OAuth issuer is configured).
    pub auth: std::sync::Arc<Auth>,
    /// The OAuth issuers whose access tokens are taken too; the verifier
    /// is made once the server's address is known.
    pub oauth: Option<crate::oauth::OAuthSettings>,
    /// Origins whose pages may call a server without tokens, as
    /// `scheme://host[:port]`, lowercased.
    pub allowed_origins: Vec<String>,
    /// Where people reach this server, without a trailing `/`; `None`:
    /// the address it listens on, once bound (`--bind` may name port 0).
    pub public_url: Option<String>,
    /// The `[[notify]]` webhooks.
    pub notify: Vec<crate::notify::Target>,
    /// Environment variables the config named as holding secrets
    /// (`secret_env`), to wipe once read.
    pub secret_variables: Vec<String>,
    /// How `POST /skills` takes uploads.
    pub install: crate::install::InstallSettings,
    /// Connections and MCP sessions clients may hold.
    pub limits: crate::http::ServerLimits,
    /// The tool policy of callers that state none.
    pub agent_tools: AgentTools,
    /// What the run log keeps.
    pub retention: crate::retention::RetentionSettings,
    /// The operator's pre-approvals: `[[grants]]`, then `--approve-skill`.
    pub grants: Vec<crate::invoke::PreGrant>,
    /// The `[[registries]]` and how long their indexes are kept.
    pub registries: crate::registry::RegistrySettings,
    /// `[sessions]`.
    pub sessions: crate::session::SessionSettings,
}

/// Database URLs may carry a password; it never reaches a log.
impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("bind", &self.bind)
            .field("roots", &self.roots)
            .field("database_url", &redact_url(&self.database_url))
            .field("workspace", &self.workspace)
            .field("data_dir", &self.data_dir)
            .field("insecure", &self.insecure)
            .field("max_timeout_secs", &self.max_timeout_secs)
            .field("watch", &self.watch)
            .field("auth", &self.auth)
            .field("oauth", &self.oauth)
            .field("allowed_origins", &self.allowed_origins)
            .field("public_url", &self.public_url)
            .field("notify", &self.notify)
            .field("agent_tools", &self.agent_tools)
            .field("artifacts", &self.run.artifacts)
            .finish()
    }
}

/// `scheme://user:secret@host` → `scheme://user:***@host`.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let Some((auth, host)) = rest.split_once('@') else {
        return url.to_owned();
    };
    match auth.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_owned(),
    }
}

/// The secrets a database URL carries: the password of its user
/// (`scheme://user:PASSWORD@host`) and any `password=` parameter.
pub fn url_passwords(url: &str) -> Vec<&str> {
    let mut found = Vec::new();
    if let Some((_, rest)) = url.split_once("://")
        && let Some((auth, _)) = rest.split_once('@')
        && let Some((_, password)) = auth.split_once(':')
    {
        found.push(password);
    }
    if let Some((_, query)) = url.split_once('?') {
        found.extend(
            query
                .split('&')
                .filter_map(|pair| pair.split_once('='))
                .filter(|(key, _)| key.eq_ignore_ascii_case("password"))
                .map(|(_, value)| value),
        );
    }
    found.retain(|p| !p.is_empty());
    found
}

impl Config {
    /// Resolves flags (and their environment variables) over the file over
    /// the defaults, and validates the result.
    pub fn resolve(args: &ServeArgs) -> Result<Self, String> {
        let file = match &args.local.config {
            Some(path) => read_file(path)?,
            None => FileConfig::default(),
        };
        let auth = resolve_tokens(file.tokens.as_deref().unwrap_or_default(), args.tokens.as_ref())?;
        let oauth = file
            .oauth
            .clone()
            .unwrap_or_default()
            .resolve(&args.oauth_issuers)?;
        let insecure = args.insecure.or(file.insecure).unwrap_or(false);
        let bind = resolve_bind(args, &file, insecure, &auth, oauth.is_some())?;
        let Places {
            data_dir,
            workspace,
            scratch_dir,
            database_url,
        } = Places::resolve(args, &file);
        let max_timeout_secs = resolve_max_timeout(args, &file)?;
        let roots = resolve_roots(args, &file, &workspace, &data_dir)?;
        let protected = protected_paths(args, &roots, &[&data_dir, &scratch_dir], &database_url);
        let mut install = file
            .install
            .clone()
            .unwrap_or_default()
            .settings(file.review_uploads.unwrap_or(false));
        install.signatures = resolve_signatures(&args.signatures, &file)?;
        let rules = resolve_rules(&file, &data_dir, &install.deps.npm_registry)?;
        let mut run = run_settings(args, &file, &workspace, &data_dir)?;
        run.scratch_dir = scratch_dir;
        let (artifacts, artifact_secrets) = resolve_artifacts(args, &file)?;
        run.artifacts = artifacts;
        run.sandbox.protected = protected;
        let retention = resolve_retention(args, &file)?;
        // The export holds the log's history: no tool's to write.
        run.sandbox.protected.extend(retention.export.clone());
        Ok(Self {
            sessions: file.sessions.clone().unwrap_or_default(),
            grants: resolve_grants(args, &file)?,
            registries: crate::registry::RegistrySettings {
                sources: file.registries.clone().unwrap_or_default(),
                ttl: file
                    .registry_ttl_secs
                    .map_or(crate::registry::DEFAULT_TTL, std::time::Duration::from_secs),
            },
            retention,
            bind,
            roots,
            database_url,
            insecure,
            max_timeout_secs,
            watch: !args.local.no_watch.or(file.no_watch).unwrap_or(false),
            runtimes: resolve_runtimes(&file)?,
            rules,
            run,
            shutdown_grace: std::time::Duration::from_secs(file.shutdown_grace_secs.unwrap_or(10)),
            run_log_commit_interval: resolve_commit_interval(&file)?,
            workspace,
            data_dir,
            auth: std::sync::Arc::new(auth),
            oauth,
            allowed_origins: resolve_origins(args, &file)?,
            public_url: resolve_public_url(args, &file)?,
            notify: resolve_notify(&file)?,
            limits: resolve_limits(&file)?,
            agent_tools: match (&args.local.agent_tools, &file.agent_tools) {
                (Some(list), _) => AgentTools::parse(list),
                (None, Some(names)) => AgentTools::stated(names),
                (None, None) => AgentTools::unstated(),
            },
            install,
            secret_variables: file
                .notify
                .iter()
                .flatten()
                .filter_map(|n| n.secret_env.clone())
                .chain(artifact_secrets)
                .collect(),
        })
    }
}

fn resolve_grants(args: &ServeArgs, file: &FileConfig) -> Result<Vec<crate::invoke::PreGrant>, String> {
    let flags = args
        .local
        .approve_skills
        .iter()
        .map(|v| crate::invoke::PreGrant::from_flag(v))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(file.grants.iter().flatten().cloned().chain(flags).collect())
}

/// Where the server keeps its files and its run log.
struct Places {
    data_dir: PathBuf,
    workspace: PathBuf,
    scratch_dir: PathBuf,
    database_url: String,
}

impl Places {
    /// Absolute, because children run elsewhere: a relative path handed to
    /// one (its run directory, its working directory) would be read against
    /// the child's working directory, not the server's.
    fn resolve(args: &ServeArgs, file: &FileConfig) -> Self {
        let local = &args.local;
        let data_dir = absolute(
            local
                .data_dir
                .clone()
                .or(file.data_dir.clone())
                .unwrap_or_else(default_data_dir),
        );
        let workspace = absolute(
            local
                .workspace
                .clone()
                .or(file.workspace.clone())
                .unwrap_or_else(default_workspace),
        );
        let database_url = local
            .database
            .clone()
            .or(file.database.clone())
            .unwrap_or_else(|| format!("sqlite://{}", data_dir.join("skilld.db").display()));
        let scratch_dir = absolute(
            local
                .scratch_dir
                .clone()
                .or(file.scratch_dir.clone())
                .unwrap_or_else(|| default_scratch_dir(&data_dir)),
        );
        Self {
            data_dir,
            workspace,
            scratch_dir,
            database_url,
        }
    }
}

fn resolve_max_timeout(args: &ServeArgs, file: &FileConfig) -> Result<u64, String> {
    let secs = args
        .local
        .max_timeout_secs
        .or(file.max_timeout_secs)
        .unwrap_or(DEFAULT_MAX_TIMEOUT_SECS);
    if secs == 0 {
        return Err("max_timeout_secs must be at least 1".to_owned());
    }
    Ok(secs)
}

/// What no tool may touch: the server's own directories, its config file,
/// the skills' roots, and a run log kept outside the data directory.
fn protected_paths(args: &ServeArgs, roots: &[Root], own: &[&PathBuf], database_url: &str) -> Vec<PathBuf> {
    let mut protected: Vec<PathBuf> = own.iter().map(|p| (*p).clone()).collect();
    protected.extend(args.local.config.iter().map(|c| absolute(c.clone())));
    protected.extend(roots.iter().map(|r| r.path.clone()));
    protected.extend(crate::store::sqlite_files(database_url).into_iter().map(absolute));
    protected
}

/// Where artifacts go: a bucket when one is named (flag, environment or
/// `[artifacts]`), else this server's disk. Also the environment variables
/// its keys were read from, to wipe.
fn resolve_artifacts(
    args: &ServeArgs,
    file: &FileConfig,
) -> Result<(crate::artifacts::ArtifactStore, Vec<String>), String> {
    let section = file.artifacts.clone().unwrap_or_default();
    let endpoint = args.artifact_endpoint.clone().or(section.endpoint);
    let region = args.artifact_region.clone().or(section.region);
    let Some(bucket) = args.artifact_bucket.clone().or(section.bucket) else {
        if endpoint.is_some() || region.is_some() || section.credentials_file.is_some() {
            return Err(
                "the artifact endpoint, region or credentials are set, but no artifact bucket".to_owned(),
            );
        }
        return Ok((crate::artifacts::ArtifactStore::Local, Vec::new()));
    };
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let credentials = crate::artifacts::Credentials::resolve(
        env,
        section.credentials_file.as_deref(),
        section.profile.as_deref(),
    )?;
    let from_env = credentials.as_ref().is_some_and(|c| c.source.starts_with("AWS_"));
    let secrets = if from_env {
        vec!["AWS_SECRET_ACCESS_KEY".to_owned(), "AWS_SESSION_TOKEN".to_owned()]
    } else {
        Vec::new()
    };
    let store = crate::artifacts::S3Store::new(crate::artifacts::S3Settings {
        bucket,
        endpoint,
        region,
        prefix: section.prefix.unwrap_or_default(),
        credentials,
    })?;
    Ok((
        crate::artifacts::ArtifactStore::S3(std::sync::Arc::new(store)),
        secrets,
    ))
}

/// `[retention]` under its flags, checked: every bad value is refused
/// at start-up rather than found out by the first pass.
fn resolve_retention(
    args: &ServeArgs,
    file: &FileConfig,
) -> Result<crate::retention::RetentionSettings, String> {
    use crate::retention::{MAX_BATCH, RetentionSettings, parse_age};
    let section = file.retention.clone().unwrap_or_default();
    let defaults = RetentionSettings::default();
    let max_age = match args.retention_max_age.clone().or(section.max_age) {
        None => defaults.max_age,
        Some(off) if off.trim() == "off" => None,
        Some(age) => Some(parse_age(&age).map_err(|e| format!("retention max_age: {e}"))?),
    };
    let max_runs = match (&args.retention_max_runs, &section.max_runs) {
        (Some(flag), _) => parse_max_runs(flag)?,
        (None, Some(toml::Value::Integer(n))) => parse_max_runs(&n.to_string())?,
        (None, Some(toml::Value::String(text))) => parse_max_runs(text)?,
        (None, Some(other)) => return Err(format!("retention max_runs: {other} is not a number or \"off\"")),
        (None, None) => None,
    };
    let batch = section.batch_size.unwrap_or(defaults.batch);
    if !(1..=MAX_BATCH).contains(&batch) {
        return Err(format!(
            "retention batch_size must be 1 to {MAX_BATCH}, not {batch}"
        ));
    }
    let interval = section
        .interval_secs
        .map_or(defaults.interval, std::time::Duration::from_secs);
    if interval.is_zero() {
        return Err("retention interval_secs must be at least 1".to_owned());
    }
    let export = args.retention_export.clone().or(section.export).map(absolute);
    if let Some(path) = &export {
        check_export(path)?;
    }
    Ok(RetentionSettings {
        max_age,
        max_runs,
        export,
        interval,
        batch,
        pause: section
            .pause_ms
            .map_or(defaults.pause, std::time::Duration::from_millis),
    })
}

/// `max_runs`: a count of at least 1, or `off`.
fn parse_max_runs(text: &str) -> Result<Option<u64>, String> {
    match text.trim() {
        "off" => Ok(None),
        n => match n.parse::<u64>() {
            Ok(n) if n >= 1 => Ok(Some(n)),
            _ => Err(format!(
                "retention max_runs '{text}' must be a count of at least 1, or off (no limit by count)"
            )),
        },
    }
}

/// The export file must be one the server can append to: in an existing
/// directory, and not a directory itself.
fn check_export(path: &Path) -> Result<(), String> {
    let dir = path.parent().filter(|d| d.is_dir());
    if dir.is_none() {
        return Err(format!(
            "retention export {}: its directory does not exist",
            path.display()
        ));
    }
    if path.is_dir() {
        return Err(format!("retention export {} is a directory", path.display()));
    }
    Ok(())
}

/// `--public-url` over the file's, if either is given.
fn resolve_public_url(args: &ServeArgs, file: &FileConfig) -> Result<Option<String>, String> {
    let Some(url) = args.local.public_url.clone().or(file.public_url.clone()) else {
        return Ok(None);
    };
    let ok = url
        .split_once("://")
        .is_some_and(|(scheme, rest)| matches!(scheme, "http" | "https") && !rest.is_empty());
    if !ok {
        return Err(format!("public_url '{url}' must be an http:// or https:// URL"));
    }
    Ok(Some(url.trim_end_matches('/').to_owned()))
}

/// The `[[notify]]` entries, each checked; names must differ, since a
/// delivery is recorded by its target's name.
fn resolve_notify(file: &FileConfig) -> Result<Vec<crate::notify::Target>, String> {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let targets = file
        .notify
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, n)| crate::notify::Target::resolve(i, n, env))
        .collect::<Result<Vec<_>, _>>()?;
    let mut names: Vec<&str> = targets.iter().map(|t| t.name.as_str()).collect();
    names.sort_unstable();
    if let Some(pair) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!("two [[notify]] entries are named '{}'", pair[0]));
    }
    Ok(targets)
}

/// The allowed origins: the flags' (or the environment's), else the
/// file's. Each must be an origin, `scheme://host[:port]`, as a browser
/// sends it in `Origin`: no path, no trailing slash.
fn resolve_origins(args: &ServeArgs, file: &FileConfig) -> Result<Vec<String>, String> {
    let given = if args.allowed_origins.is_empty() {
        file.allowed_origins.clone().unwrap_or_default()
    } else {
        args.allowed_origins.clone()
    };
    given
        .iter()
        .map(|o| o.trim())
        .filter(|o| !o.is_empty())
        .map(|o| {
            let ok = o.split_once("://").is_some_and(|(scheme, host)| {
                matches!(scheme, "http" | "https") && !host.is_empty() && !host.contains(['/', '?', '#', '@'])
            });
            if ok {
                Ok(o.to_ascii_lowercase())
            } else {
                Err(format!(
                    "allowed origin '{}' is not an origin such as https://app.example or http://localhost:3000",
                    o.escape_debug()
                ))
            }
        })
        .collect()
}

/// The address to listen on. A non-loopback one needs tokens (static or
/// OAuth), or the operator's explicit `--insecure`.
fn resolve_bind(
    args: &ServeArgs,
    file: &FileConfig,
    insecure: bool,
    auth: &Auth,
    oauth: bool,
) -> Result<SocketAddr, String> {
    let text = args
        .bind
        .clone()
        .or(file.bind.clone())
        .unwrap_or_else(|| DEFAULT_BIND.to_owned());
    let bind: SocketAddr = text
        .parse()
        .map_err(|_| format!("--bind '{text}' is not an address such as 127.0.0.1:8080"))?;
    if !bind.ip().is_loopback() && !insecure && auth.is_open() && !oauth {
        return Err(format!(
            "refusing to listen on {bind} without tokens: anyone who can reach it could run tools; \
             configure tokens, bind to a loopback address, or pass --insecure"
        ));
    }
    Ok(bind)
}

/// The skill roots: the flags' (or the environment's), else the file's,
/// else the default ones.
fn resolve_roots(
    args: &ServeArgs,
    file: &FileConfig,
    workspace: &Path,
    data_dir: &Path,
) -> Result<Vec<Root>, String> {
    let skills = if args.local.skills.is_empty() {
        file.skills.clone().unwrap_or_default()
    } else {
        args.local.skills.clone()
    };
    if skills.is_empty() {
        return Ok(default_roots(workspace, data_dir));
    }
    let mut roots = skills
        .iter()
        .map(|s| Root::parse_flag(s))
        .collect::<Result<Vec<_>, _>>()?;
    // What `POST /skills` installed serves whichever roots were named: it
    // is the server's own, kept in its data directory.
    let installed = installed_root(data_dir);
    if !roots.iter().any(|r| r.path == installed.path) {
        roots.push(installed);
    }
    Ok(roots)
}

/// The script runtimes, with the file's replacing the defaults by extension.
/// The run log's commit interval, refused past
/// [`MAX_COMMIT_INTERVAL`](crate::store::MAX_COMMIT_INTERVAL): another
/// instance reads a finished run as `running` for up to that long.
fn resolve_commit_interval(file: &FileConfig) -> Result<std::time::Duration, String> {
    let interval = std::time::Duration::from_millis(file.run_log_commit_interval_ms.unwrap_or(0));
    if interval > crate::store::MAX_COMMIT_INTERVAL {
        return Err(format!(
            "run_log_commit_interval_ms ({}) is more than {}",
            interval.as_millis(),
            crate::store::MAX_COMMIT_INTERVAL.as_millis()
        ));
    }
    Ok(interval)
}

fn resolve_runtimes(file: &FileConfig) -> Result<Runtimes, String> {
    let mut runtimes = Runtimes::default();
    for (ext, argv) in file.runtimes.clone().unwrap_or_default() {
        if argv.is_empty() {
            return Err(format!("runtimes.{ext} is empty; give at least a program"));
        }
        runtimes.set(&ext, argv);
    }
    Ok(runtimes)
}

/// What skills must and get (seed 003's allowlist and entrypoint
/// defaults): the file's over the defaults. Plain skills' dependencies
/// are prepared under `<data dir>/deps`.
pub fn resolve_rules(
    file: &FileConfig,
    data_dir: &Path,
    npm_registry: &str,
) -> Result<crate::skill::SkillRules, String> {
    let mut rules = crate::skill::SkillRules {
        deps_dir: Some(data_dir.join("deps")),
        npm_registry: npm_registry.to_owned(),
        ..crate::skill::SkillRules::default()
    };
    if let Some(list) = &file.image_allowlist {
        if let Some(bad) = list
            .iter()
            .find(|i| i.trim().is_empty() || i.contains(char::is_whitespace))
        {
            return Err(format!("image_allowlist entry '{bad}' is not an image name"));
        }
        rules.image_allowlist = list.clone();
    }
    let d = &mut rules.entrypoint;
    match file.entrypoint_timeout_secs {
        Some(0) => return Err("entrypoint_timeout_secs must be at least 1".to_owned()),
        Some(secs) => d.timeout_secs = secs,
        None => {}
    }
    match file.entrypoint_memory_bytes {
        Some(0) => return Err("entrypoint_memory_bytes must be at least 1".to_owned()),
        Some(bytes) => d.memory_bytes = Some(bytes),
        None => {}
    }
    match file.entrypoint_cpu {
        Some(cpu) if !(cpu.is_finite() && cpu > 0.0) => {
            return Err(format!(
                "entrypoint_cpu must be a positive number of cores, not {cpu}"
            ));
        }
        Some(cpu) => d.cpu = Some(cpu),
        None => {}
    }
    Ok(rules)
}

/// How runs are carried out: the file's settings over the defaults.
fn run_settings(
    args: &ServeArgs,
    file: &FileConfig,
    workspace: &Path,
    data_dir: &Path,
) -> Result<crate::invoke::RunSettings, String> {
    let defaults = crate::invoke::RunSettings::default();
    let secs = std::time::Duration::from_secs;
    Ok(crate::invoke::RunSettings {
        scratch_dir: defaults.scratch_dir.clone(),
        artifacts: crate::artifacts::ArtifactStore::Local,
        artifact_ttl: file
            .artifact_ttl_secs
            .map_or(defaults.artifact_ttl, |s| secs(s.max(1))),
        starlark_host: None,
        turn_limits: file.limits.unwrap_or_default(),
        sandbox: sandbox_settings(args, file)?,
        workspace: workspace.to_path_buf(),
        data_dir: data_dir.to_path_buf(),
        grace: file.kill_grace_secs.map_or(defaults.grace, secs),
        limits: crate::runner::Limits {
            memory_bytes: file.max_memory_bytes.or(defaults.limits.memory_bytes),
            cpu_secs: file.max_cpu_secs.or(defaults.limits.cpu_secs),
            open_files: file.max_open_files.or(defaults.limits.open_files),
            file_size_bytes: file.max_file_size_bytes.or(defaults.limits.file_size_bytes),
        },
        max_concurrent: file.max_concurrent_runs.unwrap_or(defaults.max_concurrent).max(1),
        max_concurrent_per_tool: file
            .max_concurrent_runs_per_tool
            .unwrap_or(defaults.max_concurrent_per_tool)
            .max(1),
        queue_timeout: file.queue_timeout_secs.map_or(defaults.queue_timeout, secs),
        instance: args
            .local
            .instance
            .clone()
            .or(file.instance.clone())
            .unwrap_or_else(host_name),
        extra_env: file.env_allow.clone().unwrap_or_default(),
        approval_ttl: args
            .local
            .approval_ttl_secs
            .or(file.approval_ttl_secs)
            .map_or(defaults.approval_ttl, |s| secs(s.max(1))),
        max_pending_per_caller: file
            .max_pending_approvals_per_caller
            .unwrap_or(defaults.max_pending_per_caller)
            .max(1),
        client_approval: file.client_approval.clone().unwrap_or_default(),
        mcp_load_skill_tool: file.mcp_load_skill_tool.unwrap_or(false),
        max_streams: file.max_event_streams.unwrap_or(defaults.max_streams).max(1),
        max_streams_per_caller: share_of(
            "max_event_streams_per_caller",
            file.max_event_streams_per_caller,
            defaults.max_streams_per_caller,
            "max_event_streams",
            file.max_event_streams.unwrap_or(defaults.max_streams),
        )?,
        max_stream: file
            .max_event_stream_secs
            .map_or(defaults.max_stream, |s| secs(s.max(1))),
        wait_poll: defaults.wait_poll,
        backend_idle: file
            .backend_idle_secs
            .map_or(defaults.backend_idle, |s| secs(s.max(1))),
    })
}

/// What clients may hold of the server: the file's over the defaults.
fn resolve_limits(file: &FileConfig) -> Result<crate::http::ServerLimits, String> {
    let d = crate::http::ServerLimits::default();
    let secs = |s: u64| std::time::Duration::from_secs(s.max(1));
    let max_mcp_sessions = file.max_mcp_sessions.unwrap_or(d.max_mcp_sessions).max(1);
    Ok(crate::http::ServerLimits {
        max_connections: file.max_connections.unwrap_or(d.max_connections).max(1),
        header_timeout: file.header_timeout_secs.map_or(d.header_timeout, secs),
        max_mcp_sessions,
        max_mcp_sessions_per_caller: share_of(
            "max_mcp_sessions_per_caller",
            file.max_mcp_sessions_per_caller,
            d.max_mcp_sessions_per_caller,
            "max_mcp_sessions",
            max_mcp_sessions,
        )?,
    })
}

/// One caller's share of a whole of `total`: `given` (named `name`), which
/// may not be more than the whole (named `of`), else `default`, cut to the
/// whole; at least 1.
fn share_of(
    name: &str,
    given: Option<usize>,
    default: usize,
    of: &str,
    total: usize,
) -> Result<usize, String> {
    match given {
        Some(share) if share > total => Err(format!("{name} ({share}) is more than {of} ({total})")),
        given => Ok(given.unwrap_or(default).clamp(1, total.max(1))),
    }
}

/// `<data dir>-runs`: outside the data directory, which no tool may read,
/// and on the same disk as it rather than in a `/tmp` that may be small
/// or shared.
/// Where the data directory's parent is not ours to write (`/data` in a
/// container), `$TMPDIR/skilld-runs-<uid>` instead.
fn default_scratch_dir(data_dir: &Path) -> PathBuf {
    let mut name = data_dir.file_name().unwrap_or_default().to_os_string();
    name.push("-runs");
    let beside = data_dir.with_file_name(name);
    let writable = |dir: &Path| nix::unistd::access(dir, nix::unistd::AccessFlags::W_OK).is_ok();
    if beside.is_dir() || beside.parent().is_some_and(writable) {
        return beside;
    }
    std::env::temp_dir().join(format!("skilld-runs-{}", nix::unistd::geteuid()))
}

/// The sandbox: the flags' level over the file's, and the file's limits.
fn sandbox_settings(args: &ServeArgs, file: &FileConfig) -> Result<crate::sandbox::Settings, String> {
    let defaults = crate::sandbox::Settings::default();
    let level = match args.local.sandbox.as_deref().or(file.sandbox.as_deref()) {
        None | Some("on") => crate::sandbox::Level::On,
        Some("off") => crate::sandbox::Level::Off,
        Some(other) => return Err(format!("sandbox must be \"on\" or \"off\", not {other:?}")),
    };
    let (uid, gid) = match file.sandbox_user.as_deref() {
        Some(user) => parse_user(user)?,
        None => (defaults.uid, defaults.gid),
    };
    Ok(crate::sandbox::Settings {
        level,
        uid,
        gid,
        pids_max: file.sandbox_pids_max.unwrap_or(defaults.pids_max).max(1),
        memory_max: file.sandbox_memory_bytes.unwrap_or(defaults.memory_max),
        total_memory_max: file
            .sandbox_total_memory_bytes
            .unwrap_or(defaults.total_memory_max),
        total_pids_max: file
            .sandbox_total_pids_max
            .unwrap_or(defaults.total_pids_max)
            .max(1),
        tmp_bytes: file.sandbox_tmp_bytes.unwrap_or(defaults.tmp_bytes).max(4096),
        read_paths: file
            .sandbox_read_paths
            .iter()
            .flatten()
            .map(|p| absolute(p.clone()))
            .collect(),
        write_paths: args
            .local
            .sandbox_write_paths
            .iter()
            .chain(file.sandbox_write_paths.iter().flatten())
            .map(|p| absolute(p.clone()))
            .collect(),
        protected: Vec::new(),
    })
}

/// `uid:gid`, `uid` (gid the same), or a user name with its primary group.
/// Never root: the point is another, unprivileged identity.
fn parse_user(user: &str) -> Result<(u32, u32), String> {
    let numeric = |s: &str| s.parse::<u32>().ok();
    let found = match user.split_once(':') {
        Some((u, g)) => numeric(u).zip(numeric(g)),
        None => numeric(user).map(|u| (u, u)).or_else(|| {
            nix::unistd::User::from_name(user)
                .ok()
                .flatten()
                .map(|u| (u.uid.as_raw(), u.gid.as_raw()))
        }),
    };
    match found {
        Some((0, _) | (_, 0)) => Err(format!(
            "sandbox_user {user:?} is root; name an unprivileged user"
        )),
        Some(ids) => Ok(ids),
        None => Err(format!(
            "sandbox_user {user:?} is neither uid:gid nor a known user name"
        )),
    }
}

/// The file's tokens and then `SKILLD_TOKENS`'; both sources count, and a
/// name defined in both is an error rather than a silent override.
fn resolve_tokens(file: &[TokenConfig], env: Option<&TokenList>) -> Result<Auth, String> {
    let mut tokens = file
        .iter()
        .map(|t| t.to_token("config file"))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(list) = env {
        tokens.extend(list.parse()?);
    }
    Auth::new(tokens)
}

/// The host's name, which names this instance in the run log.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "skilld".to_owned())
}

/// What `skilld check` lints by: the runtimes and rules of the config
/// file (`--config`), or the defaults, with plain skills' dependencies
/// looked for where that server would prepare them.
pub fn lint_settings(config: Option<&Path>) -> Result<(Runtimes, crate::skill::SkillRules), String> {
    let file = match config {
        Some(path) => read_file(path)?,
        None => FileConfig::default(),
    };
    let data_dir = std::env::var_os("SKILLD_DATA_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or(file.data_dir.clone())
        .unwrap_or_else(default_data_dir);
    let registry = file
        .install
        .as_ref()
        .and_then(|i| i.npm_registry.clone())
        .unwrap_or_else(|| crate::deps::DEFAULT_NPM_REGISTRY.to_owned());
    let rules = resolve_rules(&file, &absolute(data_dir), &registry)?;
    Ok((resolve_runtimes(&file)?, rules))
}

fn read_file(path: &Path) -> Result<FileConfig, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("cannot read config {}: {e}", path.display()))?;
    toml::from_str(&text).map_err(|e| format!("invalid config {}: {e}", path.display()))
}

fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// `$XDG_DATA_HOME/skilld`, else `~/.local/share/skilld`, else `./.skilld`.
pub fn default_data_dir() -> PathBuf {
    if let Some(x) = std::env::var_os("XDG_DATA_HOME").filter(|x| !x.is_empty()) {
        return PathBuf::from(x).join("skilld");
    }
    home().map_or_else(|| PathBuf::from(".skilld"), |h| h.join(".local/share/skilld"))
}

/// The git root holding the current directory, else HOME (`docs/design.md` §3).
/// `path` made absolute against the current directory (as it stands);
/// unchanged when that cannot be read.
pub fn absolute(path: PathBuf) -> PathBuf {
    std::path::absolute(&path).unwrap_or(path)
}

pub fn default_workspace() -> PathBuf {
    let cwd = std::env::current_dir().ok();
    if let Some(root) = cwd
        .as_deref()
        .and_then(|c| c.ancestors().find(|a| a.join(".git").exists()))
    {
        return root.to_path_buf();
    }
    home().or(cwd).unwrap_or_else(|| PathBuf::from("/"))
}

/// The `skills/` directory that ships with skilld: beside the binary's
/// install prefix (`<prefix>/share/skilld/skills`), else the source tree it
/// was built from, else `./skills`.
pub fn bundled_dir() -> PathBuf {
    if let Some(prefix) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().and_then(Path::parent).map(Path::to_path_buf))
    {
        let installed = prefix.join("share/skilld/skills");
        if installed.is_dir() {
            return installed;
        }
    }
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("skills");
    if source.is_dir() {
        return source;
    }
    PathBuf::from("skills")
}

/// `docs/design.md` §2's sources, in precedence order.
/// The user's own skills: `$XDG_CONFIG_HOME/skilld/skills`, else
/// `~/.config/skilld/skills`.
pub fn user_skills_dir() -> Option<PathBuf> {
    let set = |name| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    match set("XDG_CONFIG_HOME") {
        Some(config) => Some(config.join("skilld/skills")),
        None => home().map(|h| h.join(".config/skilld/skills")),
    }
}

pub fn default_roots(workspace: &Path, data_dir: &Path) -> Vec<Root> {
    let mut roots = vec![Root {
        name: "bundled".to_owned(),
        path: bundled_dir(),
        trust: Trust::Bundled,
        explicit: false,
        installed: false,
    }];
    if let Some(path) = user_skills_dir() {
        roots.push(Root {
            name: "user".to_owned(),
            path,
            trust: Trust::User,
            explicit: false,
            installed: false,
        });
    }
    roots.push(Root {
        name: "project".to_owned(),
        path: workspace.join(".agent/skills"),
        trust: Trust::User,
        explicit: false,
        installed: false,
    });
    roots.push(installed_root(data_dir));
    roots
}

/// Where `POST /skills` installs: `<data dir>/installed`, untrusted.
pub fn installed_root(data_dir: &Path) -> Root {
    Root {
        name: "installed".to_owned(),
        path: data_dir.join("installed"),
        trust: Trust::Untrusted,
        explicit: false,
        installed: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_beat_file_beats_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("skilld.toml");
        std::fs::write(
            &file,
            "bind = \"127.0.0.1:9000\"\nskills = [\"untrusted=/a\"]\nmax_timeout_secs = 60\n",
        )
        .unwrap();
        let mut args = ServeArgs {
            local: LocalArgs {
                config: Some(file),
                ..LocalArgs::default()
            },
            ..ServeArgs::default()
        };
        let c = Config::resolve(&args).unwrap();
        assert_eq!(c.bind.port(), 9000);
        assert_eq!(c.max_timeout_secs, 60);
        assert_eq!(c.roots[0].trust, Trust::Untrusted);
        args.bind = Some("127.0.0.1:0".into());
        args.local.skills = vec!["/b".into()];
        let c = Config::resolve(&args).unwrap();
        assert_eq!(c.bind.port(), 0);
        assert_eq!(c.roots[0].path, PathBuf::from("/b"));
        assert_eq!(c.roots[0].trust, Trust::User);
    }

    #[test]
    fn public_bind_needs_insecure() {
        let mut args = ServeArgs {
            bind: Some("0.0.0.0:8080".into()),
            ..ServeArgs::default()
        };
        assert!(Config::resolve(&args).is_err());
        args.insecure = Some(true);
        assert!(Config::resolve(&args).is_ok());
    }

    fn with_file(text: &str) -> (tempfile::TempDir, ServeArgs) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("skilld.toml");
        std::fs::write(&file, text).unwrap();
        let args = ServeArgs {
            local: LocalArgs {
                config: Some(file),
                ..LocalArgs::default()
            },
            ..ServeArgs::default()
        };
        (dir, args)
    }

    #[test]
    fn the_file_sets_the_image_allowlist_and_entrypoint_defaults() {
        let (_dir, args) = with_file(
            "data_dir = \"/srv/skilld\"\nimage_allowlist = [\"python:3.12-slim\", \"ghcr.io/acme/*\"]\n\
             entrypoint_timeout_secs = 90\nentrypoint_memory_bytes = 536870912\nentrypoint_cpu = 1.5\n",
        );
        let c = Config::resolve(&args).unwrap();
        assert_eq!(c.rules.image_allowlist, ["python:3.12-slim", "ghcr.io/acme/*"]);
        assert!(c.rules.allows_image("ghcr.io/acme/tool:2") && !c.rules.allows_image("node:20-slim"));
        let d = c.rules.entrypoint;
        assert_eq!(
            (d.timeout_secs, d.memory_bytes, d.cpu),
            (90, Some(512 << 20), Some(1.5))
        );
        assert_eq!(c.rules.deps_dir, Some(PathBuf::from("/srv/skilld/deps")));
        // Seed 003's, without the file.
        let c = Config::resolve(&ServeArgs::default()).unwrap();
        assert_eq!(
            c.rules.image_allowlist,
            ["python:3.12-slim", "node:20-slim", "bash:5"]
        );
        let d = c.rules.entrypoint;
        assert_eq!(
            (d.timeout_secs, d.memory_bytes, d.cpu),
            (120, Some(256 << 20), Some(0.5))
        );
        for bad in [
            "entrypoint_cpu = 0.0\n",
            "entrypoint_timeout_secs = 0\n",
            "image_allowlist = [\"\"]\n",
        ] {
            let (_dir, args) = with_file(bad);
            assert!(Config::resolve(&args).is_err(), "{bad}");
        }
    }

    #[test]
    fn tokens_from_file_and_env_merge() {
        use crate::auth::Role;
        let sha = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(b"approver-secret"));
        let (_dir, mut args) = with_file(&format!(
            "[[tokens]]\nname = \"agent\"\nrole = \"invoke\"\nsecret = \"agent-secret\"\n\
             [[tokens]]\nname = \"boss\"\nrole = \"approve\"\nsecret_sha256 = \"{sha}\"\n"
        ));
        args.tokens = Some(TokenList("ops:admin:ops-secret".into()));
        let c = Config::resolve(&args).unwrap();
        let found = |s: &str| c.auth.find(s).map(|t| (t.name().to_owned(), t.role()));
        assert_eq!(found("agent-secret"), Some(("agent".into(), Role::Invoke)));
        assert_eq!(found("approver-secret"), Some(("boss".into(), Role::Approve)));
        assert_eq!(found("ops-secret"), Some(("ops".into(), Role::Admin)));
        assert_eq!(found(&sha), None);
        // The secrets never reach the debug print of the configuration.
        let printed = format!("{c:?}");
        assert!(
            printed.contains("agent") && !printed.contains("agent-secret"),
            "{printed}"
        );
        assert!(
            !printed.contains("ops-secret") && !printed.contains(&sha),
            "{printed}"
        );

        args.tokens = Some(TokenList("agent:read:other".into()));
        assert_eq!(
            Config::resolve(&args).unwrap_err(),
            "token 'agent' is defined twice (config file and SKILLD_TOKENS)"
        );
    }

    #[test]
    fn token_config_errors_name_the_token() {
        let cases = [
            (
                "name = \"a\"\nrole = \"root\"\nsecret = \"x\"",
                "token 'a' (config file): unknown role 'root'",
            ),
            (
                "name = \"a\"\nrole = \"read\"\nsecret = \"\"",
                "token 'a' (config file): the secret is empty",
            ),
            (
                "name = \"a\"\nrole = \"read\"\nsecret_sha256 = \"zz\"",
                "token 'a' (config file): secret_sha256 must be 64",
            ),
            (
                "name = \"a\"\nrole = \"read\"",
                "token 'a' (config file): give its secret",
            ),
            ("name = \"a\"\nrole = \"read\"\nsecert = \"x\"", "secert"),
        ];
        for (table, expected) in cases {
            let (_dir, args) = with_file(&format!("[[tokens]]\n{table}\n"));
            let err = Config::resolve(&args).unwrap_err();
            assert!(err.contains(expected), "{table}: {err}");
        }
        let args = ServeArgs {
            tokens: Some(TokenList("a:read:hunter2,hunter2".into())),
            ..ServeArgs::default()
        };
        let err = Config::resolve(&args).unwrap_err();
        assert_eq!(err, "SKILLD_TOKENS entry 2 is not name:role:secret");
    }

    #[test]
    fn tokens_allow_a_public_bind() {
        let args = ServeArgs {
            bind: Some("0.0.0.0:8080".into()),
            tokens: Some(TokenList("a:read:s".into())),
            ..ServeArgs::default()
        };
        assert!(!Config::resolve(&args).unwrap().auth.is_open());
        let args = ServeArgs {
            bind: Some("0.0.0.0:8080".into()),
            tokens: Some(TokenList(" , ".into())),
            ..ServeArgs::default()
        };
        assert!(Config::resolve(&args).unwrap_err().contains("without tokens"));
    }

    #[test]
    fn oauth_issuers_allow_a_public_bind() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("skilld.toml");
        std::fs::write(
            &file,
            "[oauth]\nclock_skew_secs = 5\n[[oauth.issuers]]\nissuer = \"https://login.example.com\"\n",
        )
        .unwrap();
        let args = ServeArgs {
            local: LocalArgs {
                config: Some(file),
                ..LocalArgs::default()
            },
            bind: Some("0.0.0.0:8080".into()),
            ..ServeArgs::default()
        };
        let config = Config::resolve(&args).unwrap();
        let oauth = config.oauth.unwrap();
        assert_eq!(oauth.issuers[0].name, "login.example.com");
        assert_eq!(oauth.clock_skew, std::time::Duration::from_secs(5));
        let flagged = ServeArgs {
            bind: Some("0.0.0.0:8080".into()),
            oauth_issuers: vec!["http://login.example.com".into()],
            ..ServeArgs::default()
        };
        assert!(Config::resolve(&flagged).unwrap_err().contains("https"));
    }

    #[test]
    fn unknown_file_keys_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("skilld.toml");
        std::fs::write(&file, "bnid = \"x\"\n").unwrap();
        let args = ServeArgs {
            local: LocalArgs {
                config: Some(file),
                ..LocalArgs::default()
            },
            ..ServeArgs::default()
        };
        assert!(Config::resolve(&args).unwrap_err().contains("bnid"));
    }

    #[test]
    fn connection_and_share_limits_are_read_and_checked() {
        let (_dir, args) = with_file(
            "max_connections = 50\nheader_timeout_secs = 3\nmax_event_streams = 8\n\
             max_mcp_sessions = 20\nmax_mcp_sessions_per_caller = 5\n",
        );
        let c = Config::resolve(&args).unwrap();
        assert_eq!(c.limits.max_connections, 50);
        assert_eq!(c.limits.header_timeout, std::time::Duration::from_secs(3));
        assert_eq!(c.limits.max_mcp_sessions_per_caller, 5);
        // The default share, above a smaller whole, is the whole.
        assert_eq!(c.run.max_streams_per_caller, 8);
        let (_dir, args) = with_file("max_event_streams = 8\nmax_event_streams_per_caller = 9\n");
        assert_eq!(
            Config::resolve(&args).unwrap_err(),
            "max_event_streams_per_caller (9) is more than max_event_streams (8)"
        );
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(redact_url("postgres://u:pw@h/db"), "postgres://u:***@h/db");
        assert_eq!(redact_url("sqlite:///x.db"), "sqlite:///x.db");
    }
}
