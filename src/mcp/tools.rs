//! `tools/list` and `tools/call`: the catalog's MCP export, and calls
//! through the invoke pipeline, answered as MCP tool results.

use super::results::{finished, origin_of, result, text_error};
use super::{Decider, Inbox, WAIT_META, approve, tasks};
use crate::auth::Caller;
use crate::catalog::Catalog;
use crate::export::Format;
use crate::invoke::{Asked, Call, Called, Delivery, Gate, Held, InvokeError, Invoker, MAX_WAIT, Target};
use crate::skill::TaskSupport;
use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ListToolsResult,
    RequestMetaObject,
};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// Every tool, exactly as `GET /tools?format=mcp` exports it (with
/// `mode`, as `&mode=` does).
/// With `load_tool`, also `load_skill` (`mcp_load_skill_tool`).
/// Made once per catalog snapshot, mode and `load_tool`: every session
/// asks for the same list, and making it parses and converts every tool.
pub(super) fn list(
    catalog: &Catalog,
    mode: Option<&str>,
    load_tool: bool,
) -> Result<ListToolsResult, ErrorData> {
    // A mode no tool names lists what every such mode lists: one entry
    // for all of them, so callers cannot grow the cache with made-up modes.
    let key = match mode {
        None => format!("mcp tools/list {load_tool} all"),
        Some(m) => format!(
            "mcp tools/list {load_tool} mode {:?}",
            catalog.exports.known_mode(m)
        ),
    };
    let made = catalog
        .derived
        .get_or_try_make(&key, || make_list(catalog, mode, load_tool))?;
    Ok(ListToolsResult::clone(&made))
}

fn make_list(catalog: &Catalog, mode: Option<&str>, load_tool: bool) -> Result<ListToolsResult, ErrorData> {
    let body = catalog.exports.body(Format::Mcp, mode, None);
    let mut wire: Value = serde_json::from_slice(&body)
        .map_err(|e| ErrorData::internal_error(format!("the tool export: {e}"), None))?;
    if super::skills::offers_load_tool(catalog, load_tool)
        && let Some(tools) = wire.get_mut("tools").and_then(Value::as_array_mut)
    {
        tools.push(super::skills::load_tool());
    }
    super::shaped(wire)
}

/// Who asks for a `tools/call`, and how.
pub(super) struct Asking<'a> {
    /// Decides what the caller decides in its client.
    pub(super) approver: &'a crate::invoke::Approver,
    pub(super) caller: &'a Caller,
    /// `_meta` `skilld/wait`, or why it is not a wait.
    pub(super) wait: Result<Duration, String>,
    /// The caller's mode, if it named one.
    pub(super) mode: Option<String>,
    /// Where a person decides a call that waits for one.
    pub(super) inbox: Inbox<'a>,
    /// The client has the Tasks extension (for this request or its
    /// session): a held call, or a call of a skill with `tasks`, answers
    /// with a task.
    pub(super) tasks: bool,
    /// Whether, and how, the caller decides its own held call in its client.
    pub(super) in_client: InClient,
    /// Who hears of the run's events while it runs.
    pub(super) listener: Option<super::events::Listener>,
    /// A call that waits for a person answers as an error (its tool
    /// declares an output schema; set by [`call`]).
    pub(super) waiting_is_error: bool,
    /// `load_skill` is offered (`mcp_load_skill_tool`).
    pub(super) load_tool: bool,
    /// `_meta` `skilld/session`, or why it is not a session's id.
    pub(super) session: Result<Option<crate::invoke::CallSession>, String>,
    /// The client's model, when it offers sampling.
    pub(super) sampler: Option<Arc<dyn crate::skill::context::Sampler>>,
}

/// How a caller that may decide its own held calls is asked.
pub(super) enum InClient {
    /// It may not, or its client cannot be asked: the inbox decides.
    No,
    /// `elicitation/create` on its session (2025-11-25 and before).
    Elicit(rmcp::Peer<rmcp::RoleServer>),
    /// An `input_required` result, answered by a retry (2026-07-28).
    InputRequired,
}

/// Runs one `tools/call`. Only a request that names no tool (or needs
/// tasks the client lacks) is a protocol error; everything the model can
/// act on (bad arguments, a held call, a denial, a tool of another mode, a
/// failed run) is a result it reads, with `isError` set where it failed.
pub(super) async fn call(
    invoker: &Arc<Invoker>,
    catalog: &Arc<Catalog>,
    request: CallToolRequestParams,
    mut asking: Asking<'_>,
) -> Result<CallToolResponse, ErrorData> {
    if asking.load_tool
        && request.name == super::skills::LOAD_TOOL
        && super::skills::offers_load_tool(catalog, true)
    {
        return super::shaped::<CallToolResult>(super::skills::load(catalog, request.arguments.as_ref()))
            .map(CallToolResponse::from);
    }
    if let (Some(state), InClient::InputRequired) = (&request.request_state, &asking.in_client) {
        return resume(catalog, &request, state, &asking).await;
    }
    let target = Target::Tool(request.name.into_owned());
    let support = task_support(catalog, &target);
    if support == TaskSupport::Required && !asking.tasks {
        return Err(ErrorData::missing_required_client_capability(
            ClientCapabilities::builder().enable_tasks().build(),
        ));
    }
    let as_task = asking.tasks && support != TaskSupport::Forbidden;
    asking.waiting_is_error = declares_output(catalog, &target);
    // A client with tasks gets a held call as a task at once.
    let wait = match asking.wait {
        Ok(_) if asking.tasks => Duration::ZERO,
        Ok(wait) => wait,
        Err(why) => return Ok(text_error(why).into()),
    };
    let session = match &asking.session {
        Ok(session) => session.clone(),
        Err(why) => return Ok(text_error(why.clone()).into()),
    };
    let call = Call {
        target,
        arguments: Value::Object(request.arguments.unwrap_or_default()),
        mode: asking.mode.clone(),
        dry_run: false,
        wait,
        delivery: if as_task {
            Delivery::Started
        } else {
            Delivery::Result
        },
        gate: Gate::Policy,
        asked: Asked {
            by: asking.caller.name.clone(),
            request_id: None,
        },
        sampler: asking.sampler.clone(),
        budget: None,
        session,
    };
    // A task's client polls for its end rather than hearing it run.
    let listener = asking.listener.take().filter(|_| !as_task);
    match super::events::call(invoker, catalog, call, listener).await {
        Ok(Called::Finished(envelope)) => {
            let origin = origin_of(&asking.inbox);
            Ok(finished(invoker, catalog, &envelope, &origin).await.into())
        }
        Ok(Called::Started { live, .. }) => Ok(tasks::created(live.id, None).into()),
        Ok(Called::Held(held)) if asking.tasks => {
            let message = held_text(&held, &asking.inbox);
            Ok(tasks::created(held.run_id, Some(message)).into())
        }
        Ok(Called::Held(held)) => ask_in_client(catalog, held, &asking).await,
        Ok(called) => answer(called, &asking).map(CallToolResponse::from),
        Err(e @ (InvokeError::NotFound { .. } | InvokeError::Ambiguous { .. })) => {
            Err(ErrorData::invalid_params(e.to_string(), None))
        }
        Err(InvokeError::Store(e)) => {
            tracing::error!(error = %e, "MCP tools/call: the run log failed");
            Err(ErrorData::internal_error("the run log is unavailable", None))
        }
        Err(e) => Ok(text_error(e.sentence()).into()),
    }
}

/// A held call, for a client without tasks: asked of the person in their
/// client where they decide their own calls, else the waiting result.
async fn ask_in_client(
    catalog: &Arc<Catalog>,
    held: Held,
    asking: &Asking<'_>,
) -> Result<CallToolResponse, ErrorData> {
    let waiting = || Ok(held_for_a_person(&held, asking).into());
    let peer = match &asking.in_client {
        InClient::No => return waiting(),
        InClient::InputRequired => {
            let request = approve::request_of(asking.approver.reader(), &held).await?;
            return approve::input_required(&request).map(CallToolResponse::from);
        }
        InClient::Elicit(peer) => peer,
    };
    let request = approve::request_of(asking.approver.reader(), &held).await?;
    let asked = peer
        .create_elicitation_with_timeout(approve::question(&request)?, Some(MAX_WAIT))
        .await;
    let answer = match asked {
        Ok(result) => approve::answer(&result)?,
        // The client could not ask (or nobody answered in time): the inbox decides.
        Err(e) => {
            tracing::info!(error = %e, approval = %held.approval_id, "in-client approval not answered");
            return waiting();
        }
    };
    match approve::decide(
        asking.approver,
        catalog,
        asking.caller,
        &asking.inbox,
        &request,
        answer,
    )
    .await?
    {
        Some(result) => Ok(result.into()),
        None => waiting(),
    }
}

/// A retry with the person's answer to an `input_required` approval.
async fn resume(
    catalog: &Arc<Catalog>,
    request: &CallToolRequestParams,
    state: &str,
    asking: &Asking<'_>,
) -> Result<CallToolResponse, ErrorData> {
    let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
    let pending = approve::resumed(
        asking.approver.reader(),
        asking.caller,
        state,
        &request.name,
        &arguments,
    )
    .await?;
    let responses = request.input_responses.clone().unwrap_or_default();
    let answer = approve::answer(&approve::response(&responses)?)?;
    let held = Held {
        run_id: pending.run_id,
        approval_id: pending.id,
    };
    match approve::decide(
        asking.approver,
        catalog,
        asking.caller,
        &asking.inbox,
        &pending,
        answer,
    )
    .await?
    {
        Some(result) => Ok(result.into()),
        None => Ok(held_for_a_person(&held, asking).into()),
    }
}

/// What the skill of the tool `target` names says of tasks (`Forbidden`
/// for a tool that is not there: the pipeline says why).
fn task_support(catalog: &Catalog, target: &Target) -> TaskSupport {
    crate::invoke::resolve(catalog, target)
        .map(|i| catalog.skills[catalog.tools[i].skill].task_support)
        .unwrap_or_default()
}

/// Whether the tool `target` names declares an output schema: then only a
/// result whose structured content conforms may be a success, so even a
/// call that merely waits answers as an error (a client checks).
fn declares_output(catalog: &Catalog, target: &Target) -> bool {
    crate::invoke::resolve(catalog, target).is_ok_and(|i| {
        let entry = &catalog.tools[i];
        let skill = &catalog.skills[entry.skill];
        skill
            .tools
            .get(entry.tool)
            .is_some_and(|tool| skill.output_schema(&tool.name).is_some())
    })
}

/// `_meta["skilld/wait"]`: whole seconds, at most [`MAX_WAIT`].
pub(super) fn wait(meta: &RequestMetaObject) -> Result<Duration, String> {
    let Some(value) = meta.0.get(WAIT_META) else {
        return Ok(Duration::ZERO);
    };
    value
        .as_u64()
        .filter(|&secs| secs <= MAX_WAIT.as_secs())
        .map(Duration::from_secs)
        .ok_or_else(|| {
            format!(
                "_meta \"{WAIT_META}\" must be a whole number of seconds from 0 to {}",
                MAX_WAIT.as_secs()
            )
        })
}

/// The mode in the query of an `/mcp` request (`/mcp?mode=Dev`).
pub(super) fn query_mode(parts: &hyper::http::request::Parts) -> Option<String> {
    let query = parts.uri.query()?;
    form_urlencoded::parse(query.as_bytes())
        .find(|(name, _)| name == "mode")
        .map(|(_, value)| value.into_owned())
}

fn answer(called: Called, asking: &Asking<'_>) -> Result<CallToolResult, ErrorData> {
    match called {
        Called::Held(held) => Ok(held_for_a_person(&held, asking)),
        Called::Refused { run_id, reason } => Ok(text_error(format!(
            "{reason}; nothing ran (run {run_id} is recorded as denied)"
        ))),
        Called::Finished(_) | Called::DryRun(_) | Called::Started { .. } => Err(ErrorData::internal_error(
            "the pipeline answered a call that waits for its result with something else",
            None,
        )),
    }
}

/// Where a person decides a held call: links that work from anywhere,
/// and, over stdio, whether a server is there to decide.
fn decided_where(inbox: &Inbox<'_>, id: uuid::Uuid) -> (String, String) {
    match inbox.locate() {
        Decider::At(origin) => {
            let text =
                format!("It can be decided in the inbox at {origin}/ui or at {origin}/approvals/{id}.");
            (origin, text)
        }
        Decider::Shared(origin) => {
            let text = format!(
                "It is decided in the inbox of a skilld serve that shares this run log \
                 ({origin}/ui, if that is its address)."
            );
            (origin, text)
        }
        Decider::Nobody(origin) => {
            let text = format!(
                "No skilld serve uses this run log now, so nobody can decide it yet: start one on \
                 the same data directory (skilld serve, with this session's --data-dir, --database \
                 and --config) and open the inbox link it prints ({origin}/ui#secret=…)."
            );
            (origin, text)
        }
    }
}

/// Why nothing ran yet, and where a person decides.
fn held_text(held: &Held, inbox: &Inbox<'_>) -> String {
    let (_, where_to) = decided_where(inbox, held.approval_id);
    format!(
        "This call is waiting for a person to approve it; nothing has run yet (approval {id}). \
         {where_to} Once approved it runs as run {run}.",
        id = held.approval_id,
        run = held.run_id,
    )
}

/// A held call for a client without tasks: not a failure, but a call that
/// waits. Calling again with the same arguments joins the same request.
fn held_for_a_person(held: &Held, asking: &Asking<'_>) -> CallToolResult {
    let inbox = &asking.inbox;
    let (origin, _) = decided_where(inbox, held.approval_id);
    let text = format!(
        "{} Calling again with the same arguments joins this request rather than filing another; \
         to receive the result in the same call, call with _meta {{\"{WAIT_META}\": <seconds up to {max}>}}.",
        held_text(held, inbox),
        max = MAX_WAIT.as_secs(),
    );
    let structured = json!({
        "status": "pending_approval",
        "run_id": held.run_id,
        "approval_id": held.approval_id,
        "approval_url": format!("{origin}/approvals/{}", held.approval_id),
        "run_url": format!("{origin}/runs/{}", held.run_id),
    });
    result(text, Some(structured), asking.waiting_is_error)
}

/// `scheme://host` of the request, for links a person can open.
pub(super) fn origin(parts: &hyper::http::request::Parts) -> Option<String> {
    let host = parts.headers.get(hyper::http::header::HOST)?.to_str().ok()?;
    let scheme = parts
        .headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .filter(|p| matches!(*p, "http" | "https"))
        .unwrap_or("http");
    Some(format!("{scheme}://{host}"))
}
