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
    count_assistant_turns,
    load_script,
    parse_script,
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

#: Header values replaced by ``***`` in recorded requests.
REDACTED_HEADERS: Final = frozenset({"authorization", "proxy-authorization", "x-api-key"})

#: Model name used when a request names none.
DEFAULT_MODEL: Final = "mock-model"

#: The text answered to a side request (no ``tools``), e.g. Vibe's ACP title generation.
SIDE_REPLY: Final = "Scripted session"

#: Path of the model-turn endpoint (under the ``/v1`` base).
COMPLETIONS_PATH: Final = "/v1/chat/completions"

_MAX_BODY_BYTES: Final = 64 * 1024 * 1024


@dataclass(frozen=True)
class ChatRecordedRequest:
    """One HTTP request the server received.

    Attributes:
        method: ``GET``, ``HEAD``, ``POST``...
        path: Request target including the query string, e.g. ``/v1/chat/completions``.
        headers: Lower-cased header names to values; ``authorization`` is ``***``.
        body: The decoded JSON body; the raw text if it was not JSON; None if there was no body.
        step: For a scripted ``POST /v1/chat/completions``, the step index played; else None.
        attempt: For a scripted completion, how many earlier requests played the same step (0 for
            the first; a retried request replays its step); else None.
        side: True for a completion request without tools (answered :data:`SIDE_REPLY`).
        time: Arrival time, seconds since the epoch.
    """

    method: str
    path: str
    headers: dict[str, str] = field(hash=False)
    body: Any = field(hash=False)
    step: int | None = None
    attempt: int | None = None
    side: bool = False
    time: float = 0.0

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
        return {
            "time": self.time,
            "method": self.method,
            "path": self.path,
            "headers": self.headers,
            "body": self.body,
            "step": self.step,
            "attempt": self.attempt,
            "side": self.side,
        }


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


def _new_id(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(18).replace("-", "a").replace("_", "b")


def _pieces(text: str, parts: int = 3) -> list[str]:
    """Split ``text`` into at most ``parts`` non-empty pieces (one empty piece for empty text)."""
    if not text:
        return [""]
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)]


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
                "id": block.id or _new_id("call_"),
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
        "id": _new_id("chatcmpl-"),
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
    completion_id = _new_id("chatcmpl-")
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
        for piece in _pieces(text):
            yield chunk({"content": piece})
    for index, call in enumerate(_tool_calls(step)):
        head = {"index": index, "id": call["id"], "type": "function"}
        yield chunk(
            {"tool_calls": [{**head, "function": {"name": call["function"]["name"], "arguments": ""}}]}
        )
        for piece in _pieces(call["function"]["arguments"]):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, _finish_reason(step), usage=_usage(step))


def _encode_data(data: Mapping[str, Any] | str) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return f"data: {text}\n\n".encode()


def _redact(headers: Mapping[str, str]) -> dict[str, str]:
    return {name: ("***" if name in REDACTED_HEADERS else value) for name, value in headers.items()}


class _Server(ThreadingHTTPServer):
    """ThreadingHTTPServer that tracks open connections so that close() can cut them."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], owner: ScriptedChatServer) -> None:
        self.owner = owner
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    """One HTTP/1.1 connection (keep-alive; SSE bodies use chunked transfer encoding)."""

    protocol_version = "HTTP/1.1"
    server: _Server
    server_version = "octipus-scripted-chat/1"

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

    def _send_error_body(self, error: StepError) -> None:
        self._send_json(
            error.status, {"error": {"message": error.message, "type": error.type, "code": error.status}}
        )

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
            names = sorted(self.server.owner._models | {DEFAULT_MODEL})
            data = [{"id": name, "object": "model", "created": 0, "owned_by": "octipus"} for name in names]
            self._send_json(200, {"object": "list", "data": data})
        else:
            self._not_found()

    def do_POST(self) -> None:
        try:
            raw = self._read_body()
        except ValueError as exc:
            self.close_connection = True
            self._send_error_body(StepError(400, "invalid_request_error", f"mock: {exc}"))
            return
        body = self._decode(raw)
        route = urlsplit(self.path).path.rstrip("/")
        if route != COMPLETIONS_PATH:
            self._record(body)
            self._not_found()
            return
        if not isinstance(body, dict):
            self._record(body)
            self._send_error_body(StepError(400, "invalid_request_error", "mock: body must be a JSON object"))
            return
        owner = self.server.owner
        requested_model = body.get("model")
        model = requested_model if isinstance(requested_model, str) and requested_model else DEFAULT_MODEL
        owner._note_model(model)
        stream = body.get("stream") is True
        if is_side_request(body):
            self._record(body, side=True)
            side = Step(content=(TextBlock(SIDE_REPLY),))
            if stream:
                self._stream(side, model, 0.0)
            else:
                self._send_json(200, completion_for_step(side, model))
            return
        index = count_assistant_turns(body.get("messages"))
        attempt = owner._next_attempt(index)
        self._record(body, step=index, attempt=attempt)
        step = owner.script.step_for(index)
        if step.delay_seconds and owner.closing.wait(step.delay_seconds):
            self.close_connection = True
            return
        if step.error is not None and (step.error.times is None or attempt < step.error.times):
            self._send_error_body(step.error)
            return
        if stream:
            stall = step.stall_seconds if step.stall_times is None or attempt < step.stall_times else 0.0
            self._stream(step, model, stall)
        else:
            self._send_json(200, completion_for_step(step, model))

    def _stream(self, step: Step, model: str, stall: float) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("x-request-id", _new_id("req_"))
        self.end_headers()
        first = True
        for data in chunks_for_step(step, model):
            self._write_chunk(_encode_data(data))
            if first and stall and not self._stall(stall):
                self.close_connection = True
                return
            first = False
        self._write_chunk(_encode_data("[DONE]"))
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
            404, {"error": {"message": f"mock: no route {self.path}", "type": "not_found_error", "code": 404}}
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

    def _record(
        self, body: Any, step: int | None = None, attempt: int | None = None, *, side: bool = False
    ) -> None:
        headers = _redact({name.lower(): value for name, value in self.headers.items()})
        self.server.owner._add_record(
            ChatRecordedRequest(
                method=self.command,
                path=self.path,
                headers=headers,
                body=body,
                step=step,
                attempt=attempt,
                side=side,
                time=time.time(),
            )
        )


class ScriptedChatServer:
    """Runs the scripted Chat Completions server in a background thread.

    Use it as a context manager (or call :meth:`start` / :meth:`close`)::

        with ScriptedChatServer(script) as srv:
            srv.base_url            # "http://127.0.0.1:PORT/v1": Vibe's [[providers]] api_base
            srv.requests            # ChatRecordedRequest list, in arrival order
            srv.wait_for_requests(2, timeout=10.0, messages_only=True)

    Args:
        script: A :class:`~octipusd.testing.script.Script`, a path to a script file, or the decoded
            JSON of one (``{"steps": [...]}`` or a bare list of steps).
        host: Loopback address to bind; anything else raises ValueError.
        port: TCP port; 0 picks a free one.
        record_path: If given, every request is also appended to this file as one JSON line
            (:meth:`ChatRecordedRequest.as_dict`).

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
        self._records: list[ChatRecordedRequest] = []
        self._attempts: dict[int, int] = {}
        self._models: set[str] = set()
        self._cond = threading.Condition()
        self.closing = threading.Event()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> ScriptedChatServer:
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
            name="scripted-chat",
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

    def __enter__(self) -> ScriptedChatServer:
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
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``, the value of Vibe's ``[[providers]] api_base``.

        Vibe's generic OpenAI backend appends ``/chat/completions`` (observed.md §3.2).
        """
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    def _next_attempt(self, index: int) -> int:
        """Count one more request at step ``index``; return how many came before it."""
        with self._cond:
            attempt = self._attempts.get(index, 0)
            self._attempts[index] = attempt + 1
            return attempt

    def _note_model(self, name: str) -> None:
        with self._cond:
            self._models.add(name)

    # -- records -------------------------------------------------------------------------------

    def _add_record(self, record: ChatRecordedRequest) -> None:
        with self._cond:
            self._records.append(record)
            if self._record_path is not None:
                with open(self._record_path, "a", encoding="utf-8") as handle:
                    handle.write(json.dumps(record.as_dict(), ensure_ascii=False) + "\n")
            self._cond.notify_all()

    @property
    def requests(self) -> list[ChatRecordedRequest]:
        """A snapshot of every request received so far, in arrival order."""
        with self._cond:
            return list(self._records)

    @property
    def message_requests(self) -> list[ChatRecordedRequest]:
        """A snapshot of the ``POST /v1/chat/completions`` requests that played a script step.

        Side requests (no ``tools``) are left out; see :attr:`side_requests`.
        """
        return [record for record in self.requests if record.is_messages_call]

    @property
    def side_requests(self) -> list[ChatRecordedRequest]:
        """A snapshot of the tool-less completion requests answered :data:`SIDE_REPLY`."""
        return [record for record in self.requests if record.is_completion_call and record.side]

    def conversation_texts(self) -> list[str]:
        """The JSON text of each scripted completion request body, in arrival order (history checks)."""
        return [json.dumps(record.body) for record in self.message_requests]

    def wait_for_requests(
        self, n: int, timeout: float = 10.0, *, messages_only: bool = False
    ) -> list[ChatRecordedRequest]:
        """Block until at least ``n`` requests were recorded.

        Args:
            n: Number of requests to wait for.
            timeout: Maximum wait, in seconds.
            messages_only: Count only scripted completion requests (ignore side requests etc.).

        Returns:
            The snapshot (of all requests, or of the scripted completion requests if ``messages_only``).

        Raises:
            TimeoutError: Fewer than ``n`` requests arrived within ``timeout``.
        """

        def current() -> list[ChatRecordedRequest]:
            return [r for r in self._records if r.is_messages_call] if messages_only else list(self._records)

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
        prog="python -m octipusd.testing.chat_server",
        description="Scripted OpenAI Chat Completions server for offline Mistral Vibe runs (127.0.0.1 only).",
    )
    parser.add_argument("--script", required=True, help="script JSON file (see octipusd.testing.script)")
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="TCP port; 0 picks a free one (default)")
    parser.add_argument("--port-file", help="write the bound port to this file once listening")
    parser.add_argument("--record", help="append every request to this file as JSON lines")
    args = parser.parse_args(argv)
    try:
        server = ScriptedChatServer(args.script, host=args.host, port=args.port, record_path=args.record)
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
