//! The Model Context Protocol face of skilld (`docs/mcp.md`): tools,
//! prompts and resources over Streamable HTTP (`/mcp`, see `http::mcp`)
//! and stdio (`skilld mcp`). It only translates: tool calls go through
//! [`Invoker::call`] like HTTP's, so the policy, approvals, sandbox and run
//! log are the same whichever way a call arrives.

mod catalog;
mod output;
mod tools;

use crate::auth::{Caller, Role};
use crate::catalog::{AgentTools, CatalogHandle};
use crate::invoke::Invoker;
use crate::store::Serving;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, GetPromptRequestParams, GetPromptResponse, Implementation,
    ListPromptsResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, RequestMetaObject, ServerCapabilities, ServerConfig,
    SubscriptionFilter,
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
    /// Who calls when the transport does not say (stdio: the local user).
    /// Over HTTP every request carries its own [`Caller`], put there by
    /// the route's authentication.
    local: Option<Arc<LocalSession>>,
}

/// What a stdio session (`skilld mcp`) knows that a request does not say.
#[derive(Debug, Clone)]
pub struct LocalSession {
    /// The local user.
    pub caller: Caller,
    /// The mode of every request that names none in its `_meta`
    /// (`skilld mcp --mode`).
    pub mode: Option<String>,
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
    /// A server for callers that each HTTP request names.
    pub fn over_http(catalog: Arc<CatalogHandle>, invoker: Arc<Invoker>) -> Self {
        Self {
            catalog,
            invoker,
            local: None,
        }
    }

    /// A server for the one local client of a stdio session.
    pub fn local(catalog: Arc<CatalogHandle>, invoker: Arc<Invoker>, session: LocalSession) -> Self {
        Self {
            catalog,
            invoker,
            local: Some(Arc::new(session)),
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
fn http_parts(ctx: &RequestContext<RoleServer>) -> Option<&axum::http::request::Parts> {
    ctx.extensions.get::<axum::http::request::Parts>()
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_resources()
            .enable_resources_list_changed()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("skilld", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.caller(&ctx, Role::Read)?;
        let mode = self.mode(&ctx.meta, &ctx);
        tools::list(&self.catalog.current(), mode.as_deref())
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
        let asked = tools::Asking {
            caller: &caller,
            wait,
            mode,
            inbox,
        };
        tools::call(&self.invoker, &catalog, request, asked)
            .await
            .map(CallToolResponse::from)
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
        catalog::prompt(&self.catalog.current(), &request.name, &policy).map(GetPromptResponse::from)
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
        catalog::read(&catalog, &request.uri)
            .await
            .map(ReadResourceResponse::from)
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
A call that a person must approve first answers with isError and the approval's id and URL; \
pass `_meta: {\"skilld/wait\": <seconds up to 300>}` to wait for the decision and get the result, \
and `_meta: {\"skilld/mode\": \"Dev\"}` (or /mcp?mode=Dev) to work in a mode: tools of skills that do not serve in it are refused. \
Prompts hold each skill's instructions; resources hold the files they reference. \
State your own tools with `_meta: {\"skilld/agent_tools\": [\"read\", \"write\", …]}` to leave out \
the prompts of skills that need others.";
