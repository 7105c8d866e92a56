"""Calls skilld's tools through a client generated from its typed tool
server document (`GET /tools/openapi.json`, package `skilld_tools` on
PYTHONPATH): each tool is a function taking its own typed body.

Usage: use_tool_server.py BASE_URL (tokens and the marker file in the
environment; see tests/it/toolserver.rs).
"""

import os
import sys
import threading
import time

import httpx
from skilld_tools import AuthenticatedClient
from skilld_tools.api.repeat import repeat
from skilld_tools.api.stamp import stamp
from skilld_tools.models import Envelope, InvokeAccepted, RepeatBody, StampBody

base = sys.argv[1]
AGENT, BOSS, MARKER = (os.environ[k] for k in ("SKILLD_TEST_AGENT", "SKILLD_TEST_BOSS", "SKILLD_TEST_MARKER"))
client = AuthenticatedClient(base_url=base, token=AGENT, raise_on_unexpected_status=True)
boss = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {BOSS}"}, timeout=30)


def approve_the_next_request(known):
    for _ in range(200):
        fresh = [a for a in boss.get("/approvals?status=pending").json()["approvals"] if a["id"] not in known]
        if fresh:
            r = boss.post(f"/approvals/{fresh[0]['id']}/approve", json={"scope": "once"})
            assert r.status_code == 200, r.text
            return
        time.sleep(0.05)
    raise SystemExit("no request reached the inbox")


envelope = repeat.sync(client=client, body=RepeatBody(word="typed", times=3))
assert isinstance(envelope, Envelope), envelope
assert envelope.success and envelope.output == "typed\n" * 3, envelope

# (Its own path: the same call again would join this request while it waits.)
held = stamp.sync(client=client, body=StampBody(path=MARKER + ".held"))
assert isinstance(held, InvokeAccepted) and held.status == "pending_approval", held
assert not os.path.exists(MARKER + ".held"), "nothing ran while held"

# With a wait, the call returns the envelope once a person approves it.
known = {a["id"] for a in boss.get("/approvals?status=pending").json()["approvals"]}
approver = threading.Thread(target=approve_the_next_request, args=(known,))
approver.start()
envelope = stamp.sync(client=client, body=StampBody(path=MARKER), wait=60)
approver.join()
assert isinstance(envelope, Envelope) and envelope.output == "stamped\n", envelope
with open(MARKER) as f:
    assert f.read() == "ran\n"
print("typed tool server: ok")
