//! The prompts and resources of the MCP servers skills front
//! (`docs/gateway.md`), served beside skilld's own: a prompt as
//! `<skill>:<prompt>`, a resource under the URI its server gave, each
//! fetched from that server when asked. Untrusted skills' servers serve
//! none: their code runs only for a call a person let run.

use super::shaped;
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
        Err(why) => Err(ErrorData::internal_error(why, None)),
    })
}

/// Every server's resources, under their own URIs; a URI two servers
/// give is the first one's.
pub(super) fn resources(catalog: &Catalog) -> Vec<Value> {
    let mut seen = std::collections::HashSet::new();
    fronting(catalog)
        .flat_map(|skill| skill.upstream.iter().flat_map(|u| u.resources.iter()))
        .filter(|r| r["uri"].as_str().is_some_and(|uri| seen.insert(uri.to_owned())))
        .cloned()
        .collect()
}

/// Resource `uri` of the first server that lists it.
pub(super) async fn read(catalog: &Catalog, uri: &str) -> Option<Result<ReadResourceResult, ErrorData>> {
    let skill = fronting(catalog).find(|s| {
        s.upstream
            .as_ref()
            .is_some_and(|u| u.resources.iter().any(|r| r["uri"] == uri))
    })?;
    let backend = skill.backend.as_ref()?;
    Some(match backend.read_resource(uri).await {
        Ok(result) => shaped(result),
        Err(why) => Err(ErrorData::internal_error(why, None)),
    })
}
