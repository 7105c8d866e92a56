//! What the session runtime refuses or cannot do.

use crate::invoke::FieldError;
use crate::store::StoreError;
use uuid::Uuid;

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("session {0} not found: it ended, expired, or is not this caller's")]
    NotFound(Uuid),
    #[error(
        "this caller holds {live} live sessions, the most allowed ({max}); end one (DELETE /sessions/ID) first"
    )]
    TooMany { live: u64, max: u64 },
    #[error("session {0} was changed by another request at the same time; send this one again")]
    Busy(Uuid),
    #[error("{} field(s) of the session request are invalid", .0.len())]
    Invalid(Vec<FieldError>),
    #[error("{} name(s) of the session request are of no loaded skill", .0.len())]
    UnknownSkill(Vec<FieldError>),
    #[error("{0}")]
    BadPath(String),
    #[error("skill '{skill}' has no activation request waiting in session {session}")]
    NotActivating { skill: String, session: Uuid },
    #[error("'{0}' opened this session and cannot allow its skills itself: a person decides")]
    SelfApproval(String),
    #[error("skill '{0}' changed since its activation was asked for; its triggers ask again")]
    SkillChanged(String),
    #[error("activation request {request} of skill '{skill}' no longer waits in session {session}; {}",
        .instead.as_ref().map_or_else(
            || "the skill changed or went, and asks again at the session's next turn".to_owned(),
            Instead::says,
        ))]
    RequestGone {
        skill: String,
        session: Uuid,
        request: Uuid,
        instead: Option<Instead>,
    },
    #[error("session {session} is locked to this request: {}", .why.says())]
    Locked {
        session: Uuid,
        why: super::secret::Locked,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Internal(String),
}

/// The request that waits instead of the one a person decided.
#[derive(Debug, Clone)]
pub struct Instead {
    pub request: Uuid,
    pub hash: String,
    pub permissions: Vec<String>,
}

impl Instead {
    fn says(&self) -> String {
        format!(
            "request {} waits instead, asking for [{}] for the version {}: read it (GET /activations) and decide that one",
            self.request,
            self.permissions.join(", "),
            self.hash
        )
    }
}

impl SessionError {
    pub(super) fn internal(e: impl std::fmt::Display) -> Self {
        Self::Internal(e.to_string())
    }

    /// The field errors it carries, for the problem document.
    pub fn field_errors(&self) -> Vec<FieldError> {
        match self {
            Self::Invalid(errors) | Self::UnknownSkill(errors) => errors.clone(),
            _ => Vec::new(),
        }
    }
}
