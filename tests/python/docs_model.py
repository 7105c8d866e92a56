"""A local stand-in for OpenAI's Responses API, for the snippets of
docs/mcp.md that run an agent (tests/it/docs_mcp.rs): the snippet runs
as written, its agent connected to a real skilld by the real SDK; only
the model is local, since OpenAI's service needs a key. Its first turn
calls the first tool the agent offers whose name holds `DOCS_MODEL_TOOL`,
with the arguments `DOCS_MODEL_ARGS` (JSON); its second answers with what
the tool said.

`start()` serves it on a free port and points `OPENAI_BASE_URL` at it;
`check()` fails unless the tool's output came back to it, holding
`DOCS_MODEL_EXPECT` (and not saying that the call still waits for a
person: a held call must be waited for, through `_meta`).
"""

import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

OUTPUTS = []


def response(output):
    return {
        "id": f"resp_{time.time_ns()}", "object": "response", "created_at": int(time.time()),
        "model": "stand-in", "status": "completed", "output": output, "parallel_tool_calls": False,
        "tool_choice": "auto", "tools": [], "error": None, "incomplete_details": None,
        "instructions": None, "metadata": {}, "temperature": 1.0, "top_p": 1.0,
        "text": {"format": {"type": "text"}},
        "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2,
                  "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}},
    }


def turn(body):
    items = body.get("input") if isinstance(body.get("input"), list) else []
    done = [i for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"]
    if done:
        OUTPUTS.extend(str(i.get("output")) for i in done)
        text = "The tool said: " + str(done[-1].get("output"))[:2000]
        content = [{"type": "output_text", "text": text, "annotations": []}]
        return response([{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": content}])
    names = [t.get("name") for t in body.get("tools", []) if t.get("type") == "function"]
    wanted = os.environ.get("DOCS_MODEL_TOOL", "")
    name = next((n for n in names if wanted in n), None)
    if name is None:
        raise ValueError(f"the agent offers no tool named like {wanted!r}: {names}")
    args = os.environ.get("DOCS_MODEL_ARGS", "{}")
    call = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": name, "arguments": args, "status": "completed"}
    return response([call])


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        try:
            status, answer = 200, turn(body)
        except ValueError as e:
            status, answer = 400, {"error": {"message": str(e), "type": "invalid_request_error"}}
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def start():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    os.environ["OPENAI_BASE_URL"] = f"http://127.0.0.1:{server.server_address[1]}/v1"
    os.environ["OPENAI_API_KEY"] = "stand-in"
    os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"


def check():
    if not OUTPUTS:
        raise SystemExit("FAILED: no tool's output reached the model")
    last = OUTPUTS[-1]
    if "waiting for a person" in last or os.environ.get("DOCS_MODEL_EXPECT", "") not in last:
        raise SystemExit(f"FAILED: the tool's output is not its result: {last[:2000]}")
    print("the agent's tool call came back:", last[:200])
