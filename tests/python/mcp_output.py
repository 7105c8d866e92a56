"""Tools that declare their output, as the official Python SDK (`mcp`)
sees them over Streamable HTTP in both protocol eras (`http BASE_URL`):
`tools/list` carries each declared `outputSchema`, and the SDK, which
validates a result's `structuredContent` against it, accepts every result
of such a tool; output that does not match comes back as an error result
that says so. A tool without a schema keeps the run's envelope.

The skill is tests/corpus/outputs/measure (see tests/it/output_schema.rs).
Exits non-zero, with the reason, on the first thing that is wrong.
"""

import asyncio
import sys

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

STATS = {
    "type": "object",
    "properties": {"words": {"type": "integer", "minimum": 0}, "chars": {"type": "integer", "minimum": 0}},
    "required": ["words", "chars"],
    "additionalProperties": False,
}


def check(cond, what, *context):
    if not cond:
        raise SystemExit("FAILED: " + what + "".join("\n  " + repr(c)[:2000] for c in context))


def text(result):
    return "".join(block.text for block in result.content if block.type == "text")


async def drive(base, mode):
    async with Client(streamable_http_client(base + "/mcp"), mode=mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        check(tools["text_stats"].output_schema == STATS, "the manifest's output_schema", tools["text_stats"])
        check(tools["text_stats_wrong"].output_schema == STATS, "output_schema_file's schema", tools["text_stats_wrong"])
        shout = tools["text_shout"].output_schema
        check(shout and shout["required"] == ["shout"], "the backend's own output_schema", tools["text_shout"])
        check(tools["text_echo"].output_schema is None, "no schema where none is declared", tools["text_echo"])

        # The SDK checks these against the schemas it listed: a result that
        # did not conform would raise here.
        result = await client.call_tool("text_stats", {"text": "two words"})
        check(not result.is_error, "text_stats ran", result)
        check(result.structured_content == {"words": 2, "chars": 9}, "its output as structuredContent", result)
        result = await client.call_tool("text_shout", {"text": "hi"})
        check(not result.is_error and result.structured_content == {"shout": "HI"}, "text_shout's output", result)

        # Output that does not match is an error result that says where.
        result = await client.call_tool("text_stats_wrong", {"text": "a b"})
        check(result.is_error, "non-conforming output is an error result", result)
        check("does not match" in text(result) and "/words" in text(result), "it says where", text(result))

        # Without a schema, the envelope stays the structured content.
        result = await client.call_tool("text_echo", {"text": "plain"})
        check(not result.is_error and result.structured_content["tool"] == "text_echo", "the envelope", result)
        check("plain" in text(result), "the text", result)

        # The SDK does validate: the wrong output, had it been sent as
        # structuredContent, is refused by the same check.
        wrong = CallToolResult(content=[], structured_content={"words": "many", "chars": 3})
        try:
            await client.session.validate_tool_result("text_stats", wrong)
            check(False, "the SDK accepted non-conforming structured content")
        except RuntimeError as e:
            check("Invalid structured content" in str(e), "the SDK's own refusal", str(e))
    print(f"{mode}: outputSchema and structuredContent ok")


async def main():
    check(sys.argv[1:2] == ["http"], "usage: mcp_output.py http BASE_URL", sys.argv)
    for mode in ("legacy", "auto"):
        await drive(sys.argv[2], mode)


asyncio.run(main())
