"""Run events: persist first, then fan out to followers (SSE clients) from memory.

:meth:`EventHub.emit` hands the event to the daemon's group-commit writer
(:class:`~octipusd.store.event_writer.EventWriter`); once its batch has committed, the writer
publishes the batch to the hub, which appends each event to the bounded buffer of every follower of
its run. A client can therefore never see an event the store does not hold. A follower reads the
store only to catch up: when it starts (events after its ``after_seq`` / ``Last-Event-ID``), when its
buffer overflowed (a slow client), and when a gap shows in what it was given; so a slow client loses
nothing and holds at most :attr:`EventLimits.follower_buffer_events` events in memory.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import anyio

from octipusd.adapter import EventKind, VendorEvent
from octipusd.errors import OctipusError
from octipusd.money import usd_text
from octipusd.store.aio import in_thread
from octipusd.store.event_writer import EventWriter, PendingEvent
from octipusd.store.records import RunEvent
from octipusd.store.repository import Store

#: The kind of the run event that announces plan feedback added, replied to or answered
#: (:mod:`octipusd.runtime.feedback`).
FEEDBACK_EVENT = "plan_feedback"

#: Event kinds of the runtime itself (vendor events use :class:`octipusd.adapter.EventKind`).
RUNTIME_KINDS = (
    "run_status",
    "permission_decision",
    "approval_requested",
    "approval_decided",
    "review_required",
    "bridge_call",
    "stderr",
    "notice",
    FEEDBACK_EVENT,
)

#: Vendor event kinds whose raw JSON is stored beside the typed fields (nothing of them is lost).
_KEEP_RAW = {EventKind.SESSION, EventKind.RESULT, EventKind.UNKNOWN, EventKind.UNPARSED, EventKind.STATUS}
#: Vendor event kinds that are acted on but not stored (protocol plumbing, e.g. JSON-RPC requests
#: the adapter sends; their effects show up as other events).
NOT_STORED = {EventKind.STDIN_WRITE}


@dataclass(frozen=True)
class EventLimits:
    """Bounds of the event fan-out.

    Attributes:
        keepalive_s: Seconds a follower waits for news before it checks its run's status in the store
            (a run that ended without the hub hearing of it still ends its followers).
        follow_page_events: Events one catch-up read of the store returns at most (a full page is
            followed by the next one at once).
        follower_buffer_events: Published events a follower holds at most; past that it drops them and
            catches up from the store.
        final_event_wait_s: Seconds a follower that found its run's row terminal waits for the final
            ``run_status`` event (stored just after the row; a run ended by a restart has none).
    """

    keepalive_s: float = 15.0
    follow_page_events: int = 500
    follower_buffer_events: int = 2000
    final_event_wait_s: float = 0.5


log = logging.getLogger("octipusd.events")


#: The field names of each dataclass met in an event (``dataclasses.fields`` is slow per event).
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}
_SCALARS = (str, int, float, bool, type(None))


def _names(cls: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


def _plain(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, Decimal):  # an amount (a result's cost): exact text, as the API sends it
        return usd_text(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {name: _plain(getattr(value, name)) for name in _names(type(value))}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def event_data(event: VendorEvent) -> dict[str, Any]:
    """Return the JSON-able dict stored for a vendor event.

    Typed fields are kept (an amount as its exact decimal string, :func:`~octipusd.money.usd_text`);
    ``raw`` (the vendor's whole JSON object) is kept for session,
    result, status, unknown and unparsed events, where the typed fields do not hold it all.
    """
    data = {name: _plain(getattr(event, name)) for name in _names(type(event)) if name != "raw"}
    if event.kind in _KEEP_RAW and event.raw is not None:
        data["raw"] = event.raw
    return data


def _is_final(event: RunEvent) -> bool:
    return event.kind == "run_status" and event.data.get("final") is True


@dataclass(eq=False)
class _Follower:
    """One follower's buffer of published events, and its wake-up."""

    capacity: int
    last: int = 0
    final_seen: bool = False
    events: collections.deque[RunEvent] = field(default_factory=collections.deque)
    wake: anyio.Event = field(default_factory=anyio.Event)
    overflowed: bool = False
    status_changed: bool = False

    def push(self, event: RunEvent) -> None:
        if self.overflowed:
            return
        if len(self.events) >= self.capacity:
            self.events.clear()
            self.overflowed = True
        else:
            self.events.append(event)
        self.wake.set()

    def take(self) -> tuple[list[RunEvent], bool]:
        """Take the buffered events that follow :attr:`last` in order; also whether the follower must
        read the store (its buffer overflowed, or the next buffered event is not ``last + 1``)."""
        batch: list[RunEvent] = []
        events, gap = self.events, False
        while events and not self.overflowed:
            event = events.popleft()
            if event.seq <= self.last:
                continue
            if event.seq != self.last + 1:
                events.clear()
                gap = True
                break
            batch.append(event)
            self.last = event.seq
        if self.overflowed:
            self.overflowed = False
            events.clear()
            gap = True
        self.saw(batch)
        return batch, gap

    def saw(self, events: list[RunEvent]) -> None:
        """Note what was yielded: the last ``seq``, and whether the final ``run_status`` was among it."""
        if events:
            self.last = events[-1].seq
            self.final_seen = self.final_seen or any(_is_final(e) for e in events)

    def final_buffered(self) -> bool:
        return self.final_seen or any(_is_final(e) for e in self.events) or self.overflowed

    def poke(self) -> None:
        self.status_changed = True
        self.wake.set()


class EventHub:
    """Persists run events (in batches) and publishes them to followers from memory.

    Args:
        store: Where events are appended and read back to catch up.
        limits: The fan-out's bounds.
    """

    def __init__(
        self,
        store: Store,
        limits: EventLimits | None = None,
        scrub: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        self._store = store
        self._limits = limits or EventLimits()
        self._writer = EventWriter(store, self._publish, scrub)
        self._followers: dict[str, set[_Follower]] = {}
        self._listeners: list[Callable[[list[RunEvent]], None]] = []
        #: Set by :meth:`close`: the daemon is stopping; followers without an end of their own stop.
        self.closed = False

    async def emit(self, run_id: str, kind: str, data: dict[str, Any]) -> RunEvent:
        """Append an event (committed) and publish it to the run's followers.

        Raises:
            InvalidRequestError: ``data`` is not a JSON-serialisable dict.
            NotFoundError: No such run.
            StoreError: the event could not be stored (nothing is published then).
        """
        return await self._writer.append(run_id, kind, data)

    async def emit_optional(self, run_id: str | None, kind: str, data: dict[str, Any]) -> None:
        """Publish an event that may belong to no run (a call started by hand, an escalation):
        stored on the run when there is one, logged either way; never raises."""
        log.info("%s %s", kind, data)
        if run_id is None:
            return
        try:
            await self.emit(run_id, kind, data)
        except OctipusError as exc:  # the store failed or the run is gone: the log line above stands
            log.warning("could not store %s on run %s: %s", kind, run_id, exc.message)

    async def emit_vendor(self, run_id: str, event: VendorEvent) -> RunEvent:
        """Store and publish a parsed vendor event."""
        return await self.emit(run_id, str(event.kind), event_data(event))

    def emit_soon(self, run_id: str, kind: str, data: dict[str, Any]) -> PendingEvent:
        """Queue an event for the next commit without waiting; :meth:`settle` it (or
        :meth:`settle_logged` it in a task of its own).

        Raises:
            InvalidRequestError: ``data`` is not a JSON-serialisable dict (nothing is queued).
        """
        return self._writer.enqueue(run_id, kind, data)

    async def settle_logged(self, pending: PendingEvent) -> None:
        """Settle a queued event whose caller went on: a failure to store it is logged, not raised."""
        try:
            await self._writer.settle(pending)
        except OctipusError as exc:
            log.warning(
                "could not store %s on run %s: %s", pending.event.kind, pending.event.run_id, exc.message
            )

    def emit_vendor_soon(self, run_id: str, event: VendorEvent) -> PendingEvent:
        """Queue a parsed vendor event for the next commit without waiting; :meth:`settle` it
        (see :meth:`EventWriter.enqueue <octipusd.store.event_writer.EventWriter.enqueue>`)."""
        return self.emit_soon(run_id, str(event.kind), event_data(event))

    async def settle(self, pending: PendingEvent) -> RunEvent:
        """Wait until a queued event is committed and published.

        Raises:
            NotFoundError: No such run.
            StoreError: the event could not be stored.
        """
        return await self._writer.settle(pending)

    def notify(self, run_id: str) -> None:
        """Tell the run's followers that its status changed (e.g. it ended): they check the store."""
        for follower in self._followers.get(run_id, ()):
            follower.poke()

    def add_listener(self, listener: Callable[[list[RunEvent]], None]) -> Callable[[], None]:
        """Hear every committed batch of events of every run (the notifier, the page's activity feed).

        ``listener`` is called in the event loop right after the batch is stored, before the runs'
        followers wake; it must not block (hand the work to a task or a bounded queue). An exception
        it raises is logged with its traceback and does not reach the writer or other listeners.

        Returns:
            A function that removes the listener.
        """
        self._listeners.append(listener)

        def remove() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return remove

    def close(self) -> None:
        """The daemon is stopping: set :attr:`closed` and call every listener with an empty batch,
        so that a follower that never ends by itself (the page's activity feed) wakes and ends."""
        self.closed = True
        for listener in tuple(self._listeners):
            try:
                listener([])
            except Exception:  # a listener's bug must not stop the shutdown: logged as evidence
                log.exception("an event listener failed on the closing call")

    def _publish(self, events: list[RunEvent]) -> None:
        for event in events:
            for follower in self._followers.get(event.run_id, ()):
                follower.push(event)
        for listener in tuple(self._listeners):
            try:
                listener(events)
            except Exception:  # a listener's bug must not stop the writer: logged as evidence
                log.exception("an event listener failed on a batch of %d event(s)", len(events))

    async def follow(self, run_id: str, after_seq: int = 0) -> AsyncIterator[list[RunEvent]]:
        """Yield the run's events after ``after_seq`` in batches, live, until the run is terminal.

        Subscribes first, then reads what the store holds after ``after_seq``, then yields what the
        writer publishes, as it comes (each batch is what was ready at once); ends once the run has
        reached a terminal status and every event stored by then has been yielded, its final
        ``run_status`` included (waited for at most :attr:`EventLimits.final_event_wait_s`: it is
        stored just after the status). Each event is yielded once, in ``seq`` order. An empty batch
        is a keep-alive tick: nothing happened for :attr:`EventLimits.keepalive_s` seconds.

        Raises:
            NotFoundError: the run does not exist.
            StoreError: a catch-up read failed.
        """
        follower = _Follower(self._limits.follower_buffer_events, last=after_seq)
        self._followers.setdefault(run_id, set()).add(follower)
        try:
            run = await in_thread(self._store.get_run, run_id)
            async for page in self._catch_up(run_id, follower):
                yield page
            if not run.status.terminal:
                async for batch in self._live(run_id, follower):
                    yield batch
            if not follower.final_seen:
                with anyio.move_on_after(self._limits.final_event_wait_s):
                    while not follower.final_buffered():
                        follower.wake = anyio.Event()
                        await follower.wake.wait()
            async for page in self._catch_up(run_id, follower):  # events stored before it ended
                yield page
        finally:
            followers = self._followers.get(run_id)
            if followers is not None:
                followers.discard(follower)
                if not followers:
                    del self._followers[run_id]

    async def _live(self, run_id: str, follower: _Follower) -> AsyncIterator[list[RunEvent]]:
        """Yield what the writer publishes for the run until its row is terminal."""
        while True:
            batch, gap = follower.take()
            if batch:
                yield batch
            if gap:  # a slow follower's buffer overflowed, or an event it was not given
                async for page in self._catch_up(run_id, follower):
                    yield page
            elif follower.status_changed:
                follower.status_changed = False
                if (await in_thread(self._store.get_run, run_id)).status.terminal:
                    return
            elif not batch:
                follower.wake = anyio.Event()
                with anyio.move_on_after(self._limits.keepalive_s) as waited:
                    await follower.wake.wait()
                if waited.cancelled_caught:
                    follower.status_changed = True
                    yield []

    async def _catch_up(self, run_id: str, follower: _Follower) -> AsyncIterator[list[RunEvent]]:
        """Yield what the store holds after the follower's last event, page by page (never an empty one)."""
        size = self._limits.follow_page_events
        while True:
            page = await in_thread(self._store.list_events, run_id, after_seq=follower.last, limit=size)
            if page:
                follower.saw(page)
                yield page
            if len(page) < size:
                return
