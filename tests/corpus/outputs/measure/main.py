#!/usr/bin/env python3
"""A process backend whose tools answer JSON: one of them declares its
output schema only in its initialize answer."""
import json
import sys

SHOUT = {
    "name": "text_shout",
    "description": "Answer the text in capitals.",
    "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    "output_schema": {"type": "object", "properties": {"shout": {"type": "string"}}, "required": ["shout"]},
}


def execute(name, args):
    text = args.get("text", "")
    if name == "text_stats":
        return {"words": len(text.split()), "chars": len(text)}
    if name == "text_stats_wrong":
        return {"words": "many", "chars": len(text)}
    if name == "text_shout":
        return {"shout": text.upper()}
    if name == "text_echo":
        return text
    raise KeyError(name)


def handle(method, params):
    if method == "initialize":
        return {"tools": [SHOUT], "hooks": []}
    if method == "tool/execute":
        return {"output": execute(params["name"], params.get("input") or {}), "success": True}
    if method == "shutdown":
        return None
    raise KeyError(method)


for line in sys.stdin:
    req = json.loads(line)
    try:
        resp = {"jsonrpc": "2.0", "id": req["id"], "result": handle(req["method"], req.get("params"))}
    except KeyError as missing:
        resp = {"jsonrpc": "2.0", "id": req["id"], "error": {"code": -32601, "message": f"unknown: {missing}"}}
    print(json.dumps(resp), flush=True)
    if req["method"] == "shutdown":
        break
