//! Problem responses that several operations share, named once for their
//! `#[utoipa::path(responses(…))]`, so each failure reads the same in
//! every operation of the document.

use super::error::Problem;
use utoipa::IntoResponses;

/// 400 for a query or path that does not parse.
#[derive(IntoResponses)]
#[response(
    status = 400,
    description = "A query or path parameter does not parse, or the query names a parameter this operation does not take",
    content_type = "application/problem+json"
)]
pub struct BadQuery(pub Problem);

/// 503 when the store cannot be reached.
#[derive(IntoResponses)]
#[response(
    status = 503,
    description = "The store is unreachable",
    content_type = "application/problem+json"
)]
pub struct StoreUnavailable(pub Problem);

/// 404 for an unknown skill.
#[derive(IntoResponses)]
#[response(
    status = 404,
    description = "No such skill",
    content_type = "application/problem+json"
)]
pub struct NoSuchSkill(pub Problem);

/// What every invoke operation can answer besides its own 404 and 409.
#[derive(IntoResponses)]
pub enum InvokeProblems {
    #[response(
        status = 400,
        description = "The body is not JSON or not an invoke request, `wait` is over 300, or the query names a parameter this operation does not take",
        content_type = "application/problem+json"
    )]
    BadRequest(Problem),
    #[response(
        status = 403,
        description = "A standing deny grant refused the call (`denied`; nothing ran, the attempt is recorded), or a person denied it while the caller waited",
        content_type = "application/problem+json"
    )]
    Denied(Problem),
    #[response(
        status = 413,
        description = "The body is over 1 MiB",
        content_type = "application/problem+json"
    )]
    TooLarge(Problem),
    #[response(
        status = 408,
        description = "The body did not arrive whole within 30 seconds",
        content_type = "application/problem+json"
    )]
    TooSlow(Problem),
    #[response(
        status = 415,
        description = "A body sent without `Content-Type: application/json`",
        content_type = "application/problem+json"
    )]
    NotJson(Problem),
    #[response(
        status = 422,
        description = "The arguments fail the tool's schema, or argument injection",
        content_type = "application/problem+json"
    )]
    InvalidArguments(Problem),
    #[response(
        status = 429,
        description = "Too many runs at once, or too many of this caller's calls wait for a person; see Retry-After",
        content_type = "application/problem+json"
    )]
    Busy(Problem),
    #[response(
        status = 503,
        description = "The run log is unreachable (nothing ran), the server is stopping, or too many event streams are open",
        content_type = "application/problem+json"
    )]
    Unavailable(Problem),
}

/// What approving and denying can answer besides their 404 and 409.
#[derive(IntoResponses)]
pub enum DecisionProblems {
    #[response(
        status = 400,
        description = "The body is not a decision, or its note is over 4096 characters",
        content_type = "application/problem+json"
    )]
    BadRequest(Problem),
    #[response(
        status = 408,
        description = "The body did not arrive whole within 30 seconds",
        content_type = "application/problem+json"
    )]
    TooSlow(Problem),
    #[response(
        status = 415,
        description = "A body sent without `Content-Type: application/json`",
        content_type = "application/problem+json"
    )]
    NotJson(Problem),
    #[response(
        status = 403,
        description = "The approver is the one who asked (self_approval)",
        content_type = "application/problem+json"
    )]
    SelfApproval(Problem),
}
