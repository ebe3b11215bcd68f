"""Per-worker serialization (seed 003): one call at a time per worker, except the reads.

Synchronization is by events and the lock's own statistics, never by timing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from bridge_support import WAIT, Holder, connect, texts, wait_until
from mcp_types import CallToolResult

from octipusd.bridge.fakes import FakeToolHost
from octipusd.bridge.queue import WorkerQueues
from octipusd.bridge.server import open_bridge
from octipusd.toolkit import RunIdentity, ToolHost, ToolResult, ToolSpec
from octipusd.tools import DEFAULT_TOOLS

pytestmark = pytest.mark.anyio


def test_registry_shares_and_drops_locks() -> None:
    queues = WorkerQueues()
    assert queues.lock_for("w") is None
    with queues.lease("w") as first, queues.lease("w") as second, queues.lease("v") as other:
        assert first is second
        assert other is not first
        assert queues.active_workers() == {"w", "v"}
    assert queues.active_workers() == frozenset()


async def test_calls_of_one_worker_run_one_at_a_time_but_reads_bypass_the_queue(
    identity: RunIdentity, host: FakeToolHost
) -> None:
    holder = Holder()
    queues = WorkerQueues()
    results: dict[str, CallToolResult] = {}
    async with open_bridge(identity, host, (*DEFAULT_TOOLS, holder.spec), queues=queues) as bridge:
        lock = queues.lock_for(identity.worker_id)
        assert lock is not None
        async with connect(bridge.url, bridge.endpoint.token) as client, anyio.create_task_group() as tg:

            async def call(tag: str) -> None:
                results[tag] = await client.call_tool("hold", {"tag": tag})

            tg.start_soon(call, "first")
            with anyio.fail_after(WAIT):
                await holder.entered("first").wait()
            tg.start_soon(call, "second")
            # The second call is parked on the worker's queue, not running.
            await wait_until(lambda: lock.statistics().tasks_waiting == 1)
            assert holder.started == ["first"]

            # Reads answer while the queue is held (same client session).
            with anyio.fail_after(WAIT):
                plan = await client.call_tool("get_work_plan", {})
                context = await client.call_tool("get_cli_run_context", {})
            assert not plan.is_error and json.loads(texts(plan)[0]) == {"plan": None}
            assert not context.is_error and json.loads(texts(context)[0])["session_id"] == identity.session_id
            assert holder.started == ["first"]
            assert lock.statistics().tasks_waiting == 1

            holder.release("first")
            with anyio.fail_after(WAIT):
                await holder.entered("second").wait()
            assert holder.started == ["first", "second"]
            holder.release("second")

    assert [json.loads(texts(results[tag])[0])["tag"] for tag in ("first", "second")] == ["first", "second"]
    assert not results["first"].is_error and not results["second"].is_error


async def test_bridges_of_one_worker_share_the_queue(
    make_identity: Callable[..., RunIdentity], host: FakeToolHost
) -> None:
    holder = Holder()
    queues = WorkerQueues()
    tools = (*DEFAULT_TOOLS, holder.spec)
    async with (
        open_bridge(make_identity(run_id="run-a"), host, tools, queues=queues) as bridge_a,
        open_bridge(make_identity(run_id="run-b"), host, tools, queues=queues) as bridge_b,
        connect(bridge_a.url, bridge_a.endpoint.token) as client_a,
        connect(bridge_b.url, bridge_b.endpoint.token) as client_b,
        anyio.create_task_group() as tg,
    ):
        lock = queues.lock_for("worker-1")
        assert lock is not None
        tg.start_soon(client_a.call_tool, "hold", {"tag": "a"})
        with anyio.fail_after(WAIT):
            await holder.entered("a").wait()
        tg.start_soon(client_b.call_tool, "hold", {"tag": "b"})
        await wait_until(lambda: lock.statistics().tasks_waiting == 1)
        assert holder.started == ["a"]
        holder.release("a")
        with anyio.fail_after(WAIT):
            await holder.entered("b").wait()
        holder.release("b")
    assert [i.run_id for i in holder.identities] == ["run-a", "run-b"]


def _rendezvous(arrived: dict[str, anyio.Event]) -> ToolSpec:
    """A tool that returns only once every worker in ``arrived`` is inside it."""

    async def handler(identity: RunIdentity, host: ToolHost, arguments: dict[str, Any]) -> ToolResult:
        arrived[identity.worker_id].set()
        for event in arrived.values():
            await event.wait()
        return "met"

    return ToolSpec(
        name="meet",
        description="Test tool: waits for the other workers.",
        input_schema={"type": "object", "properties": {}},
        handler=handler,
        timeout_seconds=WAIT,
    )


async def test_calls_of_different_workers_run_concurrently(
    make_identity: Callable[..., RunIdentity], host: FakeToolHost
) -> None:
    arrived = {"worker-a": anyio.Event(), "worker-b": anyio.Event()}
    tools = (*DEFAULT_TOOLS, _rendezvous(arrived))
    queues = WorkerQueues()
    results: list[CallToolResult] = []
    async with (
        open_bridge(make_identity("worker-a", run_id="run-a"), host, tools, queues=queues) as bridge_a,
        open_bridge(make_identity("worker-b", run_id="run-b"), host, tools, queues=queues) as bridge_b,
        connect(bridge_a.url, bridge_a.endpoint.token) as client_a,
        connect(bridge_b.url, bridge_b.endpoint.token) as client_b,
    ):
        # Serialized execution would deadlock: each call waits for the other to be inside.
        with anyio.fail_after(WAIT):
            async with anyio.create_task_group() as tg:

                async def call(client: Any) -> None:
                    results.append(await client.call_tool("meet", {}))

                tg.start_soon(call, client_a)
                tg.start_soon(call, client_b)
    assert [texts(result)[0] for result in results] == ["met", "met"]
    assert not any(result.is_error for result in results)
