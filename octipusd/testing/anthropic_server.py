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
conversation continues where it stopped.

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
from typing import Any
from urllib.parse import urlsplit

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
    "RecordedRequest",
    "ScriptedAnthropicServer",
    "check_loopback",
    "main",
    "message_for_step",
    "sse_events_for_step",
]

#: Header values replaced by ``***`` in recorded requests.
REDACTED_HEADERS = frozenset({"x-api-key", "authorization", "proxy-authorization"})

#: Model name used when a request names none (observed.md §1.2: Claude's default).
DEFAULT_MODEL = "claude-opus-4-8"

_MAX_BODY_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class RecordedRequest:
    """One HTTP request the server received.

    Attributes:
        method: ``GET``, ``HEAD``, ``POST``...
        path: Request target including the query string, e.g. ``/v1/messages?beta=true``.
        headers: Lower-cased header names to values; ``x-api-key`` and ``authorization`` are ``***``.
        body: The decoded JSON body; the raw text if it was not JSON; None if there was no body.
        step: For ``POST /v1/messages``, the script step index that was played; else None.
        attempt: For ``POST /v1/messages``, how many earlier requests played the same step (0 for
            the first; retries and interrupted turns replay a step); else None.
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
    def is_messages_call(self) -> bool:
        """True for ``POST /v1/messages`` (with any query string), the model-turn endpoint."""
        return self.method == "POST" and urlsplit(self.path).path.rstrip("/") == "/v1/messages"

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


def _new_id(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(18).replace("-", "a").replace("_", "b")


def _chunks(text: str, parts: int = 3) -> list[str]:
    """Split ``text`` into at most ``parts`` non-empty pieces (one empty piece for empty text)."""
    if not text:
        return [""]
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)]


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
                    "id": block.id or _new_id("toolu_"),
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
        "id": _new_id("msg_"),
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
                "id": _new_id("msg_"),
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
            for piece in _chunks(block["text"]):
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
            for piece in ["", *_chunks(json.dumps(block["input"], ensure_ascii=False))]:
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


def _encode_sse(event: str, data: Mapping[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def _redact(headers: Mapping[str, str]) -> dict[str, str]:
    return {name: ("***" if name in REDACTED_HEADERS else value) for name, value in headers.items()}


class _Server(ThreadingHTTPServer):
    """ThreadingHTTPServer that tracks open connections so that close() can cut them."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], owner: ScriptedAnthropicServer) -> None:
        self.owner = owner
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    """One HTTP/1.1 connection (keep-alive; SSE bodies use chunked transfer encoding)."""

    protocol_version = "HTTP/1.1"
    server: _Server
    server_version = "octipus-scripted-anthropic/1"

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
        self.send_header("request-id", _new_id("req_"))
        self.end_headers()
        if not head_only:
            self.wfile.write(body)
        self.wfile.flush()

    def _send_error_body(self, error: StepError) -> None:
        self._send_json(
            error.status, {"type": "error", "error": {"type": error.type, "message": error.message}}
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
        if urlsplit(self.path).path in ("", "/"):
            self._send_json(200, {"ok": True})
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
        if route == "/v1/messages/count_tokens":
            self._record(body)
            self._send_json(200, {"input_tokens": max(1, len(raw) // 4)})
            return
        if route != "/v1/messages":
            self._record(body)
            self._not_found()
            return
        if not isinstance(body, dict):
            self._record(body)
            self._send_error_body(StepError(400, "invalid_request_error", "mock: body must be a JSON object"))
            return
        owner = self.server.owner
        index = count_assistant_turns(body.get("messages"))
        attempt = owner._next_attempt(index)
        self._record(body, step=index, attempt=attempt)
        step = owner.script.step_for(index)
        requested_model = body.get("model")
        model = requested_model if isinstance(requested_model, str) and requested_model else DEFAULT_MODEL
        if step.delay_seconds and owner.closing.wait(step.delay_seconds):
            self.close_connection = True
            return
        if step.error is not None and (step.error.times is None or attempt < step.error.times):
            self._send_error_body(step.error)
            return
        if body.get("stream") is True:
            stall = step.stall_seconds if step.stall_times is None or attempt < step.stall_times else 0.0
            self._stream(step, model, stall)
        else:
            self._send_json(200, message_for_step(step, model))

    def _stream(self, step: Step, model: str, stall: float) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("request-id", _new_id("req_"))
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
        """Wait ``seconds`` mid-response; False early if the server closes or the client hangs up.

        An interrupted Claude Code aborts the request by closing the connection (observed.md §1.4
        "Interrupt"), which shows here as the socket turning readable at end of file.
        """
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
                # Pipelined bytes, not a hang-up: keep stalling without spinning on select.
                owner.closing.wait(min(remaining, 0.05))
        return not owner.closing.is_set()

    def _not_found(self) -> None:
        self._send_json(
            404,
            {"type": "error", "error": {"type": "not_found_error", "message": f"mock: no route {self.path}"}},
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


class ScriptedAnthropicServer:
    """Runs the scripted Anthropic Messages server in a background thread.

    Use it as a context manager (or call :meth:`start` / :meth:`close`)::

        with ScriptedAnthropicServer(script) as srv:
            srv.base_url            # "http://127.0.0.1:PORT": give it to ANTHROPIC_BASE_URL
            srv.requests            # RecordedRequest list, in arrival order
            srv.wait_for_requests(2, timeout=10.0, messages_only=True)

    Args:
        script: A :class:`~octipusd.testing.script.Script`, a path to a script file, or the decoded
            JSON of one (``{"steps": [...]}``).
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

    def start(self) -> ScriptedAnthropicServer:
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
            name="scripted-anthropic",
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

    def __enter__(self) -> ScriptedAnthropicServer:
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
        """``http://127.0.0.1:PORT`` with no ``/v1`` suffix, the value ANTHROPIC_BASE_URL wants
        (observed.md §1.1: the CLI appends ``/v1/messages``)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

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
        """A snapshot of the ``POST /v1/messages`` requests only (one per model turn)."""
        return [record for record in self.requests if record.is_messages_call]

    def conversation_texts(self) -> list[str]:
        """The JSON text of each ``POST /v1/messages`` body, in arrival order (history checks)."""
        return [json.dumps(record.body) for record in self.message_requests]

    def wait_for_requests(
        self, n: int, timeout: float = 10.0, *, messages_only: bool = False
    ) -> list[RecordedRequest]:
        """Block until at least ``n`` requests were recorded.

        Args:
            n: Number of requests to wait for.
            timeout: Maximum wait, in seconds.
            messages_only: Count only ``POST /v1/messages`` requests (ignore warm-ups etc.).

        Returns:
            The snapshot (of all requests, or of the messages requests if ``messages_only``).

        Raises:
            TimeoutError: Fewer than ``n`` requests arrived within ``timeout``.
        """

        def current() -> list[RecordedRequest]:
            return [r for r in self._records if r.is_messages_call] if messages_only else list(self._records)

        deadline = time.monotonic() + timeout
        with self._cond:
            while len(got := current()) < n:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"got {len(got)} of {n} requests after {timeout} s")
                self._cond.wait(remaining)
            return got


def check_loopback(host: str) -> str:
    """Return ``host`` as a loopback IP literal, refusing anything else.

    Args:
        host: ``localhost`` (mapped to ``127.0.0.1``) or an IPv4/IPv6 loopback literal.

    Returns:
        The IP literal to bind.

    Raises:
        ValueError: ``host`` is not a loopback address.
    """
    if host == "localhost":
        return "127.0.0.1"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(f"refusing host {host!r}: not a loopback IP address (use 127.0.0.1)") from None
    if not address.is_loopback:
        raise ValueError(f"refusing host {host!r}: not a loopback address (use 127.0.0.1)")
    return str(address)


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
        prog="python -m octipusd.testing.anthropic_server",
        description="Scripted Anthropic Messages API server for offline Claude Code runs (127.0.0.1 only).",
    )
    parser.add_argument("--script", required=True, help="script JSON file (see octipusd.testing.script)")
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="TCP port; 0 picks a free one (default)")
    parser.add_argument("--port-file", help="write the bound port to this file once listening")
    parser.add_argument("--record", help="append every request to this file as JSON lines")
    args = parser.parse_args(argv)
    try:
        server = ScriptedAnthropicServer(args.script, host=args.host, port=args.port, record_path=args.record)
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
