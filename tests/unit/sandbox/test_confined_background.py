"""``shell__run_background`` inside the real bubblewrap of this machine: the same confinement as
``shell__run`` (the run's host services give the host network and the Docker socket, nothing else
does), and a stopped or ended job leaves nothing running (found by the run's marker)."""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from octipusd.bridge.fakes import FakeToolHost
from octipusd.runner.containment import default_containment, run_processes
from octipusd.runtime.background import RunJobs, open_jobs
from octipusd.toolkit import RunIdentity, ShellTerms
from octipusd.tools import SHELL_READ_BACKGROUND, SHELL_RUN_BACKGROUND, SHELL_STOP_BACKGROUND
from tests.unit.sandbox.conftest import CONNECT, FETCH, sandbox_of

pytestmark = pytest.mark.anyio


@pytest.fixture
def mine(me: RunIdentity) -> RunIdentity:
    return dataclasses.replace(me, run_id=f"run-bg-{uuid.uuid4().hex[:12]}")


@pytest.fixture
async def jobs(mine: RunIdentity) -> AsyncIterator[RunJobs]:
    async with open_jobs(mine.run_id, default_containment()) as table:
        yield table


async def background(identity: RunIdentity, host: FakeToolHost, command: str) -> dict[str, Any]:
    """Start ``command`` in the background and read it until it ended; the last read, with ``output``
    all it wrote."""
    started = await SHELL_RUN_BACKGROUND.handler(identity, host, {"command": command})
    assert isinstance(started, dict)
    seen, since = "", 0
    with anyio.fail_after(30):
        while True:
            arguments = {"id": started["id"], "since": since, "wait": 10}
            got = await SHELL_READ_BACKGROUND.handler(identity, host, arguments)
            assert isinstance(got, dict)
            json.dumps(got)
            seen, since = seen + got["output"], got["next"]
            if not got["running"]:
                return {**got, "output": seen}


async def test_host_services_give_the_network_and_the_docker_socket_to_background_commands(
    mine: RunIdentity, jobs: RunJobs, listening: dict[str, Path], outside: Path, web: str
) -> None:
    sandbox = sandbox_of(listening, outside)
    plain = FakeToolHost(shell=ShellTerms(sandbox), jobs=jobs)
    shared = FakeToolHost(shell=ShellTerms(sandbox, host_services=True), jobs=jobs)
    cut = await background(mine, plain, FETCH + web)
    assert cut["exit_code"] == 7 and "URLError" in cut["output"], cut
    reached = await background(mine, shared, FETCH + web)
    assert reached["exit_code"] == 0 and reached["output"].strip() == "hello from the host", reached
    masked = await background(mine, plain, CONNECT + str(listening["docker"]))
    assert masked["exit_code"] != 0 and "ConnectionRefusedError" in masked["output"], masked
    docker = await background(mine, shared, CONNECT + str(listening["docker"]))
    assert docker["exit_code"] == 0, docker


async def test_a_stopped_sandboxed_job_leaves_nothing(
    mine: RunIdentity, jobs: RunJobs, listening: dict[str, Path], outside: Path
) -> None:
    host = FakeToolHost(shell=ShellTerms(sandbox_of(listening, outside)), jobs=jobs)
    started = await SHELL_RUN_BACKGROUND.handler(mine, host, {"command": "setsid sleep 600 & exec sleep 600"})
    assert isinstance(started, dict)
    with anyio.fail_after(10):
        while len(run_processes(mine.run_id)) < 3:  # noqa: ASYNC110 (bwrap, its child, the sleeps)
            await anyio.sleep(0.05)
    stopped = await SHELL_STOP_BACKGROUND.handler(mine, host, {"id": started["id"]})
    assert isinstance(stopped, dict) and stopped["running"] is False
    _, alive = psutil.wait_procs(run_processes(mine.run_id), timeout=5)
    assert alive == []
