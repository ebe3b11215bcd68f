"""A tool caller that disconnects (seed 003 "Approval waits in managed CLI runs"): a queued call is
discarded before it runs; a call being authorized (an approval wait) has its authorization
cancelled and never runs. The caller is a raw HTTP client that closes its connection mid-call."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest
from bridge_support import WAIT, Holder, connect, wait_until

from octipusd.bridge.fakes import FakeToolHost
from octipusd.bridge.queue import WorkerQueues
from octipusd.bridge.server import open_bridge
from octipusd.toolkit import AuthorizationResult, RunIdentity

pytestmark = pytest.mark.anyio

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def _session(http: httpx.AsyncClient, url: str) -> dict[str, str]:
    """The legacy initialize handshake (as Claude Code makes it); returns the session's headers."""
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    answer = await http.post(url, json=init, headers=HEADERS)
    assert answer.status_code == 200, answer.text
    headers = {
        **HEADERS,
        "mcp-session-id": answer.headers["mcp-session-id"],
        "mcp-protocol-version": "2025-06-18",
    }
    done = await http.post(
        url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers
    )
    assert done.status_code == 202, done.text
    return headers


async def _call_then_leave(
    url: str, token: str, tool: str, arguments: dict[str, Any], leave: anyio.Event
) -> None:
    """POST one tools/call and close the connection once ``leave`` is set, without reading an answer."""
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=WAIT) as http:
        headers = await _session(http, url)
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        }
        async with http.stream("POST", url, content=json.dumps(call), headers=headers):
            await leave.wait()
        # leaving the block closes the response: the client went away mid-call


async def test_a_queued_call_whose_caller_disconnected_is_discarded(
    identity: RunIdentity, host: FakeToolHost
) -> None:
    holder = Holder()
    queues = WorkerQueues()
    async with open_bridge(identity, host, (holder.spec,), queues=queues) as bridge:
        lock = queues.lock_for(identity.worker_id)
        assert lock is not None
        async with connect(bridge.url, bridge.endpoint.token) as client, anyio.create_task_group() as tg:
            first: list[Any] = []

            async def hold() -> None:
                first.append(await client.call_tool("hold", {"tag": "first"}))

            tg.start_soon(hold)
            with anyio.fail_after(WAIT):
                await holder.entered("first").wait()
            leave = anyio.Event()
            tg.start_soon(
                _call_then_leave, bridge.url, bridge.endpoint.token, "hold", {"tag": "second"}, leave
            )
            await wait_until(lambda: lock.statistics().tasks_waiting == 1)
            leave.set()
            await wait_until(lambda: "tool_call_discarded" in host.kinds())
            holder.release("first")
            await wait_until(lambda: bool(first))
            # the lock is free again and the discarded call never ran
            await wait_until(lambda: not lock.locked())
    assert holder.started == ["first"]
    [discarded] = [e for e in host.events if e.kind == "tool_call_discarded"]
    assert discarded.data["tool"] == "hold" and "disconnected" in discarded.data["reason"]


async def test_a_caller_that_disconnects_during_authorization_cancels_it(identity: RunIdentity) -> None:
    holder = Holder()
    asked, cancelled = anyio.Event(), anyio.Event()

    class WaitingHost(FakeToolHost):
        async def authorize(
            self, identity: RunIdentity, tool_id: str, arguments: dict[str, Any]
        ) -> AuthorizationResult:
            asked.set()
            try:
                await anyio.sleep_forever()  # a person's approval that never comes
            finally:
                cancelled.set()
            raise AssertionError("unreachable")

    host = WaitingHost()
    async with open_bridge(identity, host, (holder.spec,), queues=WorkerQueues()) as bridge:
        leave = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(_call_then_leave, bridge.url, bridge.endpoint.token, "hold", {"tag": "x"}, leave)
            with anyio.fail_after(WAIT):
                await asked.wait()
            leave.set()
            with anyio.fail_after(WAIT):
                await cancelled.wait()
        await wait_until(lambda: "tool_call_discarded" in host.kinds())
    assert holder.started == []
