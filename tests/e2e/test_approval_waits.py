"""Approval waits and approval answers end to end (issue 14 items 4 and 9): a real octipusd, the real
claude binary against the scripted Anthropic model, and ``octipusctl`` as a subprocess.

* ``octipusctl approvals approve`` says so when the rules, checked again after the answer, deny
  the call (a DENY added while the prompt was open), and exits 1; the call does not run;
* a Claude run whose bridge call waits for an approval when Claude goes away (the caller's
  request is gone) is recorded as failed, naming the approval, which is cancelled; the call never
  runs; a vendor that finishes while its relayed permission request waits fails the same way;
* a grant with ``--uses 1`` is spent by a call started by hand exactly as by an agent's;
* approving a hand-started call says so when the check at its dispatch denied it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from octipusd.testing.stub_cli import CLAUDE_INIT, claude_result
from tests.e2e.conftest import Env
from tests.e2e.test_stream_framing import stub_binary

BIN = Path(sys.executable).parent
CTL = str(BIN / "octipusctl")
TEXT_ONLY = {"steps": [{"content": [{"type": "text", "text": "pong"}]}]}


def ctl(env: Env, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CTL, *args], env=env.daemon.env, capture_output=True, text=True, timeout=120)


def _kinds(env: Env, run_id: str, kind: str) -> list[dict[str, Any]]:
    return [e["data"] for e in env.events(run_id) if e["kind"] == kind]


def _bash_then_ok(command: str) -> dict[str, Any]:
    return {
        "steps": [
            {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": command}}]},
            {"content": [{"type": "text", "text": "ok"}]},
        ]
    }


def test_approve_says_when_the_recheck_denied_the_call(octipus: Callable[..., Env]) -> None:
    command = "bash -c 'echo x > approved.txt'"
    env = octipus(_bash_then_ok(command))
    session = env.new_session()
    run_id = env.post(session, "go")
    approval_id = env.wait_approval(run_id)["id"]
    added = ctl(env, "rules", "add", "deny", "cli-native:Bash")
    assert added.returncode == 0, added.stderr
    answered = ctl(env, "approvals", "approve", approval_id)
    assert answered.returncode == 1, answered.stdout + answered.stderr
    assert answered.stdout.startswith(f"{approval_id}: approved, but the call was denied"), answered.stdout
    assert (
        "deny by rule cli-native:Bash" in answered.stdout and "changed while the approval" in answered.stdout
    )
    assert env.wait_final(run_id)["status"] == "succeeded"  # the model was told, and answered
    assert not (env.daemon.workspace / "approved.txt").exists()
    [decision] = [d for d in _kinds(env, run_id, "permission_decision") if d["tool_id"] == "cli-native:Bash"]
    assert not decision["allowed"] and "changed while the approval was open" in decision["reason"]

    # an approval the re-check lets through still just says approved
    env2 = octipus(_bash_then_ok(command))
    run2 = env2.post(env2.new_session(), "go")
    approval2 = env2.wait_approval(run2)["id"]
    plain = ctl(env2, "approvals", "approve", approval2)
    assert plain.returncode == 0 and plain.stdout.startswith(f"{approval2}: approved ("), plain.stdout
    assert env2.wait_final(run2)["status"] == "succeeded"
    assert (env2.daemon.workspace / "approved.txt").exists()


def test_a_bridge_caller_that_goes_away_during_its_approval_fails_the_run(
    octipus: Callable[..., Env],
) -> None:
    """Claude calls shell__run on its bridge and the call waits for an approval; then Claude's
    process dies (killed by its pid), so the caller's HTTP request is gone: the run fails at once,
    naming the approval, which is cancelled; the call never runs, and a late answer changes nothing."""
    ledger = "ledger.txt"
    env = octipus(
        {
            "steps": [
                {
                    "content": [
                        {
                            "type": "tool_use",
                            "name": "mcp__octipus__shell__run",
                            "input": {"command": f"echo ran >> {ledger}"},
                        }
                    ]
                },
                {"content": [{"type": "text", "text": "done"}]},
            ]
        }
    )
    session = env.new_session()
    run_id = env.post(session, "append to the ledger")
    approval = env.wait_approval(run_id)
    assert approval["tool_id"] == "shell__run"
    pid = env.run(run_id)["pid"]
    assert isinstance(pid, int)
    os.kill(pid, signal.SIGKILL)
    final = env.wait_final(run_id, timeout=60)
    assert final["status"] == "failed", final
    assert approval["id"] in final["reason"] and "was pending" in final["reason"], final["reason"]
    assert "shell__run" in final["reason"], final["reason"]
    stored = env.client.request("GET", f"/approvals/{approval['id']}")
    assert stored["status"] == "cancelled", stored
    late = ctl(env, "approvals", "approve", approval["id"])
    assert late.returncode == 1 and "already" in late.stderr, late.stderr
    assert not (env.daemon.workspace / ledger).exists()
    bridge = _kinds(env, run_id, "bridge_call")
    assert not any(b["event"] == "tool_call_started" for b in bridge), bridge


def test_a_one_use_grant_is_spent_by_a_hand_started_call(octipus: Callable[..., Env]) -> None:
    env = octipus(TEXT_ONLY)
    session = env.new_session()
    created = ctl(env, "rules", "grant", "shell__run", "--uses", "1")
    assert created.returncode == 0, created.stderr
    grant_id = created.stdout.split()[2].rstrip(":")
    args = '{"command": "echo once >> ledger.txt"}'
    first = ctl(env, "actions", "call", "shell__run", "--session", session, "--args", args)
    assert first.returncode == 0 and "completed" in first.stdout, first.stdout + first.stderr
    # used up: no longer an active grant
    assert [g for g in json.loads(ctl(env, "rules", "--json").stdout)["grants"] if g["id"] == grant_id] == []
    second = ctl(env, "actions", "call", "shell__run", "--session", session, "--args", args)
    assert "awaiting_approval" in second.stdout, second.stdout + second.stderr
    assert (env.daemon.workspace / "ledger.txt").read_text() == "once\n"


def _hand_started(env: Env, session: str, command: str) -> dict[str, Any]:
    """Start ``command`` by hand (the default rules ask for it); its invocation, awaiting approval."""
    started = ctl(
        env,
        "actions",
        "call",
        "shell__run",
        "--session",
        session,
        "--json",
        "--args",
        json.dumps({"command": command}),
    )
    data = json.loads(started.stdout)
    assert data["invocation"]["status"] == "awaiting_approval", started.stdout + started.stderr
    return dict(data["invocation"])


def test_approve_says_when_the_dispatch_check_denied_a_hand_started_call(octipus: Callable[..., Env]) -> None:
    """The re-check of a hand-started call runs when it is dispatched, after the answer: its result
    reaches ``octipusctl approvals approve`` as a run's call's does."""
    env = octipus(TEXT_ONLY)
    session = env.new_session()
    plain = _hand_started(env, session, "echo plain >> ledger.txt")
    approved = ctl(env, "approvals", "approve", plain["approval_id"])
    assert approved.returncode == 0, approved.stdout + approved.stderr
    assert approved.stdout.startswith(f"{plain['approval_id']}: approved ("), approved.stdout
    done = json.loads(ctl(env, "actions", "call-show", plain["id"], "--wait", "30", "--json").stdout)
    assert done["invocation"]["status"] == "completed", done

    refused = _hand_started(env, session, "echo refused >> ledger.txt")
    added = ctl(env, "rules", "add", "deny", "shell__run(echo refused:*)")
    assert added.returncode == 0, added.stderr
    answered = ctl(env, "approvals", "approve", refused["approval_id"])
    assert answered.returncode == 1, answered.stdout + answered.stderr
    assert answered.stdout.startswith(f"{refused['approval_id']}: approved, but the call was denied"), (
        answered.stdout
    )
    assert "permission revoked before the call started" in answered.stdout, answered.stdout
    ended = json.loads(ctl(env, "actions", "call-show", refused["id"], "--wait", "30", "--json").stdout)
    assert ended["invocation"]["status"] == "not_executed", ended
    assert (env.daemon.workspace / "ledger.txt").read_text() == "plain\n"


def test_a_vendor_that_finishes_while_its_permission_request_waits_fails_the_run(
    octipus: Callable[..., Env], tmp_path: Path
) -> None:
    """The relayed permission path: the vendor asks about Bash, then prints its result and exits
    without waiting for the answer (Claude's own binary never does this on demand, so a stub speaks
    its stream-json): the run fails naming the approval, which is cancelled, not left pending."""
    release = tmp_path / "release"
    request = {
        "type": "control_request",
        "request_id": "perm-1",
        "request": {
            "subtype": "can_use_tool",
            "tool_name": "Bash",
            "input": {"command": "bash -c 'echo x > never.txt'"},
            "tool_use_id": "toolu_1",
        },
    }
    actions = [
        {"read_line": True},
        {"emit": CLAUDE_INIT},
        {"emit": request},
        {"wait_for_file": str(release)},
        {"emit": claude_result("finished anyway")},
    ]
    script = tmp_path / "stub.json"
    script.write_text(json.dumps(actions))
    env = octipus(TEXT_ONLY, binary=stub_binary(tmp_path, script))
    run_id = env.post(env.new_session(), "go")
    approval = env.wait_approval(run_id)
    assert approval["tool_id"] == "cli-native:Bash"
    release.touch()
    final = env.wait_final(run_id)
    assert final["status"] == "failed", final
    assert "the vendor finished without waiting for cli-native:Bash" in final["reason"], final["reason"]
    assert approval["id"] in final["reason"]
    assert env.client.request("GET", f"/approvals/{approval['id']}")["status"] == "cancelled"
