"""A scripted OpenAI Chat Completions server on 127.0.0.1, for driving the real Mistral Vibe offline.

Only the model's decisions are mocked: Vibe, its tools, MCP and its ACP permission relay run for
real. The wire format follows what Mistral Vibe 3.0.2 was seen to send and accept with a
``[[providers]]`` entry ``api_style = "openai"``, ``backend = "generic"``
(``/work/shared/protocols/observed.md`` §3.2):

- ``POST /v1/chat/completions`` with ``"stream": true`` answers Server-Sent Events
  (``data: {...}`` lines, no ``event:`` names) over HTTP/1.1 chunked transfer encoding, each a
  ``chat.completion.chunk``: a role delta (``{"role": "assistant", "content": ""}``), then the text
  as a few ``content`` deltas, or each tool call as a ``tool_calls`` delta carrying its id and name
  followed by ``arguments`` deltas; then a chunk with ``finish_reason`` (``tool_calls`` or ``stop``)
  that also carries ``usage``; then ``data: [DONE]``. With ``"stream": false`` it answers one
  ``chat.completion`` object.
- ``GET /v1/models`` lists the model names requested so far (plus ``mock-model``).
- ``GET /`` and ``HEAD /`` answer 200.
- Errors are ``{"error": {"message": ..., "type": ..., "code": <status>}}`` (the OpenAI shape).

Which step is played (the script format is :mod:`octipusd.testing.script`, shared with the
Anthropic server; a ``tool_use`` block becomes a function tool call ``name(arguments=input)``):

- A **side request** is a request whose body has no non-empty ``tools`` list. Vibe makes such
  requests besides the agent's turns (session title generation in ACP, observed.md §3.2). It is
  answered with the fixed text :data:`SIDE_REPLY` and **does not consume a script step**; it is
  recorded with ``side=True`` and ``step=None``.
- Any other request plays step ``i`` where ``i`` is the number of assistant turns already in its
  ``messages`` (:func:`~octipusd.testing.script.count_assistant_turns`: consecutive assistant
  messages count once; ``tool`` and ``user`` messages separate turns). Vibe resends the whole history
  on every request, including after ``session/load`` or ``--resume`` in a new process, so a resumed
  session continues the script where it stopped.

Every request is recorded (method, path, lower-cased headers with ``authorization`` redacted to
``***``, JSON body, step, attempt, side flag) in memory and, optionally, as JSON lines in a file.

Python use::

    with ScriptedChatServer({"steps": [...]}) as srv:
        api_base = srv.base_url            # "http://127.0.0.1:PORT/v1": Vibe's provider api_base
        ...run vibe...
        srv.wait_for_requests(2, timeout=10.0, messages_only=True)

Command line::

    python -m octipusd.testing.chat_server --script FILE [--host 127.0.0.1] [--port 0]
        [--port-file PATH] [--record FILE]

It prints ``listening on http://127.0.0.1:PORT/v1``, writes the port to ``--port-file`` once
listening, and exits 0 on SIGTERM or SIGINT. A host that is not a loopback address is refused
(exit 2).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final, cast
from urllib.parse import urlsplit

from octipusd.testing.script import Step, StepError, TextBlock
from octipusd.testing.scripted_http import (
    REDACTED_HEADERS as REDACTED_HEADERS,
    BaseRecordedRequest,
    ScriptedHandler,
    ScriptedServer,
    ScriptSource,
    check_loopback,
    new_id,
    run_cli,
    split_text,
)

__all__ = [
    "SIDE_REPLY",
    "ChatRecordedRequest",
    "ScriptedChatServer",
    "check_loopback",
    "chunks_for_step",
    "completion_for_step",
    "is_side_request",
    "main",
]

#: Model name used when a request names none.
DEFAULT_MODEL: Final = "mock-model"

#: The text answered to a side request (no ``tools``), e.g. Vibe's ACP title generation.
SIDE_REPLY: Final = "Scripted session"

#: Path of the model-turn endpoint (under the ``/v1`` base).
COMPLETIONS_PATH: Final = "/v1/chat/completions"


@dataclass(frozen=True)
class ChatRecordedRequest(BaseRecordedRequest):
    """One HTTP request the server received.

    Attributes:
        method: ``GET``, ``HEAD``, ``POST``...
        path: Request target including the query string, e.g. ``/v1/chat/completions``.
        headers: Lower-cased header names to values; ``authorization`` is ``***``.
        body: The decoded JSON body; the raw text if it was not JSON; None if there was no body.
        step: For a scripted ``POST /v1/chat/completions``, the step index played; else None.
        attempt: For a scripted completion, how many earlier requests played the same step (0 for
            the first; a retried request replays its step); else None.
        time: Arrival time, seconds since the epoch.
        side: True for a completion request without tools (answered :data:`SIDE_REPLY`).
    """

    side: bool = False

    @property
    def is_completion_call(self) -> bool:
        """True for ``POST /v1/chat/completions`` (scripted or side)."""
        return self.method == "POST" and urlsplit(self.path).path.rstrip("/") == COMPLETIONS_PATH

    @property
    def is_messages_call(self) -> bool:
        """True for a completion that played a script step (not a side request)."""
        return self.is_completion_call and not self.side

    def as_dict(self) -> dict[str, Any]:
        """Return the record as a JSON-serialisable dict (the shape of a ``--record`` line).

        Returns:
            ``{"time", "method", "path", "headers", "body", "step", "attempt", "side"}``.
        """
        return {**super().as_dict(), "side": self.side}


def is_side_request(body: Mapping[str, Any]) -> bool:
    """Whether a completion request is a side request (answered without consuming a step).

    Args:
        body: The decoded request body.

    Returns:
        True when ``tools`` is missing, null or an empty list. Vibe's agent turns always list its
        functions (observed.md §3.4: ``search_tool_functions``, ``run_typescript``, ``bash``...);
        its title generation lists none.
    """
    tools = body.get("tools")
    return not (isinstance(tools, list) and tools)


def _usage(step: Step) -> dict[str, Any]:
    """The step's usage in the Chat Completions shape (tokens).

    ``prompt_tokens`` counts every input token, cached ones included (the OpenAI convention);
    ``prompt_tokens_details.cached_tokens`` holds the script's ``cache_read_input_tokens``.
    """
    usage = step.usage
    prompt = usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens
    return {
        "prompt_tokens": prompt,
        "completion_tokens": usage.output_tokens,
        "total_tokens": prompt + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read_input_tokens},
    }


def _finish_reason(step: Step) -> str:
    return "tool_calls" if step.has_tool_use else "stop"


def _tool_calls(step: Step) -> list[dict[str, Any]]:
    """The step's ``tool_use`` blocks as Chat Completions tool calls, with generated ids."""
    calls: list[dict[str, Any]] = []
    for block in step.content:
        if isinstance(block, TextBlock):
            continue
        calls.append(
            {
                "id": block.id or new_id("call_"),
                "type": "function",
                "function": {"name": block.name, "arguments": json.dumps(block.input, ensure_ascii=False)},
            }
        )
    return calls


def _text(step: Step) -> str:
    return "".join(block.text for block in step.content if isinstance(block, TextBlock))


def completion_for_step(step: Step, model: str) -> dict[str, Any]:
    """Build the non-streaming ``chat.completion`` body for a step.

    Args:
        step: The scripted step (its ``error`` is ignored here).
        model: Model name to echo back.

    Returns:
        ``{"id", "object": "chat.completion", "created", "model", "choices": [{"index": 0,
        "message": {"role": "assistant", "content", ["tool_calls"]}, "finish_reason"}], "usage"}``.
    """
    message: dict[str, Any] = {"role": "assistant", "content": _text(step) or None}
    calls = _tool_calls(step)
    if calls:
        message["tool_calls"] = calls
    return {
        "id": new_id("chatcmpl-"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": _finish_reason(step)}],
        "usage": _usage(step),
    }


def chunks_for_step(step: Step, model: str) -> Iterator[dict[str, Any]]:
    """Yield the ``chat.completion.chunk`` objects that stream one step, in wire order.

    The sequence (observed.md §3.2): a role delta; the text as a few ``content`` deltas; for each
    tool call a delta with ``index``, ``id``, ``type`` and ``function.name`` (empty
    ``arguments``) followed by a few ``arguments`` deltas; finally a chunk with an empty delta,
    ``finish_reason`` (``tool_calls`` when the step calls a tool, else ``stop``) and ``usage``.
    The caller sends ``data: [DONE]`` after the last one.

    Args:
        step: The scripted step (its ``error``, ``delay_seconds`` and ``stall_seconds`` are the
            caller's business).
        model: Model name echoed in every chunk.

    Yields:
        Chunk objects.
    """
    completion_id = new_id("chatcmpl-")
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
        return {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            **extra,
        }

    yield chunk({"role": "assistant", "content": ""})
    text = _text(step)
    if text:
        for piece in split_text(text):
            yield chunk({"content": piece})
    for index, call in enumerate(_tool_calls(step)):
        head = {"index": index, "id": call["id"], "type": "function"}
        yield chunk(
            {"tool_calls": [{**head, "function": {"name": call["function"]["name"], "arguments": ""}}]}
        )
        for piece in split_text(call["function"]["arguments"]):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, _finish_reason(step), usage=_usage(step))


def _encode_data(data: Mapping[str, Any] | str) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return f"data: {text}\n\n".encode()


class _Handler(ScriptedHandler):
    """Chat Completions on one connection: ``/v1/models``, side requests, one step per turn."""

    server_version = "octipus-scripted-chat/1"
    model_path = COMPLETIONS_PATH
    default_model = DEFAULT_MODEL
    record_class = ChatRecordedRequest

    def _complete(self, step: Step, model: str) -> Mapping[str, Any]:
        return completion_for_step(step, model)

    def _frames(self, step: Step, model: str) -> Iterator[bytes]:
        for data in chunks_for_step(step, model):
            yield _encode_data(data)
        yield _encode_data("[DONE]")

    def _error_payload(self, error: StepError) -> Mapping[str, Any]:
        return {"error": {"message": error.message, "type": error.type, "code": error.status}}

    def _get_payload(self, path: str) -> Mapping[str, Any] | None:
        route = path.rstrip("/")
        if route == "":
            return {"ok": True}
        if route == "/v1/models":
            names = sorted(cast("ScriptedChatServer", self.server.owner)._models | {DEFAULT_MODEL})
            data = [{"id": name, "object": "model", "created": 0, "owned_by": "octipus"} for name in names]
            return {"object": "list", "data": data}
        return None

    def _answer_turn(self, body: dict[str, Any], model: str) -> None:
        cast("ScriptedChatServer", self.server.owner)._note_model(model)
        if not is_side_request(body):
            super()._answer_turn(body, model)
            return
        self._record(body, side=True)
        side = Step(content=(TextBlock(SIDE_REPLY),))
        self._reply(side, model, stream=body.get("stream") is True, stall=0.0)


class ScriptedChatServer(ScriptedServer[ChatRecordedRequest]):
    """Runs the scripted Chat Completions server in a background thread.

    Use it as a context manager (or call :meth:`start` / :meth:`close`)::

        with ScriptedChatServer(script) as srv:
            srv.base_url            # "http://127.0.0.1:PORT/v1": Vibe's [[providers]] api_base
            srv.requests            # ChatRecordedRequest list, in arrival order
            srv.wait_for_requests(2, timeout=10.0, messages_only=True)

    ``base_url`` ends in ``/v1``: Vibe's generic OpenAI backend appends ``/chat/completions``
    (observed.md §3.2). ``message_requests`` are the completion requests that played a script step;
    side requests (no ``tools``) are left out, see :attr:`side_requests`.

    The constructor (``script``, ``host``, ``port``, ``record_path``) and its errors are those of
    :class:`~octipusd.testing.scripted_http.ScriptedServer`; a ``record_path`` line is
    :meth:`ChatRecordedRequest.as_dict`.
    """

    handler_class: ClassVar[type[ScriptedHandler]] = _Handler
    thread_name: ClassVar[str] = "scripted-chat"
    url_path: ClassVar[str] = "/v1"

    def __init__(
        self,
        script: ScriptSource,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        record_path: str | os.PathLike[str] | None = None,
    ) -> None:
        super().__init__(script, host=host, port=port, record_path=record_path)
        self._models: set[str] = set()

    def _is_turn(self, record: ChatRecordedRequest) -> bool:
        return record.is_messages_call

    def _note_model(self, name: str) -> None:
        with self._cond:
            self._models.add(name)

    @property
    def side_requests(self) -> list[ChatRecordedRequest]:
        """A snapshot of the tool-less completion requests answered :data:`SIDE_REPLY`."""
        return [record for record in self.requests if record.is_completion_call and record.side]

    def wait_for_requests(
        self, n: int, timeout: float = 10.0, *, messages_only: bool = False
    ) -> list[ChatRecordedRequest]:
        """Block until ``n`` requests arrived (with ``messages_only``, only scripted completions).

        Returns the snapshot of the requests counted; raises TimeoutError when fewer than ``n``
        arrived within ``timeout`` seconds.
        """
        return self._wait_for_requests(n, timeout, turns_only=messages_only)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point (:func:`~octipusd.testing.scripted_http.run_cli`); returns the exit status."""
    return run_cli(
        ScriptedChatServer,
        argv,
        prog="python -m octipusd.testing.chat_server",
        description="Scripted OpenAI Chat Completions server for offline Mistral Vibe runs (127.0.0.1 only).",
    )


if __name__ == "__main__":
    sys.exit(main())
