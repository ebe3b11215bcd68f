"""Store methods for run event logs (mixed into :class:`Store`): batched appends, ordered reads.

Every event reaches the database through :meth:`EventStoreMixin.append_events`: a batch of events
of any runs is one transaction of SQLAlchemy Core statements (one multi-row ``INSERT``, no ORM
objects). It commits without waiting for the disk (:data:`~octipusd.store.engine.TRANSCRIPT_OPTION`):
a committed event survives a crash of the daemon, and an OS crash may lose the last fraction of a
second of them, never a journal record, an approval or a run status, which commit with
``synchronous=FULL``. The daemon's group commit
(:class:`~octipusd.store.event_writer.EventWriter`) hands it whatever arrived while the previous
batch was committing.

Sequence numbers are assigned in memory: the store remembers the last ``seq`` of each run it has
appended to, reading it from the database (with the run's existence) the first time a run is seen,
or after a failed batch. That is sound because one daemon owns a database (the store lock refuses a
second) and the store's appends are serialised by one lock: ``seq`` stays gap-free and ordered per
run. A batch that fails leaves nothing (it is one transaction) and forgets the runs it touched, so
the next batch reads their last ``seq`` again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, insert, select
from sqlalchemy.exc import IntegrityError

from octipusd.errors import NotFoundError, OctipusError, StoreError
from octipusd.store.codec import StoreMixin, check_limit, dump_object, load_object
from octipusd.store.models import RunEventRow, RunRow
from octipusd.store.records import RunEvent

__all__ = ["KNOWN_RUNS_REMEMBERED", "EventStoreMixin", "NewEvent"]

#: Runs whose last sequence number the store keeps in memory (least recently appended forgotten
#: first; a forgotten run costs one read on its next event).
KNOWN_RUNS_REMEMBERED = 10_000

_EVENTS = RunEventRow.__table__  # type: ignore[attr-defined]
_RUNS = RunRow.__table__  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event to append: its run, kind, payload (as given and encoded as JSON) and time.

    The stored event returned for it holds ``data`` itself, not a copy decoded from ``payload``:
    whoever appends an event does not change ``data`` afterwards.
    """

    run_id: str
    kind: str
    data: dict[str, Any]
    payload: str
    created_at: datetime

    @classmethod
    def of(cls, run_id: str, kind: str, data: dict[str, Any], created_at: datetime) -> NewEvent:
        """Encode ``data``.

        Raises:
            InvalidRequestError: ``data`` is not a JSON-serialisable dict.
        """
        return cls(run_id, kind, data, dump_object(data, "event data"), created_at)


class _Sequences:
    """The last ``seq`` of each recently appended run; used only under :attr:`lock`."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.last: OrderedDict[str, int] = OrderedDict()

    def remember(self, run_id: str, seq: int) -> None:
        self.last[run_id] = seq
        self.last.move_to_end(run_id)
        while len(self.last) > KNOWN_RUNS_REMEMBERED:
            self.last.popitem(last=False)


class EventStoreMixin(StoreMixin):
    """Run events: batched appends and reads in ``seq`` order; see the module docstring."""

    _sequences: _Sequences

    def _init_event_log(self) -> None:
        """Called once by the store's constructor."""
        self._sequences = _Sequences()

    def append_event(self, run_id: str, kind: str, data: dict[str, Any]) -> RunEvent:
        """Append one event to a run's log; committed when this returns (it survives a daemon crash).

        Returns:
            The stored event; ``seq`` is the run's previous highest plus one (1 first),
            distinct and gap-free under concurrent callers.

        Raises:
            InvalidRequestError: ``data`` is not a JSON-serialisable dict.
            NotFoundError: No such run.
            StoreError: The database failed.
        """
        (outcome,) = self.append_events([NewEvent.of(run_id, kind, data, self._clock())])
        if isinstance(outcome, OctipusError):
            raise outcome
        return outcome

    def append_events(self, batch: Sequence[NewEvent]) -> list[RunEvent | OctipusError]:
        """Append a batch of events (of any runs) in one transaction; committed when this returns.

        Events of one run get consecutive sequence numbers in batch order. An event of a run that
        does not exist gets a :class:`~octipusd.errors.NotFoundError` in its place and the others
        are stored. If the database refuses the batch because a run vanished meanwhile or a
        sequence number was taken behind the store's back, the runs are read again and the batch
        is tried once more (the failed transaction left nothing).

        Returns:
            One outcome per event, in batch order: the stored event or the error that kept it out.

        Raises:
            StoreError: The database failed; nothing of the batch was stored.
        """
        if not batch:
            return []
        with self._sequences.lock:
            try:
                return self._append_batch(batch)
            except StoreError as exc:
                if not isinstance(exc.__cause__, IntegrityError):
                    raise
                return self._append_batch(batch)

    def _append_batch(self, batch: Sequence[NewEvent]) -> list[RunEvent | OctipusError]:
        """One try of :meth:`append_events`, under the sequence lock.

        Reads the last ``seq`` of the runs it has not seen (and which of them exist), inserts the
        events with the next numbers in one statement, then remembers the new last numbers. A
        failed transaction leaves nothing and forgets the runs of the batch, so the next try reads
        their numbers again.

        Raises:
            StoreError: The database failed (``__cause__`` the driver's error).
        """
        known = self._sequences.last
        run_ids = {e.run_id for e in batch}
        try:
            with self._core(
                f"appending {len(batch)} events to {len(run_ids)} runs", write=True, transcript=True
            ) as conn:
                unseen = [r for r in run_ids if r not in known]
                last = {r: known[r] for r in run_ids if r in known}
                if unseen:
                    existing = set(conn.execute(select(_RUNS.c.id).where(_RUNS.c.id.in_(unseen))).scalars())
                    last.update(dict.fromkeys(existing, 0))
                    rows = conn.execute(
                        select(_EVENTS.c.run_id, func.max(_EVENTS.c.seq))
                        .where(_EVENTS.c.run_id.in_(existing))
                        .group_by(_EVENTS.c.run_id)
                    ).all()
                    last.update({run_id: seq for run_id, seq in rows})
                values: list[dict[str, Any]] = []
                for event in batch:
                    if event.run_id in last:
                        last[event.run_id] += 1
                        values.append(
                            {
                                "run_id": event.run_id,
                                "seq": last[event.run_id],
                                "kind": event.kind,
                                "data": event.payload,
                                "created_at": event.created_at,
                            }
                        )
                ids: list[int] = []
                if values:
                    ids = list(
                        conn.execute(
                            insert(_EVENTS).returning(_EVENTS.c.id, sort_by_parameter_order=True), values
                        ).scalars()
                    )
        except StoreError:
            for run_id in run_ids:
                known.pop(run_id, None)
            raise
        for run_id, seq in last.items():
            self._sequences.remember(run_id, seq)
        stored = iter(zip(ids, values, strict=True))
        outcomes: list[RunEvent | OctipusError] = []
        for event in batch:
            if event.run_id not in last:
                outcomes.append(NotFoundError(f"run {event.run_id} not found"))
                continue
            row_id, row = next(stored)
            outcomes.append(
                RunEvent(
                    id=row_id,
                    run_id=event.run_id,
                    seq=row["seq"],
                    kind=event.kind,
                    data=event.data,
                    created_at=event.created_at,
                )
            )
        return outcomes

    def forget_event_sequences(self, run_ids: Sequence[str]) -> None:
        """Drop the remembered last ``seq`` of these runs (their events were deleted)."""
        with self._sequences.lock:
            for run_id in run_ids:
                self._sequences.last.pop(run_id, None)

    def list_events(self, run_id: str, *, after_seq: int = 0, limit: int = 1000) -> list[RunEvent]:
        """Return up to ``limit`` events of a run with ``seq > after_seq``, in ``seq`` order.

        Raises:
            InvalidRequestError: ``limit`` < 1.
            NotFoundError: No such run.
            StoreError: The database failed.
        """
        check_limit(limit)
        with self._core(f"listing events of run {run_id}") as conn:
            rows = conn.execute(
                select(_EVENTS.c.id, _EVENTS.c.seq, _EVENTS.c.kind, _EVENTS.c.data, _EVENTS.c.created_at)
                .where(_EVENTS.c.run_id == run_id, _EVENTS.c.seq > after_seq)
                .order_by(_EVENTS.c.seq)
                .limit(limit)
            ).all()
            if not rows and conn.execute(select(_RUNS.c.id).where(_RUNS.c.id == run_id)).first() is None:
                raise NotFoundError(f"run {run_id} not found")
        return [
            RunEvent(id=i, run_id=run_id, seq=s, kind=k, data=load_object(d), created_at=c)
            for i, s, k, d, c in rows
        ]
