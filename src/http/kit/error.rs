//! The one error type of the HTTP API, rendered as RFC 9457 problem+json.
//! The layers below have their own errors ([`InvokeError`], [`StoreError`],
//! [`AuthError`]); each converts here, once. Internal causes are logged
//! with the request id, never sent.

use crate::artifacts::ArtifactError;
use crate::auth::AuthError;
use crate::install::InstallError;
use crate::invoke::{FieldError, InvokeError};
use crate::skill::Diagnostic;
use crate::store::StoreError;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

/// An RFC 9457 problem document, as every 4xx/5xx body.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Problem {
    /// A relative URI naming the kind of problem.
    #[serde(rename = "type")]
    pub kind: String,
    pub title: String,
    pub status: u16,
    pub detail: String,
    /// Stable, machine-readable code.
    pub code: String,
    /// Per-field problems, where there are some.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errors: Option<Vec<FieldError>>,
    /// For an ambiguous tool name: the skills that define it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub candidates: Option<Vec<String>>,
    /// For an upload that does not lint: what the linter said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<Vec<Diagnostic>>,
}

/// Everything a handler can fail with.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{what} '{name}' not found")]
    NotFound { what: &'static str, name: String },
    /// 404 saying why the thing is not there (a skill the loader excluded).
    #[error("{0}")]
    NotLoaded(String),
    /// 404 for a read of what only installed skills have (versions, a
    /// diff, an install log) about a skill another root serves.
    #[error("{0}")]
    NotInstalled(String),
    /// 404 for a reason with its own code: artifacts kept elsewhere
    /// (`artifact_elsewhere`) or deleted (`artifact_expired`).
    #[error("{detail}")]
    Absent { code: &'static str, detail: String },
    #[error("no route for {method} {path}; the routes are listed at /openapi.json and /docs")]
    NoRoute { method: String, path: String },
    /// A bare tool name several skills define; `candidates` are the skills.
    #[error("{detail}")]
    AmbiguousTool { detail: String, candidates: Vec<String> },
    #[error("{0}")]
    PayloadTooLarge(String),
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 408: the body came too slowly (or not at all).
    #[error("{0}")]
    RequestTimeout(String),
    /// Tokens are configured and the request carried none, or an unknown
    /// or malformed one. `token_sent` picks the `WWW-Authenticate` error
    /// (RFC 6750 §3: none when no credentials came at all).
    #[error("{detail}")]
    Unauthorized { detail: String, token_sent: bool },
    /// 401 on a server without tokens: only the holder of its local secret
    /// may do this.
    #[error("{0}")]
    NeedsLocalSecret(String),
    /// 403: the token's role is below the one needed; `scope` is the
    /// OAuth scope of that role, for the `insufficient_scope` challenge.
    #[error("{detail}")]
    Forbidden { detail: String, scope: String },
    /// 403 for a reason with its own code: a standing deny (`denied`), an
    /// approver deciding its own request (`self_approval`).
    #[error("{detail}")]
    Refused { code: &'static str, detail: String },
    #[error("method not allowed on this route")]
    MethodNotAllowed,
    #[error("{detail}")]
    Unprocessable {
        code: &'static str,
        detail: String,
        errors: Vec<FieldError>,
    },
    #[error("{detail}")]
    Conflict { code: &'static str, detail: String },
    /// 429 with `Retry-After`.
    #[error("{detail}")]
    TooManyRequests { detail: String, retry_after_secs: u64 },
    #[error("{0}")]
    Unavailable(String),
    /// 504: the server's own file system did not answer in time.
    #[error("{0}")]
    Timeout(String),
    /// A fault of the server; the cause is logged, not sent.
    #[error("internal error: {0}")]
    Internal(String),
    /// 422 for an uploaded skill that does not lint, with the diagnostics.
    #[error("{detail}")]
    InvalidSkill {
        detail: String,
        diagnostics: Vec<Diagnostic>,
    },
}

pub type Result<T, E = ApiError> = std::result::Result<T, E>;

impl ApiError {
    pub fn not_found(what: &'static str, name: impl Into<String>) -> Self {
        Self::NotFound {
            what,
            name: name.into(),
        }
    }

    fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::NotFound { .. }
            | ApiError::NotLoaded(_)
            | ApiError::NoRoute { .. }
            | ApiError::NotInstalled(_)
            | ApiError::Absent { .. } => StatusCode::NOT_FOUND,
            ApiError::AmbiguousTool { .. } => StatusCode::CONFLICT,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::RequestTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Unauthorized { .. } | ApiError::NeedsLocalSecret(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden { .. } | ApiError::Refused { .. } => StatusCode::FORBIDDEN,
            ApiError::Unprocessable { .. } | ApiError::InvalidSkill { .. } => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
            ApiError::Conflict { .. } => StatusCode::CONFLICT,
            ApiError::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn code(&self) -> &'static str {
        match self {
            ApiError::BadRequest(_) => "bad_request",
            ApiError::NotFound { .. } | ApiError::NotLoaded(_) | ApiError::NoRoute { .. } => "not_found",
            ApiError::NotInstalled(_) => "not_installed",
            ApiError::Absent { code, .. } => code,
            ApiError::AmbiguousTool { .. } => "ambiguous_tool",
            ApiError::PayloadTooLarge(_) => "too_large",
            ApiError::UnsupportedMediaType(_) => "unsupported_media_type",
            ApiError::RequestTimeout(_) => "request_timeout",
            ApiError::MethodNotAllowed => "method_not_allowed",
            ApiError::Unauthorized { .. } => "unauthorized",
            ApiError::NeedsLocalSecret(_) => "local_secret_required",
            ApiError::Forbidden { .. } => "forbidden",
            ApiError::Refused { code, .. } => code,
            ApiError::Unprocessable { code, .. } => code,
            ApiError::Conflict { code, .. } => code,
            ApiError::TooManyRequests { .. } => "too_many_requests",
            ApiError::Unavailable(_) => "unavailable",
            ApiError::Timeout(_) => "timeout",
            ApiError::Internal(_) => "internal",
            ApiError::InvalidSkill { .. } => "invalid_skill",
        }
    }

    /// The problem document for this error.
    pub fn problem(&self) -> Problem {
        let status = self.status();
        let code = self.code();
        let detail = match self {
            ApiError::Internal(_) => {
                "the server failed to handle this request; see its log for the request id".to_owned()
            }
            other => other.to_string(),
        };
        Problem {
            kind: format!("/problems/{}", code.replace('_', "-")),
            title: status.canonical_reason().unwrap_or("Error").to_owned(),
            status: status.as_u16(),
            detail,
            code: code.to_owned(),
            errors: match self {
                ApiError::Unprocessable { errors, .. } => Some(errors.clone()),
                _ => None,
            },
            candidates: match self {
                ApiError::AmbiguousTool { candidates, .. } => Some(candidates.clone()),
                _ => None,
            },
            diagnostics: match self {
                ApiError::InvalidSkill { diagnostics, .. } => Some(diagnostics.clone()),
                _ => None,
            },
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let problem = self.problem();
        let mut res = (self.status(), axum::Json(problem)).into_response();
        res.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if let ApiError::TooManyRequests { retry_after_secs, .. } = &self
            && let Ok(v) = HeaderValue::from_str(&retry_after_secs.to_string())
        {
            res.headers_mut().insert(header::RETRY_AFTER, v);
        }
        if let Some(challenge) = self.challenge() {
            if let Some(value) = challenge.header(None) {
                res.headers_mut().insert(header::WWW_AUTHENTICATE, value);
            }
            // For `oauth_challenge`, which knows where the metadata is.
            res.extensions_mut().insert(challenge);
        }
        if let ApiError::Internal(cause) = &self {
            // Logged by the trace middleware with the request id.
            res.extensions_mut().insert(InternalCause(cause.clone()));
        }
        res
    }
}

impl ApiError {
    /// The `WWW-Authenticate` challenge of a 401, or of a 403 for too low
    /// a role (RFC 6750 §3).
    fn challenge(&self) -> Option<Challenge> {
        let (error, scope) = match self {
            ApiError::Unauthorized { token_sent: true, .. } => (Some("invalid_token"), None),
            ApiError::Unauthorized { .. } | ApiError::NeedsLocalSecret(_) => (None, None),
            ApiError::Forbidden { scope, .. } => (Some("insufficient_scope"), Some(scope.clone())),
            _ => return None,
        };
        Some(Challenge { error, scope })
    }
}

/// A `Bearer` challenge, carried on the response until the OAuth layer
/// (`crate::http::oauth::challenge`) adds where the metadata is: the one place
/// every 401 and insufficient-scope 403 gets its header from.
#[derive(Debug, Clone)]
pub struct Challenge {
    error: Option<&'static str>,
    scope: Option<String>,
}

impl Challenge {
    /// The header; `metadata`, the protected-resource metadata's URL when
    /// OAuth is configured. A 403's challenge names a scope, which only an
    /// OAuth client can act on: without OAuth it has no header.
    pub fn header(&self, metadata: Option<&str>) -> Option<HeaderValue> {
        let mut value = r#"Bearer realm="skilld""#.to_owned();
        if let Some(error) = self.error {
            value.push_str(&format!(r#", error="{error}""#));
        }
        match (&self.scope, metadata) {
            (Some(_), None) => return None,
            (Some(scope), Some(_)) => value.push_str(&format!(r#", scope="{scope}""#)),
            (None, _) => {}
        }
        if let Some(url) = metadata {
            value.push_str(&format!(r#", resource_metadata="{url}""#));
        }
        HeaderValue::from_str(&value).ok()
    }
}

impl From<AuthError> for ApiError {
    fn from(e: AuthError) -> Self {
        match e {
            AuthError::Forbidden { need, .. } => ApiError::Forbidden {
                detail: e.to_string(),
                scope: crate::oauth::scope(need.as_str()),
            },
            AuthError::NoRole { .. } => ApiError::Forbidden {
                detail: e.to_string(),
                scope: crate::oauth::scope(crate::auth::Role::Read.as_str()),
            },
            AuthError::Missing => ApiError::Unauthorized {
                detail: e.to_string(),
                token_sent: false,
            },
            AuthError::Malformed | AuthError::Unknown | AuthError::InvalidToken(_) => {
                ApiError::Unauthorized {
                    detail: e.to_string(),
                    token_sent: true,
                }
            }
            AuthError::IssuerUnavailable(why) => ApiError::Unavailable(why),
            AuthError::NeedsLocalSecret { .. } => ApiError::NeedsLocalSecret(e.to_string()),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound { what, id } => ApiError::not_found(what, id.to_string()),
            // The database's own words stay in the log: they can name
            // tables, constraints and values.
            StoreError::Conflict(m) => {
                tracing::warn!(error = %m, "the run log refused a write");
                ApiError::Conflict {
                    code: "conflict",
                    detail: "the request conflicts with what the run log holds; \
                             the server's log has the cause under the request id"
                        .to_owned(),
                }
            }
            StoreError::InvalidCursor => ApiError::BadRequest("invalid cursor".to_owned()),
            StoreError::Invalid(why) => ApiError::BadRequest(why),
            StoreError::Unavailable(m) => {
                tracing::error!(error = %m, "the store is unavailable");
                ApiError::Unavailable("the run log is unavailable; nothing was run".to_owned())
            }
            StoreError::Other(m) => ApiError::Internal(m),
        }
    }
}

impl From<crate::session::SessionError> for ApiError {
    fn from(e: crate::session::SessionError) -> Self {
        use crate::session::SessionError as E;
        let detail = e.to_string();
        match e {
            E::Store(store) => store.into(),
            E::NotFound(_) => ApiError::Absent {
                code: "session_not_found",
                detail,
            },
            E::TooMany { .. } => ApiError::TooManyRequests {
                detail,
                retry_after_secs: 60,
            },
            E::Busy(_) => ApiError::Conflict {
                code: "session_busy",
                detail,
            },
            E::Invalid(_) | E::UnknownSkill(_) => ApiError::Unprocessable {
                code: if matches!(e, E::UnknownSkill(_)) {
                    "unknown_skill"
                } else {
                    "invalid_session"
                },
                errors: e.field_errors(),
                detail,
            },
            E::BadPath(_) => ApiError::Unprocessable {
                code: "bad_path",
                detail,
                errors: Vec::new(),
            },
            E::NotActivating { .. } => ApiError::Conflict {
                code: "not_activating",
                detail,
            },
            E::SkillChanged(_) => ApiError::Conflict {
                code: "skill_changed",
                detail,
            },
            E::RequestGone { .. } => ApiError::Conflict {
                code: "request_gone",
                detail,
            },
            E::Locked { .. } => ApiError::Refused {
                code: "session_locked",
                detail,
            },
            E::SelfApproval(_) => ApiError::Refused {
                code: "self_approval",
                detail,
            },
            E::Internal(_) => ApiError::Internal(detail),
        }
    }
}

impl From<InvokeError> for ApiError {
    fn from(e: InvokeError) -> Self {
        let e = match e {
            InvokeError::Store(store) => return store.into(),
            other => other,
        };
        let detail = e.to_string();
        let conflict = |code| ApiError::Conflict {
            code,
            detail: detail.clone(),
        };
        let unprocessable = |code| ApiError::Unprocessable {
            code,
            detail: detail.clone(),
            errors: e.field_errors(),
        };
        let refused = |code| ApiError::Refused {
            code,
            detail: detail.clone(),
        };
        match &e {
            InvokeError::NotFound { what, name } => ApiError::not_found(what, name),
            InvokeError::Ambiguous { candidates, .. } => ApiError::AmbiguousTool {
                detail,
                candidates: candidates.clone(),
            },
            InvokeError::NotAnObject(_)
            | InvokeError::WaitTooLong
            | InvokeError::InvalidMode { .. }
            | InvokeError::NoteTooLong { .. }
            | InvokeError::NoteHasNul
            | InvokeError::InvalidIdempotencyKey { .. } => ApiError::BadRequest(detail),
            InvokeError::InvalidArguments { .. }
            | InvokeError::Nul { .. }
            | InvokeError::MissingInWord { .. } => unprocessable("invalid_arguments"),
            InvokeError::ArgumentInjection { .. } => unprocessable("argument_injection"),
            InvokeError::IdempotencyKeyReused { .. } => unprocessable("idempotency_key_reused"),
            InvokeError::Denied { .. } => refused("denied"),
            InvokeError::HookCancelled { .. } => refused("hook_cancelled"),
            InvokeError::SessionNotFound(_) => ApiError::Absent {
                code: "session_not_found",
                detail,
            },
            InvokeError::SkillNotActive { .. } => conflict("skill_not_active"),
            InvokeError::SkillChangedInSession { .. } => conflict("skill_changed"),
            InvokeError::SessionLocked { .. } => refused("session_locked"),
            InvokeError::PermissionNotDeclared { .. } => refused("permission_not_declared"),
            InvokeError::NotInMode { .. } => refused("not_in_mode"),
            InvokeError::SelfApproval(_) => refused("self_approval"),
            InvokeError::NotRequester { .. } => refused("not_requester"),
            InvokeError::ApprovalExpired(_) | InvokeError::RequestExpired(_) => conflict("approval_expired"),
            InvokeError::NotRun { .. } => conflict("not_run"),
            InvokeError::AlreadyDecided { .. } => conflict("already_decided"),
            InvokeError::SkillChanged(_) => conflict("skill_changed"),
            InvokeError::HashMismatch { .. } => conflict("hash_mismatch"),
            InvokeError::NothingToGrant(_) => conflict("no_tools"),
            InvokeError::RunFinished { .. } | InvokeError::RunStarted(_) => conflict("run_finished"),
            InvokeError::RunElsewhere(_) => conflict("run_elsewhere"),
            InvokeError::VersionUnavailable(_) => conflict("version_unavailable"),
            InvokeError::DependenciesNotReady { .. } => conflict("dependencies_not_ready"),
            InvokeError::Internal(_) => ApiError::Internal(detail),
            InvokeError::Busy { retry_after_secs } => ApiError::TooManyRequests {
                detail,
                retry_after_secs: *retry_after_secs,
            },
            InvokeError::TooManyPending { .. } => ApiError::TooManyRequests {
                detail,
                retry_after_secs: 60,
            },
            InvokeError::StreamShare(_) => ApiError::TooManyRequests {
                detail,
                retry_after_secs: 10,
            },
            InvokeError::ShuttingDown | InvokeError::TooManyStreams(_) => ApiError::Unavailable(detail),
            InvokeError::Store(_) => ApiError::Internal(detail),
        }
    }
}

impl From<ArtifactError> for ApiError {
    fn from(e: ArtifactError) -> Self {
        let detail = e.to_string();
        match e {
            ArtifactError::Store(store) => store.into(),
            ArtifactError::NoFile(path) => ApiError::not_found("file", path),
            ArtifactError::Elsewhere { .. } => ApiError::Absent {
                code: "artifact_elsewhere",
                detail,
            },
            ArtifactError::Expired(_) => ApiError::Absent {
                code: "artifact_expired",
                detail,
            },
            ArtifactError::BadSignature => ApiError::Refused {
                code: "bad_signature",
                detail,
            },
            ArtifactError::LinkExpired => ApiError::Refused {
                code: "link_expired",
                detail,
            },
            ArtifactError::TooLarge { .. } => ApiError::PayloadTooLarge(detail),
            ArtifactError::TimedOut(_) => ApiError::Timeout(detail),
            ArtifactError::Bucket(why) => {
                tracing::error!(%why, "the artifact bucket is unavailable");
                ApiError::Unavailable("the artifact bucket is unavailable; try again later".to_owned())
            }
        }
    }
}

impl From<InstallError> for ApiError {
    fn from(e: InstallError) -> Self {
        use crate::install::unpack::UnpackError as U;
        let detail = e.to_string();
        let unprocessable = |code| ApiError::Unprocessable {
            code,
            detail: detail.clone(),
            errors: Vec::new(),
        };
        let conflict = |code| ApiError::Conflict {
            code,
            detail: detail.clone(),
        };
        match e {
            InstallError::Store(store) => store.into(),
            InstallError::Runs(runs) => runs.into(),
            InstallError::Io(cause) => ApiError::Internal(cause),
            InstallError::Invalid(diagnostics) => ApiError::InvalidSkill { detail, diagnostics },
            InstallError::Archive(U::TooLarge { .. } | U::TooManyEntries { .. } | U::Ratio { .. }) => {
                ApiError::PayloadTooLarge(detail)
            }
            InstallError::Archive(U::Io(cause)) => ApiError::Internal(cause),
            InstallError::Archive(U::NotZip(_)) => unprocessable("not_a_zip"),
            InstallError::Archive(_) => unprocessable("unsafe_archive"),
            InstallError::NoSkill | InstallError::Unnamed(_) => unprocessable("no_skill"),
            InstallError::NoVersion | InstallError::BadVersion(_) => unprocessable("invalid_version"),
            InstallError::Dependencies(_) => unprocessable("dependencies_failed"),
            InstallError::UnsafeDependencies(refused) => ApiError::Unprocessable {
                code: "unsafe_dependencies",
                detail,
                errors: refused
                    .iter()
                    .map(|r| FieldError {
                        field: format!("{}:{}", r.file, r.line),
                        message: r.why.clone(),
                    })
                    .collect(),
            },
            InstallError::HashMismatch { .. } => unprocessable("hash_mismatch"),
            InstallError::SignatureRequired => unprocessable("signature_required"),
            InstallError::BadSignature(_) => unprocessable("bad_signature"),
            InstallError::NameTaken { .. } => conflict("name_taken"),
            InstallError::Exists { .. } => conflict("version_exists"),
            InstallError::NotReady { .. } | InstallError::NotPending { .. } => conflict("wrong_status"),
            InstallError::InFlight(_) => conflict("runs_in_flight"),
            InstallError::NoRoot => ApiError::Unavailable(detail),
            InstallError::NotFound(name) => ApiError::not_found("installed skill", name),
            InstallError::NoSuchVersion(name, version) => {
                ApiError::not_found("skill version", format!("{name}@{version}"))
            }
            // Not `forbidden`, which says the token's role is too low.
            InstallError::OtherSource { .. } => ApiError::Refused {
                code: "not_installed",
                detail,
            },
        }
    }
}

/// The hidden cause of a 500, carried to the logging middleware.
#[derive(Debug, Clone)]
pub struct InternalCause(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_name_the_metadata_only_with_oauth() {
        let unauthorized = |token_sent| ApiError::Unauthorized {
            detail: String::new(),
            token_sent,
        };
        let header = |e: ApiError, meta: Option<&str>| {
            e.challenge()
                .and_then(|c| c.header(meta))
                .map(|v| v.to_str().unwrap().to_owned())
        };
        assert_eq!(
            header(unauthorized(false), None).as_deref(),
            Some(r#"Bearer realm="skilld""#)
        );
        assert_eq!(
            header(
                unauthorized(true),
                Some("https://s.example/.well-known/oauth-protected-resource")
            )
            .as_deref(),
            Some(
                r#"Bearer realm="skilld", error="invalid_token", resource_metadata="https://s.example/.well-known/oauth-protected-resource""#
            )
        );
        let forbidden = || ApiError::Forbidden {
            detail: String::new(),
            scope: "skilld:invoke".into(),
        };
        assert_eq!(header(forbidden(), None), None);
        assert_eq!(
            header(forbidden(), Some("m")).as_deref(),
            Some(
                r#"Bearer realm="skilld", error="insufficient_scope", scope="skilld:invoke", resource_metadata="m""#
            )
        );
        assert!(ApiError::BadRequest(String::new()).challenge().is_none());
    }
}
