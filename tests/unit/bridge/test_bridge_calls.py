"""The call pipeline: authorize -> execute -> record -> response (+ fresh context)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from bridge_support import connect, texts

from octipusd.bridge.fakes import FakeToolHost
from octipusd.bridge.queue import WorkerQueues
from octipusd.bridge.server import RUN_CONTEXT_HEADER, open_bridge
from octipusd.errors import InvalidRequestError, StoreError
from octipusd.toolkit import AuthorizationResult, CallWatch, RunIdentity, ToolHost, ToolResult, ToolSpec
from octipusd.tools import DEFAULT_TOOLS

pytestmark = pytest.mark.anyio

PLAN = {
    "title": "Ship the bridge",
    "steps": [
        {"id": "s1", "title": "Write the server", "status": "completed"},
        {"id": "s2", "title": "Write the tests", "status": "in_progress", "notes": "queue first"},
    ],
}


def _tool(name: str, handler: Any, **kwargs: Any) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=f"Test tool {name}.",
        input_schema={"type": "object", "properties": {}},
        handler=handler,
        **kwargs,
    )


async def test_denied_call_does_not_run(identity: RunIdentity) -> None:
    host = FakeToolHost(deny={"shell__run": "shell is not allowed in this space"})
    marker = identity.workspace / "ran.txt"
    async with (
        open_bridge(identity, host, DEFAULT_TOOLS, queues=WorkerQueues()) as bridge,
        connect(bridge.url, bridge.endpoint.token) as client,
    ):
        result = await client.call_tool("shell__run", {"command": f"touch {marker}"})
    assert result.is_error
    assert texts(result)[0] == "denied: shell is not allowed in this space"
    assert not marker.exists()
    assert host.kinds() == ["tool_call_denied"]
    assert host.events[0].data["reason"] == "shell is not allowed in this space"


async def test_failing_permission_check_denies(identity: RunIdentity) -> None:
    class BrokenHost(FakeToolHost):
        async def authorize(
            self,
            identity: RunIdentity,
            tool_id: str,
            arguments: dict[str, Any],
            watch: CallWatch | None = None,
        ) -> AuthorizationResult:
            raise RuntimeError("policy store offline")

    host = BrokenHost()
    marker = identity.workspace / "ran.txt"
    async with (
        open_bridge(identity, host, DEFAULT_TOOLS, queues=WorkerQueues()) as bridge,
        connect(bridge.url, bridge.endpoint.token) as client,
    ):
        result = await client.call_tool("shell__run", {"command": f"touch {marker}"})
    assert result.is_error
    assert texts(result)[0].startswith(
        "denied: the permission check failed (RuntimeError: policy store offline)"
    )
    assert not marker.exists()


async def test_tool_errors_are_results_and_the_bridge_keeps_serving(identity: RunIdentity) -> None:
    async def crash(identity: RunIdentity, host: ToolHost, arguments: dict[str, Any]) -> ToolResult:
        raise RuntimeError("kaboom")

    async def bad_input(identity: RunIdentity, host: ToolHost, arguments: dict[str, Any]) -> ToolResult:
        raise InvalidRequestError("path: must be inside the workspace")

    async def store_down(identity: RunIdentity, host: ToolHost, arguments: dict[str, Any]) -> ToolResult:
        raise StoreError("database is read-only")

    async def slow(identity: RunIdentity, host: ToolHost, arguments: dict[str, Any]) -> ToolResult:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    tools = (
        *DEFAULT_TOOLS,
        _tool("crash", crash),
        _tool("bad_input", bad_input),
        _tool("store_down", store_down),
        _tool("slow", slow, timeout_seconds=0.2),
    )
    host = FakeToolHost()
    async with (
        open_bridge(identity, host, tools, queues=WorkerQueues()) as bridge,
        connect(bridge.url, bridge.endpoint.token) as client,
    ):
        outcomes = {
            name: await client.call_tool(name, {}) for name in ("crash", "bad_input", "store_down", "slow")
        }
        unknown = await client.call_tool("no_such_tool", {})
        after = await client.call_tool("get_work_plan", {})
    assert all(result.is_error for result in outcomes.values())
    assert texts(outcomes["crash"])[0] == "crash failed with an internal error: RuntimeError: kaboom"
    assert (
        texts(outcomes["bad_input"])[0]
        == "invalid arguments for bad_input: path: must be inside the workspace"
    )
    assert texts(outcomes["store_down"])[0] == "store_down failed: database is read-only (store_error)"
    assert texts(outcomes["slow"])[0] == "slow did not finish within 0.2 s and was stopped"
    assert unknown.is_error and "unknown tool 'no_such_tool'" in texts(unknown)[0]
    assert not after.is_error
    finished = [event.data for event in host.events if event.kind == "tool_call_finished"]
    assert [(data["tool"], data["is_error"]) for data in finished[:4]] == [
        ("crash", True),
        ("bad_input", True),
        ("store_down", True),
        ("slow", True),
    ]


async def test_plan_round_trip_and_context_blocks(identity: RunIdentity, host: FakeToolHost) -> None:
    host.guidance[identity.session_id] = ["also update the README"]
    async with (
        open_bridge(identity, host, DEFAULT_TOOLS, queues=WorkerQueues()) as bridge,
        connect(bridge.url, bridge.endpoint.token) as client,
    ):
        update = await client.call_tool("update_work_plan", {"plan": PLAN})
        read = await client.call_tool("get_work_plan", {})
    # Mutating tool: result block + fresh context block.
    assert not update.is_error
    assert update.structured_content is None
    result_text, context_text = texts(update)
    saved = json.loads(result_text)["plan"]
    assert saved["steps"] == PLAN["steps"] and saved["title"] == PLAN["title"] and saved["id"]
    header, _, body = context_text.partition("\n")
    assert header == RUN_CONTEXT_HEADER
    context = json.loads(body)
    assert context["guidance"] == ["also update the README"]
    assert context["plan"]["steps"] == PLAN["steps"]  # refreshed after the update
    # Read-only tool: no appended context.
    assert len(texts(read)) == 1
    assert json.loads(texts(read)[0]) == {"plan": saved}
    started, finished = host.events[0], host.events[1]
    assert (started.kind, finished.kind) == ("tool_call_started", "tool_call_finished")
    assert started.data["tool"] == "update_work_plan" and started.data["arguments"] == {"plan": PLAN}
    assert started.data["call_id"] == finished.data["call_id"]
    assert finished.data["is_error"] is False and finished.data["duration_seconds"] >= 0


async def test_failed_context_refresh_keeps_a_successful_result(identity: RunIdentity) -> None:
    host = FakeToolHost(fail_context=True)
    async with (
        open_bridge(identity, host, DEFAULT_TOOLS, queues=WorkerQueues()) as bridge,
        connect(bridge.url, bridge.endpoint.token) as client,
    ):
        result = await client.call_tool("shell__run", {"command": "echo fine"})
        context = await client.call_tool("get_cli_run_context", {})
    assert not result.is_error
    output, note = texts(result)
    assert json.loads(output)["stdout"] == "fine\n"
    assert "unavailable" in note and "RuntimeError" in note and "get_cli_run_context" in note
    # The context tool itself does fail, as an error result.
    assert context.is_error and "RuntimeError" in texts(context)[0]


async def test_invalid_plan_names_the_bad_field(identity: RunIdentity, host: FakeToolHost) -> None:
    bad = {"plan": {"steps": [{"id": "a", "title": "ok", "status": "pending"}, {"id": "b", "title": "x"}]}}
    async with (
        open_bridge(identity, host, DEFAULT_TOOLS, queues=WorkerQueues()) as bridge,
        connect(bridge.url, bridge.endpoint.token) as client,
    ):
        result = await client.call_tool("update_work_plan", bad)
    assert result.is_error
    assert texts(result)[0] == "invalid arguments for update_work_plan: plan.steps[1].status: required"
    assert host.plans == {}


async def test_vault_placeholder_reaches_the_command_and_never_the_caller(identity: RunIdentity) -> None:
    token = "tok-0123456789-abcdefXYZ"
    host = FakeToolHost(secrets={"api": token})
    script = (
        'printf "%s" "$API_TOKEN" > got.txt; printf "a=%s b=" "$API_TOKEN"; printf "%s" "$API_TOKEN" | base64'
    )
    async with (
        open_bridge(identity, host, DEFAULT_TOOLS, queues=WorkerQueues()) as bridge,
        connect(bridge.url, bridge.endpoint.token) as client,
    ):
        result = await client.call_tool(
            "shell__run", {"command": script, "env": {"API_TOKEN": "{{secret:api}}"}}
        )
        misplaced = await client.call_tool("shell__run", {"command": "echo {{secret:api}} > leak.txt"})
    assert not result.is_error
    assert (identity.workspace / "got.txt").read_text() == token  # the program received the value
    payload = json.loads(texts(result)[0])
    assert payload["stdout"].startswith("a=[REDACTED:api] b=[REDACTED:api]")
    assert token not in json.dumps([texts(result), [e.data for e in host.events]])
    assert host.resolved == [("shell__run", ("api",))]
    assert misplaced.is_error
    assert "put the placeholder in env" in texts(misplaced)[0].lower()
    assert not (identity.workspace / "leak.txt").exists()
