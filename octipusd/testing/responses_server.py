"""A scripted OpenAI Responses API server on 127.0.0.1, for driving the real Codex CLI offline.

Only the model's decisions are mocked: the CLI, its sandbox, tools, MCP and approvals run for real.
The wire format follows what Codex CLI 0.171.0 was seen to send and accept
(``/work/shared/protocols/observed.md`` §2.2, ``observed-2.md`` §1):

- ``HEAD /`` and ``GET /`` answer 200; ``GET /v1/models`` answers an empty model list.
- ``POST /v1/responses`` with ``"stream": true`` (the only model call Codex makes, one per model
  turn) answers Server-Sent Events over HTTP/1.1 chunked transfer encoding: ``response.created``,
  ``response.in_progress``, then per content block ``response.output_item.added``, the item's
  deltas (``response.content_part.added`` / ``response.output_text.delta`` /
  ``response.output_text.done`` / ``response.content_part.done`` for text,
  ``response.function_call_arguments.delta`` / ``.done`` for a tool call) and
  ``response.output_item.done``, and finally ``response.completed`` with ``usage``
  (``input_tokens``, ``input_tokens_details.cached_tokens``, ``output_tokens``,
  ``output_tokens_details.reasoning_tokens``, ``total_tokens``). With ``"stream": false`` it answers
  the whole ``response`` object as JSON.
- Errors are ``{"error": {"message", "type", "param": null, "code"}}`` (the OpenAI error shape; Codex
  passes a 400 body through as the turn's error text, observed.md §2.7).

The reply is chosen from a script in the same format as the Anthropic server's
(:mod:`octipusd.testing.script`), with this mapping of ``tool_use`` blocks to Responses items:

- ``mcp__<server>__<tool>`` becomes a ``function_call`` with ``"namespace": "mcp__<server>"`` and
  ``"name": "<tool>"``: Codex exposes each MCP server as a tool namespace and rejects the flat name
  (``unsupported call: mcp__lab__echo``, observed.md §2.5);
- ``exec_command`` with input ``{"cmd": ...}`` is Codex's shell tool (observed.md §2.2);
- any other name passes through unchanged. ``input`` becomes the JSON text of ``arguments``; the
  block's ``id`` (or a generated ``call_<random>``) is the ``call_id``.

Step choice: the step index is the number of *assistant turns* already in the request's ``input``
(:func:`count_assistant_turns`). An assistant turn is a maximal run of consecutive model-output
items (``message`` with ``role: "assistant"``, ``function_call``, ``reasoning``, and any other
``*_call`` item) uninterrupted by anything else (user/developer messages, ``*_call_output``
items). One scripted step is one model response, whose items (text and tool calls) arrive back
consecutively in the next request, so it counts once. Codex resends the whole thread on every
request, including after ``codex exec resume`` and app-server ``thread/resume`` (observed.md §2.6,
observed-2.md §1.5), so a resumed thread continues the script where it stopped. Items of unknown
shape are ignored. A failed request does not add output to the history, so a retry plays the same
step again (see the per-step attempt counters in :mod:`octipusd.testing.script`).

Every request is recorded (method, path, lower-cased headers with ``authorization`` redacted to
``***``, JSON body) in memory and, optionally, as JSON lines in a file.

Python use::

    with ScriptedResponsesServer("script.json") as srv:
        config["model_providers.mock.base_url"] = srv.base_url   # "http://127.0.0.1:PORT/v1"
        ...run codex...
        srv.wait_for_requests(2, timeout=10.0, responses_only=True)

Command line::

    python -m octipusd.testing.responses_server --script FILE [--host 127.0.0.1] [--port 0]
        [--port-file PATH] [--record FILE]

It prints ``listening on http://127.0.0.1:PORT/v1``, writes the port to ``--port-file`` once
listening, and exits 0 on SIGTERM or SIGINT. A host that is not a loopback address is refused
(exit 2).
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import json
import os
import secrets
import select
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType, TracebackType
from typing import Any, Final
from urllib.parse import urlsplit

from octipusd.testing.anthropic_server import check_loopback
from octipusd.testing.script import (
    Script,
    Step,
    StepError,
    TextBlock,
    ToolUseBlock,
    load_script,
    parse_script,
)

__all__ = [
    "MCP_PREFIX",
    "RecordedRequest",
    "ScriptedResponsesServer",
    "check_loopback",
    "count_assistant_turns",
    "function_call_item",
    "main",
    "response_for_step",
    "sse_events_for_step",
]

#: Header values replaced by ``***`` in recorded requests.
REDACTED_HEADERS: Final = frozenset({"authorization", "proxy-authorization", "x-api-key"})

#: Model name used when a request names none.
DEFAULT_MODEL: Final = "mock-model"

#: Prefix of a script tool name that targets an MCP server tool (``mcp__<server>__<tool>``).
MCP_PREFIX: Final = "mcp__"

#: Responses API path of the model-turn endpoint (relative to the server root).
RESPONSES_PATH: Final = "/v1/responses"

_MAX_BODY_BYTES = 64 * 1024 * 1024

#: ``input`` item types that are model output although their name does not end in ``_call``.
_ASSISTANT_ITEM_TYPES: Final = frozenset({"function_call", "reasoning", "compaction"})


@dataclass(frozen=True)
class RecordedRequest:
    """One HTTP request the server received.

    Attributes:
        method: ``GET``, ``HEAD``, ``POST``...
        path: Request target including the query string, e.g. ``/v1/responses``.
        headers: Lower-cased header names to values; ``authorization`` is ``***``.
        body: The decoded JSON body; the raw text if it was not JSON; None if there was no body.
        step: For ``POST /v1/responses``, the script step index that was played; else None.
        attempt: For ``POST /v1/responses``, how many earlier requests played the same step (0 for
            the first; retries replay a step); else None.
        time: Arrival time, seconds since the epoch.
    """

    method: str
    path: str
    headers: dict[str, str] = field(hash=False)
    body: Any = field(hash=False)
    step: int | None = None
    attempt: int | None = None
    time: float = 0.0

    @property
    def is_responses_call(self) -> bool:
        """True for ``POST /v1/responses`` (with any query string), the model-turn endpoint."""
        return self.method == "POST" and urlsplit(self.path).path.rstrip("/") == RESPONSES_PATH

    def as_dict(self) -> dict[str, Any]:
        """Return the record as a JSON-serialisable dict (the shape of a ``--record`` line).

        Returns:
            ``{"time", "method", "path", "headers", "body", "step", "attempt"}``.
        """
        return {
            "time": self.time,
            "method": self.method,
            "path": self.path,
            "headers": self.headers,
            "body": self.body,
            "step": self.step,
            "attempt": self.attempt,
        }


def _is_assistant_item(item: object) -> bool:
    if not isinstance(item, dict):
        return False
    kind = item.get("type")
    if kind == "message" or (kind is None and "role" in item):
        return item.get("role") == "assistant"
    if not isinstance(kind, str):
        return False
    if kind.endswith("_call_output") or kind.endswith("_output"):
        return False
    return kind in _ASSISTANT_ITEM_TYPES or kind.endswith("_call")


def count_assistant_turns(items: object) -> int:
    """Count the assistant turns in a request's ``input``: the index of the step to play.

    An assistant turn is a maximal run of consecutive model-output items (``message`` items with
    ``role: "assistant"``, ``function_call``, ``reasoning``, any other ``*_call`` item) that is not
    interrupted by another item (see the module docstring for why).

    Args:
        items: The request body's ``input`` value (normally a list of item objects).

    Returns:
        The number of assistant turns, >= 0; 0 when ``items`` is not a list.
    """
    if not isinstance(items, list):
        return 0
    count = 0
    previous_assistant = False
    for item in items:
        if _is_assistant_item(item):
            if not previous_assistant:
                count += 1
            previous_assistant = True
        else:
            previous_assistant = False
    return count


def _new_id(prefix: str) -> str:
    return prefix + secrets.token_hex(12)


def _chunks(text: str, parts: int = 3) -> list[str]:
    """Split ``text`` into at most ``parts`` non-empty pieces (one empty piece for empty text)."""
    if not text:
        return [""]
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _usage(step: Step) -> dict[str, Any]:
    """The step's usage as a Responses ``usage`` object (tokens).

    ``input_tokens`` includes the cached tokens, as in the OpenAI API: the script's
    ``input_tokens`` + ``cache_read_input_tokens`` + ``cache_creation_input_tokens`` is reported as
    ``input_tokens``, with ``cache_read_input_tokens`` as ``input_tokens_details.cached_tokens``.
    """
    u = step.usage
    input_tokens = u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": u.cache_read_input_tokens},
        "output_tokens": u.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens + u.output_tokens,
    }


def function_call_item(block: ToolUseBlock, *, item_id: str, status: str = "completed") -> dict[str, Any]:
    """Build the ``function_call`` output item for a scripted ``tool_use`` block.

    ``mcp__<server>__<tool>`` becomes ``namespace: "mcp__<server>"``, ``name: "<tool>"``
    (observed.md §2.5); any other name is kept as is (``exec_command`` is the shell tool,
    observed.md §2.2).

    Args:
        block: The scripted tool call.
        item_id: The output item's ``id`` (``fc_<random>``).
        status: ``in_progress`` (in ``output_item.added``) or ``completed``.

    Returns:
        ``{"id", "type": "function_call", "status", "call_id", "name", "arguments", ["namespace"]}``;
        ``arguments`` is ``""`` while in progress.
    """
    item: dict[str, Any] = {
        "id": item_id,
        "type": "function_call",
        "status": status,
        "call_id": block.id or "",
        "name": block.name,
        "arguments": json.dumps(block.input, ensure_ascii=False) if status == "completed" else "",
    }
    if block.name.startswith(MCP_PREFIX):
        parts = block.name.split("__", 2)
        if len(parts) == 3 and parts[1] and parts[2]:
            item["namespace"] = f"{MCP_PREFIX}{parts[1]}"
            item["name"] = parts[2]
    return item


def _resolve(step: Step) -> list[TextBlock | ToolUseBlock]:
    """The step's blocks with generated ``call_`` ids for tool calls that have none."""
    out: list[TextBlock | ToolUseBlock] = []
    for block in step.content:
        if isinstance(block, ToolUseBlock) and block.id is None:
            block = ToolUseBlock(name=block.name, input=block.input, id=_new_id("call_"))
        out.append(block)
    return out


def _message_item(text: str, item_id: str, *, done: bool) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "message",
        "status": "completed" if done else "in_progress",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}] if done else [],
    }


def _response(response_id: str, model: str, status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "error": None,
        "incomplete_details": None,
        "usage": None,
    }


def response_for_step(step: Step, model: str) -> dict[str, Any]:
    """Build the non-streaming ``response`` object for a step.

    Args:
        step: The scripted step (its ``error`` is ignored here).
        model: Model name to echo back.

    Returns:
        A Responses ``response`` object with ``status: "completed"``, ``output`` items and ``usage``.
    """
    output: list[dict[str, Any]] = []
    for block in _resolve(step):
        if isinstance(block, TextBlock):
            output.append(_message_item(block.text, _new_id("msg_"), done=True))
        else:
            output.append(function_call_item(block, item_id=_new_id("fc_")))
    body = _response(_new_id("resp_"), model, "completed", output)
    body["usage"] = _usage(step)
    return body


def sse_events_for_step(step: Step, model: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield the SSE events that stream one step, as ``(event name, data object)`` pairs.

    The sequence is the one in observed.md §2.2 (plus the optional events the real API sends):
    ``response.created``, ``response.in_progress``, per block ``response.output_item.added``, the
    block's deltas and ``response.output_item.done``, then ``response.completed`` with ``usage``.
    Every data object carries ``"type"`` equal to the event name and a ``sequence_number``.

    Args:
        step: The scripted step (its ``error``, ``delay_seconds`` and ``stall_seconds`` are the
            caller's business).
        model: Model name echoed in the ``response`` objects.

    Yields:
        ``(event, data)`` pairs in wire order.
    """
    response_id = _new_id("resp_")
    sequence = 0

    def event(name: str, **data: Any) -> tuple[str, dict[str, Any]]:
        nonlocal sequence
        payload = {"type": name, "sequence_number": sequence, **data}
        sequence += 1
        return name, payload

    yield event("response.created", response=_response(response_id, model, "in_progress", []))
    yield event("response.in_progress", response=_response(response_id, model, "in_progress", []))
    output: list[dict[str, Any]] = []
    for index, block in enumerate(_resolve(step)):
        if isinstance(block, TextBlock):
            item_id = _new_id("msg_")
            yield event(
                "response.output_item.added",
                output_index=index,
                item=_message_item("", item_id, done=False),
            )
            part = {"type": "output_text", "text": "", "annotations": []}
            yield event(
                "response.content_part.added",
                item_id=item_id,
                output_index=index,
                content_index=0,
                part=part,
            )
            for piece in _chunks(block.text):
                yield event(
                    "response.output_text.delta",
                    item_id=item_id,
                    output_index=index,
                    content_index=0,
                    delta=piece,
                    logprobs=[],
                )
            yield event(
                "response.output_text.done",
                item_id=item_id,
                output_index=index,
                content_index=0,
                text=block.text,
                logprobs=[],
            )
            yield event(
                "response.content_part.done",
                item_id=item_id,
                output_index=index,
                content_index=0,
                part={**part, "text": block.text},
            )
            done = _message_item(block.text, item_id, done=True)
        else:
            item_id = _new_id("fc_")
            yield event(
                "response.output_item.added",
                output_index=index,
                item=function_call_item(block, item_id=item_id, status="in_progress"),
            )
            arguments = json.dumps(block.input, ensure_ascii=False)
            for piece in _chunks(arguments):
                yield event(
                    "response.function_call_arguments.delta",
                    item_id=item_id,
                    output_index=index,
                    delta=piece,
                )
            yield event(
                "response.function_call_arguments.done",
                item_id=item_id,
                output_index=index,
                arguments=arguments,
            )
            done = function_call_item(block, item_id=item_id)
        output.append(done)
        yield event("response.output_item.done", output_index=index, item=done)
    completed = _response(response_id, model, "completed", output)
    completed["usage"] = _usage(step)
    yield event("response.completed", response=completed)


def _encode_sse(event: str, data: Mapping[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def _redact(headers: Mapping[str, str]) -> dict[str, str]:
    return {name: ("***" if name in REDACTED_HEADERS else value) for name, value in headers.items()}


def _error_body(error: StepError) -> dict[str, Any]:
    return {"error": {"message": error.message, "type": error.type, "param": None, "code": error.type}}


class _Server(ThreadingHTTPServer):
    """ThreadingHTTPServer that tracks open connections so that close() can cut them."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], owner: ScriptedResponsesServer) -> None:
        self.owner = owner
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    """One HTTP/1.1 connection (keep-alive; SSE bodies use chunked transfer encoding)."""

    protocol_version = "HTTP/1.1"
    server: _Server
    server_version = "octipus-scripted-responses/1"

    # -- plumbing ------------------------------------------------------------------------------

    def setup(self) -> None:
        super().setup()
        with self.server.connections_lock:
            self.server.connections.add(self.connection)

    def finish(self) -> None:
        with self.server.connections_lock:
            self.server.connections.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def handle(self) -> None:
        """Serve the connection; a client hanging up mid-response is normal, not an error."""
        try:
            super().handle()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default per-request stderr logging."""

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts: list[bytes] = []
            total = 0
            while True:
                size_line = self.rfile.readline(1024)
                size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                total += size
                if total > _MAX_BODY_BYTES:
                    raise ValueError("request body too large")
                parts.append(self.rfile.read(size))
                self.rfile.readline(1024)
        length = int(self.headers.get("Content-Length") or 0)
        if length > _MAX_BODY_BYTES:
            raise ValueError("request body too large")
        return self.rfile.read(length) if length > 0 else b""

    def _send_json(self, status: int, payload: Mapping[str, Any], *, head_only: bool = False) -> None:
        body = json.dumps(payload, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("x-request-id", _new_id("req_"))
        self.end_headers()
        if not head_only:
            self.wfile.write(body)
        self.wfile.flush()

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    # -- verbs ---------------------------------------------------------------------------------

    def do_HEAD(self) -> None:
        self._record(None)
        self._send_json(200, {"ok": True}, head_only=True)

    def do_GET(self) -> None:
        self._record(None)
        route = urlsplit(self.path).path.rstrip("/")
        if route == "":
            self._send_json(200, {"ok": True})
        elif route == "/v1/models":
            self._send_json(200, {"object": "list", "data": [], "models": []})
        else:
            self._not_found()

    def do_DELETE(self) -> None:
        self._record(None)
        self._not_found()

    def do_POST(self) -> None:
        try:
            raw = self._read_body()
        except ValueError as exc:
            self.close_connection = True
            self._send_json(400, _error_body(StepError(400, "invalid_request_error", f"mock: {exc}")))
            return
        body = self._decode(raw)
        route = urlsplit(self.path).path.rstrip("/")
        if route != RESPONSES_PATH:
            self._record(body)
            self._not_found()
            return
        if not isinstance(body, dict):
            self._record(body)
            self._send_json(
                400, _error_body(StepError(400, "invalid_request_error", "mock: body must be a JSON object"))
            )
            return
        owner = self.server.owner
        index = count_assistant_turns(body.get("input"))
        attempt = owner._next_attempt(index)
        self._record(body, step=index, attempt=attempt)
        step = owner.script.step_for(index)
        requested_model = body.get("model")
        model = requested_model if isinstance(requested_model, str) and requested_model else DEFAULT_MODEL
        if step.delay_seconds and owner.closing.wait(step.delay_seconds):
            self.close_connection = True
            return
        if step.error is not None and (step.error.times is None or attempt < step.error.times):
            self._send_json(step.error.status, _error_body(step.error))
            return
        if body.get("stream") is True:
            stall = step.stall_seconds if step.stall_times is None or attempt < step.stall_times else 0.0
            self._stream(step, model, stall)
        else:
            self._send_json(200, response_for_step(step, model))

    def _stream(self, step: Step, model: str, stall: float) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("x-request-id", _new_id("req_"))
        self.end_headers()
        first = True
        for event, data in sse_events_for_step(step, model):
            self._write_chunk(_encode_sse(event, data))
            if first and stall and not self._stall(stall):
                self.close_connection = True
                return
            first = False
        self._write_chunk(b"")

    def _stall(self, seconds: float) -> bool:
        """Wait ``seconds`` mid-response; False early if the server closes or the client hangs up."""
        deadline = time.monotonic() + seconds
        owner = self.server.owner
        while (remaining := deadline - time.monotonic()) > 0:
            if owner.closing.is_set():
                return False
            readable, _, _ = select.select([self.connection], [], [], min(remaining, 0.05))
            if readable:
                try:
                    if not self.connection.recv(1, socket.MSG_PEEK):
                        return False
                except OSError:
                    return False
                owner.closing.wait(min(remaining, 0.05))
        return not owner.closing.is_set()

    def _not_found(self) -> None:
        self._send_json(
            404,
            _error_body(StepError(404, "not_found_error", f"mock: no route {self.path}")),
        )

    @staticmethod
    def _decode(raw: bytes) -> Any:
        if not raw:
            return None
        text = raw.decode("utf-8", errors="replace")
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text

    def _record(self, body: Any, step: int | None = None, attempt: int | None = None) -> None:
        headers = _redact({name.lower(): value for name, value in self.headers.items()})
        self.server.owner._add_record(
            RecordedRequest(
                method=self.command,
                path=self.path,
                headers=headers,
                body=body,
                step=step,
                attempt=attempt,
                time=time.time(),
            )
        )


class ScriptedResponsesServer:
    """Runs the scripted OpenAI Responses server in a background thread.

    Use it as a context manager (or call :meth:`start` / :meth:`close`)::

        with ScriptedResponsesServer(script) as srv:
            srv.base_url            # "http://127.0.0.1:PORT/v1": a Codex provider's base_url
            srv.requests            # RecordedRequest list, in arrival order
            srv.wait_for_requests(2, timeout=10.0, responses_only=True)

    Args:
        script: A :class:`~octipusd.testing.script.Script`, a path to a script file, or the decoded
            JSON of one (``{"steps": [...]}`` or a bare list of steps).
        host: Loopback address to bind; anything else raises ValueError.
        port: TCP port; 0 picks a free one.
        record_path: If given, every request is also appended to this file as one JSON line
            (:meth:`RecordedRequest.as_dict`).

    Raises:
        ValueError: Malformed script, or a non-loopback ``host``.
        OSError: The script file cannot be read.
    """

    def __init__(
        self,
        script: Script | str | os.PathLike[str] | Mapping[str, Any] | Sequence[Any],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        record_path: str | os.PathLike[str] | None = None,
    ) -> None:
        if isinstance(script, Script):
            self.script = script
        elif isinstance(script, str | os.PathLike):
            self.script = load_script(script)
        elif isinstance(script, Mapping):
            self.script = parse_script(dict(script))
        else:
            self.script = parse_script(list(script))
        self.host = check_loopback(host)
        self._port = port
        self._record_path = record_path
        self._records: list[RecordedRequest] = []
        self._attempts: dict[int, int] = {}
        self._cond = threading.Condition()
        self.closing = threading.Event()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> ScriptedResponsesServer:
        """Bind and start serving in a daemon thread; returns self.

        Raises:
            RuntimeError: Already started.
            OSError: The address cannot be bound.
        """
        if self._httpd is not None:
            raise RuntimeError("server already started")
        server_class: type[_Server] = _Server
        if ipaddress.ip_address(self.host).version == 6:
            server_class = type("_Server6", (_Server,), {"address_family": socket.AF_INET6})
        self._httpd = server_class((self.host, self._port), self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="scripted-responses",
            daemon=True,
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving, wake stalled responses and cut open connections. Idempotent."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self.closing.set()
        httpd.shutdown()
        with httpd.connections_lock:
            connections = list(httpd.connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5.0)

    def __enter__(self) -> ScriptedResponsesServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- addresses -----------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound TCP port. Raises RuntimeError before :meth:`start`."""
        if self._httpd is None:
            raise RuntimeError("server not started")
        return int(self._httpd.server_address[1])

    @property
    def root_url(self) -> str:
        """``http://127.0.0.1:PORT`` (no path)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``: the value a Codex ``model_providers.<id>.base_url`` wants
        (observed.md §2.1/§2.2: Codex appends ``/responses``)."""
        return f"{self.root_url}/v1"

    def _next_attempt(self, index: int) -> int:
        """Count one more request at step ``index``; return how many came before it."""
        with self._cond:
            attempt = self._attempts.get(index, 0)
            self._attempts[index] = attempt + 1
            return attempt

    @property
    def open_connections(self) -> int:
        """Number of client connections currently held open (keep-alive or mid-response)."""
        httpd = self._httpd
        if httpd is None:
            return 0
        with httpd.connections_lock:
            return len(httpd.connections)

    # -- records -------------------------------------------------------------------------------

    def _add_record(self, record: RecordedRequest) -> None:
        with self._cond:
            self._records.append(record)
            if self._record_path is not None:
                with open(self._record_path, "a", encoding="utf-8") as handle:
                    handle.write(json.dumps(record.as_dict(), ensure_ascii=False) + "\n")
            self._cond.notify_all()

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request received so far, in arrival order."""
        with self._cond:
            return list(self._records)

    @property
    def message_requests(self) -> list[RecordedRequest]:
        """A snapshot of the ``POST /v1/responses`` requests only (one per model turn)."""
        return [record for record in self.requests if record.is_responses_call]

    def conversation_texts(self) -> list[str]:
        """The JSON text of each ``POST /v1/responses`` body, in arrival order (history checks)."""
        return [json.dumps(record.body) for record in self.message_requests]

    def wait_for_requests(
        self, n: int, timeout: float = 10.0, *, responses_only: bool = False
    ) -> list[RecordedRequest]:
        """Block until at least ``n`` requests were recorded.

        Args:
            n: Number of requests to wait for.
            timeout: Maximum wait, in seconds.
            responses_only: Count only ``POST /v1/responses`` requests.

        Returns:
            The snapshot (of all requests, or of the responses requests if ``responses_only``).

        Raises:
            TimeoutError: Fewer than ``n`` requests arrived within ``timeout``.
        """

        def current() -> list[RecordedRequest]:
            return (
                [r for r in self._records if r.is_responses_call] if responses_only else list(self._records)
            )

        deadline = time.monotonic() + timeout
        with self._cond:
            while len(got := current()) < n:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"got {len(got)} of {n} requests after {timeout} s")
                self._cond.wait(remaining)
            return got


def _write_port_file(path: str, port: int) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(f"{port}\n")
    os.replace(tmp, path)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point.

    Args:
        argv: Arguments without the program name; ``sys.argv[1:]`` when None.

    Returns:
        Exit status: 0 after SIGTERM/SIGINT, 2 on a bad argument (non-loopback host, bad script).
    """
    parser = argparse.ArgumentParser(
        prog="python -m octipusd.testing.responses_server",
        description="Scripted OpenAI Responses API server for offline Codex CLI runs (127.0.0.1 only).",
    )
    parser.add_argument("--script", required=True, help="script JSON file (see octipusd.testing.script)")
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="TCP port; 0 picks a free one (default)")
    parser.add_argument("--port-file", help="write the bound port to this file once listening")
    parser.add_argument("--record", help="append every request to this file as JSON lines")
    args = parser.parse_args(argv)
    try:
        server = ScriptedResponsesServer(args.script, host=args.host, port=args.port, record_path=args.record)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        try:
            server.start()
        except OSError as exc:
            print(f"error: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
            return 2
        print(f"listening on {server.base_url}", flush=True)
        if args.port_file:
            _write_port_file(args.port_file, server.port)
        while not stop.wait(0.5):
            pass
    finally:
        server.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


if __name__ == "__main__":
    sys.exit(main())
