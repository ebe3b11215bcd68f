"""Firing a schedule's slot: the workflow the engine's timer starts, and what it starts.

One slot is one workflow (``sched-octipus-schedule-<id>-<slot>``, started by the engine's timer or
by the start-up catch-up; :mod:`octipusd.durable.schedules`)::

    step "claim": the store claims (schedule, slot) once   -> a firing id, or None: claimed before
    hand the firing to the firer's dispatcher              (outside the engine: see below)
    dispatcher: claimed -> starting (once), then start it  -> started | failed (notified) | skipped

The start happens in the firer's own task (:meth:`ScheduleFirer.run`, in the daemon's task group),
never inside the workflow: the engine's context travels with every task started from a workflow,
and the turn's run, its tools and a pipeline's own workflow must not run in it. A restart replays the
claim (its recorded firing id) and hands the firing again; only a ``claimed`` firing is started, and
one a stopped daemon left ``starting`` is marked failed at start-up (never started twice).

What a firing starts (unattended: an ASK is refused as "review required" and notifies the person,
nothing is granted):

* ``prompt`` in a session: a new unattended turn (:meth:`RunManager.post_turn`); when the session's
  root run is live, the prompt steers it instead (:meth:`RunManager.steer`), never queued behind it;
* ``prompt`` in a workspace: a new unattended session there per firing, with the turn;
* ``pipeline``: :meth:`PipelineService.create` as the schedule's user, in the session, or in a new
  unattended session of the workspace.

A firing that cannot start (a removed session or workspace, a session now in a space, a template
error, a daemon stopping) is recorded ``failed`` with the reason and notified.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from anyio.abc import TaskStatus

from octipusd.durable.engine import DurableEngine, WorkflowDef
from octipusd.errors import ConflictError, InvalidRequestError, NotFoundError, OctipusError
from octipusd.pipelines.service import PipelineService
from octipusd.runtime.manager import RunManager
from octipusd.store.aio import in_thread
from octipusd.store.repository import Store
from octipusd.store.schedule_records import (
    FiringStatus,
    Schedule,
    ScheduleFiring,
    ScheduleKind,
    ScheduleStatus,
)
from octipusd.toolkit.pipelines import CreateRequest, PipelineCaller

__all__ = ["SCHEDULE_FIRE", "FiringLimits", "ScheduleFirer", "active_firer", "install_firer", "schedule_fire"]

log = logging.getLogger("octipusd.schedules")


@dataclass(frozen=True)
class FiringLimits:
    """Bounds of the firer.

    Attributes:
        queued_firings: Firings waiting for the dispatcher at most (past that a workflow fails and
            its firing stays ``claimed``, started at the next start-up's recovery).
    """

    queued_firings: int = 1000


@dataclass(frozen=True)
class _Started:
    session_id: str | None = None
    run_id: str | None = None
    pipeline_id: str | None = None
    delivery: str | None = None


class ScheduleFirer:
    """Claims slots (inside the workflow) and starts their work (in its own task); see the module.

    Args:
        store: The store.
        engine: The durable engine (the workflow's steps).
        runs: The turns' entry points.
        pipelines: The pipelines' service.
        default_adapter: The adapter of a session a workspace's firing makes.
        limits: The firer's bounds.

    Attributes:
        on_failure: Told each firing that could not start (the notifier's), or None.
    """

    def __init__(
        self,
        store: Store,
        engine: DurableEngine,
        runs: RunManager,
        pipelines: PipelineService,
        *,
        default_adapter: str,
        limits: FiringLimits | None = None,
    ) -> None:
        self.store = store
        self.engine = engine
        self.runs = runs
        self.pipelines = pipelines
        self.default_adapter = default_adapter
        self.limits = limits or FiringLimits()
        self.on_failure: Callable[[Schedule, ScheduleFiring], None] | None = None
        self._send, self._receive = anyio.create_memory_object_stream[str](self.limits.queued_firings)
        self._bound = False
        #: Slots the start-up catch-up fires (their firings are marked ``caught_up``).
        self.catching_up: set[tuple[str, datetime]] = set()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Start the firings handed over, each in its own task, until cancelled (``tg.start``)."""
        async with anyio.create_task_group() as tg:
            self._bound = True
            task_status.started()
            try:
                async for firing_id in self._receive:
                    tg.start_soon(self.start, firing_id)
            finally:
                self._bound = False

    async def claim(self, schedule_id: str, slot_iso: str) -> str | None:
        """The workflow's step: claim the slot once; the firing's id, or None (claimed before, or the
        schedule was removed)."""
        slot_at = datetime.fromisoformat(slot_iso)
        caught_up = (schedule_id, slot_at) in self.catching_up
        try:
            firing = await in_thread(lambda: self.store.claim_slot(schedule_id, slot_at, caught_up=caught_up))
        except NotFoundError:
            log.info("schedule %s was removed; its %s slot does not fire", schedule_id, slot_iso)
            return None
        return firing.id if firing is not None else None

    def hand_over(self, firing_id: str) -> None:
        """Give a claimed firing to the dispatcher (never blocks).

        Raises:
            ConflictError: The dispatcher is not running or its queue is full (the firing stays
                ``claimed``; the workflow fails and the next start-up recovers it).
        """
        if not self._bound:
            raise ConflictError("the schedules' dispatcher is not running; the slot fires after a restart")
        try:
            self._send.send_nowait(firing_id)
        except anyio.WouldBlock:
            raise ConflictError(
                f"{self.limits.queued_firings} schedule firings are waiting; this one fires after a restart"
            ) from None

    async def start(self, firing_id: str) -> None:
        """Start one claimed firing's work once (see the module); nothing here raises: a failure is
        recorded on the firing, logged and notified."""
        try:
            firing = await in_thread(self.store.begin_firing, firing_id)
            if firing is None:
                return  # started before (a replayed workflow), or gone with its schedule
            schedule = await in_thread(self.store.get_schedule, firing.schedule_id)
        except OctipusError:
            log.exception("schedule firing %s could not be read", firing_id)
            return
        if schedule.status is not ScheduleStatus.ACTIVE:
            await self._finish(schedule, firing, FiringStatus.SKIPPED, error="the schedule is paused")
            return
        try:
            started = await self._start_work(schedule, firing)
        except OctipusError as exc:
            await self._finish(schedule, firing, FiringStatus.FAILED, error=exc.message)
            return
        except Exception as exc:  # a bug: recorded as the firing's failure, with its traceback logged
            log.exception("schedule %s: firing its %s slot failed", schedule.id, firing.slot_at)
            await self._finish(schedule, firing, FiringStatus.FAILED, error=f"internal error: {exc!r}")
            return
        await self._finish(schedule, firing, FiringStatus.STARTED, started=started)

    async def _finish(
        self,
        schedule: Schedule,
        firing: ScheduleFiring,
        status: FiringStatus,
        *,
        error: str | None = None,
        started: _Started | None = None,
    ) -> None:
        done = started or _Started()
        try:
            final = await in_thread(
                lambda: self.store.finish_firing(
                    firing.id,
                    status,
                    session_id=done.session_id,
                    run_id=done.run_id,
                    pipeline_id=done.pipeline_id,
                    delivery=done.delivery,
                    error=error,
                )
            )
        except OctipusError:
            log.exception("schedule %s: recording its %s slot failed", schedule.id, firing.slot_at)
            final = firing
        if status is FiringStatus.FAILED:
            log.warning("schedule %s: its %s slot did not start: %s", schedule.id, firing.slot_at, error)
            if self.on_failure is not None:
                self.on_failure(schedule, final)
        else:
            log.info("schedule %s: %s slot %s", schedule.id, firing.slot_at.isoformat(), status.value)

    async def _start_work(self, schedule: Schedule, firing: ScheduleFiring) -> _Started:
        """Start the firing's turn or pipeline (see the module).

        Raises:
            OctipusError: It cannot start (the message says why).
        """
        session_id = schedule.session_id
        if session_id is not None:
            session = await in_thread(self.store.get_session, session_id)
            if session.space_id is not None:
                raise ConflictError(
                    f"session {session_id} is in a shared space, which refuses schedule runs; "
                    "remove this schedule and schedule a personal session"
                )
        else:
            session_id = await self._new_session(schedule, firing)
        if schedule.kind is ScheduleKind.PIPELINE:
            request = CreateRequest(
                template=schedule.pipeline or "",
                params=dict(schedule.params),
                session_id=session_id,
                description=f"schedule {schedule.id}, slot {firing.slot_at.isoformat(timespec='seconds')}",
            )
            created = await self.pipelines.create(request, PipelineCaller(user=schedule.user))
            return _Started(session_id=session_id, pipeline_id=str(created["id"]))
        woke = await self.runs.continue_unattended(session_id, schedule.prompt or "")
        delivery = "steered" if woke["mode"] == "steer" else "turn"
        return _Started(session_id=session_id, run_id=woke["run_id"], delivery=delivery)

    async def _new_session(self, schedule: Schedule, firing: ScheduleFiring) -> str:
        """A new unattended session in the schedule's workspace.

        Raises:
            InvalidRequestError: The workspace is no longer a directory.
        """
        workspace = schedule.workspace or ""
        if not await anyio.to_thread.run_sync(Path(workspace).is_dir):
            raise InvalidRequestError(f"workspace {workspace!r} is not a directory any more")
        title = f"schedule {schedule.id[:8]} {firing.slot_at.isoformat(timespec='minutes')}"
        session = await in_thread(
            lambda: self.store.create_session(
                workspace=workspace, adapter=self.default_adapter, title=title, attended=False
            )
        )
        return session.id


#: The firer the schedule workflows of this process use (set by :func:`install_firer`).
_ACTIVE: list[ScheduleFirer] = []


def install_firer(firer: ScheduleFirer) -> None:
    """Make ``firer`` the one the schedule workflows of this process reach."""
    _ACTIVE.clear()
    _ACTIVE.append(firer)


def active_firer() -> ScheduleFirer:
    """The installed firer.

    Raises:
        ConflictError: None is installed (a workflow recovered before composition: a bug).
    """
    if not _ACTIVE:
        raise ConflictError("no schedule firer is installed in this process")
    return _ACTIVE[0]


async def schedule_fire(slot_at: datetime, context: Any) -> None:
    """The workflow of one slot (see the module): claim it once as a step, hand it to the dispatcher."""
    firer = active_firer()
    schedule_id = str(context["scheduleId"])
    firing_id = await firer.engine.step("claim", firer.claim, schedule_id, slot_at.isoformat())
    if firing_id is not None:
        firer.hand_over(firing_id)


#: The schedules' workflow, registered with the durable engine at composition.
SCHEDULE_FIRE: WorkflowDef[[datetime, Any], None] = WorkflowDef("octipus.schedule.fire", schedule_fire)
