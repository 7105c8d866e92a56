//! `/tools`: the exports of every tool, and single tools.

use super::AppState;
use super::auth::{Require, need};
use super::kit::error::{ApiError, Problem, Result};
use super::kit::extract::{Path, Query};
use super::responses::{BadQuery, NoSuchSkill};
use crate::catalog::Catalog;
use crate::export::{Format, ToolExport, ToolInfo};
use crate::invoke::Target;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use utoipa::openapi::schema::{AnyOfBuilder, Schema};
use utoipa::openapi::{Ref, RefOr};
use utoipa::{IntoParams, PartialSchema, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_tools))
        .routes(routes!(tools_prompt))
        .routes(routes!(get_tool))
}

/// Filters and format of `GET /tools`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ToolQuery {
    /// The shape of the answer; `native` by default.
    pub format: Option<Format>,
    /// Only tools of skills serving in this mode (or `Global`).
    pub mode: Option<String>,
    /// Only the tools of this skill.
    pub skill: Option<String>,
}

fn body(catalog: &Catalog, format: Format, mode: Option<&str>, skill: Option<&str>) -> Result<Response> {
    let skill = match skill {
        None => None,
        Some(name) => Some(
            catalog
                .skill_index(name)
                .ok_or_else(|| ApiError::not_found("skill", name))?,
        ),
    };
    let bytes = catalog.exports.body(format, mode, skill);
    let content_type = if format == Format::Prompt {
        "text/plain; charset=utf-8"
    } else {
        "application/json"
    };
    Ok(typed(content_type, bytes))
}

fn typed(content_type: &'static str, bytes: Bytes) -> Response {
    (
        [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))],
        bytes,
    )
        .into_response()
}

/// Every tool, in the format an LLM provider takes.
///
/// `native` lists skilld's own `Tool` objects. Provider formats need unique
/// names: a tool name two skills define is exported as `skill__tool` there
/// (with `-` in the skill's name as `_`), and that name is accepted wherever
/// a tool name is.
#[utoipa::path(get, path = "/tools", tag = "tools", security(("bearer" = ["read"])), params(ToolQuery),
    responses(
        (status = 200, description = "The tools in the requested format: JSON, or with `format=prompt` plain text", content(
            (ExportBody = "application/json"),
            (String = "text/plain"),
        )),
        BadQuery,
        NoSuchSkill,
    ))]
async fn list_tools(
    _: Require<need::Read>,
    State(state): State<AppState>,
    Query(q): Query<ToolQuery>,
) -> Result<Response> {
    let catalog = state.catalog.current();
    body(
        &catalog,
        q.format.unwrap_or_default(),
        q.mode.as_deref(),
        q.skill.as_deref(),
    )
}

/// The schema of `GET /tools`'s JSON bodies, named `ToolExport` like the
/// type it describes. The lists of several formats share their shape
/// (`{"tools": [...]}`), and an empty list is every one of them, so no
/// `oneOf` can tell them apart: this is an `anyOf`, and the `format` asked
/// for says which member the body is.
pub struct ExportBody;

impl PartialSchema for ExportBody {
    fn schema() -> RefOr<Schema> {
        let members = [
            "ToolList",
            "OpenAiToolList",
            "OpenAiResponsesToolList",
            "AnthropicToolList",
            "GeminiToolList",
            "McpToolList",
        ];
        let mut any = AnyOfBuilder::new().description(Some(
            "The JSON bodies of `GET /tools`, one shape per `format`: `native` a `ToolList`, `openai` an \
             `OpenAiToolList`, `openai-responses` an `OpenAiResponsesToolList`, `anthropic` an `AnthropicToolList`, `gemini` a `GeminiToolList`, `mcp` an \
             `McpToolList`. Several share the shape `{\"tools\": [...]}`, so the body matches any member \
             whose items fit; the `format` asked for names the one it is.",
        ));
        for name in members {
            any = any.item(Ref::from_schema_name(name));
        }
        any.into()
    }
}

impl ToSchema for ExportBody {
    fn name() -> std::borrow::Cow<'static, str> {
        "ToolExport".into()
    }

    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        <ToolExport as ToSchema>::schemas(schemas);
    }
}

/// The mode filter of `GET /tools/prompt`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ModeQuery {
    /// Only tools of skills serving in this mode (or `Global`).
    pub mode: Option<String>,
}

/// The tool manifest as plain text, ready for a system prompt.
#[utoipa::path(get, path = "/tools/prompt", tag = "tools", security(("bearer" = ["read"])), params(ModeQuery),
    responses(
        (status = 200, description = "The manifest", content_type = "text/plain", body = String),
        BadQuery,
    ))]
async fn tools_prompt(
    _: Require<need::Read>,
    State(state): State<AppState>,
    Query(q): Query<ModeQuery>,
) -> Result<Response> {
    let catalog = state.catalog.current();
    body(&catalog, Format::Prompt, q.mode.as_deref(), None)
}

/// The tool's name in a path.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ToolPath {
    /// A tool name, or the `skill__tool` name of an ambiguous one.
    pub tool: String,
}

/// One tool.
#[utoipa::path(get, path = "/tools/{tool}", tag = "tools", security(("bearer" = ["read"])), params(ToolPath),
    responses(
        (status = 200, description = "The tool", body = ToolInfo),
        BadQuery,
        (status = 404, description = "No such tool", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Several skills define this name; `candidates` lists them", body = Problem, content_type = "application/problem+json"),
    ))]
async fn get_tool(
    _: Require<need::Read>,
    State(state): State<AppState>,
    Path(p): Path<ToolPath>,
) -> Result<Response> {
    let catalog = state.catalog.current();
    let index = crate::invoke::resolve(&catalog, &Target::Tool(p.tool))?;
    let bytes = catalog
        .exports
        .native(index)
        .ok_or_else(|| ApiError::Internal("tool without a native export".to_owned()))?;
    Ok(typed("application/json", bytes))
}
