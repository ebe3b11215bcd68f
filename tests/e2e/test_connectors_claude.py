"""MCP connectors end to end: an ``mcpServers`` entry, the real claude binary, the scripted model.

The daemon re-reads ``mcpServers`` at every new connection (seed 000: server settings apply on
the next connection), so the test writes the config file after the daemon started. The model
calls the ledger server's ``append_entry`` through the run's bridge (as
``mcp__octipus__ledger__append_entry``); the call is journaled as ``ledger.append_entry``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from octipusd.testing.ledger_mcp import count_lines
from tests.e2e.conftest import Env


def _write_config(env: Env, ledger: Path, faults: Path) -> None:
    config = env.daemon.root / "config" / "octipus" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    args = ", ".join(
        f'"{a}"'
        for a in ["-m", "octipusd.testing.ledger_mcp", "--ledger", str(ledger), "--faults", str(faults)]
    )
    config.write_text(
        "[mcpServers.ledger]\n"
        'transport = "stdio"\n'
        f'command = "{sys.executable}"\n'
        f"args = [{args}]\n"
        "callTimeoutSeconds = 2\n"
        "[mcpServers.ledger.tools.append_entry]\n"
        'riskClass = "compensatable"\n'
        'idempotencyKey = "key"\n'
        'probe = { tool = "find_entry", arguments = { key = "{idempotencyKey}" } }\n'
    )


def _call(key: str) -> dict[str, Any]:
    return {
        "content": [
            {
                "type": "tool_use",
                "name": "mcp__octipus__ledger__append_entry",
                "input": {"key": key, "text": "hi"},
            }
        ]
    }


def test_a_connector_tool_runs_through_the_bridge_and_is_journaled(
    octipus: Callable[..., Env], tmp_path: Path
) -> None:
    ledger, faults = tmp_path / "ledger.tsv", tmp_path / "faults.json"
    faults.write_text('{"append_entry": {"mode": "hang_after", "seconds": 5}}')
    script = {
        "steps": [
            _call("k1"),  # the server applies it, then hangs past callTimeoutSeconds: uncertain
            _call("k1"),  # the probe finds k1 applied: this blind retry is refused
            _call("k2"),  # a different key runs (the faults file is cleared by then)
            {"content": [{"type": "text", "text": "done"}]},
        ]
    }
    env = octipus(script)
    _write_config(env, ledger, faults)
    env.client.request("POST", "/rules", json={"level": "allow", "rule": "ledger.append_entry"})
    session = env.new_session()
    run = env.post(session, "append")
    env.wait(lambda: count_lines(ledger, "k1") == 1, what="the first append")
    faults.write_text("{}")
    final = env.wait_final(run)
    assert final["status"] == "succeeded", final
    assert count_lines(ledger, "k1") == 1 and count_lines(ledger, "k2") == 1
    actions = env.client.request("GET", "/actions", params={"session_id": session})["actions"]
    assert [(a["tool"], a["outcome"]) for a in actions] == [
        ("ledger.append_entry", "uncertain"),
        ("ledger.append_entry", "not_executed"),
        ("ledger.append_entry", "completed"),
    ], actions
    assert actions[0]["recovery_state"] == "verified" and actions[0]["idempotency_key"] == "k1"
    results = [e["data"] for e in env.events(run) if e["kind"] == "tool_result"]
    assert any(r["is_error"] and "retrying would duplicate it" in r["content"] for r in results), results
