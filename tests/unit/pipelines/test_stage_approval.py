"""A ``requiresApproval`` stage asks a person before it runs (issue 28 item 4), on the real walk,
store (SQLite and PostgreSQL), approval broker and durable engine: after a ``producesPlan`` stage
the prompt is the plan approval (its items and the gate commands in its reason); a denial stops the
pipeline at that stage, resumable; the resume asks again; an approval covers the stage for every
item of the walk and stores the gate commands with the decision; a QA stage's approved
verifyCommand then runs without asking, while the same command in a pipeline without an approval
prompt asks."""

from __future__ import annotations

from typing import Any

import pytest

from octipusd.pipelines.service import ResumeRequest
from octipusd.store.pipeline_records import APPROVED_GATE_COMMANDS_KEY, NodeStatus, PipelineStatus
from octipusd.store.records import Approval
from tests.unit.pipelines.conftest import USER, Answer, PipelineRig, handoff

pytestmark = pytest.mark.anyio

P = PipelineStatus

GATED: dict[str, Any] = {
    "name": "gated",
    "parameters": [{"key": "word", "inputType": "string"}],
    "steps": [
        {"name": "plan", "topic": "planning", "producesPlan": True},
        {
            "name": "implement",
            "topic": "coding",
            "loopOverPlan": True,
            "requiresApproval": True,
            "verifyCommand": "echo {{param.word}}",
        },
        {"name": "report", "topic": "writing", "verifyCommand": "test -n '{{previousOutput}}'"},
    ],
}


def planner(prompt: str) -> Answer:
    if prompt.startswith("Execute: plan"):
        items = [{"title": "one", "acceptance": "works"}, {"title": "two", "acceptance": "works"}]
        return Answer(handoff(status="done", summary="planned", items=items))
    return Answer(handoff(status="done", summary="done"))


def stages_run(pipelines: PipelineRig) -> list[str]:
    return [p.split("\n", 1)[0] for p in pipelines.model.prompts]


async def test_the_plan_approval_lists_items_and_gate_commands_a_denial_stops_and_the_resume_asks_again(
    pipelines: PipelineRig,
) -> None:
    pipelines.model.decide = planner
    created = await pipelines.create(GATED, params={"word": "hi"})
    asking = await pipelines.wait(created.id, P.AWAITING_APPROVAL, P.FAILED, P.COMPLETED)
    assert asking.status is P.AWAITING_APPROVAL, asking.error
    pending = pipelines.status(created.id)["pendingApproval"]
    assert (pending["kind"], pending["stage"], pending["toolName"]) == (
        "stage_approval",
        "implement",
        "octipus:pipeline",
    )
    approval = pipelines.store.get_approval(pending["requestId"])
    assert "Approve the plan (2 items: one; two) and stage implement" in (approval.reason or "")
    assert "`echo hi` (stage implement)" in (approval.reason or "")
    assert "previousOutput" not in (approval.reason or "")  # not known in advance: not listed
    assert approval.input["gateCommands"] == [{"nodeKey": "n2", "stage": "implement", "command": "echo hi"}]
    assert [i["title"] for i in approval.input["items"]] == ["one", "two"]
    assert stages_run(pipelines) == ["Execute: plan"]
    node = next(n for n in pipelines.store.pipeline_snapshot(created.id).nodes if n.key == "n2")
    assert node.status is NodeStatus.AWAITING_APPROVAL

    await pipelines.broker.answer(approval.id, approve=False, decided_by=USER, reason="not yet")
    stopped = await pipelines.wait(created.id, P.STOPPED, P.FAILED, P.COMPLETED)
    assert stopped.status is P.STOPPED and "denied" in (stopped.summary or ""), stopped
    assert stages_run(pipelines) == ["Execute: plan"]
    assert stopped.metadata.get(APPROVED_GATE_COMMANDS_KEY) is None

    await pipelines.resume(created.id, ResumeRequest())  # the plan ran: its replay review approved first
    await pipelines.wait_for(
        lambda: (
            (p := pipelines.store.get_pipeline(created.id)).status is P.AWAITING_APPROVAL
            and p.metadata["pendingApproval"]["kind"] == "stage_approval"
            and p.metadata["pendingApproval"]["requestId"] != approval.id
        )
    )
    again = pipelines.status(created.id)["pendingApproval"]
    await pipelines.broker.answer(again["requestId"], approve=True, decided_by=USER)
    done = await pipelines.wait(created.id, P.COMPLETED, P.FAILED, P.STOPPED)
    assert done.status is P.COMPLETED, done.error
    # one approval for the stage over both items of the walk
    assert stages_run(pipelines) == [
        "Execute: plan",
        "Execute: implement",
        "Execute: implement",
        "Execute: report",
    ]
    # the approved gate commands (stored with the decision: test_gate_commands) end with the run
    assert APPROVED_GATE_COMMANDS_KEY not in done.metadata


def checked(required: bool) -> dict[str, Any]:
    """Implement, then a QA stage whose verifyCommand is a gate command."""
    return {
        "name": "checked",
        "parameters": [{"key": "word", "inputType": "string"}],
        "steps": [
            {"name": "implement", "topic": "coding"},
            {
                "name": "verify",
                "topic": "qa",
                "stageType": "qa_validation",
                "requiresApproval": required,
                "verifyCommand": "printf {{param.word}}",  # not allowed by the default rules: it asks
            },
        ],
    }


def reviewer(prompt: str) -> Answer:
    if prompt.startswith("Execute: verify"):
        return Answer(handoff(status="pass", summary="verified"))
    return Answer(handoff(status="done", summary="implemented"))


async def test_an_approved_verify_command_runs_without_asking_and_an_unapproved_one_asks(
    pipelines: PipelineRig,
) -> None:
    pipelines.model.decide = reviewer
    created = await pipelines.create(checked(True), params={"word": "gate-ok"})
    asking = await pipelines.wait(created.id, P.AWAITING_APPROVAL, P.FAILED, P.COMPLETED)
    assert asking.status is P.AWAITING_APPROVAL, asking.error
    request = pipelines.status(created.id)["pendingApproval"]["requestId"]
    await pipelines.broker.answer(request, approve=True, decided_by=USER)
    done = await pipelines.wait(created.id, P.COMPLETED, P.FAILED, P.STOPPED)
    assert done.status is P.COMPLETED, done.error
    assert "RESULT: exit 0" in pipelines.model.prompts[-1], pipelines.model.prompts[-1]

    # the same verifyCommand without an approval prompt: the gate asks a person for it
    plain = await pipelines.create(checked(False), params={"word": "gate-ok"})

    def asked() -> list[Approval]:
        pending = pipelines.store.list_approvals(status="pending")
        return [a for a in pending if a.tool_id == "shell__run" and a.subject == "printf gate-ok"]

    await pipelines.wait_for(lambda: bool(asked()))
    await pipelines.broker.answer(asked()[0].id, approve=False, decided_by=USER)
    ended = await pipelines.wait(plain.id, P.COMPLETED, P.FAILED, P.STOPPED)
    assert ended.status is P.COMPLETED, ended.error
    assert "RESULT: could not run (not run: denied by ann" in pipelines.model.prompts[-1]
