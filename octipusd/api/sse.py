"""Server-sent events of a run: its stored events encoded as SSE frames, a batch per write.

The stream's frames carry ``id:`` (the event's ``seq``, so a reconnecting client resumes with
``Last-Event-ID``), ``event:`` (its kind) and ``data:`` (the event as the JSON of
:class:`~octipusd.api.models.EventOut`). A batch of events becomes one write; a keep-alive is an SSE
comment. The encoding is done here rather than by FastAPI's per-item SSE machinery (a task hop, a
timer and a validation per event), which bounded a busy daemon's fan-out.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from octipusd.store.records import RunEvent

__all__ = ["EVENT_FRAME_SCHEMA", "KEEPALIVE_FRAME", "encode_batch", "encode_event"]

#: What a keep-alive tick writes (an SSE comment, ignored by clients).
KEEPALIVE_FRAME = b": keep-alive\n\n"

#: The OpenAPI schema of one frame of the stream (OpenAPI 3.1 reads a ``text/event-stream`` schema as
#: one event's fields; ``data`` holds the JSON of an ``EventOut``).
EVENT_FRAME_SCHEMA = {
    "type": "object",
    "required": ["id", "event", "data"],
    "properties": {
        "id": {"type": "string", "description": "the event's seq (resume with Last-Event-ID)"},
        "event": {"type": "string", "description": "the event's kind"},
        "data": {
            "type": "string",
            "contentMediaType": "application/json",
            "contentSchema": {"$ref": "#/components/schemas/EventOut"},
        },
    },
}


def _timestamp(moment: datetime) -> str:
    text = moment.isoformat()
    return text[:-6] + "Z" if moment.utcoffset() == timedelta(0) else text


def encode_event(event: RunEvent) -> str:
    """One SSE frame for ``event`` (its ``data`` is the JSON of ``EventOut``)."""
    data = json.dumps(
        {
            "run_id": event.run_id,
            "seq": event.seq,
            "kind": event.kind,
            "data": event.data,
            "created_at": _timestamp(event.created_at),
        },
        ensure_ascii=False,
        separators=(",", ":"),
    )
    kind = event.kind.replace("\r", " ").replace("\n", " ")
    return f"id: {event.seq}\nevent: {kind}\ndata: {data}\n\n"


def encode_batch(events: list[RunEvent]) -> bytes:
    """The frames of ``events`` as one write; :data:`KEEPALIVE_FRAME` for an empty batch."""
    if not events:
        return KEEPALIVE_FRAME
    return "".join(encode_event(e) for e in events).encode()
