"""Plan feedback end to end (issue 14 item 2): people give feedback through the API and octipusctl, the
real claude binary (against the scripted Anthropic model) reads it in get_cli_run_context and answers it
in update_work_plan with the plan's current revision; a stale revision is refused naming the current one."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from octipusd.errors import ApiError
from octipusd.runtime.feedback import unhandled_plan_feedback
from octipusd.store.repository import Store
from octipusd.testing.script import parse_script
from tests.e2e.conftest import Env

CTL = str(Path(sys.executable).parent / "octipusctl")
STEPS = [
    {"id": "s1", "title": "schema", "status": "in_progress"},
    {"id": "s2", "title": "database", "status": "pending"},
]
PLAN = {"title": "Service", "steps": STEPS}
PLAN_2 = {"title": "Service", "steps": [*STEPS, {"id": "s3", "title": "rollback", "status": "pending"}]}


def _tool(name: str, arguments: dict[str, Any], delay: float = 0) -> dict[str, Any]:
    step: dict[str, Any] = {
        "content": [{"type": "tool_use", "name": f"mcp__octipus__{name}", "input": arguments}]
    }
    if delay:
        step["delay_seconds"] = delay
    return step


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}]}


FIRST_TURN = [_tool("update_work_plan", {"revision": 0, "plan": PLAN}), _text("planned")]


def ctl(env: Env, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CTL, *args], env=env.daemon.env, capture_output=True, text=True, timeout=120)


def ok(env: Env, *args: str) -> str:
    done = ctl(env, *args)
    assert done.returncode == 0, (
        f"octipusctl {' '.join(args)} exited {done.returncode}: {done.stderr}{done.stdout}"
    )
    return done.stdout


def _refused(env: Env, method: str, path: str, body: dict[str, Any]) -> ApiError:
    with pytest.raises(ApiError) as caught:
        env.client.request(method, path, json=body)
    return caught.value


def _tool_results(env: Env) -> dict[str, str]:
    """tool_use id -> the text of its result, over the last model request."""
    results: dict[str, str] = {}
    for message in env.model.message_requests[-1].body["messages"]:
        for block in message.get("content") if isinstance(message.get("content"), list) else []:
            if block.get("type") == "tool_result":
                content = block.get("content")
                text = (
                    "".join(p.get("text", "") for p in content) if isinstance(content, list) else str(content)
                )
                results[block["tool_use_id"]] = text
    return results


def _results_of(env: Env, tool: str) -> list[str]:
    uses = [
        block["id"]
        for message in env.model.message_requests[-1].body["messages"]
        if message.get("role") == "assistant" and isinstance(message.get("content"), list)
        for block in message["content"]
        if block.get("type") == "tool_use" and block.get("name") == f"mcp__octipus__{tool}"
    ]
    results = _tool_results(env)
    return [results[u] for u in uses if u in results]


def _first_json(text: str) -> Any:
    """The tool's own result: the first JSON value of its text (the run context block follows)."""
    return json.JSONDecoder().raw_decode(text)[0]


def test_feedback_reaches_the_agent_and_its_answers_reach_the_person(octipus: Callable[..., Env]) -> None:
    env = octipus({"steps": FIRST_TURN})
    session = env.new_session()
    assert env.wait_final(env.post(session, "Plan the service."))["status"] == "succeeded"
    shown = ok(env, "plan", session)
    assert "plan Service" in shown and "(revision 1," in shown and "no feedback" in shown

    # a person's feedback: on a step from octipusctl, on the whole plan through the API
    on_step = json.loads(
        ok(env, "plan", "feedback", session, "Use PostgreSQL, not SQLite.", "--step", "s2", "--json")
    )
    assert (on_step["step_id"], on_step["status"], on_step["plan_revision"]) == ("s2", "pending", 1)
    whole = env.client.request(
        "POST", f"/sessions/{session}/plan/feedback", json={"text": "Add a rollback step."}
    )
    assert whole["step_id"] is None and whole["author"] == on_step["author"]

    # bad input names the field
    assert (
        _refused(
            env, "POST", f"/sessions/{session}/plan/feedback", {"text": "x", "step_id": "s9"}
        ).http_status
        == 400
    )
    unknown_step = ctl(env, "plan", "feedback", session, "x", "--step", "s9")
    assert (
        unknown_step.returncode == 2
        and "step_id: the plan (revision 1) has no step 's9'" in unknown_step.stderr
    )
    empty = _refused(env, "POST", f"/sessions/{session}/plan/feedback", {"text": ""})
    assert empty.http_status == 422 and "text" in empty.message
    blank = _refused(env, "POST", f"/sessions/{session}/plan/feedback", {"text": "   "})
    assert blank.http_status == 400 and "text: must not be empty" in blank.message
    unknown_id = _refused(env, "POST", f"/sessions/{session}/plan/feedback/{'0' * 32}/reply", {"text": "x"})
    assert unknown_id.http_status == 404 and "feedback_id: no feedback" in unknown_id.message
    assert _refused(env, "POST", f"/sessions/{'0' * 32}/plan/feedback", {"text": "x"}).http_status == 404

    # the second turn: read the context (while it waits, a third item arrives), a stale update, the answer
    answers = [
        {"id": whole["id"], "status": "applied", "response": "added step s3"},
        {"id": on_step["id"], "status": "needs_clarification", "response": "Which PostgreSQL version?"},
    ]
    second_turn = [
        *FIRST_TURN,
        _tool("get_cli_run_context", {}, delay=4),
        _tool("update_work_plan", {"revision": 0, "plan": PLAN_2, "feedbackResponses": answers}),
        _tool("update_work_plan", {"revision": 1, "plan": PLAN_2, "feedbackResponses": answers}),
        _text("answered the feedback"),
    ]
    env.model.script = parse_script({"steps": second_turn})
    run = env.post(session, "Apply the feedback.")
    env.wait(lambda: any(r.step == 2 for r in env.model.message_requests), 60, "the context step to be asked")
    late = env.client.request(
        "POST", f"/sessions/{session}/plan/feedback", json={"text": "Also add metrics."}
    )
    # the late item is still pending when the vendor finishes: one follow-up invocation handles it
    late_answer = [{"id": late["id"], "status": "applied", "response": "metrics added"}]
    env.model.script = parse_script(
        {
            "steps": [
                *second_turn,
                _tool("update_work_plan", {"revision": 2, "plan": PLAN_2, "feedbackResponses": late_answer}),
                _text("applied the late feedback"),
            ]
        }
    )
    final = env.wait_final(run)
    assert final["status"] == "succeeded", final
    assert final["result_text"] == "answered the feedback\n\napplied the late feedback", final
    (follow_up,) = [
        e["data"] for e in env.events(run) if e["kind"] == "notice" and e["data"].get("follow_up")
    ]
    assert "1 feedback item remained" in follow_up["message"], follow_up
    assert "not handled yet" in env.model.conversation_texts()[-2]  # the follow-up's prompt said so

    (context_text,) = _results_of(env, "get_cli_run_context")
    context = json.loads(context_text)
    assert context["plan"]["revision"] == 1 and context["plan"]["steps"] == STEPS
    assert [
        (f["id"], f["status"], f["text"], f.get("stepId"), f["planRevision"]) for f in context["feedback"]
    ] == [
        (on_step["id"], "pending", "Use PostgreSQL, not SQLite.", "s2", 1),
        (whole["id"], "pending", "Add a rollback step.", None, 1),
        (late["id"], "pending", "Also add metrics.", None, 1),
    ]
    first, stale, saved, late_saved = _results_of(env, "update_work_plan")
    assert _first_json(first)["plan"]["revision"] == 1, first
    assert "revision: required: the plan's current revision is 1" in stale, stale
    assert _first_json(saved)["plan"]["revision"] == 2, saved
    assert _first_json(late_saved)["plan"]["revision"] == 3, late_saved

    found = env.client.request("GET", f"/sessions/{session}/plan")
    assert found["revision"] == 3 and found["plan"] == PLAN_2
    by_id = {f["id"]: f for f in found["feedback"]}
    assert (by_id[whole["id"]]["status"], by_id[whole["id"]]["response"]) == ("applied", "added step s3")
    assert (
        by_id[on_step["id"]]["status"] == "needs_clarification" and by_id[late["id"]]["status"] == "applied"
    )
    assert by_id[whole["id"]]["responded_revision"] == 2
    events = [e for e in env.events(run) if e["kind"] == "plan_feedback"]
    assert [(e["data"]["action"], e["data"]["feedback_id"]) for e in events] == [
        ("added", late["id"]),
        ("answered", whole["id"]),
        ("answered", on_step["id"]),
        ("answered", late["id"]),
    ]
    shown = ok(env, "plan", session)
    assert (
        "(revision 3," in shown
        and "needs_clarific" in shown
        and "Which PostgreSQL" in shown
        and "rollback" in shown
    )

    # the person answers the question: the item is pending again, and counts as unhandled
    db = f"sqlite:///{env.daemon.root / 'data' / 'octipus' / 'octipus.db'}"
    store = Store.open(db)
    try:
        assert anyio.run(unhandled_plan_feedback, store, session) == 0  # a question waits for the person
        replied = ok(env, "plan", "reply", session, on_step["id"], "PostgreSQL 16")
        assert "pending again" in replied
        assert anyio.run(unhandled_plan_feedback, store, session) == 1
    finally:
        store.close()
    item = {f["id"]: f for f in env.client.request("GET", f"/sessions/{session}/plan")["feedback"]}[
        on_step["id"]
    ]
    assert item["status"] == "pending" and item["replies"][0]["text"] == "PostgreSQL 16"
    assert item["replies"][0]["answering"] == "Which PostgreSQL version?"


def test_feedback_no_follow_up_could_handle_is_named_in_the_result(octipus: Callable[..., Env]) -> None:
    """With follow-ups off, feedback still pending when the vendor finished is named in the run's
    result and a notice, never silently left."""
    env = octipus(
        {"steps": [*FIRST_TURN, _text("ignored the feedback")]},
        extra_env={"OCTIPUS_AGENT__MAXFOLLOWUPS": "0"},
    )
    session = env.new_session()
    assert env.wait_final(env.post(session, "Plan the service."))["status"] == "succeeded"
    assert "the plan" not in (env.run(env.client.request("GET", "/runs")[0]["id"])["result_text"] or "")
    env.client.request("POST", f"/sessions/{session}/plan/feedback", json={"text": "Add a rollback step."})
    run = env.post(session, "Go on.")
    final = env.wait_final(run)
    assert final["status"] == "succeeded", final
    assert final["result_text"].startswith(
        "ignored the feedback\n\n[Octipus] 1 feedback item on the work plan"
    )
    assert "the follow-up limit of 0 was reached" in final["result_text"]
    notices = [
        e["data"] for e in env.events(run) if e["kind"] == "notice" and e["data"].get("feedback_pending")
    ]
    assert [n["feedback_pending"] for n in notices] == [1]
