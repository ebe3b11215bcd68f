"""Steering: user guidance reaches a running turn (seed 003 "Plans, feedback and delegation").

Claude takes it as a stream-json user message on stdin; Codex app-server as ``turn/steer``;
vendors without live stdin get it queued in the run context of Octipus tool responses.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from octipusd.errors import ApiError
from octipusd.testing.conformance import Octipus, VendorKit, octipus
from octipusd.testing.kit_antigravity import AntigravityKit
from octipusd.testing.kit_claude import ClaudeKit
from octipusd.testing.kit_codex import CodexKit
from tests.e2e.conftest import Env as ClaudeEnv

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
        assert [e["text"] for e in env.kinds(run, "steering_delivered")] == [GUIDANCE]
        assert not env.kinds(run, "guidance_pending")
        if kit.adapter == "claude-code":
            # a queued user message is one more turn of the same process: its answer follows the first
            assert final["result_text"] == "first answer\n\nanswer with the guidance"
        else:
            # turn/steer joins the running turn: Codex re-asks the model with the guidance added
            assert any(e["status"] == "turn/steer accepted" for e in env.kinds(run, "status"))


def test_guidance_for_a_buffered_vendor_is_named_when_the_run_completes(tmp_path: Path) -> None:
    """A buffered adapter takes no live guidance and no follow-up: the run completes with its result,
    a note naming the guidance not applied, and ``guidance_pending`` then (not when it was queued)."""
    kit = AntigravityKit()
    with octipus(kit, tmp_path, _stalled_then(kit, "done")) as env:
        session = env.new_session()
        run = env.post(session, "start working")
        env.wait(lambda: env.run(run)["status"] == "running", 60, "the run to start")
        out = env.client.request("POST", f"/sessions/{session}/steer", json={"text": GUIDANCE})
        assert out == {"run_id": run, "delivery": "queued"}
        assert [e["text"] for e in env.kinds(run, "steering_queued")] == [GUIDANCE]
        assert not env.kinds(run, "guidance_pending")
        final = env.wait_final(run)
        assert final["status"] == "succeeded", final
        assert final["result_text"].startswith("first answer\n\n[Octipus] 1 guidance item was not applied")
        assert "takes no follow-up invocations" in final["result_text"]
        assert [e["texts"] for e in env.kinds(run, "guidance_pending")] == [[GUIDANCE]]


def test_steering_a_session_without_a_live_run_is_refused(tmp_path: Path) -> None:
    kit = ClaudeKit()
    with octipus(kit, tmp_path, [kit.text("ok")]) as env:
        session = env.new_session()
        env.wait_final(env.post(session, "hello"))
        with pytest.raises(ApiError, match="no live run") as refused:
            env.client.request("POST", f"/sessions/{session}/steer", json={"text": GUIDANCE})
        assert refused.value.http_status == 409


# ------------------------------------------------------------------ the real claude: how the turn ends

CAP_ONE = {"OCTIPUS_AGENT__MAXCONCURRENTRUNS": "1"}


def _text_step(text: str, **extra: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], **extra}


def _steer(env: ClaudeEnv, session: str, text: str = GUIDANCE) -> dict[str, Any]:
    return dict(env.client.request("POST", f"/sessions/{session}/steer", json={"text": text}))


def _history(env: ClaudeEnv, session: str) -> list[tuple[str, str]]:
    found = env.client.request("GET", f"/sessions/{session}/messages")
    return [(m["role"], m["text"]) for m in found]


def test_guidance_during_a_bash_tool_ends_the_turn_at_its_one_result(
    octipus: Callable[..., ClaudeEnv],
) -> None:
    """Claude merges guidance that arrives while its Bash tool runs into the same request and emits
    one result: the run ends there (it used to wait for a second result until the active-work limit)."""
    bash = {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": "sleep 4"}}]}
    env = octipus({"steps": [bash, _text_step("done, and the octopus is mentioned")]})
    session = env.new_session(permission_mode="full")
    run = env.post(session, "start working")
    env.wait(lambda: any(e["kind"] == "tool_use" for e in env.events(run)), 30, "the Bash tool to start")
    assert _steer(env, session) == {"run_id": run, "delivery": "stdin"}
    steered_at = time.monotonic()
    final = env.wait_final(run, timeout=30)
    assert final["status"] == "succeeded", final
    assert time.monotonic() - steered_at < 15, "the run did not end at the vendor's result"
    assert final["result_text"] == "done, and the octopus is mentioned"
    kinds = [e["kind"] for e in env.events(run)]
    assert kinds.count("result") == 1 and "guidance_pending" not in kinds
    delivered = [e["data"]["text"] for e in env.events(run) if e["kind"] == "steering_delivered"]
    assert delivered == [GUIDANCE]
    # the request after the tool result carries the guidance: Claude folded it in
    assert GUIDANCE in env.model.conversation_texts()[-1]
    # the guidance is in the session history, before the answer it led to
    assert _history(env, session) == [
        ("user", "start working"),
        ("user", GUIDANCE),
        ("assistant", "done, and the octopus is mentioned"),
    ]


def test_guidance_during_a_stalled_model_call_is_one_more_turn(octipus: Callable[..., ClaudeEnv]) -> None:
    env = octipus(
        {"steps": [_text_step("first answer", stall_seconds=4), _text_step("answer with the guidance")]}
    )
    session = env.new_session()
    run = env.post(session, "start working")
    env.wait(lambda: env.model.conversation_texts(), 30, "the first model call")
    assert _steer(env, session)["delivery"] == "stdin"
    final = env.wait_final(run, timeout=30)
    # both answers are the run's: the second turn of the process does not erase the first
    assert final["status"] == "succeeded", final
    assert final["result_text"] == "first answer\n\nanswer with the guidance", final
    kinds = [e["kind"] for e in env.events(run)]
    assert kinds.count("result") == 2 and "guidance_pending" not in kinds
    # acknowledged only after the first result: the turn waited for it and for the second result
    assert kinds.index("steering_delivered") > kinds.index("result")


def test_guidance_queued_before_the_vendor_started_goes_to_a_follow_up(
    octipus: Callable[..., ClaudeEnv],
) -> None:
    """Guidance that never reached the vendor (here: given while the run waited for admission) is sent
    by a follow-up invocation of the same vendor session once the vendor finished."""
    env = octipus(
        {
            "steps": [],
            "conversations": [
                {"match": "HOLDER", "steps": [_text_step("holder done", stall_seconds=5)]},
                {
                    "match": "QUEUED",
                    "steps": [
                        _text_step("first answer", usage={"input_tokens": 100, "output_tokens": 20}),
                        _text_step(
                            "answer with the guidance", usage={"input_tokens": 1000, "output_tokens": 200}
                        ),
                    ],
                },
            ],
        },
        extra_env=CAP_ONE,
    )
    holder = env.post(env.new_session(), "HOLDER keeps the only slot")
    env.wait(lambda: env.model.conversation_texts(), 30, "the holder's model call")
    session = env.new_session()
    run = env.post(session, "QUEUED start working")
    env.wait(lambda: env.run(run)["status"] == "queued" and env.run(run)["reason"], 30, "the run to queue")
    assert _steer(env, session) == {"run_id": run, "delivery": "queued"}
    assert env.wait_final(holder, timeout=30)["status"] == "succeeded"
    final = env.wait_final(run, timeout=60)
    assert final["status"] == "succeeded", final
    assert final["result_text"] == "first answer\n\nanswer with the guidance", final
    events = env.events(run)
    launches = [e["data"] for e in events if e["kind"] == "run_status" and e["data"]["status"] == "running"]
    assert [d["resumed"] for d in launches] == [False, True]
    assert f"--resume={final['vendor_session_id']}" in launches[1]["argv"]
    assert any("follow-up invocation 1 of at most 2" in str(e["data"].get("message")) for e in events)
    assert not [e for e in events if e["kind"] == "guidance_pending"]
    assert GUIDANCE in env.model.conversation_texts()[-1]
    # one figure for the run: both invocations' usage, each counted once
    assert (final["input_tokens"], final["output_tokens"]) == (1100, 220), final
    assert [m for m in _history(env, session) if m[0] == "assistant"] == [
        ("assistant", "first answer\n\nanswer with the guidance")
    ]


def test_a_follow_up_that_fails_keeps_the_answer_before_it(octipus: Callable[..., ClaudeEnv]) -> None:
    """The follow-up's model call fails: the run keeps its first answer and succeeds, a notice says
    what happened, and the guidance it carried is named as not applied."""
    error = {"error": {"status": 400, "type": "invalid_request_error", "message": "mock: follow-up refused"}}
    env = octipus(
        {
            "steps": [],
            "conversations": [
                {"match": "HOLDER", "steps": [_text_step("holder done", stall_seconds=4)]},
                {"match": "QUEUED", "steps": [_text_step("first answer"), error]},
            ],
        },
        extra_env=CAP_ONE,
    )
    holder = env.post(env.new_session(), "HOLDER keeps the only slot")
    env.wait(lambda: env.model.conversation_texts(), 30, "the holder's model call")
    session = env.new_session()
    run = env.post(session, "QUEUED start working")
    env.wait(lambda: env.run(run)["status"] == "queued" and env.run(run)["reason"], 30, "the run to queue")
    assert _steer(env, session)["delivery"] == "queued"
    assert env.wait_final(holder, timeout=30)["status"] == "succeeded"
    final = env.wait_final(run, timeout=60)
    assert final["status"] == "succeeded", final
    assert final["result_text"].startswith("first answer\n\n[Octipus] 1 guidance item was not applied"), final
    assert "follow-up invocation 1 failed" in final["result_text"]
    events = env.events(run)
    (failed,) = [e["data"] for e in events if e["kind"] == "notice" and e["data"].get("follow_up_failed")]
    assert "mock: follow-up refused" in failed["message"], failed
    assert [e["data"]["texts"] for e in events if e["kind"] == "guidance_pending"] == [[GUIDANCE]]
    history = _history(env, session)
    assert ("assistant", "first answer") in history and history[-1] == ("user", GUIDANCE)


def test_guidance_past_the_follow_up_limit_is_named_when_the_run_completes(
    octipus: Callable[..., ClaudeEnv],
) -> None:
    env = octipus(
        {
            "steps": [],
            "conversations": [
                {"match": "HOLDER", "steps": [_text_step("holder done", stall_seconds=4)]},
                {"match": "QUEUED", "steps": [_text_step("first answer")]},
            ],
        },
        extra_env={**CAP_ONE, "OCTIPUS_AGENT__MAXFOLLOWUPS": "0"},
    )
    env.post(env.new_session(), "HOLDER keeps the only slot")
    env.wait(lambda: env.model.conversation_texts(), 30, "the holder's model call")
    session = env.new_session()
    run = env.post(session, "QUEUED start working")
    env.wait(lambda: env.run(run)["status"] == "queued" and env.run(run)["reason"], 30, "the run to queue")
    assert _steer(env, session)["delivery"] == "queued"
    assert not [e for e in env.events(run) if e["kind"] == "guidance_pending"], "reported when queued"
    final = env.wait_final(run, timeout=60)
    assert final["status"] == "succeeded", final
    assert final["result_text"].startswith("first answer\n\n[Octipus] 1 guidance item was not applied")
    assert "the follow-up limit of 0 was reached" in final["result_text"]
    events = env.events(run)
    pending = [e for e in events if e["kind"] == "guidance_pending"]
    assert [e["data"]["texts"] for e in pending] == [[GUIDANCE]]
    assert pending[0]["seq"] > max(e["seq"] for e in events if e["kind"] == "result")
    # kept after the answer in the session history: the next turn carries it
    assert _history(env, session)[-1] == ("user", GUIDANCE)
    nxt = env.wait_final(env.post(session, "QUEUED next"), timeout=60)
    assert nxt["status"] == "succeeded"
    assert GUIDANCE in env.model.conversation_texts()[-1]


def test_steering_interrupts_collect_children_without_touching_the_child(
    octipus: Callable[..., ClaudeEnv],
) -> None:
    spawn = {
        "content": [
            {
                "type": "tool_use",
                "name": "mcp__octipus__spawn_child",
                "input": {"role": "coding", "brief": "KID-SLOW take your time", "detach": True},
            }
        ]
    }
    collect = {
        "content": [
            {"type": "tool_use", "name": "mcp__octipus__collect_children", "input": {"timeoutSeconds": 600}}
        ]
    }
    env = octipus(
        {
            "steps": [spawn, collect, _text_step("handled the guidance"), _text_step("(unused)")],
            "conversations": [{"match": "KID-SLOW", "steps": [_text_step("kid done", delay_seconds=8)]}],
        }
    )
    for rule in ("spawn_child", "collect_children"):
        env.client.request("POST", "/rules", json={"level": "allow", "rule": rule})
    session = env.new_session()
    run = env.post(session, "fan out and collect")
    # the bridge started the call (its handler registers the wait before it first yields)
    env.wait(
        lambda: any(
            e["kind"] == "bridge_call"
            and e["data"].get("event") == "tool_call_started"
            and e["data"].get("tool") == "collect_children"
            for e in env.events(run)
        ),
        30,
        "the collect_children call to be waiting",
    )
    asked_at = time.monotonic()
    assert _steer(env, session)["delivery"] == "stdin"
    results = env.wait(
        lambda: [e["data"] for e in env.events(run) if e["kind"] == "tool_result"][1:],
        30,
        "the collect_children answer",
    )
    assert time.monotonic() - asked_at < 6, "collect_children did not return on steering"
    answer = json.loads(str(results[0]["content"]).split("\n[octipus run context]")[0])
    assert answer["children"] == [] and len(answer["pending"]) == 1
    assert "user guidance arrived" in answer["interrupted"]
    child_id = answer["pending"][0]["childRunId"]
    assert not [e for e in env.events(child_id) if e["kind"] in ("steering_submitted", "steering_queued")]
    assert env.run(child_id)["status"] in ("running", "queued")
    final = env.wait_final(run, timeout=60)
    assert final["status"] == "succeeded", final
