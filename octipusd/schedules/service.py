"""The schedules' service: the one place the API, ``octipusctl`` and the page go through.

Issue 28 item 8. A schedule runs a prompt (a turn) or a pipeline template at each slot of a cron
expression (UTC), in a named session or in a new session of a workspace per firing; its runs are
unattended (:mod:`octipusd.schedules.firing`). The public record is the store's; the timer is the
durable engine's (:class:`~octipusd.durable.schedules.DurableSchedules`), created, paused, resumed
and deleted with it.

Start-up (:meth:`ScheduleService.start_up`, once the engine runs): the firings a stopped daemon was
starting are marked failed (never started twice); the engine's schedules are brought in line with
the store's; each active schedule whose latest slot passed while the daemon was down fires that slot
once (only the latest, and only when ``schedules.catchUpMissed`` is on); claimed firings never
handed over are started.

Every request is checked once, here: a bad field is an :class:`~octipusd.errors.InvalidRequestError`
naming it and what to give.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import anyio.to_thread

from octipusd.durable.schedules import DurableSchedules, check_cron, latest_slot, next_slot
from octipusd.errors import ForbiddenError, InvalidRequestError, OctipusError
from octipusd.pipelines.prompts import resolve_parameters
from octipusd.pipelines.template_service import LookupSource, TemplateService
from octipusd.schedules.firing import ScheduleFirer
from octipusd.store.aio import in_thread
from octipusd.store.repository import Store
from octipusd.store.schedule_records import Schedule, ScheduleFiring, ScheduleKind, ScheduleStatus

__all__ = ["ScheduleLimits", "ScheduleRequest", "ScheduleService", "firing_document", "schedule_document"]

log = logging.getLogger("octipusd.schedules")

#: Why a firing a stopped daemon was starting is failed at the next start-up.
INTERRUPTED_FIRING: Final = "octipusd stopped while this firing was starting; it is not started again"


@dataclass(frozen=True)
class ScheduleLimits:
    """The schedules' limits, each in its unit.

    Attributes:
        prompt_chars: Characters of a schedule's prompt at most.
        firings_shown: Firings one schedule's document lists at most (newest first).
    """

    prompt_chars: int = 100_000
    firings_shown: int = 20


@dataclass(frozen=True)
class ScheduleRequest:
    """``octipusctl schedules add`` / ``POST /v1/schedules``, as received (checked by the service).

    Attributes:
        cron: The cron expression (5 fields, or 6 with seconds first), in UTC.
        session_id: The session each firing continues (exclusive with ``workspace``).
        workspace: The workspace a new session is made in at each firing.
        prompt: The turn's text (exclusive with ``pipeline``).
        pipeline: A pipeline template's name or id.
        params: The template's parameters (``pipeline`` only).
    """

    cron: str
    session_id: str | None = None
    workspace: str | None = None
    prompt: str | None = None
    pipeline: str | None = None
    params: dict[str, Any] | None = None


def firing_document(firing: ScheduleFiring) -> dict[str, Any]:
    """One firing as the API answers it."""
    return {
        "id": firing.id,
        "slotAt": firing.slot_at.isoformat(),
        "status": firing.status.value,
        "caughtUp": firing.caught_up,
        "sessionId": firing.session_id,
        "runId": firing.run_id,
        "pipelineId": firing.pipeline_id,
        "delivery": firing.delivery,
        "error": firing.error,
    }


def schedule_document(schedule: Schedule, firings: list[ScheduleFiring] | None = None) -> dict[str, Any]:
    """A schedule as the API answers it, with its firings (newest first) when given."""
    doc: dict[str, Any] = {
        "id": schedule.id,
        "cron": schedule.cron,
        "status": schedule.status.value,
        "kind": schedule.kind.value,
        "sessionId": schedule.session_id,
        "workspace": schedule.workspace,
        "prompt": schedule.prompt,
        "pipeline": schedule.pipeline,
        "params": schedule.params,
        "createdAt": schedule.created_at.isoformat() if schedule.created_at else None,
        "lastSlotAt": schedule.last_slot_at.isoformat() if schedule.last_slot_at else None,
        "nextSlotAt": None,
    }
    if schedule.status is ScheduleStatus.ACTIVE:
        upcoming = next_slot(schedule.cron, datetime.now(UTC))
        doc["nextSlotAt"] = upcoming.isoformat() if upcoming is not None else None
    if firings is not None:
        doc["firings"] = [firing_document(f) for f in firings]
    return doc


class ScheduleService:
    """The schedules' use cases (see the module).

    Args:
        store: The store (the public record).
        durable: The engine's schedules.
        firer: Starts the firings (its catch-up set is filled at start-up).
        catch_up_missed: ``schedules.catchUpMissed``: fire the latest slot missed while the daemon was down.
        limits: The limits.
        templates: The pipelines' templates: a ``--pipeline`` schedule's template and parameters are
            checked when it is added (None: checked only when it fires).
    """

    def __init__(
        self,
        store: Store,
        durable: DurableSchedules,
        firer: ScheduleFirer,
        *,
        catch_up_missed: bool = True,
        limits: ScheduleLimits | None = None,
        templates: TemplateService | None = None,
    ) -> None:
        self.store = store
        self.templates = templates
        self.durable = durable
        self.firer = firer
        self.catch_up_missed = catch_up_missed
        self.limits = limits or ScheduleLimits()

    # ------------------------------------------------------------------ use cases

    async def add(self, request: ScheduleRequest, user: str) -> dict[str, Any]:
        """Create a schedule (active at once) and its timer; answers its document.

        Raises:
            InvalidRequestError: A field is wrong (named): a bad cron expression, both or neither of
                ``session_id``/``workspace`` or of ``prompt``/``pipeline``, parameters without a
                pipeline, a workspace that is no directory, a session in a shared space.
            NotFoundError: No such session.
            ConflictError, ConfigError, StoreError: The durable engine cannot start (nothing kept).
        """
        cron, kind = await self._checked(request)
        pipeline = await self._template(request, user)
        schedule = await in_thread(
            lambda: self.store.create_schedule(
                user=user,
                cron=cron,
                kind=kind,
                session_id=request.session_id,
                workspace=request.workspace,
                prompt=request.prompt,
                pipeline=pipeline,
                params=dict(request.params or {}),
            )
        )
        try:
            await self.durable.put(schedule.id, cron, _context(schedule))
        except Exception:  # nothing kept (a row left by a cancellation gets its timer at the next start-up)
            await in_thread(self.store.delete_schedule, schedule.id)
            raise
        log.info("schedule %s created: %s", schedule.id, cron)
        return schedule_document(schedule, [])

    async def _checked(self, request: ScheduleRequest) -> tuple[str, ScheduleKind]:
        """The request's cron expression and kind, once every field is checked (see :meth:`add`)."""
        cron = check_cron(request.cron)
        if (request.session_id is None) == (request.workspace is None):
            raise InvalidRequestError(
                "session_id, workspace: give exactly one: the session each firing continues "
                "(--session ID) or the workspace a new session is made in at each firing (--workspace DIR)"
            )
        if (request.prompt is None) == (request.pipeline is None):
            raise InvalidRequestError(
                "prompt, pipeline: give exactly one: the text of each firing's turn (--prompt TEXT) or "
                "a pipeline template to run (--pipeline TEMPLATE)"
            )
        if request.prompt is not None and not (0 < len(request.prompt.strip()) <= self.limits.prompt_chars):
            raise InvalidRequestError(
                f"prompt: give the turn's text, 1 to {self.limits.prompt_chars} characters"
            )
        if request.pipeline is not None and not request.pipeline.strip():
            raise InvalidRequestError(
                "pipeline: give a template's name or id (octipusctl pipelines templates)"
            )
        if request.params and request.pipeline is None:
            raise InvalidRequestError("params: only a --pipeline schedule takes parameters (--param K=V)")
        if request.session_id is not None:
            session = await in_thread(self.store.get_session, request.session_id)
            if session.space_id is not None:
                raise InvalidRequestError(
                    f"session_id: session {session.id} is in a shared space, and spaces refuse schedule "
                    "runs; schedule a personal session or a workspace instead"
                )
        elif request.workspace is not None:
            place = Path(request.workspace)
            if not place.is_absolute():
                raise InvalidRequestError(
                    f"workspace: {request.workspace!r} is not an absolute path; give the directory's full path"
                )
            if not await anyio.to_thread.run_sync(place.is_dir):
                raise InvalidRequestError(
                    f"workspace: {request.workspace!r} is not a directory here (it does not exist, or is "
                    "a file); give an existing directory"
                )
        return cron, ScheduleKind.PIPELINE if request.pipeline is not None else ScheduleKind.PROMPT

    async def _template(self, request: ScheduleRequest, user: str) -> str | None:
        """A ``--pipeline`` schedule's template, as its exact name, once it is found and the parameters
        fit it (a name matched only roughly is refused: a schedule fires unattended, so nobody would
        notice it running another template; nor does a miss fall back to a one-stage run).

        Raises:
            InvalidRequestError: The template is found only roughly, or a parameter is wrong (named).
            NotFoundError: No template has that name or id.
        """
        if request.pipeline is None or self.templates is None:
            return request.pipeline
        ref = request.pipeline.strip()
        match = await self.templates.lookup(user, ref)
        entry = match.entry
        if entry is None or match.source is not LookupSource.EXACT:
            named = entry.name if entry is not None else "another template"
            raise InvalidRequestError(
                f"pipeline: no template is named {ref!r} (the closest is {named!r}); give its exact name "
                "or id (octipusctl pipelines templates list)"
            )
        resolve_parameters(entry.template, dict(request.params or {}))
        return entry.name

    async def owned(self, schedule_id: str, user: str) -> Schedule:
        """The schedule, if it is ``user``'s.

        Raises:
            NotFoundError: No such schedule.
            ForbiddenError: It is another user's.
        """
        schedule = await in_thread(self.store.get_schedule, schedule_id)
        if schedule.user != user:
            raise ForbiddenError(f"schedule {schedule_id} belongs to another user")
        return schedule

    async def list_schedules(self, user: str) -> list[dict[str, Any]]:
        """The user's schedules, oldest first, each with its latest firing (``firings``: at most one)."""
        found = await in_thread(lambda: self.store.list_schedules(user=user))
        docs = []
        for schedule in found:
            latest = await in_thread(functools.partial(self.store.list_firings, schedule.id, limit=1))
            docs.append(schedule_document(schedule, latest))
        return docs

    async def show(self, schedule_id: str, user: str) -> dict[str, Any]:
        """One schedule with its latest firings (:attr:`ScheduleLimits.firings_shown`).

        Raises:
            NotFoundError, ForbiddenError: See :meth:`owned`.
        """
        schedule = await self.owned(schedule_id, user)
        firings = await in_thread(
            lambda: self.store.list_firings(schedule.id, limit=self.limits.firings_shown)
        )
        return schedule_document(schedule, firings)

    async def pause(self, schedule_id: str, user: str) -> dict[str, Any]:
        """Pause a schedule: no slot fires until it is resumed (a slot already under way finishes).

        Raises:
            NotFoundError, ForbiddenError: See :meth:`owned`.
            ConflictError, ConfigError, StoreError: The durable engine cannot start.
        """
        await self.owned(schedule_id, user)
        schedule = await in_thread(self.store.set_schedule_status, schedule_id, ScheduleStatus.PAUSED)
        await self.durable.pause(schedule_id)
        return schedule_document(schedule)

    async def resume(self, schedule_id: str, user: str) -> dict[str, Any]:
        """Resume a paused schedule from its next slot (the slots it was paused over never fire).

        Raises:
            NotFoundError, ForbiddenError: See :meth:`owned`.
            ConflictError, ConfigError, StoreError: The durable engine cannot start.
        """
        await self.owned(schedule_id, user)
        schedule = await in_thread(self.store.set_schedule_status, schedule_id, ScheduleStatus.ACTIVE)
        await self.durable.put(schedule.id, schedule.cron, _context(schedule))
        return schedule_document(schedule)

    async def remove(self, schedule_id: str, user: str) -> dict[str, Any]:
        """Delete a schedule and its firings' record (runs and pipelines it started stay).

        Raises:
            NotFoundError, ForbiddenError: See :meth:`owned`.
            ConflictError, ConfigError, StoreError: The durable engine cannot start.
        """
        await self.owned(schedule_id, user)
        gone = await in_thread(self.store.delete_schedule, schedule_id)
        await self.durable.delete(schedule_id)
        return {**schedule_document(gone), "status": "removed"}

    # ------------------------------------------------------------------ start-up

    async def start_up(self) -> None:
        """The daemon's start-up, once the engine runs or was not needed (see the module); each
        failure is logged, nothing here raises."""
        try:
            failed = await in_thread(self.store.fail_starting_firings, INTERRUPTED_FIRING)
            for firing in failed:
                log.warning(
                    "schedule %s: its %s slot was starting when octipusd stopped",
                    firing.schedule_id,
                    firing.slot_at,
                )
            if not self.durable.engine.started:
                return
            schedules = await in_thread(self.store.list_schedules)
            await self._align(schedules)
            if self.catch_up_missed:
                await self._catch_up([s for s in schedules if s.status is ScheduleStatus.ACTIVE])
            for firing in await in_thread(self.store.claimed_firings):
                self.firer.hand_over(firing.id)
        except OctipusError:
            log.exception("the schedules' start-up did not finish")

    async def _align(self, schedules: list[Schedule]) -> None:
        """Bring the engine's schedules in line with the store's (a crash between the two writes)."""
        known = await self.durable.known()
        for schedule in schedules:
            paused = schedule.status is ScheduleStatus.PAUSED
            engine_status = known.pop(schedule.id, None)
            if engine_status is None:
                await self.durable.put(schedule.id, schedule.cron, _context(schedule), paused=paused)
            elif paused != (engine_status == "PAUSED"):
                await (self.durable.pause if paused else self.durable.resume)(schedule.id)
        for leftover in known:
            await self.durable.delete(leftover)

    async def _catch_up(self, active: list[Schedule]) -> None:
        """Fire, once, the latest slot of each active schedule that passed unclaimed since it was
        last claimed or became active."""
        now = await in_thread(self.store.now)
        for schedule in active:
            since = max(filter(None, (schedule.active_since, schedule.last_slot_at)), default=now)
            slot = latest_slot(schedule.cron, now)
            if slot is None or slot <= since:
                continue
            self.firer.catching_up.add((schedule.id, slot))
            await self.durable.fire_missed(schedule.id, slot)
            log.info(
                "schedule %s: firing its %s slot, missed while octipusd was down",
                schedule.id,
                slot.isoformat(),
            )


def _context(schedule: Schedule) -> dict[str, str]:
    """What the engine hands the workflow at each slot."""
    return {"scheduleId": schedule.id}
