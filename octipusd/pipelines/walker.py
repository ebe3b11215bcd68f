"""The walker's steps: every read of the store and every effect of a pipeline's walk.

The workflow (:mod:`octipusd.pipelines.walk`) decides where to go; each of its effects is one method
of :class:`Walker` run as a durable step (its output recorded by the engine, so a replay after a
restart rebuilds the walk's state without running it again). The workflow reaches the walker of the
daemon through :func:`active_walker` (the composition root installs it), as DBOS workflows are
module-level functions.

A stage attempt is :meth:`Walker.run_stage`, run under the engine's restart guard: it opens the
attempt (a new one, or the one a resume continues), runs it through the stage executor and returns
the verdict as JSON. The live stage's handle is kept by pipeline id (:attr:`Walker.live`) so that
``stop_pipeline`` stops the worker, and the runs it started (:meth:`Walker.runs_since`) so that the
scheduling watchdog sees whether a stage got to work.

A stop may land before the worker is registered: the status is read again right before the
worker starts (after a QA ``verifyCommand``) and right after its handle is registered, and a
pipeline no longer ``running`` gets no worker (or has it stopped at once). When an attempt starts
anew, the skipped item's or superseded attempts (``stopped``, ``interrupted``, crashed) are
``abandoned``, their INCOMPLETE text cleared.

Resting statuses (``stopped``, ``failed``, ``paused``) are written by whoever comes first: a stop
or the watchdog sets them directly and the walk's :meth:`Walker.park` keeps them; a park of an
older walk (a resume claimed the pipeline meanwhile: its ``generation`` moved on) changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from octipusd.durable.engine import DurableEngine
from octipusd.errors import ConflictError, OctipusError
from octipusd.pipelines.approved_calls import BlockedCalls, Emit
from octipusd.pipelines.asking import Questions
from octipusd.pipelines.graph import Graph, compile_graph
from octipusd.pipelines.plan_link import sync_plan
from octipusd.pipelines.stages import StageContext, StageResult, StageVerdict, judge
from octipusd.pipelines.templates import Template, parse_template
from octipusd.runtime.stage_runs import StageCounters, StageHandle
from octipusd.store.aio import in_thread
from octipusd.store.pipeline_records import (
    AttemptStatus,
    ItemStatus,
    MetadataPatch,
    NodeStatus,
    Pipeline,
    PipelineAttempt,
    PipelineItem,
    PipelineStatus,
)
from octipusd.store.repository import Store

__all__ = [
    "StageExecuting",
    "Walker",
    "WalkerLimits",
    "active_walker",
    "install_walker",
]

log = logging.getLogger("octipusd.pipelines.walker")

#: Statuses a walk may leave for a resting one (a stop or the watchdog wrote theirs first).
_WALKING = frozenset({PipelineStatus.PLANNING, PipelineStatus.RUNNING, PipelineStatus.AWAITING_APPROVAL})
#: Attempts a resume could still continue (until a later one supersedes them).
_UNFINISHED = frozenset({AttemptStatus.STOPPED, AttemptStatus.INTERRUPTED, AttemptStatus.FAILED})
#: The ``metadata`` key of the rewind a resume asked for (the node whose next attempt is new).
REWIND_KEY = "rewind"


class StageExecuting(Protocol):
    """The stage semantics (:class:`~octipusd.pipelines.stages.StageExecutor`)."""

    async def execute(
        self,
        ctx: StageContext,
        *,
        on_started: Callable[[StageHandle], Awaitable[None]] | None = None,
        may_start: Callable[[], Awaitable[str | None]] | None = None,
    ) -> StageVerdict:
        """Run one attempt to its end and record that end on the attempt."""
        ...


@dataclass(frozen=True)
class WalkerLimits:
    """The walker's limits.

    Attributes:
        token_budget: ``agent.pipelineTokenBudget``: tokens one pipeline's stages may use (0: no budget),
            checked at node boundaries.
        wait_seconds: Seconds one durable wait for a message lasts before it is renewed.
    """

    token_budget: int = 0
    wait_seconds: float = 86_400.0


#: The walker the workflows of this process use (set by :func:`install_walker`).
_ACTIVE: list[Walker] = []


def install_walker(walker: Walker) -> None:
    """Make ``walker`` the one the pipeline workflows of this process reach."""
    _ACTIVE.clear()
    _ACTIVE.append(walker)


def active_walker() -> Walker:
    """The installed walker.

    Raises:
        OctipusError: None is installed (the composition root installs it before the engine starts).
    """
    if not _ACTIVE:
        raise OctipusError("no pipeline walker is installed in this process")
    return _ACTIVE[-1]


PipelineEnd = Callable[[Pipeline], Awaitable[None]]


class Walker:
    """The effects of pipeline walks (see the module).

    Args:
        store: The store (the public record).
        engine: The durable engine (steps, messages).
        executor: The stage semantics.
        limits: The walker's limits.
        on_end: Told each pipeline that ended ``completed``, ``failed`` or ``stopped`` (notifications);
            its failure is logged.
        emit: Stores and publishes a run event (a blocked call raised again is announced on its
            worker's run, so the push notification fires); None: not announced.
    """

    def __init__(
        self,
        store: Store,
        engine: DurableEngine,
        executor: StageExecuting,
        limits: WalkerLimits | None = None,
        on_end: PipelineEnd | None = None,
        emit: Emit | None = None,
    ) -> None:
        self.store = store
        self.engine = engine
        self.executor = executor
        self.limits = limits or WalkerLimits()
        self.on_end = on_end
        self.questions = Questions(store)
        self.blocked = BlockedCalls(store, self.questions, emit)
        #: The live stage handle of each pipeline.
        self.live: dict[str, StageHandle] = {}
        self._runs: dict[str, list[str]] = {}
        self._templates: dict[str, Template] = {}

    # ------------------------------------------------------------------ reads

    def template_of(self, pipeline: Pipeline) -> Template:
        """The pipeline's template (frozen at creation), parsed once per process."""
        found = self._templates.get(pipeline.id)
        if found is None:
            document = pipeline.template
            stages = len(document.get("steps") or ()) or 1
            found = parse_template(document, max_stages=stages)
            self._templates[pipeline.id] = found
        return found

    def graph_of(self, pipeline: Pipeline) -> Graph:
        """The pipeline's compiled graph."""
        return compile_graph(self.template_of(pipeline))

    def runs_since(self, pipeline_id: str, index: int) -> list[str]:
        """The ids of the stage runs this process started for the pipeline after the ``index`` first."""
        return self._runs.get(pipeline_id, [])[index:]

    def run_count(self, pipeline_id: str) -> int:
        """How many stage runs this process started for the pipeline."""
        return len(self._runs.get(pipeline_id, []))

    # ------------------------------------------------------------------ steps

    async def load(self, pipeline_id: str) -> dict[str, Any]:
        """Step: the pipeline's definition; a ``planning`` pipeline becomes ``running``.

        Returns:
            ``{"template": document, "generation": int}``.

        Raises:
            NotFoundError: No such pipeline (the workflow fails).
        """
        pipeline = await in_thread(self.store.get_pipeline, pipeline_id)
        if pipeline.status is PipelineStatus.PLANNING:
            pipeline = await in_thread(
                lambda: self.store.set_pipeline_status(
                    pipeline_id, PipelineStatus.RUNNING, expect=[PipelineStatus.PLANNING]
                )
            )
        return {"template": pipeline.template, "generation": pipeline.generation}

    async def boundary(self, pipeline_id: str, node: str, item_id: str | None) -> dict[str, Any]:
        """Step: a node boundary. Records where the walk is, and checks whether it may go on.

        Returns:
            ``{"status", "generation", "error"}``: the pipeline's status (not ``running``: a stop or
            the watchdog wrote it; the walk parks), and the budget error when the pipeline's tokens
            reached ``agent.pipelineTokenBudget`` (the walk fails with it).
        """
        pipeline = await in_thread(
            lambda: self.store.update_pipeline(pipeline_id, current_node=node, current_item_id=item_id)
        )
        budget = self.limits.token_budget
        error = None
        if budget and pipeline.tokens_used >= budget:
            error = (
                f"the pipeline's stages used {pipeline.tokens_used} tokens, over its budget of {budget} "
                "(agent.pipelineTokenBudget; 0 turns the budget off)"
            )
        return {"status": pipeline.status.value, "generation": pipeline.generation, "error": error}

    async def next_item(self, pipeline_id: str, head: str) -> dict[str, Any]:
        """Step: at a loop head, apply the queued item edits and read the plan again.

        Returns:
            ``{"item": id or None}``: the first item not done, skipped or failed (now ``running``);
            None when the plan has none left (the head node is then ``completed``).
        """
        await in_thread(self.store.apply_item_changes, pipeline_id)
        items = await in_thread(self.store.list_pipeline_items, pipeline_id)
        item = next((i for i in items if i.status in (ItemStatus.PENDING, ItemStatus.RUNNING)), None)
        if item is None:
            await in_thread(self.store.set_pipeline_node, pipeline_id, head, NodeStatus.COMPLETED)
            return {"item": None}
        await in_thread(self.store.set_pipeline_item, item.id, ItemStatus.RUNNING)
        await in_thread(self.store.set_pipeline_node, pipeline_id, head, NodeStatus.RUNNING)
        return {"item": item.id}

    async def advance(
        self,
        pipeline_id: str,
        node: str,
        output: str | None,
        finished_item: str | None,
        target: str | None,
    ) -> None:
        """Step: ``node`` delivered: it is ``completed`` with ``output``; ``finished_item`` (the body
        of its item ended) is ``done``; the walk is at ``target`` now; the linked plan follows."""
        await in_thread(
            lambda: self.store.set_pipeline_node(pipeline_id, node, NodeStatus.COMPLETED, output=output)
        )
        if finished_item is not None:
            await in_thread(
                lambda: self.store.set_pipeline_item(finished_item, ItemStatus.DONE, result=output)
            )
            await self._progress(pipeline_id)
        if target is not None:
            await in_thread(lambda: self.store.update_pipeline(pipeline_id, current_node=target))

    async def run_stage(
        self,
        pipeline_id: str,
        node: str,
        item_id: str | None,
        continue_attempt: str | None,
        carry: Mapping[str, Any],
    ) -> dict[str, Any]:
        """Step (guarded): one stage attempt, to its end.

        Args:
            pipeline_id: The pipeline.
            node: The stage's node.
            item_id: The plan item of a loop body's stage, or None.
            continue_attempt: The attempt a resume continues (its vendor conversation too), or None:
                a new attempt.
            carry: ``previousOutput``, ``qaIssues``, ``retryReason`` and ``startReason``.

        Returns:
            The verdict's JSON (:meth:`StageVerdict.to_json`) with ``attemptId`` and the pipeline's
            ``generation`` (a forked walk replays an older one up to this step: it learns it here).

        Raises:
            StoreError: The store failed (the attempt stays ``running``; a restart pauses it).
        """
        pipeline = await in_thread(self.store.get_pipeline, pipeline_id)
        template = self.template_of(pipeline)
        index = self.graph_of(pipeline).node(node).step_index
        assert index is not None
        attempt, resume = await self._open_attempt(
            pipeline, node, template.steps[index].name, item_id, continue_attempt, carry
        )
        ctx = StageContext(
            pipeline=pipeline,
            template=template,
            node_key=node,
            step_index=index,
            item=await self._item(pipeline_id, item_id),
            attempt=attempt,
            resume=resume,
            previous_output=carry.get("previousOutput"),
            qa_issues=tuple(carry.get("qaIssues") or ()),
            retry_reason=carry.get("retryReason"),
            description=pipeline.metadata.get("description"),
        )
        handles: list[StageHandle] = []
        try:
            verdict = await self.executor.execute(
                ctx, on_started=self._started(pipeline_id, handles), may_start=self._may_start(pipeline_id)
            )
        finally:
            if handles and self.live.get(pipeline_id) is handles[-1]:  # a later walk's is kept
                del self.live[pipeline_id]
        return {**verdict.to_json(), "attemptId": attempt.id, "generation": pipeline.generation}

    async def settled(self, pipeline_id: str, node: str, item_id: str | None) -> dict[str, Any] | None:
        """Step: the guard answered that the stage's step had begun in an earlier process; the
        verdict its attempt recorded if it finished ``succeeded`` (the process died before the
        engine recorded the step: the work is used, not paid for again), else None (the walk parks).

        Returns:
            ``{"outcome", "output", "issues", "attemptId", "generation"}`` or None.
        """
        pipeline = await in_thread(self.store.get_pipeline, pipeline_id)
        snapshot = await in_thread(lambda: self.store.pipeline_snapshot(pipeline_id, history=False))
        mine = [a for a in snapshot.attempts if a.node_key == node and a.item_id == item_id]
        if not mine or mine[-1].status is not AttemptStatus.SUCCEEDED:
            return None
        last = mine[-1]
        index = self.graph_of(pipeline).node(node).step_index
        assert index is not None
        step = self.template_of(pipeline).steps[index]
        outcome, issues = StageResult.OK, tuple[str, ...]()
        if step.is_qa:  # pass or fail: the worker's answer says which
            text = (
                (await in_thread(self.store.get_run, last.run_ids[-1])).result_text if last.run_ids else None
            )
            judged = judge(step, text or "", StageCounters(None, None, None))
            if judged.outcome not in (StageResult.QA_PASS, StageResult.QA_FAIL):
                return None
            outcome, issues = judged.outcome, judged.issues
        return {
            "outcome": outcome.value,
            "output": last.result,
            "issues": list(issues),
            "attemptId": last.id,
            "generation": pipeline.generation,
        }

    async def _open_attempt(
        self,
        pipeline: Pipeline,
        node: str,
        stage: str,
        item_id: str | None,
        continue_attempt: str | None,
        carry: Mapping[str, Any],
    ) -> tuple[PipelineAttempt, bool]:
        """A new attempt (its step id kept: a ``fromStage`` rewind forks there), or the one a resume
        continues (reopened, ``resume`` True). A rewind's marker on this node forces a new one."""
        rewind = pipeline.metadata.get(REWIND_KEY)
        reason = str(carry.get("startReason") or "first")
        if rewind == node:
            await in_thread(
                lambda: self.store.update_pipeline(pipeline.id, metadata=MetadataPatch.dropping(REWIND_KEY))
            )
            continue_attempt, reason = None, "rewind"
        if continue_attempt is not None:
            reopened = await in_thread(
                lambda: self.store.reopen_pipeline_attempt(continue_attempt, reason="resume")
            )
            return reopened, True
        await self._abandon(pipeline.id, "a new attempt superseded it" if rewind != node else "rewound")
        step_id = self.engine.current_step_id()
        started = await in_thread(
            lambda: self.store.start_pipeline_attempt(
                pipeline.id,
                node_key=node,
                stage=stage,
                item_id=item_id,
                start_reason=reason,
                generation=pipeline.generation,
                step_id=step_id,
            )
        )
        return started, False

    async def _abandon(self, pipeline_id: str, why: str) -> None:
        """Every unfinished attempt of the pipeline is ``abandoned`` (its INCOMPLETE text cleared):
        a walk continues only the attempt it is at, so once it starts a new one (or skips the item,
        or completes) no resume continues the others."""
        snapshot = await in_thread(lambda: self.store.pipeline_snapshot(pipeline_id, history=False))
        for attempt in snapshot.attempts:
            if attempt.status in _UNFINISHED and (
                attempt.status is not AttemptStatus.FAILED or attempt.incomplete_text
            ):
                await in_thread(self._abandon_one, attempt, why)

    def _abandon_one(self, attempt: PipelineAttempt, why: str) -> None:
        self.store.finish_pipeline_attempt(
            attempt.id, AttemptStatus.ABANDONED, error=f"abandoned: {why}", retry_reason=attempt.retry_reason
        )

    async def _item(self, pipeline_id: str, item_id: str | None) -> PipelineItem | None:
        if item_id is None:
            return None
        items = await in_thread(self.store.list_pipeline_items, pipeline_id)
        return next((i for i in items if i.id == item_id), None)

    def _may_start(self, pipeline_id: str) -> Callable[[], Awaitable[str | None]]:
        async def may_start() -> str | None:
            return await self._stopping(pipeline_id)

        return may_start

    async def _stopping(self, pipeline_id: str) -> str | None:
        """Why the pipeline's worker may not work (a stop or the watchdog came), or None."""
        pipeline = await in_thread(self.store.get_pipeline, pipeline_id)
        if pipeline.status is PipelineStatus.RUNNING:
            return None
        return f"the pipeline is {pipeline.status.value}: {pipeline.summary or 'stopped'}"

    def _started(
        self, pipeline_id: str, handles: list[StageHandle]
    ) -> Callable[[StageHandle], Awaitable[None]]:
        """The worker's handle is registered (a stop reaches it), then the status read again: a stop
        that came between the attempt's start and the registration stops the worker at once."""

        async def started(handle: StageHandle) -> None:
            handles.append(handle)
            self.live[pipeline_id] = handle
            self._runs.setdefault(pipeline_id, []).append(handle.run_id)
            stopping = await self._stopping(pipeline_id)
            if stopping is not None:
                await handle.stop(stopping)

        return started

    async def park(
        self, pipeline_id: str, status: str, reason: str | None, generation: int, item_failed: bool
    ) -> dict[str, Any]:
        """Step: the walk stopped short of the end; the pipeline rests ``status`` until a resume.

        A resting status another writer set first (a stop, the watchdog) is kept; a park of an older
        walk (``generation`` moved on: a resume claimed it) changes nothing. The current node goes
        back to ``pending`` (``failed`` when the pipeline failed), an attempt left ``running`` is
        ``interrupted``, the current item ``failed`` when ``item_failed`` (a person declined).

        Returns:
            ``{"status": the pipeline's status now, "attempt": the attempt a resume continues or None}``.
        """
        pipeline = await in_thread(self.store.get_pipeline, pipeline_id)
        wanted = PipelineStatus(status)
        if item_failed and pipeline.current_item_id is not None:  # before the status a reader waits for
            await in_thread(
                lambda: self.store.set_pipeline_item(
                    pipeline.current_item_id or "", ItemStatus.FAILED, error=reason
                )
            )
        # a replay review asked meanwhile (a stop, then a resume before this park) is kept
        if (
            pipeline.generation == generation
            and pipeline.status in _WALKING
            and not pipeline.awaiting_replay_review
        ):
            fields: dict[str, Any] = {"summary": reason}
            if wanted is PipelineStatus.FAILED:
                fields["error"] = reason
            pipeline = await in_thread(
                lambda: self.store.set_pipeline_status(
                    pipeline_id, wanted, expect=_WALKING, event={"reason": reason}, **fields
                )
            )
        attempt = await self._unfinished_attempt(pipeline)
        if pipeline.current_node is not None:
            node_status = (
                NodeStatus.FAILED if pipeline.status is PipelineStatus.FAILED else NodeStatus.PENDING
            )
            await in_thread(
                lambda: self.store.set_pipeline_node(
                    pipeline_id, pipeline.current_node or "", node_status, error=reason
                )
            )
        await self._ended(pipeline)
        return {"status": pipeline.status.value, "attempt": attempt}

    async def _unfinished_attempt(self, pipeline: Pipeline) -> str | None:
        """The latest attempt of the current node and item if it did not finish (its resume continues
        it); one still ``running`` (cut by a restart) becomes ``interrupted``."""
        snapshot = await in_thread(lambda: self.store.pipeline_snapshot(pipeline.id, history=False))
        mine = [
            a
            for a in snapshot.attempts
            if a.node_key == pipeline.current_node and a.item_id == pipeline.current_item_id
        ]
        if not mine:
            return None
        last = mine[-1]
        if last.status is AttemptStatus.RUNNING:
            await in_thread(
                lambda: self.store.finish_pipeline_attempt(
                    last.id, AttemptStatus.INTERRUPTED, error="the daemon stopped while the stage ran"
                )
            )
            return last.id
        keep = last.status in (AttemptStatus.STOPPED, AttemptStatus.INTERRUPTED) or (
            last.status is AttemptStatus.FAILED and last.incomplete_text and not last.retry_reason
        )
        return last.id if keep else None

    async def finish(self, pipeline_id: str) -> str:
        """Step: the walk reached the end; the pipeline is ``completed`` unless a stop or the
        watchdog came first.

        Returns:
            The pipeline's status now: ``completed``, or the resting status another writer set (the
            walk then parks in it, and a resume finishes it).
        """
        try:
            pipeline = await in_thread(
                lambda: self.store.set_pipeline_status(
                    pipeline_id,
                    PipelineStatus.COMPLETED,
                    expect=_WALKING,
                    summary="completed",
                    current_node=None,
                    current_item_id=None,
                )
            )
        except ConflictError:
            return (await in_thread(self.store.get_pipeline, pipeline_id)).status.value
        await self._abandon(pipeline_id, "the pipeline completed")
        await self._progress(pipeline_id)
        await self._ended(pipeline)
        return pipeline.status.value

    async def resumed(self, pipeline_id: str, item_id: str | None) -> dict[str, Any]:
        """Step: a resume woke the walk: apply the queued item edits.

        Returns:
            ``{"generation", "itemGone"}``: the walk's generation now, and whether its current item
            was skipped meanwhile (the walk then goes back to the loop head).
        """
        await in_thread(self.store.apply_item_changes, pipeline_id)
        pipeline = await in_thread(self.store.get_pipeline, pipeline_id)
        gone = False
        if item_id is not None:
            item = await self._item(pipeline_id, item_id)
            gone = item is None or item.status in (ItemStatus.SKIPPED, ItemStatus.DONE)
            if gone:
                await self._abandon(pipeline_id, "its item was skipped")
        return {"generation": pipeline.generation, "itemGone": gone}

    async def _progress(self, pipeline_id: str) -> None:
        """The linked work plan follows the items (a failure is logged: the plan is a view)."""
        try:
            pipeline = await in_thread(self.store.get_pipeline, pipeline_id)
            items = await in_thread(self.store.list_pipeline_items, pipeline_id)
            await in_thread(sync_plan, self.store, pipeline, items)
        except OctipusError:
            log.exception("pipeline %s: the linked work plan was not updated", pipeline_id)

    async def _ended(self, pipeline: Pipeline) -> None:
        if self.on_end is None or pipeline.status not in (
            PipelineStatus.COMPLETED,
            PipelineStatus.FAILED,
            PipelineStatus.STOPPED,
        ):
            return
        try:
            await self.on_end(pipeline)
        except Exception:  # a notification never changes the walk
            log.exception("pipeline %s: the end notification failed", pipeline.id)
