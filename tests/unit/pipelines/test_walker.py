"""The pipeline walk on the durable engine (issue 27): real run core, store (SQLite and PostgreSQL),
approval broker and DBOS; the vendor's stream replayed, the model's decisions scripted."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from octipusd.errors import ConflictError, InvalidRequestError
from octipusd.pipelines.service import ResumeRequest
from octipusd.store.pipeline_records import AttemptStatus, ItemStatus, PipelineStatus
from octipusd.testing.stub_cli import session_id_from_argv
from tests.unit.pipelines.conftest import HANG_S, USER, Answer, PipelineRig, handoff

pytestmark = pytest.mark.anyio

P = PipelineStatus

TWO_STAGES: dict[str, Any] = {
    "name": "build",
    "description": "implement then verify each item",
    "steps": [
        {"name": "implement", "topic": "coding", "loopOverPlan": True},
        {
            "name": "verify",
            "topic": "qa",
            "stageType": "qa_validation",
            "loopOverPlan": True,
            "maxRetries": 2,
        },
    ],
}


def is_review(prompt: str) -> bool:
    """The stage is the reviewer (a step without a prompt gets ``Execute: <name>``)."""
    return prompt.startswith("Execute: verify")


def passing(prompt: str) -> Answer:
    if is_review(prompt):
        return Answer(handoff(status="pass", summary="verified"))
    return Answer(handoff(status="done", summary="implemented"))


async def test_a_two_item_two_stage_pipeline_completes(pipelines: PipelineRig) -> None:
    pipelines.model.decide = passing
    created = await pipelines.create(TWO_STAGES, items=("one", "two"))
    done = await pipelines.wait(created.id, P.COMPLETED, P.FAILED)
    assert done.status is P.COMPLETED, done.error
    status = pipelines.status(created.id)
    assert [i["status"] for i in status["items"]] == ["done", "done"]
    assert [(a["stage"], a["status"]) for a in status["attempts"]] == [
        ("implement", "succeeded"),
        ("verify", "succeeded"),
        ("implement", "succeeded"),
        ("verify", "succeeded"),
    ]
    assert len(pipelines.model.prompts) == 4
    plan = pipelines.store.get_work_plan(done.session_id)
    assert plan is not None and plan.plan["title"] == "build"
    assert [s["status"] for s in plan.plan["steps"]] == ["completed", "completed"]


def _hang_first(title: str, partial: str) -> Any:
    """The implementer of item ``title`` hangs the first time (its text so far ``partial``); the rest pass."""
    calls: list[str] = []

    def decide(prompt: str) -> Answer:
        if not is_review(prompt) and f"Title: {title}" in prompt and not calls:
            calls.append(prompt)
            return Answer(handoff(status="done", summary="late"), delay=HANG_S, partial=partial)
        return passing(prompt)

    return decide


async def _live(pipelines: PipelineRig, pipeline_id: str) -> None:
    """Wait until the pipeline's stage worker is live and has streamed its first text."""

    def working() -> bool:
        handle = pipelines.walker.live.get(pipeline_id)
        if handle is None:
            return False
        return any(e.kind == "text" for e in pipelines.store.list_events(handle.run_id))

    await pipelines.wait_for(working)


async def test_stop_then_resume_continues_the_same_attempt_and_completes(pipelines: PipelineRig) -> None:
    pipelines.model.decide = _hang_first("one", "half of item one")
    created = await pipelines.create(TWO_STAGES, items=("one", "two"))
    await _live(pipelines, created.id)
    stopped = await pipelines.service.stop(created.id, pipelines.caller)
    assert stopped["status"] == "stopped"
    await pipelines.wait_for(
        lambda: any(
            a.status is AttemptStatus.STOPPED for a in pipelines.store.pipeline_snapshot(created.id).attempts
        )
    )
    status = pipelines.status(created.id)
    assert status["status"] == "stopped" and status["incompleteAttempt"]["text"] == "half of item one"
    attempt = status["incompleteAttempt"]["id"]
    answer = await pipelines.resume(created.id, ResumeRequest())  # its replay review approved
    assert (answer["id"], answer["status"]) == (created.id, "resuming")
    done = await pipelines.wait(created.id, P.COMPLETED, P.FAILED)
    assert done.status is P.COMPLETED, done.error
    implement = [a for a in pipelines.store.pipeline_snapshot(created.id).attempts if a.stage == "implement"]
    assert implement[0].id == attempt and implement[0].status is AttemptStatus.SUCCEEDED
    assert len(implement) == 2  # item one's attempt continued, item two's
    resumed = pipelines.model.prompts[1]
    assert "INCOMPLETE" in resumed and "half of item one" in resumed
    # the stopped run's vendor session was kept under the attempt: the resumed run continues it
    first, again = pipelines.model.argvs[:2]
    assert any(a.startswith("--resume") for a in again), again
    assert session_id_from_argv(again) == session_id_from_argv(first)
    assert pipelines.status(created.id)["incompleteAttempt"] is None


async def test_an_attempt_interrupted_twice_keeps_both_parts_of_its_text(pipelines: PipelineRig) -> None:
    parts: list[str] = []

    def decide(prompt: str) -> Answer:
        if not is_review(prompt) and "Title: one" in prompt and len(parts) < 2:
            parts.append(f"part {len(parts) + 1}")
            return Answer(handoff(status="done", summary="late"), delay=HANG_S, partial=parts[-1])
        return passing(prompt)

    pipelines.model.decide = decide
    created = await pipelines.create(TWO_STAGES, items=("one",))
    for _round in range(2):
        await _live(pipelines, created.id)
        await pipelines.service.stop(created.id, pipelines.caller)
        await pipelines.wait_for(lambda: created.id not in pipelines.walker.live)
        await pipelines.wait_for(
            lambda: pipelines.store.pipeline_snapshot(created.id).attempts[0].status is AttemptStatus.STOPPED
        )
        if _round == 0:
            await pipelines.resume(created.id, ResumeRequest())
            await pipelines.wait_for(lambda: len(pipelines.model.prompts) == 2)
    incomplete = pipelines.status(created.id)["incompleteAttempt"]
    assert incomplete["text"] == "part 1\n\npart 2"
    await pipelines.resume(created.id, ResumeRequest())
    done = await pipelines.wait(created.id, P.COMPLETED, P.FAILED)
    assert done.status is P.COMPLETED, done.error
    assert "part 1\n\npart 2" in pipelines.model.prompts[2]


def _qa_always_fails(prompt: str) -> Answer:
    if is_review(prompt):
        return Answer(handoff(status="fail", summary="not yet", issues=["missing tests"]))
    return Answer(handoff(status="done", summary="implemented"))


async def test_qa_failures_retry_with_the_issues_then_ask_a_person_and_a_decline_fails(
    pipelines: PipelineRig,
) -> None:
    pipelines.model.decide = _qa_always_fails
    created = await pipelines.create(TWO_STAGES, items=("one", "two"))
    asking = await pipelines.wait(created.id, P.AWAITING_APPROVAL, P.FAILED, P.COMPLETED)
    assert asking.status is P.AWAITING_APPROVAL, asking.error
    question = asking.metadata["pendingApproval"]
    assert question["stage"] == "verify" and question["itemTitle"] == "one"
    stages = [a.stage for a in pipelines.store.pipeline_snapshot(created.id).attempts]
    assert stages == ["implement", "verify"] * 3  # maxRetries 2: two bounces, then the person
    assert all("missing tests" in p for p in pipelines.model.prompts[2::2])
    approval = pipelines.store.get_approval(question["requestId"])
    assert approval.status == "pending" and approval.session_id == created.session_id
    await pipelines.broker.answer(approval.id, approve=False, decided_by=USER, reason="no")
    failed = await pipelines.wait(created.id, P.FAILED, P.COMPLETED)
    assert failed.status is P.FAILED and "declined" in (failed.error or "")
    items = pipelines.store.list_pipeline_items(created.id)
    assert [i.status for i in items] == [ItemStatus.FAILED, ItemStatus.PENDING]
    assert pipelines.status(created.id)["pendingApproval"] is None

    # fromStage: rewind to the implementer; it now satisfies the review
    pipelines.model.decide = passing
    with pytest.raises(InvalidRequestError, match="fromStage"):
        await pipelines.resume(created.id, ResumeRequest(from_stage="nope"))
    await pipelines.resume(created.id, ResumeRequest(from_stage="implement"))
    done = await pipelines.wait(created.id, P.COMPLETED, P.FAILED)
    assert done.status is P.COMPLETED, done.error
    attempts = pipelines.store.pipeline_snapshot(created.id).attempts
    assert "rewind" in [a.start_reason for a in attempts]
    assert [i.status for i in pipelines.store.list_pipeline_items(created.id)] == [ItemStatus.DONE] * 2
    assert done.workflow_id == f"{created.id}.g{done.generation}"


async def test_skip_items_with_evidence_and_two_concurrent_resumes(pipelines: PipelineRig) -> None:
    pipelines.model.decide = _hang_first("one", "started one")
    created = await pipelines.create(TWO_STAGES, items=("one", "two"))
    await _live(pipelines, created.id)
    await pipelines.service.stop(created.id, pipelines.caller)
    await pipelines.wait_for(lambda: created.id not in pipelines.walker.live)
    one, two = pipelines.store.list_pipeline_items(created.id)
    with pytest.raises(InvalidRequestError, match="skipItems"):
        await pipelines.resume(created.id, ResumeRequest(skip_items=(one.id, "zz")))
    assert pipelines.store.get_pipeline(created.id).status is P.STOPPED  # nothing changed
    request = ResumeRequest(skip_items=(one.id,), evidence="commit abc123, tests green")
    answers: list[object] = []

    async def resume() -> None:
        try:
            answers.append(await pipelines.resume(created.id, request))
        except ConflictError as exc:
            answers.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(resume)
        tg.start_soon(resume)
    assert sum(isinstance(a, ConflictError) for a in answers) == 1
    done = await pipelines.wait(created.id, P.COMPLETED, P.FAILED)
    assert done.status is P.COMPLETED, done.error
    one, two = pipelines.store.list_pipeline_items(created.id)
    assert (one.status, one.evidence) == (ItemStatus.SKIPPED, "commit abc123, tests green")
    assert two.status is ItemStatus.DONE


async def test_items_added_and_reordered_mid_run_apply_at_the_next_boundary(pipelines: PipelineRig) -> None:
    from octipusd.store.pipeline_item_store import ItemChanges, ItemDraft

    gate = anyio.Event()
    titles: list[str] = []

    def decide(prompt: str) -> Answer:
        if not is_review(prompt):
            titles.append(prompt.split("Title: ")[1].split("\n")[0])
        return Answer(passing(prompt).text, delay=1.0 if not gate.is_set() else 0.0)

    pipelines.model.decide = decide
    created = await pipelines.create(TWO_STAGES, items=("one", "two", "three"))
    await _live(pipelines, created.id)
    _one, two, three = pipelines.store.list_pipeline_items(created.id)
    await pipelines.service.update_items(
        created.id, pipelines.caller, ItemChanges(add=(ItemDraft("four"),), order=(three.id, two.id))
    )
    now = pipelines.store.list_pipeline_items(created.id)  # not applied before the boundary
    assert [i.title for i in now] == ["one", "two", "three"]
    pending = pipelines.store.get_pipeline(created.id).pending_changes
    assert len(pending) == 1
    gate.set()
    done = await pipelines.wait(created.id, P.COMPLETED, P.FAILED)
    assert done.status is P.COMPLETED, done.error
    assert titles == ["one", "three", "two", "four"]
