//! Skills as skills (`docs/mcp.md`): the MCP Skills extension (SEP-2640,
//! `skills/list`, `skills/get`, `resources/directory/read`) over the
//! `skill://<name>/<path>` resources, and for clients without it an index
//! in the server's instructions and a resource template per skill. An
//! agent sees names and descriptions first, then one skill's `SKILL.md`,
//! then the files it names: progressive disclosure.

use crate::catalog::Catalog;
use crate::skill::Listing;
use crate::skill::Skill;
use crate::skill::listing::SKILL_MD;
use rmcp::ErrorData;
use rmcp::model::{
    CacheScope, GetSkillResult, ListResourceTemplatesResult, ListSkillsResult, PaginatedRequestParams,
    ReadResourceDirectoryResult, SkillFrontmatter, SkillResource, SkillResources,
};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::Arc;

pub(super) const SCHEME: &str = "skill://";

/// How long a client may keep a listing: a reload (an edited file) shows
/// within this, and its `list_changed` notification at once.
const TTL_MS: u64 = 10_000;

/// Entries per page of `skills/list` and `resources/directory/read`.
const PAGE: usize = 100;

/// The content type of every `SKILL.md`, as the extension names it.
pub(super) const MARKDOWN: &str = "text/markdown";

/// The most skills the instructions' index names, and how long each
/// description may be there: the index is for choosing, not reading.
const INDEX_SKILLS: usize = 200;
const INDEX_DESCRIPTION_CHARS: usize = 200;

/// The skills the extension serves, by name.
pub(super) fn served(catalog: &Catalog) -> impl Iterator<Item = (&Arc<Skill>, &Arc<Listing>)> {
    catalog
        .skills
        .iter()
        .filter_map(|s| s.listing.as_ref().map(|l| (s, l)))
}

pub(super) fn skill_uri(name: &str) -> String {
    format!("{SCHEME}{name}/{SKILL_MD}")
}

/// One skill's entry, as `skills/list` and `skills/get` give it.
fn entry(skill: &Skill, listing: &Listing) -> Result<rmcp::model::Skill, ErrorData> {
    let frontmatter: SkillFrontmatter = serde_json::from_value(Value::Object(listing.frontmatter.clone()))
        .map_err(|e| ErrorData::internal_error(format!("the frontmatter of {}: {e}", skill.name), None))?;
    let files = listing
        .files
        .iter()
        .map(|(path, d)| SkillResource::new(format!("{SCHEME}{}/{path}", skill.name), &d.digest, d.size))
        .collect();
    Ok(rmcp::model::Skill::new(
        skill_uri(&skill.name),
        frontmatter,
        SkillResources::Files(files),
    ))
}

/// Where a page starts: the cursor is the index of its first entry.
fn start(cursor: Option<&str>, len: usize) -> Result<usize, ErrorData> {
    let Some(cursor) = cursor else { return Ok(0) };
    cursor
        .parse::<usize>()
        .ok()
        .filter(|&at| at <= len)
        .ok_or_else(|| {
            ErrorData::invalid_params(format!("cursor '{cursor}' is not one this server gave"), None)
        })
}

fn next_cursor(at: usize, len: usize) -> Option<String> {
    (at + PAGE < len).then(|| (at + PAGE).to_string())
}

/// Whether the request's protocol revision has cache hints (2026-07-28
/// and later; ISO dates compare as text).
pub(super) fn has_cache_hints(ctx: &rmcp::service::RequestContext<rmcp::RoleServer>) -> bool {
    ctx.protocol_version()
        .is_some_and(|v| v.as_str() >= rmcp::model::ProtocolVersion::V_2026_07_28.as_str())
}

pub(super) fn list(
    catalog: &Catalog,
    request: Option<&PaginatedRequestParams>,
    hints: bool,
) -> Result<ListSkillsResult, ErrorData> {
    let all: Vec<_> = served(catalog).collect();
    let at = start(request.and_then(|r| r.cursor.as_deref()), all.len())?;
    let skills = all
        .iter()
        .skip(at)
        .take(PAGE)
        .map(|(skill, listing)| entry(skill, listing))
        .collect::<Result<Vec<_>, _>>()?;
    let mut result = ListSkillsResult::with_all_items(skills);
    if hints {
        result = result.with_ttl_ms(TTL_MS).with_cache_scope(CacheScope::Private);
    }
    result.next_cursor = next_cursor(at, all.len());
    Ok(result)
}

pub(super) fn get(catalog: &Catalog, uri: &str, hints: bool) -> Result<GetSkillResult, ErrorData> {
    let unknown = || ErrorData::invalid_params(format!("no skill is served at {uri}"), None);
    let name = uri
        .strip_prefix(SCHEME)
        .and_then(|rest| rest.strip_suffix(SKILL_MD))
        .and_then(|rest| rest.strip_suffix('/'))
        .ok_or_else(unknown)?;
    let (skill, listing) = served(catalog)
        .find(|(s, _)| s.name == name)
        .ok_or_else(unknown)?;
    let result = GetSkillResult::new(entry(skill, listing)?);
    Ok(match hints {
        true => result.with_ttl_ms(TTL_MS).with_cache_scope(CacheScope::Private),
        false => result,
    })
}

/// The direct children of a directory of a served skill
/// (`skill://<name>` or `skill://<name>/<dir>`): files with their type
/// and size, subdirectories as `inode/directory`.
pub(super) fn directory(
    catalog: &Catalog,
    uri: &str,
    cursor: Option<&str>,
) -> Result<ReadResourceDirectoryResult, ErrorData> {
    let not_a_directory =
        || ErrorData::invalid_params(format!("{uri} is not a directory this server serves"), None);
    let rest = uri.strip_prefix(SCHEME).ok_or_else(not_a_directory)?;
    let rest = rest.trim_end_matches('/');
    let (name, dir) = rest.split_once('/').unwrap_or((rest, ""));
    let (skill, listing) = served(catalog)
        .find(|(s, _)| s.name == name)
        .ok_or_else(not_a_directory)?;
    let prefix = if dir.is_empty() {
        String::new()
    } else {
        format!("{dir}/")
    };
    let mut subdirs = BTreeSet::new();
    let mut children = Vec::new();
    for (path, digest) in &listing.files {
        let Some(below) = path.strip_prefix(&prefix) else {
            continue;
        };
        match below.split_once('/') {
            Some((sub, _)) => {
                subdirs.insert(sub.to_owned());
            }
            None => children.push(file_resource(&skill.name, path, digest.size)),
        }
    }
    if children.is_empty() && subdirs.is_empty() {
        return Err(not_a_directory());
    }
    let dirs = subdirs.into_iter().map(|sub| {
        json!({
            "uri": format!("{SCHEME}{}/{prefix}{sub}", skill.name),
            "name": format!("{prefix}{sub}"),
            "mimeType": rmcp::model::DIRECTORY_MIME_TYPE,
        })
    });
    let all: Vec<Value> = dirs.chain(children).collect();
    let at = start(cursor, all.len())?;
    let page: Vec<Value> = all.iter().skip(at).take(PAGE).cloned().collect();
    let mut wire = json!({ "resources": page });
    if let Some(next) = next_cursor(at, all.len()) {
        wire["nextCursor"] = next.into();
    }
    super::shaped(wire)
}

fn file_resource(skill: &str, path: &str, size: u64) -> Value {
    let mime = if path == SKILL_MD {
        Some(MARKDOWN)
    } else {
        crate::skill::files::served_type_of(path)
    };
    json!({
        "uri": format!("{SCHEME}{skill}/{path}"),
        "name": path,
        "mimeType": mime,
        "size": size,
    })
}

/// Each served skill's `SKILL.md` as a resource, named and described as
/// its frontmatter says (what a client without the extension lists).
pub(super) fn skill_md_resources(catalog: &Catalog) -> impl Iterator<Item = Value> + '_ {
    served(catalog).map(|(skill, listing)| {
        let size = listing.files.first().map_or(0, |(_, d)| d.size);
        let description = listing
            .frontmatter
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or(&skill.description);
        json!({
            "uri": skill_uri(&skill.name),
            "name": skill.name,
            "title": format!("{} skill", skill.name),
            "description": description,
            "mimeType": MARKDOWN,
            "size": size,
        })
    })
}

/// A template per served skill, so a client without the extension can
/// read any of its files by path.
pub(super) fn templates(catalog: &Catalog) -> Result<ListResourceTemplatesResult, ErrorData> {
    let templates: Vec<Value> = served(catalog)
        .map(|(skill, _)| {
            json!({
                "uriTemplate": format!("{SCHEME}{}/{{+path}}", skill.name),
                "name": format!("{}-files", skill.name),
                "description": format!(
                    "A file of skill {}: SKILL.md first, then the files it names by relative path. {}",
                    skill.name, skill.description
                ),
            })
        })
        .collect();
    super::shaped(json!({ "resourceTemplates": templates }))
}

/// The served `SKILL.md` when it is made, not the file on disk.
pub(super) fn made_skill_md<'c>(catalog: &'c Catalog, uri: &str) -> Option<&'c [u8]> {
    let name = uri
        .strip_prefix(SCHEME)?
        .strip_suffix(SKILL_MD)?
        .strip_suffix('/')?;
    let (_, listing) = served(catalog).find(|(s, _)| s.name == name)?;
    listing.made.as_deref()
}

/// The index of skills in the server's instructions: each name and
/// description, and how to load one.
pub(super) fn index(catalog: &Catalog) -> String {
    let mut out = String::new();
    let all: Vec<_> = served(catalog).collect();
    if all.is_empty() {
        return out;
    }
    out.push_str(
        "\n\nSkills (read a skill's instructions before using it: the resource skill://<name>/SKILL.md, \
         or skills/get where the client has the Skills extension; its files are skill://<name>/<path>, \
         and {baseDir} in them means skill://<name>):",
    );
    for (skill, _) in all.iter().take(INDEX_SKILLS) {
        let description: String = skill.description.chars().take(INDEX_DESCRIPTION_CHARS).collect();
        out.push_str(&format!("\n- {}: {}", skill.name, description.replace('\n', " ")));
    }
    if all.len() > INDEX_SKILLS {
        out.push_str(&format!(
            "\n- … and {} more (skills/list or resources/list)",
            all.len() - INDEX_SKILLS
        ));
    }
    out
}

/// The name of the tool that loads a skill, for clients that reach
/// neither the extension nor resources (`mcp_load_skill_tool`).
pub(super) const LOAD_TOOL: &str = "load_skill";

/// Whether `load_skill` is offered: configured, and no skill's tool has
/// the name (a skill's own tool wins).
pub(super) fn offers_load_tool(catalog: &Catalog, configured: bool) -> bool {
    configured && matches!(catalog.tool(LOAD_TOOL), crate::catalog::ToolLookup::Missing)
}

/// `load_skill`'s definition, as `tools/list` lists it.
pub(super) fn load_tool() -> Value {
    json!({
        "name": LOAD_TOOL,
        "title": "Load skill",
        "description": "Load a skill's instructions (its SKILL.md) by name, with the URIs of its files. \
            Load a skill before using it; the server's instructions list each skill with its description.",
        "inputSchema": {
            "type": "object",
            "properties": { "name": { "type": "string", "description": "The skill's name." } },
            "required": ["name"],
            "additionalProperties": false,
        },
        "annotations": { "readOnlyHint": true, "destructiveHint": false, "openWorldHint": false },
    })
}

/// A `load_skill` call: the skill's instructions, `{baseDir}` as its
/// URI, and its files; an unknown name is a result that lists the known.
pub(super) fn load(catalog: &Catalog, arguments: Option<&serde_json::Map<String, Value>>) -> Value {
    let name = arguments
        .and_then(|a| a.get("name"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let Some((skill, listing)) = served(catalog).find(|(s, _)| s.name == name) else {
        let known: Vec<&str> = served(catalog).map(|(s, _)| s.name.as_str()).collect();
        let text = format!("No skill '{name}'. Skills: {}.", known.join(", "));
        return json!({ "content": [{ "type": "text", "text": text }], "isError": true });
    };
    let base = format!("{SCHEME}{}", skill.name);
    let files: Vec<String> = listing
        .files
        .iter()
        .map(|(path, _)| format!("{base}/{path}"))
        .collect();
    let text = format!(
        "{}\n\nFiles of this skill (read them as resources): {}",
        listing.body.replace("{baseDir}", &base),
        files.join(", ")
    );
    json!({
        "content": [{ "type": "text", "text": text }],
        "structuredContent": { "name": skill.name, "uri": skill_uri(&skill.name), "files": files },
        "isError": false,
    })
}
