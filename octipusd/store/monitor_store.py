"""Store methods for monitors (mixed into :class:`Store`; FACTS.md §7, issue 28 item 7).

A monitor's row is its public record: the monitor's workflow (``octipusd/monitors/watch.py``) writes
each check and each move of its lifecycle here, and the surfaces read it. Every write locks the
monitor's row (``SELECT ... FOR UPDATE`` on PostgreSQL; SQLite's writes are serialised by the store's
write lock) and moves only from the statuses it expects, so a pause racing a match, or two
deliveries, never both win. A creation locks the owner's session and counts its active monitors in
the same transaction: the per-session limit holds under concurrent creations.

The event source reads the owner's session's events here too: a pipeline's status changes (its
``status`` history events) and the end of the session's runs started after the monitor.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import func
from sqlmodel import Session as DbSession, col, select

from octipusd.errors import ConflictError, NotFoundError, StoreError
from octipusd.store.codec import StoreMixin, check_limit, dump_object, load_object, new_id
from octipusd.store.models import MonitorRow, PipelineEventRow, PipelineRow, RunRow
from octipusd.store.monitor_records import Monitor, MonitorStatus

__all__ = ["MonitorStoreMixin"]

#: Fields :meth:`MonitorStoreMixin.move_monitor` may set beside the status (JSON ones are objects).
_JSON_FIELDS = frozenset({"baseline", "last_observation", "match", "cursor", "delivery"})
_PLAIN_FIELDS = frozenset({"fired", "error", "paused_at"})
#: Statuses a run has once it ended.
_RUN_ENDED = ("succeeded", "failed", "interrupted", "cancelled")


def _json(text: str | None) -> dict[str, Any] | None:
    return load_object(text) if text is not None else None


def _monitor(row: MonitorRow) -> Monitor:
    return Monitor(
        id=row.id,
        session_id=row.session_id,
        user=row.user,
        workspace=row.workspace,
        status=MonitorStatus(row.status),
        source=load_object(row.source),
        condition=_json(row.condition),
        continuation=row.continuation,
        interval_seconds=row.interval_seconds,
        deadline_at=row.deadline_at,
        baseline=_json(row.baseline),
        last_observation=_json(row.last_observation),
        match=_json(row.match),
        cursor=load_object(row.cursor),
        checks=row.checks,
        fired=row.fired,
        delivery=_json(row.delivery),
        error=row.error,
        paused_at=row.paused_at,
        created_at=row.created_at,
        updated_at=row.updated_at,
        ended_at=row.ended_at,
    )


def _lock(db: DbSession, monitor_id: str) -> MonitorRow:
    row = db.exec(select(MonitorRow).where(col(MonitorRow.id) == monitor_id).with_for_update()).first()
    if row is None:
        raise NotFoundError(f"monitor {monitor_id} not found")
    return row


class MonitorStoreMixin(StoreMixin):
    """Monitors and the events their event sources read; see the module docstring."""

    def create_monitor(
        self,
        *,
        session_id: str,
        user: str,
        workspace: str,
        source: dict[str, Any],
        condition: dict[str, Any] | None,
        continuation: str | None,
        interval_seconds: float,
        deadline_at: datetime,
        max_active: int,
    ) -> Monitor:
        """Store a new ``armed`` monitor, unless the session has ``max_active`` active ones already.

        An event source's cursor starts after the newest pipeline event of the session (events
        before the monitor are not its).

        Raises:
            ConflictError: The session has ``max_active`` active monitors (the message says so).
            NotFoundError: No such session.
            InvalidRequestError: A JSON field is not a JSON object.
            StoreError: The database failed.
        """
        now = self._clock()
        with self._tx(f"creating a monitor in session {session_id}", write=True) as db:
            self._lock_session(db, session_id)
            active = db.exec(
                select(func.count())
                .select_from(MonitorRow)
                .where(col(MonitorRow.session_id) == session_id)
                .where(col(MonitorRow.status).in_([s.value for s in MonitorStatus if s.active]))
            ).one()
            if active >= max_active:
                raise ConflictError(
                    f"session {session_id} has {active} active monitors, the most it may have "
                    f"({max_active}); cancel one (monitor__cancel) or wait for one to fire"
                )
            row = MonitorRow(
                id=new_id(),
                session_id=session_id,
                user=user,
                workspace=workspace,
                status=MonitorStatus.ARMED.value,
                source=dump_object(source, "source"),
                condition=dump_object(condition, "condition") if condition is not None else None,
                continuation=continuation,
                interval_seconds=interval_seconds,
                deadline_at=deadline_at,
                cursor=dump_object({"pipelineEvent": self._newest_pipeline_event(db, session_id)}, "cursor"),
                created_at=now,
                updated_at=now,
            )
            db.add(row)
        return _monitor(row)

    def get_monitor(self, monitor_id: str) -> Monitor:
        """The monitor ``monitor_id``.

        Raises:
            NotFoundError: No such monitor.
            StoreError: The database failed.
        """
        with self._tx(f"reading monitor {monitor_id}") as db:
            row = db.get(MonitorRow, monitor_id)
            if row is None:
                raise NotFoundError(f"monitor {monitor_id} not found")
            return _monitor(row)

    def list_monitors(
        self,
        *,
        user: str | None = None,
        session_id: str | None = None,
        statuses: Collection[MonitorStatus] | None = None,
        limit: int = 100,
    ) -> list[Monitor]:
        """Monitors, newest first, filtered by equality on the given fields.

        Raises:
            InvalidRequestError: ``limit`` below 1.
            StoreError: The database failed.
        """
        check_limit(limit)
        query = select(MonitorRow)
        if user is not None:
            query = query.where(col(MonitorRow.user) == user)
        if session_id is not None:
            query = query.where(col(MonitorRow.session_id) == session_id)
        if statuses is not None:
            query = query.where(col(MonitorRow.status).in_([s.value for s in statuses]))
        query = query.order_by(col(MonitorRow.created_at).desc(), col(MonitorRow.id)).limit(limit)
        with self._tx("listing monitors") as db:
            return [_monitor(r) for r in db.exec(query)]

    def has_active_monitors(self) -> bool:
        """True when a monitor has not ended: the durable engine must run (at start-up).

        Raises:
            StoreError: The database failed.
        """
        active = [s.value for s in MonitorStatus if s.active]
        with self._tx("looking for active monitors") as db:
            return (
                db.exec(select(MonitorRow.id).where(col(MonitorRow.status).in_(active)).limit(1)).first()
                is not None
            )

    def move_monitor(
        self,
        monitor_id: str,
        status: MonitorStatus,
        *,
        expect: Collection[MonitorStatus],
        **fields: Any,
    ) -> Monitor:
        """Move the monitor to ``status`` (and set ``fields``) only if its status is in ``expect``.

        A move to a status that is not active stamps ``ended_at``; ``paused_at`` is cleared unless
        the move is to ``paused`` (and sets it).

        Raises:
            ConflictError: Its status is not in ``expect`` (the message names it).
            NotFoundError: No such monitor.
            StoreError: The database failed.
        """
        with self._tx(f"moving monitor {monitor_id} to {status.value}", write=True) as db:
            row = _lock(db, monitor_id)
            current = MonitorStatus(row.status)
            if current not in expect:
                raise ConflictError(
                    f"monitor {monitor_id} is {current.value}, not {' or '.join(s.value for s in expect)}"
                )
            now = self._clock()
            self._set(row, fields)
            row.status = status.value
            row.paused_at = now if status is MonitorStatus.PAUSED else None
            row.ended_at = None if status.active else now
            row.updated_at = now
            db.add(row)
            return _monitor(row)

    def note_monitor_check(
        self, monitor_id: str, *, expect: Collection[MonitorStatus], **fields: Any
    ) -> Monitor:
        """Record one check (its ``last_observation``, and ``baseline``/``cursor`` when given; one
        more ``checks``) if the monitor's status is in ``expect``; else change nothing.

        Returns:
            The monitor as it is now (unchanged when its status was not expected).

        Raises:
            NotFoundError: No such monitor.
            StoreError: The database failed.
        """
        with self._tx(f"recording a check of monitor {monitor_id}", write=True) as db:
            row = _lock(db, monitor_id)
            if MonitorStatus(row.status) in expect:
                self._set(row, fields)
                row.checks += 1
                row.updated_at = self._clock()
                db.add(row)
            return _monitor(row)

    @staticmethod
    def _set(row: MonitorRow, fields: Mapping[str, Any]) -> None:
        for name, value in fields.items():
            if name in _JSON_FIELDS:
                setattr(row, name, None if value is None else dump_object(value, name))
            elif name in _PLAIN_FIELDS:
                setattr(row, name, value)
            else:
                raise StoreError(f"monitor field {name!r} cannot be set here (a bug of the caller)")

    # ------------------------------------------------------------------ what event sources read

    @staticmethod
    def _newest_pipeline_event(db: DbSession, session_id: str) -> int:
        newest = db.exec(
            select(func.max(PipelineEventRow.id))
            .join(PipelineRow, col(PipelineRow.id) == col(PipelineEventRow.pipeline_id))
            .where(col(PipelineRow.session_id) == session_id)
        ).one()
        return int(newest or 0)

    def session_pipeline_changes(
        self, session_id: str, *, after: int, limit: int = 100
    ) -> list[dict[str, Any]]:
        """The status changes of the session's pipelines after pipeline event ``after``, oldest first:
        ``{"cursor", "pipelineId", "from", "to", "at"}`` each.

        Raises:
            StoreError: The database failed.
        """
        check_limit(limit)
        query = (
            select(PipelineEventRow)
            .join(PipelineRow, col(PipelineRow.id) == col(PipelineEventRow.pipeline_id))
            .where(col(PipelineRow.session_id) == session_id)
            .where(col(PipelineEventRow.kind) == "status")
            .where(col(PipelineEventRow.id) > after)
            .order_by(col(PipelineEventRow.id))
            .limit(limit)
        )
        with self._tx(f"reading the pipeline changes of session {session_id}") as db:
            found = []
            for row in db.exec(query):
                data = json.loads(row.data)
                found.append(
                    {
                        "cursor": row.id,
                        "pipelineId": row.pipeline_id,
                        "from": data.get("from") if isinstance(data, dict) else None,
                        "to": data.get("to") if isinstance(data, dict) else None,
                        "at": row.created_at.isoformat(),
                    }
                )
            return found

    def session_runs_ended(
        self, session_id: str, *, created_after: datetime, ended_after: datetime | None, limit: int = 100
    ) -> list[dict[str, Any]]:
        """The session's runs created after ``created_after`` that ended (after ``ended_after``, when
        given), by their end: ``{"runId", "status", "reason", "role", "stage", "at"}`` each.

        Raises:
            StoreError: The database failed.
        """
        check_limit(limit)
        query = (
            select(RunRow)
            .where(col(RunRow.session_id) == session_id)
            .where(col(RunRow.created_at) > created_after)
            .where(col(RunRow.status).in_(_RUN_ENDED))
            .where(col(RunRow.ended_at).is_not(None))
        )
        if ended_after is not None:
            query = query.where(col(RunRow.ended_at) > ended_after)
        query = query.order_by(col(RunRow.ended_at), col(RunRow.id)).limit(limit)
        with self._tx(f"reading the ended runs of session {session_id}") as db:
            return [
                {
                    "runId": r.id,
                    "status": r.status,
                    "reason": r.reason,
                    "role": r.role,
                    "stage": r.stage,
                    "at": r.ended_at.isoformat() if r.ended_at else None,
                }
                for r in db.exec(query)
            ]
