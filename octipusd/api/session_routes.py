"""API routes of session reuse (seed 003 "Session reuse" .. "Resuming child sessions per role and task").

Routes (under ``/v1``)::

    POST /sessions/{id}/clear            /clear: a new clear generation; old vendor state is never resumed
    POST /sessions/{id}/compact          summarize older messages into a checkpoint (body: keep_turns)
    GET  /sessions/{id}/vendor-sessions  the stored vendor conversations (root and keyed children)
    GET  /sessions/{id}/messages?after=N the current generation's transcript after sequence number N
    GET  /sessions/{id}/checkpoint       the current generation's latest checkpoint (404: none)
    GET  /sessions/{id}/usage            what all of the session's runs used (tokens, cost), summed

Clearing and compacting go through the run manager: ``/clear`` drops the stored vendor records
at once (a turn still running keeps going, but nothing it saves is reused); compacting waits for
a running turn of the session to end (turns and maintenance are serialized) and answers 200 also
when nothing was published (``published: false`` and the ``reason``). The reads go to the store.
An unknown session is a 404 ``not_found``. ``vendor-sessions`` marks a record of an earlier clear
generation than the session's ``current: false``: it is never resumed.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from octipusd.api.common import Services, out
from octipusd.api.limits import MessageAfter
from octipusd.api.models import (
    API_VERSION,
    CheckpointOut,
    CompactCreate,
    CompactionOut,
    MessageOut,
    SessionOut,
    UsageTotalsOut,
    VendorSessionOut,
)
from octipusd.errors import NotFoundError
from octipusd.store.aio import in_thread

__all__ = ["session_router"]


def _vendor_session_out(record: Any, generation: int) -> VendorSessionOut:
    made = out(VendorSessionOut, record)
    return made.model_copy(update={"current": made.clear_generation == generation})


def session_router(services: Services) -> APIRouter:
    """Routes of session reuse, compaction and ``/clear`` over ``services``."""
    router = APIRouter(prefix=f"/{API_VERSION}")
    store, runs = services.store, services.runs

    @router.post("/sessions/{session_id}/clear")
    async def clear_session(session_id: str) -> SessionOut:
        """``/clear``: start a new clear generation (404: unknown session)."""
        return out(SessionOut, await runs.clear_session(session_id))

    @router.post("/sessions/{session_id}/compact")
    async def compact_session(session_id: str, body: CompactCreate | None = None) -> CompactionOut:
        """Compact the current generation; ``published`` false says ``reason`` (still a 200)."""
        keep_turns = (body or CompactCreate()).keep_turns
        return out(CompactionOut, await runs.compact_session(session_id, keep_turns=keep_turns))

    @router.get("/sessions/{session_id}/vendor-sessions")
    async def list_vendor_sessions(session_id: str) -> list[VendorSessionOut]:
        session = await in_thread(store.get_session, session_id)  # 404 for an unknown session
        records = await in_thread(store.list_vendor_sessions, session_id)
        return [_vendor_session_out(r, session.clear_generation) for r in records]

    @router.get("/sessions/{session_id}/messages")
    async def list_messages(session_id: str, after: MessageAfter = 0) -> list[MessageOut]:
        session = await in_thread(store.get_session, session_id)
        found = await in_thread(
            store.list_messages, session_id, generation=session.clear_generation, after_seq=after
        )
        return [out(MessageOut, m) for m in found]

    @router.get("/sessions/{session_id}/usage")
    async def session_usage(session_id: str) -> UsageTotalsOut:
        """Every run of the session (children included), summed by the database (404: unknown)."""
        await in_thread(store.get_session, session_id)
        return out(UsageTotalsOut, await in_thread(store.usage_totals, session_id))

    @router.get("/sessions/{session_id}/checkpoint")
    async def latest_checkpoint(session_id: str) -> CheckpointOut:
        session = await in_thread(store.get_session, session_id)
        generation = session.clear_generation
        checkpoint = await in_thread(store.latest_checkpoint, session_id, generation)
        if checkpoint is None:
            raise NotFoundError(
                f"session {session_id} has no checkpoint in clear generation {generation}: nothing has been "
                f"compacted since it was created or last cleared; compact it with "
                f"`octipusctl sessions compact {session_id}` (POST /{API_VERSION}/sessions/{session_id}/compact)"
            )
        return out(CheckpointOut, checkpoint)

    return router
