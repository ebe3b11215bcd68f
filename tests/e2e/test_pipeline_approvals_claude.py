"""Approvals inside a pipeline end to end (issue 28 items 1-3 "Done when"): a real octipusd, the real
``claude`` as the stage worker, the scripted Anthropic model deciding its calls, driven as a person
would (the API and ``octipusctl``).

The worker's ``Bash`` call asks; nobody answers within ``daemon.approvalTimeoutSeconds`` (shortened
to 2 s), so the worker gives up: the pipeline does not fail, it is ``awaiting_approval`` with
``pendingApproval`` naming the call, raised again as a ``pipeline_call`` approval. The daemon
restarts; the person approves with ``octipusctl approvals approve``; the same attempt continues its
Claude conversation, the worker repeats the call, which runs exactly once without a second prompt,
and the pipeline completes (SQLite, PostgreSQL). A DENY rule added while the stage waits wins over the
approval (SQLite: the backend plays no part). The allowance's narrowness (another cwd, env or file
content, the root agent, another attempt) is proven at unit level: tests/unit/pipelines/test_approved_calls.py.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from octipusd.testing.harness import DaemonHarness
from tests.e2e.conftest import Env
from tests.e2e.test_pipelines_claude import Pipelines, ctl, database, handoff, text

__all__ = ["database"]  # the backend fixture (SQLite, PostgreSQL), shared with the pipelines' e2e

MARK = "GUARDED-STAGE"
COMMAND = "echo ran >> calls.txt"
#: The worker's CLI, told its permission request failed as its run ends, asks the model again before
#: it is stopped: that request stalls (the stop cuts it). Claude resumes the conversation with a
#: "Continue from where you left off." exchange of its own, so the resumed turn plays step 2.
STALL_ONCE = {"stall_seconds": 8, "stall_times": 1}
DONE = text(handoff("done", "ran it"))


def bash(command: str) -> dict[str, Any]:
    return {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": command}}]}


def one_stage() -> dict[str, Any]:
    return {
        "name": "guarded",
        "description": "one stage whose worker needs a person's approval",
        "steps": [{"name": "work", "topic": "coding", "promptTemplate": MARK}],
    }


def test_a_worker_that_gave_up_waits_for_the_person_across_a_restart_then_runs_the_call_once(
    octipus: Callable[..., Env], database: dict[str, str], claude: Path
) -> None:
    script = {
        "steps": [],
        "conversations": [
            {"match": MARK, "steps": [bash(COMMAND), {**bash(COMMAND), **STALL_ONCE}, bash(COMMAND), DONE]}
        ],
    }
    env = octipus(script, extra_env={**database, "OCTIPUS_DAEMON__APPROVALTIMEOUTSECONDS": "2"})
    session = env.new_session(permission_mode="default")
    body = {"template": one_stage(), "session_id": session}
    pid = str(env.client.request("POST", "/pipelines", json=body)["id"])
    api = Pipelines(env)

    waiting = api.wait(pid)
    assert waiting["status"] == "awaiting_approval", waiting
    pending = waiting["pendingApproval"]
    assert pending["kind"] == "tool_call" and pending["toolName"] == "cli-native:Bash", pending
    assert pending["stage"] == "work" and pending["subject"] == COMMAND, pending
    (attempt,) = waiting["attempts"]
    assert attempt["status"] == "interrupted"
    raised = env.client.request("GET", f"/approvals/{pending['requestId']}")
    assert raised["status"] == "pending" and raised["input"] == {"command": COMMAND}, raised
    assert not (env.daemon.workspace / "calls.txt").exists()

    env.daemon.stop(signal.SIGTERM)
    again = DaemonHarness(
        env.daemon.root,
        env.model.base_url,
        claude,
        {**database, "OCTIPUS_DAEMON__APPROVALTIMEOUTSECONDS": "2"},
    )
    with again:
        api = Pipelines(env, again)
        ctl(again, "approvals", "approve", pending["requestId"])
        done = api.wait(pid, {"completed", "failed", "stopped"})
        assert done["status"] == "completed", done
        assert (env.daemon.workspace / "calls.txt").read_text() == "ran\n"
        (attempt,) = done["attempts"]  # the same attempt, continued
        first, resumed = (api.run(r) for r in attempt["runIds"])
        assert resumed["resumed"] and resumed["vendor_session_id"] == first["vendor_session_id"]
        events = again.client().request("GET", f"/runs/{resumed['id']}/events", params={"limit": 100000})
        decisions = [e["data"] for e in events if e["kind"] == "policy_decision"]
        assert any(d.get("tier") == "allowance" for d in decisions), decisions
        assert not [e for e in events if e["kind"] == "approval_requested"], "asked a second time"
        assert done["pendingApproval"] is None
        history = json.dumps(done.get("history"))
        assert pending["requestId"] in history


def test_a_deny_rule_added_while_the_stage_waits_wins_over_the_approval(octipus: Callable[..., Env]) -> None:
    denied = "echo denied >> denied.txt"
    script = {
        "steps": [],
        "conversations": [
            {"match": MARK, "steps": [bash(denied), {**bash(denied), **STALL_ONCE}, bash(denied), DONE]}
        ],
    }
    env = octipus(script, extra_env={"OCTIPUS_DAEMON__APPROVALTIMEOUTSECONDS": "2"})
    session = env.new_session(permission_mode="default")
    pid = str(
        env.client.request("POST", "/pipelines", json={"template": one_stage(), "session_id": session})["id"]
    )
    api = Pipelines(env)
    waiting = api.wait(pid)
    assert waiting["status"] == "awaiting_approval", waiting
    ctl(env.daemon, "rules", "add", "deny", "cli-native:Bash(echo:*)")
    ctl(env.daemon, "approvals", "approve", waiting["pendingApproval"]["requestId"])
    done = api.wait(pid, {"completed", "failed", "stopped"})
    assert done["status"] == "completed", done
    assert not (env.daemon.workspace / "denied.txt").exists()
    (attempt,) = done["attempts"]
    events = env.events(attempt["runIds"][-1])
    results = [e["data"] for e in events if e["kind"] == "tool_result"]
    assert results and all(r["is_error"] for r in results), results
    assert not [e for e in events if e["kind"] == "approval_requested"], "asked a second time"
    # Claude is handed the DENY rule and refuses the call itself; were it asked, the gate denies it
    # before any allowance (tests/unit/pipelines/test_approved_calls.py)
    decisions = [e["data"] for e in events if e["kind"] == "permission_decision"]
    assert all(not d["allowed"] and "denied by Octipus policy" in d["reason"] for d in decisions), decisions
