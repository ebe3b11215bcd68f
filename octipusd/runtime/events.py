"""Run events: persist first, then fan out to subscribers (SSE clients).

:meth:`EventHub.emit` appends the event to the store and only then wakes subscribers, so a
client can never see an event the store does not hold. Subscribers read from the store
(after a sequence number) and wait on the hub for more; a slow client therefore loses
nothing and holds no queue in memory.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio

from octipusd.adapter import EventKind, VendorEvent
from octipusd.errors import OctipusError
from octipusd.store.aio import in_thread
from octipusd.store.records import RunEvent
from octipusd.store.repository import Store

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
)

#: Vendor event kinds whose raw JSON is stored beside the typed fields (nothing of them is lost).
_KEEP_RAW = {EventKind.SESSION, EventKind.RESULT, EventKind.UNKNOWN, EventKind.UNPARSED, EventKind.STATUS}
#: Vendor event kinds that are acted on but not stored (protocol plumbing, e.g. JSON-RPC requests
#: the adapter sends; their effects show up as other events).
NOT_STORED = {EventKind.STDIN_WRITE}

#: Seconds between keep-alive wake-ups of a subscriber.
KEEPALIVE = 15.0
#: Events one store read of :meth:`EventHub.follow` returns at most (a full page is followed by
#: the next one at once).
FOLLOW_PAGE = 500


log = logging.getLogger("octipusd.events")


def _plain(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def event_data(event: VendorEvent) -> dict[str, Any]:
    """Return the JSON-able dict stored for a vendor event.

    Typed fields are kept; ``raw`` (the vendor's whole JSON object) is kept for session,
    result, status, unknown and unparsed events, where the typed fields do not hold it all.
    """
    data: dict[str, Any] = {}
    for f in dataclasses.fields(event):
        if f.name == "raw":
            continue
        data[f.name] = _plain(getattr(event, f.name))
    if event.kind in _KEEP_RAW and event.raw is not None:
        data["raw"] = event.raw
    return data


class EventHub:
    """Persists run events and wakes subscribers.

    Args:
        store: Where events are appended.
    """

    def __init__(self, store: Store) -> None:
        self._store = store
        self._signals: dict[str, anyio.Event] = {}

    async def emit(self, run_id: str, kind: str, data: dict[str, Any]) -> RunEvent:
        """Append an event (committed) and wake the run's subscribers.

        Raises:
            StoreError: the event could not be stored (nothing is published then).
        """
        event = await in_thread(self._store.append_event, run_id, kind, data)
        self.notify(run_id)
        return event

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

    def notify(self, run_id: str) -> None:
        """Wake everyone waiting on ``run_id`` (also used when a run ends)."""
        signal = self._signals.pop(run_id, None)
        if signal is not None:
            signal.set()

    async def follow(self, run_id: str, after_seq: int = 0) -> AsyncIterator[RunEvent]:
        """Yield the run's events after ``after_seq``, live, until the run is terminal.

        Reads the store, yields what is new, then waits for a notification; ends once the
        run has reached a terminal status and every stored event has been yielded.

        Raises:
            NotFoundError: the run does not exist.
        """
        last = after_seq
        while True:
            signal = self._signals.setdefault(run_id, anyio.Event())
            run = await in_thread(self._store.get_run, run_id)
            events = await in_thread(self._store.list_events, run_id, after_seq=last, limit=FOLLOW_PAGE)
            for event in events:
                last = event.seq
                yield event
            if len(events) == FOLLOW_PAGE:
                continue
            if run.status.terminal:
                # more reads: events appended between the two reads above
                while True:
                    tail = await in_thread(self._store.list_events, run_id, after_seq=last, limit=FOLLOW_PAGE)
                    for event in tail:
                        last = event.seq
                        yield event
                    if len(tail) < FOLLOW_PAGE:
                        return
            with anyio.move_on_after(KEEPALIVE):
                await signal.wait()
