"""The bridge dies with the run: errors pass through, calls in flight end, jobs are killed."""

from __future__ import annotations

import anyio
import psutil
import pytest
from bridge_support import WAIT, Holder, connect, texts, wait_until
from mcp_types import CallToolResult

from octipusd.bridge.fakes import FakeToolHost
from octipusd.bridge.queue import WorkerQueues
from octipusd.bridge.server import open_bridge
from octipusd.toolkit import RunIdentity
from octipusd.tools import DEFAULT_TOOLS

pytestmark = pytest.mark.anyio


class Boom(Exception):
    pass


async def test_error_in_the_run_passes_through_unwrapped(identity: RunIdentity, host: FakeToolHost) -> None:
    queues = WorkerQueues()
    with pytest.raises(Boom):
        async with open_bridge(identity, host, DEFAULT_TOOLS, queues=queues):
            raise Boom
    assert queues.active_workers() == frozenset()


async def test_cancelled_run_closes_the_bridge(identity: RunIdentity, host: FakeToolHost) -> None:
    queues = WorkerQueues()
    urls: list[str] = []
    with anyio.fail_after(WAIT), anyio.CancelScope() as scope:
        async with open_bridge(identity, host, DEFAULT_TOOLS, queues=queues) as bridge:
            urls.append(bridge.url)
            scope.cancel()
            await anyio.sleep_forever()
    assert scope.cancelled_caught
    assert urls and queues.active_workers() == frozenset()


async def test_calls_in_flight_and_queued_end_when_the_run_ends(
    identity: RunIdentity, host: FakeToolHost
) -> None:
    holder = Holder()
    queues = WorkerQueues()
    results: dict[str, CallToolResult] = {}

    async def cli(url: str, token: str) -> None:
        """The CLI side, in its own task: it outlives the bridge, as a vendor process would."""
        async with connect(url, token) as client, anyio.create_task_group() as calls:

            async def call(tag: str) -> None:
                results[tag] = await client.call_tool("hold", {"tag": tag})

            calls.start_soon(call, "running")
            await holder.entered("running").wait()
            calls.start_soon(call, "queued")

    with anyio.fail_after(WAIT):
        # The task group is entered first, so it is left last: the CLI task outlives the bridge.
        async with (
            anyio.create_task_group() as tg,
            open_bridge(identity, host, (*DEFAULT_TOOLS, holder.spec), queues=queues) as bridge,
        ):
            tg.start_soon(cli, bridge.url, bridge.endpoint.token)
            await holder.entered("running").wait()
            lock = queues.lock_for(identity.worker_id)
            assert lock is not None
            await wait_until(lambda: lock.statistics().tasks_waiting == 1)
            # Leaving the block ends the run: the bridge closes with both calls pending.
    for tag in ("running", "queued"):
        assert results[tag].is_error
        assert texts(results[tag])[0].startswith("the run ended while this call was pending or running")
    assert holder.started == ["running"]
    finished = [event.data for event in host.events if event.kind == "tool_call_finished"]
    assert len(finished) == 1 and finished[0]["cancelled"] is True


async def test_shell_job_dies_with_the_run(identity: RunIdentity, host: FakeToolHost) -> None:
    pid_file = identity.workspace / "bg.pid"
    results: list[CallToolResult] = []

    async def cli(url: str, token: str) -> None:
        async with connect(url, token) as client:
            command = f"sleep 300 & echo $! > {pid_file}; sleep 300"
            results.append(await client.call_tool("shell__run", {"command": command}))

    with anyio.fail_after(WAIT):
        async with (
            anyio.create_task_group() as tg,
            open_bridge(identity, host, DEFAULT_TOOLS, queues=WorkerQueues()) as bridge,
        ):
            tg.start_soon(cli, bridge.url, bridge.endpoint.token)
            await wait_until(lambda: pid_file.exists() and pid_file.read_text().strip() != "")
    background = int(pid_file.read_text())

    def gone() -> bool:
        try:
            return psutil.Process(background).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    await wait_until(gone)
    assert results and results[0].is_error
    assert texts(results[0])[0].startswith("the run ended")


def test_the_uvicorn_internals_the_embedded_server_overrides_are_there() -> None:
    """bridge/embedded.py replaces uvicorn.Server's main loop and shutdown and reads its state; a
    uvicorn that renamed them would make the bridge never stop (pyproject caps the version)."""
    import inspect

    import uvicorn

    from octipusd.bridge.embedded import EmbeddedConfig, EmbeddedServer

    for name in ("main_loop", "shutdown", "on_tick", "capture_signals", "serve"):
        assert callable(getattr(uvicorn.Server, name)), name
    assert list(inspect.signature(uvicorn.Server.shutdown).parameters) == ["self", "sockets"]
    server = EmbeddedServer(EmbeddedConfig(app=lambda *a: None))
    assert hasattr(server, "server_state") and hasattr(server.server_state, "connections")
    assert hasattr(server.server_state, "tasks")
