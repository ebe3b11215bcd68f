"""The daemon's event writer: group commit of run events.

Every run event of the daemon goes through one :class:`EventWriter`. A caller of
:meth:`EventWriter.append` queues its event and waits until a transaction holding it has committed.
No batch waits for a timer: when no commit is in flight, the first caller commits at once whatever
is queued (itself included) in one transaction (:meth:`Store.append_events`); events that arrive
meanwhile wait for that commit to end and then go together in the next one. An idle daemon commits
one event in one round trip; a busy one commits a few milliseconds' worth of every run's events per
transaction.

The caller that commits is one of the waiting callers (no background task to start or stop): after
its batch it hands the role to the oldest caller still waiting. An event may also be queued without
waiting (:meth:`EventWriter.enqueue`, e.g. every event of one read of the vendor's output) and
settled later, so that one commit holds them all. Once committed, a batch is handed to
the ``published`` callback (in commit order, on the event loop) before any of its callers return,
so a follower never sees an event the store does not hold, and sees each run's events in order.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread

from octipusd.errors import OctipusError, StoreError
from octipusd.store.event_store import NewEvent
from octipusd.store.records import RunEvent
from octipusd.store.repository import Store

__all__ = ["MAX_BATCH_EVENTS", "EventWriter", "PendingEvent"]

#: Events one transaction holds at most (the rest wait for the next one).
MAX_BATCH_EVENTS = 1000

log = logging.getLogger("octipusd.events")


@dataclass(eq=False, slots=True)
class PendingEvent:
    """An event queued for the next commit (:meth:`EventWriter.enqueue`)."""

    event: NewEvent
    wake: anyio.Event = field(default_factory=anyio.Event)
    outcome: RunEvent | OctipusError | None = None
    waiting: bool = False


class EventWriter:
    """Commits run events in batches; see the module docstring.

    Args:
        store: Where events are appended.
        published: Called on the event loop with each committed batch (in commit order), before
            the batch's callers return; it must not block or raise.
    """

    def __init__(
        self,
        store: Store,
        published: Callable[[list[RunEvent]], None],
        scrub: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        self._store = store
        self._published = published
        self._scrub = scrub
        self._queue: collections.deque[PendingEvent] = collections.deque()
        self._committing = False
        self._elected: PendingEvent | None = None
        # commits are serial: one worker thread of their own, never queued behind other store calls
        # waiting for a thread of anyio's shared pool
        self._thread = anyio.CapacityLimiter(1)

    async def append(self, run_id: str, kind: str, data: dict[str, Any]) -> RunEvent:
        """Append an event to a run's log; committed (it survives a daemon crash) and published when
        this returns.

        Cancellation waits for the commit of the event: the event is stored either way, as with any
        store call made in a worker thread. That wait is usually a few milliseconds; it is bounded by
        the batches queued ahead of it, each by the store's statement timeout
        (``database.statementTimeoutSeconds``).

        Returns:
            The stored event (its ``seq`` the run's next).

        Raises:
            InvalidRequestError: ``data`` is not a JSON-serialisable dict (nothing is queued).
            NotFoundError: No such run.
            StoreError: The database failed; the event's whole batch was not stored.
        """
        return await self.settle(self.enqueue(run_id, kind, data))

    def enqueue(self, run_id: str, kind: str, data: dict[str, Any]) -> PendingEvent:
        """Queue an event behind every event queued before it, without waiting; :meth:`settle` it.

        Its sequence number follows every event of the run queued earlier, whoever queued them. It
        is committed by the next commit: one that a later caller of :meth:`append` or
        :meth:`settle` makes, or the one its own :meth:`settle` makes. Settle it before the caller
        acts on its having been stored, and before the caller waits for anything else.

        Raises:
            InvalidRequestError: ``data`` is not a JSON-serialisable dict (nothing is queued).
        """
        if self._scrub is not None:
            data = self._scrub(data)
        item = PendingEvent(NewEvent.of(run_id, kind, data, self._store.now()))
        self._queue.append(item)
        return item

    async def settle(self, item: PendingEvent) -> RunEvent:
        """Wait until ``item`` is committed (committing it if no commit is in flight).

        Raises:
            NotFoundError: No such run.
            StoreError: The database failed; the event's whole batch was not stored.
        """
        with anyio.CancelScope(shield=True):
            while item.outcome is None:
                if self._committing and self._elected is not item:
                    item.wake = anyio.Event()
                    item.waiting = True
                    await item.wake.wait()
                    item.waiting = False
                else:  # no commit in flight, or handed the role: commit now
                    self._elected = None
                    await self._lead()
        assert item.outcome is not None
        if isinstance(item.outcome, OctipusError):
            raise item.outcome
        return item.outcome

    async def _lead(self) -> None:
        """Commit the queued events (at most :data:`MAX_BATCH_EVENTS`) in one transaction, settle
        their callers, hand the role to the oldest caller still waiting.

        Whatever happens, every event taken from the queue gets an outcome and its caller is woken:
        a database failure is the batch's :class:`~octipusd.errors.StoreError`; any other failure (a
        bug) is logged with its traceback and becomes a ``StoreError`` too, so that no caller waits
        for a commit that will never come.
        """
        self._committing = True
        batch: list[PendingEvent] = []
        try:
            await anyio.lowlevel.checkpoint()  # let callers made ready by the same wake-up queue first
            batch = [self._queue.popleft() for _ in range(min(len(self._queue), MAX_BATCH_EVENTS))]
            events = [q.event for q in batch]
            outcomes: list[RunEvent | OctipusError]
            try:
                outcomes = await anyio.to_thread.run_sync(
                    self._store.append_events, events, limiter=self._thread
                )
            except OctipusError as exc:
                outcomes = [exc] * len(batch)
            except Exception as exc:  # recorded as each event's outcome and logged: never a hung caller
                log.exception("storing a batch of %d events failed", len(batch))
                outcomes = [StoreError(f"storing {len(batch)} events failed: {exc!r}")] * len(batch)
            stored = [o for o in outcomes if isinstance(o, RunEvent)]
            if stored:
                try:
                    self._published(stored)
                except Exception:  # a follower's bug must not lose the commit's outcome
                    log.exception("publishing %d committed events failed", len(stored))
            for queued, outcome in zip(batch, outcomes, strict=True):
                queued.outcome = outcome
        finally:
            for queued in batch:
                if queued.outcome is None:
                    queued.outcome = StoreError(
                        "the daemon stopped storing events before this one was stored"
                    )
                queued.wake.set()
            # hand the role to the oldest waiting caller; with none, the next one to settle commits
            self._committing = False
            for queued in self._queue:
                if queued.waiting:
                    self._committing, self._elected = True, queued
                    queued.wake.set()
                    break
