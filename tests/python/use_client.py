"""Drives a running skilld through the Python client that openapi-python-client
generated from the committed openapi/openapi.json.

Run by tests/it/python_client.rs as `python use_client.py BASE_URL`, with the
generated package `skilld_client` on PYTHONPATH and a server whose roots are
the repository's bundled `skills/` and two fixture skills, `greet` (read-only:
runs at once; has `references/notes.md`) and `stamp` (a person approves every
call). The server has tokens: SKILLD_TEST_AGENT (role invoke) and
SKILLD_TEST_BOSS (role approve) in the environment. Every request goes through
the generated operations (no hand-written HTTP); every answer must come back as
the generated model of its schema. Exits 1 with one line per mismatch on stderr.
"""

import json
import os
import sys

import httpx

FAILURES: list[str] = []


def check(ok: bool, message: str) -> bool:
    if not ok:
        FAILURES.append(message)
    return ok


def fail_now(message: str) -> None:
    print(f"use_client.py: FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def same_as_wire(what: str, response, parsed) -> None:
    """The model, serialised again, equals the JSON on the wire: the generated
    model neither lost nor changed a field."""
    wire = json.loads(response.content)
    check(parsed.to_dict() == wire, f"{what}: the parsed model does not round-trip to the JSON the server sent")


def events_of(body: bytes) -> list[tuple[str, str]]:
    """The (event, data) pairs of a text/event-stream body."""
    events = []
    for block in body.decode().replace("\r\n", "\n").split("\n\n"):
        name, data = "message", []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
        if data:
            events.append((name, "\n".join(data)))
    return events


def flow(client, approver) -> None:
    """The whole flow, typed: run a tool, try one, have a held call approved
    by another token, wait for its run, follow its events, download a file."""
    from skilld_client.api.approvals import approve, list_approvals
    from skilld_client.api.invoke import invoke_tool
    from skilld_client.api.runs import get_run, run_events
    from skilld_client.api.skills import get_skill_file
    from skilld_client.models import (
        Approval,
        ApprovalList,
        ApprovalStatus,
        DecisionRequest,
        DryRun,
        Envelope,
        InvokeAccepted,
        InvokeRequest,
        Run,
        RunStatus,
        Scope,
    )
    from skilld_client.models.invoke_request_arguments_type_0 import InvokeRequestArgumentsType0
    from skilld_client.types import File

    def args(**kw) -> InvokeRequest:
        return InvokeRequest(arguments=InvokeRequestArgumentsType0.from_dict(kw))

    # A read-only tool runs at once: its 200 is the Envelope, read through attributes.
    envelope = invoke_tool.sync("greet", client=client, body=args(name="world"))
    if check(isinstance(envelope, Envelope), f"invoke greet: parsed as {type(envelope).__name__}, expected Envelope"):
        check(envelope.success is True, f"invoke greet: success {envelope.success!r}")
        check(envelope.output.strip() == "hello world", f"invoke greet: output {envelope.output!r}")
        check(envelope.tool == "greet" and envelope.skill == "greet", f"invoke greet: {envelope.skill}/{envelope.tool}")

    # ?dry_run=true decodes as a DryRun.
    plan = invoke_tool.sync("greet", client=client, body=args(name="world"), dry_run=True)
    if check(isinstance(plan, DryRun), f"dry run of greet: parsed as {type(plan).__name__}, expected DryRun"):
        check(plan.argv == ["echo", "hello", "world"], f"dry run of greet: argv {plan.argv!r}")

    # stamp asks every time: 202 with the approval to decide.
    marker = os.environ["SKILLD_TEST_MARKER"]
    held = invoke_tool.sync("stamp", client=client, body=args(path=marker))
    if not check(isinstance(held, InvokeAccepted), f"invoke stamp: parsed as {type(held).__name__}, expected InvokeAccepted"):
        return
    check(held.status == "pending_approval", f"invoke stamp: status {held.status!r}")
    check(not os.path.exists(marker), "invoke stamp: the tool ran before anyone approved it")

    inbox = list_approvals.sync(client=client, status=ApprovalStatus.PENDING)
    if check(isinstance(inbox, ApprovalList), f"GET /approvals: parsed as {type(inbox).__name__}"):
        check(
            any(a.id == held.approval_id and a.tool == "stamp" for a in inbox.approvals),
            f"GET /approvals?status=pending: {[a.id for a in inbox.approvals]} lacks {held.approval_id}",
        )

    decided = approve.sync(held.approval_id, client=approver, body=DecisionRequest(scope=Scope.ONCE, note="ok"))
    if check(isinstance(decided, Approval), f"approve: parsed as {type(decided).__name__}, expected Approval"):
        check(decided.status == ApprovalStatus.APPROVED, f"approve: status {decided.status!r}")
        check(decided.decided_by == "boss", f"approve: decided_by {decided.decided_by!r}")

    run = get_run.sync(held.run_id, client=client, wait=60)
    if check(isinstance(run, Run), f"GET /runs/{{id}}?wait=60: parsed as {type(run).__name__}, expected Run"):
        check(run.status == RunStatus.SUCCEEDED, f"the approved run: status {run.status!r}")
        result = run.result
        if check(isinstance(result, Envelope), f"the approved run: result is {type(result).__name__}, expected Envelope"):
            check(result.output.strip() == "stamped", f"the approved run: output {result.output!r}")
            check(result.run_id == held.run_id, f"the approved run: result.run_id {result.run_id}")
    check(os.path.exists(marker), "the approved run did not write its marker")

    # The finished run's events: the generated operation hands over the stream.
    r = run_events.sync_detailed(held.run_id, client=client)
    if check(r.status_code == 200, f"GET /runs/{{id}}/events: status {r.status_code}"):
        check(
            r.headers.get("content-type", "").startswith("text/event-stream"),
            f"GET /runs/{{id}}/events: content type {r.headers.get('content-type')!r}",
        )
        events = events_of(r.content)
        results = [data for name, data in events if name == "result"]
        if check(len(results) == 1, f"GET /runs/{{id}}/events: events {events!r} hold no single result"):
            streamed = Envelope.from_dict(json.loads(results[0]))
            check(streamed.run_id == held.run_id, f"the result event: run_id {streamed.run_id}")
            check(streamed.output.strip() == "stamped", f"the result event: output {streamed.output!r}")

    # Which skills apply to a message: greet's keyword fires.
    from skilld_client.api.skills import match_skills
    from skilld_client.models import MatchList, MatchRequest, Problem, TriggerKind

    matched = match_skills.sync(client=client, body=MatchRequest(message="Say Hello to the team"))
    if check(isinstance(matched, MatchList), f"POST /skills/match: parsed as {type(matched).__name__}"):
        hits = [(m.skill, m.trigger.kind, m.trigger.value) for m in matched.matches]
        check(hits == [("greet", TriggerKind.KEYWORD, "hello")], f"POST /skills/match: {hits!r}")
    refused = match_skills.sync(client=client, body=MatchRequest(explicit=["no-such-skill"]))
    if check(isinstance(refused, Problem), f"match with an unknown skill: parsed as {type(refused).__name__}"):
        check(refused.status == 422, f"match with an unknown skill: status {refused.status!r}")

    # A skill's file, as bytes.
    notes = get_skill_file.sync("greet", "references/notes.md", client=client)
    if check(isinstance(notes, File), f"GET /skills/greet/files/references/notes.md: parsed as {type(notes).__name__}"):
        check(notes.payload.read() == b"Greet people by name.\n", "the downloaded notes differ from the file")


def main() -> None:
    if len(sys.argv) != 2:
        fail_now("usage: use_client.py BASE_URL")
    base_url = sys.argv[1]

    try:
        from skilld_client import AuthenticatedClient
        from skilld_client.api.skills import get_skill, list_skills
        from skilld_client.models import Problem, SkillDetail, SkillList, Trust
    except ImportError as e:
        fail_now(f"the generated client lacks a skills operation or model: {e}")
    try:
        from skilld_client.api.tools import list_tools
        from skilld_client.models import AnthropicToolList, Format, OpenAiToolList
    except ImportError as e:
        fail_now(
            "the generated client has no `list_tools` operation (GET /tools) or its models: "
            f"{e}; openapi-python-client skipped it, see its warnings about openapi/openapi.json"
        )

    agent = os.environ.get("SKILLD_TEST_AGENT")
    boss = os.environ.get("SKILLD_TEST_BOSS")
    if not agent or not boss:
        fail_now("SKILLD_TEST_AGENT and SKILLD_TEST_BOSS must hold the invoke and approve tokens")
    client = AuthenticatedClient(
        base_url=base_url, token=agent, raise_on_unexpected_status=True, timeout=httpx.Timeout(30.0)
    )
    approver = AuthenticatedClient(
        base_url=base_url, token=boss, raise_on_unexpected_status=True, timeout=httpx.Timeout(30.0)
    )
    with client, approver:
        flow(client, approver)

        # GET /skills
        r = list_skills.sync_detailed(client=client)
        if not check(r.status_code == 200, f"GET /skills: status {r.status_code}, expected 200"):
            return
        listing = r.parsed
        if not check(isinstance(listing, SkillList), f"GET /skills: parsed as {type(listing).__name__}, expected SkillList"):
            return
        same_as_wire("GET /skills", r, listing)
        names = [s.name for s in listing.skills]
        check("git" in names, f"GET /skills: names {names} lack 'git'")
        check(names == sorted(names), f"GET /skills: names {names} are not sorted")
        for s in listing.skills:
            check(s.trust == Trust.BUNDLED, f"GET /skills: {s.name} has trust {s.trust!r}, expected Trust.BUNDLED")
        git = next((s for s in listing.skills if s.name == "git"), None)
        if git is not None:
            check(
                {"git_status", "git_log", "git_diff", "git_branches"} <= set(git.tools),
                f"GET /skills: git's tools {git.tools} lack some of git_status, git_log, git_diff, git_branches",
            )

        # GET /skills?q=git&trust=bundled: the query parameters reach the server.
        r = list_skills.sync_detailed(client=client, q="GIT", trust=Trust.BUNDLED)
        if check(isinstance(r.parsed, SkillList), f"GET /skills?q=GIT: parsed as {type(r.parsed).__name__}"):
            found = [s.name for s in r.parsed.skills]
            check("git" in found, f"GET /skills?q=GIT: {found} lacks 'git'")
            check(len(found) < len(names), f"GET /skills?q=GIT: {found} is not filtered (all: {names})")

        # GET /skills/git
        r = get_skill.sync_detailed("git", client=client)
        detail = r.parsed
        if check(
            r.status_code == 200 and isinstance(detail, SkillDetail),
            f"GET /skills/git: status {r.status_code}, parsed as {type(detail).__name__}, expected 200 SkillDetail",
        ):
            same_as_wire("GET /skills/git", r, detail)
            check(detail.name == "git", f"GET /skills/git: name {detail.name!r}")
            check(detail.trust == Trust.BUNDLED, f"GET /skills/git: trust {detail.trust!r}")
            check(detail.read_only is True, f"GET /skills/git: read_only {detail.read_only!r}, expected True")
            tools = {t.name: t for t in detail.tools}
            check(
                {"git_status", "git_log", "git_diff", "git_branches"} <= set(tools),
                f"GET /skills/git: tools {sorted(tools)} lack some of git_status, git_log, git_diff, git_branches",
            )
            for t in detail.tools:
                check(t.skill == "git", f"GET /skills/git: tool {t.name} has skill {t.skill!r}")
            log = tools.get("git_log")
            if log is not None:
                params = log.parameters.to_dict()
                check(params.get("type") == "object", f"git_log parameters: type {params.get('type')!r}, expected 'object'")
                check(
                    params.get("properties", {}).get("count", {}).get("type") == "integer",
                    f"git_log parameters: no integer `count` in {params}",
                )
            check(
                any(f.path == "SKILL.md" for f in detail.files),
                f"GET /skills/git: files {[f.path for f in detail.files]} lack SKILL.md",
            )

        # GET /skills/{missing}: the 404 comes back as the Problem model.
        r = get_skill.sync_detailed("no-such-skill", client=client)
        if check(
            r.status_code == 404 and isinstance(r.parsed, Problem),
            f"GET /skills/no-such-skill: status {r.status_code}, parsed as {type(r.parsed).__name__}, expected 404 Problem",
        ):
            check(r.parsed.status == 404, f"GET /skills/no-such-skill: problem status {r.parsed.status!r}")

        # GET /tools?format=openai
        r = list_tools.sync_detailed(client=client, format_=Format.OPENAI)
        openai = r.parsed
        if check(
            r.status_code == 200 and isinstance(openai, OpenAiToolList),
            f"GET /tools?format=openai: status {r.status_code}, parsed as {type(openai).__name__}, expected OpenAiToolList",
        ):
            same_as_wire("GET /tools?format=openai", r, openai)
            check(len(openai.tools) > 0, "GET /tools?format=openai: no tools")
            for t in openai.tools:
                check(t.type_ == "function", f"GET /tools?format=openai: entry type {t.type_!r}, expected 'function'")
                params = t.function.parameters.to_dict()
                check(
                    params.get("type") == "object",
                    f"GET /tools?format=openai: {t.function.name} parameters have type {params.get('type')!r}, expected 'object'",
                )
                check(isinstance(t.function.strict, bool), f"GET /tools?format=openai: {t.function.name} strict is not a bool")
            fnames = {t.function.name for t in openai.tools}
            check(
                {"git_status", "git_log", "git_diff", "git_branches"} <= fnames,
                f"GET /tools?format=openai: function names {sorted(fnames)} lack some git tools",
            )

        # GET /tools?format=anthropic
        r = list_tools.sync_detailed(client=client, format_=Format.ANTHROPIC)
        anthropic = r.parsed
        if check(
            r.status_code == 200 and isinstance(anthropic, AnthropicToolList),
            f"GET /tools?format=anthropic: status {r.status_code}, parsed as {type(anthropic).__name__}, expected AnthropicToolList",
        ):
            same_as_wire("GET /tools?format=anthropic", r, anthropic)
            anames = {t.name for t in anthropic.tools}
            check("git_status" in anames, f"GET /tools?format=anthropic: names {sorted(anames)} lack git_status")
            for t in anthropic.tools:
                schema = t.input_schema.to_dict()
                check(
                    schema.get("type") == "object",
                    f"GET /tools?format=anthropic: {t.name} input_schema type {schema.get('type')!r}, expected 'object'",
                )
            if isinstance(openai, OpenAiToolList):
                check(
                    anames == {t.function.name for t in openai.tools},
                    "GET /tools: the anthropic and openai exports name different tools",
                )

    if FAILURES:
        for f in FAILURES:
            print(f"use_client.py: FAIL: {f}", file=sys.stderr)
        sys.exit(1)
    print(
        f"use_client.py: ok: {len(names)} skills, git has {len(detail.tools)} tools, "
        f"{len(openai.tools)} openai and {len(anthropic.tools)} anthropic tool exports"
    )


if __name__ == "__main__":
    main()
