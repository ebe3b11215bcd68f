"""A tool caller that disconnects (seed 003 "Approval waits in managed CLI runs"): a queued call is
discarded before it runs; a call being authorized (an approval wait) has its authorization
cancelled and never runs. The caller is a raw HTTP client that closes its connection mid-call.

The host learns why the bridge stopped an authorization (its caller left, a deadline, the run's
end), so a run failed for an abandoned approval names what really happened; the bridge's backstop
on the permission check holds while an approval waits for a person."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
import pytest
from bridge_support import WAIT, Holder, connect, texts, wait_until
from mcp_types import CallToolResult

from octipusd.bridge.fakes import FakeToolHost
from octipusd.bridge.queue import WorkerQueues
from octipusd.bridge.server import BridgeLimits, open_bridge
from octipusd.toolkit import AuthorizationResult, CallStop, CallWatch, RunIdentity, StopCause

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


@dataclass
class ApprovingHost(FakeToolHost):
    """A host whose permission check asks a person ``answers`` times, each answered after that many
    seconds (``inf``: never), or first hangs without asking (``hang``); it notes why the bridge
    stopped it (:meth:`CallWatch.stopped`), as the run's host does to fail the run."""

    answers: tuple[float, ...] = (math.inf,)
    hang: bool = False
    asked: anyio.Event = field(default_factory=anyio.Event)
    stops: list[CallStop | None] = field(default_factory=list)

    async def authorize(
        self, identity: RunIdentity, tool_id: str, arguments: dict[str, Any], watch: CallWatch | None = None
    ) -> AuthorizationResult:
        assert watch is not None
        self.asked.set()
        try:
            if self.hang:
                await anyio.sleep_forever()
            for seconds in self.answers:
                watch.waiting(+1)
                try:
                    await (anyio.sleep_forever() if math.isinf(seconds) else anyio.sleep(seconds))
                finally:
                    watch.waiting(-1)
        except anyio.get_cancelled_exc_class():
            self.stops.append(watch.stopped())
            raise
        return AuthorizationResult(True, f"{len(self.answers)} approval(s) answered")


async def _call_once(
    identity: RunIdentity, host: ApprovingHost, holder: Holder, limits: BridgeLimits
) -> CallToolResult:
    """Call ``hold`` once on a bridge with ``limits`` and return its answer."""
    async with (
        open_bridge(identity, host, (holder.spec,), queues=WorkerQueues(), limits=limits) as bridge,
        connect(bridge.url, bridge.endpoint.token) as client,
    ):
        return await client.call_tool("hold", {"tag": "x"})


async def test_a_caller_that_disconnects_during_authorization_cancels_it(identity: RunIdentity) -> None:
    holder = Holder()
    host = ApprovingHost()
    async with open_bridge(identity, host, (holder.spec,), queues=WorkerQueues()) as bridge:
        leave = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(_call_then_leave, bridge.url, bridge.endpoint.token, "hold", {"tag": "x"}, leave)
            with anyio.fail_after(WAIT):
                await host.asked.wait()
            leave.set()
            await wait_until(lambda: bool(host.stops))
        await wait_until(lambda: "tool_call_discarded" in host.kinds())
    assert holder.started == []
    [stop] = host.stops
    assert stop is not None and stop.cause is StopCause.CALLER_LEFT and "disconnected" in stop.reason


async def test_a_deadline_that_cuts_an_approval_is_named_as_the_deadline_not_a_disconnect(
    identity: RunIdentity,
) -> None:
    holder = Holder()
    host = ApprovingHost()
    result = await _call_once(identity, host, holder, BridgeLimits(request_timeout_seconds=0.5))
    assert result.is_error
    assert "did not complete within the bridge's wall clock of 0.5 s" in texts(result)[0]
    [stop] = host.stops
    assert stop is not None and stop.cause is StopCause.DEADLINE, stop
    assert "wall clock of 0.5 s" in stop.reason and "disconnect" not in stop.reason
    assert holder.started == [] and "tool_call_discarded" not in host.kinds()


async def test_the_authorization_backstop_holds_while_approvals_wait(identity: RunIdentity) -> None:
    """A permission approval then a recovery review, each longer than the backstop: the call runs."""
    holder = Holder()
    host = ApprovingHost(answers=(0.6, 0.6))
    holder.release("x")
    result = await _call_once(identity, host, holder, BridgeLimits(authorize_timeout_seconds=0.3))
    assert not result.is_error, texts(result)
    assert holder.started == ["x"] and host.stops == []


async def test_the_authorization_backstop_denies_a_check_that_hangs_without_asking(
    identity: RunIdentity,
) -> None:
    holder = Holder()
    host = ApprovingHost(hang=True)
    result = await _call_once(identity, host, holder, BridgeLimits(authorize_timeout_seconds=0.3))
    assert result.is_error
    assert texts(result)[0].startswith("denied: no permission decision within 0.3 s"), texts(result)
    [stop] = host.stops
    assert stop is not None and stop.cause is StopCause.DEADLINE and "0.3 s" in stop.reason
    assert holder.started == []


async def test_an_approval_cut_by_the_runs_end_is_named_so(identity: RunIdentity) -> None:
    holder = Holder()
    host = ApprovingHost()
    results: list[Any] = []

    async def cli(url: str, token: str) -> None:
        async with connect(url, token) as client:
            results.append(await client.call_tool("hold", {"tag": "x"}))

    with anyio.fail_after(WAIT):
        async with (
            anyio.create_task_group() as tg,
            open_bridge(identity, host, (holder.spec,), queues=WorkerQueues()) as bridge,
        ):
            tg.start_soon(cli, bridge.url, bridge.endpoint.token)
            await host.asked.wait()
            # leaving the block ends the run: the bridge closes with the approval pending
    [stop] = host.stops
    assert stop is not None and stop.cause is StopCause.RUN_ENDING, stop
    [result] = results
    assert result.is_error and texts(result)[0].startswith("the run ended while this call was pending")
