//! `GET /index.json`: this skilld as a registry. Another skilld (or
//! anything that reads the format of [`crate::registry::index`]) searches
//! it and installs from it by name, with `--registry http://HOST:PORT`.

use super::AppState;
use super::auth::{Require, need};
use super::kit::error::{ApiError, Result};
use crate::catalog::Catalog;
use crate::catalog::installed::VersionStatus;
use crate::install::Installer;
use crate::registry::index::{FORMAT, Index, IndexSkill, IndexVersion};
use crate::skill::Skill;
use axum::Json;
use axum::extract::State;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_index))
}

/// This skilld's skills as a registry index: every installed version that
/// is ready, and each other skill's loaded version (those with a semver
/// version), sorted by name. Archive addresses are relative to this
/// document's; `hash` is the skill's hash, checked by the installer;
/// `sha256` (of the canonical archive the address serves) and
/// `signature` are those recorded when the version was installed.
#[utoipa::path(get, path = "/index.json", tag = "skills", security(("bearer" = ["read"])),
    responses(
        (status = 200, description = "The registry index", body = Index),
    ))]
async fn get_index(_: Require<need::Read>, State(state): State<AppState>) -> Result<Json<Index>> {
    let (catalog, installer) = (state.catalog.current(), state.installer.clone());
    // Reads each installed skill's state file: off the async threads.
    let index = tokio::task::spawn_blocking(move || index_of(&catalog, &installer))
        .await
        .map_err(|e| ApiError::Internal(format!("the index stopped: {e}")))?;
    Ok(Json(index))
}

fn index_of(catalog: &Catalog, installer: &Installer) -> Index {
    let mut skills: Vec<IndexSkill> = catalog
        .skills
        .iter()
        .filter_map(|skill| {
            let versions = versions_of(skill, installer);
            (!versions.is_empty()).then(|| IndexSkill {
                name: skill.name.clone(),
                description: skill.description.clone(),
                versions,
            })
        })
        .collect();
    skills.sort_by(|a, b| a.name.cmp(&b.name));
    Index {
        format: FORMAT,
        skills,
    }
}

/// The ready versions of an installed skill; the loaded one of another.
fn versions_of(skill: &Skill, installer: &Installer) -> Vec<IndexVersion> {
    let name = &skill.name;
    match installer.state(name) {
        Ok(state) => state
            .versions
            .iter()
            .filter(|v| v.status == VersionStatus::Ready)
            .map(|v| IndexVersion {
                version: v.version.clone(),
                url: format!("skills/{name}@{}/archive", v.version),
                sha256: v.archive_sha256.clone(),
                hash: Some(v.hash.clone()),
                signature: v.signature.as_ref().map(|s| s.minisig.clone()),
            })
            .collect(),
        Err(_) => skill
            .version
            .iter()
            .filter(|v| crate::catalog::installed::valid_version(v))
            .map(|v| IndexVersion {
                version: v.clone(),
                url: format!("skills/{name}/archive"),
                sha256: None,
                hash: Some(skill.hash.clone()),
                signature: None,
            })
            .collect(),
    }
}
