"""The daemon's event writer: group commit of run events.

Every run event of the daemon goes through one :class:`EventWriter`. A caller of
:meth:`EventWriter.append` queues its event and waits until a transaction holding it has committed.
No batch waits for a timer: when no commit is in flight, the first caller commits at once whatever
is queued (itself included) in one transaction (:meth:`Store.append_events`); events that arrive
meanwhile wait for that commit to end and then go together in the next one. An idle daemon commits
one event in one round trip; a busy one commits a few milliseconds' worth of every run's events per
transaction.

The caller that commits is one of the waiting callers (no background task to start or stop): after
its batch it hands the role to the oldest event still queued. Once committed, a batch is handed to
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

from octipusd.errors import OctipusError
from octipusd.store.aio import in_thread
from octipusd.store.event_store import NewEvent
from octipusd.store.records import RunEvent
from octipusd.store.repository import Store

__all__ = ["MAX_BATCH_EVENTS", "EventWriter"]

#: Events one transaction holds at most (the rest wait for the next one).
MAX_BATCH_EVENTS = 1000

log = logging.getLogger("octipusd.events")


@dataclass(eq=False, slots=True)
class _Queued:
    event: NewEvent
    wake: anyio.Event = field(default_factory=anyio.Event)
    outcome: RunEvent | OctipusError | None = None


class EventWriter:
    """Commits run events in batches; see the module docstring.

    Args:
        store: Where events are appended.
        published: Called on the event loop with each committed batch (in commit order), before
            the batch's callers return; it must not block or raise.
    """

    def __init__(self, store: Store, published: Callable[[list[RunEvent]], None]) -> None:
        self._store = store
        self._published = published
        self._queue: collections.deque[_Queued] = collections.deque()
        self._committing = False

    async def append(self, run_id: str, kind: str, data: dict[str, Any]) -> RunEvent:
        """Append an event to a run's log; durable and published when this returns.

        Cancellation waits for the commit of the event (a few milliseconds): the event is stored
        either way, as with any store call made in a worker thread.

        Returns:
            The stored event (its ``seq`` the run's next).

        Raises:
            InvalidRequestError: ``data`` is not a JSON-serialisable dict (nothing is queued).
            NotFoundError: No such run.
            StoreError: The database failed; the event's whole batch was not stored.
        """
        item = _Queued(NewEvent.of(run_id, kind, data, self._store.now()))
        self._queue.append(item)
        with anyio.CancelScope(shield=True):
            if self._committing:
                await item.wake.wait()
            if item.outcome is None:  # no commit in flight, or handed the role: commit now
                await self._lead()
        assert item.outcome is not None
        if isinstance(item.outcome, OctipusError):
            raise item.outcome
        return item.outcome

    async def _lead(self) -> None:
        """Commit the queued events in one transaction, settle their callers, hand over the role."""
        self._committing = True
        await anyio.lowlevel.checkpoint()  # let callers made ready by the same wake-up queue first
        batch = [self._queue.popleft() for _ in range(min(len(self._queue), MAX_BATCH_EVENTS))]
        try:
            outcomes = await in_thread(self._store.append_events, [q.event for q in batch])
        except OctipusError as exc:
            outcomes = [exc] * len(batch)
        stored = [o for o in outcomes if isinstance(o, RunEvent)]
        if stored:
            try:
                self._published(stored)
            except Exception:  # a follower's bug must not lose the commit's outcome
                log.exception("publishing %d committed events failed", len(stored))
        for queued, outcome in zip(batch, outcomes, strict=True):
            queued.outcome = outcome
            queued.wake.set()
        self._committing = False
        if self._queue:
            self._committing = True
            self._queue[0].wake.set()
