"""The scheduling watchdog (issue 27 "Restarts and the watchdog"): a resume that gets no stage to
work within ``PipelineLimits.resume_watchdog_s`` fails the pipeline with a clear error. Real run
core, admission, store (SQLite and PostgreSQL) and engine; the limit shortened through the rig's
``limits`` (the daemon's is two minutes, not a setting); admission holds the resumed stage queued
(one run at once, taken by another pipeline's hanging stage)."""

from __future__ import annotations

from typing import Any

import pytest

from octipusd.pipelines.service import PipelineLimits, ResumeRequest
from octipusd.settings import AgentSettings, Settings
from octipusd.store.pipeline_records import PipelineStatus
from octipusd.store.records import RunStatus
from tests.unit.pipelines.conftest import HANG_S, Answer, PipelineRig

pytestmark = pytest.mark.anyio

P = PipelineStatus
ONE_STAGE: dict[str, Any] = {
    "name": "one",
    "description": "one stage",
    "steps": [{"name": "work", "topic": "general"}],
}


@pytest.fixture
def limits() -> PipelineLimits:
    return PipelineLimits(resume_watchdog_s=1.0, watchdog_poll_s=0.1)


@pytest.fixture
def settings() -> Settings:
    return Settings(agent=AgentSettings(maxConcurrentRuns=1, minFreeMemoryMiB=0))


async def test_a_resume_whose_stage_never_starts_fails_by_the_watchdog(pipelines: PipelineRig) -> None:
    pipelines.model.decide = lambda _prompt: Answer("never", delay=HANG_S)
    busy = await pipelines.create(ONE_STAGE)
    await pipelines.wait_for(lambda: busy.id in pipelines.walker.live)
    waiting = await pipelines.create(ONE_STAGE)
    await pipelines.wait_for(lambda: waiting.id in pipelines.walker.live)
    queued = pipelines.walker.live[waiting.id].run_id
    assert pipelines.store.get_run(queued).status is RunStatus.QUEUED  # admission holds it
    await pipelines.service.stop(waiting.id, pipelines.caller)
    await pipelines.wait(waiting.id, P.STOPPED)
    await pipelines.wait_for(lambda: waiting.id not in pipelines.walker.live)

    await pipelines.service.resume(waiting.id, pipelines.caller, ResumeRequest())
    failed = await pipelines.wait(waiting.id, P.FAILED, P.COMPLETED)
    assert failed.status is P.FAILED
    assert failed.error == "no stage started within 1 s of the resume; resume it again"
    await pipelines.wait_for(lambda: waiting.id not in pipelines.walker.live)  # its queued worker stopped
    assert pipelines.store.get_pipeline(busy.id).status is P.RUNNING  # the working one is left alone
