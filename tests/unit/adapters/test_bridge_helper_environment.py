"""Every registered adapter gives its vendor the bridge helper's environment (issue 26 item 3).

Seed 003: "If MCP is unavailable, use the run's provided bridge helper to call shell__run with the
same JSON arguments." The runtime starts :func:`octipusd.adapter_launch.vendor_launch`, which completes
each adapter's launch with the helper's variables under one set of names and its folder on
``PATH``; the capability stays off argv. The real binaries' own shells run the helper in the
conformance scenario ``bridge_helper`` (``octipusd.testing.conformance``).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from octipusd.adapter import Adapter, BridgeEndpoint, LaunchRequest, LaunchSpec, load_adapters
from octipusd.adapter_launch import (
    BRIDGE_HELPER_ENV,
    BRIDGE_TOKEN_ENV,
    BRIDGE_URL_ENV,
    vendor_launch,
    with_bridge_helper,
)
from octipusd.bridge import helper
from octipusd.errors import AdapterError

TOKEN = "tok_" + "H" * 43
BRIDGE = BridgeEndpoint(url="http://127.0.0.1:40777/mcp", token=TOKEN)
HELPER = "/opt/octipus/venv/bin/octipus-bridge"
#: A parent run's or a row's values of the helper's variables, which must not reach this run.
STALE = {BRIDGE_URL_ENV: "http://127.0.0.1:1/stale", BRIDGE_TOKEN_ENV: "stale-capability"}
#: Options a launch of these adapters needs (GLM/Kimi: their endpoint and key variable).
OPTIONS: dict[str, dict[str, Any]] = {
    "claude-glm": {"baseUrl": "http://127.0.0.1:9/api", "authTokenEnv": "VENDOR_KEY"},
    "claude-kimi": {"baseUrl": "http://127.0.0.1:9/api", "authTokenEnv": "VENDOR_KEY"},
}


def _launches() -> list[tuple[str, Adapter, dict[str, Any]]]:
    """Every registered adapter with each of its transports (its default when it has none)."""
    cases = []
    for name, adapter in sorted(load_adapters().items()):
        for transport in adapter.transports or (None,):
            options = dict(OPTIONS.get(name, {}))
            if transport is not None:
                options["transport"] = transport
            cases.append((f"{name}:{transport or 'default'}", adapter, options))
    return cases


LAUNCHES = _launches()


def _request(tmp_path: Path, adapter: Adapter, options: dict[str, Any], **fields: Any) -> LaunchRequest:
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700, exist_ok=True)
    request = LaunchRequest(
        binary="/opt/vendor/bin/vendor-cli",
        cwd=tmp_path / "ws",
        run_dir=run_dir,
        prompt="the task",
        vendor_session_id=adapter.new_session_id(),
        bridge=BRIDGE,
        env={"PATH": "/usr/local/bin:/usr/bin", "HOME": "/home/u", "VENDOR_KEY": "sk-vendor", **STALE},
        system_prompt="instructions",
        options=options,
    )
    return replace(request, **fields)


def test_every_vendor_is_covered() -> None:
    assert {case.split(":")[0] for case, _, _ in LAUNCHES} >= {"claude-code", "codex", "vibe", "antigravity"}


@pytest.mark.parametrize(("case", "adapter", "options"), LAUNCHES, ids=[c for c, _, _ in LAUNCHES])
def test_every_launch_carries_the_helpers_environment(
    tmp_path: Path, case: str, adapter: Adapter, options: dict[str, Any]
) -> None:
    spec = vendor_launch(adapter, _request(tmp_path, adapter, options), helper=HELPER)
    assert (spec.env[BRIDGE_URL_ENV], spec.env[BRIDGE_TOKEN_ENV]) == (BRIDGE.url, TOKEN)
    # appended: the daemon's venv python and pip never shadow the user's in the agent's shell
    assert spec.env["PATH"].split(":") == ["/usr/local/bin", "/usr/bin", "/opt/octipus/venv/bin"]
    assert TOKEN in spec.secrets
    assert not [a for a in spec.argv if TOKEN in a]


@pytest.mark.parametrize(("case", "adapter", "options"), LAUNCHES, ids=[c for c, _, _ in LAUNCHES])
def test_without_a_bridge_no_helper_variable_passes(
    tmp_path: Path, case: str, adapter: Adapter, options: dict[str, Any]
) -> None:
    spec = vendor_launch(adapter, _request(tmp_path, adapter, options, bridge=None), helper=HELPER)
    assert not set(BRIDGE_HELPER_ENV) & set(spec.env)
    assert spec.env["PATH"] == "/usr/local/bin:/usr/bin"
    assert TOKEN not in spec.secrets


def test_the_helper_reads_the_names_the_launch_sets() -> None:
    assert (helper.ENV_URL, helper.ENV_TOKEN) == (BRIDGE_URL_ENV, BRIDGE_TOKEN_ENV) == BRIDGE_HELPER_ENV


def test_helper_folder_already_on_path_is_not_repeated() -> None:
    spec = LaunchSpec(argv=("cli",), env={"PATH": "/opt/octipus/venv/bin:/usr/bin"}, cwd=Path("/"))
    assert with_bridge_helper(spec, BRIDGE, HELPER).env["PATH"] == "/opt/octipus/venv/bin:/usr/bin"


def test_a_launch_with_the_capability_on_argv_is_refused() -> None:
    """A new adapter that put the capability on its command line (readable by every local user in
    ``/proc/PID/cmdline``) is refused before anything starts; the message does not quote it."""
    spec = LaunchSpec(argv=("cli", f"--header=Authorization: Bearer {TOKEN}"), env={}, cwd=Path("/"))
    with pytest.raises(AdapterError, match="command line") as caught:
        with_bridge_helper(spec, BRIDGE, HELPER)
    assert TOKEN not in str(caught.value)
    assert with_bridge_helper(replace(spec, argv=("cli",)), BRIDGE, HELPER).secrets == (TOKEN,)
