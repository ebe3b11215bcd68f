"""End to end through octipusd and the real Codex CLI (0.171.0) against the scripted Responses model.

The conformance suite runs for both transports (``app-server``, the default, and ``exec``); the
Codex-specific tests drive the app-server approval relay, Octipus rules on the relayed command,
``thread/resume`` re-sending the sandbox and the bridge, and the missing-thread signal. Run them
in a loopback-only namespace: ``scripts/netns .venv/bin/python -m pytest tests/e2e/test_codex.py``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from octipusd.testing.conformance import SCENARIOS, Octipus, VendorKit, octipus
from octipusd.testing.kit_codex import CodexExecKit, CodexKit, require_codex
from octipusd.testing.responses_server import ScriptedResponsesServer

KITS: dict[str, VendorKit] = {"codex": CodexKit(), "codex-exec": CodexExecKit()}
KIT = CodexKit()


@pytest.fixture(autouse=True)
def _codex_installed() -> None:
    require_codex()


@pytest.mark.parametrize("scenario", list(SCENARIOS))
@pytest.mark.parametrize("kit", list(KITS))
def test_conformance(kit: str, scenario: str, tmp_path: Path) -> None:
    SCENARIOS[scenario](KITS[kit], tmp_path)


def _kinds(env: Octipus, run: str, kind: str) -> list[dict[str, Any]]:
    return env.kinds(run, kind)


def _thread_of(env: Octipus, run: str) -> str:
    """The Codex thread id a run announced (its session event)."""
    (event,) = env.kinds(run, "session")
    return str(event["session_id"])


def _post_when_idle(env: Octipus, session: str, prompt: str) -> str | None:
    """Post a turn, or None while the session's previous run is still being cleaned up."""
    from octipusd.errors import ApiError

    try:
        return env.post(session, prompt)
    except ApiError as exc:
        if "already has a live run" in str(exc):
            return None
        raise


def _model(env: Octipus) -> ScriptedResponsesServer:
    assert isinstance(env.model, ScriptedResponsesServer)
    return env.model


def _turn_metadata(env: Octipus) -> list[dict[str, Any]]:
    return [json.loads(r.headers["x-codex-turn-metadata"]) for r in _model(env).message_requests]


def test_command_approval_approved(tmp_path: Path) -> None:
    """A relayed command is an Octipus approval of ``cli-native:commandExecution`` with the model's command."""
    command = "echo approved > approved.txt"
    with octipus(KIT, tmp_path, [KIT.shell(command), KIT.text("done")]) as env:
        run = env.post(env.new_session(), "write approved.txt")
        approval = env.wait_approval(run)
        assert approval["tool_id"] == "cli-native:commandExecution"
        assert approval["subject"] == command
        env.answer(approval["id"], "approve")
        final = env.wait_final(run)
        assert final["status"] == "succeeded", (final, env.daemon.log()[-3000:])
        assert (env.daemon.workspace / "approved.txt").read_text().strip() == "approved"
        (request,) = _kinds(env, run, "permission_request")
        assert request["tool_name"] == "commandExecution"
        assert request["input"]["command"] == command
        assert request["input"]["cwd"] == str(env.daemon.workspace)
        # not a login shell, which would reset PATH (octipus_codex.launch.LOGIN_SHELL_KEY)
        assert request["input"]["rawCommand"].startswith("/bin/bash -c ")
        results = _kinds(env, run, "tool_result")
        assert any(r["content"].strip() == "" and not r["is_error"] for r in results), results


def test_command_approval_denied(tmp_path: Path) -> None:
    """A denied command is declined: it does not run, the model is told, and the turn goes on."""
    with octipus(
        KIT, tmp_path, [KIT.shell("echo denied > denied.txt"), KIT.text("fine, not written")]
    ) as env:
        run = env.post(env.new_session(), "write denied.txt")
        approval = env.wait_approval(run)
        env.answer(approval["id"], "deny")
        final = env.wait_final(run)
        assert final["status"] == "succeeded", (final, env.daemon.log()[-3000:])
        assert final["result_text"] == "fine, not written"
        assert not (env.daemon.workspace / "denied.txt").exists()
        results = _kinds(env, run, "tool_result")
        assert any(r["is_error"] and r["content"] == "declined" for r in results), results
        # the model saw Codex's rejection in the second request
        assert "rejected by user" in env.model.conversation_texts()[-1]


def test_octipus_rule_matches_the_unwrapped_command(tmp_path: Path) -> None:
    """An allow rule on the model's command answers the relay without asking a person.

    (An allow prefix never covers a command that writes through a redirection, so the command
    here writes with ``touch``: ``echo:*`` would not allow ``echo x > file``.)"""
    env = Octipus(KIT, tmp_path, [KIT.shell("touch ruled.txt"), KIT.text("done")])
    config = tmp_path / "config" / "octipus" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[permissions]\nrules = { allow = ["cli-native:commandExecution(touch:*)"] }\n')
    try:
        env.start()
        run = env.post(env.new_session(), "write ruled.txt")
        final = env.wait_final(run)
        assert final["status"] == "succeeded", (final, env.daemon.log()[-3000:])
        assert (env.daemon.workspace / "ruled.txt").exists()
        (decision,) = _kinds(env, run, "permission_decision")
        assert decision["allowed"] is True and decision["tool_id"] == "cli-native:commandExecution"
        assert env.client.request("GET", "/approvals", params={"run_id": run}) == []
    finally:
        env.close()


def test_resume_sends_sandbox_and_bridge_again(tmp_path: Path) -> None:
    """``thread/resume`` gets the sandbox and the bridge again (Codex keeps neither, observed-2.md §1.5)."""
    plan = {"plan": {"title": "after resume", "steps": [{"id": "s1", "title": "x", "status": "pending"}]}}
    steps = [KIT.text("first"), KIT.bridge_call("update_work_plan", plan), KIT.text("second")]
    with octipus(KIT, tmp_path, steps) as env:
        session = env.new_session()
        first_run = env.post(session, "remember the word octopus")
        first = env.wait_final(first_run)
        assert first["status"] == "succeeded", first
        second_run = env.post(session, "save a plan")
        second = env.wait_final(second_run)
        assert second["status"] == "succeeded", (second, env.daemon.log()[-3000:])
        assert second["resumed"] is True and second["vendor_session_id"] == _thread_of(env, first_run)
        assert _thread_of(env, second_run) == second["vendor_session_id"]
        metadata = _turn_metadata(env)
        assert [m["sandbox_mode"] for m in metadata] == ["workspace-write"] * 3
        assert metadata[-1]["history_initialization"] == "cold_resume"
        last = _model(env).message_requests[-1].body
        namespaces = [t.get("name") for t in last["tools"] if t.get("type") == "namespace"]
        assert "mcp__octipus" in namespaces
        assert "remember the word octopus" in json.dumps(last["input"])
        calls = env.kinds(second_run, "bridge_call")
        assert any(
            c.get("tool") == "update_work_plan" and c.get("event") == "tool_call_finished" for c in calls
        )
        (session_event,) = _kinds(env, second_run, "session")
        assert session_event["mcp_servers"] == {"octipus": "connected"}


@pytest.mark.parametrize("kit", [CodexKit(), CodexExecKit()], ids=["app-server", "exec"])
def test_usage_is_per_turn_on_a_resumed_thread(kit: VendorKit, tmp_path: Path) -> None:
    """Usage counts only the turn's own requests, although Codex's total is per thread (exec's
    ``turn.completed.usage`` is cumulative across resumes: the runtime subtracts earlier runs)."""
    steps = [
        {"content": [{"type": "text", "text": "one"}], "usage": {"input_tokens": 300, "output_tokens": 30}},
        {"content": [{"type": "text", "text": "two"}], "usage": {"input_tokens": 500, "output_tokens": 50}},
    ]
    with octipus(kit, tmp_path, steps) as env:
        session = env.new_session()
        first = env.wait_final(env.post(session, "one"))
        second = env.wait_final(env.post(session, "two"))
        assert (first["input_tokens"], first["output_tokens"]) == (300, 30), first
        assert second["resumed"] is True
        assert (second["input_tokens"], second["output_tokens"]) == (500, 50), second


def test_unknown_thread_gives_the_missing_session_signal(tmp_path: Path) -> None:
    """A stored thread Codex no longer has: Codex's own error is recognised, the id is dropped and the
    turn is retried once on a new thread with the full prompt (seed 003 "Cold fallback"); the next
    turn resumes the new thread."""
    with octipus(KIT, tmp_path, [KIT.text("first"), KIT.text("resumed again")]) as env:
        session = env.new_session()
        first_run = env.post(session, "hello")
        first = env.wait_final(first_run)
        assert first["status"] == "succeeded", first
        thread = _thread_of(env, first_run)
        codex_home = tmp_path / "home" / ".codex"
        shutil.rmtree(codex_home / "sessions")
        for state in codex_home.glob("*.sqlite*"):
            state.unlink()
        lost = env.wait_final(env.post(session, "do you remember?"))
        assert lost["status"] == "succeeded" and lost["resumed"] is False, lost
        assert lost["vendor_session_id"] and lost["vendor_session_id"] != thread, lost
        failed, retried = env.kinds(lost["id"], "result")
        assert failed["subtype"] == "resume_failed" and failed["is_error"] is True
        assert retried["is_error"] is False
        fallback = [n for n in env.kinds(lost["id"], "notice") if n.get("cold_fallback")]
        assert len(fallback) == 1 and f"no rollout found for thread id {thread}" in fallback[0]["message"]
        again_run = env.wait(lambda: _post_when_idle(env, session, "go on"), 30, "the session to be idle")
        again = env.wait_final(again_run)
        assert again["status"] == "succeeded", (again, env.daemon.log()[-3000:])
        assert again["resumed"] is True and again["vendor_session_id"] == lost["vendor_session_id"]
