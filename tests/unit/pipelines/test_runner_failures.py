"""The pipeline runner when things go wrong (issue 27 review): a resume or a create that fails after
writing puts the record right, the runner's background tasks never bring the daemon down, and the
watchdog counts a QA stage's ``verifyCommand`` as a stage at work. On the walker's rig (real run core,
store on SQLite and PostgreSQL, durable engine; the vendor replayed, the model scripted); faults are
injected at the one store or engine method that fails."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from octipusd.durable.engine import DurableEngine
from octipusd.errors import ConfigError, StoreError
from octipusd.pipelines.asking import PIPELINE_TOOL_ID
from octipusd.pipelines.runner import DurableRunner
from octipusd.pipelines.service import PipelineLimits, PipelineService, ResumeRequest
from octipusd.pipelines.walk import PIPELINE_WALK
from octipusd.store.pipeline_records import AttemptStatus, PipelineStatus
from octipusd.store.records import Approval
from tests.unit.pipelines.conftest import ADAPTER, HANG_S, USER, Answer, PipelineRig, handoff
from tests.unit.pipelines.test_walker import TWO_STAGES, _hang_first, _live, is_review, passing

pytestmark = pytest.mark.anyio

P = PipelineStatus
#: The watchdog's limit in these tests (seconds).
WATCHDOG_S = 1.0

CHECKED: dict[str, Any] = {
    "name": "checked",
    "description": "implement, then verify with a command",
    "steps": [
        {"name": "implement", "topic": "coding"},
        {"name": "verify", "topic": "qa", "stageType": "qa_validation", "verifyCommand": "true"},
    ],
}


@pytest.fixture
def limits() -> PipelineLimits:
    return PipelineLimits(resume_watchdog_s=WATCHDOG_S, watchdog_poll_s=0.1)


async def _stopped(pipelines: PipelineRig, template: dict[str, Any], decide: Any) -> str:
    """A pipeline of ``template`` stopped while its first worker hangs (``decide``); its id."""
    pipelines.model.decide = decide
    created = await pipelines.create(template, items=("one",))
    await _live(pipelines, created.id)
    await pipelines.service.stop(created.id, pipelines.caller)
    await pipelines.wait_for(lambda: created.id not in pipelines.walker.live)
    return created.id


def _fail_once(target: object, name: str, error: Exception) -> None:
    """``target.name`` raises ``error`` at its next call, then is itself again."""
    original = getattr(target, name)

    def failing(*args: Any, **kwargs: Any) -> Any:
        setattr(target, name, original)
        raise error

    setattr(target, name, failing)


async def test_a_resume_failing_after_its_claim_puts_the_status_back_and_can_be_retried(
    pipelines: PipelineRig,
) -> None:
    pid = await _stopped(pipelines, TWO_STAGES, _hang_first("one", "half"))
    _fail_once(pipelines.store, "apply_item_changes", StoreError("the disk is full"))
    await pipelines.resume(pid, ResumeRequest())  # the claim comes with the replay's approval
    back = await pipelines.wait(pid, P.STOPPED)
    assert back.error == "the resume failed: the disk is full"
    assert "pendingApproval" not in back.metadata
    await pipelines.resume(pid, ResumeRequest())  # not 409: it resumes
    done = await pipelines.wait(pid, P.COMPLETED, P.FAILED)
    assert done.status is P.COMPLETED, done.error


async def test_a_create_whose_engine_cannot_start_writes_nothing(pipelines: PipelineRig) -> None:
    in_memory = DurableEngine("sqlite://", workflows=(PIPELINE_WALK,), has_open_work=lambda: False)
    runner = DurableRunner(
        pipelines.store, in_memory, pipelines.walker, pipelines.runner.templates, default_adapter=ADAPTER
    )
    rig = PipelineRig(
        pipelines.store,
        pipelines.runs,
        in_memory,
        pipelines.walker,
        runner,
        PipelineService(pipelines.store, runner),
        pipelines.broker,
        pipelines.model,
        pipelines.workspace,
    )
    with pytest.raises(ConfigError, match="needs a database file"):
        await rig.create(TWO_STAGES, items=("one",))
    assert pipelines.store.list_pipelines() == []


async def test_a_create_whose_first_walk_cannot_start_leaves_it_failed_with_the_reason(
    pipelines: PipelineRig,
) -> None:
    _fail_once(pipelines.engine, "start_workflow", StoreError("the engine's database is gone"))
    with pytest.raises(StoreError):
        await pipelines.create(TWO_STAGES, items=("one",))
    [failed] = pipelines.store.list_pipelines()
    assert failed.status is P.FAILED
    assert failed.error == "the pipeline could not start: the engine's database is gone"
    assert not pipelines.store.has_open_pipelines()  # the engine is not loaded for it at start-up


async def test_a_failing_watchdog_is_recorded_and_the_daemon_goes_on(pipelines: PipelineRig) -> None:
    pid = await _stopped(pipelines, TWO_STAGES, _hang_first("one", "half"))
    admission = pipelines.runs.services.admission
    slots = admission.limits
    admission.limits = type(slots)(**{**vars(slots), "max_runs": 0})  # the resumed stage stays queued
    await pipelines.resume(pid, ResumeRequest())
    await pipelines.wait_for(lambda: pid in pipelines.walker.live)  # the walk waits for its queued run
    _fail_once(pipelines.store, "get_pipeline", StoreError("the database is locked"))  # the watchdog's read
    await pipelines.wait_for(lambda: pipelines.store.list_pipelines()[0].error is not None)
    record = pipelines.store.get_pipeline(pid)
    assert record.error == "the resume's watchdog failed: the database is locked"
    assert record.status is P.RUNNING  # the evidence; the status is the walk's
    admission.limits = slots
    await pipelines.service.stop(pid, pipelines.caller)  # the daemon still answers
    assert (await pipelines.wait(pid, P.STOPPED)).status is P.STOPPED


async def test_an_answer_that_cannot_reach_its_walk_is_recorded_and_the_daemon_goes_on(
    pipelines: PipelineRig,
) -> None:
    pipelines.model.decide = passing
    created = await pipelines.create(TWO_STAGES, items=("one",))
    await pipelines.wait(created.id, P.COMPLETED, P.FAILED)
    pipelines.store.update_pipeline(created.id, workflow_id="no-such-workflow")
    approval: Approval = pipelines.store.create_approval(
        run_id=None,
        session_id=created.session_id,
        tool_id=PIPELINE_TOOL_ID,
        subject="a question",
        reason=None,
        input={"pipelineId": created.id},
        explanation=None,
        vendor_request_id=None,
        expires_at=None,
    )
    await pipelines.broker.answer(approval.id, approve=True, decided_by=USER)
    await pipelines.wait_for(lambda: pipelines.store.get_pipeline(created.id).error is not None)
    error = pipelines.store.get_pipeline(created.id).error or ""
    assert error.startswith("delivering a person's answer to the walk failed: ")
    again = await pipelines.create(TWO_STAGES, items=("two",))  # the daemon still works
    assert (await pipelines.wait(again.id, P.COMPLETED, P.FAILED)).status is P.COMPLETED


def _auditor_hangs_first() -> Any:
    calls: list[str] = []

    def decide(prompt: str) -> Answer:
        if is_review(prompt) and not calls:
            calls.append(prompt)
            return Answer(handoff(status="pass", summary="late"), delay=HANG_S, partial="judging")
        return passing(prompt)

    return decide


async def _approve_verify(pipelines: PipelineRig, pipeline_id: str) -> None:
    """Wait for the verify command's question (shell__run asks by default) and approve it."""

    def asked() -> list[Approval]:
        pending = pipelines.store.list_approvals(status="pending")
        return [
            a for a in pending if a.run_id and pipelines.store.get_run(a.run_id).pipeline_id == pipeline_id
        ]

    await pipelines.wait_for(lambda: bool(asked()))
    await pipelines.broker.answer(asked()[0].id, approve=True, decided_by=USER)


async def test_the_watchdog_counts_a_verify_command_waiting_for_a_person_as_a_stage_at_work(
    pipelines: PipelineRig,
) -> None:
    pipelines.model.decide = _auditor_hangs_first()
    created = await pipelines.create(CHECKED)
    await _approve_verify(pipelines, created.id)
    await _live(pipelines, created.id)
    await pipelines.service.stop(created.id, pipelines.caller)
    await pipelines.wait_for(
        lambda: pipelines.store.pipeline_snapshot(created.id).attempts[-1].status is AttemptStatus.STOPPED
    )
    await pipelines.resume(created.id, ResumeRequest())
    await anyio.sleep(WATCHDOG_S * 3)  # the resumed verify command waits for its answer meanwhile
    assert pipelines.store.get_pipeline(created.id).status is P.RUNNING
    await _approve_verify(pipelines, created.id)
    done = await pipelines.wait(created.id, P.COMPLETED, P.FAILED)
    assert done.status is P.COMPLETED, done.error
