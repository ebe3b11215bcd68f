"""The resume's scheduling watchdog (issue 27; issue 28 item 3).

A resume (or an approved replay) claims a new walk; when none of the pipeline's stages got to work
within :attr:`~octipusd.pipelines.service.PipelineLimits.resume_watchdog_s` (120 s), the pipeline
fails with "no stage started ... resume it again". A stage is at work once a run of the pipeline
created since the claim left ``queued`` (a worker admitted, or a QA stage's ``verifyCommand`` run,
which is running while its command waits for a person).

Time the pipeline spends ``awaiting_approval`` is not counted: a replay review (asked before the
claim, so before the watch starts), a stage's approval, a blocked call or a question all set that
status while they wait for a person, whoever asked. A later walk, a rest or a working stage ends the
watch.
"""

from __future__ import annotations

from datetime import datetime

import anyio

from octipusd.errors import ConflictError
from octipusd.pipelines.service import PipelineLimits
from octipusd.pipelines.walker import Walker
from octipusd.store.aio import in_thread
from octipusd.store.pipeline_records import Pipeline, PipelineStatus
from octipusd.store.records import RunStatus
from octipusd.store.repository import Store

__all__ = ["ResumeWatchdog"]

#: Newest runs of the pipeline's session the watchdog looks through for a stage at work (runs; the
#: stage runs since the claim are among the newest).
_WATCHDOG_RUNS = 100


class ResumeWatchdog:
    """Watches one resumed walk at a time per call (see the module).

    Args:
        store: The store.
        walker: The walks' live stage handles (a failed pipeline's worker is stopped).
        limits: The limit and the poll interval.
    """

    def __init__(self, store: Store, walker: Walker, limits: PipelineLimits) -> None:
        self.store = store
        self.walker = walker
        self.limits = limits

    async def watch(self, pipeline_id: str, generation: int, claimed_at: datetime) -> None:
        """Fail the resumed pipeline when none of its stages got to work within the limit, the time it
        awaited a person excluded; a later walk (``generation`` moved on), a rest or a working stage
        ends the watch.

        Raises:
            StoreError: The database failed (the runner records it as the pipeline's error).
        """
        limits = self.limits
        waited = 0.0
        while waited < limits.resume_watchdog_s:
            await anyio.sleep(limits.watchdog_poll_s)
            pipeline = await in_thread(self.store.get_pipeline, pipeline_id)
            if pipeline.generation != generation or pipeline.status not in (
                PipelineStatus.RUNNING,
                PipelineStatus.AWAITING_APPROVAL,
            ):
                return
            if await in_thread(self._working, pipeline, claimed_at):
                return
            if pipeline.status is PipelineStatus.RUNNING:  # awaiting a person: not counted
                waited += limits.watchdog_poll_s
        await self._fail(pipeline_id, generation)

    def _working(self, pipeline: Pipeline, claimed_at: datetime) -> bool:
        """Whether a run of the pipeline created since ``claimed_at`` left ``queued`` (blocking)."""
        runs = self.store.list_runs(session_id=pipeline.session_id, limit=_WATCHDOG_RUNS)
        return any(
            r.pipeline_id == pipeline.id and r.created_at >= claimed_at and r.status is not RunStatus.QUEUED
            for r in runs
        )

    async def _fail(self, pipeline_id: str, generation: int) -> None:
        seconds = self.limits.resume_watchdog_s
        minutes = f"{seconds / 60:g} minutes" if seconds >= 60 else f"{seconds:g} s"
        error = f"no stage started within {minutes} of the resume; resume it again"
        try:
            pipeline = await in_thread(self.store.get_pipeline, pipeline_id)
            if pipeline.generation != generation:
                return
            await in_thread(
                lambda: self.store.set_pipeline_status(
                    pipeline_id,
                    PipelineStatus.FAILED,
                    expect=[PipelineStatus.RUNNING],
                    event={"reason": "watchdog"},
                    error=error,
                    summary=error,
                )
            )
        except ConflictError:
            return
        handle = self.walker.live.get(pipeline_id)
        if handle is not None:
            await handle.stop(error)
