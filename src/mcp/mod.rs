//! The Model Context Protocol face of skilld (`docs/mcp.md`): tools,
//! prompts and resources over Streamable HTTP (`/mcp`, see `http::mcp`)
//! and stdio (`skilld mcp`). It only translates: tool calls go through
//! [`Invoker::call`] like HTTP's, so the policy, approvals, sandbox and run
//! log are the same whichever way a call arrives.

mod approve;
mod catalog;
mod complete;
mod content;
mod events;
mod logging;
mod output;
mod results;
mod sampling;
mod skills;
mod tasks;
mod tools;
mod upstream;

use crate::auth::{Caller, Role};
use crate::catalog::{AgentTools, CatalogHandle};
use crate::store::Serving;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CompleteRequestParams, CompleteResult,
    GetPromptRequestParams, GetPromptResponse, GetSkillRequestParams, GetSkillResult, GetTaskParams,
    GetTaskResult, Implementation, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListSkillsResult, ListToolsResult, PaginatedRequestParams, ReadResourceDirectoryRequestParams,
    ReadResourceDirectoryResult, ReadResourceRequestParams, ReadResourceResponse, RequestMetaObject,
    ServerCapabilities, ServerConfig, SubscriptionFilter, UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;
use std::sync::Arc;

/// The `_meta` key of a `tools/call` that asks to wait, in seconds (at
/// most 300), for a call held for approval to be decided and run.
pub const WAIT_META: &str = "skilld/wait";

/// The `_meta` key of a request that states the agent's tools (a list of
/// names, or one comma-separated string), as `?agent_tools=` does over
/// HTTP: prompts of skills that need other tools are left out.
pub const AGENT_TOOLS_META: &str = "skilld/agent_tools";

/// The `_meta` key of a `tools/call` (or `tools/list`) that names the
/// caller's mode (`Dev`, `Meeting`, …): a tool whose skill does not serve
/// in it is not listed, and a call of it is refused (seed 000 §7.2).
pub const MODE_META: &str = "skilld/mode";

/// How often a session's reload watcher looks whether the session ended.
const SESSION_CHECK: std::time::Duration = std::time::Duration::from_secs(30);

/// Tells a handshake-era session that its lists changed.
async fn announce(peer: &rmcp::Peer<RoleServer>) -> Result<(), rmcp::service::ServiceError> {
    peer.notify_tool_list_changed().await?;
    peer.notify_prompt_list_changed().await?;
    peer.notify_resource_list_changed().await
}

/// One MCP session's server. Cheap to clone: one per session.
#[derive(Clone)]
pub struct McpServer {
    catalog: Arc<CatalogHandle>,
    invoker: Arc<crate::invoke::Invoker>,
    /// Decides a held call the caller decides in its client.
    approver: crate::invoke::Approver,
    /// Who calls when the transport does not say (stdio: the local user).
    /// Over HTTP every request carries its own [`Caller`], put there by
    /// the route's authentication.
    local: Option<Arc<LocalSession>>,
    /// The level `logging/setLevel` set for the session.
    log_level: logging::SessionLevel,
}

/// What a stdio session (`skilld mcp`) knows that a request does not say.
#[derive(Debug, Clone)]
pub struct LocalSession {
    /// The local user.
    pub caller: Caller,
    /// The mode of every request that names none in its `_meta`
    /// (`skilld mcp --mode`).
    pub mode: Option<String>,
    /// The local user decides their own held calls in their client
    /// (`skilld mcp --client-approval`).
    pub client_approval: bool,
    pub inbox: LocalInbox,
}

/// Where the person who decides a stdio session's held calls does it:
/// a `skilld serve` sharing its run log, if one runs.
#[derive(Debug, Clone)]
pub struct LocalInbox {
    /// The run log the session and that server share.
    pub database_url: String,
    /// Where that server is reached when it does not say: `--public-url`,
    /// else the address `skilld serve` would listen on with this
    /// configuration.
    pub address: String,
}

/// Where a held call is decided, as the request that made it knows.
pub(super) enum Inbox<'a> {
    /// The server this request came to (`scheme://host`).
    Http(&'a str),
    Local(&'a LocalInbox),
}

/// Who decides a held call, as its message says.
pub(super) enum Decider {
    /// The server at this origin, known to serve.
    At(String),
    /// A server sharing the run log, perhaps at this origin (a shared
    /// PostgreSQL run log does not say who serves it).
    Shared(String),
    /// No server serves the run log now; one would listen here.
    Nobody(String),
}

impl Inbox<'_> {
    pub(super) fn locate(&self) -> Decider {
        let local = match self {
            Inbox::Http(origin) => return Decider::At((*origin).to_owned()),
            Inbox::Local(local) => local,
        };
        match crate::store::who_serves(&local.database_url) {
            Serving::At(Some(url)) => Decider::At(url),
            Serving::At(None) => Decider::At(local.address.clone()),
            Serving::Nobody => Decider::Nobody(local.address.clone()),
            Serving::Unknown => Decider::Shared(local.address.clone()),
        }
    }
}

impl McpServer {
    /// Task `id` as its caller may see it (`tasks/get`, `tasks/update`).
    async fn task(&self, id: &str, ctx: &RequestContext<RoleServer>) -> Result<GetTaskResult, ErrorData> {
        let caller = self.caller(ctx, Role::Invoke)?;
        let catalog = self.catalog.current();
        tasks::get(&self.approver, &catalog, &caller, id, &self.origin(ctx)).await
    }

    /// A server for callers that each HTTP request names.
    pub fn over_http(catalog: Arc<CatalogHandle>, approver: crate::invoke::Approver) -> Self {
        Self {
            catalog,
            invoker: approver.pipeline().clone(),
            approver,
            local: None,
            log_level: logging::SessionLevel::default(),
        }
    }

    /// A server for the one local client of a stdio session.
    pub fn local(
        catalog: Arc<CatalogHandle>,
        approver: crate::invoke::Approver,
        session: LocalSession,
    ) -> Self {
        Self {
            catalog,
            invoker: approver.pipeline().clone(),
            approver,
            local: Some(Arc::new(session)),
            log_level: logging::SessionLevel::default(),
        }
    }

    /// The caller's mode for this request: its `_meta` `skilld/mode`, else
    /// the `mode` of the `/mcp` URL, else the session's.
    fn mode(
        &self,
        meta: &rmcp::model::RequestMetaObject,
        ctx: &RequestContext<RoleServer>,
    ) -> Option<String> {
        let from_meta = meta.0.get(MODE_META).and_then(|m| m.as_str()).map(str::to_owned);
        from_meta
            .or_else(|| http_parts(ctx).and_then(tools::query_mode))
            .or_else(|| self.local.as_ref().and_then(|l| l.mode.clone()))
    }

    /// Where this request's links point: the server it came to, else
    /// where the stdio session's inbox is.
    fn origin(&self, ctx: &RequestContext<RoleServer>) -> String {
        http_parts(ctx)
            .and_then(tools::origin)
            .or_else(|| self.local.as_ref().map(|l| l.inbox.address.clone()))
            .unwrap_or_default()
    }

    /// How this request's caller is asked to decide its own held calls in
    /// its client, if the configuration lets it and the client can be.
    fn in_client(&self, ctx: &RequestContext<RoleServer>, caller: &Caller) -> tools::InClient {
        let marked = caller
            .name
            .as_ref()
            .is_some_and(|name| self.invoker.settings().client_approval.contains(name));
        let allowed = marked || self.local.as_ref().is_some_and(|l| l.client_approval);
        let elicits = ctx.client_capabilities().is_some_and(|c| c.elicitation.is_some());
        if !allowed || !elicits {
            return tools::InClient::No;
        }
        match skills::has_cache_hints(ctx) {
            true => tools::InClient::InputRequired,
            false => tools::InClient::Elicit(ctx.peer.clone()),
        }
    }

    /// The caller of this request, once it holds `role`.
    fn caller(&self, ctx: &RequestContext<RoleServer>, role: Role) -> Result<Caller, ErrorData> {
        let caller = http_parts(ctx)
            .and_then(|parts| parts.extensions.get::<Caller>().cloned())
            .or_else(|| self.local.as_ref().map(|l| l.caller.clone()))
            .ok_or_else(|| ErrorData::internal_error("the request carries no caller", None))?;
        caller
            .require(role)
            .map_err(|e| ErrorData::invalid_request(e.to_string(), None))?;
        Ok(caller)
    }

    /// The caller's tool policy: the request's `_meta` states it, else the
    /// `/mcp?agent_tools=` URL the client was given, else the server's
    /// `agent_tools` setting.
    fn policy(
        &self,
        meta: Option<&RequestMetaObject>,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<AgentTools, ErrorData> {
        let meta = meta.unwrap_or(&ctx.meta);
        let stated = match meta.0.get(AGENT_TOOLS_META) {
            Some(Value::String(list)) => AgentTools::parse(list),
            Some(Value::Array(names)) if names.iter().all(Value::is_string) => {
                AgentTools::stated(names.iter().filter_map(Value::as_str))
            }
            Some(_) => {
                return Err(ErrorData::invalid_params(
                    format!(
                        "_meta \"{AGENT_TOOLS_META}\" must be a list of tool names or a comma-separated string"
                    ),
                    None,
                ));
            }
            None => AgentTools::from_query(http_parts(ctx).and_then(|p| p.uri.query())),
        };
        Ok(stated.or(self.catalog.agent_tools()))
    }
}

/// Builds an MCP result from its wire shape, which the SDK's types read
/// (most of them cannot be built field by field outside the SDK).
/// Each is `complete`: skilld asks no client for input mid-call (the SDK
/// drops the field for clients older than 2026-07-28).
fn shaped<T: serde::de::DeserializeOwned>(mut wire: serde_json::Value) -> Result<T, ErrorData> {
    if let Some(fields) = wire.as_object_mut() {
        fields.insert("resultType".into(), "complete".into());
    }
    serde_json::from_value(wire).map_err(|e| ErrorData::internal_error(format!("an MCP result: {e}"), None))
}

/// The HTTP request a Streamable HTTP message arrived in.
fn http_parts(ctx: &RequestContext<RoleServer>) -> Option<&hyper::http::request::Parts> {
    ctx.extensions.get::<hyper::http::request::Parts>()
}

impl ServerHandler for McpServer {
    #[expect(
        deprecated,
        reason = "MCP logging is deprecated by SEP-2577, and still part of the protocol"
    )]
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_resources()
            .enable_resources_list_changed()
            .enable_skills_with_directory_read()
            .enable_tasks()
            .enable_logging()
            .enable_completions()
            .build();
        let catalog = self.catalog.current();
        let index = catalog.instructions_index.get_or_init(|| skills::index(&catalog));
        let instructions = format!("{INSTRUCTIONS}{index}");
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("skilld", env!("CARGO_PKG_VERSION")))
            .with_instructions(instructions)
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.caller(&ctx, Role::Read)?;
        let mode = self.mode(&ctx.meta, &ctx);
        tools::list(
            &self.catalog.current(),
            mode.as_deref(),
            self.invoker.settings().mcp_load_skill_tool,
        )
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = self.caller(&ctx, Role::Invoke)?;
        let origin = http_parts(&ctx).and_then(tools::origin);
        let catalog = self.catalog.current();
        // The SDK moves the request's `_meta` into the context.
        let meta = request.meta.as_ref().unwrap_or(&ctx.meta);
        let wait = tools::wait(meta);
        let mode = self.mode(meta, &ctx);
        let inbox = match (&origin, &self.local) {
            (Some(origin), _) => Inbox::Http(origin),
            (None, Some(local)) => Inbox::Local(&local.inbox),
            // No `Host`: links relative to this server.
            (None, None) => Inbox::Http(""),
        };
        let listener = events::Listener::new(
            ctx.peer.clone(),
            meta.get_progress_token(),
            self.log_level.of(&ctx),
            &request.name,
        );
        let asked = tools::Asking {
            approver: &self.approver,
            caller: &caller,
            wait,
            mode,
            inbox,
            tasks: ctx.client_capabilities().is_some_and(|c| c.supports_tasks()),
            in_client: self.in_client(&ctx, &caller),
            waiting_is_error: false,
            load_tool: self.invoker.settings().mcp_load_skill_tool,
            listener,
            session: sampling::session(meta),
            sampler: sampling::offered(&ctx),
        };
        tools::call(&self.invoker, &catalog, request, asked).await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        self.task(&request.task_id, &ctx).await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let caller = self.caller(&ctx, Role::Invoke)?;
        tasks::cancel(&self.approver, &caller, &request.task_id).await
    }

    /// No skilld task asks its client for input: responses to requests it
    /// never made are ignored, as unknown keys are (SEP-2322), and acked.
    async fn update_task(
        &self,
        request: UpdateTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.task(&request.task_id, &ctx).await.map(|_| ())
    }

    #[expect(
        deprecated,
        reason = "MCP logging is deprecated by SEP-2577, and still part of the protocol"
    )]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.caller(&ctx, Role::Read)?;
        self.log_level.set(request.level, &ctx)
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        self.caller(&ctx, Role::Read)?;
        complete::complete(&self.catalog.current(), &request)
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        self.caller(&ctx, Role::Read)?;
        let policy = self.policy(request.as_ref().and_then(|r| r.meta.as_ref()), &ctx)?;
        catalog::prompts(&self.catalog.current(), &policy)
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        self.caller(&ctx, Role::Read)?;
        let policy = self.policy(request.meta.as_ref(), &ctx)?;
        let catalog = self.catalog.current();
        let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
        // Local skills first: a fronted server's prompt never stands for one.
        if catalog::prompt_skill(&catalog, &request.name).is_none()
            && let Some(answer) = upstream::prompt(&catalog, &request.name, arguments).await
        {
            return answer.map(GetPromptResponse::from);
        }
        catalog::prompt(&catalog, &request.name, &policy).map(GetPromptResponse::from)
    }

    async fn list_resources(
        &self,
        _: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        self.caller(&ctx, Role::Read)?;
        catalog::resources(&self.catalog.current())
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        self.caller(&ctx, Role::Read)?;
        let catalog = self.catalog.current();
        // Local skills first: `skill://` is only ever read from skilld's
        // own files, whatever a fronted server lists.
        if !catalog::is_local(&request.uri)
            && let Some(answer) = upstream::read(&catalog, &request.uri).await
        {
            return answer.map(ReadResourceResponse::from);
        }
        catalog::read(&catalog, &request.uri)
            .await
            .map(ReadResourceResponse::from)
    }

    async fn list_resource_templates(
        &self,
        _: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        self.caller(&ctx, Role::Read)?;
        skills::templates(&self.catalog.current())
    }

    async fn list_skills(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, ErrorData> {
        self.caller(&ctx, Role::Read)?;
        skills::list(
            &self.catalog.current(),
            request.as_ref(),
            skills::has_cache_hints(&ctx),
        )
    }

    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, ErrorData> {
        self.caller(&ctx, Role::Read)?;
        skills::get(
            &self.catalog.current(),
            &request.uri,
            skills::has_cache_hints(&ctx),
        )
    }

    async fn read_resource_directory(
        &self,
        request: ReadResourceDirectoryRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceDirectoryResult, ErrorData> {
        self.caller(&ctx, Role::Read)?;
        skills::directory(&self.catalog.current(), &request.uri, request.cursor.as_deref())
    }

    /// Sessions of the handshake era (before 2026-07-28) hear of reloads
    /// on their session's stream.
    async fn on_initialized(&self, ctx: NotificationContext<RoleServer>) {
        let mut changes = self.catalog.changes();
        changes.mark_unchanged();
        let peer = ctx.peer;
        tokio::spawn(async move {
            // The session may end without a reload to fail on: look now
            // and then, so the task goes with it.
            let mut look = tokio::time::interval(SESSION_CHECK);
            loop {
                tokio::select! {
                    changed = changes.changed() => {
                        if changed.is_err() || announce(&peer).await.is_err() {
                            break;
                        }
                    }
                    _ = look.tick() => {
                        if peer.is_transport_closed() {
                            break;
                        }
                    }
                }
            }
        });
    }

    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        let mut accepted = requested.clone();
        // There is no per-resource change feed, only the lists.
        accepted.resource_subscriptions = None;
        Some(accepted)
    }

    /// `subscriptions/listen` (2026-07-28 and later): the same reloads, on
    /// the subscription's stream, until the client cancels it.
    async fn listen(&self, ctx: SubscriptionContext) -> Result<(), ErrorData> {
        let mut changes = self.catalog.changes();
        changes.mark_unchanged();
        loop {
            tokio::select! {
                () = ctx.cancelled() => return Ok(()),
                changed = changes.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                    let sink = ctx.sink();
                    let accepted = ctx.accepted();
                    let sent = async {
                        if accepted.tools_list_changed == Some(true) {
                            sink.notify_tool_list_changed().await?;
                        }
                        if accepted.prompts_list_changed == Some(true) {
                            sink.notify_prompt_list_changed().await?;
                        }
                        if accepted.resources_list_changed == Some(true) {
                            sink.notify_resource_list_changed().await?;
                        }
                        Ok::<(), rmcp::service::SubscriptionSendError>(())
                    };
                    if sent.await.is_err() {
                        return Ok(());
                    }
                }
            }
        }
    }
}

const INSTRUCTIONS: &str = "skilld serves skills: each tool runs sandboxed and is recorded. \
A call that a person must approve first answers (not as an error) with the approval's id and URL, \
or as a task for clients with the Tasks extension; calling again with the same arguments joins that request. \
Pass `_meta: {\"skilld/wait\": <seconds up to 300>}` to wait for the decision and get the result, \
and `_meta: {\"skilld/mode\": \"Dev\"}` (or /mcp?mode=Dev) to work in a mode: tools of skills that do not serve in it are refused. \
Prompts hold each skill's instructions too; resources hold each skill's SKILL.md and the files it references. \
State your own tools with `_meta: {\"skilld/agent_tools\": [\"read\", \"write\", …]}` to leave out \
the prompts of skills that need others.";
