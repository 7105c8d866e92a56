//! `POST /scan`: a path of the workspace scanned by the loaded skills'
//! security rules, scanners and `on_security_scan_complete` hooks
//! ([`crate::scan`]).

use super::AppState;
use super::auth::{Require, need};
use super::kit::error::{ApiError, Problem, Result};
use super::kit::extract::JsonBody;
use super::responses::{BodyProblems, empty_bodies_allowed};
use crate::invoke::FieldError;
use crate::scan::{self, CodeRun, Refusal, ScanFinding, Skipped};
use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoResponses, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn router() -> OpenApiRouter<AppState> {
    let mut router = OpenApiRouter::new().routes(routes!(scan_workspace));
    empty_bodies_allowed(router.get_openapi_mut());
    router
}

/// What to scan.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ScanRequest {
    /// A directory or file of the workspace, relative to it
    /// ('/'-separated, no `..`, no symbolic link on the way); empty or `.`
    /// (the default) for the whole workspace.
    #[serde(default)]
    #[schema(max_length = 4096, pattern = "^[^\\u0000]*$")]
    pub path: String,
}

/// What a scan found, read and ran.
#[derive(Debug, Serialize, ToSchema)]
pub struct ScanResult {
    /// Sorted by path, line, skill and rule; at most 10,000.
    pub findings: Vec<ScanFinding>,
    /// The files read and matched.
    pub scanned_files: usize,
    /// Entries not read, and why; at most 1,000 listed.
    pub skipped: Vec<Skipped>,
    /// Every entry not read, listed or not.
    pub skipped_count: usize,
    /// The walk stopped at a bound (files, bytes, entries): what it says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<String>,
    /// More findings than 10,000: the rest were not kept.
    pub truncated: bool,
    /// Each security-rule skill's scanner, and what it did.
    pub scanners: Vec<CodeRun>,
    /// Each `on_security_scan_complete` hook, in the order they ran.
    pub hooks: Vec<CodeRun>,
}

/// What scanning can answer besides its result (and [`BodyProblems`]).
#[derive(IntoResponses)]
pub enum ScanProblems {
    #[response(
        status = 400,
        description = "The body is not a scan request, or the query names a parameter this operation does not take",
        content_type = "application/problem+json"
    )]
    BadRequest(Problem),
    #[response(
        status = 404,
        description = "Nothing is at `path` in the workspace",
        content_type = "application/problem+json"
    )]
    NotFound(Problem),
    #[response(
        status = 422,
        description = "`path` cannot be scanned: absolute or climbing with `..` (`path_outside_workspace`), through a symbolic link (`path_is_link`), a place no tool may read (`path_protected`), or holding a NUL byte (`invalid_path`)",
        content_type = "application/problem+json"
    )]
    Unprocessable(Problem),
}

/// Scans a path of the workspace: every loaded skill's declarative
/// security rules over its text files, then each security-rule skill's
/// scanners, then the `on_security_scan_complete` hooks (bundled skills'
/// first, then users', each by name), which may add and filter findings.
/// Untrusted skills' scanners and hooks are not run: their code runs only
/// for calls a person approved. Needs `invoke`: it runs skills' code.
#[utoipa::path(post, path = "/scan", tag = "security", security(("bearer" = ["invoke"])),
    request_body(content = ScanRequest, description = "The path; an empty body scans the whole workspace"),
    responses((status = 200, description = "What the scan found", body = ScanResult), ScanProblems, BodyProblems))]
async fn scan_workspace(
    _: Require<need::Invoke>,
    State(state): State<AppState>,
    JsonBody(body): JsonBody<ScanRequest>,
) -> Result<Json<ScanResult>> {
    let req = scan::Request {
        skills: state.catalog.current().skills.clone(),
        base: state.invoker.settings().workspace.clone(),
        path: body.path,
        protected: state.invoker.sandbox().protected().to_vec(),
        bounds: scan::Bounds::default(),
        hooks: true,
    };
    let report = scan::run(req).await.map_err(refused)?;
    Ok(Json(ScanResult {
        scanned_files: report.tree.files.len(),
        skipped: report.tree.skipped,
        skipped_count: report.tree.skipped_count,
        incomplete: report.tree.incomplete,
        truncated: report.truncated,
        findings: report.findings,
        scanners: report.scanners,
        hooks: report.hooks,
    }))
}

fn refused(why: Refusal) -> ApiError {
    let code = match &why {
        Refusal::NotFound(path) => return ApiError::not_found("path", path.clone()),
        Refusal::Base(_) => return ApiError::Internal(why.to_string()),
        Refusal::Outside(_) => "path_outside_workspace",
        Refusal::Link(_) => "path_is_link",
        Refusal::Protected(_) => "path_protected",
        Refusal::Invalid(_) => "invalid_path",
    };
    ApiError::Unprocessable {
        code,
        detail: why.to_string(),
        errors: vec![FieldError {
            field: "path".to_owned(),
            message: why.to_string(),
        }],
    }
}
