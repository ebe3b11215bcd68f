"""SIGKILL of octipusd mid-turn: the next turn resumes the vendor conversation the vendor had confirmed.

Seed 003 "Session reuse", issue 14 item 12: the vendor session is saved as soon as the vendor answers
in it (its first assistant message, or a result), not only when the run ends, so a daemon killed
later in the turn leaves it for the next turn; an init alone confirms nothing. The real daemon and
the real ``claude`` / ``codex`` against scripted models that stall the turn's next model call; the
daemon is restarted on the same folder (SQLite store), as after a crash.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from octipusd.testing.conformance import Octipus
from octipusd.testing.harness import DaemonHarness
from octipusd.testing.kit_codex import CodexKit
from octipusd.testing.responses_server import ScriptedResponsesServer
from tests.e2e.conftest import Env

#: How long a stalled model call holds the turn (s): far longer than the test waits for.
STALL_S = 300


def _answer(text: str, **extra: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], **extra}


def _launches(env: Env, run_id: str) -> list[dict[str, Any]]:
    return [
        e["data"]
        for e in env.events(run_id)
        if e["kind"] == "run_status" and e["data"]["status"] == "running"
    ]


def _records(env: Env, session: str) -> list[dict[str, Any]]:
    return list(env.client.request("GET", f"/sessions/{session}/vendor-sessions"))


def _kill_and_restart(env: Env, claude: Path, daemons: list[DaemonHarness]) -> Env:
    """SIGKILL the daemon, start a new one on the same folder (and store) and model."""
    env.daemon.stop(sig=signal.SIGKILL)
    again = DaemonHarness(env.daemon.root, env.model.base_url, claude)
    daemons.append(again)
    again.start()
    return Env(env.model, again)


def test_after_a_sigkill_the_next_turn_resumes_the_conversation_the_vendor_confirmed(
    octipus: Callable[..., Env], claude: Path, daemons: list[DaemonHarness]
) -> None:
    env = octipus(
        {
            "steps": [
                # the first assistant message (a tool call); the call's answer then goes to a model
                # that stalls: the daemon is killed mid-turn
                {
                    "content": [
                        {"type": "text", "text": "Let me look at the plan."},
                        {"type": "tool_use", "name": "mcp__octipus__get_work_plan", "input": {}},
                    ]
                },
                _answer("the answer", stall_seconds=STALL_S, stall_times=1),
                # claude may keep the stalled call's message_start as an assistant turn of its own
                _answer("the answer"),
            ]
        }
    )
    session = env.new_session()
    run1 = env.post(session, "KILLED-ONE remember the number 41")
    env.wait(lambda: len(env.model.message_requests) >= 2, 60, "the stalled second model call")
    [record] = env.wait(lambda: _records(env, session), 30, "the vendor session saved mid-turn")
    vendor_id = str(record["vendor_session_id"])
    assert env.run(run1)["status"] == "running"
    assert vendor_id == env.run(run1)["vendor_session_id"]

    env = _kill_and_restart(env, claude, daemons)
    assert env.run(run1)["status"] == "interrupted"
    assert [r["vendor_session_id"] for r in _records(env, session)] == [vendor_id]
    before = len(env.model.message_requests)
    run2 = env.post(session, "KILLED-TWO which number?")
    final = env.wait_final(run2)
    assert final["status"] == "succeeded", final
    [launch] = _launches(env, run2)
    assert launch["resumed"] is True and f"--resume={vendor_id}" in launch["argv"], launch
    assert final["vendor_session_id"] == vendor_id and final["result_text"] == "the answer"
    # the vendor's own conversation: turn 1's prompt and tool call are in its history, sent once
    [request] = env.model.message_requests[before:]
    history = str(request.body["messages"])
    assert history.count("KILLED-ONE remember the number 41") == 1 and "Let me look at the plan." in history


def test_a_sigkill_after_the_init_alone_stores_no_vendor_session(
    octipus: Callable[..., Env], claude: Path, daemons: list[DaemonHarness]
) -> None:
    env = octipus({"steps": [_answer("answer at step 0", stall_seconds=STALL_S, stall_times=1)]})
    session = env.new_session()
    run1 = env.post(session, "INIT-ONLY hello")
    env.wait(lambda: env.model.message_requests, 60, "the stalled model call")
    env.wait(lambda: any(e["kind"] == "session" for e in env.events(run1)), 30, "claude's init")
    assert not [e for e in env.events(run1) if e["kind"] in ("text", "tool_use", "result")]
    assert _records(env, session) == []

    env = _kill_and_restart(env, claude, daemons)
    assert _records(env, session) == []
    run2 = env.post(session, "INIT-ONLY again")
    final = env.wait_final(run2)
    assert final["status"] == "succeeded", final
    [launch] = _launches(env, run2)
    assert launch["resumed"] is False and not any(a.startswith("--resume") for a in launch["argv"]), launch


def test_after_a_sigkill_the_next_turn_resumes_the_codex_thread(
    tmp_path: Path, daemons: list[DaemonHarness]
) -> None:
    """The same on Codex (app-server): its first answer in the thread (a bridge call) saves the
    thread; after the kill the next turn resumes it (``thread/resume``)."""
    kit = CodexKit()
    answer = kit.text("the answer")
    steps = [
        kit.bridge_call("get_work_plan", {}),
        {**answer, "stall_seconds": STALL_S, "stall_times": 1},
        answer,
    ]
    env = Octipus(kit, tmp_path, steps)
    daemons.append(env.daemon)
    try:
        env.start()
        session = env.new_session()
        run1 = env.post(session, "KILLED-ONE remember the number 41")
        model = env.model
        assert isinstance(model, ScriptedResponsesServer)
        env.wait(lambda: len(model.message_requests) >= 2, 60, "the stalled second model call")
        records = env.wait(
            lambda: env.client.request("GET", f"/sessions/{session}/vendor-sessions"), 30, "the saved thread"
        )
        thread = records[0]["vendor_session_id"]
        assert env.run(run1)["status"] == "running" and env.run(run1)["vendor_session_id"] == thread

        env.daemon.stop(sig=signal.SIGKILL)
        env.daemon = DaemonHarness(
            tmp_path, model.base_url, extra_env=kit.daemon_env(tmp_path / "home", model)
        )
        daemons.append(env.daemon)
        env.client = env.daemon.client()
        env.start()
        assert env.run(run1)["status"] == "interrupted"
        run2 = env.post(session, "KILLED-TWO which number?")
        final = env.wait_final(run2)
        assert final["status"] == "succeeded", (final, env.daemon.log()[-4000:])
        launches = [d for d in env.kinds(run2, "run_status") if d["status"] == "running"]
        assert [(d["resumed"], d["vendor_session_id"]) for d in launches] == [(True, thread)], launches
        assert final["vendor_session_id"] == thread and final["result_text"] == "the answer", final
    finally:
        env.close()
