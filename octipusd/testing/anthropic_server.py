"""A scripted Anthropic Messages API server on 127.0.0.1, for driving the real Claude Code offline.

Only the model's decisions are mocked: the CLI, its tools, MCP and permission relay run for real. The
wire format follows what Claude Code 2.1.197 was seen to send and accept
(``/work/shared/protocols/observed.md`` §1.2):

- ``HEAD /`` and ``GET /`` answer 200 (Claude's connection warm-up; the response is not inspected).
- ``POST /v1/messages`` (Claude adds ``?beta=true``) with ``"stream": true`` answers Server-Sent
  Events over HTTP/1.1 chunked transfer encoding: ``message_start``, ``ping``, then
  ``content_block_start`` / ``content_block_delta`` / ``content_block_stop`` per block (text as a few
  ``text_delta`` chunks, tool calls as a few ``input_json_delta`` chunks), ``message_delta`` (with
  ``stop_reason`` ``tool_use`` or ``end_turn`` and ``usage.output_tokens``) and ``message_stop``.
  With ``"stream": false`` it answers one JSON message.
- ``POST /v1/messages/count_tokens`` answers ``{"input_tokens": N}`` (a rough estimate).
- Errors are ``{"type": "error", "error": {"type": ..., "message": ...}}``.

Claude Code 2.1.197 was checked against this server both with chunked keep-alive responses (used
here) and with ``Connection: close`` responses streamed without a length; it accepts both. When it is
interrupted mid-stream it closes the connection; a stalled response notices that and ends early.

The reply is chosen from a script (see :mod:`octipusd.testing.script` for the file format): the step
index is the number of assistant turns already in the request's ``messages``, so a resumed
conversation continues where it stopped. A script with ``"conversations"`` picks the step list by
the request's opening texts first: the first conversation whose ``match`` occurs in the ``system``
prompt (a string or text blocks) or in the text blocks of ``messages[0]`` (the first user message)
plays; otherwise the top-level ``steps`` do. Each request is recorded with that choice
(``conversation``: the index, or None).

Every request is recorded (method, path, lower-cased headers with ``x-api-key`` / ``authorization``
redacted to ``***``, JSON body) in memory and, optionally, as JSON lines in a file.

Python use::

    with ScriptedAnthropicServer("octipusd/testing/scripts/demo.json") as srv:
        env["ANTHROPIC_BASE_URL"] = srv.base_url      # "http://127.0.0.1:PORT", no /v1 suffix
        ...run claude...
        srv.wait_for_requests(3, timeout=10.0, messages_only=True)

Command line::

    python -m octipusd.testing.anthropic_server --script FILE [--host 127.0.0.1] [--port 0]
        [--port-file PATH] [--record FILE]

It prints ``listening on http://127.0.0.1:PORT``, writes the port to ``--port-file`` once listening,
and exits 0 on SIGTERM or SIGINT. A host that is not a loopback address is refused (exit 2).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import urlsplit

from octipusd.testing.script import Step, StepError, TextBlock
from octipusd.testing.scripted_http import (
    REDACTED_HEADERS as REDACTED_HEADERS,
    BaseRecordedRequest,
    ScriptedHandler,
    ScriptedServer,
    check_loopback,
    encode_sse,
    new_id,
    run_cli,
    split_text,
)

__all__ = [
    "RecordedRequest",
    "ScriptedAnthropicServer",
    "check_loopback",
    "main",
    "message_for_step",
    "sse_events_for_step",
]

#: Model name used when a request names none (observed.md §1.2: Claude's default).
DEFAULT_MODEL = "claude-opus-4-8"


@dataclass(frozen=True)
class RecordedRequest(BaseRecordedRequest):
    """One HTTP request the server received.

    Attributes:
        method: ``GET``, ``HEAD``, ``POST``...
        path: Request target including the query string, e.g. ``/v1/messages?beta=true``.
        headers: Lower-cased header names to values; ``x-api-key`` and ``authorization`` are ``***``.
        body: The decoded JSON body; the raw text if it was not JSON; None if there was no body.
        step: For ``POST /v1/messages``, the script step index that was played; else None.
        attempt: For ``POST /v1/messages``, how many earlier requests played the same step of the
            same conversation (0 for the first; retries and interrupted turns replay a step); else
            None.
        time: Arrival time, seconds since the epoch.
        conversation: For ``POST /v1/messages``, the index of the script conversation the request
            matched (``system`` or ``messages[0]`` text), or None when it played the top-level steps.
    """

    @property
    def is_messages_call(self) -> bool:
        """True for ``POST /v1/messages`` (with any query string), the model-turn endpoint."""
        return self.method == "POST" and urlsplit(self.path).path.rstrip("/") == "/v1/messages"


def _usage_dict(step: Step) -> dict[str, int]:
    return {
        "input_tokens": step.usage.input_tokens,
        "cache_creation_input_tokens": step.usage.cache_creation_input_tokens,
        "cache_read_input_tokens": step.usage.cache_read_input_tokens,
        "output_tokens": step.usage.output_tokens,
    }


def _resolved_blocks(step: Step) -> list[dict[str, Any]]:
    """The step's blocks as API content blocks, with generated ``toolu_`` ids."""
    blocks: list[dict[str, Any]] = []
    for block in step.content:
        if isinstance(block, TextBlock):
            blocks.append({"type": "text", "text": block.text})
        else:
            blocks.append(
                {
                    "type": "tool_use",
                    "id": block.id or new_id("toolu_"),
                    "name": block.name,
                    "input": block.input,
                }
            )
    return blocks


def message_for_step(step: Step, model: str) -> dict[str, Any]:
    """Build the non-streaming message body for a step.

    Args:
        step: The scripted step (its ``error`` is ignored here).
        model: Model name to echo back.

    Returns:
        An Anthropic ``message`` object: ``{"id", "type", "role", "model", "content", "stop_reason",
        "stop_sequence", "usage"}``.
    """
    return {
        "id": new_id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _resolved_blocks(step),
        "stop_reason": step.stop_reason,
        "stop_sequence": None,
        "usage": _usage_dict(step),
    }


def sse_events_for_step(step: Step, model: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield the SSE events that stream one step, as ``(event name, data object)`` pairs.

    The sequence is the one in observed.md §1.2: ``message_start``, ``ping``, per block
    ``content_block_start`` / ``content_block_delta``... / ``content_block_stop``, then
    ``message_delta`` and ``message_stop``. Every data object carries ``"type"`` equal to the event
    name, as the real API does.

    Args:
        step: The scripted step (its ``error``, ``delay_seconds`` and ``stall_seconds`` are the
            caller's business).
        model: Model name echoed in ``message_start``.

    Yields:
        ``(event, data)`` pairs in wire order.
    """
    start_usage = _usage_dict(step)
    start_usage["output_tokens"] = min(1, step.usage.output_tokens)
    yield (
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": new_id("msg_"),
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": start_usage,
            },
        },
    )
    yield "ping", {"type": "ping"}
    for index, block in enumerate(_resolved_blocks(step)):
        if block["type"] == "text":
            yield (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                },
            )
            for piece in split_text(block["text"]):
                yield (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "text_delta", "text": piece},
                    },
                )
        else:
            yield (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {
                        "type": "tool_use",
                        "id": block["id"],
                        "name": block["name"],
                        "input": {},
                    },
                },
            )
            for piece in ["", *split_text(json.dumps(block["input"], ensure_ascii=False))]:
                yield (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": piece},
                    },
                )
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": step.stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": step.usage.output_tokens},
        },
    )
    yield "message_stop", {"type": "message_stop"}


class _Handler(ScriptedHandler):
    """The Messages API on one connection: ``count_tokens``, and one script step per message."""

    server_version = "octipus-scripted-anthropic/1"
    model_path = "/v1/messages"
    default_model = DEFAULT_MODEL
    record_class = RecordedRequest
    request_id_header = "request-id"

    def _complete(self, step: Step, model: str) -> Mapping[str, Any]:
        return message_for_step(step, model)

    def _frames(self, step: Step, model: str) -> Iterator[bytes]:
        for event, data in sse_events_for_step(step, model):
            yield encode_sse(event, data)

    def _error_payload(self, error: StepError) -> Mapping[str, Any]:
        return {"type": "error", "error": {"type": error.type, "message": error.message}}

    def _post_other(self, route: str, raw: bytes) -> None:
        if route == "/v1/messages/count_tokens":
            self._send_json(200, {"input_tokens": max(1, len(raw) // 4)})
        else:
            self._not_found()


class ScriptedAnthropicServer(ScriptedServer[RecordedRequest]):
    """Runs the scripted Anthropic Messages server in a background thread.

    Use it as a context manager (or call :meth:`start` / :meth:`close`)::

        with ScriptedAnthropicServer(script) as srv:
            srv.base_url            # "http://127.0.0.1:PORT": give it to ANTHROPIC_BASE_URL
            srv.requests            # RecordedRequest list, in arrival order
            srv.wait_for_requests(2, timeout=10.0, messages_only=True)

    ``base_url`` has no ``/v1`` suffix, the value ANTHROPIC_BASE_URL wants (observed.md §1.1: the
    CLI appends ``/v1/messages``); ``message_requests`` are the ``POST /v1/messages`` requests.

    The constructor (``script``, ``host``, ``port``, ``record_path``) and its errors are those of
    :class:`~octipusd.testing.scripted_http.ScriptedServer`; a ``record_path`` line is
    :meth:`RecordedRequest.as_dict`.
    """

    handler_class: ClassVar[type[ScriptedHandler]] = _Handler
    thread_name: ClassVar[str] = "scripted-anthropic"

    def _is_turn(self, record: RecordedRequest) -> bool:
        return record.is_messages_call

    def wait_for_requests(
        self, n: int, timeout: float = 10.0, *, messages_only: bool = False
    ) -> list[RecordedRequest]:
        """Block until ``n`` requests arrived (with ``messages_only``, only ``POST /v1/messages``).

        Returns the snapshot of the requests counted; raises TimeoutError when fewer than ``n``
        arrived within ``timeout`` seconds.
        """
        return self._wait_for_requests(n, timeout, turns_only=messages_only)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point (:func:`~octipusd.testing.scripted_http.run_cli`); returns the exit status."""
    return run_cli(
        ScriptedAnthropicServer,
        argv,
        prog="python -m octipusd.testing.anthropic_server",
        description="Scripted Anthropic Messages API server for offline Claude Code runs (127.0.0.1 only).",
    )


if __name__ == "__main__":
    sys.exit(main())
