"""A stage's ``hostServices`` (seed 003 "Host services for gate commands") through a real octipusd with
``security.shellSandbox = required`` (this machine's bubblewrap), the real ``claude`` as the stage
worker and its child, the scripted model deciding their calls.

A loopback HTTP server runs on the host. The implementing stage has ``"hostServices": true``: its own
``shell__run`` and ``shell__run_background`` reach the server; the child it spawns runs in the default
sandbox and does not. The QA stage's ``verifyCommand`` reaches it with ``hostServices`` and not
without (a second pipeline whose stages do not set it; its QA worker is told the failure and passes
the item all the same, so both pipelines complete). A background command the stage leaves running
ends with the stage's run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import psutil
import pytest

from octipusd.runner.containment import run_processes
from tests.e2e.conftest import HELLO, Env, hello_server

#: Reads a URL with the system's Python; prints the body, or the error and exits 7.
FETCH = (
    "python3 -c 'import sys, urllib.request as u\n"
    "try: print(u.urlopen(sys.argv[1], timeout=5).read().decode())\n"
    "except Exception as e: print(type(e).__name__, e); sys.exit(7)' "
)
BUILD, CHECK, CHILD = "HOST-BUILD-STAGE", "HOST-CHECK-STAGE", "CHILD-FETCH-BRIEF"
WAIT_S = 120
#: A background command the stage leaves running (seconds): the end of its run stops it.
LEFT_RUNNING_S = 987


@pytest.fixture
def web() -> Iterator[str]:
    """A loopback HTTP server outside every sandbox; its URL."""
    with hello_server() as url:
        yield url


def tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "tool_use", "name": f"mcp__octipus__{name}", "input": arguments}]}


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}]}


def handoff(summary: str, status: str = "done") -> dict[str, Any]:
    block = json.dumps({"status": status, "summary": summary, "issues": [], "stopped": False})
    return text(f"{summary}\n\n```json\n{block}\n```")


def script(url: str) -> dict[str, Any]:
    fetch = FETCH + url
    build = [
        tool("shell__run", {"command": fetch}),
        tool("shell__run_background", {"command": fetch}),
        tool("shell__read_background", {"id": "bg-1", "wait": 20}),
        tool("shell__run_background", {"command": f"exec sleep {LEFT_RUNNING_S}"}),
        tool("spawn_child", {"role": "general", "brief": f"{CHILD}: fetch the page"}),
        handoff("built"),
    ]
    return {
        "conversations": [
            {"match": CHILD, "steps": [tool("shell__run", {"command": fetch}), text("child done")]},
            {"match": BUILD, "steps": build},
            {"match": f"{CHECK}-on", "steps": [handoff("checked", "pass")]},
            {"match": f"{CHECK}-off", "steps": [handoff("checked", "pass")]},
        ]
    }


def template(url: str, host_services: bool) -> dict[str, Any]:
    shared = {"hostServices": True} if host_services else {}
    return {
        "name": f"host-services-{str(host_services).lower()}",
        "description": "build with the host's services, then check against them",
        "steps": [
            {
                "name": "implement",
                "topic": "coding",
                "promptTemplate": BUILD,
                "toolIds": ["shell", "spawn_child"],
                **shared,
            },
            {
                "name": "verify",
                "topic": "review",
                "stageType": "qa_validation",
                "promptTemplate": f"{CHECK}-{'on' if host_services else 'off'}",
                "verifyCommand": FETCH + url,
                "maxRetries": 1,
                **shared,
            },
        ],
    }


def resting(env: Env, pipeline_id: str) -> dict[str, Any] | None:
    doc: dict[str, Any] = env.client.request("GET", f"/pipelines/{pipeline_id}")
    return doc if doc["status"] in {"completed", "failed", "stopped", "paused", "awaiting_approval"} else None


def results(env: Env, run_id: str) -> str:
    return json.dumps([e["data"] for e in env.events(run_id) if e["kind"] == "tool_result"])


def test_a_stage_with_host_services_reaches_a_loopback_server_its_child_does_not(
    octipus: Callable[..., Env], web: str
) -> None:
    env = octipus(script(web), extra_env={"OCTIPUS_SECURITY__SHELLSANDBOX": "required"})
    assert env.client.request("POST", "/rules", json={"level": "allow", "rule": "shell"})
    docs = {}
    for shared in (True, False):
        body = {
            "template": template(web, shared),
            "workspace": str(env.daemon.workspace),
            "items": [{"title": "serve", "acceptance": "it serves"}],
        }
        pid = str(env.client.request("POST", "/pipelines", json=body)["id"])
        docs[shared] = env.daemon.wait_until(partial(resting, env, pid), WAIT_S, f"pipeline {pid} to rest")
    doc = docs[True]
    build = next(a for a in doc["attempts"] if a["stage"] == "implement")
    stage_run = build["runIds"][0]
    assert env.run(stage_run)["host_services"] is True
    own = results(env, stage_run)
    # shell__run, then shell__run_background read back: both reached the host's server
    assert own.count(HELLO) >= 2 and "URLError" not in own, own
    assert '\\"id\\": \\"bg-1\\"' in own and '\\"id\\": \\"bg-2\\"' in own, own
    # the command it left running ended with its run: nothing carries the run's marker any more
    assert env.run(stage_run)["status"] == "succeeded"
    left = [p for p in run_processes(stage_run) if str(LEFT_RUNNING_S) in " ".join(p.cmdline())]
    assert psutil.wait_procs(left, timeout=5)[1] == [] and run_processes(stage_run) == []
    child = next(r for r in env.client.request("GET", "/runs") if r.get("parent_run_id") == stage_run)
    assert child["host_services"] is False
    theirs = results(env, child["id"])
    assert "URLError" in theirs and HELLO not in theirs, theirs
    # the QA worker is told the verifyCommand's RESULT: it reached the server with hostServices only
    verify = env.model.requests_in(2)[0].body_text()
    assert "RESULT: exit 0" in verify and HELLO in verify, verify
    without = env.model.requests_in(3)[0].body_text()
    assert "RESULT: FAILED" in without and "URLError" in without and HELLO not in without, without
    assert docs[False]["status"] == docs[True]["status"] == "completed"
