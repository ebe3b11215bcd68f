"""Store methods for schedules and the slots they fired (mixed into :class:`Store`).

Issue 28 item 8. A slot fires once: :meth:`ScheduleStoreMixin.claim_slot` inserts the firing of
``(schedule, slot)`` under a lock of the schedule's row, and answers None when that slot was
claimed before (by the live timer, by the start-up catch-up, or by a recovered workflow); the unique
key of ``schedule_firings`` backs it. Removing a schedule deletes its firings with it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from sqlmodel import Session as DbSession, col, delete, select

from octipusd.errors import NotFoundError
from octipusd.store.codec import StoreMixin, check_limit, dump_object, enum_member, load_object, new_id
from octipusd.store.schedule_records import (
    FiringStatus,
    Schedule,
    ScheduleFiring,
    ScheduleKind,
    ScheduleStatus,
)
from octipusd.store.schedule_rows import ScheduleFiringRow, ScheduleRow

__all__ = ["SCHEDULE_LIST_LIMIT", "ScheduleStoreMixin"]

#: Most schedules one listing returns.
SCHEDULE_LIST_LIMIT: Final = 1000
#: Firings one schedule's listing returns at most.
FIRING_LIST_LIMIT: Final = 100


def _schedule(row: ScheduleRow) -> Schedule:
    return Schedule(
        id=row.id,
        user=row.user,
        cron=row.cron,
        kind=enum_member(ScheduleKind, row.kind, "schedule kind"),
        session_id=row.session_id,
        workspace=row.workspace,
        prompt=row.prompt,
        pipeline=row.pipeline,
        params=load_object(row.params),
        status=enum_member(ScheduleStatus, row.status, "schedule status"),
        active_since=row.active_since,
        last_slot_at=row.last_slot_at,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def _firing(row: ScheduleFiringRow) -> ScheduleFiring:
    return ScheduleFiring(
        id=row.id,
        schedule_id=row.schedule_id,
        slot_at=row.slot_at,
        status=enum_member(FiringStatus, row.status, "firing status"),
        caught_up=row.caught_up,
        session_id=row.session_id,
        run_id=row.run_id,
        pipeline_id=row.pipeline_id,
        delivery=row.delivery,
        error=row.error,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


class ScheduleStoreMixin(StoreMixin):
    """Schedules and their firings; see the module docstring."""

    def create_schedule(
        self,
        *,
        user: str,
        cron: str,
        kind: ScheduleKind,
        session_id: str | None,
        workspace: str | None,
        prompt: str | None,
        pipeline: str | None,
        params: dict[str, Any],
    ) -> Schedule:
        """Store a new, active schedule (its fields checked by the caller, the schedules' service).

        Raises:
            InvalidRequestError: ``params`` is not a JSON object.
            StoreError: The database failed.
        """
        now = self._clock()
        row = ScheduleRow(
            id=new_id(),
            user=user,
            cron=cron,
            kind=kind.value,
            session_id=session_id,
            workspace=workspace,
            prompt=prompt,
            pipeline=pipeline,
            params=dump_object(params, "params"),
            status=ScheduleStatus.ACTIVE.value,
            active_since=now,
            created_at=now,
            updated_at=now,
        )
        with self._tx("storing a schedule", write=True) as db:
            db.add(row)
            db.flush()
            return _schedule(row)

    def get_schedule(self, schedule_id: str) -> Schedule:
        """The schedule with that id.

        Raises:
            NotFoundError: None has it.
            StoreError: The database failed.
        """
        with self._tx(f"reading schedule {schedule_id!r}") as db:
            return _schedule(self._schedule_row(db, schedule_id))

    @staticmethod
    def _schedule_row(db: DbSession, schedule_id: str, *, lock: bool = False) -> ScheduleRow:
        row = db.get(ScheduleRow, schedule_id, with_for_update=lock)
        if row is None:
            raise NotFoundError(f"schedule {schedule_id!r} not found (octipusctl schedules list)")
        return row

    def list_schedules(
        self,
        *,
        user: str | None = None,
        status: ScheduleStatus | None = None,
        limit: int = SCHEDULE_LIST_LIMIT,
    ) -> list[Schedule]:
        """Schedules, oldest first: of ``user`` (None: every user's), of ``status`` (None: any).

        Raises:
            InvalidRequestError: ``limit`` is below 1.
            StoreError: The database failed.
        """
        check_limit(limit)
        query = select(ScheduleRow)
        if user is not None:
            query = query.where(col(ScheduleRow.user) == user)
        if status is not None:
            query = query.where(col(ScheduleRow.status) == status.value)
        query = query.order_by(col(ScheduleRow.created_at), col(ScheduleRow.id)).limit(limit)
        with self._tx("listing schedules") as db:
            return [_schedule(r) for r in db.exec(query).all()]

    def has_active_schedules(self) -> bool:
        """True when a schedule is active: the durable engine must run (its timers fire them).

        Raises:
            StoreError: The database failed.
        """
        query = select(ScheduleRow.id).where(col(ScheduleRow.status) == ScheduleStatus.ACTIVE.value)
        with self._tx("looking for active schedules") as db:
            return db.exec(query.limit(1)).first() is not None

    def set_schedule_status(self, schedule_id: str, status: ScheduleStatus) -> Schedule:
        """Pause or resume a schedule; resuming (from paused) moves ``active_since`` to now, so the
        slots it was paused over are never caught up. Setting the status it has changes nothing.

        Raises:
            NotFoundError: No such schedule.
            StoreError: The database failed.
        """
        with self._tx(f"setting the status of schedule {schedule_id!r}", write=True) as db:
            row = self._schedule_row(db, schedule_id, lock=True)
            if row.status != status.value:
                now = self._clock()
                row.status, row.updated_at = status.value, now
                if status is ScheduleStatus.ACTIVE:
                    row.active_since = now
                db.add(row)
                db.flush()
            return _schedule(row)

    def delete_schedule(self, schedule_id: str) -> Schedule:
        """Delete a schedule and its firings; returns it as it was.

        Raises:
            NotFoundError: No such schedule.
            StoreError: The database failed.
        """
        with self._tx(f"removing schedule {schedule_id!r}", write=True) as db:
            row = self._schedule_row(db, schedule_id, lock=True)
            gone = _schedule(row)
            db.exec(delete(ScheduleFiringRow).where(col(ScheduleFiringRow.schedule_id) == schedule_id))
            db.delete(row)
            return gone

    def claim_slot(
        self, schedule_id: str, slot_at: datetime, *, caught_up: bool = False
    ) -> ScheduleFiring | None:
        """Claim the firing of one slot: the new firing (``claimed``), or None when the slot was
        claimed before. The schedule's ``last_slot_at`` moves to the slot when it is later.

        Raises:
            NotFoundError: No such schedule (it was removed).
            StoreError: The database failed.
        """
        with self._tx(f"claiming a slot of schedule {schedule_id!r}", write=True) as db:
            schedule = self._schedule_row(db, schedule_id, lock=True)
            taken = db.exec(
                select(ScheduleFiringRow.id).where(
                    col(ScheduleFiringRow.schedule_id) == schedule_id,
                    col(ScheduleFiringRow.slot_at) == slot_at,
                )
            ).first()
            if taken is not None:
                return None
            now = self._clock()
            row = ScheduleFiringRow(
                id=new_id(),
                schedule_id=schedule_id,
                slot_at=slot_at,
                status=FiringStatus.CLAIMED.value,
                caught_up=caught_up,
                created_at=now,
                updated_at=now,
            )
            db.add(row)
            if schedule.last_slot_at is None or schedule.last_slot_at < slot_at:
                schedule.last_slot_at = slot_at
                db.add(schedule)
            db.flush()
            return _firing(row)

    def begin_firing(self, firing_id: str) -> ScheduleFiring | None:
        """Move a ``claimed`` firing to ``starting`` (the one start of its slot): the firing, or None
        when it is not ``claimed`` (started before, or gone with its schedule).

        Raises:
            StoreError: The database failed.
        """
        with self._tx(f"starting schedule firing {firing_id!r}", write=True) as db:
            row = db.get(ScheduleFiringRow, firing_id, with_for_update=True)
            if row is None or row.status != FiringStatus.CLAIMED.value:
                return None
            row.status, row.updated_at = FiringStatus.STARTING.value, self._clock()
            db.add(row)
            db.flush()
            return _firing(row)

    def claimed_firings(self) -> list[ScheduleFiring]:
        """The firings claimed and not started yet (a workflow that could not hand one over), oldest
        slot first.

        Raises:
            StoreError: The database failed.
        """
        query = (
            select(ScheduleFiringRow)
            .where(col(ScheduleFiringRow.status) == FiringStatus.CLAIMED.value)
            .order_by(col(ScheduleFiringRow.slot_at))
        )
        with self._tx("listing claimed schedule firings") as db:
            return [_firing(r) for r in db.exec(query).all()]

    def fail_starting_firings(self, reason: str) -> list[ScheduleFiring]:
        """Mark every ``starting`` firing ``failed`` with ``reason`` (the daemon's start-up: a
        stopped daemon was starting them, and they are never started twice).

        Raises:
            StoreError: The database failed.
        """
        query = select(ScheduleFiringRow).where(col(ScheduleFiringRow.status) == FiringStatus.STARTING.value)
        with self._tx("failing the schedule firings a stopped daemon was starting", write=True) as db:
            rows = list(db.exec(query.with_for_update()).all())
            now = self._clock()
            for row in rows:
                row.status, row.error, row.updated_at = FiringStatus.FAILED.value, reason, now
                db.add(row)
            db.flush()
            return [_firing(r) for r in rows]

    def finish_firing(
        self,
        firing_id: str,
        status: FiringStatus,
        *,
        session_id: str | None = None,
        run_id: str | None = None,
        pipeline_id: str | None = None,
        delivery: str | None = None,
        error: str | None = None,
    ) -> ScheduleFiring:
        """Record how a claimed firing went.

        Raises:
            NotFoundError: No such firing (its schedule was removed meanwhile).
            StoreError: The database failed.
        """
        with self._tx(f"recording schedule firing {firing_id!r}", write=True) as db:
            row = db.get(ScheduleFiringRow, firing_id, with_for_update=True)
            if row is None:
                raise NotFoundError(f"schedule firing {firing_id!r} not found")
            row.status, row.updated_at = status.value, self._clock()
            row.session_id = session_id or row.session_id
            row.run_id, row.pipeline_id, row.delivery, row.error = run_id, pipeline_id, delivery, error
            db.add(row)
            db.flush()
            return _firing(row)

    def list_firings(self, schedule_id: str, *, limit: int = FIRING_LIST_LIMIT) -> list[ScheduleFiring]:
        """A schedule's firings, newest slot first.

        Raises:
            InvalidRequestError: ``limit`` is below 1.
            StoreError: The database failed.
        """
        check_limit(limit)
        query = (
            select(ScheduleFiringRow)
            .where(col(ScheduleFiringRow.schedule_id) == schedule_id)
            .order_by(col(ScheduleFiringRow.slot_at).desc())
            .limit(limit)
        )
        with self._tx(f"listing the firings of schedule {schedule_id!r}") as db:
            return [_firing(r) for r in db.exec(query).all()]
