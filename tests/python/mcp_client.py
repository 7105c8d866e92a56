"""Drives skilld's MCP server with the official Python SDK (`mcp`), as an
LLM client would: over Streamable HTTP (`http BASE_URL`) or over stdio
(`stdio SKILLD_BIN SKILLS_DIR DATA_DIR BASE_URL`, the base URL being a
`skilld serve` on the same run log, where a person approves).

Both protocol eras are driven: the handshake (`mode="legacy"`) and
2026-07-28 (`mode="auto"`, which discovers the server first).

The tokens, the marker file the `stamp` tool appends to, and the skill to
copy in for a reload come from the environment (see tests/it/mcp.rs).
Exits non-zero, with the reason, on the first thing that is wrong.
"""

import asyncio
import json
import logging
import os
import shutil
import sys
from contextlib import asynccontextmanager

import httpx
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

ENV = os.environ
AGENT, BOSS, READER, ADMIN = (ENV["SKILLD_TEST_" + n] for n in ("AGENT", "BOSS", "READER", "ADMIN"))
MARKER = ENV["SKILLD_TEST_MARKER"]
WAIT = {"skilld/wait": 60}


def check(cond, what, *context):
    if not cond:
        raise SystemExit("FAILED: " + what + "".join("\n  " + repr(c)[:2000] for c in context))


def text(result):
    return "".join(block.text for block in result.content if block.type == "text")


def marks():
    try:
        with open(MARKER) as f:
            return len(f.readlines())
    except FileNotFoundError:
        return 0


class Http:
    """skilld's HTTP API, for what a person (or an admin) does."""

    def __init__(self, base, token):
        self.client = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=30)

    def get(self, path):
        r = self.client.get(path)
        check(r.status_code == 200, f"GET {path} -> {r.status_code}", r.text)
        return r.json()

    def post(self, path, body=None):
        r = self.client.post(path, json=body or {})
        check(r.status_code == 200, f"POST {path} -> {r.status_code}", r.text)
        return r.json()

    def pending(self, known=()):
        return [a for a in self.get("/approvals?status=pending")["approvals"] if a["id"] not in known]


class Warnings(logging.Handler):
    """What the SDK warns of, such as a session it could not end."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def over_http(base, token, mode, **kw):
    headers = {"Authorization": f"Bearer {token}"}
    transport = streamable_http_client(base + "/mcp", http_client=create_mcp_http_client(headers=headers))
    return Client(transport, mode=mode, **kw)


async def decided_while_waiting(client, boss, tool, args, decide):
    """Calls `tool` with a wait, and has a person decide its request over
    HTTP while the call waits; returns the call's result."""
    known = {a["id"] for a in boss.pending()}
    call = asyncio.ensure_future(client.call_tool(tool, args, meta=WAIT))
    for _ in range(200):
        fresh = boss.pending(known)
        if fresh:
            break
        check(not call.done(), "the call ended before it was decided", call.done() and call.result())
        await asyncio.sleep(0.05)
    check(len(fresh) == 1, "one new request in the inbox", fresh)
    check(fresh[0]["requested_by"] == ENV.get("SKILLD_TEST_REQUESTER", "agent"), "requested by the MCP caller", fresh[0])
    decide(fresh[0]["id"])
    return await asyncio.wait_for(call, 60)


async def tools_and_calls(client, base):
    agent, boss = Http(base, AGENT), Http(base, BOSS)
    listed = {t.name: t for t in (await client.list_tools()).tools}
    exported = {t["name"]: t for t in agent.get("/tools?format=mcp")["tools"]}
    check(set(listed) == set(exported), "tools/list names the exported tools", sorted(listed), sorted(exported))
    for name, tool in listed.items():
        check(tool.input_schema == exported[name]["inputSchema"], f"{name}: the same input schema", tool, exported[name])
        check(tool.description == exported[name]["description"], f"{name}: the same description")
    greet = listed["greet"]
    check(greet.input_schema["required"] == ["name"], "greet requires name", greet.input_schema)
    check(greet.annotations.read_only_hint is True, "greet is read-only", greet.annotations)

    result = await client.call_tool("greet", {"name": "mcp"})
    check(not result.is_error and "hello mcp" in text(result), "greet ran", result)
    envelope = result.structured_content
    check(envelope["success"] and envelope["tool"] == "greet", "the envelope as structured content", envelope)
    # Over stdio the run ended in another process: the end commits just
    # after the answer, so another reader may see `running` until it does.
    run = agent.get(f"/runs/{envelope['run_id']}?wait=30")
    check(run["status"] == "succeeded", "the run is in the run log", run)

    # A run that fails is an error result with the same envelope.
    result = await client.call_tool("run_sh", {"code": "echo partial; exit 3"})
    failed = result.structured_content or {}
    check(result.is_error and failed.get("exit_code") == 3 and failed.get("success") is False, "a failed run's envelope", result)
    check(set(failed) - {"error"} == set(envelope) - {"error"}, "the same envelope as a success", sorted(failed), sorted(envelope))
    check("partial" in text(result), "the failed run's output for the model", text(result))

    result = await client.call_tool("greet", {"nom": "x"})
    check(result.is_error and "name" in text(result), "bad arguments are a result the model reads", result)
    try:
        await client.call_tool("no_such_tool", {})
        check(False, "an unknown tool is a protocol error")
    except MCPError as e:
        check("no_such_tool" in str(e), "the error names the tool", str(e))
    result = await client.call_tool("greet", {"name": "x"}, meta={"skilld/wait": 301})
    check(result.is_error and "skilld/wait" in text(result), "a wait over 300 s is refused", result)

    # A call a person must approve: without a wait, it says so at once.
    stamped = marks()
    result = await client.call_tool("stamp", {"path": MARKER})
    held = result.structured_content
    check(not result.is_error and held["status"] == "pending_approval", "held for a person, not a failure", result)
    check(held["approval_id"] in text(result) and "/ui" in text(result), "the text names the approval and the inbox", text(result))
    check(marks() == stamped, "nothing ran while held")
    boss.post(f"/approvals/{held['approval_id']}/deny", {"scope": "once", "note": "cleanup"})

    # With a wait, the approved call's result comes back in the same call.
    approve = lambda id: boss.post(f"/approvals/{id}/approve", {"scope": "once"})
    result = await decided_while_waiting(client, boss, "stamp", {"path": MARKER}, approve)
    check(not result.is_error and "stamped" in text(result), "the approved call's result", result)
    check(marks() == stamped + 1, "it ran once", marks())

    # A denial reaches the model with the approver's note.
    deny = lambda id: boss.post(f"/approvals/{id}/deny", {"scope": "once", "note": "not on a Friday"})
    result = await decided_while_waiting(client, boss, "stamp", {"path": MARKER}, deny)
    check(result.is_error and "not on a Friday" in text(result), "the denial and its note", result)
    check(marks() == stamped + 1, "the denied call did not run", marks())


async def prompts_and_resources(client):
    prompts = {p.name: p for p in (await client.list_prompts()).prompts}
    check("greet" in prompts and "hi" in prompts, "a prompt per skill and per command", sorted(prompts))
    got = await client.get_prompt("greet")
    check("Say hello" in got.messages[0].content.text, "the skill's instructions", got)
    got = await client.get_prompt("hi")
    check("Say hello" in got.messages[0].content.text, "the command's instructions", got)
    resources = {r.uri: r for r in (await client.list_resources()).resources}
    uri = "skill://greet/references/notes.md"
    check(uri in resources, "the skill's reference", sorted(resources))
    read = await client.read_resource(uri)
    check("Greet people by name." in read.contents[0].text, "the reference's text", read)
    try:
        await client.read_resource("skill://greet/../../etc/passwd")
        check(False, "a path out of the skill is not read")
    except MCPError:
        pass


async def reload_is_announced(base, mode):
    """A skill added and reloaded tells the session its tool list changed."""
    changed = asyncio.Event()

    async def on_message(message):
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            changed.set()

    async with over_http(base, AGENT, mode, message_handler=on_message) as client:
        before = {t.name for t in (await client.list_tools()).tools}
        shutil.copytree(ENV["SKILLD_TEST_EXTRA_SKILL"], ENV["SKILLD_TEST_EXTRA_TARGET"])
        if mode == "legacy":
            Http(base, ADMIN).post("/skills/reload")
            await asyncio.wait_for(changed.wait(), 20)
        else:
            async with client.listen(tools_list_changed=True) as subscription:
                Http(base, ADMIN).post("/skills/reload")
                await asyncio.wait_for(anext(aiter(subscription)), 20)
        after = {t.name for t in (await client.list_tools(cache_mode="refresh")).tools}
        check(after - before == {"wave"}, "the new tool is listed", sorted(before), sorted(after))
        shutil.rmtree(ENV["SKILLD_TEST_EXTRA_TARGET"])
        Http(base, ADMIN).post("/skills/reload")


async def http_main(base):
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
    accept = {"Accept": "application/json, text/event-stream"}
    r = httpx.post(base + "/mcp", json=init, headers=accept)
    check(r.status_code == 401 and "Bearer" in r.headers.get("www-authenticate", ""), "no token: 401", r.status_code, r.text)
    r = httpx.post(base + "/mcp", json=init, headers=accept | {"Origin": "https://attacker.example"})
    check(r.status_code in (401, 403), "a web page is refused", r.status_code)
    warnings = Warnings()
    logging.getLogger("mcp").addHandler(warnings)
    for mode in ("legacy", "auto"):
        async with over_http(base, READER, mode) as client:
            check(len((await client.list_tools()).tools) > 0, f"{mode}: a read token lists")
            try:
                result = await client.call_tool("greet", {"name": "x"})
                check(False, f"{mode}: a read token cannot call", result)
            except MCPError as e:
                check("invoke" in str(e), "the error names the role needed", str(e))
        async with over_http(base, AGENT, mode) as client:
            await tools_and_calls(client, base)
            await prompts_and_resources(client)
        await reload_is_announced(base, mode)
        ended = [line for line in warnings.lines if "termination" in line]
        check(not ended, f"{mode}: every session ends cleanly on close", ended)
        print(f"http {mode}: ok")


async def stdio_main(binary, skills, data, base):
    params = StdioServerParameters(
        command=binary,
        args=["mcp", "--skills", f"bundled={skills}", "--data-dir", data, "--no-watch"],
        env={"SKILLD_LOG": "warn", "USER": "tester", "SKILLD_SANDBOX_WRITE_PATHS": ENV["SKILLD_SANDBOX_WRITE_PATHS"]},
    )
    for mode in ("legacy", "auto"):
        async with Client(params, mode=mode) as client:
            await tools_and_calls(client, base)
            await prompts_and_resources(client)
        print(f"stdio {mode}: ok")


if __name__ == "__main__":
    how = sys.argv[1]
    if how == "http":
        asyncio.run(http_main(sys.argv[2]))
    elif how == "stdio":
        asyncio.run(stdio_main(*sys.argv[2:6]))
    else:
        raise SystemExit(f"unknown transport {how}")
