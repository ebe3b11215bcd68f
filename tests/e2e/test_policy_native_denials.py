"""Octipus's native DENY rules hold for the calls Claude approves itself: octipusd, the real claude
binary (2.1.197), the scripted model.

In Octipus's default ``workspace`` mode Claude runs with ``--permission-mode acceptEdits``: it runs
``rm``, ``Write`` and ``Read`` in the workspace without relaying them to Octipus (the control run
below shows it), so a DENY that only the relay applied would not hold for them. Seed 003
"Permissions and limits": "a denial under either identity wins". The runtime hands the denials to
Claude's own deny list (``--disallowedTools``, adapters/octipus_claude_code/denials.py), which Claude
applies before any of its own approvals.

Run inside the loopback-only namespace::

    scripts/netns .venv/bin/python -m pytest -q tests/e2e/test_policy_native_denials.py
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.e2e.conftest import Env

RM = {"command": "rm victim.txt", "description": "remove the victim"}


def _workspace(tmp_path: Path, name: str) -> Path:
    ws = tmp_path / name
    ws.mkdir()
    (ws / "victim.txt").write_text("victim\n")
    (ws / "secret.txt").write_text("TOKEN=s3cr3t-value\n")
    return ws


def _script(ws: Path) -> dict[str, Any]:
    """rm a workspace file, Write a new one, Read the secret, then end the turn."""
    write = {"file_path": str(ws / "new.txt"), "content": "written\n"}
    return {
        "steps": [
            {"content": [{"type": "tool_use", "name": "Bash", "input": RM}]},
            {"content": [{"type": "tool_use", "name": "Write", "input": write}]},
            {
                "content": [
                    {"type": "tool_use", "name": "Read", "input": {"file_path": str(ws / "secret.txt")}}
                ]
            },
            {"content": [{"type": "text", "text": "done"}]},
        ]
    }


def _kinds(env: Env, run_id: str, kind: str) -> list[dict[str, Any]]:
    return [e["data"] for e in env.events(run_id) if e["kind"] == kind]


def _results(env: Env, run_id: str) -> dict[str, dict[str, Any]]:
    """Tool name -> its tool_result event data (each tool is used once by the script)."""
    events = env.events(run_id)
    names = {e["data"]["tool_use_id"]: e["data"]["name"] for e in events if e["kind"] == "tool_use"}
    return {names[e["data"]["tool_use_id"]]: e["data"] for e in events if e["kind"] == "tool_result"}


def _turn(env: Env, ws: Path) -> str:
    session = str(env.client.request("POST", "/sessions", json={"workspace": str(ws)})["id"])
    run = env.post(session, "remove the victim, write a file, read the secret")
    final = env.wait_final(run)
    assert final["status"] == "succeeded", final
    return run


def test_control_claude_runs_rm_write_and_read_without_asking(
    octipus: Callable[..., Env], tmp_path: Path
) -> None:
    """Without Octipus rules, acceptEdits runs all three unasked: this is what the denials must stop."""
    ws = _workspace(tmp_path, "control")
    env = octipus(_script(ws))
    run = _turn(env, ws)
    assert not (ws / "victim.txt").exists()
    assert (ws / "new.txt").read_text() == "written\n"
    results = _results(env, run)
    assert not any(r["is_error"] for r in results.values()), results
    assert "s3cr3t-value" in results["Read"]["content"]
    # nothing was relayed: no permission request reached Octipus, no approval was asked
    assert _kinds(env, run, "permission_decision") == []
    assert env.client.request("GET", "/approvals", params={"status": "all", "run_id": run}) == []
    argv = next(d for d in _kinds(env, run, "run_status") if d["status"] == "running")["argv"]
    assert "--permission-mode=acceptEdits" in argv
    assert not any(a.startswith("--disallowedTools") for a in argv)


def test_native_denials_hold_for_calls_claude_approves_itself(
    octipus: Callable[..., Env], tmp_path: Path
) -> None:
    ws = _workspace(tmp_path, "denied")
    env = octipus(_script(ws))
    secret = ws / "secret.txt"
    for rule in (
        "cli-native:Bash(rm:*)",
        "cli-native:Write",
        f"cli-native:Read({secret})",
        "cli-native:Bash(ls *.txt:*)",  # '*' is a wildcard to Claude: relay-only, with a notice
    ):
        env.client.request("POST", "/rules", json={"level": "deny", "rule": rule})
    explained = env.client.request(
        "POST", "/rules/explain", json={"tool_id": "cli-native:Bash", "arguments": RM, "action": "Bash"}
    )
    assert explained["decision"]["level"] == "deny"

    run = _turn(env, ws)
    assert (ws / "victim.txt").read_text() == "victim\n"
    assert not (ws / "new.txt").exists()
    results = _results(env, run)
    bash, write, read = results["Bash"], results["Write"], results["Read"]
    # Claude's own refusals (observed with 2.1.197): a scoped deny names the command; a bare deny
    # removes the tool from Claude's context; a Read path deny refuses the file
    assert (
        bash["is_error"]
        and "Permission to use Bash with command rm victim.txt has been denied" in (bash["content"])
    ), bash
    assert write["is_error"] and "Write exists but is not enabled in this context" in write["content"], write
    assert read["is_error"] and "denied by your permission settings" in read["content"], read
    assert not any("s3cr3t-value" in r["content"] for r in results.values())
    # Claude refused them itself, before asking anyone
    assert _kinds(env, run, "permission_decision") == []
    assert env.client.request("GET", "/approvals", params={"status": "all", "run_id": run}) == []

    argv = next(d for d in _kinds(env, run, "run_status") if d["status"] == "running")["argv"]
    assert "--permission-mode=acceptEdits" in argv
    assert [a for a in argv if a.startswith("--disallowedTools")] == [
        "--disallowedTools=Bash(rm*)",
        "--disallowedTools=Write",
        f"--disallowedTools=Read(/{secret})",
    ]
    notices = [n["message"] for n in _kinds(env, run, "notice")]
    assert any("cli-native:Bash(ls *.txt:*)" in n and "relays to Octipus" in n for n in notices), notices
