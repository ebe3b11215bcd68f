"""Ending what a stopped daemon left in flight (issue 11): session termination against the real
ledger MCP server over HTTP, stdio leftovers found by their marker, and what each establishes."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from octipusd.connectors import MCP_SESSION_HEADER, ConnectorRegistry, url_digest
from octipusd.runner.process import run_processes
from octipusd.runtime.inflight import end_left_requests
from octipusd.settings import McpServerSettings
from octipusd.store import Store
from octipusd.testing.ledger_mcp import count_lines, start_http_server, stop_server, write_fault
from octipusd.toolkit import RUN_MARKER, DispatchKind, DispatchRef
from tests.unit.journal.conftest import wait_until

pytestmark = pytest.mark.anyio


class Server:
    def __init__(self, folder: Path) -> None:
        self.ledger = folder / "ledger.tsv"
        self.faults = folder / "faults.json"
        self.release = folder / "release"
        self.received = folder / "received"
        self.cancelled = folder / "cancelled"
        self.faults.write_text("{}")
        self.proc, self.url = start_http_server(self.ledger, self.faults, folder / "port")

    def hold(self, mode: str) -> None:
        write_fault(
            self.faults,
            "append_entry",
            mode,
            30,
            received=self.received,
            release=self.release,
            cancelled=self.cancelled,
        )


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    made = Server(tmp_path)
    try:
        yield made
    finally:
        stop_server(made.proc)


def _registry(url: str, *, cancels: bool, transport: str = "http", **extra: Any) -> ConnectorRegistry:
    if transport == "http":
        cfg = McpServerSettings.model_validate(
            {"transport": "http", "url": url, "terminationCancelsCalls": cancels, **extra}
        )
    else:
        cfg = McpServerSettings.model_validate(
            {"transport": "stdio", "command": sys.executable, "terminationCancelsCalls": cancels}
        )
    return ConnectorRegistry(lambda: {"ledger": cfg})


async def _abandoned_call(server: Server) -> str:
    """Start append_entry on the server and walk away without ending the session (as a killed
    daemon does); return the session id."""
    seen: dict[str, str] = {}

    class Note(httpx2.AsyncBaseTransport):
        def __init__(self) -> None:
            self.inner = httpx2.AsyncHTTPTransport()

        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            response = await self.inner.handle_async_request(request)
            if MCP_SESSION_HEADER in response.headers:
                seen["id"] = response.headers[MCP_SESSION_HEADER]
            return response

    async with httpx2.AsyncClient(transport=Note()) as client:
        with anyio.move_on_after(20):
            async with (
                streamable_http_client(server.url, http_client=client, terminate_on_close=False) as (r, w),
                ClientSession(r, w) as session,
            ):
                await session.initialize()
                async with anyio.create_task_group() as tg:
                    tg.start_soon(session.call_tool, "append_entry", {"key": "k", "text": "t"})
                    await wait_until(server.received.exists, within=10)
                    tg.cancel_scope.cancel()
    return seen["id"]


def _orphan(store: Store, ref: DispatchRef) -> str:
    session = store.create_session(workspace="/w", adapter="claude-code")
    action = store.start_action(
        user="alice",
        session_id=session.id,
        run_id=None,
        agent="w",
        origin="manual",
        tool="ledger.append_entry",
        args_hash="0" * 64,
        risk_class="compensatable",
        owner="dead-daemon",
        deadline_seconds=3600.0,
        in_flight_seconds=300.0,
        dispatch=ref.to_json(),
    )
    assert store.finish_action(action.id, outcome="uncertain", detail="orphaned")
    return action.id


def _kinds(store: Store, action_id: str) -> list[tuple[str, str]]:
    return [(r.kind, str(r.data.get("evidence", ""))) for r in store.list_receipts(action_id)]


async def test_a_terminated_session_of_a_declaring_server_ends_its_held_call(
    store: Store, server: Server
) -> None:
    server.hold("hang_before")
    session_id = await _abandoned_call(server)
    ref = DispatchRef(
        DispatchKind.MCP_HTTP, "ledger", session_id=session_id, url_sha256=url_digest(server.url)
    )
    first, second = _orphan(store, ref), _orphan(store, ref)
    assert {a.id for a in store.open_dispatches(store.now())} == {first, second}
    await end_left_requests(store, _registry(server.url, cancels=True), store.open_dispatches(store.now()))
    for action_id in (first, second):  # one DELETE served both
        action = store.get_action(action_id)
        assert action.dispatch_ended_at is not None and not action.may_still_land(store.now())
        (ended,) = [e for k, e in _kinds(store, action_id) if k == "dispatch_ended"]
        assert ended == f"MCP server 'ledger' ended session {session_id} (HTTP 200)"
    assert store.open_dispatches(store.now()) == []
    await wait_until(server.cancelled.exists, within=10)  # the held call was cancelled with its session
    server.release.touch()
    assert count_lines(server.ledger) == 0


async def test_a_server_that_does_not_declare_it_keeps_the_action_in_flight(
    store: Store, server: Server
) -> None:
    server.hold("hold_before")  # deaf to the end of its session
    session_id = await _abandoned_call(server)
    ref = DispatchRef(
        DispatchKind.MCP_HTTP, "ledger", session_id=session_id, url_sha256=url_digest(server.url)
    )
    action_id = _orphan(store, ref)
    await end_left_requests(store, _registry(server.url, cancels=False), store.open_dispatches(store.now()))
    action = store.get_action(action_id)
    assert action.dispatch_ended_at is None and action.may_still_land(store.now())
    (evidence,) = [e for k, e in _kinds(store, action_id) if k == "dispatch"]
    assert "ended session" in evidence and "does not declare terminationCancelsCalls" in evidence
    server.release.touch()
    await wait_until(lambda: count_lines(server.ledger) == 1, within=10)  # it did land: rightly in flight


@pytest.mark.parametrize("case", ["other_url", "down", "unconfigured", "no_session"])
async def test_nothing_is_counted_as_ended_without_a_confirmed_end(
    store: Store, server: Server, case: str
) -> None:
    ref = DispatchRef(
        DispatchKind.MCP_HTTP, "ledger", session_id=uuid.uuid4().hex, url_sha256=url_digest(server.url)
    )
    registry = _registry(server.url, cancels=True)
    if case == "other_url":
        registry = _registry(server.url + "?moved=1", cancels=True)
    elif case == "down":
        stop_server(server.proc)
    elif case == "unconfigured":
        registry = ConnectorRegistry(dict)
    else:
        ref = DispatchRef(DispatchKind.MCP_HTTP, "ledger", url_sha256=url_digest(server.url))
    action_id = _orphan(store, ref)
    await end_left_requests(store, registry, store.open_dispatches(store.now()))
    assert store.get_action(action_id).dispatch_ended_at is None
    (evidence,) = [e for k, e in _kinds(store, action_id) if k == "dispatch"]
    expected = {
        "other_url": "configured with another URL now",
        "down": "failed",
        "unconfigured": "no longer configured",
        "no_session": "gave no session id",
    }[case]
    assert expected in evidence, evidence


@pytest.mark.parametrize("cancels", [True, False])
async def test_a_stdio_servers_leftovers_are_killed_by_their_marker(store: Store, cancels: bool) -> None:
    marker = f"connector-{uuid.uuid4().hex}"
    leftover = await anyio.open_process(
        [sys.executable, "-c", "import sys; sys.stdin.read()"],  # lives until killed
        env={RUN_MARKER: marker, "PATH": "/usr/bin:/bin"},
    )
    try:
        await wait_until(lambda: bool(run_processes(marker)), within=10)
        action_id = _orphan(store, DispatchRef(DispatchKind.MCP_STDIO, "ledger", marker=marker))
        await end_left_requests(
            store, _registry("", cancels=cancels, transport="stdio"), store.open_dispatches(store.now())
        )
        with anyio.fail_after(10):
            assert await leftover.wait() < 0  # killed
        action = store.get_action(action_id)
        assert (action.dispatch_ended_at is not None) is cancels
        kind = "dispatch_ended" if cancels else "dispatch"
        (evidence,) = [e for k, e in _kinds(store, action_id) if k == kind]
        assert "killed 1 leftover process(es)" in evidence
    finally:
        if leftover.returncode is None:
            leftover.kill()
            await leftover.wait()


def test_a_stdio_record_without_its_marker_is_not_read_and_an_empty_marker_matches_nothing() -> None:
    assert DispatchRef.from_json({"kind": "mcp_stdio", "server": "ledger"}) is None
    assert DispatchRef.from_json({"kind": "mcp_stdio", "server": "ledger", "marker": ""}) is None
    assert DispatchRef.from_json({"kind": "carrier-pigeon", "server": "ledger"}) is None
    assert run_processes("") == []
