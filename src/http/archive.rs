//! `GET /skills/{skill}/archive`: a skill as a zip archive, byte for byte
//! the same for the same content (seed 003), so that one skilld can
//! install from another and compare. Written to an unnamed temporary file,
//! then streamed: memory stays flat however large the skill.

use super::AppState;
use super::auth::{Require, need};
use super::kit::error::{ApiError, Problem, Result};
use super::kit::extract::Path;
use super::responses::{BadQuery, Binary, NoSuchSkill};
use super::skills::SkillPath;
use crate::install::archive::{ArchiveError, write_archive};
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use std::io::Seek;
use utoipa::IntoResponses;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_skill_archive))
}

/// 422 for a skill whose files cannot be archived.
#[derive(IntoResponses)]
#[response(
    status = 422,
    description = "The skill's files cannot be archived: a symbolic link leads out of its directory, or it holds more than 10,000 files or 256 MiB (`unarchivable`)",
    content_type = "application/problem+json"
)]
pub struct Unarchivable(pub Problem);

/// The skill as a zip archive: every file of its directory (version-control
/// directories aside) at the archive's root, sorted, with fixed times and
/// modes. `X-Skill-Hash` is the skill's hash (`SkillDetail.hash`).
#[utoipa::path(get, path = "/skills/{skill}/archive", tag = "skills", security(("bearer" = ["read"])), params(SkillPath),
    responses(
        (status = 200, description = "The skill as a zip archive", content_type = "application/zip", body = Binary,
            headers(("x-skill-hash" = String, description = "The skill's hash, as `SkillDetail.hash`"))),
        BadQuery,
        NoSuchSkill,
        Unarchivable,
    ))]
async fn get_skill_archive(
    _: Require<need::Read>,
    State(state): State<AppState>,
    Path(p): Path<SkillPath>,
) -> Result<Response> {
    let skill = super::skills::named(&state, &p.skill).await?;
    let (dir, hash) = (skill.dir.clone(), skill.hash.clone());
    let version = skill.version.clone().unwrap_or_else(|| "0.0.0".to_owned());
    let filename = format!("{}-{version}.zip", skill.name);
    let file = tokio::task::spawn_blocking(move || -> Result<std::fs::File, ArchiveError> {
        let mut file = write_archive(&dir, tempfile::tempfile()?)?;
        file.rewind()?;
        Ok(file)
    })
    .await
    .map_err(|e| ApiError::Internal(format!("the archive's writer stopped: {e}")))?
    .map_err(|e| match e {
        ArchiveError::Io(_) | ArchiveError::Write(_) => ApiError::Internal(e.to_string()),
        other => ApiError::Unprocessable {
            code: "unarchivable",
            detail: format!("skill '{}' cannot be archived: {other}", p.skill),
            errors: Vec::new(),
        },
    })?;
    let length = file
        .metadata()
        .map_err(|e| ApiError::Internal(e.to_string()))?
        .len();
    let body = Body::from_stream(tokio_util::io::ReaderStream::new(tokio::fs::File::from_std(file)));
    let disposition = HeaderValue::from_str(&format!("attachment; filename=\"{filename}\""))
        .unwrap_or_else(|_| HeaderValue::from_static("attachment"));
    Response::builder()
        .header(header::CONTENT_TYPE, "application/zip")
        .header(header::CONTENT_LENGTH, length)
        .header(header::CONTENT_DISPOSITION, disposition)
        .header("x-skill-hash", hash)
        .body(body)
        .map_err(|e| ApiError::Internal(e.to_string()))
}
