//! `completion/complete`: skill names and the files of a skill, for the
//! arguments that take them. A `skill://` resource template completes its
//! `{skill}` with skill names and its `{path}` with that skill's served
//! files; a prompt completes an argument named `skill` (or `name`) the
//! same way, and `path` (or `file`) with the files of the skill named in
//! the context, else of the prompt's own. Anything else completes to
//! nothing, which is an answer too.

use crate::catalog::Catalog;
use crate::skill::Skill;
use rmcp::ErrorData;
use rmcp::model::{CompleteRequestParams, CompleteResult, CompletionInfo, Reference};

use std::sync::Arc;

const SCHEME: &str = "skill://";

/// The values matching the argument's prefix, at most
/// [`CompletionInfo::MAX_VALUES`], with how many match in all.
pub(super) fn complete(
    catalog: &Catalog,
    request: &CompleteRequestParams,
) -> Result<CompleteResult, ErrorData> {
    let argument = request.argument.name.as_str();
    let context = |name: &str| request.context.as_ref().and_then(|c| c.get_argument(name));
    let named = |name: Option<&String>| name.and_then(|n| catalog.skill(n));
    let candidates: Vec<String> = match &request.r#ref {
        Reference::Prompt(prompt) => {
            let own = super::catalog::prompt_skill(catalog, &prompt.name).ok_or_else(|| {
                ErrorData::invalid_params(format!("prompt '{}' not found", prompt.name), None)
            })?;
            match argument {
                "skill" | "name" => skill_names(catalog),
                "path" | "file" => files(named(context("skill")).unwrap_or(own)),
                _ => Vec::new(),
            }
        }
        Reference::Resource(template) => match (template.uri.strip_prefix(SCHEME), argument) {
            (Some(_), "skill") => skill_names(catalog),
            (Some(rest), "path") => {
                // `skill://{skill}/{path}` names it in the context;
                // `skill://git/{path}` in the template.
                let fixed = rest.split_once('/').map(|(s, _)| s).filter(|s| !s.contains('{'));
                named(fixed.map(str::to_owned).as_ref().or(context("skill"))).map_or_else(Vec::new, files)
            }
            _ => Vec::new(),
        },
        // A kind of reference newer than this server: nothing to offer.
        _ => Vec::new(),
    };
    super::shaped(serde_json::json!({ "completion": matching(candidates, &request.argument.value) }))
}

fn matching(candidates: Vec<String>, prefix: &str) -> CompletionInfo {
    let mut values: Vec<String> = candidates.into_iter().filter(|c| c.starts_with(prefix)).collect();
    values.sort();
    values.dedup();
    let total = values.len();
    values.truncate(CompletionInfo::MAX_VALUES);
    let mut info = CompletionInfo::default();
    info.has_more = Some(total > values.len());
    info.total = Some(u32::try_from(total).unwrap_or(u32::MAX));
    info.values = values;
    info
}

fn skill_names(catalog: &Catalog) -> Vec<String> {
    catalog.skills.iter().map(|s| s.name.clone()).collect()
}

/// The files a skill serves as resources.
fn files(skill: &Arc<Skill>) -> Vec<String> {
    skill
        .references()
        .filter(|f| crate::skill::files::served_type_of(&f.path).is_some())
        .map(|f| f.path.clone())
        .collect()
}
