"""Cron schedules on the durable engine: DBOS Transact's dynamic schedules, typed and thin.

The rest of Octipus speaks to :class:`DurableSchedules` and never to ``dbos``. Facts of dbos 3.4
this rests on (``dbos/_scheduler.py``):

* A schedule is a row of the system database (name, cron, the workflow to start, a context value),
  ``ACTIVE`` or ``PAUSED``. A scheduler thread of the launched engine polls the rows (every second
  for the first minute after launch, then every :attr:`EngineLimits.scheduler_poll_seconds`; so a
  pause or a removal takes effect within that time: the fired workflow checks the schedule again)
  and runs one timer thread per active schedule, which enqueues the workflow at each slot after
  its start (a jitter of up to a tenth of the wait, at most 10 s, is added) under the id
  ``sched-<name>-<slot in ISO 8601>``, unless that workflow exists: the workflow receives the
  slot's time and the context.
* A slot that passed while no engine ran is not fired by the timer (it starts from now);
  :meth:`DurableSchedules.fire_missed` enqueues one chosen slot under the same id (DBOS's
  ``backfill_schedule``), so a slot is never started twice by the engine, whoever fires it.
* Cron expressions have 5 fields, or 6 with seconds first (croniter's ``second_at_beginning``),
  evaluated in UTC.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import anyio.to_thread
from croniter import CroniterBadDateError, croniter  # type: ignore[import-untyped]

from octipusd.durable.engine import DurableEngine, WorkflowDef
from octipusd.durable.setup import REGISTERED
from octipusd.errors import ConfigError, InvalidRequestError

__all__ = [
    "SCHEDULE_NAME_PREFIX",
    "DurableSchedules",
    "ScheduledWorkflow",
    "check_cron",
    "latest_slot",
    "next_slot",
]

#: The prefix of an Octipus schedule's name in the engine (followed by the schedule's id).
SCHEDULE_NAME_PREFIX: Final = "octipus-schedule-"
#: Half the width of the window :meth:`DurableSchedules.fire_missed` hands DBOS's backfill around one slot.
_ONE_SLOT: Final = timedelta(microseconds=1)

#: A workflow a schedule starts: ``fn(slot_at, context)``.
ScheduledWorkflow = WorkflowDef[[datetime, Any], None]


def check_cron(expression: str) -> str:
    """``expression`` stripped, if it is a cron expression the engine takes.

    Raises:
        InvalidRequestError: It is not (the message names the field ``cron`` and what is accepted).
    """
    text = " ".join(expression.split()) if isinstance(expression, str) else ""
    fields = len(text.split())
    if fields not in (5, 6) or not croniter.is_valid(text, second_at_beginning=True):
        raise InvalidRequestError(
            f"cron: {expression!r} is not a cron expression; give 5 fields (minute hour day-of-month month "
            'day-of-week, e.g. "0 7 * * 1-5") or 6 with seconds first, evaluated in UTC'
        )
    if next_slot(text, datetime.now(UTC)) is None:
        raise InvalidRequestError(
            f"cron: {expression!r} never fires (no such date, e.g. 30 February); give a day and month "
            "that exist"
        )
    return text


def latest_slot(expression: str, now: datetime) -> datetime | None:
    """The latest slot of ``expression`` at or before ``now`` (aware UTC); None when it has none
    (an expression naming a date that does not exist, such as 30 February)."""
    after = croniter(expression, now.astimezone(UTC) + _ONE_SLOT, second_at_beginning=True)
    try:
        slot: datetime = after.get_prev(datetime)
    except CroniterBadDateError:
        return None
    return slot.astimezone(UTC)


def next_slot(expression: str, after: datetime) -> datetime | None:
    """The first slot of ``expression`` strictly after ``after`` (aware UTC); None when it has none
    (an expression naming a date that does not exist, such as 30 February)."""
    try:
        slot: datetime = croniter(expression, after.astimezone(UTC), second_at_beginning=True).get_next(
            datetime
        )
    except CroniterBadDateError:
        return None
    return slot.astimezone(UTC)


def engine_name(schedule_id: str) -> str:
    """The engine's name of an Octipus schedule."""
    return f"{SCHEDULE_NAME_PREFIX}{schedule_id}"


class DurableSchedules:
    """The engine's schedules of one scheduled workflow (see the module).

    Every method starts the engine if it is not started yet (:meth:`DurableEngine.ensure_started`)
    and raises what that raises (:class:`~octipusd.errors.ConflictError`,
    :class:`~octipusd.errors.ConfigError`, :class:`~octipusd.errors.StoreError`).

    Args:
        engine: The durable engine (``workflow`` among its workflows).
        workflow: The workflow every schedule starts.
    """

    def __init__(self, engine: DurableEngine, workflow: ScheduledWorkflow) -> None:
        self.engine = engine
        self.workflow = workflow

    async def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run DBOS's blocking ``fn`` in a worker thread once the engine is started."""
        await self.engine.ensure_started()
        return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))

    def _registered(self) -> Callable[[datetime, Any], Coroutine[Any, Any, None]]:
        fn = REGISTERED.get(self.workflow.name)
        if fn is None:
            raise ConfigError(f"workflow {self.workflow.name!r} is not registered with the durable engine")
        return fn

    async def put(self, schedule_id: str, cron: str, context: Any, *, paused: bool = False) -> None:
        """Create or replace the engine's schedule of ``schedule_id`` (atomically), then pause or
        resume it (a replaced schedule keeps its earlier status otherwise)."""
        from dbos import DBOS

        await self.engine.ensure_started()
        entry = {
            "schedule_name": engine_name(schedule_id),
            "workflow_fn": self._registered(),
            "schedule": cron,
            "context": context,
        }
        await self._call(DBOS.apply_schedules, [entry])
        await (self.pause if paused else self.resume)(schedule_id)

    async def pause(self, schedule_id: str) -> None:
        """Pause the engine's schedule (no-op when it does not exist)."""
        from dbos import DBOS

        await self._call(DBOS.pause_schedule, engine_name(schedule_id))

    async def resume(self, schedule_id: str) -> None:
        """Resume the engine's schedule (no-op when it does not exist)."""
        from dbos import DBOS

        await self._call(DBOS.resume_schedule, engine_name(schedule_id))

    async def delete(self, schedule_id: str) -> None:
        """Delete the engine's schedule (no-op when it does not exist)."""
        from dbos import DBOS

        await self._call(DBOS.delete_schedule, engine_name(schedule_id))

    async def known(self) -> dict[str, str]:
        """The engine's Octipus schedules: schedule id -> ``ACTIVE`` or ``PAUSED``."""
        from dbos import DBOS

        found = await self._call(DBOS.list_schedules, schedule_name_prefix=SCHEDULE_NAME_PREFIX)
        return {s["schedule_name"].removeprefix(SCHEDULE_NAME_PREFIX): str(s["status"]) for s in found}

    async def fire_missed(self, schedule_id: str, slot_at: datetime) -> str:
        """Enqueue the workflow for one past slot, under the id the timer would have used (nothing
        when that workflow exists); returns that id.

        Raises:
            ConfigError: The engine has no such schedule.
        """
        from dbos import DBOS
        from dbos._error import DBOSException

        try:
            handles = await self._call(
                DBOS.backfill_schedule, engine_name(schedule_id), slot_at - _ONE_SLOT, slot_at + _ONE_SLOT
            )
        except DBOSException as exc:
            raise ConfigError(f"the durable engine cannot fire schedule {schedule_id}: {exc}") from exc
        return str(handles[0].get_workflow_id()) if handles else ""
