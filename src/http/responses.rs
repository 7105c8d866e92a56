//! Problem responses that several operations share, named once for their
//! `#[utoipa::path(responses(…))]`, so each failure reads the same in
//! every operation of the document.

use super::kit::error::Problem;
use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, Schema, SchemaFormat, Type};
use utoipa::openapi::{OpenApi, RefOr};
use utoipa::{IntoResponses, PartialSchema, ToSchema};

/// 400 for a query or path that does not parse.
#[derive(IntoResponses)]
#[response(
    status = 400,
    description = "A query or path parameter does not parse (such as an id that is not a UUID, or a value out of its documented range), or the query names a parameter this operation does not take",
    content_type = "application/problem+json"
)]
pub struct BadQuery(pub Problem);

/// 503 when the store cannot be reached.
#[derive(IntoResponses)]
#[response(
    status = 503,
    description = "The store is unreachable, or the server is stopping",
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

/// What every operation with a JSON body can answer about the body
/// itself, as [`super::kit::extract::JsonBody`] reads it.
#[derive(IntoResponses)]
pub enum BodyProblems {
    #[response(
        status = 408,
        description = "The body did not arrive whole within 30 seconds",
        content_type = "application/problem+json"
    )]
    TooSlow(Problem),
    #[response(
        status = 413,
        description = "The body is over 1 MiB",
        content_type = "application/problem+json"
    )]
    TooLarge(Problem),
    #[response(
        status = 415,
        description = "A body sent without `Content-Type: application/json`",
        content_type = "application/problem+json"
    )]
    NotJson(Problem),
}

/// What every invoke operation can answer besides its own 404 and 409
/// (and [`BodyProblems`]).
#[derive(IntoResponses)]
pub enum InvokeProblems {
    #[response(
        status = 400,
        description = "The body is not JSON or not an invoke request, `wait` is over 300, the query names a parameter this operation does not take, or `Idempotency-Key` is not a key",
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
        status = 422,
        description = "The arguments fail the tool's schema, or argument injection; or the `Idempotency-Key` was used for another call (`idempotency_key_reused`)",
        content_type = "application/problem+json"
    )]
    InvalidArguments(Problem),
    #[response(
        status = 429,
        description = "Too many runs at once, too many of this caller's calls wait for a person, or (`Accept: text/event-stream`) this caller holds its share of the event streams; see Retry-After",
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

/// What approving and denying can answer besides their 404 and 409 (and
/// [`BodyProblems`]).
#[derive(IntoResponses)]
pub enum DecisionProblems {
    #[response(
        status = 400,
        description = "The body is not a decision, or its note is over 4096 characters; or the id is not a UUID, or the query names a parameter this operation does not take",
        content_type = "application/problem+json"
    )]
    BadRequest(Problem),
    #[response(
        status = 403,
        description = "The approver is the one who asked (self_approval)",
        content_type = "application/problem+json"
    )]
    SelfApproval(Problem),
}

/// 403 from the guard of a server without tokens, on operations that need
/// no token (the others document it with their role).
#[derive(IntoResponses)]
#[response(
    status = 403,
    description = "A server without tokens refused a request a web page could have forged: a foreign `Origin` (`foreign_origin`), or a non-loopback `Host` on a loopback server (`foreign_host`)",
    content_type = "application/problem+json"
)]
pub struct ForeignPage(pub Problem);

/// A file's bytes, as they are on disk: `type: string, format: binary`,
/// so generators hand out bytes rather than a list of integers.
pub struct Binary;

impl PartialSchema for Binary {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Binary)))
            .into()
    }
}

impl ToSchema for Binary {}

/// How every `text/event-stream` answer is described. An event stream is
/// not one value but a sequence of events, so, as OpenAPI 3.2 does, the
/// content has an `itemSchema` (one event: its `event` name and its JSON
/// `data`) and no `schema`: a generator then hands the stream over as it
/// came (as bytes, to be read line by line), and a validator such as
/// schemathesis checks each event. Run over a router's document once its
/// routes are added.
pub fn describe_streams(doc: &mut OpenApi) {
    describe_items(doc, &run_event(), EVENTS_DESCRIPTION);
}

/// As [`describe_streams`], for a router whose one stream is the
/// approvers' inbox (`GET /approvals/events`).
pub fn describe_inbox_stream(doc: &mut OpenApi) {
    describe_items(doc, &inbox_event(), INBOX_EVENTS_DESCRIPTION);
}

fn describe_items(doc: &mut OpenApi, item: &RefOr<Schema>, description: &str) {
    for path in doc.paths.paths.values_mut() {
        let operations = [&mut path.get, &mut path.post];
        for op in operations.into_iter().flatten() {
            for response in op.responses.responses.values_mut() {
                let RefOr::T(response) = response else { continue };
                if let Some(RefOr::T(content)) = response.content.get_mut(EVENT_STREAM) {
                    content.schema = None;
                    content.item_schema = Some(item.clone());
                    content.description = Some(description.to_owned());
                }
            }
        }
    }
}

/// The media type of server-sent events.
pub const EVENT_STREAM: &str = "text/event-stream";

/// The description of a run's events, for the operations that stream them.
pub const EVENTS_DESCRIPTION: &str = "Server-sent events, one JSON object in each `data`: \
`status` (`{\"status\": RunStatus}`, with `approval_id` and `approval_url` while the call waits for a person, \
and the approver's `note` when a person denied it), \
`output` (`{\"chunk\": \"…\"}`: stdout and stderr as they come), \
then `result` (the `Envelope`), and the stream ends. Comment lines keep the connection alive.";

/// The description of the approvers' inbox stream.
pub const INBOX_EVENTS_DESCRIPTION: &str = "Server-sent events, one JSON object in each `data`: first \
`snapshot` (`{\"approvals\": [Approval], \"next_cursor\": string|null}`: the first page of pending \
requests, oldest first, at most 500; when `next_cursor` is set, the rest are read from \
`GET /approvals?status=pending&cursor=…`, following each page's `next_cursor`), then `approval` (an \
`Approval`) each time a request is made or changes (decided, expired, withdrawn, its caller gone); one no \
longer pending leaves the inbox. A fresh `snapshot` follows whenever changes may have been missed. \
Comment lines keep the connection alive.";

/// One server-sent event as schemathesis and other validators read it:
/// `{"event": …, "data": "<JSON text>"}`.
fn event(name: &str, data: serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "required": ["event", "data"],
        "properties": {
            "event": {"type": "string", "enum": [name]},
            "data": {"type": "string", "contentMediaType": "application/json", "contentSchema": data},
        },
    })
}

/// A schema written as JSON for readability: it is a valid schema, so
/// this cannot fail, but an empty schema is the safe answer if it ever did.
fn schema_of(value: serde_json::Value) -> RefOr<Schema> {
    serde_json::from_value(value).unwrap_or_else(|_| RefOr::T(Schema::default()))
}

/// One event of the approvers' inbox.
fn inbox_event() -> RefOr<Schema> {
    schema_of(serde_json::json!({
        "description": "One event: its name and its JSON data.",
        "oneOf": [
            event("snapshot", serde_json::json!({
                "type": "object",
                "required": ["approvals"],
                "properties": {
                    "approvals": {"type": "array", "items": {"$ref": "#/components/schemas/Approval"}},
                    "next_cursor": {"type": ["string", "null"]},
                },
            })),
            event("approval", serde_json::json!({"$ref": "#/components/schemas/Approval"})),
        ],
    }))
}

/// One server-sent event of a run.
fn run_event() -> RefOr<Schema> {
    let schema = serde_json::json!({
        "description": "One event: its name and its JSON data.",
        "oneOf": [
            event("status", serde_json::json!({
                "type": "object",
                "required": ["status"],
                "properties": {
                    "status": {"$ref": "#/components/schemas/RunStatus"},
                    "approval_id": {"type": "string", "format": "uuid"},
                    "approval_url": {"type": "string"},
                    "note": {"type": ["string", "null"]},
                },
            })),
            event("output", serde_json::json!({
                "type": "object",
                "required": ["chunk"],
                "properties": {"chunk": {"type": "string"}},
            })),
            event("result", serde_json::json!({"$ref": "#/components/schemas/Envelope"})),
        ],
    });
    schema_of(schema)
}

/// Marks a router's request bodies optional where `{}` is a valid body:
/// `JsonBody` reads an empty body as `{}`, so a client may leave those
/// out. A body whose schema requires a field stays required, since an
/// empty one is refused (400).
pub fn empty_bodies_allowed(doc: &mut OpenApi) {
    let components = doc.components.clone();
    for item in doc.paths.paths.values_mut() {
        let operations = [&mut item.post, &mut item.put, &mut item.patch];
        for op in operations.into_iter().flatten() {
            if let Some(RefOr::T(body)) = op.request_body.as_mut() {
                let needs_fields = body
                    .content
                    .get("application/json")
                    .and_then(|content| match content {
                        RefOr::T(content) => content.schema.as_ref(),
                        RefOr::Ref(_) => None,
                    })
                    .is_some_and(|schema| requires_fields(schema, components.as_ref()));
                body.required = Some(if needs_fields {
                    utoipa::openapi::Required::True
                } else {
                    utoipa::openapi::Required::False
                });
            }
        }
    }
}

/// Whether an object schema (inline, or a reference to a component) names
/// a required field, so that `{}` does not satisfy it.
fn requires_fields(schema: &RefOr<Schema>, components: Option<&utoipa::openapi::Components>) -> bool {
    let schema = match schema {
        RefOr::T(schema) => Some(schema),
        RefOr::Ref(reference) => {
            let name = reference.ref_location.rsplit('/').next().unwrap_or_default();
            components
                .and_then(|c| c.schemas.get(name))
                .and_then(|found| match found {
                    RefOr::T(schema) => Some(schema),
                    RefOr::Ref(_) => None,
                })
        }
    };
    matches!(schema, Some(Schema::Object(object)) if !object.required.is_empty())
}
