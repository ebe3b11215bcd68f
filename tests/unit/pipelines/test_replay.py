"""The replay review of a resume or rewind (seed 000 "Pipeline resume and rewind", FACTS.md §6 Replay;
issue 28 items 3 and 6), at the runner: the real run core, store (SQLite and PostgreSQL), approval
broker and durable engine; the vendor's stream replayed, the model's decisions scripted."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from octipusd.errors import ConflictError, ForbiddenError, StoreError
from octipusd.pipelines.replay import MISSING_RECORDS_WARNING, REPLAY_SUBJECT
from octipusd.pipelines.service import PipelineCaller, PipelineLimits, ResumeRequest
from octipusd.store.pipeline_records import REPLAY_REVIEW_KEY, AttemptStatus, NodeStatus, PipelineStatus
from octipusd.store.records import ApprovalStatus
from tests.unit.pipelines.conftest import USER, PipelineRig
from tests.unit.pipelines.test_runner_failures import _fail_once
from tests.unit.pipelines.test_walker import TWO_STAGES, _hang_first, _live, passing

pytestmark = pytest.mark.anyio

P = PipelineStatus
#: The watchdog's limit in these tests (seconds).
WATCHDOG_S = 1.0


@pytest.fixture
def limits() -> PipelineLimits:
    return PipelineLimits(resume_watchdog_s=WATCHDOG_S, watchdog_poll_s=0.1)


async def _stopped_mid_stage(pipelines: PipelineRig) -> str:
    """A pipeline stopped while its first stage worked (one stage attempt ran); its id."""
    pipelines.model.decide = _hang_first("one", "half")
    created = await pipelines.create(TWO_STAGES, items=("one",))
    await _live(pipelines, created.id)
    await pipelines.service.stop(created.id, pipelines.caller)
    await pipelines.wait_for(
        lambda: created.id not in pipelines.walker.live and _parked(pipelines, created.id)
    )
    return created.id


def _parked(pipelines: PipelineRig, pipeline_id: str) -> bool:
    """The walk parked: its attempt stopped, the attempt's node no longer running."""
    snapshot = pipelines.store.pipeline_snapshot(pipeline_id)
    last = snapshot.attempts[-1]
    node = next(n for n in snapshot.nodes if n.key == last.node_key)
    return last.status is AttemptStatus.STOPPED and node.status is not NodeStatus.RUNNING


async def _completed(pipelines: PipelineRig) -> str:
    pipelines.model.decide = passing
    created = await pipelines.create(TWO_STAGES, items=("one",))
    done = await pipelines.wait(created.id, P.COMPLETED, P.FAILED)
    assert done.status is P.COMPLETED, done.error
    return created.id


def _recorded_action(pipelines: PipelineRig, pipeline_id: str) -> str:
    """An action journal record of a stage worker of the pipeline (what a replay can repeat)."""
    pipeline = pipelines.store.get_pipeline(pipeline_id)
    record = pipelines.store.start_action(
        user=USER,
        session_id=pipeline.session_id,
        run_id=None,
        agent="worker",
        origin="agent",
        tool="shell__run",
        args_hash="0" * 64,
        risk_class="containable",
        owner="test",
        deadline_seconds=60.0,
        pipeline_id=pipeline_id,
        node_id="n0",
    )
    pipelines.store.finish_action(record.id, outcome="completed", detail=None)
    return record.id


def _runs(pipelines: PipelineRig, pipeline_id: str) -> int:
    session = pipelines.store.get_pipeline(pipeline_id).session_id
    return sum(1 for r in pipelines.store.list_runs(session_id=session) if r.pipeline_id == pipeline_id)


async def test_a_resume_after_a_stage_ran_awaits_its_replay_review_then_runs(pipelines: PipelineRig) -> None:
    pid = await _stopped_mid_stage(pipelines)
    action = _recorded_action(pipelines, pid)
    runs = _runs(pipelines, pid)
    answer = await pipelines.service.resume(pid, pipelines.caller, ResumeRequest())
    assert answer["status"] == "resuming"  # at once; the person's consent comes after
    review = pipelines.replay_review(pid)
    assert review is not None and review.subject == REPLAY_SUBJECT and review.kind == "pipeline_replay"
    assert list(review.action_ids) == [action] and MISSING_RECORDS_WARNING in (review.explanation or "")
    assert review.run_id is None and review.expires_at is None
    document = pipelines.status(pid)
    assert document["status"] == "awaiting_approval"
    assert document["pendingApproval"] == answer["pendingApproval"]
    assert document["pendingApproval"]["requestId"] == review.id
    assert document["pendingApproval"]["kind"] == "pipeline_replay"
    await anyio.sleep(WATCHDOG_S * 3)  # the watchdog does not count the wait for the person
    assert pipelines.store.get_pipeline(pid).status is P.AWAITING_APPROVAL
    assert _runs(pipelines, pid) == runs  # no worker before the review
    await pipelines.answer_replay(pid)
    done = await pipelines.wait(pid, P.COMPLETED, P.FAILED)
    assert done.status is P.COMPLETED, done.error
    assert "pendingApproval" not in done.metadata and REPLAY_REVIEW_KEY not in done.metadata


async def test_a_denied_rewind_changes_no_checkpoint_and_starts_no_worker(pipelines: PipelineRig) -> None:
    finished = await _completed(pipelines)
    with pytest.raises(ConflictError, match="is completed: it cannot be resumed now"):  # no review asked
        await pipelines.service.resume(finished, pipelines.caller, ResumeRequest(from_stage="implement"))
    assert pipelines.replay_review(finished) is None
    pid = await _stopped_mid_stage(pipelines)
    before = pipelines.store.pipeline_snapshot(pid)
    runs = _runs(pipelines, pid)
    await pipelines.service.resume(pid, pipelines.caller, ResumeRequest(from_stage="implement"))
    assert pipelines.store.get_pipeline(pid).status is P.AWAITING_APPROVAL
    denied = await pipelines.answer_replay(pid, approve=False)
    await pipelines.wait(pid, P.STOPPED)
    after = pipelines.store.pipeline_snapshot(pid)
    assert after.pipeline.generation == before.pipeline.generation
    assert after.pipeline.workflow_id == before.pipeline.workflow_id
    assert after.pipeline.metadata == before.pipeline.metadata
    assert after.nodes == before.nodes and after.attempts == before.attempts and after.items == before.items
    assert await pipelines.engine.workflow(f"{pid}.g{before.pipeline.generation + 1}") is None  # no fork
    assert _runs(pipelines, pid) == runs and pid not in pipelines.walker.live
    assert f"replay denied by {USER}" in (after.pipeline.summary or "")
    assert pipelines.store.get_approval(denied.id).status is ApprovalStatus.DENIED
    # approved this time, the rewind runs the implementer again and completes
    await pipelines.service.resume(pid, pipelines.caller, ResumeRequest(from_stage="implement"))
    await pipelines.answer_replay(pid)
    await pipelines.wait_for(lambda: _runs(pipelines, pid) > runs)
    done = await pipelines.wait(pid, P.COMPLETED, P.FAILED)
    assert done.status is P.COMPLETED and done.generation == before.pipeline.generation + 1


async def test_a_second_resume_while_one_awaits_review_fails_already_awaiting(pipelines: PipelineRig) -> None:
    pid = await _stopped_mid_stage(pipelines)
    errors: list[Exception] = []

    async def resume() -> None:
        try:
            await pipelines.service.resume(pid, pipelines.caller, ResumeRequest())
        except ConflictError as exc:
            errors.append(exc)

    async with anyio.create_task_group() as tg:  # two at once: one review, one refusal
        tg.start_soon(resume)
        tg.start_soon(resume)
    assert len(errors) == 1 and "already awaiting its replay review" in str(errors[0])
    with pytest.raises(ConflictError, match="already awaiting its replay review"):
        await pipelines.service.resume(pid, pipelines.caller, ResumeRequest(from_stage="implement"))
    reviews = pipelines.store.list_approvals(status="pending", kinds=("pipeline_replay",))
    assert len(reviews) == 1
    await pipelines.answer_replay(pid)
    assert (await pipelines.wait(pid, P.COMPLETED, P.FAILED)).status is P.COMPLETED


async def test_a_stop_cancels_the_replay_while_awaited_and_after_its_approval(pipelines: PipelineRig) -> None:
    pid = await _stopped_mid_stage(pipelines)
    runs = _runs(pipelines, pid)
    await pipelines.service.resume(pid, pipelines.caller, ResumeRequest())
    review = pipelines.replay_review(pid)
    assert review is not None
    stopped = await pipelines.service.stop(pid, pipelines.caller)
    assert stopped["status"] == "stopped"
    assert pipelines.store.get_approval(review.id).status is ApprovalStatus.CANCELLED
    record = pipelines.store.get_pipeline(pid)
    assert "pendingApproval" not in record.metadata and REPLAY_REVIEW_KEY not in record.metadata
    assert _runs(pipelines, pid) == runs
    # a stop right after the approval: the replay does not go on
    await pipelines.service.resume(pid, pipelines.caller, ResumeRequest())
    await pipelines.answer_replay(pid)
    await pipelines.service.stop(pid, pipelines.caller)
    await pipelines.wait_for(lambda: pid not in pipelines.walker.live)
    await anyio.sleep(0.5)
    final = pipelines.store.get_pipeline(pid)
    assert final.status is P.STOPPED and pid not in pipelines.walker.live
    assert all(
        a.status is not AttemptStatus.SUCCEEDED for a in pipelines.store.pipeline_snapshot(pid).attempts
    )


async def test_a_pipeline_whose_walk_never_ran_a_stage_resumes_without_review_even_unattended(
    pipelines: PipelineRig,
) -> None:
    pipelines.model.decide = passing
    _fail_once(pipelines.engine, "start_workflow", StoreError("the engine's database is gone"))
    with pytest.raises(StoreError):
        await pipelines.create(TWO_STAGES, items=("one",))
    [failed] = pipelines.store.list_pipelines()
    assert failed.status is P.FAILED and not pipelines.store.pipeline_snapshot(failed.id).attempts
    scheduled = PipelineCaller(USER, attended=False)  # nothing to replay: nobody needs to review
    answer = await pipelines.service.resume(failed.id, scheduled, ResumeRequest())
    assert answer == {"id": failed.id, "status": "resuming"}
    assert pipelines.store.list_approvals(kinds=("pipeline_replay",)) == []
    assert (await pipelines.wait(failed.id, P.COMPLETED, P.FAILED)).status is P.COMPLETED


async def test_unattended_work_cannot_approve_its_own_replay(pipelines: PipelineRig) -> None:
    pid = await _stopped_mid_stage(pipelines)
    scheduled = PipelineCaller(USER, attended=False)
    with pytest.raises(ForbiddenError, match=r"review required: .* this run is unattended"):
        await pipelines.service.resume(pid, scheduled, ResumeRequest())
    record = pipelines.store.get_pipeline(pid)
    assert record.status is P.STOPPED and REPLAY_REVIEW_KEY not in record.metadata
    assert pipelines.store.list_approvals(kinds=("pipeline_replay",)) == []


async def test_a_review_awaited_across_a_restart_stays_and_its_approval_resumes(
    pipelines: PipelineRig,
) -> None:
    pid = await _stopped_mid_stage(pipelines)
    await pipelines.service.resume(pid, pipelines.caller, ResumeRequest())
    assert pipelines.store.reconcile_interrupted_pipelines() == []  # what a restart does first
    document: dict[str, Any] = pipelines.status(pid)
    assert (
        document["status"] == "awaiting_approval" and document["pendingApproval"]["kind"] == "pipeline_replay"
    )
    await pipelines.answer_replay(pid)
    assert (await pipelines.wait(pid, P.COMPLETED, P.FAILED)).status is P.COMPLETED


async def test_a_resume_right_after_a_stop_keeps_its_review_when_the_walk_parks(
    pipelines: PipelineRig,
) -> None:
    pipelines.model.decide = _hang_first("one", "half")
    created = await pipelines.create(TWO_STAGES, items=("one",))
    await _live(pipelines, created.id)
    park = pipelines.walker.park
    parked = anyio.Event()

    async def late_park(*args: Any) -> dict[str, Any]:  # the walk parks after the review was asked
        await pipelines.wait_for(
            lambda: pipelines.store.get_pipeline(created.id).status is P.AWAITING_APPROVAL
        )
        try:
            return await park(*args)
        finally:
            parked.set()

    pipelines.walker.park = late_park  # type: ignore[method-assign]
    await pipelines.service.stop(created.id, pipelines.caller)
    await pipelines.service.resume(created.id, pipelines.caller, ResumeRequest())
    with anyio.fail_after(60):
        await parked.wait()
    kept = pipelines.store.get_pipeline(created.id)
    assert kept.status is P.AWAITING_APPROVAL and kept.awaiting_replay_review, kept.summary
    await pipelines.answer_replay(created.id)
    assert (await pipelines.wait(created.id, P.COMPLETED, P.FAILED)).status is P.COMPLETED
