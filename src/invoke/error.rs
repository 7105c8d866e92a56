//! What a call, a decision or a cancel can fail with, in the pipeline's own
//! terms. The HTTP layer renders each as one problem document; the command
//! line prints it as a sentence.

use crate::store::{ApprovalStatus, RunStatus, StoreError};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

/// One field's problem.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

/// Everything the pipeline refuses or cannot do.
#[derive(Debug, thiserror::Error)]
pub enum InvokeError {
    #[error("{what} '{name}' not found")]
    NotFound { what: &'static str, name: String },
    /// A bare name several skills define: `candidates` are the skills,
    /// `names` the unambiguous `skill__tool` names to call instead.
    #[error(
        "tool '{tool}' is defined by several skills ({}); call it as {}",
        candidates.join(", "),
        names.join(" or ")
    )]
    Ambiguous {
        tool: String,
        candidates: Vec<String>,
        names: Vec<String>,
    },
    #[error("arguments must be a JSON object, not {0}")]
    NotAnObject(&'static str),
    #[error(
        "{n} argument{s} {are} invalid for tool {tool}",
        n = errors.len(),
        s = if errors.len() == 1 { "" } else { "s" },
        are = if errors.len() == 1 { "is" } else { "are" }
    )]
    InvalidArguments { tool: String, errors: Vec<FieldError> },
    #[error("argument '{param}' of tool {tool} begins with '-' where the command would read it as an option")]
    ArgumentInjection { tool: String, param: String },
    #[error("argument '{param}' of tool {tool} contains a NUL byte")]
    Nul { tool: String, param: String },
    /// An optional argument left out of a command word that cannot do
    /// without it (`docs/skills.md`, "Placeholders").
    #[error(
        "argument '{param}' of tool {tool} is missing, and its command's word '{word}' cannot be \
         left out or written without it; nothing ran"
    )]
    MissingInWord {
        tool: String,
        param: String,
        word: String,
    },
    /// The caller's mode is not one the tool's skill serves in.
    #[error(
        "tool {tool} is not available in mode {mode}: skill '{skill}' serves in {}; nothing ran",
        modes.join(", ")
    )]
    NotInMode {
        tool: String,
        skill: String,
        mode: String,
        modes: Vec<String>,
    },
    #[error("wait must be at most {} seconds", super::MAX_WAIT.as_secs())]
    WaitTooLong,
    #[error("mode must be 1 to {max} letters, digits, '_', '-' or '.' (such as Global or Dev)")]
    InvalidMode { max: usize },
    #[error("note is longer than {max} characters")]
    NoteTooLong { max: usize },
    #[error("note contains a NUL byte, which the run log cannot record")]
    NoteHasNul,
    /// A person denied the call while its caller waited.
    #[error("run {run_id} was denied; nothing ran{}", note.as_deref().map(|n| format!(" (note: {n})")).unwrap_or_default())]
    Denied { run_id: Uuid, note: Option<String> },
    /// The call names a session that is not there (over, expired, or
    /// another caller's).
    #[error("session {0} not found: it ended, expired, or is not this caller's")]
    SessionNotFound(Uuid),
    /// The call's tool is of a skill not active in its session.
    #[error(
        "skill '{skill}' is not active in session {session}; a turn activates it (or name it in `explicit`)"
    )]
    SkillNotActive { skill: String, session: Uuid },
    /// The call's skill changed since a person allowed it into the
    /// session: it holds no seat until a person allows the new version.
    #[error(
        "skill '{skill}' changed since it was allowed into session {session}; it is inactive until a person \
         allows the new version (the session's next turn asks)"
    )]
    SkillChangedInSession { skill: String, session: Uuid },
    /// The call names a session it cannot show its right to.
    #[error("session {session} is locked to this call: {why}")]
    SessionLocked { session: Uuid, why: &'static str },
    /// A `before_tool_call` hook of the skill cancelled the call.
    #[error("the skill's before_tool_call hook cancelled the call (run {run_id}): {reason}")]
    HookCancelled { run_id: Uuid, reason: String },
    /// The call needs a permission its skill does not declare.
    #[error(
        "tool {tool} needs the permission '{permission}', which skill '{skill}' does not declare ({why}); nothing ran"
    )]
    PermissionNotDeclared {
        skill: String,
        tool: String,
        permission: &'static str,
        why: &'static str,
    },
    /// A plain skill whose dependencies are not prepared (yet).
    #[error("skill '{skill}' cannot run yet: {why}; nothing ran")]
    DependenciesNotReady { skill: String, why: String },
    #[error("run {0} expired waiting for approval; nothing ran")]
    ApprovalExpired(Uuid),
    #[error("run {run_id} ended {status} without running")]
    NotRun { run_id: Uuid, status: RunStatus },
    #[error("too many runs at once; retry in {retry_after_secs}s")]
    Busy { retry_after_secs: u64 },
    #[error("the server is shutting down")]
    ShuttingDown,
    #[error(
        "{0} event streams are open, the most this server keeps; follow the run with GET /runs/{{id}}?wait=N"
    )]
    TooManyStreams(usize),
    /// The caller holds its share of the event streams already.
    #[error(
        "you have {0} event streams open, the most one caller may hold; close one, or follow the run with GET /runs/{{id}}?wait=N"
    )]
    StreamShare(usize),
    /// The caller has this many requests waiting already.
    #[error(
        "{waiting} of your calls already wait for a person (at most {max}); wait for decisions before asking again"
    )]
    TooManyPending { waiting: u64, max: u64 },
    /// An approver deciding the request its own token made.
    #[error("token '{0}' made this call and cannot decide it; ask another approver")]
    SelfApproval(String),
    #[error("approval {id} is already {}", status.as_str())]
    AlreadyDecided { id: Uuid, status: ApprovalStatus },
    #[error("approval {0} expired before it was decided")]
    RequestExpired(Uuid),
    /// A grant asked for a skill version that is not the one loaded.
    #[error("skill '{skill}' is at hash {current}, not {expected}: review it again before granting")]
    HashMismatch {
        skill: String,
        expected: String,
        current: String,
    },
    /// A grant asked for a skill that has no tools to grant.
    #[error("skill '{0}' has no tools, so there is nothing to grant")]
    NothingToGrant(String),
    /// The skill behind a request is not what the approver was shown.
    #[error("{0}; the request is void: call the tool again")]
    SkillChanged(String),
    #[error("run {id} already finished ({status})")]
    RunFinished { id: Uuid, status: RunStatus },
    #[error("run {0} already started or finished")]
    RunStarted(Uuid),
    #[error("run {0} is running on another instance; cancel it there")]
    RunElsewhere(Uuid),
    /// A token cancelling a run another caller asked for.
    #[error("token '{name}' did not ask for run {id}: only its requester or an approver may cancel it")]
    NotRequester { id: Uuid, name: String },
    /// An `Idempotency-Key` header that is not one.
    #[error("Idempotency-Key must be 1 to {max} printable ASCII characters")]
    InvalidIdempotencyKey { max: usize },
    /// The caller's key made another call (another tool, or other
    /// arguments) than this one.
    #[error(
        "this Idempotency-Key was used for another call (run {run_id}): a retry must send the same tool \
         and arguments; use a new key for a new call"
    )]
    IdempotencyKeyReused { run_id: Uuid },
    /// An installed version that exists but may not run (pending review,
    /// rejected) or does not load.
    #[error("{0}")]
    VersionUnavailable(String),
    #[error("{0}")]
    Internal(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl InvokeError {
    /// The error as one sentence, with its per-field problems.
    pub fn sentence(&self) -> String {
        let fields: Vec<String> = self
            .field_errors()
            .iter()
            .map(|f| format!("{}: {}", f.field, f.message))
            .collect();
        if fields.is_empty() {
            self.to_string()
        } else {
            format!("{self} ({})", fields.join("; "))
        }
    }

    /// The per-field problems, where there are some.
    pub fn field_errors(&self) -> Vec<FieldError> {
        let one = |field: &str, message: &str| {
            vec![FieldError {
                field: field.to_owned(),
                message: message.to_owned(),
            }]
        };
        match self {
            InvokeError::InvalidArguments { errors, .. } => errors.clone(),
            InvokeError::ArgumentInjection { param, .. } => one(
                param,
                "a value starting with '-' is refused here (argument injection)",
            ),
            InvokeError::Nul { param, .. } => one(param, "contains a NUL byte, which no argument can carry"),
            InvokeError::MissingInWord { param, word, .. } => one(
                param,
                &format!("is needed by the command's word '{word}', which carries other values or is a URL"),
            ),
            _ => Vec::new(),
        }
    }
}
