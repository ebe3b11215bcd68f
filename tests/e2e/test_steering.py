"""Steering: user guidance reaches a running turn (seed 003 "Plans, feedback and delegation").

Claude takes it as a stream-json user message on stdin; Codex app-server as ``turn/steer``;
vendors without live stdin get it queued in the run context of Octipus tool responses.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from octipusd.errors import ApiError
from octipusd.testing.conformance import Octipus, VendorKit, octipus
from octipusd.testing.kit_antigravity import AntigravityKit
from octipusd.testing.kit_claude import ClaudeKit
from octipusd.testing.kit_codex import CodexKit

GUIDANCE = "please also mention the octopus"


def _stalled_then(kit: VendorKit, text: str, stall_seconds: float = 4) -> list[dict[str, Any]]:
    first = kit.text("first answer")
    if isinstance(kit, AntigravityKit):  # no model server: the stub agent itself waits first
        first["actions"] = [{"sleep": stall_seconds}, *first["actions"]]
    else:
        first["stall_seconds"] = stall_seconds  # the model holds its first reply while the guidance arrives
    return [first, kit.text(text)]


def _steer_while_running(env: Octipus, session: str, run: str) -> dict[str, Any]:
    env.wait(
        lambda: env.run(run)["status"] == "running" and env.model.conversation_texts(),
        60,
        "the first model call",
    )
    return dict(env.client.request("POST", f"/sessions/{session}/steer", json={"text": GUIDANCE}))


# Under CPU contention Codex's steer can arrive before its turn takes live input ("queued"): alone.
@pytest.mark.serial
@pytest.mark.parametrize("kit", [ClaudeKit(), CodexKit()], ids=["claude-code", "codex"])
def test_guidance_reaches_the_running_turn(kit: VendorKit, tmp_path: Path) -> None:
    with octipus(kit, tmp_path, _stalled_then(kit, "answer with the guidance")) as env:
        session = env.new_session()
        run = env.post(session, "start working")
        out = _steer_while_running(env, session, run)
        assert out == {"run_id": run, "delivery": "stdin"}
        final = env.wait_final(run)
        assert final["status"] == "succeeded", final
        assert GUIDANCE in env.model.conversation_texts()[-1], "the model did not receive the guidance"
        assert [e["text"] for e in env.kinds(run, "steering_submitted")] == [GUIDANCE]
        if kit.adapter == "claude-code":
            # a queued user message is one more turn of the same process: its answer is the result
            assert final["result_text"] == "answer with the guidance"
        else:
            # turn/steer joins the running turn: Codex re-asks the model with the guidance added
            assert any(e["status"] == "turn/steer accepted" for e in env.kinds(run, "status"))


def test_guidance_for_a_vendor_without_live_stdin_is_queued(tmp_path: Path) -> None:
    kit = AntigravityKit()
    with octipus(kit, tmp_path, _stalled_then(kit, "done")) as env:
        session = env.new_session()
        run = env.post(session, "start working")
        env.wait(lambda: env.run(run)["status"] == "running", 60, "the run to start")
        out = env.client.request("POST", f"/sessions/{session}/steer", json={"text": GUIDANCE})
        assert out == {"run_id": run, "delivery": "queued"}
        assert [e["text"] for e in env.kinds(run, "guidance_pending")] == [GUIDANCE]
        env.wait_final(run)


def test_steering_a_session_without_a_live_run_is_refused(tmp_path: Path) -> None:
    kit = ClaudeKit()
    with octipus(kit, tmp_path, [kit.text("ok")]) as env:
        session = env.new_session()
        env.wait_final(env.post(session, "hello"))
        with pytest.raises(ApiError, match="no live run") as refused:
            env.client.request("POST", f"/sessions/{session}/steer", json={"text": GUIDANCE})
        assert refused.value.http_status == 409
