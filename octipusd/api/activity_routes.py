"""The page-wide activity feed: ``GET /v1/activity``, server-sent events saying which runs changed.

Each committed batch of run events becomes one frame per run it touched (``data``:
``{"run_id", "session_id", "kinds": [...], "last_seq"}``, no event data: a page re-fetches what it
shows). A client that falls behind by more than :attr:`ActivityLimits.client_buffer_frames` loses
its buffered frames and gets one ``{"resync": true}`` frame instead (re-fetch everything shown); a
keep-alive comment goes out after :attr:`ActivityLimits.keepalive_s` seconds of silence.

The feed is built on :meth:`EventHub.add_listener <octipusd.runtime.events.EventHub.add_listener>`:
the listener only appends to the client's bounded buffer (it runs in the writer's path and must not
block); the session of a run is looked up by the client's own task, once per run.
"""

from __future__ import annotations

import collections
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from octipusd.api.common import Services
from octipusd.api.models import API_VERSION
from octipusd.api.sse import KEEPALIVE_FRAME
from octipusd.errors import NotFoundError
from octipusd.store.aio import in_thread
from octipusd.store.records import RunEvent
from octipusd.store.repository import Store

__all__ = ["ACTIVITY_LIMITS", "ActivityLimits", "activity_router"]


@dataclass(frozen=True)
class ActivityLimits:
    """Bounds of one activity client.

    Attributes:
        client_buffer_frames: Frames one client holds at most before it is told to resync.
        keepalive_s: Seconds of silence before a keep-alive comment (lets a dead client be noticed).
        session_cache_runs: Runs whose session one client remembers at most.
    """

    client_buffer_frames: int = 500
    keepalive_s: float = 15.0
    session_cache_runs: int = 1000


ACTIVITY_LIMITS: Final = ActivityLimits()
#: The frame a client gets instead of the frames it lost.
RESYNC_FRAME: Final = b'data: {"resync":true}\n\n'


@dataclass(eq=False)
class _Client:
    """One client's bounded buffer of ``(run_id, kinds, last_seq)`` items and its wake-up."""

    capacity: int
    items: collections.deque[tuple[str, list[str], int]] = field(default_factory=collections.deque)
    overflowed: bool = False
    wake: anyio.Event = field(default_factory=anyio.Event)

    def hear(self, events: list[RunEvent]) -> None:
        """The hub's listener: one item per run of the batch; never blocks, never reads the store."""
        runs: dict[str, tuple[list[str], int]] = {}
        for event in events:
            kinds, _ = runs.get(event.run_id, ([], 0))
            if event.kind not in kinds:
                kinds.append(event.kind)
            runs[event.run_id] = (kinds, event.seq)
        if self.overflowed or len(self.items) + len(runs) > self.capacity:
            self.items.clear()
            self.overflowed = True
        else:
            self.items.extend((run_id, kinds, seq) for run_id, (kinds, seq) in runs.items())
        self.wake.set()


async def _session_of(store: Store, run_id: str, cache: dict[str, str | None], limit: int) -> str | None:
    if run_id not in cache:
        if len(cache) >= limit:
            cache.clear()
        try:
            cache[run_id] = (await in_thread(store.get_run, run_id)).session_id
        except NotFoundError:  # deleted with its session meanwhile
            cache[run_id] = None
    return cache[run_id]


async def _frames(services: Services, limits: ActivityLimits) -> AsyncIterator[bytes]:
    """The feed of one client, until it goes away (its task is then cancelled)."""
    client = _Client(limits.client_buffer_frames)
    remove = services.hub.add_listener(client.hear)
    sessions: dict[str, str | None] = {}
    try:
        yield b": activity\n\n"  # sent at once: the browser's EventSource reports itself open
        while not services.hub.closed:  # the daemon stopping ends the feed (EventHub.close)
            if client.overflowed:
                client.overflowed = False
                yield RESYNC_FRAME
            chunks: list[str] = []
            while client.items:
                run_id, kinds, last_seq = client.items.popleft()
                session_id = await _session_of(services.store, run_id, sessions, limits.session_cache_runs)
                body: dict[str, Any] = {"run_id": run_id, "session_id": session_id, "kinds": kinds}
                body["last_seq"] = last_seq
                chunks.append(f"data: {json.dumps(body, separators=(',', ':'))}\n\n")
            if chunks:
                yield "".join(chunks).encode()
                continue
            client.wake = anyio.Event()
            if client.items or client.overflowed or services.hub.closed:
                continue
            with anyio.move_on_after(limits.keepalive_s) as waited:
                await client.wake.wait()
            if waited.cancelled_caught and not services.hub.closed:
                yield KEEPALIVE_FRAME
    finally:
        remove()


def activity_router(services: Services, limits: ActivityLimits = ACTIVITY_LIMITS) -> APIRouter:
    """The ``/v1/activity`` feed over ``services``."""
    router = APIRouter(prefix=f"/{API_VERSION}")

    @router.get(
        "/activity",
        response_class=StreamingResponse,
        responses={
            200: {
                "description": (
                    "Server-sent events, one per run a committed batch touched: `data` is "
                    '{"run_id", "session_id", "kinds", "last_seq"}, or {"resync": true} after frames were '
                    "dropped for a slow client"
                ),
                "content": {"text/event-stream": {"schema": {"type": "string"}}},
            }
        },
    )
    async def activity() -> StreamingResponse:
        """Which runs have new events, live (a page re-fetches what it shows)."""
        return StreamingResponse(
            _frames(services, limits),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    return router
