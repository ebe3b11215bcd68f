"""The pipeline runner: create, resume and stop a pipeline's durable walk (:class:`PipelineRunner`).

* create: the template (looked up, or a document), the parameters resolved, the graph compiled,
  the pipeline stored with its nodes, items and linked work plan, and the first walk started
  (workflow id: the pipeline's id); it answers at once. An engine that cannot start writes nothing; a
  first walk that cannot start leaves the pipeline ``failed`` with the reason.
* resume: every check first (``fromStage`` among the retained checkpoints, ``skipItems`` known),
  then the walk is claimed (``store.claim_pipeline_walk``: a running pipeline or a second resume is
  refused, 409), the skipped items and queued edits applied, and the waiting workflow told
  ``resume`` -- or, for ``fromStage``, the nodes from there reset and the workflow forked at that
  attempt's step (a new walk, ``<pipeline id>.g<generation>``). The scheduling watchdog
  (:mod:`octipusd.pipelines.watchdog`) then fails the pipeline when no stage got to work within
  :attr:`PipelineLimits.resume_watchdog_s`, time awaiting a person excluded. A failure after the
  claim puts the pipeline back to its status before the resume.
* replay review (:mod:`octipusd.pipelines.replay`): a pipeline with previous execution is not
  claimed at once; the resume answers ``resuming``, the pipeline is ``awaiting_approval`` with the
  review as ``pendingApproval``, and the claim above happens when a person approves (a denial puts
  it back as it was: no checkpoint changed, no worker started).
* stop: the pipeline is ``stopped`` (resumable) and its live stage worker stopped; a replay review
  it awaited is cancelled.

The watchdogs and answer deliveries run in the daemon's task group; their failures are logged and
recorded as the pipeline's error, never raised into that group (which would stop every run).

A person's answer to a pipeline's question (an approval of tool ``octipus:pipeline``) is sent to
the waiting workflow by :meth:`DurableRunner.on_answer`, the approval broker's listener.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from octipusd.durable.engine import DurableEngine
from octipusd.errors import ConflictError, InvalidRequestError, OctipusError
from octipusd.pipelines.asking import PIPELINE_TOOL_ID
from octipusd.pipelines.graph import compile_graph
from octipusd.pipelines.plan_link import link_plan
from octipusd.pipelines.prompts import missing_prompts, resolve_parameters
from octipusd.pipelines.replay import (
    REPLAY_KIND,
    REVIEW_KEYS,
    WITHOUT_REVIEW,
    ReplayReviews,
    already_awaiting,
)
from octipusd.pipelines.service import CreateRequest, PipelineCaller, PipelineLimits, ResumeRequest
from octipusd.pipelines.template_service import TemplateService
from octipusd.pipelines.templates import Template
from octipusd.pipelines.walk import PIPELINE_WALK, WAKE_TOPIC
from octipusd.pipelines.walker import REWIND_KEY, Walker
from octipusd.pipelines.watchdog import ResumeWatchdog
from octipusd.store.aio import in_thread
from octipusd.store.codec import new_id
from octipusd.store.pipeline_records import (
    PIPELINE_CALL_KIND,
    REPLAY_REVIEW_KEY,
    MetadataPatch,
    NodeStatus,
    Pipeline,
    PipelineStatus,
)
from octipusd.store.records import Approval, ApprovalStatus
from octipusd.store.repository import Store

__all__ = ["DurableRunner"]

log = logging.getLogger("octipusd.pipelines.runner")

#: Statuses a resume may claim the walk from.
_RESUMABLE = (PipelineStatus.PAUSED, PipelineStatus.STOPPED, PipelineStatus.FAILED)
#: Statuses a stop applies to.
_STOPPABLE = (
    PipelineStatus.PLANNING,
    PipelineStatus.RUNNING,
    PipelineStatus.AWAITING_APPROVAL,
    PipelineStatus.PAUSED,
)
#: What the runner's background tasks do, as their failure is recorded (the pipeline's error).
_TASKS = {
    "watch": "the resume's watchdog",
    "_deliver": "delivering a person's answer to the walk",
    "_deliver_call": "delivering a person's answer to the walk",
    "_replayed": "resuming after the replay review",
}
#: DBOS statuses of a workflow still able to receive (waiting in ``recv``, or queued).
_LISTENING = ("PENDING", "ENQUEUED")
#: DBOS statuses of a workflow that ended for good (a resume forks it into a new walk).
_ENDED = ("ERROR", "SUCCESS")


class DurableRunner:
    """The :class:`~octipusd.pipelines.service.PipelineRunner` on the durable engine (see the module).

    Args:
        store: The store.
        engine: The durable engine (launched on first use).
        walker: The walks' effects (its live stage handles).
        templates: Template lookup.
        default_adapter: The adapter of a session a person's pipeline makes in a workspace.
        limits: The pipelines' limits (the watchdog's).
    """

    def __init__(
        self,
        store: Store,
        engine: DurableEngine,
        walker: Walker,
        templates: TemplateService,
        *,
        default_adapter: str,
        limits: PipelineLimits | None = None,
    ) -> None:
        self.store = store
        self.engine = engine
        self.walker = walker
        self.templates = templates
        self.default_adapter = default_adapter
        self.limits = limits or PipelineLimits()
        self.replays = ReplayReviews(store)
        self.watchdog = ResumeWatchdog(store, walker, self.limits)
        self._tg: anyio.abc.TaskGroup | None = None

    def bind(self, tg: anyio.abc.TaskGroup) -> None:
        """The task group the watchdogs and answer deliveries run in (the daemon's)."""
        self._tg = tg

    # ------------------------------------------------------------------ create

    async def create(self, request: CreateRequest, caller: PipelineCaller) -> Pipeline:
        """Validate, store the pipeline (graph, nodes, items, linked plan) and start its first walk.

        Raises:
            InvalidRequestError: A template or parameter error (naming the step or parameter), a
                malformed item, a workspace that is no directory.
            NotFoundError: No such session or template.
            ForbiddenError: An agent names another session.
            ConflictError, StoreError: The engine cannot start.
        """
        template = await self._template(request, caller)
        values = resolve_parameters(template, request.params)
        missing = missing_prompts(template, values)
        if missing:
            keys = ", ".join(p.key for p in missing)
            raise InvalidRequestError(f"parameters.{missing[0].key}: a person must give a value ({keys})")
        drafts = [d.checked(f"items[{i}]") for i, d in enumerate(request.items)]
        await self.engine.ensure_started()  # an engine that cannot start: nothing written
        session_id, workspace = await self._session(request, caller)
        graph = compile_graph(template)
        pipeline_id = new_id()
        plan = await in_thread(link_plan, self.store, session_id, template.name, request.description)
        metadata = {"description": request.description} if request.description else {}
        pipeline = await in_thread(
            lambda: self.store.create_pipeline(
                session_id=session_id,
                user=caller.user,
                workspace=workspace,
                name=template.name,
                template_id=None,
                template=template.to_envelope(),
                params=dict(values),
                graph=graph.to_json(),
                nodes=[(n.key, n.kind.value) for n in graph.nodes],
                plan=plan,
                metadata=metadata,
                pipeline_id=pipeline_id,
                workflow_id=pipeline_id,
            )
        )
        try:
            if drafts:
                await in_thread(lambda: self.store.add_pipeline_items(pipeline.id, drafts, user=caller.user))
            await self.engine.start_workflow(PIPELINE_WALK, pipeline.id, pipeline.id)
        except Exception as exc:
            await self._creation_failed(pipeline.id, exc)
            raise
        return await in_thread(self.store.get_pipeline, pipeline.id)

    async def _creation_failed(self, pipeline_id: str, exc: Exception) -> None:
        """The first walk could not start: the stored pipeline is ``failed`` with the reason (no
        ``planning`` row is left for the engine to load at every start-up). Never raises."""
        error = f"the pipeline could not start: {_reason(exc)}"
        try:
            await in_thread(
                lambda: self.store.set_pipeline_status(
                    pipeline_id,
                    PipelineStatus.FAILED,
                    expect=[PipelineStatus.PLANNING],
                    event={"reason": "start"},
                    error=error,
                    summary=error,
                )
            )
        except Exception:  # the store failed too: the restart's reconciliation pauses it
            log.exception("pipeline %s: recording its failed start failed", pipeline_id)

    async def _template(self, request: CreateRequest, caller: PipelineCaller) -> Template:
        if isinstance(request.template, dict):
            return self.templates.from_document(request.template)
        match = await self.templates.lookup(caller.user, request.template, request=request.description)
        return match.template

    async def _session(self, request: CreateRequest, caller: PipelineCaller) -> tuple[str, str]:
        """The session it works in and its workspace (a person's workspace gets a new session)."""
        session_id = request.session_id or caller.session_id
        if caller.session_id is not None and session_id != caller.session_id:
            raise InvalidRequestError("sessionId: an agent's pipeline works in its own session")
        if session_id is not None:
            session = await in_thread(self.store.get_session, session_id)
            return session.id, session.workspace
        if request.workspace is None:
            raise InvalidRequestError("workspace: give the workspace directory (or a sessionId)")
        workspace = await in_thread(_workspace_dir, request.workspace)
        session = await in_thread(
            lambda: self.store.create_session(workspace=workspace, adapter=self.default_adapter)
        )
        return session.id, session.workspace

    # ------------------------------------------------------------------ resume

    async def resume(
        self, pipeline: Pipeline, request: ResumeRequest, caller: PipelineCaller
    ) -> dict[str, Any]:
        """Resume (or rewind) a pipeline that is not running; answers ``{"id", "status": "resuming"}``
        at once (with ``pendingApproval`` when a person must first approve its replay review).

        The engine's start, the ``fromStage`` lookup and the ``skipItems`` check come first (nothing
        changes on a bad request). A pipeline with previous execution then awaits its replay review
        (:meth:`ReplayReviews.ask`; the walk is claimed on approval, :meth:`_replayed`); one without
        is claimed now (:meth:`_walk_again`).

        Raises:
            ConflictError: It is running or completed, another resume won, or one awaits its replay
                review ("already awaiting").
            ForbiddenError: A replay review is needed and the caller is unattended (nothing changed).
            InvalidRequestError: ``fromStage`` names no retained checkpoint, or a skipped item is
                unknown (nothing changed).
            ConflictError, StoreError: The engine cannot start, or the store failed.
        """
        await self.engine.ensure_started()
        if (refused := already_awaiting(pipeline)) is not None:
            raise refused
        if pipeline.status not in _RESUMABLE:  # what the claim would say, before any review
            raise ConflictError(
                f"pipeline {pipeline.id} is {pipeline.status.value}: it cannot be resumed now"
            )
        if request.from_stage:
            await self._rewind_point(pipeline, request.from_stage)
        await self._check_items(pipeline, request.skip_items)
        answer: dict[str, Any] = {"id": pipeline.id, "status": "resuming"}
        if await self.replays.needed(pipeline):
            return {**answer, "pendingApproval": await self.replays.ask(pipeline, request, caller)}
        await self._walk_again(pipeline, request, _RESUMABLE)
        return answer

    async def _walk_again(
        self, before: Pipeline, request: ResumeRequest, expect: tuple[PipelineStatus, ...]
    ) -> None:
        """Claim the walk (from a status in ``expect``), apply the skips and queued edits, then fork
        (``fromStage``) or wake the workflow, and watch the new walk.

        A failure after the claim puts the pipeline back as ``before`` (status, metadata) and is raised.

        Raises:
            ConflictError: It is not in ``expect`` (running, stopped meanwhile, a second resume).
            InvalidRequestError, ConflictError, StoreError: No checkpoint for ``fromStage``; the fork,
                the wake or the store failed.
        """
        pipeline_id = before.id
        workflow = before.workflow_id or pipeline_id
        new_workflow = f"{pipeline_id}.g{before.generation + 1}" if request.from_stage else workflow
        claimed = await in_thread(
            lambda: self.store.claim_pipeline_walk(
                pipeline_id, expect=expect, workflow_id=new_workflow, metadata=WITHOUT_REVIEW
            )
        )
        try:
            if request.skip_items:
                await in_thread(
                    lambda: self.store.skip_pipeline_items(
                        pipeline_id, request.skip_items, evidence=request.evidence
                    )
                )
            await in_thread(self.store.apply_item_changes, pipeline_id)
            if request.from_stage:
                rewind = await self._rewind_point(claimed, request.from_stage)
                await self._fork(claimed, workflow, new_workflow, *rewind)
            else:
                await self._wake(claimed, workflow)
        except BaseException as exc:
            with anyio.CancelScope(shield=True):
                await self._unclaim(before, claimed, workflow, exc)
            raise
        self._start_soon(self.watchdog.watch, pipeline_id, claimed.generation, claimed.updated_at)

    async def _unclaim(self, before: Pipeline, claimed: Pipeline, workflow: str, exc: BaseException) -> None:
        """A resume failed after its claim: the pipeline goes back to its status before it (only while
        it is still ``running`` in the claimed walk), with the failure as its error. Never raises."""
        error = f"the resume failed: {_reason(exc)}"
        try:
            await in_thread(
                lambda: self.store.set_pipeline_status(
                    before.id,
                    before.status,
                    expect=[PipelineStatus.RUNNING],
                    generation=claimed.generation,
                    event={"reason": "resume failed"},
                    workflow_id=workflow,
                    # a rewind's mark undone, the review's keys as they were
                    metadata=MetadataPatch.restoring(before.metadata, (REWIND_KEY, *REVIEW_KEYS)),
                    error=error,
                )
            )
        except ConflictError:  # stopped, or a later walk: theirs
            return
        except Exception:
            log.exception("pipeline %s: putting it back after a failed resume failed", before.id)

    async def _rewind_point(self, pipeline: Pipeline, stage: str) -> tuple[str, int]:
        """The node ``stage`` names and the step id of its latest retained checkpoint.

        Raises:
            InvalidRequestError: No node has that name or key, or it has no retained checkpoint
                (the message lists the accepted names).
        """
        graph = self.walker.graph_of(pipeline)
        snapshot = await in_thread(lambda: self.store.pipeline_snapshot(pipeline.id, history=False))
        kept = [a for a in snapshot.attempts if a.step_id is not None]
        accepted = sorted({f"{a.stage} ({a.node_key})" for a in kept})
        node = graph.resolve(stage)
        mine = [a for a in kept if a.node_key == node.key]
        if not mine:
            raise InvalidRequestError(
                f"fromStage: {stage!r} has no retained checkpoint to rewind to; accepted: "
                f"{', '.join(accepted) or 'none yet'}"
            )
        step_id = mine[-1].step_id
        assert step_id is not None
        return node.key, step_id

    async def _check_items(self, pipeline: Pipeline, ids: tuple[str, ...]) -> None:
        if not ids:
            return
        known = {i.id for i in await in_thread(self.store.list_pipeline_items, pipeline.id)}
        for index, item_id in enumerate(ids):
            if item_id not in known:
                raise InvalidRequestError(
                    f"skipItems[{index}]: pipeline {pipeline.id} has no item {item_id!r}"
                )

    async def _fork(self, pipeline: Pipeline, old: str, new: str, node: str, step_id: int) -> None:
        """Rewind: reset ``node`` and the nodes after it, mark the rewind, fork ``old`` at ``step_id``."""
        graph = self.walker.graph_of(pipeline)
        start = graph.position(node)
        for later in graph.nodes[start:]:
            await in_thread(self.store.set_pipeline_node, pipeline.id, later.key, NodeStatus.PENDING)
        metadata = MetadataPatch(put={REWIND_KEY: node})
        await in_thread(lambda: self.store.update_pipeline(pipeline.id, metadata=metadata))
        await self._cancel(old)
        await self.engine.fork_workflow(old, step_id, new)

    async def _cancel(self, workflow: str) -> None:
        try:
            await self.engine.cancel_workflow(workflow)
        except Exception:  # an unknown or finished workflow: nothing to cancel
            log.warning("pipeline workflow %s could not be cancelled", workflow, exc_info=True)

    async def _wake(self, pipeline: Pipeline, workflow: str) -> None:
        """Tell the waiting workflow ``resume``. A workflow no longer waiting is brought back: a
        cancelled one (or one failed by recovery) is resumed to receive it; one that ended (``ERROR``:
        a step raised past the walk; ``SUCCESS`` while the pipeline is not completed) is forked into
        a new walk (``<pipeline id>.g<generation>``) at its last step (run again when it raised),
        earlier steps replayed; a lost one starts a new walk."""
        info = await self.engine.workflow(workflow)
        message = {"kind": "resume", "generation": pipeline.generation}
        if info is None or info.status in _ENDED:
            fresh = f"{pipeline.id}.g{pipeline.generation}"
            steps = await self.engine.list_steps(workflow) if info is not None else []
            log.warning(
                "pipeline %s: workflow %s is %s; a new walk %s starts",
                pipeline.id,
                workflow,
                "lost" if info is None else info.status,
                fresh,
            )
            await in_thread(lambda: self.store.update_pipeline(pipeline.id, workflow_id=fresh))
            if not steps:
                await self.engine.start_workflow(PIPELINE_WALK, fresh, pipeline.id)
                return
            last = steps[-1]
            again = last.error is not None or (info is not None and info.status == "SUCCESS")
            await self.engine.fork_workflow(workflow, last.step_id if again else last.step_id + 1, fresh)
            await self.engine.send(fresh, message, WAKE_TOPIC)
            return
        await self.engine.send(workflow, message, WAKE_TOPIC)
        if info.status not in _LISTENING:
            await self.engine.resume_workflow(workflow)

    # ------------------------------------------------------------------ stop

    async def stop(self, pipeline: Pipeline, caller: PipelineCaller) -> Pipeline:
        """Stop the pipeline (resumable ``stopped``) and its live stage worker; a stopped one is
        answered as it is.

        Raises:
            ConflictError: It is completed or failed.
        """
        if pipeline.status is PipelineStatus.STOPPED:
            return pipeline
        stopped = await in_thread(
            lambda: self.store.set_pipeline_status(
                pipeline.id,
                PipelineStatus.STOPPED,
                expect=_STOPPABLE,
                event={"by": caller.user},
                summary=f"stopped by {caller.user}",
            )
        )
        if REPLAY_REVIEW_KEY in stopped.metadata:
            stopped = await self.replays.cancel(stopped, f"the pipeline was stopped by {caller.user}")
        handle = self.walker.live.get(pipeline.id)
        if handle is not None:
            await handle.stop(f"pipeline {pipeline.id} stopped by {caller.user}")
        return stopped

    # ------------------------------------------------------------------ answers

    def on_answer(self, approval: Approval) -> None:
        """The broker's listener: a person answered a pipeline's question (the walk is told), a
        stage worker's blocked call it raised again (kind ``pipeline_call``: its pipeline is its
        worker run's; the walk is told) or a replay review (:meth:`_replayed`)."""
        if approval.kind == REPLAY_KIND:
            self._start_soon(self._replayed, str(approval.input.get("pipelineId") or ""), approval)
            return
        if approval.kind == PIPELINE_CALL_KIND and approval.run_id is not None:
            self._start_soon(self._deliver_call, approval.run_id, approval)
            return
        if approval.tool_id != PIPELINE_TOOL_ID:
            return
        pipeline_id = str(approval.input.get("pipelineId") or "")
        self._start_soon(self._deliver, pipeline_id, _answer_message(approval))

    async def _deliver_call(self, run_id: str, approval: Approval) -> None:
        run = await in_thread(self.store.get_run, run_id)
        if run.pipeline_id is not None:
            await self._deliver(run.pipeline_id, _answer_message(approval))

    async def _replayed(self, pipeline_id: str, approval: Approval) -> None:
        """A person answered the replay review of ``pipeline_id``: approved (and still awaited), the
        resume or rewind it held goes on (:meth:`_walk_again`, only from ``awaiting_approval``: a stop
        meanwhile wins; a walk that cannot start puts it back, logged); denied, it is back as it was
        (:meth:`ReplayReviews.answered`).

        Raises:
            StoreError: Reading or answering the review failed.
        """
        replay = await self.replays.answered(approval)
        if replay is None:
            return
        before = replay.restored(await in_thread(self.store.get_pipeline, pipeline_id))
        try:
            await self._walk_again(before, replay.request, (PipelineStatus.AWAITING_APPROVAL,))
        except ConflictError:  # stopped (or put back) meanwhile: the replay is cancelled
            log.info("pipeline %s: the approved replay did not start; it no longer awaited it", pipeline_id)
        except OctipusError:  # put back with the failure as its error (the evidence) by _walk_again
            log.warning("pipeline %s: the approved replay failed to start", pipeline_id, exc_info=True)

    async def _deliver(self, pipeline_id: str, message: dict[str, Any]) -> None:
        pipeline = await in_thread(self.store.get_pipeline, pipeline_id)
        await self.engine.send(pipeline.workflow_id or pipeline.id, message, WAKE_TOPIC)

    def _start_soon(self, fn: Callable[..., Awaitable[None]], pipeline_id: str, *args: Any) -> None:
        """Run ``fn(pipeline_id, *args)`` in the daemon's task group, guarded (:meth:`_guarded`)."""
        if self._tg is None:
            log.warning("pipeline runner is not bound to a task group; %s skipped", fn.__name__)
            return
        self._tg.start_soon(self._guarded, fn, pipeline_id, *args)

    async def _guarded(self, fn: Callable[..., Awaitable[None]], pipeline_id: str, *args: Any) -> None:
        """Run a background task of the runner; its failure never reaches the daemon's task group
        (which would stop every run): it is logged with its traceback and recorded as the
        pipeline's error (the evidence; its status stays). Never raises but cancellation."""
        what = _TASKS.get(fn.__name__, fn.__name__)
        try:
            await fn(pipeline_id, *args)
        except Exception as exc:
            log.exception("pipeline %s: %s failed", pipeline_id, what)
            error = f"{what} failed: {_reason(exc)}"
            try:
                await in_thread(lambda: self.store.update_pipeline(pipeline_id, error=error))
            except Exception:
                log.exception("pipeline %s: recording that %s failed failed", pipeline_id, what)


def _answer_message(approval: Approval) -> dict[str, Any]:
    """The walk's message of a person's answer."""
    return {
        "kind": "answer",
        "approvalId": approval.id,
        "approved": approval.status is ApprovalStatus.APPROVED,
        "by": approval.decided_by,
        "reason": approval.decision_reason,
    }


def _reason(exc: BaseException) -> str:
    """An error's message for a person (an Octipus error's own message, else its type and text)."""
    if isinstance(exc, OctipusError):
        return exc.message
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _workspace_dir(given: str) -> str:
    """``given`` as an existing absolute directory, resolved (blocking).

    Raises:
        InvalidRequestError: It is relative or no directory.
    """
    folder = Path(given).expanduser()
    if not folder.is_absolute() or not folder.is_dir():
        raise InvalidRequestError(f"workspace: {given!r} is not an existing absolute directory")
    return str(folder.resolve())
