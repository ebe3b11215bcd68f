"""The daemon's private files stay out of the agent's reach: octipusd, the real claude binary, the
scripted model (issue 17's review finding).

The vault key sits in the daemon's data folder. The scripted model asks Claude to ``Read`` it (a
native read outside the workspace, which Claude relays to Octipus), then to ``cat`` it through
Octipus's ``shell__run``. Both are refused by the permission gate before any rule, with the
explanation, although the operator added rules allowing both (``cli-native:Read(*)``, ``shell__run``)
and the session is attended (no approval is even asked). The key's bytes never reach the model.

Run inside the loopback-only namespace::

    scripts/netns .venv/bin/python -m pytest -q tests/e2e/test_protected_paths.py
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.e2e.conftest import Env

CTL = str(Path(sys.executable).parent / "octipusctl")
PRIVATE = "the Octipus daemon's private data"


def test_the_agent_cannot_read_the_vault_key_even_when_rules_allow_it(
    octipus: Callable[..., Env], tmp_path: Path
) -> None:
    # the first daemon of the fixture lives in tmp_path/d0 (HOME, XDG folders, workspace)
    key = tmp_path / "d0" / "data" / "octipus" / "vault.key"
    steps: list[dict[str, Any]] = [
        {"content": [{"type": "tool_use", "name": "Read", "input": {"file_path": str(key)}}]},
        {
            "content": [
                {"type": "tool_use", "name": "mcp__octipus__shell__run", "input": {"command": f"cat {key}"}}
            ]
        },
        {"content": [{"type": "text", "text": "could not read it"}]},
    ]
    env = octipus({"steps": steps})
    added = subprocess.run(
        [CTL, "vault", "add", "api_token"],
        env=env.daemon.env,
        input="a-value-0123456789\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert added.returncode == 0, added.stderr
    secret_key = key.read_text().strip()
    assert len(secret_key) == 44  # the Fernet key exists: a read that ran would return it
    for rule in ("cli-native:Read(*)", "shell__run"):
        env.client.request("POST", "/rules", json={"level": "allow", "rule": rule})

    session = env.new_session()
    run = env.post(session, "read the vault key")
    final = env.wait_final(run)
    assert final["status"] == "succeeded", (final, env.daemon.log()[-3000:])

    events = env.events(run)
    names = {e["data"]["tool_use_id"]: e["data"]["name"] for e in events if e["kind"] == "tool_use"}
    results = {names[e["data"]["tool_use_id"]]: e["data"] for e in events if e["kind"] == "tool_result"}
    assert set(results) == {"Read", "mcp__octipus__shell__run"}, results
    for name, result in results.items():
        assert result["is_error"], (name, result)
        assert PRIVATE in result["content"] and str(key.parent) in result["content"], (name, result)
        assert "no rule, grant or approval allows it" in result["content"]
    decisions = [e["data"] for e in events if e["kind"] == "policy_decision"]
    assert [(d["tool_id"], d["level"]) for d in decisions] == [
        ("cli-native:Read", "deny"),
        ("shell__run", "deny"),
    ], decisions
    assert all(PRIVATE in d["explanation"] for d in decisions)
    assert env.client.request("GET", "/approvals", params={"status": "all", "run_id": run}) == []
    # the shell call was refused before it was journalled as run
    actions = env.client.request("GET", "/actions", params={"session_id": session})["actions"]
    assert all(a["outcome"] != "completed" for a in actions), actions
    # the key never reached the model
    assert secret_key not in json.dumps([r.body for r in env.model.requests])
