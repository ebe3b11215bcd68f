"""The pipelines service: the one place the API, the page, the TUI and the bridge tools go through.

Seed 003 "Executable paths and pipeline recovery". Each use case validates its input once and
checks who asks (:class:`PipelineCaller`): a person (the API, the page) may act on the pipelines
of their user; an agent only on those of its own session and workspace (the owner may use the
tools from a later root turn of the same session; another session or user is refused).

Status reads are read-only, take no lock of the walker and give up after
:attr:`PipelineLimits.status_timeout_s` (15 s) when storage cannot answer: an error, never a guess.
Creating, resuming and stopping go through the walker (:class:`PipelineRunner`), which owns the
durable workflow.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import anyio
import anyio.to_thread

from octipusd.errors import (
    ConflictError,
    DatabaseTimeoutError,
    ForbiddenError,
    InvalidRequestError,
    PipelinesUnavailableError,
)
from octipusd.pipelines.answering import ApprovalAnswers
from octipusd.pipelines.replay import already_awaiting
from octipusd.pipelines.status import pipeline_summary, status_document
from octipusd.store.pipeline_records import Pipeline, PipelineEvent
from octipusd.store.repository import Store
from octipusd.toolkit.pipelines import CreateRequest, ItemChanges, ItemDraft, PipelineCaller, ResumeRequest

__all__ = [
    "CreateRequest",
    "PipelineCaller",
    "PipelineLimits",
    "PipelineRunner",
    "PipelineService",
    "ResumeRequest",
    "check_owner",
]

T = TypeVar("T")


@dataclass(frozen=True)
class PipelineLimits:
    """The pipelines' limits, each in its unit.

    Attributes:
        status_timeout_s: Seconds a status read waits for storage before it fails (seed 003: 15).
        list_limit: Most pipelines one list returns.
        resume_watchdog_s: Seconds a resume may take to get a stage working (time awaiting a
            person's answer excluded); past them the pipeline fails (issue 27: two minutes).
        watchdog_poll_s: Seconds between two looks of the watchdog.
    """

    status_timeout_s: float = 15.0
    list_limit: int = 100
    resume_watchdog_s: float = 120.0
    watchdog_poll_s: float = 1.0


class PipelineRunner(Protocol):
    """The walker: creates, starts, resumes and stops a pipeline's durable workflow."""

    async def create(self, request: CreateRequest, caller: PipelineCaller) -> Pipeline:
        """Validate, save the graph and initial checkpoint, and start the first walk; returns the handle.

        Raises:
            InvalidRequestError: A template or parameter error (naming the step and field).
            NotFoundError: No such session.
        """
        ...

    async def resume(
        self, pipeline: Pipeline, request: ResumeRequest, caller: PipelineCaller
    ) -> dict[str, Any]:
        """Resume (or rewind) a pipeline that is not running; answers ``{"id", "status": "resuming"}`` at once.

        Raises:
            ConflictError: It is running, or another resume is under way.
            InvalidRequestError: ``from_stage`` names no retained checkpoint, or a skipped item is unknown.
        """
        ...

    async def stop(self, pipeline: Pipeline, caller: PipelineCaller) -> Pipeline:
        """Stop the pipeline's current stage worker and leave it resumable ``stopped``."""
        ...


class PipelineService:
    """The pipelines' use cases (see the module).

    Args:
        store: The store (the public record).
        runner: The walker; None until the engine is wired (create, resume and stop then refuse).
        limits: The limits.
    """

    def __init__(
        self, store: Store, runner: PipelineRunner | None = None, limits: PipelineLimits | None = None
    ) -> None:
        self.store = store
        self.runner = runner
        self.limits = limits or PipelineLimits()
        self.answers = ApprovalAnswers(store)

    async def _read(self, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a store read in a worker thread, abandoned past :attr:`PipelineLimits.status_timeout_s`.

        Raises:
            DatabaseTimeoutError: Storage did not answer in time (nothing is guessed).
        """
        call = functools.partial(fn, *args, **kwargs)
        with anyio.move_on_after(self.limits.status_timeout_s):
            return await anyio.to_thread.run_sync(call, abandon_on_cancel=True)
        raise DatabaseTimeoutError(
            f"{what}: the database did not answer within {self.limits.status_timeout_s:g} s; try again later"
        )

    async def owned(self, pipeline_id: str, caller: PipelineCaller) -> Pipeline:
        """The pipeline, if ``caller`` may see and act on it.

        Raises:
            NotFoundError: No such pipeline.
            ForbiddenError: It belongs to another user, or (an agent) to another session or workspace.
            DatabaseTimeoutError: Storage did not answer in time.
        """
        pipeline = await self._read(f"reading pipeline {pipeline_id}", self.store.get_pipeline, pipeline_id)
        check_owner(pipeline, caller)
        return pipeline

    async def status(
        self, pipeline_id: str, caller: PipelineCaller, *, include_history: bool = True
    ) -> dict[str, Any]:
        """``get_pipeline_status``: the status document (:func:`~octipusd.pipelines.status.status_document`).

        Read-only; takes no lock of the walker.

        Raises:
            NotFoundError: No such pipeline.
            ForbiddenError: Not the caller's (see :meth:`owned`).
            DatabaseTimeoutError: Storage did not answer within 15 s.
        """
        snapshot = await self._read(
            f"reading the status of pipeline {pipeline_id}",
            self.store.pipeline_snapshot,
            pipeline_id,
            history=include_history,
        )
        check_owner(snapshot.pipeline, caller)
        return status_document(snapshot, include_history=include_history)

    async def events(self, pipeline_id: str, *, after: int, limit: int) -> list[PipelineEvent]:
        """History events of a pipeline after ``seq`` ``after`` (a live stream's poll; the caller
        checked the owner with :meth:`owned` first).

        Raises:
            DatabaseTimeoutError: Storage did not answer in time.
        """
        return await self._read(
            f"reading the history of pipeline {pipeline_id}",
            self.store.pipeline_events,
            pipeline_id,
            after=after,
            limit=limit,
        )

    async def list(self, caller: PipelineCaller, *, limit: int | None = None) -> list[dict[str, Any]]:
        """The caller's pipelines, newest first (an agent: those of its session).

        Raises:
            DatabaseTimeoutError: Storage did not answer in time.
        """
        found = await self._read(
            "listing pipelines",
            self.store.list_pipelines,
            user=caller.user,
            session_id=caller.session_id,
            limit=limit or self.limits.list_limit,
        )
        return [pipeline_summary(p) for p in found if _same_workspace(p, caller)]

    async def update_items(
        self, pipeline_id: str, caller: PipelineCaller, changes: ItemChanges
    ) -> dict[str, Any]:
        """``update_pipeline_items``: queue item edits atomically for the next item boundary.

        Returns:
            ``{"id", "status", "queued": [...]}``: the pipeline's status and its queue now.

        Raises:
            NotFoundError, ForbiddenError: See :meth:`owned`.
            InvalidRequestError: An id is unknown or a new item is malformed (nothing queued).
            ConflictError: The pipeline is completed, or the edit skips the item it is working on.
        """
        pipeline = await self.owned(pipeline_id, caller)
        queued = await anyio.to_thread.run_sync(
            functools.partial(self.store.queue_item_changes, pipeline.id, _by(changes, caller))
        )
        return {"id": pipeline.id, "status": pipeline.status.value, "queued": queued}

    async def answer_approval(self, pipeline_id: str, caller: PipelineCaller) -> dict[str, Any]:
        """``answer_pipeline_approval``: forward the pending approval to the person in the caller's
        conversation and wait up to five minutes for their explicit answer
        (:meth:`ApprovalAnswers.answer <octipusd.pipelines.answering.ApprovalAnswers.answer>`).

        Raises:
            NotFoundError, ForbiddenError: See :meth:`owned`.
            ConflictError: The pipeline has no pending approval.
        """
        pipeline = await self.owned(pipeline_id, caller)
        return await self.answers.answer(pipeline, caller.run_id, attended=caller.attended)

    async def add_plan_items(
        self,
        pipeline_id: str,
        caller: PipelineCaller,
        drafts: Sequence[ItemDraft],
        *,
        node_key: str | None = None,
    ) -> dict[str, Any]:
        """``plan__add_items``: append items to the plan now, leaving out titles already on it.

        Returns:
            ``{"id", "added": [{"id", "title"}], "skipped": [title, ...]}``.

        Raises:
            NotFoundError, ForbiddenError: See :meth:`owned`.
            InvalidRequestError: A draft is malformed or the plan would be too long (nothing added).
        """
        pipeline = await self.owned(pipeline_id, caller)
        added = await anyio.to_thread.run_sync(
            functools.partial(
                self.store.add_pipeline_items,
                pipeline.id,
                list(drafts),
                node_key=node_key,
                skip_known_titles=True,
            )
        )
        titles = {item.title for item in added}
        return {
            "id": pipeline.id,
            "added": [{"id": item.id, "title": item.title} for item in added],
            "skipped": [d.title.strip() for d in drafts if d.title.strip() not in titles],
        }

    # ------------------------------------------------------------------ through the walker

    def _walker(self) -> PipelineRunner:
        if self.runner is None:
            raise PipelinesUnavailableError(
                "this daemon cannot run pipelines: its pipeline engine is not wired in"
            )
        return self.runner

    async def create(self, request: CreateRequest, caller: PipelineCaller) -> dict[str, Any]:
        """``create_pipeline``: the walker saves the graph and initial checkpoint and starts the first
        walk; answers the new pipeline's summary (its ``id`` is the handle).

        Raises:
            InvalidRequestError: A template or parameter error (naming the step and field), or the
                workspace is not a directory (checked before the walker is asked).
            NotFoundError: No such session or template.
            ForbiddenError: The session is not the caller's.
            PipelinesUnavailableError: No walker is wired in.
        """
        await self._check_place(request, caller)
        return pipeline_summary(await self._walker().create(request, caller))

    async def _check_place(self, request: CreateRequest, caller: PipelineCaller) -> None:
        """Where the pipeline would work, checked before the walker is asked (nothing written).

        Raises:
            NotFoundError: ``session_id`` names no session.
            ForbiddenError: The session is another user's (or, for an agent, not its own).
            InvalidRequestError: ``workspace`` is not an absolute path of a directory.
        """
        if request.session_id is not None:
            session = await self._read(
                f"reading session {request.session_id}", self.store.get_session, request.session_id
            )
            if caller.session_id is not None and session.id != caller.session_id:
                raise ForbiddenError(f"session {session.id} is not this run's session")
        elif request.workspace is not None:
            place = Path(request.workspace)
            if not place.is_absolute() or not await anyio.to_thread.run_sync(place.is_dir):
                raise InvalidRequestError(
                    f"workspace: {request.workspace!r} is not an absolute path of a directory"
                )

    async def resume(
        self, pipeline_id: str, caller: PipelineCaller, request: ResumeRequest
    ) -> dict[str, Any]:
        """``resume_pipeline``: answers ``{"id", "status": "resuming"}`` at once (see
        :meth:`PipelineRunner.resume`).

        Raises:
            NotFoundError, ForbiddenError: See :meth:`owned`.
            ConflictError: It is running (or a walker is working on it): checked here first, and
                again atomically by the walker's claim (a second resume); or one resume awaits its
                replay review ("already awaiting").
            InvalidRequestError: ``from_stage`` or a skipped item is unknown.
            PipelinesUnavailableError: No walker is wired in.
        """
        pipeline = await self.owned(pipeline_id, caller)
        awaiting = already_awaiting(pipeline)  # one resume awaits its replay review
        if awaiting is not None:
            raise awaiting
        if pipeline.status.active:
            raise ConflictError(
                f"pipeline {pipeline.id} is {pipeline.status.value}: it cannot be resumed now; "
                "wait for it to stop or stop it first"
            )
        return await self._walker().resume(pipeline, request, caller)

    async def stop(self, pipeline_id: str, caller: PipelineCaller) -> dict[str, Any]:
        """``stop_pipeline``: stop the current stage worker; the pipeline is left resumable ``stopped``.

        Raises:
            NotFoundError, ForbiddenError: See :meth:`owned`.
            PipelinesUnavailableError: No walker is wired in.
        """
        pipeline = await self.owned(pipeline_id, caller)
        return pipeline_summary(await self._walker().stop(pipeline, caller))


def _by(changes: ItemChanges, caller: PipelineCaller) -> ItemChanges:
    return ItemChanges(
        skip=changes.skip, add=changes.add, order=changes.order, evidence=changes.evidence, user=caller.user
    )


def _same_workspace(pipeline: Pipeline, caller: PipelineCaller) -> bool:
    return caller.workspace is None or pipeline.workspace == caller.workspace


def check_owner(pipeline: Pipeline, caller: PipelineCaller) -> None:
    """Refuse ``caller`` unless the pipeline is theirs (see the module).

    Raises:
        ForbiddenError: Another user's, or (an agent) another session's or workspace's.
    """
    if pipeline.user != caller.user:
        raise ForbiddenError(f"pipeline {pipeline.id} belongs to another user")
    if caller.session_id is not None and (
        pipeline.session_id != caller.session_id or not _same_workspace(pipeline, caller)
    ):
        raise ForbiddenError(
            f"pipeline {pipeline.id} belongs to another session or workspace; only its owner's session may use it"
        )
