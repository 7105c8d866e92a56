//! Prompts and resources: each skill's instructions as a prompt (and each
//! `prompt_rewrite` command alias as another name for them), and the
//! files its instructions reference as `skill://<skill>/<path>` resources.

use super::shaped;
use crate::catalog::{AgentTools, Catalog};
use crate::skill::MAX_DEFINITION_BYTES;
use crate::skill::files::served_type_of;
use crate::skill::{InvocationMode, Skill};
use rmcp::ErrorData;
use rmcp::model::{GetPromptResult, ListPromptsResult, ListResourcesResult, ReadResourceResult};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

use super::skills::{MARKDOWN, SCHEME};
use crate::skill::listing::SKILL_MD;

/// Each prompt name with the skill it gives, and a title.
fn prompt_names(catalog: &Catalog) -> BTreeMap<String, (&Arc<Skill>, String)> {
    let mut names: BTreeMap<String, (&Arc<Skill>, String)> = catalog
        .skills
        .iter()
        .map(|s| (s.name.clone(), (s, format!("{} instructions", s.name))))
        .collect();
    for entry in &catalog.commands {
        let skill = &catalog.skills[entry.skill];
        if skill.invocation_mode == InvocationMode::PromptRewrite {
            names
                .entry(entry.command.clone())
                .or_insert_with(|| (skill, format!("/{}", entry.command)));
        }
    }
    names
}

/// The skill whose instructions prompt `name` gives.
pub(super) fn prompt_skill<'a>(catalog: &'a Catalog, name: &str) -> Option<&'a Arc<Skill>> {
    let name = name.strip_prefix('/').unwrap_or(name);
    prompt_names(catalog).remove(name).map(|(skill, _)| skill)
}

/// The prompts of the skills `policy` leaves in.
pub(super) fn prompts(catalog: &Catalog, policy: &AgentTools) -> Result<ListPromptsResult, ErrorData> {
    let prompts: Vec<Value> = prompt_names(catalog)
        .into_iter()
        .filter(|(_, (skill, _))| catalog.exclusion(skill, policy).is_none())
        .map(|(name, (skill, title))| json!({ "name": name, "title": title, "description": skill.description }))
        .chain(super::upstream::prompts(catalog))
        .collect();
    shaped(json!({ "prompts": prompts }))
}

/// One prompt, unless `policy` leaves its skill out (an error naming
/// `missing_required_tool` and the missing tools).
pub(super) fn prompt(
    catalog: &Catalog,
    name: &str,
    policy: &AgentTools,
) -> Result<GetPromptResult, ErrorData> {
    let names = prompt_names(catalog);
    let name = name.strip_prefix('/').unwrap_or(name);
    let (skill, _) = names
        .get(name)
        .ok_or_else(|| ErrorData::invalid_params(format!("prompt '{name}' not found"), None))?;
    if let Some(why) = catalog.exclusion(skill, policy) {
        let data = json!({ "code": why.code, "skill": why.skill, "missing": why.missing });
        return Err(ErrorData::invalid_params(
            format!("missing_required_tool: {}", why.message),
            Some(data),
        ));
    }
    // `{baseDir}` is where an MCP client reads the skill's files, not a
    // path on the server's disk.
    let text = match &skill.listing {
        Some(listing) => listing
            .body
            .replace("{baseDir}", &format!("{SCHEME}{}", skill.name)),
        None => skill.instructions.clone(),
    };
    shaped(json!({
        "description": skill.description,
        "messages": [{ "role": "user", "content": { "type": "text", "text": text } }],
    }))
}

/// Each served skill's `SKILL.md`, then the files instructions reference.
pub(super) fn resources(catalog: &Catalog) -> Result<ListResourcesResult, ErrorData> {
    let references = catalog.skills.iter().flat_map(|skill| {
        skill.references().filter_map(|file| {
            let mime = served_type_of(&file.path)?;
            Some(json!({
                "uri": format!("{SCHEME}{}/{}", skill.name, file.path),
                "name": format!("{}/{}", skill.name, file.path),
                "description": format!("Referenced by the instructions of skill {}", skill.name),
                "mimeType": mime,
                "size": file.size,
            }))
        })
    });
    let resources: Vec<Value> = super::skills::skill_md_resources(catalog)
        .chain(references)
        .chain(super::upstream::resources(catalog))
        .collect();
    shaped(json!({ "resources": resources }))
}

/// Whether `uri` names a local skill's file (`skill://`), which only
/// [`read`] answers.
pub(super) fn is_local(uri: &str) -> bool {
    uri.get(..SCHEME.len())
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case(SCHEME))
}

/// Reads `skill://<skill>/<path>`: a file of the skill's own directory,
/// of a served kind, as text when it is UTF-8 and base64 otherwise.
pub(super) async fn read(catalog: &Catalog, uri: &str) -> Result<ReadResourceResult, ErrorData> {
    let not_found =
        || ErrorData::resource_not_found(format!("resource '{uri}' not found"), Some(json!({ "uri": uri })));
    let (skill, path) = uri
        .strip_prefix(SCHEME)
        .and_then(|rest| rest.split_once('/'))
        .ok_or_else(not_found)?;
    if let Some(made) = super::skills::made_skill_md(catalog, uri) {
        let text = String::from_utf8_lossy(made);
        return shaped(json!({ "contents": [{ "uri": uri, "mimeType": MARKDOWN, "text": text }] }));
    }
    let skill = catalog.skill(skill).ok_or_else(not_found)?;
    let mime = if path == SKILL_MD {
        MARKDOWN
    } else {
        served_type_of(path).ok_or_else(not_found)?
    };
    let (dir, rel) = (skill.dir.clone(), path.to_owned());
    let bytes = tokio::task::spawn_blocking(move || {
        crate::skill::files::read_inside(&dir, &rel, MAX_DEFINITION_BYTES).flatten()
    })
    .await
    .map_err(|e| ErrorData::internal_error(e.to_string(), None))?
    .ok_or_else(not_found)?;
    let contents = match String::from_utf8(bytes) {
        Ok(text) => json!({ "uri": uri, "mimeType": mime, "text": text }),
        Err(e) => {
            use base64::Engine;
            let blob = base64::engine::general_purpose::STANDARD.encode(e.into_bytes());
            json!({ "uri": uri, "mimeType": mime, "blob": blob })
        }
    };
    shaped(json!({ "contents": [contents] }))
}
