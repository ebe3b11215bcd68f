"""``octipus-bridge`` as a real subprocess against a real bridge."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import anyio
import pytest

from octipusd.adapter import BridgeEndpoint, LaunchSpec
from octipusd.adapter_launch import with_bridge_helper
from octipusd.bridge.fakes import FakeToolHost
from octipusd.bridge.helper import ENV_TOKEN, ENV_URL
from octipusd.bridge.queue import WorkerQueues
from octipusd.bridge.server import open_bridge
from octipusd.toolkit import RunIdentity
from octipusd.tools import DEFAULT_TOOLS

pytestmark = pytest.mark.anyio

_SCRIPT = Path(sys.executable).with_name("octipus-bridge")


def _command() -> list[str]:
    """The installed console script when present, else the module."""
    if _SCRIPT.exists():
        return [str(_SCRIPT)]
    return [sys.executable, "-m", "octipusd.bridge.helper"]


def _base_env() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if key not in (ENV_URL, ENV_TOKEN)}


def _vendor_env(endpoint: BridgeEndpoint) -> dict[str, str]:
    """The environment a vendor's launch gets with this bridge (what its shell passes the helper)."""
    spec = LaunchSpec(argv=("vendor",), env=_base_env(), cwd=Path.cwd())
    return dict(with_bridge_helper(spec, endpoint).env)


async def _run(
    args: Sequence[str], env: Mapping[str, str], stdin: bytes | None = None
) -> tuple[int, str, str]:
    with anyio.fail_after(60):
        done = await anyio.run_process([*_command(), *args], input=stdin, env=dict(env), check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def test_list_and_call(identity: RunIdentity) -> None:
    host = FakeToolHost(deny={"update_work_plan": "plans are read-only here"})
    async with open_bridge(identity, host, DEFAULT_TOOLS, queues=WorkerQueues()) as bridge:
        env = _vendor_env(bridge.endpoint)

        code, out, err = await _run(["list"], env)
        assert code == 0, err
        for name in (
            "get_cli_run_context",
            "get_work_plan",
            "update_work_plan",
            "spawn_child",
            "collect_children",
            "shell__run",
        ):
            assert f"{name}\n" in out
        assert "Run a shell command" in out

        code, out, err = await _run(["list", "--json"], env)
        assert code == 0, err
        listing = {tool["name"]: tool for tool in json.loads(out)}
        assert "command" in listing["shell__run"]["inputSchema"]["properties"]
        assert "resumeKey" in listing["spawn_child"]["inputSchema"]["properties"]
        assert "detach" in listing["spawn_child"]["inputSchema"]["properties"]
        assert "childRunIds" in listing["collect_children"]["inputSchema"]["properties"]

        code, out, err = await _run(
            ["call", "shell__run", json.dumps({"command": "echo from-helper; pwd"})], env
        )
        assert code == 0, err
        result = json.loads(out.split("\n\n", 1)[0])
        assert result["stdout"] == f"from-helper\n{identity.workspace.resolve()}\n"
        assert "[octipus run context]" in out

        # Arguments on stdin; a non-zero exit of the command is still a successful call.
        code, out, err = await _run(["call", "shell__run", "-"], env, stdin=b'{"command": "exit 7"}')
        assert code == 0, err
        assert json.loads(out.split("\n\n", 1)[0])["exit_code"] == 7

        code, out, err = await _run(["call", "update_work_plan", '{"plan": {"steps": []}}'], env)
        assert code == 1
        assert out.startswith("denied: plans are read-only here")

        code, out, err = await _run(["call", "shell__run", '{"command": '], env)
        assert code == 2 and out == ""
        assert "not valid JSON" in err

        code, out, err = await _run(["call", "shell__run", '["ls"]'], env)
        assert code == 2 and "must be a JSON object" in err

        code, out, err = await _run(["frobnicate"], env)
        assert code == 2 and "invalid choice" in err

        wrong = {**env, ENV_TOKEN: "not-the-capability"}
        code, out, err = await _run(["list"], wrong)
        assert code == 3 and "rejected the capability (HTTP 401)" in err
        assert "not-the-capability" not in err
    # Two calls ran; the denied one and the bad ones never reached a tool.
    assert [a.tool_id for a in host.authorizations] == ["shell__run", "shell__run", "update_work_plan"]


async def test_missing_environment_is_a_usage_error() -> None:
    code, out, err = await _run(["list"], _base_env())
    assert code == 2 and out == ""
    assert f"{ENV_URL} and {ENV_TOKEN} not set" in err

    code, out, err = await _run(
        ["call", "get_work_plan", "{}"], {**_base_env(), ENV_URL: "http://127.0.0.1:1/mcp"}
    )
    assert code == 2 and f"{ENV_TOKEN} not set" in err


async def test_ended_run_is_unreachable(identity: RunIdentity, host: FakeToolHost) -> None:
    async with open_bridge(identity, host, DEFAULT_TOOLS, queues=WorkerQueues()) as bridge:
        env = _vendor_env(bridge.endpoint)
    code, _out, err = await _run(["call", "get_work_plan", "{}"], env)
    assert code == 3 and "cannot use the bridge" in err
