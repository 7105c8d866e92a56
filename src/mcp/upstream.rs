//! The prompts and resources of the MCP servers skills front
//! (`docs/gateway.md`), served beside skilld's own: a prompt as
//! `<skill>:<prompt>`, a resource under skilld's URI of it,
//! `upstream://<skill>/<its URI, percent-encoded>` (never the URI the
//! server gave, which could be a `skill://` one), each fetched from that
//! skill's server alone when asked. Untrusted skills' servers serve none:
//! their code runs only for a call a person let run.

use super::shaped;
use crate::backend::upstream_uri;
use crate::catalog::Catalog;
use crate::skill::{Skill, Trust};
use rmcp::ErrorData;
use rmcp::model::{GetPromptResult, ReadResourceResult};
use serde_json::{Value, json};
use std::sync::Arc;

/// Skills whose servers' extras are served.
fn fronting(catalog: &Catalog) -> impl Iterator<Item = &Arc<Skill>> {
    catalog
        .skills
        .iter()
        .filter(|s| s.trust != Trust::Untrusted && s.upstream.is_some() && s.backend.is_some())
}

/// Every server's prompts, each named `<skill>:<prompt>`.
pub(super) fn prompts(catalog: &Catalog) -> Vec<Value> {
    fronting(catalog)
        .flat_map(|skill| {
            let listed = skill.upstream.iter().flat_map(|u| u.prompts.iter());
            listed.filter_map(|p| {
                let mut p = p.clone();
                let name = p.get("name")?.as_str()?.to_owned();
                p["name"] = json!(format!("{}:{name}", skill.name));
                Some(p)
            })
        })
        .collect()
}

/// Prompt `name` of a server, when it is one (`<skill>:<prompt>`).
pub(super) async fn prompt(
    catalog: &Catalog,
    name: &str,
    arguments: Value,
) -> Option<Result<GetPromptResult, ErrorData>> {
    let (skill, prompt) = name.split_once(':')?;
    let skill = fronting(catalog).find(|s| s.name == skill)?;
    let offered = skill
        .upstream
        .as_ref()?
        .prompts
        .iter()
        .any(|p| p["name"] == prompt);
    let backend = skill.backend.as_ref().filter(|_| offered)?;
    Some(match backend.get_prompt(prompt, arguments).await {
        Ok(result) => shaped(result),
        Err(why) => Err(ErrorData::internal_error(why.to_string(), None)),
    })
}

/// Every server's resources, each under its skill's namespace (the
/// backend lists them so; one that is not is left out).
pub(super) fn resources(catalog: &Catalog) -> Vec<Value> {
    fronting(catalog)
        .flat_map(|skill| own_resources(skill).cloned())
        .collect()
}

/// The resources `skill` lists that lie in its namespace.
fn own_resources(skill: &Skill) -> impl Iterator<Item = &Value> {
    let listed = skill.upstream.iter().flat_map(|u| u.resources.iter());
    listed.filter(|r| {
        r["uri"]
            .as_str()
            .is_some_and(|uri| upstream_uri::is_of(&skill.name, uri))
    })
}

/// Resource `uri` (an `upstream://` URI skilld gave), read from the
/// server of the skill whose namespace it lies in, if that skill lists it.
pub(super) async fn read(catalog: &Catalog, uri: &str) -> Option<Result<ReadResourceResult, ErrorData>> {
    let skill = fronting(catalog).find(|s| own_resources(s).any(|r| r["uri"] == uri))?;
    let backend = skill.backend.as_ref()?;
    Some(match backend.read_resource(uri).await {
        Ok(result) => shaped(result),
        Err(why) => Err(ErrorData::internal_error(why.to_string(), None)),
    })
}
