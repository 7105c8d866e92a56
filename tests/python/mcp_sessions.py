"""A skilld session's core over MCP with the official Python SDK (`mcp`):
the session is started and turned over HTTP, its tool calls name it in
`_meta["skilld/session"]`, and the SDK's `llm` (seed 002's `llm:call`) is
served by this client's sampling callback. Without one, the call fails
clearly. Usage: `mcp_sessions.py BASE_URL`. Exits non-zero, with the
reason, on the first thing that is wrong.
"""

import asyncio
import sys

import httpx
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

BASE = sys.argv[1]
ASKED = []


def check(cond, what, *context):
    if not cond:
        raise SystemExit("FAILED: " + what + "".join("\n  " + repr(c)[:2000] for c in context))


def text(result):
    return "".join(block.text for block in result.content if block.type == "text")


async def model(context, params):
    """The client's model: it answers what it was asked, in capitals."""
    asked = "".join(m.content.text for m in params.messages if m.content.type == "text")
    ASKED.append((asked, params.system_prompt, params.max_tokens))
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text="ANSWER TO " + asked.upper()),
        model="test-model",
        stop_reason="endTurn",
    )


def client(**kw):
    transport = streamable_http_client(BASE + "/mcp", http_client=create_mcp_http_client())
    return Client(transport, mode="legacy", **kw)


async def main():
    web = httpx.Client(base_url=BASE, timeout=30)
    started = web.post("/sessions", json={"mode": "interactive"})
    check(started.status_code == 201, "the session starts", started.text)
    session = started.json()["id"]
    # A session is a capability: later requests show the secret its start answered.
    web.headers["Skilld-Session-Secret"] = started.json()["secret"]
    turn = web.post(f"/sessions/{session}/turns", json={"message": "think about it"})
    check(turn.status_code == 200, "a turn", turn.text)
    states = {s["name"]: s["state"] for s in turn.json()["session"]["skills"]}
    check(states.get("thinker") == "active", "the thinker is active by its keyword", states)
    meta = {"skilld/session": session, "skilld/session-secret": started.json()["secret"]}

    async with client(sampling_callback=model) as c:
        result = await c.call_tool("think", {"question": "why"}, meta=meta)
        check(not result.is_error, "the tool ran", result)
        check("ANSWER TO WHY" in text(result), "the client's model answered the skill", text(result))
        check(ASKED == [("why", "Answer briefly.", 64)], "the model was asked as the skill asked", ASKED)
        # A session that is not there is refused, not run outside it.
        result = await c.call_tool("think", {"question": "x"}, meta={"skilld/session": "0" * 8 + "-0000-7000-8000-" + "0" * 12})
        check(result.is_error and "session" in text(result), "an unknown session is refused", result)
        result = await c.call_tool("think", {"question": "x"}, meta={"skilld/session": "nope"})
        check(result.is_error and "skilld/session" in text(result), "a malformed session id is refused", result)
        # Its id alone does not open it: a process that learnt it cannot steer it.
        result = await c.call_tool("think", {"question": "x"}, meta={"skilld/session": session})
        check(result.is_error and "secret" in text(result), "a session's id without its secret is refused", result)

    async with client() as c:
        result = await c.call_tool("think", {"question": "again"}, meta=meta)
        body = text(result)
        check("no model" in body and "sampling" in body, "without sampling, llm fails clearly", result)

    gone = web.delete(f"/sessions/{session}")
    check(gone.status_code == 204, "the session ends", gone.text)
    print("ok")


asyncio.run(main())
