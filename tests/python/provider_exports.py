"""Checks every export of a running skilld against the providers' own SDK
types: openai (`ChatCompletionFunctionToolParam` / `FunctionDefinition`, and
the Responses API's `FunctionToolParam`),
anthropic (`ToolParam`), google-genai (`FunctionDeclaration`) and mcp
(`Tool`), plus the rules those types cannot say: names of 1–64 characters
from each provider's alphabet, and strict mode's schema rules.

Usage: provider_exports.py BASE_URL... (each a server with a catalog).
Exits non-zero naming every tool that a provider would refuse.
"""

import re
import sys

import httpx
from anthropic.types import ToolParam
from google.genai import types as genai
from mcp import types as mcp_types
from mcp.shared.tool_name_validation import validate_tool_name
from openai.types.chat import ChatCompletionFunctionToolParam
from openai.types.responses import FunctionToolParam
from pydantic import TypeAdapter

OPENAI_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
ANTHROPIC_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
GEMINI_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$")

# The keywords OpenAI's strict mode takes (structured outputs).
STRICT_KEYWORDS = {
    "type", "properties", "required", "additionalProperties", "description",
    "enum", "items", "anyOf", "const", "$defs", "$ref", "title",
    "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "multipleOf", "minItems", "maxItems",
}

problems = []


def problem(where, what):
    problems.append(f"{where}: {what}")


def same_after(adapter, value):
    """Validates `value` and checks nothing was dropped (TypedDicts ignore extras)."""
    validated = adapter.validate_python(value)
    return validated == value


def strict_rules(where, schema, path="$"):
    if not isinstance(schema, dict):
        return
    extra = set(schema) - STRICT_KEYWORDS
    if extra:
        problem(where, f"{path}: keywords strict mode does not take: {sorted(extra)}")
    if schema.get("type") == "object" or "properties" in schema:
        if schema.get("additionalProperties") is not False:
            problem(where, f"{path}: strict mode needs additionalProperties: false")
        props = schema.get("properties", {})
        if sorted(schema.get("required", [])) != sorted(props):
            problem(where, f"{path}: strict mode needs every property required")
        for name, sub in props.items():
            strict_rules(where, sub, f"{path}.{name}")
    if "items" in schema:
        strict_rules(where, schema["items"], f"{path}[]")


def openai(tools):
    adapter = TypeAdapter(ChatCompletionFunctionToolParam)
    for tool in tools:
        name = tool["function"]["name"]
        where = f"openai {name}"
        if not same_after(adapter, tool):
            problem(where, "not a ChatCompletionFunctionToolParam as sent")
        if not OPENAI_NAME.match(name):
            problem(where, "name outside ^[a-zA-Z0-9_-]{1,64}$")
        if tool["function"]["strict"]:
            strict_rules(where, tool["function"]["parameters"])


def openai_responses(tools, chat):
    adapter = TypeAdapter(FunctionToolParam)
    for tool in tools:
        name = tool.get("name", "")
        where = f"openai-responses {name}"
        if not same_after(adapter, tool):
            problem(where, "not a FunctionToolParam as sent")
        if set(tool) != {"type", "name", "description", "parameters", "strict"}:
            problem(where, f"not the flat function tool: {sorted(tool)}")
        if not OPENAI_NAME.match(name):
            problem(where, "name outside ^[a-zA-Z0-9_-]{1,64}$")
        if tool.get("strict"):
            strict_rules(where, tool["parameters"])
    # The same tools as Chat Completions', only flat.
    if [{"type": "function", **t["function"]} for t in chat] != tools:
        problem("openai-responses", "not the openai export's tools, flattened")


def anthropic(tools):
    adapter = TypeAdapter(ToolParam)
    for tool in tools:
        where = f"anthropic {tool['name']}"
        if not same_after(adapter, tool):
            problem(where, "not a ToolParam as sent")
        if not ANTHROPIC_NAME.match(tool["name"]):
            problem(where, "name outside ^[a-zA-Z0-9_-]{1,64}$")
        if tool.get("strict"):
            strict_rules(where, tool["input_schema"])


def gemini(declarations):
    for decl in declarations:
        where = f"gemini {decl['name']}"
        try:
            parsed = genai.FunctionDeclaration.model_validate(decl)
            genai.Tool(function_declarations=[parsed])
        except Exception as e:  # pydantic's ValidationError, with every reason
            problem(where, f"FunctionDeclaration refuses it: {e}")
            continue
        if not GEMINI_NAME.match(decl["name"]):
            problem(where, "name outside Gemini's alphabet or over 64")
        if "parameters" in decl and "parameters_json_schema" in decl:
            problem(where, "parameters and parameters_json_schema are exclusive")
        for pname, prop in (decl.get("parameters") or {}).get("properties", {}).items():
            if "enum" in prop and not all(isinstance(v, str) for v in prop["enum"]):
                problem(where, f"{pname}: Gemini enums are strings")


def mcp(tools):
    for tool in tools:
        where = f"mcp {tool['name']}"
        try:
            parsed = mcp_types.Tool.model_validate(tool)
        except Exception as e:
            problem(where, f"Tool refuses it: {e}")
            continue
        if not validate_tool_name(parsed.name).is_valid:
            problem(where, "name fails the MCP SDK's tool-name rules")
        if not parsed.title:
            problem(where, "no title")
        if len(parsed.name) > 64:
            problem(where, "name over 64")


def main(bases):
    counted = 0
    for base in bases:
        get = lambda fmt: httpx.get(f"{base}/tools", params={"format": fmt}, timeout=30).json()
        chat = get("openai")["tools"]
        openai(chat)
        openai_responses(get("openai-responses")["tools"], chat)
        anthropic(get("anthropic")["tools"])
        gemini(get("gemini")["function_declarations"])
        tools = get("mcp")["tools"]
        mcp(tools)
        counted += len(tools)
    if counted < 20:
        problem("all", f"only {counted} tools checked")
    if problems:
        raise SystemExit("providers would refuse:\n" + "\n".join(problems))
    print(f"{counted} tools in 5 formats: every provider accepts them")


if __name__ == "__main__":
    main(sys.argv[1:])
