"""Calls run with the run's identity, whatever the arguments say (seed 003)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from bridge_support import connect, texts

from octipusd.bridge.fakes import FakeToolHost
from octipusd.bridge.queue import WorkerQueues
from octipusd.bridge.server import open_bridge
from octipusd.toolkit import (
    RESERVED_IDENTITY_ARGUMENTS,
    RunIdentity,
    ToolHost,
    ToolResult,
    ToolSpec,
    strip_identity_arguments,
)
from octipusd.tools import DEFAULT_TOOLS

pytestmark = pytest.mark.anyio

OVERRIDES: dict[str, Any] = {
    "session_id": "someone-elses-session",
    "sessionId": "someone-elses-session",
    "run_id": "other-run",
    "user": "mallory",
    "worker_id": "other-worker",
    "identity": {"user": "mallory", "session_id": "x"},
}


def test_strip_identity_arguments_drops_only_reserved_keys() -> None:
    arguments = {"command": "ls", **OVERRIDES, "nested": {"session_id": "kept"}}
    stripped = strip_identity_arguments(arguments)
    assert stripped == {"command": "ls", "nested": {"session_id": "kept"}}
    assert arguments["user"] == "mallory"  # the input is not modified
    assert strip_identity_arguments(None) == {}
    assert OVERRIDES.keys() <= RESERVED_IDENTITY_ARGUMENTS


def _probe() -> tuple[ToolSpec, list[tuple[RunIdentity, dict[str, Any]]]]:
    seen: list[tuple[RunIdentity, dict[str, Any]]] = []

    async def handler(identity: RunIdentity, host: ToolHost, arguments: dict[str, Any]) -> ToolResult:
        seen.append((identity, arguments))
        return {"user": identity.user, "session_id": identity.session_id, "arguments": arguments}

    spec = ToolSpec(
        name="probe",
        description="Test tool: reports the identity it runs with.",
        input_schema={"type": "object", "properties": {"x": {"type": "integer"}}},
        handler=handler,
    )
    return spec, seen


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_call_runs_with_bridge_identity_despite_override_arguments(
    identity: RunIdentity, host: FakeToolHost, mode: str
) -> None:
    probe, seen = _probe()
    async with (
        open_bridge(identity, host, (*DEFAULT_TOOLS, probe), queues=WorkerQueues()) as bridge,
        connect(bridge.url, bridge.endpoint.token, mode=mode) as client,
    ):
        result = await client.call_tool("probe", {"x": 1, **OVERRIDES})
        context = await client.call_tool("get_cli_run_context", dict(OVERRIDES))

    assert not result.is_error, texts(result)
    assert seen == [(identity, {"x": 1})]
    answer = json.loads(texts(result)[0])
    assert answer == {"user": "alice", "session_id": identity.session_id, "arguments": {"x": 1}}
    # The host saw the run's identity and the stripped arguments, for both calls.
    assert [(a.identity, a.tool_id, a.arguments) for a in host.authorizations] == [
        (identity, "probe", {"x": 1}),
        (identity, "get_cli_run_context", {}),
    ]
    assert {event.identity for event in host.events} == {identity}
    # A default tool answers for the run's session, not the one in the arguments.
    assert not context.is_error, texts(context)
    assert json.loads(texts(context)[0])["session_id"] == identity.session_id


async def test_tool_schemas_do_not_offer_identity_fields(identity: RunIdentity, host: FakeToolHost) -> None:
    async with (
        open_bridge(identity, host, DEFAULT_TOOLS, queues=WorkerQueues()) as bridge,
        connect(bridge.url, bridge.endpoint.token) as client,
    ):
        listing = await client.list_tools()
    assert [tool.name for tool in listing.tools] == [spec.name for spec in DEFAULT_TOOLS]
    for tool in listing.tools:
        properties = set(tool.input_schema.get("properties", {}))
        assert not properties & RESERVED_IDENTITY_ARGUMENTS, tool.name
