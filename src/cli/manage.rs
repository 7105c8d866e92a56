//! `skilld info`, `skilld remove` and `skilld permissions` (seed 002's
//! `skill info`, `remove` and `permissions`): a skill's record, its
//! removal, and the grants standing for it. Each acts on this machine's
//! data directory, through the same parts a server uses, or with `--to`
//! on a running server, through its API; both build the API's own
//! answers, so the two print the same.

use super::failure::{Failure, report};
use crate::config::{Config, LocalArgs, ServeArgs};
use crate::http::grants::{GrantList, GrantView, SkillApprovalView};
use crate::http::install::VersionList;
use crate::http::skills::SkillDetail;
use crate::install::client;
use crate::install::{InstallError, Installer};
use crate::invoke::Invoker;
use crate::server::{pipeline, runtime};
use clap::{Args, ValueEnum};
use hyper::Method;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// Where a verb acts.
#[derive(Debug, Clone, Args)]
pub struct Place {
    /// Act on this running server (`http://HOST:PORT`) instead of this
    /// machine's data directory.
    #[arg(long, value_name = "URL")]
    to: Option<String>,
    /// Bearer token for `--to` (prefer the environment). Without one, a
    /// server on this machine (a loopback address) gets the local secret
    /// of the data directory.
    #[arg(
        long = "to-token",
        env = "SKILLD_TO_TOKEN",
        hide_env_values = true,
        value_name = "T"
    )]
    to_token: Option<String>,
    /// The data directory (as `skilld serve` takes it).
    #[arg(long = "data-dir", env = "SKILLD_DATA_DIR", value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// A skills directory, `[TRUST=]DIR`, as `skilld serve` takes it
    /// (default: serve's roots).
    #[arg(
        long = "skills",
        env = "SKILLD_SKILLS",
        value_delimiter = ',',
        value_name = "[TRUST=]DIR"
    )]
    skills: Vec<String>,
    /// A config file, for the data directory, roots and database.
    #[arg(long, env = "SKILLD_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// `text` (default) or `json`: the API's answers, as one object.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    pub(super) format: Output,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Text,
    Json,
}

#[derive(Debug, Args)]
pub struct InfoArgs {
    /// The skill: `NAME`, or `NAME@VERSION` of an installed version.
    #[arg(value_name = "NAME[@VERSION]")]
    name: String,
    #[command(flatten)]
    place: Place,
}

#[derive(Debug, Args)]
pub struct RemoveArgs {
    /// An installed skill (every version), or `NAME@VERSION` for one.
    #[arg(value_name = "NAME[@VERSION]")]
    name: String,
    /// Cancel its runs in flight first, instead of refusing.
    #[arg(long)]
    force: bool,
    /// The lock file whose entry goes with it (default
    /// `<data dir>/skills.lock`, as `install` writes).
    #[arg(long, value_name = "FILE")]
    lock: Option<PathBuf>,
    #[command(flatten)]
    place: Place,
}

#[derive(Debug, Args)]
pub struct PermissionsArgs {
    /// The skill.
    #[arg(value_name = "NAME")]
    name: String,
    /// Revoke every grant of the skill (every tool, every version).
    #[arg(long)]
    revoke: bool,
    #[command(flatten)]
    place: Place,
}

/// Runs `verb` on a runtime and prints its value as `format` asks.
pub(super) fn finish<F>(format: Output, verb: F) -> ExitCode
where
    F: std::future::Future<Output = Result<(Value, String), Failure>>,
{
    let outcome = match runtime() {
        Ok(rt) => rt.block_on(verb),
        Err(e) => Err(Failure::Unreachable(format!("{e:#}"))),
    };
    report(outcome.map(|(value, text)| match format {
        Output::Json => format!("{value}\n"),
        Output::Text => text,
    }))
}

/// `NAME[@VERSION]` as skills are named, checked before it goes into a
/// path: a `?` or `/` would make it another request.
fn checked(spec: &str) -> Result<&str, Failure> {
    let (name, version) = crate::catalog::versions::split_spec(spec);
    let name_ok = crate::skill::names::check_name(name) != crate::skill::names::NameCheck::Invalid;
    let version_ok = version.is_none_or(|v| {
        !v.is_empty()
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+'))
    });
    match name_ok && version_ok {
        true => Ok(spec),
        false => Err(Failure::Refused(format!(
            "'{spec}' is not a skill name (lowercase letters, digits and single hyphens, \
             optionally @VERSION)"
        ))),
    }
}

pub fn info(args: &InfoArgs) -> ExitCode {
    finish(args.place.format, async {
        checked(&args.name)?;
        let value = match Remote::of(&args.place)? {
            Some(remote) => remote.info(&args.name).await?,
            None => Local::open(&args.place).await?.info(&args.name).await?,
        };
        let text = info_text(&value);
        Ok((value, text))
    })
}

pub fn remove(args: &RemoveArgs) -> ExitCode {
    finish(args.place.format, async {
        checked(&args.name)?;
        match Remote::of(&args.place)? {
            Some(remote) => {
                let path = format!("/skills/{}?force={}", args.name, args.force);
                remote.call(Method::DELETE, &path, None).await?;
            }
            None => {
                let local = Local::open(&args.place).await?;
                let (name, version) = crate::catalog::versions::split_spec(&args.name);
                let removed = local.installer.remove(name, version, args.force).await;
                local.close().await;
                removed?;
            }
        }
        unlock(args)?;
        Ok((json!({"removed": args.name}), format!("removed {}\n", args.name)))
    })
}

pub fn permissions(args: &PermissionsArgs) -> ExitCode {
    finish(args.place.format, async {
        checked(&args.name)?;
        if args.name.contains('@') {
            return Err(Failure::Refused(
                "grants stand for a skill across its versions (each bound to one hash): give NAME".to_owned(),
            ));
        }
        let value = match Remote::of(&args.place)? {
            Some(remote) => remote.permissions(&args.name, args.revoke).await?,
            None => {
                let local = Local::open(&args.place).await?;
                let value = local.permissions(&args.name, args.revoke).await;
                local.close().await;
                value?
            }
        };
        let text = permissions_text(&args.name, &value);
        Ok((value, text))
    })
}

/// Drops a removed skill's entry from the lock, when the lock names the
/// version removed (or every version went).
fn unlock(args: &RemoveArgs) -> Result<(), Failure> {
    use crate::registry::lock::Lock;
    let path = match &args.lock {
        Some(path) => path.clone(),
        None => args.place.config()?.data_dir.join("skills.lock"),
    };
    let (name, version) = crate::catalog::versions::split_spec(&args.name);
    let mut lock = Lock::read(&path).map_err(|e| Failure::Refused(e.to_string()))?;
    let named = lock
        .entry(name)
        .is_some_and(|l| version.is_none_or(|v| v == l.version));
    if named && lock.remove(name) {
        lock.write(&path)
            .map_err(|e| Failure::Unreachable(format!("removed, but {e}")))?;
    }
    Ok(())
}

/// A running server, through its API.
pub(super) struct Remote {
    server: String,
    token: Option<String>,
}

impl Remote {
    /// The server `--to` names, if any, with the token to send it.
    pub(super) fn of(place: &Place) -> Result<Option<Self>, Failure> {
        let Some(server) = place.to.clone() else {
            return Ok(None);
        };
        let token = match &place.to_token {
            Some(token) => Some(token.clone()),
            None if client::is_loopback_url(&server) => {
                let config = place.config()?;
                crate::local_secret::read(&config.data_dir).map_err(|e| {
                    Failure::Refused(format!(
                        "cannot read the local secret of {}: {e}",
                        config.data_dir.display()
                    ))
                })?
            }
            None => None,
        };
        Ok(Some(Self { server, token }))
    }

    pub(super) async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(u16, Value), Failure> {
        Ok(client::call(&self.server, method, path, self.token.as_deref(), body).await?)
    }

    async fn info(&self, name: &str) -> Result<Value, Failure> {
        let (_, skill) = self.call(Method::GET, &format!("/skills/{name}"), None).await?;
        let bare = skill["name"].as_str().unwrap_or(name).to_owned();
        let versions = match self
            .call(Method::GET, &format!("/skills/{bare}/versions"), None)
            .await
        {
            Ok((_, list)) => list,
            Err(Failure::Refused(_)) => Value::Null,
            Err(e) => return Err(e),
        };
        // Reading grants takes the invoke role: a read token sees the rest.
        let grants = match self
            .call(Method::GET, &format!("/grants?skill={bare}"), None)
            .await
        {
            Ok((_, list)) => list["grants"].clone(),
            Err(Failure::Refused(_)) => Value::Null,
            Err(e) => return Err(e),
        };
        let egress = self.egress_grants(&bare).await?;
        Ok(with_egress(
            json!({"skill": skill, "versions": versions, "grants": grants}),
            egress,
        ))
    }

    /// The skill's egress grants; null where this token may not read them.
    async fn egress_grants(&self, name: &str) -> Result<Value, Failure> {
        match self
            .call(Method::GET, &format!("/egress/grants?skill={name}"), None)
            .await
        {
            Ok((_, list)) => Ok(list["items"].clone()),
            Err(Failure::Refused(_)) => Ok(Value::Null),
            Err(e) => Err(e),
        }
    }

    async fn permissions(&self, name: &str, revoke: bool) -> Result<Value, Failure> {
        let (_, skill) = self.call(Method::GET, &format!("/skills/{name}"), None).await?;
        let revoked = if revoke {
            let (_, answer) = self
                .call(Method::DELETE, &format!("/grants?skill={name}"), None)
                .await?;
            self.call(Method::DELETE, &format!("/egress/grants?skill={name}"), None)
                .await?;
            Some((answer["revoked"].clone(), answer["skill_approvals"].clone()))
        } else {
            None
        };
        let (_, standing) = self
            .call(Method::GET, &format!("/grants?skill={name}"), None)
            .await?;
        let standing = Standing {
            grants: standing["grants"].clone(),
            skill_approvals: standing["skill_approvals"].clone(),
        };
        let value = permissions_value(&skill["permissions"], standing, revoked);
        Ok(with_egress(value, self.egress_grants(name).await?))
    }
}

/// This machine's data directory, through the parts a server uses.
pub(super) struct Local {
    config: Config,
    invoker: Arc<Invoker>,
    approver: crate::invoke::Approver,
    pub(super) catalog: Arc<crate::catalog::CatalogHandle>,
    installer: Installer,
}

impl Place {
    pub(super) fn config(&self) -> Result<Config, Failure> {
        Config::resolve(&ServeArgs {
            local: LocalArgs {
                config: self.config.clone(),
                data_dir: self.data_dir.clone(),
                skills: self.skills.clone(),
                no_watch: Some(true),
                ..LocalArgs::default()
            },
            ..ServeArgs::default()
        })
        .map_err(Failure::from)
    }
}

impl Local {
    pub(super) async fn open(place: &Place) -> Result<Self, Failure> {
        let config = place.config()?;
        let crate::server::Pipeline {
            invoker,
            approver,
            catalog,
            ..
        } = pipeline(&config, false)
            .await
            .map_err(|e| Failure::Unreachable(format!("{e:#}")))?;
        let installer = Installer::new(catalog.clone(), invoker.clone(), config.install.clone());
        Ok(Self {
            config,
            invoker,
            approver,
            catalog,
            installer,
        })
    }

    pub(super) async fn close(&self) {
        self.invoker.shutdown(self.config.shutdown_grace).await;
    }

    fn skill(&self, name: &str) -> Result<Arc<crate::skill::Skill>, Failure> {
        self.catalog
            .current()
            .find(name)
            .map(|found| found.skill)
            .map_err(|e| Failure::Refused(e.to_string()))
    }

    async fn grants(&self, name: &str) -> Result<Value, Failure> {
        let grants = self.approver.reader().list_grants(Some(name)).await?;
        let grants: Vec<GrantView> = grants.into_iter().map(GrantView::from).collect();
        let list = GrantList {
            grants,
            skill_approvals: None,
        };
        Ok(json!(list)["grants"].clone())
    }

    /// The grants and the "allow always" standing for skill `name`.
    async fn standing(&self, name: &str) -> Result<Standing, Failure> {
        let approvals = self.approver.reader().list_skill_approvals(Some(name)).await?;
        let approvals: Vec<SkillApprovalView> = approvals.into_iter().map(SkillApprovalView::from).collect();
        Ok(Standing {
            grants: self.grants(name).await?,
            skill_approvals: json!(approvals),
        })
    }

    async fn info(&self, name: &str) -> Result<Value, Failure> {
        let skill = self.skill(name)?;
        let versions = match self.installer.state(&skill.name) {
            Ok(state) => json!(VersionList::new(&skill.name, state)),
            Err(InstallError::NotFound(_) | InstallError::OtherSource { .. } | InstallError::NoRoot) => {
                Value::Null
            }
            Err(e) => return Err(e.into()),
        };
        let grants = self.grants(&skill.name).await;
        let egress = self.egress_grants(&skill.name).await;
        self.close().await;
        let value = json!({"skill": SkillDetail::new(&skill), "versions": versions, "grants": grants?});
        Ok(with_egress(value, egress?))
    }

    /// The skill's egress grants, as `GET /egress/grants` lists them.
    async fn egress_grants(&self, name: &str) -> Result<Value, Failure> {
        let Some(asking) = self.invoker.egress_asking() else {
            return Ok(json!([]));
        };
        let grants = asking.store().egress_grants(Some(name)).await?;
        let grants: Vec<crate::http::egress::EgressGrantView> = grants.into_iter().map(Into::into).collect();
        Ok(json!(grants))
    }

    async fn permissions(&self, name: &str, revoke: bool) -> Result<Value, Failure> {
        let declared = self.skill(name).map(|s| json!(s.permissions));
        let revoked = match revoke {
            true => {
                let (grants, approvals) = self.approver.revoke_grants_of(name).await?;
                if let Some(asking) = self.invoker.egress_asking() {
                    asking.store().revoke_egress_grants_of(name).await?;
                }
                Some((json!(grants), json!(approvals)))
            }
            false => None,
        };
        // A skill no longer loaded can still have grants to revoke.
        let declared = match (declared, revoke) {
            (Ok(list), _) => list,
            (Err(_), true) => Value::Null,
            (Err(e), false) => return Err(e),
        };
        let value = permissions_value(&declared, self.standing(name).await?, revoked);
        Ok(with_egress(value, self.egress_grants(name).await?))
    }
}

/// `value` with the skill's egress grants and, where `value` holds the
/// skill, the `network.allow` they suggest.
fn with_egress(mut value: Value, grants: Value) -> Value {
    if grants.as_array().is_some_and(|g| !g.is_empty()) && value["skill"].is_object() {
        let suggested = super::egress_view::suggested_allow(&value["skill"], &grants);
        value["suggested_network_allow"] = super::egress_view::allow_line(&suggested);
    }
    value["egress_grants"] = grants;
    value
}

/// What stands for a skill: its grants and its skill approvals, as the
/// API lists them.
struct Standing {
    grants: Value,
    skill_approvals: Value,
}

/// `skilld permissions`' JSON; `revoked` is how many grants and skill
/// approvals `--revoke` took back.
fn permissions_value(declared: &Value, standing: Standing, revoked: Option<(Value, Value)>) -> Value {
    let mut value = json!({
        "permissions": declared, "grants": standing.grants, "skill_approvals": standing.skill_approvals
    });
    if let Some((grants, approvals)) = revoked {
        value["revoked"] = grants;
        value["revoked_skill_approvals"] = approvals;
    }
    value
}

/// `skilld info`'s text: the manifest's main fields, its versions and grants.
fn info_text(v: &Value) -> String {
    let s = &v["skill"];
    let text = |x: &Value| x.as_str().unwrap_or("-").to_owned();
    let list = |x: &Value| {
        let items: Vec<String> = x.as_array().into_iter().flatten().map(&text).collect();
        if items.is_empty() {
            "-".to_owned()
        } else {
            items.join(", ")
        }
    };
    let tools: Vec<Value> = s["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| t["name"].clone())
        .collect();
    let mut out = format!(
        "{} {} ({}, from {})\n  {}\n",
        text(&s["name"]),
        s["version"].as_str().unwrap_or("(no version)"),
        text(&s["trust"]),
        text(&s["source"]),
        text(&s["description"])
    );
    out.push_str(&format!("  hash         {}\n", text(&s["hash"])));
    out.push_str(&format!("  tools        {}\n", list(&Value::from(tools))));
    out.push_str(&format!("  permissions  {}\n", list(&s["permissions"])));
    out.push_str(&format!("  modes        {}\n", list(&s["modes"])));
    out.push_str(&format!("  state        {}\n", state_text(v)));
    out.push_str(&grants_text(&v["grants"]));
    out.push_str(&super::egress_view::egress_text(v));
    out
}

/// Loaded, and for an installed skill each version and its status.
fn state_text(v: &Value) -> String {
    let Some(versions) = v["versions"]["versions"].as_array() else {
        return "loaded (not installed: served from its directory)".to_owned();
    };
    let each: Vec<String> = versions
        .iter()
        .map(|x| {
            let active = if x["active"] == true { ", serving" } else { "" };
            let signed = match x["signed_by"].as_str() {
                Some(key) => format!(", signed by {key}"),
                None => String::new(),
            };
            format!(
                "{} {}{active}{signed}",
                x["version"].as_str().unwrap_or("?"),
                x["status"].as_str().unwrap_or("?")
            )
        })
        .collect();
    format!("loaded; installed versions: {}", each.join("; "))
}

fn grants_text(grants: &Value) -> String {
    let Some(grants) = grants.as_array() else {
        return "  grants       (not readable with this token: it takes the invoke role)\n".to_owned();
    };
    if grants.is_empty() {
        return "  grants       none: its calls are decided by the policy\n".to_owned();
    }
    let mut out = String::from("  grants\n");
    for g in grants {
        let hash = g["skill_hash"].as_str().unwrap_or_default();
        out.push_str(&format!(
            "    {} {} at {} by {}\n",
            g["tool"].as_str().unwrap_or("?"),
            g["decision"].as_str().unwrap_or("?"),
            &hash[..hash.len().min(12)],
            g["created_by"].as_str().unwrap_or("-")
        ));
    }
    out
}

fn permissions_text(name: &str, v: &Value) -> String {
    let declared: Vec<&str> = v["permissions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut out = match v["permissions"].is_null() {
        true => format!("{name}: not loaded\n"),
        false if declared.is_empty() => format!("{name} declares no permissions\n"),
        false => format!("{name} declares {}\n", declared.join(", ")),
    };
    if let Some(n) = v["revoked"].as_u64() {
        out.push_str(&format!("revoked {n} grant{}\n", if n == 1 { "" } else { "s" }));
    }
    if let Some(n) = v["revoked_skill_approvals"].as_u64() {
        out.push_str(&format!(
            "revoked {n} skill approval{}\n",
            if n == 1 { "" } else { "s" }
        ));
    }
    out.push_str(&grants_text(&v["grants"]));
    out.push_str(&skill_approvals_text(&v["skill_approvals"]));
    out.push_str(&super::egress_view::egress_text(v));
    out
}

/// A line per "allow always" of the skill's permissions.
fn skill_approvals_text(approvals: &Value) -> String {
    let mut out = String::new();
    for a in approvals.as_array().into_iter().flatten() {
        let permissions: Vec<&str> = a["permissions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let permissions = match permissions.is_empty() {
            true => "no permissions".to_owned(),
            false => permissions.join(", "),
        };
        let hash: String = a["skill_hash"]
            .as_str()
            .unwrap_or_default()
            .chars()
            .take(12)
            .collect();
        out.push_str(&format!(
            "  allowed always: {permissions} ({hash}…, by {}, {})\n",
            a["decided_by"].as_str().unwrap_or("-"),
            a["decided_at"].as_str().unwrap_or("?")
        ));
    }
    out
}
