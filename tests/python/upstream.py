"""A test MCP server of our own, on the official Python SDK's low-level
`Server`, for skilld's `mcp` backend (issue 27): the tests and
benches/gateway.rs start it as a stdio child or as a remote Streamable HTTP
server, and read what it received from its log.

    python upstream.py stdio [--log FILE] [--description-file FILE]
    python upstream.py http --port N [--host H] [--log FILE]
                            [--description-file FILE] [--token-env NAME]
                            [--json-response]

The log (`--log`) gets one JSON object a line, flushed at once, for every
request and notification that reaches the server (`kind`, `method`,
`params`, `id`, `tool` for tools/call, and in http mode `authorization`:
whether the header was there, never its value), and for events a test
waits on (`event`: `cancelled`, `list_changed`, `refused`). A call that a
gate denied therefore leaves no `tools/call` line.

Tools:
- `echo` (readOnlyHint): answers its `text`. Its description is the
  content of `--description-file` at each tools/list when given; when the
  file changes (polled every 100 ms) every connected client gets
  `notifications/tools/list_changed` (the standalone stream before
  protocol 2026-07-28, `subscriptions/listen` from it).
- `delete_item` (destructiveHint): answers "deleted ID".
- `slow`: sleeps `seconds`; every 100 ms a progress notification when the
  request carries a progressToken; a cancel (notifications/cancelled, or
  the task cancelled) is logged as an `event`.
- `crash`: the process exits with code 3 at once, answering nothing.
- `whoami`: the uid, cwd and HOME, whether `path` can be opened for reading
  and `connect` ("host:port") connected to, for the sandbox tests.

In http mode, `--token-env NAME` requires `Authorization: Bearer <$NAME>`
(401 otherwise). It prints its endpoint's URL (`http://HOST:PORT/mcp`) as
the first line of stdout once it listens, so `--port 0` works.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError

ECHO_DESCRIPTION = "Answers its text."


class Log:
    """One JSON line per entry, flushed at once so a test reads it live."""

    def __init__(self, path: str | None) -> None:
        self._file = open(path, "a", encoding="utf-8") if path else None

    def write(self, **entry: Any) -> None:
        if self._file is None:
            return
        entry = {"t": time.time(), **entry}
        self._file.write(json.dumps(entry, default=str) + "\n")
        self._file.flush()


class Upstream:
    def __init__(self, log: Log, description_file: str | None) -> None:
        self.log = log
        self.description_file = Path(description_file) if description_file else None
        # Handshake-era connections, told of list changes on their standalone
        # stream; 2026-07-28 clients listen through the bus instead.
        self.sessions: list[ServerSession] = []
        self.bus = InMemorySubscriptionBus()

    def echo_description(self) -> str:
        if self.description_file is None:
            return ECHO_DESCRIPTION
        try:
            return self.description_file.read_text(encoding="utf-8")
        except OSError:
            return ECHO_DESCRIPTION

    def tools(self) -> list[types.Tool]:
        def obj(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
            return {"type": "object", "properties": props, "required": required}

        return [
            types.Tool(
                name="echo",
                description=self.echo_description(),
                input_schema=obj({"text": {"type": "string"}}, ["text"]),
                annotations=types.ToolAnnotations(read_only_hint=True),
            ),
            types.Tool(
                name="delete_item",
                description="Deletes an item (pretends to).",
                input_schema=obj({"id": {"type": "string"}}, ["id"]),
                annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=True),
            ),
            types.Tool(
                name="slow",
                description="Sleeps `seconds`, reporting progress every 100 ms.",
                input_schema=obj({"seconds": {"type": "number"}}, ["seconds"]),
                annotations=types.ToolAnnotations(read_only_hint=True),
            ),
            types.Tool(
                name="crash",
                description="Exits the server process with code 3.",
                input_schema=obj({}, []),
            ),
            types.Tool(
                name="whoami",
                description="The server's uid, cwd and HOME; whether it can read `path` and connect to `connect`.",
                input_schema=obj({"path": {"type": "string"}, "connect": {"type": "string"}}, []),
                annotations=types.ToolAnnotations(read_only_hint=True),
            ),
        ]

    async def list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=self.tools())

    async def call_tool(self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        args = params.arguments or {}
        name = params.name
        if name == "echo":
            return text(str(args.get("text", "")))
        if name == "delete_item":
            return text(f"deleted {args.get('id', '')}")
        if name == "slow":
            return await self.slow(ctx, float(args.get("seconds", 1)))
        if name == "crash":
            self.log.write(event="crash")
            os._exit(3)
        if name == "whoami":
            return whoami(args)
        raise MCPError(code=types.INVALID_PARAMS, message=f"unknown tool {name!r}")

    async def slow(self, ctx: ServerRequestContext[Any], seconds: float) -> types.CallToolResult:
        start = time.monotonic()
        try:
            while (done := time.monotonic() - start) < seconds:
                await ctx.session.report_progress(done, seconds, "sleeping")
                await anyio.sleep(min(0.1, seconds - done))
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                self.log.write(event="cancelled", tool="slow", id=ctx.request_id, after=time.monotonic() - start)
            raise
        return text(f"slept {seconds}")

    async def middleware(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Logs every inbound request and notification before it is handled."""
        params = dict(ctx.params) if ctx.params is not None else None
        entry: dict[str, Any] = {
            "kind": "notification" if ctx.request_id is None else "request",
            "method": ctx.method,
            "params": params,
        }
        if ctx.request_id is not None:
            entry["id"] = ctx.request_id
        if ctx.method == "tools/call" and params is not None:
            entry["tool"] = params.get("name")
        headers = getattr(ctx.request, "headers", None)
        if headers is not None:
            entry["authorization"] = "authorization" in headers
        self.log.write(**entry)
        if ctx.method == "notifications/initialized":
            self.sessions.append(ctx.session)
        return await call_next(ctx)

    async def watch_description(self) -> None:
        """Polls the description file; a change is announced to every client."""
        if self.description_file is None:
            return
        last = self.echo_description()
        while True:
            await anyio.sleep(0.1)
            now = self.echo_description()
            if now == last:
                continue
            last = now
            self.log.write(event="list_changed", sessions=len(self.sessions))
            for session in self.sessions:
                # Best effort: a closed connection drops it.
                await session.send_tool_list_changed()
            await self.bus.publish(ToolsListChanged())


def text(s: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=s)])


def whoami(args: dict[str, Any]) -> types.CallToolResult:
    info: dict[str, Any] = {"uid": os.getuid(), "cwd": os.getcwd(), "home": os.environ.get("HOME")}
    if path := args.get("path"):
        try:
            with open(path, "rb"):
                info["read"] = True
        except OSError as e:
            info["read"] = False
            info["read_error"] = str(e)
    if target := args.get("connect"):
        host, _, port = str(target).rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=2):
                info["connect"] = True
        except (OSError, ValueError) as e:
            info["connect"] = False
            info["connect_error"] = str(e)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(info))],
        structured_content=info,
    )


class UpstreamServer(Server[Any]):
    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        # The handshake advertises tools.listChanged, which the streamable
        # HTTP manager would otherwise leave false.
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True), experimental_capabilities, extensions
        )


def build(upstream: Upstream) -> UpstreamServer:
    server = UpstreamServer(
        "skilld-test-upstream",
        version="1.0.0",
        on_list_tools=upstream.list_tools,
        on_call_tool=upstream.call_tool,
        on_subscriptions_listen=ListenHandler(upstream.bus),
    )
    server.middleware.append(upstream.middleware)
    return server


class RequireToken:
    """ASGI: 401 unless `Authorization: Bearer <token>`; logs refusals."""

    def __init__(self, app: Any, token: str, log: Log) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()
        self.log = log

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            got = headers.get(b"authorization")
            if got != self.expected:
                self.log.write(event="refused", path=scope.get("path"), authorization=got is not None)
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [(b"content-type", b"text/plain"), (b"www-authenticate", b"Bearer")],
                    }
                )
                await send({"type": "http.response.body", "body": b"unauthorized\n"})
                return
        await self.app(scope, receive, send)


async def serve_stdio(upstream: Upstream) -> None:
    server = build(upstream)
    async with anyio.create_task_group() as tg:
        tg.start_soon(upstream.watch_description)
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
        tg.cancel_scope.cancel()


async def serve_http(upstream: Upstream, args: argparse.Namespace) -> None:
    import uvicorn

    server = build(upstream)
    app: Any = server.streamable_http_app(host=args.host, json_response=args.json_response)
    if args.token_env:
        token = os.environ.get(args.token_env)
        if not token:
            sys.exit(f"--token-env {args.token_env}: the variable is not set")
        app = RequireToken(app, token, upstream.log)
    # Bound here so that with --port 0 the caller learns the real port from
    # the first line of stdout before any request can arrive.
    sock = socket.create_server((args.host, args.port))
    # Accepted connections inherit it. asyncio sets it only on sockets whose
    # proto is IPPROTO_TCP, and create_server's is 0: without it a reused
    # connection waits for the client's delayed ACK (40 ms) within a response.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    port = sock.getsockname()[1]
    url = f"http://{args.host}:{port}/mcp"
    upstream.log.write(event="listening", url=url)
    print(url, flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    http = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(upstream.watch_description)
        await http.serve(sockets=[sock])
        tg.cancel_scope.cancel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("transport", choices=["stdio", "http"])
    parser.add_argument("--log", help="append one JSON line per request, notification and event")
    parser.add_argument("--description-file", help="echo's description; a change sends tools/list_changed")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="http mode: the port (0: any); the URL is the first line of stdout")
    parser.add_argument("--token-env", help="http mode: require this variable's value as a bearer token")
    parser.add_argument("--json-response", action="store_true", help="http mode: JSON answers instead of SSE")
    args = parser.parse_args()
    upstream = Upstream(Log(args.log), args.description_file)
    if args.transport == "stdio":
        anyio.run(serve_stdio, upstream)
    else:
        anyio.run(serve_http, upstream, args)


if __name__ == "__main__":
    main()
