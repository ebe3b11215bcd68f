"""The action journal end to end: octipusd, the real claude binary, the scripted model (seed 000).

The model calls Octipus's ``shell__run`` through the run's bridge. A command that appends to a
ledger file and then times out is ``uncertain``; the next mutation of the session waits for a
recovery review (attended) or is refused with "review required" (unattended). The ledger counts
the side effects.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Env


def _script(ledger: Path) -> dict[str, Any]:
    first = {"command": f"echo one >> {ledger}; sleep 5", "timeout": 0.5}
    second = {"command": f"echo two >> {ledger}"}
    return {
        "steps": [
            {"content": [{"type": "tool_use", "name": "mcp__octipus__shell__run", "input": first}]},
            {"content": [{"type": "tool_use", "name": "mcp__octipus__shell__run", "input": second}]},
            {"content": [{"type": "text", "text": "done"}]},
        ]
    }


def _kinds(env: Env, run_id: str, kind: str) -> list[dict[str, Any]]:
    return [e["data"] for e in env.events(run_id) if e["kind"] == kind]


@pytest.mark.parametrize("attended", [True, False])
def test_an_uncertain_shell_call_needs_review_before_the_next_mutation(
    octipus: Callable[..., Env], tmp_path: Path, attended: bool
) -> None:
    workspace = tmp_path / f"ws-{attended}"
    workspace.mkdir()
    ledger = workspace / "ledger.txt"
    env = octipus(_script(ledger))
    env.client.request("POST", "/rules", json={"level": "allow", "rule": "shell__run"})
    session = str(
        env.client.request("POST", "/sessions", json={"workspace": str(workspace), "attended": attended})[
            "id"
        ]
    )
    run = env.post(session, "append twice")
    if attended:
        approval = env.wait_approval(run)
        assert approval["kind"] == "action_recovery", approval
        assert approval["subject"] == "Check earlier"
        [uncertain] = env.client.request("GET", "/actions", params={"session_id": session})["actions"]
        assert uncertain["outcome"] == "uncertain" and uncertain["tool"] == "shell__run", uncertain
        assert approval["action_ids"] == [uncertain["id"]]
        assert ledger.read_text().splitlines() == ["one"]  # the second call waits for the review
        env.answer(approval["id"], "approve")
    final = env.wait_final(run)
    assert final["status"] == "succeeded", final
    actions = env.client.request("GET", "/actions", params={"session_id": session})["actions"]
    finished = [e for e in _kinds(env, run, "bridge_call") if e["event"] == "tool_call_finished"]
    if attended:
        assert ledger.read_text().splitlines() == ["one", "two"]
        assert [a["outcome"] for a in actions] == ["uncertain", "completed"], actions
        # the review acknowledged the record; it never relabels it completed
        assert actions[0]["review_id"] == approval["id"] and actions[0]["outcome"] == "uncertain"
        assert [f["outcome"] for f in finished] == ["uncertain", "completed"], finished
    else:
        assert ledger.read_text().splitlines() == ["one"]
        assert [a["outcome"] for a in actions] == ["uncertain", "not_executed"], actions
        results = _kinds(env, run, "tool_result")
        assert any(r["is_error"] and "review required" in r["content"] for r in results), results
        assert "review required" in json.dumps(_kinds(env, run, "review_required"))


def uncertain_id(env: Env, session: str) -> str:
    [action] = env.client.request("GET", "/actions", params={"session_id": session})["actions"]
    assert action["outcome"] == "uncertain", action
    return str(action["id"])


@pytest.mark.parametrize("attended", [True, False])
def test_a_native_mutation_after_an_uncertain_action_needs_the_same_review(
    octipus: Callable[..., Env], tmp_path: Path, attended: bool
) -> None:
    """Issue 14 item 7: Claude's own Bash, relayed to Octipus and allowed by the rules, waits for a
    recovery review after an uncertain Octipus action (attended), or is refused with "review
    required" (unattended); denying the review refuses it, and it never runs."""
    workspace = tmp_path / f"ws-{attended}"
    workspace.mkdir()
    ledger = workspace / "ledger.txt"
    first = {"command": f"echo one >> {ledger}; sleep 5", "timeout": 0.5}
    native = {"command": f'bash -c "echo native >> {ledger}"', "description": "append"}
    env = octipus(
        {
            "steps": [
                {"content": [{"type": "tool_use", "name": "mcp__octipus__shell__run", "input": first}]},
                {"content": [{"type": "tool_use", "name": "Bash", "input": native}]},
                {"content": [{"type": "text", "text": "done"}]},
            ]
        }
    )
    env.client.request("POST", "/rules", json={"level": "allow", "rule": "shell__run"})
    env.client.request("POST", "/rules", json={"level": "allow", "rule": "cli-native:Bash"})
    session = str(
        env.client.request(
            "POST",
            "/sessions",
            json={"workspace": str(workspace), "attended": attended, "permission_mode": "default"},
        )["id"]
    )
    run = env.post(session, "append twice")
    if attended:
        approval = env.wait_approval(run)
        assert approval["kind"] == "action_recovery" and approval["tool_id"] == "cli-native:Bash", approval
        [uncertain] = env.client.request("GET", "/actions", params={"session_id": session})["actions"]
        assert approval["action_ids"] == [uncertain["id"]]
        assert ledger.read_text().splitlines() == ["one"]
        env.answer(approval["id"], "deny", reason="checking first")
    final = env.wait_final(run)
    assert final["status"] == "succeeded", final
    assert ledger.read_text().splitlines() == ["one"]
    [decision] = [d for d in _kinds(env, run, "permission_decision") if d["tool_id"] == "cli-native:Bash"]
    assert not decision["allowed"], decision
    if attended:
        assert "recovery review" in decision["reason"] and "checking first" in decision["reason"], decision
    else:
        assert "review required" in decision["reason"] and uncertain_id(env, session) in decision["reason"]
        assert env.client.request("GET", "/approvals", params={"status": "all", "run_id": run}) == []
