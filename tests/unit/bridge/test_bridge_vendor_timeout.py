"""The vendor-side tool timeout the adapters configure is the one the real binaries apply (issue 14 item 5).

Codex cuts an MCP tool call after its own 60 s unless ``tool_timeout_sec`` is set; Claude has a
per-server ``timeout``. The adapters set both from :attr:`BridgeEndpoint.tool_timeout_seconds`
(the bridge's two-hour limit plus its grace). Here the same launch code path gets a short value:
a bridge call that outlives it is cut by the vendor with its own timeout message, and a call
shorter than a longer configured value succeeds. Offline, against scripted model servers; a few
seconds per case.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from octipus_claude_code import ClaudeCodeAdapter
from octipus_codex import CodexAdapter

from octipusd.adapter import BRIDGE_CALL_TIMEOUT_SECONDS, LaunchRequest, LaunchSpec, PermissionMode
from octipusd.adapter_launch import vendor_launch
from octipusd.bridge.fakes import FakeToolHost
from octipusd.bridge.queue import WorkerQueues
from octipusd.bridge.server import BridgeLimits, open_bridge
from octipusd.testing.anthropic_server import ScriptedAnthropicServer
from octipusd.testing.harness import claude_binary
from octipusd.testing.kit_codex import require_codex, write_codex_config
from octipusd.testing.responses_server import ScriptedResponsesServer
from octipusd.toolkit import RunIdentity, ToolHost, ToolResult, ToolSpec

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def _slow(identity: RunIdentity, host: ToolHost, arguments: dict[str, Any]) -> ToolResult:
    await anyio.sleep(float(arguments["seconds"]))
    return {"slept": arguments["seconds"]}


SLOW = ToolSpec(
    name="slow_wait",
    description="Wait the given number of seconds, then answer.",
    input_schema={"type": "object", "properties": {"seconds": {"type": "number"}}, "required": ["seconds"]},
    handler=_slow,
    read_only=True,
)
CALL = {"type": "tool_use", "name": "mcp__octipus__slow_wait"}


def _steps(seconds: float) -> list[dict[str, Any]]:
    return [
        {"content": [{**CALL, "input": {"seconds": seconds}}]},
        {"content": [{"type": "text", "text": "done"}]},
    ]


def _write_files(spec: LaunchSpec) -> None:
    for path, content in spec.files.items():
        path.write_text(content, encoding="utf-8")
        path.chmod(0o600)


async def _codex_call(
    root: Path, identity: RunIdentity, vendor_timeout: float, seconds: float
) -> dict[str, Any]:
    """Run ``codex exec`` whose model calls ``slow_wait(seconds)`` through a real bridge whose
    endpoint says ``vendor_timeout``; return the completed ``mcp_tool_call`` item."""
    server = ScriptedResponsesServer(_steps(seconds)).start()
    try:
        write_codex_config(root / "codex_home", server.base_url)
        (root / "home").mkdir(exist_ok=True)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(root / "home")}
        env["CODEX_HOME"] = str(root / "codex_home")
        async with open_bridge(identity, FakeToolHost(), [SLOW], queues=WorkerQueues()) as bridge:
            request = LaunchRequest(
                binary=str(require_codex()),
                cwd=identity.workspace,
                run_dir=root,
                prompt="call the tool",
                model="mock-model",
                bridge=replace(bridge.endpoint, tool_timeout_seconds=vendor_timeout),
                env=env,
                options={"transport": "exec"},
                permission_mode=PermissionMode.FULL,
            )
            spec = vendor_launch(CodexAdapter(), request)  # as the runtime starts it
            with anyio.fail_after(60):
                done = await anyio.run_process(
                    list(spec.argv), env=dict(spec.env), cwd=spec.cwd, stdin=subprocess.DEVNULL, check=False
                )
    finally:
        server.close()
    items = [json.loads(line) for line in done.stdout.decode().splitlines() if line.startswith("{")]
    calls = [
        e["item"] for e in items if e["type"] == "item.completed" and e["item"]["type"] == "mcp_tool_call"
    ]
    assert len(calls) == 1, done.stdout.decode()[-3000:] + done.stderr.decode()[-2000:]
    return dict(calls[0])


async def test_codex_cuts_a_bridge_call_at_the_configured_timeout(
    tmp_path: Path, identity: RunIdentity
) -> None:
    call = await _codex_call(tmp_path, identity, vendor_timeout=3, seconds=6)
    assert call["status"] == "failed"
    assert "timed out awaiting tools/call after 3s" in call["error"]["message"]


async def test_codex_waits_for_a_bridge_call_within_a_longer_timeout(
    tmp_path: Path, identity: RunIdentity
) -> None:
    call = await _codex_call(tmp_path, identity, vendor_timeout=10, seconds=4)  # longer than 3 s
    assert call["status"] == "completed" and call["error"] is None
    assert call["result"]["content"][0]["text"] == '{"slept": 4}'


async def _claude_result(
    root: Path, identity: RunIdentity, vendor_timeout: float, seconds: float
) -> dict[str, Any]:
    """Run Claude whose model calls ``slow_wait(seconds)`` through a real bridge whose endpoint says
    ``timeout``; return the ``tool_result`` block Claude sent back to the model."""
    server = ScriptedAnthropicServer(_steps(seconds)).start()
    home = root / "home"
    home.mkdir(exist_ok=True)
    adapter = ClaudeCodeAdapter()
    try:
        async with open_bridge(identity, FakeToolHost(), [SLOW], queues=WorkerQueues()) as bridge:
            request = LaunchRequest(
                binary=str(claude_binary()),
                cwd=identity.workspace,
                run_dir=root,
                prompt="call the tool",
                vendor_session_id=adapter.new_session_id(),
                bridge=replace(bridge.endpoint, tool_timeout_seconds=vendor_timeout),
                env={
                    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                    "HOME": str(home),
                    "CLAUDE_CONFIG_DIR": str(home / ".claude"),
                    "ANTHROPIC_BASE_URL": server.base_url,
                    "ANTHROPIC_API_KEY": "sk-ant-mock",
                    "CLAUDE_CODE_MAX_RETRIES": "0",
                },
                permission_mode=PermissionMode.FULL,
            )
            spec = vendor_launch(adapter, request)  # as the runtime starts it
            _write_files(spec)
            stdin = "".join(line + "\n" for line in spec.initial_input).encode()
            with anyio.fail_after(60):
                done = await anyio.run_process(
                    list(spec.argv), input=stdin, env=dict(spec.env), cwd=spec.cwd, check=False
                )
        assert len(server.message_requests) == 2, done.stdout.decode()[-3000:]
        (result,) = [
            block
            for message in server.message_requests[1].body["messages"]
            for block in (message["content"] if isinstance(message["content"], list) else [])
            if block.get("type") == "tool_result"
        ]
    finally:
        server.close()
    return dict(result)


async def test_claude_cuts_a_bridge_call_at_the_configured_timeout(
    tmp_path: Path, identity: RunIdentity
) -> None:
    result = await _claude_result(tmp_path, identity, vendor_timeout=3, seconds=6)
    assert result.get("is_error") is True
    assert 'MCP server "octipus" tool "slow_wait" timed out after 3s' in json.dumps(
        result["content"]
    ).replace('\\"', '"')


async def test_claude_waits_for_a_bridge_call_within_a_longer_timeout(
    tmp_path: Path, identity: RunIdentity
) -> None:
    result = await _claude_result(tmp_path, identity, vendor_timeout=10, seconds=4)
    assert not result.get("is_error") and "slept" in json.dumps(result["content"])


async def test_the_bridge_gives_vendors_its_two_hour_limit_plus_its_grace(identity: RunIdentity) -> None:
    async with open_bridge(identity, FakeToolHost(), [SLOW], queues=WorkerQueues()) as bridge:
        assert bridge.endpoint.tool_timeout_seconds == BRIDGE_CALL_TIMEOUT_SECONDS + 30.0 == 7230.0
    limits = BridgeLimits(request_timeout_seconds=5.0, vendor_grace_seconds=1.0)
    async with open_bridge(identity, FakeToolHost(), [SLOW], queues=WorkerQueues(), limits=limits) as bridge:
        assert bridge.endpoint.tool_timeout_seconds == 6.0
