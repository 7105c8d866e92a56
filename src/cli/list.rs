//! `skilld list [--available]` (seed 002's `skill list`): the skills this
//! data directory or a server (`--to`) serves, or those the registries
//! offer.

use super::failure::Failure;
use super::manage::{Local, Place, Remote, finish};
use crate::catalog::AgentTools;
use crate::http::skills::SkillList;
use crate::registry::{Registries, RegistrySource};
use clap::Args;
use hyper::Method;
use serde_json::Value;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct ListArgs {
    /// The skills the registries offer, instead of those served.
    #[arg(long)]
    available: bool,
    /// With `--available`: a registry, as `skilld search` takes it;
    /// replaces the config's `[[registries]]`.
    #[arg(
        long = "registry",
        env = "SKILLD_REGISTRIES",
        value_delimiter = ',',
        value_name = "URL"
    )]
    registries: Vec<String>,
    /// With `--available`: ask every registry afresh.
    #[arg(long)]
    refresh: bool,
    #[command(flatten)]
    place: Place,
}

pub fn list(args: &ListArgs) -> ExitCode {
    finish(args.place.format, async {
        if args.available {
            return available(args).await;
        }
        let value = match Remote::of(&args.place)? {
            Some(remote) => remote.call(Method::GET, "/skills", None).await?.1,
            None => {
                let local = Local::open(&args.place).await?;
                let list = SkillList::of(&local.catalog.current(), &AgentTools::unstated(), |_, _| true);
                local.close().await;
                serde_json::to_value(list).map_err(|e| Failure::Unreachable(e.to_string()))?
            }
        };
        let text = served_text(&value);
        Ok((value, text))
    })
}

/// `NAME@VERSION  SOURCE  TRUST  DESCRIPTION`, a line per skill.
fn served_text(list: &Value) -> String {
    let skills = list["skills"].as_array().map(Vec::as_slice).unwrap_or_default();
    if skills.is_empty() {
        return "no skills\n".to_owned();
    }
    skills
        .iter()
        .map(|s| {
            let text = |k: &str| s[k].as_str().unwrap_or_default().replace(['\n', '\t'], " ");
            let version = s["version"].as_str().map(|v| format!("@{v}")).unwrap_or_default();
            format!(
                "{}{version}\t{}\t{}\t{}\n",
                text("name"),
                text("source"),
                text("trust"),
                text("description")
            )
        })
        .collect()
}

/// What every registry offers, as `skilld search` with no words prints it.
async fn available(args: &ListArgs) -> Result<(Value, String), Failure> {
    let mut config = args.place.config()?;
    if !args.registries.is_empty() {
        config.registries.sources = args.registries.iter().map(|u| RegistrySource::new(u)).collect();
    }
    let store = crate::server::open_store(&config, false)
        .await
        .map_err(|e| Failure::Unreachable(format!("{e:#}")))?;
    let mut registries = Registries::new(config.registries.clone(), store.index_cache);
    registries.refresh = args.refresh;
    let (hits, failed) = registries.search("").await?;
    for e in &failed {
        eprintln!("skilld: not listed: {e}");
    }
    if hits.is_empty() && !failed.is_empty() {
        return Err(Failure::Unreachable("no registry could be read".to_owned()));
    }
    let (list, mut text) = super::registry::offered(hits.iter().map(|(url, s)| (url.as_str(), s)));
    if hits.is_empty() {
        text.push_str("no skills\n");
    }
    Ok((list, text))
}
