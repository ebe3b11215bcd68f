"""The walk when a stage worker gives up on a person's answer (issue 28 item 1): the real run core,
store (SQLite, PostgreSQL), approval broker and DBOS; the worker's CLI replayed: it asks permission
for a ``Bash`` call and ends while the request waits.

The pipeline does not fail: it is ``awaiting_approval`` with the call raised again; approved, the same
attempt runs again (its vendor conversation resumed) and the allowance ends with the pipeline;
denied, the pipeline is ``stopped`` at that stage and its resume continues the same attempt.
"""

from __future__ import annotations

import pytest

from octipusd.pipelines.service import ResumeRequest
from octipusd.store.pipeline_records import AttemptStatus, PipelineStatus
from tests.unit.pipelines.conftest import USER, Answer, PipelineRig, handoff

pytestmark = pytest.mark.anyio

P = PipelineStatus
ONE_STAGE = {"name": "guarded", "steps": [{"name": "work", "topic": "coding"}]}
CALL = {"command": "make deploy"}


async def gave_up(pipelines: PipelineRig) -> tuple[str, dict[str, object]]:
    """A one-stage pipeline whose first worker gave up; its id and ``pendingApproval``."""
    answers = iter([Answer("", ask=CALL)])
    pipelines.model.decide = lambda prompt: next(answers, Answer(handoff(status="done", summary="deployed")))
    created = await pipelines.create(ONE_STAGE)
    waiting = await pipelines.wait(created.id, P.AWAITING_APPROVAL, P.FAILED, P.COMPLETED)
    assert waiting.status is P.AWAITING_APPROVAL, waiting.error
    pending = pipelines.status(created.id)["pendingApproval"]
    assert pending["kind"] == "tool_call" and pending["toolName"] == "cli-native:Bash", pending
    assert pending["subject"] == "make deploy" and pending["stage"] == "work", pending
    return created.id, pending


async def test_approved_the_same_attempt_runs_again_and_the_allowance_ends_with_it(
    pipelines: PipelineRig,
) -> None:
    pid, pending = await gave_up(pipelines)
    await pipelines.broker.decide(str(pending["requestId"]), approve=True, decided_by=USER)
    done = await pipelines.wait(pid, P.COMPLETED, P.FAILED, P.STOPPED)
    assert done.status is P.COMPLETED, done.error
    (attempt,) = pipelines.status(pid)["attempts"]
    assert attempt["status"] == "succeeded" and len(attempt["runIds"]) == 2
    assert any(a.startswith("--resume") for a in pipelines.model.argvs[1]), pipelines.model.argvs[1]
    assert "approvedCalls" not in done.metadata  # it ended with the run
    decisions = [e for e in pipelines.status(pid)["history"] if e["kind"] == "decision"]
    assert decisions and decisions[-1]["data"]["approved"] is True


async def test_denied_the_pipeline_stops_at_the_stage_and_resumes_the_same_attempt(
    pipelines: PipelineRig,
) -> None:
    pid, pending = await gave_up(pipelines)
    await pipelines.broker.decide(str(pending["requestId"]), approve=False, decided_by=USER)
    stopped = await pipelines.wait(pid, P.STOPPED, P.FAILED, P.COMPLETED)
    assert stopped.status is P.STOPPED and "denied" in (stopped.summary or ""), stopped
    (attempt,) = pipelines.store.pipeline_snapshot(pid, history=False).attempts
    assert attempt.status is AttemptStatus.INTERRUPTED
    assert "approvedCalls" not in stopped.metadata and "pendingApproval" not in stopped.metadata
    resumed = await pipelines.service.resume(pid, pipelines.caller, ResumeRequest())
    review = resumed["pendingApproval"]  # the stage ran before: its replay is reviewed first
    await pipelines.broker.decide(review["requestId"], approve=True, decided_by=USER)
    done = await pipelines.wait(pid, P.COMPLETED, P.FAILED)
    assert done.status is P.COMPLETED, done.error
    (again,) = pipelines.store.pipeline_snapshot(pid, history=False).attempts
    assert again.id == attempt.id and again.status is AttemptStatus.SUCCEEDED
