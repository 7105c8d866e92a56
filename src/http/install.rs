//! Installed skills: `POST /skills` (upload an archive), their versions,
//! the one that serves, diffs between them, install logs, reviews, and
//! removal. The work is [`crate::install::Installer`]'s; this module
//! translates HTTP.

use super::AppState;
use super::auth::{Require, need};
use super::kit::error::{ApiError, Problem, Result};
use super::kit::extract::{Accept, JsonBody, Path, Query};
use super::responses::{BadQuery, Binary, BodyProblems};
use super::skills::{SkillDetail, SkillPath};
use crate::catalog::installed::{Review, SkillState, VersionStatus};
use crate::catalog::versions::split_spec;
use crate::install::diff::{DirDiff, diff_dirs};
use crate::install::review::Finding;
use crate::install::{InstallError, Upload};
use crate::skill::Trust;
use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use std::io::Write;
use utoipa::{IntoParams, IntoResponses, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(install_skill))
        .routes(routes!(remove_skill))
        .routes(routes!(list_versions))
        .routes(routes!(set_active))
        .routes(routes!(diff_versions))
        .routes(routes!(install_log))
        .routes(routes!(get_review, review_version))
        .routes(routes!(list_reviews))
}

/// What a route changing an installed skill answers when there is none.
#[derive(IntoResponses)]
pub enum NotInstalled {
    #[response(
        status = 403,
        description = "The skill is not an installed one (`not_installed`): another root serves it, and only installed skills change here",
        content_type = "application/problem+json"
    )]
    OtherRoot(Problem),
    #[response(
        status = 404,
        description = "No such installed skill or version",
        content_type = "application/problem+json"
    )]
    Missing(Problem),
}

/// What a route reading an installed skill's versions answers when there
/// are none.
#[derive(IntoResponses)]
pub enum NoVersions {
    #[response(
        status = 404,
        description = "No such skill or version (`not_found`), or a skill another root serves, which has no installed versions (`not_installed`)",
        content_type = "application/problem+json"
    )]
    Missing(Problem),
}

/// A read of what only installed skills have: about a skill of another
/// root, 404 `not_installed` (there is nothing to read), not a refusal.
fn read_error(e: InstallError) -> ApiError {
    match e {
        InstallError::OtherSource { .. } => ApiError::NotInstalled(e.to_string()),
        other => other.into(),
    }
}

/// `POST /skills`'s query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct InstallQuery {
    /// The trust the skill gets: `untrusted` (the default) or `user`.
    pub trust: Option<UploadTrust>,
    /// The hash the skill must have (as its source's `SkillDetail.hash`);
    /// another is refused (`hash_mismatch`) and nothing is installed.
    pub expect_hash: Option<String>,
}

/// `POST /skills`'s headers, read from the `HeaderMap`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Header)]
pub struct InstallHeaders {
    /// The skill's signature: the whole `.minisig` file (`skilld package
    /// --sign`, or `minisign -S` of the archive `skilld package` wrote), in
    /// standard base64. It signs the skill's canonical archive, so any zip
    /// of the same content verifies. Checked when the server trusts keys
    /// (`bad_signature`), required when it requires signatures
    /// (`signature_required`).
    #[serde(rename = "X-Skill-Signature")]
    #[param(
        value_type = String,
        required = false,
        max_length = 8192,
        pattern = "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
    )]
    pub signature: Option<String>,
}

/// The longest `X-Skill-Signature`: base64 of the longest `.minisig` taken.
const MAX_SIGNATURE_HEADER: usize = 8192;

/// The `.minisig` text `X-Skill-Signature` carries: 400 when it is not
/// base64, `bad_signature` when what it decodes to is not text.
fn signature_header(headers: &HeaderMap) -> Result<Option<String>> {
    use base64::Engine;
    let Some(value) = headers.get("x-skill-signature") else {
        return Ok(None);
    };
    let bad = || {
        ApiError::BadRequest(
            "X-Skill-Signature must be the .minisig file in standard base64 (`base64 -w0 FILE.zip.minisig`), \
             at most 8192 characters"
                .to_owned(),
        )
    };
    let text = value
        .to_str()
        .ok()
        .filter(|t| t.len() <= MAX_SIGNATURE_HEADER)
        .ok_or_else(bad)?;
    // Trailing bits are let through: any text of the declared pattern
    // decodes, and what it decodes to is judged as a signature (422).
    let lenient = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true),
    );
    let bytes = lenient.decode(text.trim()).map_err(|_| bad())?;
    let minisig = String::from_utf8(bytes)
        .map_err(|_| InstallError::BadSignature("it is not a minisign signature: not text".to_owned()))?;
    Ok(Some(minisig))
}

/// The trusts an upload may get: `bundled` is for the skills that ship
/// with skilld.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum UploadTrust {
    Untrusted,
    User,
}

/// Install a skill from a zip archive (`skilld package` writes one). It is
/// unpacked into a staging directory, checked (hostile archives are
/// refused, nothing is written), linted, scanned, and moved into the
/// installed root; its dependencies (`requirements.txt`, `package.json`)
/// are installed; a version higher than the serving one serves. With
/// `Accept: text/event-stream`, the progress streams as `progress` events,
/// then one `installed` (the skill) or `error` (a problem) event.
#[utoipa::path(post, path = "/skills", tag = "skills", security(("bearer" = ["admin"])), params(InstallQuery, InstallHeaders),
    request_body(content = Binary, content_type = "application/zip", description = "The skill as a zip archive"),
    responses(
        (status = 201, description = "Installed; `X-Skill-Status` says `ready` or `pending_review`", body = SkillDetail,
            headers(
                ("location" = String, description = "`/skills/{name}@{version}`"),
                ("x-skill-status" = String, description = "`ready`, or `pending_review` when reviews are required"),
            )),
        (status = 200, description = "With `Accept: text/event-stream`: the progress, then the outcome", content_type = "text/event-stream", body = String),
        (status = 400, description = "A query parameter does not parse, the query names a parameter this operation does not take, or `X-Skill-Signature` is not standard base64 (`bad_request`)", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "That name and version are installed (`version_exists`), or another root serves the name (`name_taken`)", body = Problem, content_type = "application/problem+json"),
        (status = 408, description = "The body stopped arriving for 30 seconds", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "The body, or what it unpacks to, is over its limit, or it is compressed like a bomb", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "The body is not `application/zip`", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Not a zip (`not_a_zip`); a hostile archive: traversal, links, devices, duplicate names, encryption (`unsafe_archive`); no skill in it (`no_skill`); no semver version (`invalid_version`); not the expected hash (`hash_mismatch`); it does not lint (`invalid_skill`, with `diagnostics`); its dependency files ask for a path, a URL, a VCS source or an installer option (`unsafe_dependencies`, with `errors` naming each file and line); its dependencies failed (`dependencies_failed`); no signature where the server requires one (`signature_required`); a signature that is malformed, made by a key the server does not trust, or does not verify over the skill's canonical archive (`bad_signature`, naming the key id)", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The server has no installed root", body = Problem, content_type = "application/problem+json"),
    ))]
async fn install_skill(
    auth: Require<need::Admin>,
    State(state): State<AppState>,
    Query(q): Query<InstallQuery>,
    accept: Accept,
    headers: HeaderMap,
    body: Body,
) -> Result<Response> {
    let trust = match q.trust {
        Some(UploadTrust::User) => Trust::User,
        Some(UploadTrust::Untrusted) | None => Trust::Untrusted,
    };
    if !is_zip(&headers) {
        return Err(ApiError::UnsupportedMediaType(
            "POST /skills takes the skill as Content-Type: application/zip".to_owned(),
        ));
    }
    let signature = signature_header(&headers)?;
    let archive = receive(body, state.installer.settings().max_upload_bytes).await?;
    let streaming = accept.prefers("text/event-stream");
    let (follow, lines) = tokio::sync::mpsc::unbounded_channel();
    let upload = Upload {
        archive,
        trust,
        by: auth.caller.name.clone(),
        follow: streaming.then_some(follow),
        expect_hash: q.expect_hash,
        signature,
    };
    let installer = state.installer.clone();
    let outcome = tokio::spawn(async move { installer.install(upload).await });
    if streaming {
        return Ok(progress_stream(lines, outcome));
    }
    let installed = outcome
        .await
        .map_err(|e| ApiError::Internal(format!("the install stopped: {e}")))??;
    created(&installed)
}

fn is_zip(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/zip"))
}

/// The longest an upload may pause between two parts of its body.
const BODY_IDLE: std::time::Duration = std::time::Duration::from_secs(30);

/// The body, written to an unnamed temporary file as it arrives: uploads
/// may be large, memory stays flat.
async fn receive(body: Body, max: u64) -> Result<std::fs::File> {
    let too_large = || ApiError::PayloadTooLarge(format!("the archive is over {max} bytes"));
    let mut file = tempfile::tempfile().map_err(|e| ApiError::Internal(e.to_string()))?;
    let mut stream = body.into_data_stream();
    let mut received = 0u64;
    // A client that stops sending does not hold the upload open.
    let stalled = || {
        ApiError::RequestTimeout(format!(
            "no part of the archive came for {}s",
            BODY_IDLE.as_secs()
        ))
    };
    while let Some(chunk) = tokio::time::timeout(BODY_IDLE, stream.next())
        .await
        .map_err(|_| stalled())?
    {
        let chunk = chunk.map_err(|e| ApiError::BadRequest(format!("the body could not be read: {e}")))?;
        received += chunk.len() as u64;
        if received > max {
            return Err(too_large());
        }
        file.write_all(&chunk)
            .map_err(|e| ApiError::Internal(e.to_string()))?;
    }
    std::io::Seek::rewind(&mut file).map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(file)
}

fn created(installed: &crate::install::Installed) -> Result<Response> {
    let skill = &installed.skill;
    let spec = format!(
        "/skills/{}@{}",
        skill.name,
        skill.version.as_deref().unwrap_or_default()
    );
    let mut res = (StatusCode::CREATED, Json(SkillDetail::new(skill))).into_response();
    if let Ok(v) = HeaderValue::from_str(&spec) {
        res.headers_mut().insert(header::LOCATION, v);
    }
    res.headers_mut().insert(
        "x-skill-status",
        HeaderValue::from_static(installed.status.as_str()),
    );
    Ok(res)
}

/// An upload's progress as server-sent events, then its outcome.
fn progress_stream(
    lines: tokio::sync::mpsc::UnboundedReceiver<String>,
    outcome: tokio::task::JoinHandle<std::result::Result<crate::install::Installed, InstallError>>,
) -> Response {
    let progress = tokio_stream_lines(lines)
        .map(|line| Ok::<_, std::convert::Infallible>(Event::default().event("progress").data(line)));
    let end = futures_util::stream::once(async move {
        let event = match outcome.await {
            Ok(Ok(installed)) => Event::default()
                .event("installed")
                .json_data(SkillDetail::new(&installed.skill)),
            Ok(Err(e)) => Event::default()
                .event("error")
                .json_data(ApiError::from(e).problem()),
            Err(e) => Event::default()
                .event("error")
                .json_data(ApiError::Internal(e.to_string()).problem()),
        };
        Ok(event.unwrap_or_else(|_| {
            Event::default()
                .event("error")
                .data("the outcome could not be encoded")
        }))
    });
    Sse::new(progress.chain(end))
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// The receiver as a stream; it ends when the install drops its sender.
fn tokio_stream_lines(
    mut lines: tokio::sync::mpsc::UnboundedReceiver<String>,
) -> impl futures_util::Stream<Item = String> {
    futures_util::stream::poll_fn(move |cx| lines.poll_recv(cx))
}

/// `DELETE /skills/{skill}`'s query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RemoveQuery {
    /// Cancel the runs of it in flight first, instead of refusing.
    pub force: Option<bool>,
}

/// Remove an installed skill (`name`) or one version (`name@version`).
/// Removing the serving version makes the highest other ready one serve.
#[utoipa::path(delete, path = "/skills/{skill}", tag = "skills", security(("bearer" = ["admin"])), params(SkillPath, RemoveQuery),
    responses(
        (status = 204, description = "Removed"),
        BadQuery,
        NotInstalled,
        (status = 409, description = "Runs of it are in flight (`runs_in_flight`); retry with `force=true` to cancel them", body = Problem, content_type = "application/problem+json"),
    ))]
async fn remove_skill(
    _: Require<need::Admin>,
    State(state): State<AppState>,
    Path(p): Path<SkillPath>,
    Query(q): Query<RemoveQuery>,
) -> Result<StatusCode> {
    let (name, version) = split_spec(&p.skill);
    state
        .installer
        .remove(name, version, q.force.unwrap_or(false))
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// One installed version.
#[derive(Debug, Serialize, ToSchema)]
pub struct VersionInfo {
    pub version: String,
    pub hash: String,
    /// It is the one that serves the bare name.
    pub active: bool,
    pub status: VersionStatus,
    pub trust: Trust,
    #[schema(value_type = String, format = DateTime)]
    pub installed_at: DateTime<Utc>,
    /// An admin's review, once given.
    pub review: Option<Review>,
    /// The id of the trusted key whose signature it was installed with,
    /// when it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signed_by: Option<String>,
}

/// `GET /skills/{skill}/versions`.
#[derive(Debug, Serialize, ToSchema)]
pub struct VersionList {
    pub skill: String,
    /// The version that serves, if any.
    pub active: Option<String>,
    /// Oldest first, by semver.
    pub versions: Vec<VersionInfo>,
}

impl VersionList {
    /// The list `GET /skills/{skill}/versions` answers for a state.
    pub fn new(name: &str, state: SkillState) -> Self {
        let active = state.serving().map(|v| v.version.clone());
        let versions = state
            .versions
            .into_iter()
            .map(|v| VersionInfo {
                active: active.as_deref() == Some(v.version.as_str()),
                version: v.version,
                hash: v.hash,
                status: v.status,
                trust: v.trust,
                installed_at: v.installed_at,
                review: v.review,
                signed_by: v.signature.map(|s| s.key_id),
            })
            .collect();
        Self {
            skill: name.to_owned(),
            active,
            versions,
        }
    }
}

/// The installed versions of a skill.
#[utoipa::path(get, path = "/skills/{skill}/versions", tag = "skills", security(("bearer" = ["read"])), params(SkillPath),
    responses(
        (status = 200, description = "Its versions", body = VersionList),
        BadQuery,
        NoVersions,
    ))]
async fn list_versions(
    _: Require<need::Read>,
    State(state): State<AppState>,
    Path(p): Path<SkillPath>,
) -> Result<Json<VersionList>> {
    let (name, _) = split_spec(&p.skill);
    let skill_state = state.installer.state(name).map_err(read_error)?;
    Ok(Json(VersionList::new(name, skill_state)))
}

/// `PUT /skills/{skill}/active`'s body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ActiveBody {
    /// An installed, ready version, or `latest`.
    pub version: String,
}

/// Choose the version that serves the skill's name.
#[utoipa::path(put, path = "/skills/{skill}/active", tag = "skills", security(("bearer" = ["admin"])), params(SkillPath),
    request_body = ActiveBody,
    responses(
        (status = 200, description = "Its versions, the chosen one active", body = VersionList),
        BadQuery,
        BodyProblems,
        NotInstalled,
        (status = 409, description = "That version may not serve: pending review, rejected or failed (`wrong_status`)", body = Problem, content_type = "application/problem+json"),
    ))]
async fn set_active(
    _: Require<need::Admin>,
    State(state): State<AppState>,
    Path(p): Path<SkillPath>,
    JsonBody(body): JsonBody<ActiveBody>,
) -> Result<Json<VersionList>> {
    let (name, _) = split_spec(&p.skill);
    state.installer.set_active(name, &body.version).await?;
    Ok(Json(VersionList::new(name, state.installer.state(name)?)))
}

/// `GET /skills/{skill}/diff`'s query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DiffQuery {
    /// The older version (or `latest`).
    pub from: String,
    /// The newer version (or `latest`).
    pub to: String,
}

/// What changed between two installed versions: a unified diff of the
/// text files and the list of changed binary files.
#[utoipa::path(get, path = "/skills/{skill}/diff", tag = "skills", security(("bearer" = ["read"])), params(SkillPath, DiffQuery),
    responses(
        (status = 200, description = "The diff", body = DirDiff),
        BadQuery,
        NoVersions,
    ))]
async fn diff_versions(
    _: Require<need::Read>,
    State(state): State<AppState>,
    Path(p): Path<SkillPath>,
    Query(q): Query<DiffQuery>,
) -> Result<Json<DirDiff>> {
    let (name, _) = split_spec(&p.skill);
    let from = state
        .installer
        .version_skill_dir(name, &q.from)
        .map_err(read_error)?;
    let to = state
        .installer
        .version_skill_dir(name, &q.to)
        .map_err(read_error)?;
    let diff = tokio::task::spawn_blocking(move || diff_dirs(&from, &to))
        .await
        .map_err(|e| ApiError::Internal(format!("the diff stopped: {e}")))?
        .map_err(|e| ApiError::Internal(format!("cannot diff: {e}")))?;
    Ok(Json(diff))
}

/// `GET /skills/{skill}/install-log`'s query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct LogQuery {
    /// A version (or `latest`); the serving one by default.
    pub version: Option<String>,
}

/// What installing a version said: unpacking, the review scan, and the
/// dependency installers' output (at most 256 KiB). Admins only: an
/// installer's output is the upload's to shape, and may quote files.
#[utoipa::path(get, path = "/skills/{skill}/install-log", tag = "skills", security(("bearer" = ["admin"])), params(SkillPath, LogQuery),
    responses(
        (status = 200, description = "The log", content_type = "text/plain", body = String),
        BadQuery,
        NoVersions,
    ))]
async fn install_log(
    _: Require<need::Admin>,
    State(state): State<AppState>,
    Path(p): Path<SkillPath>,
    Query(q): Query<LogQuery>,
) -> Result<Response> {
    let (name, at) = split_spec(&p.skill);
    let log = state
        .installer
        .log(name, q.version.as_deref().or(at))
        .map_err(read_error)?;
    Ok((
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        )],
        log,
    )
        .into_response())
}

/// A version's review: the scanner's findings and where it stands.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReviewInfo {
    pub skill: String,
    pub version: String,
    pub status: VersionStatus,
    /// The version serving now, to diff against.
    pub active: Option<String>,
    pub findings: Vec<Finding>,
    pub review: Option<Review>,
}

fn review_info(state: &AppState, spec: &str) -> Result<ReviewInfo> {
    let (name, version) = split_spec(spec);
    // A review is of one version: a bare name names none.
    let version = version.ok_or_else(|| ApiError::not_found("skill version", format!("{name}@?")))?;
    let skill_state = state.installer.state(name).map_err(read_error)?;
    let version = skill_state
        .resolve(version)
        .ok_or_else(|| ApiError::not_found("skill version", spec))?
        .to_owned();
    let entry = skill_state
        .version(&version)
        .ok_or_else(|| ApiError::not_found("skill version", spec))?;
    Ok(ReviewInfo {
        skill: name.to_owned(),
        findings: state.installer.findings(name, &version)?,
        status: entry.status,
        active: skill_state.serving().map(|v| v.version.clone()),
        review: entry.review.clone(),
        version,
    })
}

/// The scanner's findings for `name@version`, and its review.
#[utoipa::path(get, path = "/skills/{skill}/review", tag = "skills", security(("bearer" = ["read"])), params(SkillPath),
    responses(
        (status = 200, description = "The review", body = ReviewInfo),
        BadQuery,
        NoVersions,
    ))]
async fn get_review(
    _: Require<need::Read>,
    State(state): State<AppState>,
    Path(p): Path<SkillPath>,
) -> Result<Json<ReviewInfo>> {
    Ok(Json(review_info(&state, &p.skill)?))
}

/// An admin's decision on an upload held for review.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReviewBody {
    pub decision: ReviewDecision,
    /// Why, for the record: at most 2000 characters, no NUL byte.
    #[schema(max_length = 2000, pattern = "^[^\\u0000]*$")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReviewDecision {
    Approve,
    Reject,
}

/// Decide a `pending_review` version: `approve` installs its
/// dependencies and lets it serve (it serves at once when it is the
/// highest); `reject` keeps it from ever serving.
#[utoipa::path(post, path = "/skills/{skill}/review", tag = "skills", security(("bearer" = ["admin"])), params(SkillPath),
    request_body = ReviewBody,
    responses(
        (status = 200, description = "Decided", body = ReviewInfo),
        BadQuery,
        BodyProblems,
        NotInstalled,
        (status = 409, description = "The version is not pending review (`wrong_status`)", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Approved, but its dependency files ask for what is not installed (`unsafe_dependencies`; nothing ran, the version is `failed`), or its dependencies failed (`dependencies_failed`)", body = Problem, content_type = "application/problem+json"),
    ))]
async fn review_version(
    auth: Require<need::Admin>,
    State(state): State<AppState>,
    Path(p): Path<SkillPath>,
    JsonBody(body): JsonBody<ReviewBody>,
) -> Result<Json<ReviewInfo>> {
    if body
        .note
        .as_ref()
        .is_some_and(|n| n.chars().count() > 2000 || n.contains('\0'))
    {
        return Err(ApiError::BadRequest(
            "note must be at most 2000 characters, without NUL".to_owned(),
        ));
    }
    let info = review_info(&state, &p.skill)?;
    let approve = body.decision == ReviewDecision::Approve;
    state
        .installer
        .review(
            &info.skill,
            &info.version,
            approve,
            auth.caller.name.clone(),
            body.note,
        )
        .await?;
    Ok(Json(review_info(
        &state,
        &format!("{}@{}", info.skill, info.version),
    )?))
}

/// `GET /reviews`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReviewList {
    /// Every installed version waiting for a review, oldest first.
    pub reviews: Vec<ReviewInfo>,
}

/// The uploads waiting for an admin's review, with their findings.
#[utoipa::path(get, path = "/reviews", tag = "skills", security(("bearer" = ["read"])),
    responses(
        (status = 200, description = "The pending reviews", body = ReviewList),
        BadQuery,
    ))]
async fn list_reviews(_: Require<need::Read>, State(state): State<AppState>) -> Result<Json<ReviewList>> {
    let pending = match state.installer.pending() {
        Ok(p) => p,
        Err(InstallError::NoRoot) => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    let mut reviews = Vec::new();
    for (name, skill_state) in pending {
        for v in skill_state
            .versions
            .iter()
            .filter(|v| v.status == VersionStatus::PendingReview)
        {
            reviews.push(review_info(&state, &format!("{name}@{}", v.version))?);
        }
    }
    Ok(Json(ReviewList { reviews }))
}
