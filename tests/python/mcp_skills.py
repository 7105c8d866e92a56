"""Skills over MCP (the Skills extension, SEP-2640) and held calls as
tasks (the Tasks extension, SEP-2663), driven with the official Python SDK
(`mcp`) as an agent would: over Streamable HTTP (`http BASE_URL`) or over
stdio (`stdio SKILLD_BIN SKILLS_DIR DATA_DIR`).

The SDK has no skills or SEP-2663 tasks support of its own yet, so the
extensions' requests go through its session as raw requests, and tasks
through a small client extension that claims `resultType: "task"`.

Exits non-zero, with the reason, on the first thing that is wrong.
"""

import asyncio
import base64
import hashlib
import os
import sys
from typing import Any, ClassVar, Literal

import httpx
import yaml
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
import mcp.types as types
from pydantic import ConfigDict, Field, TypeAdapter

ENV = os.environ
SKILLS = "io.modelcontextprotocol/skills"
TASKS = "io.modelcontextprotocol/tasks"
ANY = TypeAdapter(dict)
INVALID_PARAMS = -32602


def check(cond, what, *context):
    if not cond:
        raise SystemExit("FAILED: " + what + "".join("\n  " + repr(c)[:2000] for c in context))


def text(result):
    return "".join(block.text for block in result.content if block.type == "text")


class Raw(types.Request):
    """Any request, its params as given (the SDK's own drops unknown ones)."""

    params: dict[str, Any] | None = None


async def raw(client, method, params=None):
    return await send(client.session, method, params)


class TaskRequest(Raw):
    """A `tasks/*` request: its `Mcp-Name` header is the task id (SEP-2663)."""

    name_param: ClassVar[str | None] = "taskId"


async def send(session, method, params=None):
    kind = TaskRequest if method.startswith("tasks/") else Raw
    return await session.send_request(kind(method=method, params=params or {}), ANY)


async def raw_error(client, method, params):
    try:
        got = await raw(client, method, params)
    except MCPError as e:
        return e
    check(False, f"{method} {params} should fail", got)


class TaskCreated(types.Result):
    """`resultType: "task"`: a call the server runs (or holds) as a task."""

    model_config = ConfigDict(extra="allow", alias_generator=None, populate_by_name=True)
    result_type: Literal["task"] = Field(alias="resultType")
    task_id: str = Field(alias="taskId")
    status: str
    status_message: str | None = Field(default=None, alias="statusMessage")


async def task_get(session, task_id):
    return await send(session, "tasks/get", {"taskId": task_id})


async def until_terminal(session, task_id, limit=60):
    for _ in range(limit * 10):
        got = await task_get(session, task_id)
        if got["status"] in ("completed", "failed", "cancelled"):
            return got
        await asyncio.sleep(0.1)
    check(False, f"task {task_id} did not end", got)


async def resolve(created: TaskCreated, ctx: ClaimContext) -> types.CallToolResult:
    done = await until_terminal(ctx.session, created.task_id)
    check(done["status"] == "completed", "the task completed", done)
    return types.CallToolResult.model_validate(done["result"])


class Tasks(ClientExtension):
    """The Tasks extension as a client that waits on its tasks by polling."""

    identifier = TASKS

    def claims(self):
        return [ResultClaim(result_type="task", model=TaskCreated, resolve=resolve)]


def over_http(base, token, mode, tasks=False, **kw):
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    transport = streamable_http_client(base + "/mcp", http_client=http)
    return Client(transport, mode=mode, extensions=[Tasks()] if tasks else None, **kw)


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

    def pending(self, tool):
        return [a for a in self.get("/approvals?status=pending")["approvals"] if a["tool"] == tool]


async def read_bytes(client, uri):
    read = await client.read_resource(uri)
    content = read.contents[0]
    if getattr(content, "text", None) is not None:
        return content.text.encode(), content.mime_type
    return base64.b64decode(content.blob), content.mime_type


def frontmatter(data: bytes):
    body = data.decode()
    check(body.startswith("---\n"), "SKILL.md starts with frontmatter", body[:200])
    return yaml.safe_load(body[4:].split("\n---", 1)[0])


async def skills_are_served(client, modern):
    caps = client.session.server_capabilities
    check(caps.extensions and caps.extensions.get(SKILLS) == {"directoryRead": True}, "the skills extension, with directoryRead", caps)
    listed = await raw(client, "skills/list")
    entries = {e["frontmatter"]["name"]: e for e in listed["skills"]}
    check(set(entries) == {"echo-manifest", "greet", "slow", "stamp", "summary-only"}, "every skill with an Agent Skills name, and only those", sorted(entries))
    check(("ttlMs" in listed and listed.get("cacheScope") == "private") == modern, "cache hints on 2026-07-28 only", listed.keys())
    for name, entry in entries.items():
        check(entry["uri"] == f"skill://{name}/SKILL.md", f"{name}: its SKILL.md uri", entry)
        uris = [r["uri"] for r in entry["resources"]]
        check(entry["uri"] in uris and len(uris) == len(set(uris)), f"{name}: SKILL.md listed, each file once", uris)
        for resource in entry["resources"]:
            data, mime = await read_bytes(client, resource["uri"])
            digest = "sha256:" + hashlib.sha256(data).hexdigest()
            check(digest == resource["digest"] and len(data) == resource["size"], f"{resource['uri']}: digest and size match the bytes", resource, digest, len(data))
            if resource["uri"] == entry["uri"]:
                check(frontmatter(data) == entry["frontmatter"], f"{name}: the entry's frontmatter is the file's", entry["frontmatter"])
                check(mime == "text/markdown", f"{name}: SKILL.md is text/markdown", mime)
    greet = [r["uri"] for r in entries["greet"]["resources"]]
    check("skill://greet/references/deep/more.md" in greet and "skill://greet/assets/template.json" in greet, "files in subdirectories are served", greet)
    made = entries["summary-only"]["frontmatter"]
    check(made["description"] == "Review a change, risks first." and made["summary"] == made["description"], "a SKILL.md without name gets one made, its keys kept", made)
    manifest = entries["echo-manifest"]
    uris = [r["uri"] for r in manifest["resources"]]
    check(manifest["frontmatter"] == {"name": "echo-manifest", "description": "Echoes, from a manifest."}, "a manifest's SKILL.md is made from it", manifest)
    check("skill://echo-manifest/SKILL.yaml" not in uris and "skill://echo-manifest/skill.star" not in uris and "skill://echo-manifest/notes.md" in uris, "its served files", uris)

    got = await raw(client, "skills/get", {"uri": "skill://greet/SKILL.md"})
    check(got["skill"] == entries["greet"] and "nextCursor" not in got, "skills/get gives the listed entry", got)
    error = await raw_error(client, "skills/get", {"uri": "skill://Bad_Name/SKILL.md"})
    check(error.code == INVALID_PARAMS, "a skill outside the extension is unknown to skills/get", error)

    top = await raw(client, "resources/directory/read", {"uri": "skill://greet"})
    kinds = {r["name"]: r.get("mimeType") for r in top["resources"]}
    check(kinds.get("references") == "inode/directory" and kinds.get("assets") == "inode/directory" and "SKILL.md" in kinds, "the skill directory's children", kinds)
    sub = await raw(client, "resources/directory/read", {"uri": "skill://greet/references"})
    names = sorted(r["uri"] for r in sub["resources"])
    check(names == ["skill://greet/references/deep", "skill://greet/references/notes.md"], "a subdirectory's direct children", names)
    error = await raw_error(client, "resources/directory/read", {"uri": "skill://greet/SKILL.md"})
    check(error.code == INVALID_PARAMS, "a file is not a directory", error)


async def clients_without_the_extension_find_skills(client):
    instructions = client.session.instructions or ""
    check("- greet: Greets people." in instructions and "Bad_Name" not in instructions, "an index of skills in the instructions", instructions)
    resources = {r.uri: r for r in (await client.list_resources()).resources}
    greet = resources.get("skill://greet/SKILL.md")
    check(greet and greet.name == "greet" and greet.description == "Greets people.", "each SKILL.md is a resource named as its frontmatter says", greet)
    templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
    check("skill://greet/{+path}" in templates, "a template per skill", templates)
    data, _ = await read_bytes(client, "skill://greet/references/deep/more.md")
    check(data == b"More on greeting.\n", "any served file reads by its path", data)
    prompt = await client.get_prompt("slow")
    check("Use skill://slow/notes.md." in prompt.messages[0].content.text, "{baseDir} is the skill's URI", prompt)


async def grants_bind_to_the_digests_seen(base, skills_dir):
    """An `always` grant holds while the files an agent read stay as they
    were; after one changes (a new digest), the call asks again."""
    boss, admin = Http(base, ENV["SKILLD_TEST_BOSS"]), Http(base, ENV["SKILLD_TEST_ADMIN"])
    async with over_http(base, ENV["SKILLD_TEST_AGENT"], "legacy") as client:
        args = {"path": ENV["SKILLD_TEST_MARKER"]}
        held = await client.call_tool("stamp", args)
        check(not held.is_error and held.structured_content["status"] == "pending_approval", "held, not failed", held)
        boss.post(f"/approvals/{held.structured_content['approval_id']}/approve", {"scope": "always"})
        before = (await raw(client, "skills/get", {"uri": "skill://stamp/SKILL.md"}))["skill"]["resources"]
        ran = await client.call_tool("stamp", args)
        check(not ran.is_error and "stamped" in text(ran), "the grant lets it run", ran)
        with open(os.path.join(skills_dir, "stamp/references/policy.md"), "a") as f:
            f.write("Stamp twice.\n")
        admin.post("/skills/reload")
        after = (await raw(client, "skills/get", {"uri": "skill://stamp/SKILL.md"}))["skill"]["resources"]
        changed = [r["uri"] for r in after if r not in before]
        check(changed == ["skill://stamp/references/policy.md"], "the edited file has a new digest", before, after)
        again = await client.call_tool("stamp", args)
        check(again.structured_content.get("status") == "pending_approval", "the grant does not cover what changed: it asks again", again)
        boss.post(f"/approvals/{again.structured_content['approval_id']}/deny", {"scope": "once"})


async def held_calls_are_tasks(base):
    boss = Http(base, ENV["SKILLD_TEST_BOSS"])
    async with over_http(base, ENV["SKILLD_TEST_AGENT"], "auto", tasks=True) as client:
        session = client.session
        args = {"path": ENV["SKILLD_TEST_MARKER"] + ".tasks"}
        created = await session.call_tool("stamp", args, allow_claimed=True)
        check(isinstance(created, TaskCreated) and created.status == "working", "a held call is a task", created)
        check("waiting for a person" in (created.status_message or ""), "the task says what it waits for", created)
        got = await task_get(session, created.task_id)
        check(got["status"] == "working" and "approval" in got.get("statusMessage", ""), "tasks/get: working, waiting", got)
        again = await session.call_tool("stamp", args, allow_claimed=True)
        check(again.task_id == created.task_id, "a retry joins the task", created, again)
        [request] = boss.pending("stamp")
        boss.post(f"/approvals/{request['id']}/approve", {"scope": "once"})
        done = await until_terminal(session, created.task_id)
        result = done["result"]
        check(done["status"] == "completed" and not result["isError"] and "stamped" in result["content"][0]["text"], "approved: completed with the tool's result", done)

        denied = await session.call_tool("stamp", {"path": args["path"] + "2"}, allow_claimed=True)
        [request] = boss.pending("stamp")
        boss.post(f"/approvals/{request['id']}/deny", {"scope": "once", "note": "not on a Friday"})
        done = await until_terminal(session, denied.task_id)
        check(done["status"] == "completed" and done["result"]["isError"] and "not on a Friday" in done["result"]["content"][0]["text"], "denied: the approver's note", done)

        long = await session.call_tool("slow", {"seconds": "30"}, allow_claimed=True)
        check(isinstance(long, TaskCreated), "a call of a skill with tasks: optional is a task", long)
        ack = await raw(client, "tasks/cancel", {"taskId": long.task_id})
        check(ack.get("resultType") == "complete" and "taskId" not in ack, "tasks/cancel acks", ack)
        done = await until_terminal(session, long.task_id)
        check(done["status"] == "cancelled", "a cancelled task", done)
        ack = await raw(client, "tasks/cancel", {"taskId": long.task_id})
        check(ack.get("resultType") == "complete", "cancelling an ended task acks too", ack)

        quick = await client.call_tool("slow", {"seconds": "0"})
        check(not quick.is_error and "slept" in text(quick), "a client that polls gets the result", quick)

        error = await raw_error(client, "tasks/get", {"taskId": "0190b4a0-0000-7000-8000-000000000000"})
        check(error.code == INVALID_PARAMS, "an unknown task", error)
        mine = created.task_id
    async with over_http(base, ENV["SKILLD_TEST_OTHER"], "auto", tasks=True) as other:
        error = await raw_error(other, "tasks/get", {"taskId": mine})
        check(error.code == INVALID_PARAMS, "another caller's task is unknown to them", error)
    async with over_http(base, ENV["SKILLD_TEST_AGENT"], "auto") as plain:
        error = await raw_error(plain, "tasks/get", {"taskId": mine})
        check(error.code == -32021, "tasks/get without the extension: missing capability", error)
        held = await plain.call_tool("stamp", {"path": args["path"] + "3"})
        check(not held.is_error and held.structured_content["status"] == "pending_approval", "without tasks: a plain waiting result", held)
        check("waiting for a person" in text(held) and "joins this request" in text(held), "it says so plainly", text(held))


async def http_main(base, skills_dir):
    for mode in ("legacy", "auto"):
        async with over_http(base, ENV["SKILLD_TEST_AGENT"], mode) as client:
            await skills_are_served(client, mode == "auto")
            await clients_without_the_extension_find_skills(client)
        print(f"http {mode}: skills ok")
    await grants_bind_to_the_digests_seen(base, skills_dir)
    print("http: grants bind to digests ok")
    await held_calls_are_tasks(base)
    print("http: tasks ok")


async def stdio_main(binary, skills, data):
    params = StdioServerParameters(
        command=binary,
        args=["mcp", "--skills", f"bundled={skills}", "--data-dir", data, "--no-watch"],
        env={"SKILLD_LOG": "warn", "USER": "tester"},
    )
    for mode in ("legacy", "auto"):
        async with Client(params, mode=mode) as client:
            await skills_are_served(client, mode == "auto")
            await clients_without_the_extension_find_skills(client)
        print(f"stdio {mode}: skills ok")


class Person:
    """The person at the client: answers each approval question in turn."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.asked = []

    async def __call__(self, context, params):
        self.asked.append(params.message)
        decision, note = self.answers.pop(0)
        content = {"decision": decision} | ({"note": note} if note else {})
        return types.ElicitResult(action="accept", content=content)


async def tampered_states_are_refused(client, data, marker):
    """A retry whose requestState is not this caller's pending request for
    this very call decides nothing."""
    answer = {"skilld/approval": {"action": "accept", "content": {"decision": "approve_once"}}}
    decided = decision_ids(data)[0]
    for state in ("not-a-request", "0190b4a0-0000-7000-8000-000000000000", decided):
        params = {"name": "stamp", "arguments": {"path": marker}, "requestState": state, "inputResponses": answer}
        error = await raw_error(client, "tools/call", params)
        check(error.code == INVALID_PARAMS and "requestState" in error.message, f"a forged requestState {state}", error)


def decision_ids(data):
    import sqlite3

    with sqlite3.connect(os.path.join(data, "skilld.db")) as db:
        return [row[0] for row in db.execute("select id from approvals order by created_at")]


def decisions(data):
    import sqlite3

    with sqlite3.connect(os.path.join(data, "skilld.db")) as db:
        return db.execute("select tool, status, requested_by, decided_by, note from approvals order by created_at").fetchall()


async def in_client_main(binary, skills, data, marker):
    """`skilld mcp --client-approval`: the local user decides their own
    held calls in their client, in both eras; without the flag, nobody
    asks them."""

    def params(*flags):
        return StdioServerParameters(
            command=binary,
            args=["mcp", "--skills", f"bundled={skills}", "--data-dir", data, "--no-watch", *flags],
            env={"SKILLD_LOG": "warn", "USER": "tester", "SKILLD_SANDBOX_WRITE_PATHS": os.path.dirname(marker)},
        )

    for mode in ("legacy", "auto"):
        person = Person([("approve_once", None), ("deny", "not today")])
        async with Client(params("--client-approval"), mode=mode, elicitation_callback=person) as client:
            ran = await client.call_tool("stamp", {"path": marker + mode})
            check(not ran.is_error and "stamped" in text(ran), f"{mode}: approved in the client, it ran", ran)
            check("Tool stamp of skill stamp" in person.asked[0] and marker + mode in person.asked[0], "the question shows the call", person.asked)
            denied = await client.call_tool("stamp", {"path": marker + mode + "2"})
            check(denied.is_error and "You denied this call" in text(denied) and "not today" in text(denied), f"{mode}: denied in the client", denied)
            if mode == "auto":
                await tampered_states_are_refused(client, data, marker)
        print(f"stdio {mode}: in-client approval ok")
    recorded = decisions(data)
    check([r[1] for r in recorded] == ["approved", "denied"] * 2, "each decision is recorded", recorded)
    check(all(r[2] == "mcp:tester" and r[3] == "mcp:tester" for r in recorded), "as the caller's own", recorded)
    check(recorded[1][4] == "not today", "with the note", recorded)

    person = Person([])
    async with Client(params(), mode="legacy", elicitation_callback=person) as client:
        held = await client.call_tool("stamp", {"path": marker + "3"})
        check(not held.is_error and held.structured_content["status"] == "pending_approval" and not person.asked, "without the flag the inbox decides", held)
    print("stdio: without --client-approval, the inbox decides")


async def marked_tokens_main(base):
    """Over HTTP, `client_approval` names the callers who decide their own
    calls in their client; `mcp_load_skill_tool` offers `load_skill`."""
    marker = ENV["SKILLD_TEST_MARKER"]
    for mode in ("legacy", "auto"):
        person = Person([("approve_once", None)])
        async with over_http(base, ENV["SKILLD_TEST_AGENT"], mode, elicitation_callback=person) as client:
            ran = await client.call_tool("stamp", {"path": marker + mode})
            check(not ran.is_error and "stamped" in text(ran) and len(person.asked) == 1, f"{mode}: the marked token decided in its client", ran, person.asked)
        stranger = Person([])
        async with over_http(base, ENV["SKILLD_TEST_OTHER"], mode, elicitation_callback=stranger) as client:
            held = await client.call_tool("stamp", {"path": marker + mode})
            check(held.structured_content["status"] == "pending_approval" and not stranger.asked, f"{mode}: another token is not asked", held)
        print(f"http {mode}: client_approval ok")
    async with over_http(base, ENV["SKILLD_TEST_AGENT"], "auto") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        check("load_skill" in tools and tools["load_skill"].annotations.read_only_hint, "load_skill is listed", sorted(tools))
        loaded = await client.call_tool("load_skill", {"name": "slow"})
        check(not loaded.is_error and "Use skill://slow/notes.md." in text(loaded), "it answers the instructions, {baseDir} as the URI", loaded)
        check("skill://slow/SKILL.md" in loaded.structured_content["files"], "and the skill's files", loaded.structured_content)
        unknown = await client.call_tool("load_skill", {"name": "nope"})
        check(unknown.is_error and "greet" in text(unknown), "an unknown skill names the known", unknown)
    print("http: load_skill ok")


if __name__ == "__main__":
    how = sys.argv[1]
    if how == "http":
        asyncio.run(http_main(sys.argv[2], ENV["SKILLD_TEST_SKILLS"]))
    elif how == "stdio":
        asyncio.run(stdio_main(*sys.argv[2:5]))
    elif how == "marked":
        asyncio.run(marked_tokens_main(sys.argv[2]))
    elif how == "in-client":
        asyncio.run(in_client_main(*sys.argv[2:6]))
    else:
        raise SystemExit(f"unknown transport {how}")
