"""A monitor end to end (issue 28 "Done when"): a real octipusd, the real ``claude`` as the root agent,
the scripted Anthropic model deciding its calls.

A root turn creates a pipeline (a person's question, then one stage) and ends; the next turn creates a
monitor on ``get_pipeline_status`` whose condition waits for ``completed`` and ends too. The person
approves the pipeline's question; the pipeline completes; the monitor wakes the owner's session
exactly once: a new turn carrying the original match and a fresh observation.

The scripted model cannot read the pipeline's id from a tool result, so the test hands it over: once
the first turn created the pipeline, the script's root steps are replaced with the same steps plus the
monitor's call naming that id (a claude conversation's step is its number of assistant turns).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from octipusd.testing.script import parse_script
from tests.e2e.conftest import Env

#: The pipeline: a person confirms, then one stage works.
TEMPLATE: dict[str, Any] = {
    "name": "confirm-then-work",
    "description": "ask, then work",
    "steps": [
        {"name": "confirm", "stageType": "human_input"},
        {"name": "work", "topic": "general", "promptTemplate": "STAGE-WORK: do it."},
    ],
}
STAGE = {"match": "STAGE-WORK", "steps": [{"content": [{"type": "text", "text": "stage done"}]}]}
#: Seconds a pipeline, a monitor or a run may take to get where the test waits for.
WAIT_S = 120
CTL = str(Path(sys.executable).parent / "octipusctl")


def ctl(env: Env, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CTL, "monitors", *args], env=env.daemon.env, capture_output=True, text=True, timeout=60
    )


def tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "tool_use", "name": f"mcp__octipus__{name}", "input": arguments}]}


def say(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}]}


def root_steps(pipeline_id: str | None) -> list[dict[str, Any]]:
    steps = [tool("create_pipeline", {"template": TEMPLATE, "description": "from the agent"}), say("created")]
    if pipeline_id is not None:
        watch = {
            "source": {"kind": "tool", "name": "get_pipeline_status", "args": {"id": pipeline_id}},
            "condition": {"path": "status", "operator": "in", "value": ["completed", "failed"]},
            "intervalSeconds": 10,
            "continuation": "collect the pipeline's results",
        }
        steps += [tool("monitor__create", watch), say("watching it; ending my turn"), say("woken: done")]
    return steps


def test_a_monitor_on_get_pipeline_status_wakes_the_owner_once_when_the_pipeline_completes(
    octipus: Callable[..., Env],
) -> None:
    env = octipus({"steps": root_steps(None), "conversations": [STAGE]})
    session = env.new_session()
    assert env.wait_final(env.post(session, "start a pipeline"))["status"] == "succeeded"
    (pipeline,) = env.client.request("GET", "/pipelines")
    pid = pipeline["id"]
    asking = env.wait(
        lambda: (d := env.client.request("GET", f"/pipelines/{pid}"))["status"] == "awaiting_approval" and d,
        WAIT_S,
        "the pipeline's question",
    )

    env.model.script = parse_script({"steps": root_steps(pid), "conversations": [STAGE]})
    assert env.wait_final(env.post(session, "watch it"))["status"] == "succeeded"
    (monitor,) = env.client.request("GET", "/monitors")
    assert monitor["status"] == "armed" and monitor["sessionId"] == session, monitor
    assert monitor["source"]["args"] == {"id": pid, "includeHistory": False}

    env.answer(asking["pendingApproval"]["requestId"], "approve", "go on")
    done = env.wait(
        lambda: (
            (m := env.client.request("GET", "/monitors")[0])["status"]
            in {"completed", "blocked", "timed_out"}
            and m
        ),
        WAIT_S,
        "the monitor delivered",
    )
    assert done["status"] == "completed" and done["delivery"]["mode"] == "turn", done
    assert env.client.request("GET", f"/pipelines/{pid}")["status"] == "completed"
    woken = env.wait_final(done["delivery"]["runId"])
    assert woken["status"] == "succeeded", woken
    text = woken["prompt"]
    assert (
        text.startswith(f"[Octipus monitor {monitor['id']}] matched.")
        and "collect the pipeline's results" in text
    )
    match, fresh = text.split("Original match: ")[1].split("Fresh observation: ")
    assert '"observed": "completed"' in match and '"status": "completed"' in fresh, text
    turns = [
        r
        for r in env.client.request("GET", "/runs", params={"session_id": session})
        if "STAGE-WORK" not in r["prompt"]
    ]
    assert sorted(r["prompt"][:20] for r in turns) == sorted(["start a pipeline", "watch it", text[:20]]), (
        turns
    )
    listed = ctl(env, "list", "--json")
    assert listed.returncode == 0 and [m["status"] for m in json.loads(listed.stdout)] == ["completed"], (
        listed
    )
    again = ctl(env, "cancel", monitor["id"])  # delivered once: nothing to cancel, nothing sent again
    assert again.returncode == 1 and "is completed" in again.stderr + again.stdout, again
