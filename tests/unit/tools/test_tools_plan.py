"""Work-plan tools and the tool registry."""

from __future__ import annotations

from typing import Any

import pytest

from octipusd.bridge.fakes import FakeToolHost
from octipusd.errors import InvalidRequestError
from octipusd.toolkit import RunIdentity, ToolHost, ToolResult, ToolSpec, validate_tool_specs
from octipusd.tools import (
    DEFAULT_TOOLS,
    GET_CLI_RUN_CONTEXT,
    GET_WORK_PLAN,
    UPDATE_WORK_PLAN,
    validate_work_plan,
)

pytestmark = pytest.mark.anyio

GOOD = {
    "title": "T",
    "goal": "G",
    "steps": [
        {"id": "1", "title": "first", "status": "pending"},
        {"id": "2", "title": "second", "status": "blocked", "notes": "waiting for review"},
    ],
}


def test_valid_plan_is_normalized() -> None:
    assert validate_work_plan(GOOD) == GOOD
    assert validate_work_plan({"steps": []}) == {"steps": []}
    assert validate_work_plan({"title": None, "steps": []}) == {"steps": []}


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        ([], "plan: must be an object, got list"),
        ({}, "plan.steps: required"),
        ({"steps": {}}, "plan.steps: must be a list, got dict"),
        ({"steps": [], "owner": "x"}, "plan: unknown field(s) owner"),
        ({"title": 3, "steps": []}, "plan.title: must be a string, got int"),
        ({"steps": ["do it"]}, "plan.steps[0]: must be an object, got str"),
        ({"steps": [{"title": "x", "status": "pending"}]}, "plan.steps[0].id: required"),
        ({"steps": [{"id": "a", "status": "pending"}]}, "plan.steps[0].title: required"),
        (
            {"steps": [{"id": "a", "title": " ", "status": "pending"}]},
            "plan.steps[0].title: must not be empty",
        ),
        (
            {"steps": [{"id": "a", "title": "x", "status": "done"}]},
            "plan.steps[0].status: must be one of pending, in_progress, completed, blocked, got 'done'",
        ),
        (
            {
                "steps": [
                    {"id": "a", "title": "x", "status": "pending"},
                    {"id": "a", "title": "y", "status": "pending"},
                ]
            },
            "plan.steps[1].id: duplicate step id 'a'",
        ),
        (
            {"steps": [{"id": "a", "title": "x", "status": "pending", "notes": 1}]},
            "plan.steps[0].notes: must be",
        ),
        (
            {"steps": [{"id": "a", "title": "x", "status": "pending", "due": "now"}]},
            "plan.steps[0]: unknown field",
        ),
    ],
)
def test_invalid_plan_names_the_bad_field(plan: Any, message: str) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        validate_work_plan(plan)
    assert caught.value.message.startswith(message)


async def test_update_then_get_through_the_host(identity: RunIdentity) -> None:
    host = FakeToolHost()
    assert await GET_WORK_PLAN.handler(identity, host, {}) == {"plan": None}
    saved = await UPDATE_WORK_PLAN.handler(identity, host, {"plan": GOOD})
    assert isinstance(saved, dict)
    assert saved["plan"]["steps"] == GOOD["steps"] and saved["plan"]["id"] == "plan-session-1"
    assert await GET_WORK_PLAN.handler(identity, host, {}) == saved
    context = await GET_CLI_RUN_CONTEXT.handler(identity, host, {})
    assert isinstance(context, dict) and context["plan"] == saved["plan"]
    with pytest.raises(InvalidRequestError, match="plan: required"):
        await UPDATE_WORK_PLAN.handler(identity, host, {})


def test_default_tools() -> None:
    by_name = {spec.name: spec for spec in DEFAULT_TOOLS}
    assert list(by_name) == [
        "get_cli_run_context",
        "get_work_plan",
        "update_work_plan",
        "spawn_child",
        "collect_children",
        "steer_child",
        "shell__run",
        "shell__run_background",
        "shell__read_background",
        "shell__stop_background",
        "create_pipeline",
        "get_pipeline_status",
        "resume_pipeline",
        "stop_pipeline",
        "update_pipeline_items",
        "answer_pipeline_approval",
        "monitor__create",
        "monitor__list",
        "monitor__pause",
        "monitor__resume",
        "monitor__cancel",
    ]
    assert {name for name, spec in by_name.items() if spec.bypass_queue} == {
        "get_cli_run_context",
        "get_work_plan",
        "get_pipeline_status",
    }
    assert {name for name, spec in by_name.items() if spec.read_only} == {
        "get_cli_run_context",
        "get_work_plan",
        "get_pipeline_status",
        "monitor__list",
        "shell__read_background",
    }


async def _noop(identity: RunIdentity, host: ToolHost, arguments: dict[str, Any]) -> ToolResult:
    return ""


def _spec(name: str = "ok", schema: dict[str, Any] | None = None, timeout: float = 1.0) -> ToolSpec:
    return ToolSpec(
        name=name,
        description="",
        input_schema=schema if schema is not None else {"type": "object"},
        handler=_noop,
        timeout_seconds=timeout,
    )


@pytest.mark.parametrize(
    ("specs", "message"),
    [
        ([_spec("bad name")], "invalid tool name"),
        ([_spec("a"), _spec("a")], "duplicate tool name"),
        ([_spec(schema={"type": "array"})], "must have type 'object'"),
        ([_spec(schema={"type": "object", "properties": {"session_id": {}}})], "identity keys"),
        ([_spec(timeout=0)], "timeout_seconds must be positive"),
    ],
)
def test_invalid_tool_sets_are_refused(specs: list[ToolSpec], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        validate_tool_specs(specs)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"revision": -1, "plan": GOOD}, "revision: must be a whole number, 0 or more, got -1"),
        ({"revision": True, "plan": GOOD}, "revision: must be a whole number"),
        ({"revision": "1", "plan": GOOD}, "revision: must be a whole number"),
        ({"plan": {**GOOD, "revision": 1}}, "plan.revision: send the revision as update_work_plan's own"),
        ({"plan": GOOD, "feedbackResponses": {}}, "feedbackResponses: must be a list, got dict"),
        ({"plan": GOOD, "feedbackResponses": [{"status": "applied"}]}, "feedbackResponses[0].id: required"),
        (
            {"plan": GOOD, "feedbackResponses": [{"id": "f", "status": "pending"}]},
            "feedbackResponses[0].status: must be one of applied, needs_clarification, got 'pending'",
        ),
        (
            {
                "plan": GOOD,
                "feedbackResponses": [{"id": "f", "status": "applied"}, {"id": "f", "status": "applied"}],
            },
            "feedbackResponses[1].id: feedback 'f' is answered twice",
        ),
        (
            {"plan": GOOD, "feedbackResponses": [{"id": "f", "status": "applied", "note": "x"}]},
            "feedbackResponses[0]: unknown field(s) note",
        ),
        ({"plan": GOOD, "feedback": []}, "arguments: unknown field(s) feedback"),
    ],
)
async def test_bad_update_arguments_name_the_field(
    identity: RunIdentity, arguments: Any, message: str
) -> None:
    host = FakeToolHost()
    with pytest.raises(InvalidRequestError) as caught:
        await UPDATE_WORK_PLAN.handler(identity, host, arguments)
    assert caught.value.message.startswith(message), caught.value.message
    assert host.plans == {}


async def test_update_carries_the_revision_and_the_feedback_answers(identity: RunIdentity) -> None:
    host = FakeToolHost()
    host.feedback[identity.session_id] = [{"id": "f1", "status": "pending", "text": "more tests"}]
    first = await UPDATE_WORK_PLAN.handler(identity, host, {"plan": GOOD})
    assert isinstance(first, dict) and first["plan"]["revision"] == 1
    answered = await UPDATE_WORK_PLAN.handler(
        identity,
        host,
        {
            "revision": 1,
            "plan": GOOD,
            "feedbackResponses": [{"id": "f1", "status": "applied", "response": "added"}],
        },
    )
    assert isinstance(answered, dict) and answered["plan"]["revision"] == 2
    assert host.feedback[identity.session_id][0] == {
        "id": "f1",
        "status": "applied",
        "text": "more tests",
        "response": "added",
    }
    assert UPDATE_WORK_PLAN.input_schema["properties"]["feedbackResponses"]["items"]["properties"]["status"][
        "enum"
    ] == [
        "applied",
        "needs_clarification",
    ]
