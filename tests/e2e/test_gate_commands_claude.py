"""Gate commands end to end (issue 28 item 4): a real octipusd, the real ``claude`` as the stage
worker, the scripted Anthropic model deciding its calls.

A ``requiresApproval`` stage whose ``verifyCommand`` uses a parameter asks a person first; the
approval (``octipusctl approvals show``) lists the resolved gate command. Once a person approved
it, the stage's worker runs that exact command through Claude's own Bash without a prompt, while a
changed one (``... 2>&1``) asks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.e2e.conftest import Env
from tests.e2e.test_pipelines_claude import Pipelines, conversation, ctl, handoff, text

GATE = "GATE-STAGE"
#: A command Claude's own permission mode does not allow by itself (it asks Octipus).
COMMAND = "bash -c 'echo ok > gate-ok.txt'"
CHANGED = f"{COMMAND} 2>&1"


def bash(command: str) -> dict[str, Any]:
    return {
        "content": [{"type": "tool_use", "name": "Bash", "input": {"command": command, "description": "x"}}]
    }


def test_an_approved_gate_command_runs_without_asking_in_its_stage_and_a_changed_one_asks(
    octipus: Callable[..., Env],
) -> None:
    steps = [bash(COMMAND), bash(CHANGED), text(handoff("done", "built"))]
    env = octipus({"steps": [], "conversations": [conversation(GATE, steps)]})
    api = Pipelines(env)
    doc = {
        "name": "gated",
        "parameters": [{"key": "name", "inputType": "string"}],
        "steps": [
            {
                "name": "build",
                "topic": "coding",
                "requiresApproval": True,
                "promptTemplate": GATE,
                "verifyCommand": "bash -c 'echo ok > {{param.name}}.txt'",
            }
        ],
    }
    body = {"template": doc, "params": {"name": "gate-ok"}, "workspace": str(env.daemon.workspace)}
    pid = str(api.client.request("POST", "/pipelines", json=body)["id"])

    asking = api.wait(pid)
    assert asking["status"] == "awaiting_approval", asking
    pending = asking["pendingApproval"]
    assert (pending["kind"], pending["stage"]) == ("stage_approval", "build"), pending
    assert not env.model.message_requests  # nothing ran before the person approved
    shown = ctl(env.daemon, "approvals", "show", pending["requestId"]).stdout
    assert f"`{COMMAND}` (stage build)" in " ".join(shown.split()), shown
    ctl(env.daemon, "approvals", "approve", pending["requestId"])

    # the exact command ran without a prompt; the changed one asks the person
    running = api.wait_for(pid, lambda d: d["attempts"] and d["attempts"][0]["runIds"], "the worker started")
    (run_id,) = running["attempts"][0]["runIds"]
    asked = env.wait_approval(run_id)
    assert (asked["tool_id"], asked["subject"]) == ("cli-native:Bash", CHANGED), asked
    assert (env.daemon.workspace / "gate-ok.txt").exists()
    env.answer(asked["id"], "deny", "not that one")
    done = api.wait(pid, {"completed", "failed", "stopped"})
    assert done["status"] == "completed", done
    events = env.events(run_id)
    allowed = [
        e["data"] for e in events if e["kind"] == "policy_decision" and e["data"].get("tier") == "allowance"
    ]
    assert [(d["tool_id"], d["subject"]) for d in allowed] == [("cli-native:Bash", COMMAND)], allowed
    assert [e["data"]["tool_id"] for e in events if e["kind"] == "approval_requested"] == ["cli-native:Bash"]
