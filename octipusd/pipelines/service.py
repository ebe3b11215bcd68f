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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import anyio
import anyio.to_thread

from octipusd.errors import ConflictError, DatabaseTimeoutError, ForbiddenError
from octipusd.pipelines.status import pipeline_summary, status_document
from octipusd.store.pipeline_item_store import ItemChanges, ItemDraft
from octipusd.store.pipeline_records import Pipeline
from octipusd.store.repository import Store

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


@dataclass(frozen=True)
class PipelineCaller:
    """Who asks.

    Attributes:
        user: The user asking (a person, or the user a run acts for).
        session_id: The session of the root run calling a bridge tool; None for a person (API, page).
        workspace: That run's workspace (absolute path); None for a person.
    """

    user: str
    session_id: str | None = None
    workspace: str | None = None


@dataclass(frozen=True)
class ResumeRequest:
    """``resume_pipeline({id, fromStage?, skipItems?, evidence?})``, checked.

    Attributes:
        from_stage: An exact stage name or node key among retained checkpoints, or None: the latest.
        skip_items: Items earlier work already delivered (every id checked before any is skipped).
        evidence: The commit and check given for them, kept.
    """

    from_stage: str | None = None
    skip_items: tuple[str, ...] = ()
    evidence: str | None = None


@dataclass(frozen=True)
class CreateRequest:
    """``create_pipeline`` / ``POST /v1/pipelines`` / ``octipusctl pipelines run``, as received.

    Attributes:
        template: A template's name or id (looked up: exact, then fuzzy, then the one-stage
            ``Execute`` fallback), or a template document (steps and parameters, or the export envelope).
        params: Parameter values by key.
        session_id: The session it works in (an agent's own; a person may name one), or None: a person
            gives ``workspace`` and a new session is made there.
        workspace: The workspace directory (a person without a session).
        description: The ``{{description}}`` of the prompts (what this run is for).
        items: Plan items to start with (a pipeline whose first stage ``producesPlan`` makes its own).
    """

    template: str | dict[str, Any]
    params: dict[str, Any]
    session_id: str | None = None
    workspace: str | None = None
    description: str | None = None
    items: tuple[ItemDraft, ...] = ()


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

    async def create(self, request: CreateRequest, caller: PipelineCaller) -> Pipeline:
        """``create_pipeline``: validate, save the graph and initial checkpoint, start the walk.

        Raises:
            InvalidRequestError, NotFoundError: See :meth:`PipelineRunner.create`.
            ConflictError: The walker is not wired (no durable engine).
        """
        return await self._runner().create(request, caller)

    async def resume(
        self, pipeline_id: str, caller: PipelineCaller, request: ResumeRequest
    ) -> dict[str, Any]:
        """``resume_pipeline``: answers ``{"id", "status": "resuming"}`` at once.

        Raises:
            NotFoundError, ForbiddenError: See :meth:`owned`.
            ConflictError: It is running, or another resume is under way.
            InvalidRequestError: ``fromStage`` or a skipped item is unknown (nothing changed).
        """
        pipeline = await self.owned(pipeline_id, caller)
        return await self._runner().resume(pipeline, request, caller)

    async def stop(self, pipeline_id: str, caller: PipelineCaller) -> dict[str, Any]:
        """``stop_pipeline``: the pipeline is ``stopped`` (resumable); its summary.

        Raises:
            NotFoundError, ForbiddenError: See :meth:`owned`.
            ConflictError: It is completed or failed.
        """
        pipeline = await self.owned(pipeline_id, caller)
        return pipeline_summary(await self._runner().stop(pipeline, caller))

    def _runner(self) -> PipelineRunner:
        if self.runner is None:
            raise ConflictError("pipelines cannot run here: the durable engine is not wired")
        return self.runner

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
