"""An approval pending when octipusd stops: after the restart it is marked, its run cleanly ended.

Issue 4 ("Approvals as durable records"): a request pending at shutdown is still answerable
afterwards, or its run is cleanly failed and the request marked so; nothing waits forever. The
vendor process waiting on it does not survive the daemon, so Octipus takes the second branch:
the request is marked ``cancelled`` with the reason, its run ``interrupted``, and a late answer
is refused with a message saying what happened, by whom and when.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable

import psutil
import pytest

from octipusd.errors import ApiError
from octipusd.runner.process import run_processes
from octipusd.testing.harness import DaemonHarness
from tests.e2e.conftest import Env

PROBE = {"command": 'bash -c "echo restart-probe"', "description": "probe"}


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_a_pending_approval_is_marked_and_its_run_ended_after_a_restart(
    octipus: Callable[..., Env], sig: int
) -> None:
    env = octipus(
        {
            "steps": [
                {"content": [{"type": "tool_use", "name": "Bash", "input": PROBE}]},
                {"content": [{"type": "text", "text": "done"}]},
            ]
        }
    )
    session = env.new_session()
    run = env.post(session, "probe")
    approval = env.wait_approval(run)
    assert approval["status"] == "pending"
    env.daemon.stop(sig=sig)

    with DaemonHarness(env.daemon.root, env.model.base_url) as again:
        client = again.client()
        stored = client.request("GET", f"/approvals/{approval['id']}")
        assert stored["status"] == "cancelled", stored
        assert stored["decided_by"] == "octipusd" and stored["decision_reason"], stored
        final = client.request("GET", f"/runs/{run}")
        assert final["status"] == "interrupted", final
        with pytest.raises(ApiError, match="already cancelled by octipusd") as late:
            client.request("POST", f"/approvals/{approval['id']}", json={"decision": "approve"})
        assert late.value.http_status == 409
        assert client.request("GET", "/approvals", params={"status": "pending"}) == []
        # nothing of the run survived: the restart reaped what a killed daemon left behind
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and [
            p for p in run_processes(run) if p.status() != psutil.STATUS_ZOMBIE
        ]:
            time.sleep(0.05)
        assert [p for p in run_processes(run) if p.status() != psutil.STATUS_ZOMBIE] == []
        # the session goes on: the next turn runs (the model may ask for the same call again)
        follow = client.request("POST", f"/sessions/{session}/turns", json={"prompt": "go on"})["id"]
        for event in client.stream(follow):
            if event["kind"] == "approval_requested":
                client.request(
                    "POST",
                    f"/approvals/{event['data']['approval_id']}",
                    json={"decision": "deny", "reason": "no"},
                )
        assert client.request("GET", f"/runs/{follow}")["status"] == "succeeded"
