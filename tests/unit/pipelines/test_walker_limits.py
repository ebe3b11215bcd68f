"""The pipeline walk's limits (issue 27): the scheduling watchdog of a resume and the pipeline token
budget (``agent.pipelineTokenBudget``), on the walker's rig (real run core, store on SQLite and
PostgreSQL, durable engine; the vendor replayed, the model scripted)."""

from __future__ import annotations

import dataclasses

import pytest

from octipusd.pipelines.service import PipelineLimits, ResumeRequest
from octipusd.pipelines.walker import WalkerLimits
from octipusd.store.pipeline_records import PipelineStatus
from octipusd.store.records import RunStatus
from tests.unit.pipelines.conftest import PipelineRig
from tests.unit.pipelines.test_walker import TWO_STAGES, passing

pytestmark = pytest.mark.anyio

P = PipelineStatus
#: The watchdog's limit in these tests (seconds).
WATCHDOG_S = 1.0


@pytest.fixture
def limits() -> PipelineLimits:
    return PipelineLimits(resume_watchdog_s=WATCHDOG_S, watchdog_poll_s=0.1)


def _admission_blocked(pipelines: PipelineRig) -> None:
    """No run is admitted from now on (every slot taken): a stage run stays ``queued``."""
    admission = pipelines.runs.services.admission
    admission.limits = dataclasses.replace(admission.limits, max_runs=0)


async def test_a_resume_that_starts_no_stage_within_the_watchdog_limit_fails_the_pipeline(
    pipelines: PipelineRig,
) -> None:
    pipelines.model.decide = passing
    _admission_blocked(pipelines)
    created = await pipelines.create(TWO_STAGES, items=("one",))
    await pipelines.wait_for(lambda: created.id in pipelines.walker.live)  # its stage run queues
    await pipelines.service.stop(created.id, pipelines.caller)  # the first walk has no watchdog
    assert (await pipelines.wait(created.id, P.STOPPED, P.FAILED)).status is P.STOPPED
    answer = await pipelines.resume(created.id, ResumeRequest())
    assert answer["status"] == "resuming"
    failed = await pipelines.wait(created.id, P.FAILED, P.COMPLETED)
    assert failed.status is P.FAILED
    assert failed.error == f"no stage started within {WATCHDOG_S:g} s of the resume; resume it again"
    assert pipelines.model.prompts == []  # no worker ever started
    runs = [r for r in pipelines.store.list_runs(session_id=failed.session_id) if r.pipeline_id == created.id]
    assert len(runs) == 2  # the queued stage run of each walk, each withdrawn unstarted
    await pipelines.wait_for(
        lambda: all(pipelines.store.get_run(r.id).status is RunStatus.CANCELLED for r in runs)
    )


async def test_over_the_token_budget_at_a_node_boundary_the_pipeline_fails_and_0_turns_it_off(
    pipelines: PipelineRig,
) -> None:
    pipelines.model.decide = passing  # each stage run uses 10 tokens (the rig's usage)
    pipelines.walker.limits = WalkerLimits(token_budget=15)
    created = await pipelines.create(TWO_STAGES, items=("one", "two"))
    failed = await pipelines.wait(created.id, P.FAILED, P.COMPLETED)
    assert failed.status is P.FAILED
    assert failed.error == (
        "the pipeline's stages used 20 tokens, over its budget of 15 "
        "(agent.pipelineTokenBudget; 0 turns the budget off)"
    )
    stages = [(a.stage, a.status.value) for a in pipelines.store.pipeline_snapshot(created.id).attempts]
    assert stages == [("implement", "succeeded"), ("verify", "succeeded")]  # stopped at the boundary
    pipelines.walker.limits = WalkerLimits(token_budget=0)  # the budget off: the resume completes it
    await pipelines.resume(created.id, ResumeRequest())
    done = await pipelines.wait(created.id, P.COMPLETED, P.FAILED)
    assert done.status is P.COMPLETED, done.error
    assert done.tokens_used == 40 and len(pipelines.model.prompts) == 4
