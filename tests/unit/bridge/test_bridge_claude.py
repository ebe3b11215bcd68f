"""The real Claude Code binary connects to a bridge (and fails with a wrong capability).

Offline: the model endpoint is 127.0.0.1:9 (nothing listens), so after the MCP handshake
(which Claude does before its first model call, observed.md §1.5) the model call fails fast
with ``CLAUDE_CODE_MAX_RETRIES=0``. Only the ``system/init`` line matters here.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from octipusd.bridge.fakes import FakeToolHost
from octipusd.bridge.queue import WorkerQueues
from octipusd.bridge.server import open_bridge
from octipusd.toolkit import RunIdentity
from octipusd.tools import DEFAULT_TOOLS

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

_REPO = Path(__file__).resolve().parents[3]
CLAUDE = Path(os.environ.get("OCTIPUS_CLAUDE_BINARY") or _REPO / ".vendor/npm/node_modules/.bin/claude")


async def _init_line(config: Path, home: Path, cwd: Path) -> dict[str, Any]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
        "ANTHROPIC_API_KEY": "sk-ant-mock",
        "CLAUDE_CODE_MAX_RETRIES": "0",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    argv = [str(CLAUDE), "-p", "hi", "--output-format", "stream-json", "--verbose"]
    argv += ["--mcp-config", str(config), "--strict-mcp-config"]
    with anyio.fail_after(90):
        done = await anyio.run_process(argv, env=env, cwd=cwd, check=False)
    for line in done.stdout.decode().splitlines():
        if not line.startswith("{"):
            continue
        event = json.loads(line)
        if event.get("type") == "system" and event.get("subtype") == "init":
            return dict(event)
    raise AssertionError(f"no system/init line; rc={done.returncode}\n{done.stdout!r}\n{done.stderr!r}")


async def test_real_claude_connects_and_lists_octipus_tools(identity: RunIdentity, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    async with open_bridge(identity, FakeToolHost(), DEFAULT_TOOLS, queues=WorkerQueues()) as bridge:
        inits: dict[str, dict[str, Any]] = {}
        for label, token in (("right", bridge.endpoint.token), ("wrong", "not-the-capability")):
            config = tmp_path / f"mcp-{label}.json"
            server = {"type": "http", "url": bridge.url, "headers": {"Authorization": f"Bearer {token}"}}
            config.write_text(json.dumps({"mcpServers": {bridge.endpoint.server_name: server}}))
            inits[label] = await _init_line(config, home, identity.workspace)

    right = inits["right"]
    assert right["mcp_servers"] == [{"name": "octipus", "status": "connected"}]
    for tool in ("get_cli_run_context", "get_work_plan", "update_work_plan", "shell__run"):
        assert f"mcp__octipus__{tool}" in right["tools"]

    wrong = inits["wrong"]
    assert wrong["mcp_servers"] == [{"name": "octipus", "status": "failed"}]
    assert not [tool for tool in wrong["tools"] if tool.startswith("mcp__octipus__")]
