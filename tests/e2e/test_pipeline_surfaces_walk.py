"""The person's and the agent's side of pipelines that NEED THE WALKER (pl-walker) wired in (issue 27 items 5 and 7), through a real octipusd with the real claude
as the stage worker against the scripted model:

* ``octipusctl pipelines run FILE --workspace DIR --param K=V --json`` prints ``{"id"}``; the pipeline
  completes; ``show --json`` has ``status`` at its top level; its attempt's run is a run of the API;
* a stage stopped (``octipusctl pipelines stop``) is ``stopped``, resumed (``resume`` answers
  ``resuming`` at once, a second resume while its replay review awaits the person a 409 "already
  awaiting"), the review approved, and completes;
* ``create_pipeline`` and ``get_pipeline_status`` called by the root agent through its bridge.

These are not run before the walker is merged (they fail: the daemon answers 503
``pipelines_unavailable`` to create, resume and stop); the lead runs them after merging it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from octipusd.errors import ApiError
from tests.e2e.conftest import Env

CTL = str(Path(sys.executable).parent / "octipusctl")
DONE = {"active": False}

#: One stage; its worker answers at once, or (first request only) after a stall long enough to stop it.
TEMPLATE: dict[str, Any] = {
    "name": "one-stage",
    "description": "one stage doing what it is told",
    "steps": [
        {
            "name": "work",
            "topic": "general",
            "description": "do the thing",
            "promptTemplate": "STAGE-WORK: do {{param.what}}.",
        }
    ],
    "parameters": [{"key": "what", "inputType": "string", "requirement": "required"}],
}
FINAL = {"completed", "failed", "stopped", "paused"}


def script(stall_s: float = 0) -> dict[str, Any]:
    step: dict[str, Any] = {"content": [{"type": "text", "text": "stage done"}]}
    if stall_s:
        step |= {"stall_seconds": stall_s, "stall_times": 1}
    return {"steps": [], "conversations": [{"match": "STAGE-WORK", "steps": [step]}]}


def ctl(env: Env, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CTL, "pipelines", *args], env=env.daemon.env, capture_output=True, text=True, timeout=120
    )


def status(env: Env, pid: str) -> dict[str, Any]:
    return dict(env.client.request("GET", f"/pipelines/{pid}"))


def wait_status(env: Env, pid: str, wanted: set[str], timeout: float = 120) -> dict[str, Any]:
    return dict(
        env.wait(lambda: (d := status(env, pid))["status"] in wanted and d, timeout, f"pipeline {wanted}")
    )


def run_file(env: Env, tmp_path: Path) -> str:
    path = tmp_path / "one-stage.json"
    path.write_text(json.dumps(TEMPLATE), encoding="utf-8")
    done = ctl(
        env, "run", str(path), "--workspace", str(env.daemon.workspace), "--param", "what=it", "--json"
    )
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["id"])


def test_run_a_template_file_to_completion(octipus: Callable[..., Env], tmp_path: Path) -> None:
    env = octipus(script())
    pid = run_file(env, tmp_path)
    doc = wait_status(env, pid, FINAL)
    assert doc["status"] == "completed", doc
    shown = ctl(env, "show", pid, "--json")
    assert json.loads(shown.stdout)["status"] == "completed"
    runs = [r for a in doc["attempts"] for r in a["runIds"]]
    assert runs and all(env.run(r)["status"] == "succeeded" for r in runs)
    assert pid in ctl(env, "list").stdout


def test_stop_then_resume_and_a_second_resume_is_refused(octipus: Callable[..., Env], tmp_path: Path) -> None:
    env = octipus(script(stall_s=60))
    pid = run_file(env, tmp_path)
    env.wait(lambda: any(a["runIds"] for a in status(env, pid)["attempts"]), 60, "the stage's run")
    stopped = ctl(env, "stop", pid)
    assert stopped.returncode == 0, stopped.stderr
    assert wait_status(env, pid, FINAL)["status"] == "stopped"
    answer = env.client.request("POST", f"/pipelines/{pid}/resume", json={})
    assert answer["status"] == "resuming"  # at once: its replay review awaits the person
    try:
        env.client.request("POST", f"/pipelines/{pid}/resume", json={})
        raise AssertionError("a second resume was accepted")
    except ApiError as exc:
        assert exc.http_status == 409 and "already awaiting" in exc.message, exc.message
    env.answer(answer["pendingApproval"]["requestId"], "approve")
    assert wait_status(env, pid, FINAL - {"stopped"})["status"] == "completed"


def test_the_root_agent_creates_and_reads_a_pipeline_through_its_bridge(octipus: Callable[..., Env]) -> None:
    create = {"template": TEMPLATE, "params": {"what": "it"}, "description": "from the agent"}
    root = [
        {"content": [{"type": "tool_use", "name": "mcp__octipus__create_pipeline", "input": create}]},
        {"content": [{"type": "text", "text": "created"}]},
    ]
    env = octipus({"steps": root, "conversations": script()["conversations"]})
    session = env.new_session()
    run = env.wait_final(env.post(session, "start a pipeline"))
    assert run["status"] == "succeeded", run
    (pipeline,) = env.client.request("GET", "/pipelines")
    assert pipeline["sessionId"] == session
    assert wait_status(env, pipeline["id"], FINAL)["status"] == "completed"
