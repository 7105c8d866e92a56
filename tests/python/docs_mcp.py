"""What tests/it/docs_mcp.rs does with docs/mcp.md's JSON blocks, through
the official MCP Python SDK (`mcp`), as a client would:

- `server ENTRY_JSON`: one entry of a client's `mcpServers`, used exactly
  as the client would: `command` and `args` (and `env`) started on stdio,
  or `url` and `headers` over Streamable HTTP. Its tools must list.
- `request BASE_URL TOKEN MESSAGE_JSON`: a JSON-RPC request as the docs
  show it (`method`, `params`), sent on a session of `BASE_URL/mcp` with
  the token. It must answer a result, not an error.

Exits non-zero, with the reason, on the first thing that is wrong.
"""

import asyncio
import json
import os
import sys

import httpx
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def check(cond, what, *context):
    if not cond:
        raise SystemExit("FAILED: " + what + "".join("\n  " + repr(c)[:2000] for c in context))


async def server(entry):
    if "command" in entry:
        env = {**os.environ, **entry.get("env", {})}
        params = StdioServerParameters(command=entry["command"], args=entry.get("args", []), env=env)
        transport = stdio_client(params)
    else:
        check("url" in entry, "an mcpServers entry has a command or a url", entry)
        http = create_mcp_http_client(headers=entry.get("headers", {}))
        transport = streamable_http_client(entry["url"], http_client=http)
    async with Client(transport) as client:
        tools = (await client.list_tools()).tools
        check(tools, "the server lists tools", entry)
        print(f"{len(tools)} tools listed")


def answer(response, id):
    """The JSON-RPC answer to `id`, from a JSON body or an event stream."""
    check(response.status_code == 200, f"HTTP {response.status_code}", response.text)
    if response.headers.get("content-type", "").startswith("application/json"):
        messages = [response.json()]
    else:
        messages = [json.loads(l[5:]) for l in response.text.splitlines() if l.startswith("data:") and l[5:].strip()]
    found = [m for m in messages if m.get("id") == id]
    check(found, f"an answer to request {id}", response.text)
    return found[0]


def request(base, token, message):
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }
    with httpx.Client(base_url=base, headers=headers, timeout=330) as http:
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "docs", "version": "0"}}}
        r = http.post("/mcp", json=init)
        answer(r, 1)
        session = {"Mcp-Session-Id": r.headers["mcp-session-id"]}
        http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
        got = answer(http.post("/mcp", json={"jsonrpc": "2.0", "id": 2, **message}, headers=session), 2)
        check("result" in got, f"{message['method']} answers a result", got)
        print(json.dumps(got["result"])[:300])


def main():
    what = sys.argv[1:2]
    if what == ["server"]:
        asyncio.run(server(json.loads(sys.argv[2])))
    elif what == ["request"]:
        request(sys.argv[2], sys.argv[3], json.loads(sys.argv[4]))
    else:
        raise SystemExit(f"usage: docs_mcp.py server ENTRY | request BASE TOKEN MESSAGE, not {sys.argv[1:]}")


main()
