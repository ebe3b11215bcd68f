"""``shell__run_background`` / ``shell__read_background`` / ``shell__stop_background`` through the real
bridge, with the runtime's real job table (:func:`octipusd.runtime.background.open_jobs`): real
subprocesses in the daemon's real containment, found afterwards by the run's marker (psutil)."""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import anyio
import psutil
import pytest
from bridge_support import connect, texts
from mcp.client import Client

from octipusd.bridge.fakes import FakeToolHost
from octipusd.bridge.queue import WorkerQueues
from octipusd.bridge.server import open_bridge
from octipusd.runner.containment import default_containment, run_processes
from octipusd.runtime.background import BackgroundLimits, RunJobs, open_jobs
from octipusd.toolkit import RunIdentity
from octipusd.tools import DEFAULT_TOOLS

pytestmark = pytest.mark.anyio


@pytest.fixture
def me(identity: RunIdentity) -> RunIdentity:
    """The test's own run id: its processes are found by their marker, apart from any other test's."""
    return dataclasses.replace(identity, run_id=f"run-bg-{uuid.uuid4().hex[:12]}")


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, texts(result)
    value: dict[str, Any] = json.loads(texts(result)[0])
    return value


async def read_until(client: Client, job: str, text: str) -> dict[str, Any]:
    """Read the job's new output (waiting for it) until it holds ``text`` or the job ended; the last
    read, with ``output`` all that was read."""
    seen, since = "", 0
    with anyio.fail_after(20):
        while True:
            got = await call(client, "shell__read_background", {"id": job, "since": since, "wait": 5})
            seen, since = seen + got["output"], got["next"]
            if text in seen or not got["running"]:
                return {**got, "output": seen}


def survivors(run_id: str) -> list[psutil.Process]:
    left = run_processes(run_id)
    _, alive = psutil.wait_procs(left, timeout=5)
    return alive


@pytest.fixture
async def jobs(me: RunIdentity) -> AsyncIterator[RunJobs]:
    async with open_jobs(me.run_id, default_containment()) as table:
        yield table


async def test_start_read_and_stop_a_server_and_what_it_started(me: RunIdentity, jobs: RunJobs) -> None:
    host = FakeToolHost(jobs=jobs)
    # the server starts a grandchild in a session of its own: it must end with the job all the same
    command = "setsid sleep 600 & echo ready; echo to-stderr >&2; while :; do sleep 1; done"
    async with (
        open_bridge(me, host, DEFAULT_TOOLS, queues=WorkerQueues()) as bridge,
        connect(bridge.url, bridge.endpoint.token) as client,
    ):
        started = await call(client, "shell__run_background", {"command": command})
        assert started["id"] == "bg-1" and started["running"] is True
        got = await read_until(client, "bg-1", "to-stderr")
        assert got["running"] is True and "ready\n" in got["output"], got
        assert len(run_processes(me.run_id)) >= 3  # sh, its loop's sleep, the setsid sleep
        again = await call(client, "shell__read_background", {"id": "bg-1", "since": got["next"]})
        assert again["output"] == "" and again["offset"] == got["next"]
        stopped = await call(client, "shell__stop_background", {"id": "bg-1"})
        assert stopped["running"] is False and stopped["ended_by"] == "stopped by shell__stop_background"
        assert survivors(me.run_id) == []
        final = await call(client, "shell__read_background", {"id": "bg-1"})
        assert "ready" in final["output"] and final["running"] is False
        unknown = await client.call_tool("shell__read_background", {"id": "bg-9"})
    assert unknown.is_error and "no background command 'bg-9'" in texts(unknown)[0]
    started_events = [e.data["tool"] for e in host.events if e.kind == "tool_call_started"]
    assert started_events[0] == "shell__run_background"


async def test_every_job_ends_with_the_run(me: RunIdentity) -> None:
    async with open_jobs(me.run_id, default_containment()) as jobs:
        host = FakeToolHost(jobs=jobs)
        async with (
            open_bridge(me, host, DEFAULT_TOOLS, queues=WorkerQueues()) as bridge,
            connect(bridge.url, bridge.endpoint.token) as client,
        ):
            for _ in range(2):
                await call(client, "shell__run_background", {"command": "setsid sleep 600 & exec sleep 600"})
            with anyio.fail_after(10):
                while len(run_processes(me.run_id)) < 4:  # noqa: ASYNC110 (processes have no event)
                    await anyio.sleep(0.05)
    assert survivors(me.run_id) == []
    assert [job["ended_by"] for job in [await jobs.read(i, None, 0) for i in ("bg-1", "bg-2")]] == [
        "the run ended"
    ] * 2


async def test_a_job_ends_when_its_shell_exits_and_takes_its_leftovers(
    me: RunIdentity, jobs: RunJobs
) -> None:
    host = FakeToolHost(jobs=jobs)
    async with (
        open_bridge(me, host, DEFAULT_TOOLS, queues=WorkerQueues()) as bridge,
        connect(bridge.url, bridge.endpoint.token) as client,
    ):
        await call(client, "shell__run_background", {"command": "sleep 600 & echo left; exit 3"})
        got = await read_until(client, "bg-1", "never")
    assert got["running"] is False and got["exit_code"] == 3 and got["ended_by"] is None, got
    assert got["output"] == "left\n"
    assert survivors(me.run_id) == []


async def test_limits_running_jobs_lifetime_and_output(me: RunIdentity) -> None:
    limits = BackgroundLimits(max_running=2, output_kept_chars=1000, read_max_chars=300)
    async with open_jobs(me.run_id, default_containment(), limits) as jobs:
        host = FakeToolHost(jobs=jobs)
        async with (
            open_bridge(me, host, DEFAULT_TOOLS, queues=WorkerQueues()) as bridge,
            connect(bridge.url, bridge.endpoint.token) as client,
        ):
            await call(client, "shell__run_background", {"command": "exec sleep 600"})
            writer = "head -c 5000 /dev/zero | tr '\\0' x; echo; echo done; exec sleep 600"
            await call(client, "shell__run_background", {"command": writer})
            third = await client.call_tool("shell__run_background", {"command": "echo third"})
            assert third.is_error and "already has 2 background commands running" in texts(third)[0]
            assert (await call(client, "shell__stop_background", {"id": "bg-1"}))["exit_code"] == -15
            short = await call(client, "shell__run_background", {"command": "exec sleep 600", "timeout": 0.5})
            ended = await read_until(client, short["id"], "never")
            assert ended["ended_by"] == "its lifetime of 0.5 s passed" and ended["exit_code"] == -15, ended
            assert "done" in (await read_until(client, "bg-2", "done"))["output"]
            first = await call(client, "shell__read_background", {"id": "bg-2"})
    # 5006 characters written, the newest 1000 kept, 300 per read
    assert (first["offset"], first["next"], first["dropped_chars"], first["more"]) == (4006, 4306, 4006, True)
    assert first["output"] == "x" * 300 and first["running"] is True
    assert survivors(me.run_id) == []


async def test_vault_values_are_masked_in_later_reads(me: RunIdentity, jobs: RunJobs) -> None:
    token = "tok-0123456789-abcdefXYZ"
    host = FakeToolHost(secrets={"api": token}, jobs=jobs)
    async with (
        open_bridge(me, host, DEFAULT_TOOLS, queues=WorkerQueues()) as bridge,
        connect(bridge.url, bridge.endpoint.token) as client,
    ):
        # written in pieces, after the start call returned: only a later read can see it
        command = 'sleep 0.3; printf "a=%s" "${API_TOKEN%????????}"; sleep 0.3; printf "%s b" "${API_TOKEN#????????????????}"'
        await call(
            client, "shell__run_background", {"command": command, "env": {"API_TOKEN": "{{secret:api}}"}}
        )
        got = await read_until(client, "bg-1", "never")
    assert got["output"] == "a=[REDACTED:api] b", got
    assert token not in json.dumps([e.data for e in host.events])


async def test_without_a_run_to_keep_it_nothing_starts(me: RunIdentity) -> None:
    host = FakeToolHost()  # as a call started by hand: no run keeps background commands
    async with (
        open_bridge(me, host, DEFAULT_TOOLS, queues=WorkerQueues()) as bridge,
        connect(bridge.url, bridge.endpoint.token) as client,
    ):
        result = await client.call_tool("shell__run_background", {"command": "touch ran"})
    assert result.is_error and "keeps no background commands" in texts(result)[0]
    assert not (me.workspace / "ran").exists()
