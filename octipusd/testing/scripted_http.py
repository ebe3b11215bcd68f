"""The HTTP plumbing shared by the scripted model servers on 127.0.0.1.

:mod:`~octipusd.testing.anthropic_server` (Claude Code), :mod:`~octipusd.testing.responses_server`
(Codex) and :mod:`~octipusd.testing.chat_server` (Mistral Vibe) speak different wire formats but
serve the same way, which lives here:

- :class:`ScriptedServer`: loads the script, binds a loopback address only, serves from a daemon
  thread (:meth:`~ScriptedServer.start` / :meth:`~ScriptedServer.close`, or ``with``), counts the
  attempts per conversation and step, records every request in memory and optionally as JSON
  lines, and waits for requests.
- :class:`ScriptedHandler`: one HTTP/1.1 keep-alive connection. It reads bodies (with a length or
  chunked), writes JSON and chunked Server-Sent Events, stalls mid-response when the step asks
  for it (ending early when the client hangs up or the server closes), answers ``HEAD /`` and
  ``GET /``, and plays one script step per model-turn ``POST``: it picks the script conversation
  from the request's opening texts (:meth:`ScriptedHandler._match_texts`, see "Conversations" in
  :mod:`octipusd.testing.script`) and the step from its assistant turns, then answers: delay,
  scripted error, then the streamed or whole reply.
- :class:`BaseRecordedRequest`: one recorded request, with ``x-api-key`` / ``authorization`` /
  ``proxy-authorization`` redacted to ``***``.
- :func:`run_cli`: the servers' shared command line (``--script``, ``--host``, ``--port``,
  ``--port-file``, ``--record``).

A server module subclasses the three classes and keeps only its protocol: the model-turn path, the
default model, the step index, the opening texts, the reply bodies, the stream frames and the error
shape.
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
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType, TracebackType
from typing import Any, ClassVar, Final, Generic, Self, TypeVar
from urllib.parse import urlsplit

from octipusd.testing.script import (
    Script,
    Step,
    StepError,
    count_assistant_turns,
    load_script,
    parse_script,
)

__all__ = [
    "MAX_BODY_BYTES",
    "REDACTED_HEADERS",
    "BaseRecordedRequest",
    "ScriptSource",
    "ScriptedHTTPServer",
    "ScriptedHandler",
    "ScriptedServer",
    "check_loopback",
    "content_texts",
    "encode_sse",
    "new_id",
    "redact",
    "run_cli",
    "split_text",
]

#: Header values replaced by ``***`` in recorded requests.
REDACTED_HEADERS: Final = frozenset({"x-api-key", "authorization", "proxy-authorization"})

#: Largest request body read (bytes); a larger one is answered 400 and the connection closed.
MAX_BODY_BYTES: Final = 64 * 1024 * 1024

#: Seconds between checks while a response stalls or the server thread polls for shutdown.
_POLL_SECONDS: Final = 0.05


def new_id(prefix: str) -> str:
    """``prefix`` followed by 24 random URL-safe letters and digits (no ``-`` or ``_``)."""
    return prefix + secrets.token_urlsafe(18).replace("-", "a").replace("_", "b")


def split_text(text: str, parts: int = 3) -> list[str]:
    """Split ``text`` into at most ``parts`` non-empty pieces (one empty piece for empty text)."""
    if not text:
        return [""]
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)]


def encode_sse(event: str, data: Mapping[str, Any]) -> bytes:
    """One named Server-Sent Event: ``event: <event>`` and ``data: <JSON>``."""
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def content_texts(content: object) -> list[str]:
    """The texts of a message's ``content`` (or of a ``system`` / ``instructions`` value).

    Args:
        content: A string, or a list of blocks, of which those with a string ``"text"`` count
            (Anthropic ``text`` blocks, Responses ``input_text`` / ``output_text`` parts, Chat
            Completions ``text`` parts); anything else yields nothing.

    Returns:
        The texts in order (a string gives itself).
    """
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [
        block["text"] for block in content if isinstance(block, dict) and isinstance(block.get("text"), str)
    ]


def redact(headers: Mapping[str, str]) -> dict[str, str]:
    """``headers`` (lower-cased names) with the :data:`REDACTED_HEADERS` values replaced by ``***``."""
    return {name: ("***" if name in REDACTED_HEADERS else value) for name, value in headers.items()}


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


@dataclass(frozen=True)
class BaseRecordedRequest:
    """One HTTP request a scripted server received (each server names its model-turn check).

    Attributes:
        method: ``GET``, ``HEAD``, ``POST``...
        path: Request target including the query string.
        headers: Lower-cased header names to values; those in :data:`REDACTED_HEADERS` are ``***``.
        body: The decoded JSON body; the raw text if it was not JSON; None if there was no body.
        step: For a model-turn request, the script step index that was played; else None.
        attempt: For a model-turn request, how many earlier requests played the same step of the
            same conversation (0 for the first; retries and interrupted turns replay a step); else
            None.
        time: Arrival time, seconds since the epoch.
        conversation: For a model-turn request, the index of the script's ``conversations`` entry
            it matched, or None when it played the top-level ``steps`` (and for other requests).
    """

    method: str
    path: str
    headers: dict[str, str] = field(hash=False)
    body: Any = field(hash=False)
    step: int | None = None
    attempt: int | None = None
    time: float = 0.0
    conversation: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """Return the record as a JSON-serialisable dict (the shape of a ``--record`` line).

        Returns:
            ``{"time", "method", "path", "headers", "body", "step", "attempt", "conversation"}``.
        """
        return {
            "time": self.time,
            "method": self.method,
            "path": self.path,
            "headers": self.headers,
            "body": self.body,
            "step": self.step,
            "attempt": self.attempt,
            "conversation": self.conversation,
        }

    def body_text(self) -> str:
        """The body as JSON text (the raw text if it was not JSON; ``""`` without a body).

        Handy to check what a request held, e.g. ``"CHILD-ALPHA" in record.body_text()`` (text
        with quotes, backslashes or non-ASCII characters appears JSON-escaped; compare against
        ``json.dumps(text)[1:-1]`` then, or walk :attr:`body`).
        """
        if self.body is None:
            return ""
        if isinstance(self.body, str):
            return self.body
        return json.dumps(self.body, ensure_ascii=False)


R = TypeVar("R", bound=BaseRecordedRequest)

#: What a server accepts as its script: a parsed script, a file path, or decoded JSON.
ScriptSource = Script | str | os.PathLike[str] | Mapping[str, Any] | Sequence[Any]


class ScriptedHTTPServer(ThreadingHTTPServer):
    """ThreadingHTTPServer that tracks open connections so that close() can cut them."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self, address: tuple[str, int], owner: ScriptedServer[Any], handler: type[ScriptedHandler]
    ) -> None:
        self.owner = owner
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(address, handler)


class ScriptedHandler(BaseHTTPRequestHandler):
    """One HTTP/1.1 connection (keep-alive; SSE bodies use chunked transfer encoding).

    A subclass sets :attr:`model_path`, :attr:`default_model`, :attr:`record_class` and
    ``server_version`` and implements :meth:`_complete`, :meth:`_frames` and :meth:`_error_payload`.
    """

    protocol_version = "HTTP/1.1"
    server: ScriptedHTTPServer

    #: Path of the model-turn endpoint (``POST``; compared without the query and trailing ``/``).
    model_path: ClassVar[str]
    #: Model name used when a request names none.
    default_model: ClassVar[str]
    #: The record type built for each request.
    record_class: ClassVar[type[BaseRecordedRequest]] = BaseRecordedRequest
    #: Response header carrying a generated request id.
    request_id_header: ClassVar[str] = "x-request-id"

    # -- protocol ------------------------------------------------------------------------------

    def _step_index(self, body: Mapping[str, Any]) -> int:
        """The index of the step a model-turn request plays (assistant turns in ``messages``)."""
        return count_assistant_turns(body.get("messages"))

    def _match_texts(self, body: Mapping[str, Any]) -> list[str]:
        """The opening texts a script conversation's ``match`` is looked for in.

        For a ``messages`` protocol (Anthropic Messages, Chat Completions): the ``system`` value
        (a string or a list of text blocks), then the ``system`` / ``developer`` messages up to
        and including the first ``user`` message; it stops at the first assistant message. These
        stay the same on every request of a conversation.
        """
        texts = content_texts(body.get("system"))
        messages = body.get("messages")
        if not isinstance(messages, list):
            return texts
        for message in messages:
            role = message.get("role") if isinstance(message, dict) else None
            if role == "assistant":
                break
            if role in ("system", "developer", "user"):
                texts.extend(content_texts(message.get("content")))
            if role == "user":
                break
        return texts

    def _complete(self, step: Step, model: str) -> Mapping[str, Any]:
        """The non-streaming reply body for ``step``."""
        raise NotImplementedError

    def _frames(self, step: Step, model: str) -> Iterator[bytes]:
        """The streamed reply for ``step``, one chunk of the chunked body at a time."""
        raise NotImplementedError

    def _error_payload(self, error: StepError) -> Mapping[str, Any]:
        """The body of an error answer in the protocol's shape."""
        raise NotImplementedError

    def _request_id(self) -> str:
        return new_id("req_")

    def _get_payload(self, path: str) -> Mapping[str, Any] | None:
        """The body answering ``GET path`` (path without the query), or None for a 404."""
        return {"ok": True} if path in ("", "/") else None

    def _post_other(self, route: str, raw: bytes) -> None:
        """Answer a ``POST`` (already recorded) to a path that is not :attr:`model_path`."""
        self._not_found()

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
                if total > MAX_BODY_BYTES:
                    raise ValueError("request body too large")
                parts.append(self.rfile.read(size))
                self.rfile.readline(1024)
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            raise ValueError("request body too large")
        return self.rfile.read(length) if length > 0 else b""

    @staticmethod
    def _decode(raw: bytes) -> Any:
        if not raw:
            return None
        text = raw.decode("utf-8", errors="replace")
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text

    def _send_json(self, status: int, payload: Mapping[str, Any], *, head_only: bool = False) -> None:
        body = json.dumps(payload, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header(self.request_id_header, self._request_id())
        self.end_headers()
        if not head_only:
            self.wfile.write(body)
        self.wfile.flush()

    def _send_error_body(self, error: StepError) -> None:
        self._send_json(error.status, self._error_payload(error))

    def _not_found(self) -> None:
        self._send_error_body(StepError(404, "not_found_error", f"mock: no route {self.path}"))

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _record(self, body: Any, step: int | None = None, attempt: int | None = None, **extra: Any) -> None:
        headers = redact({name.lower(): value for name, value in self.headers.items()})
        self.server.owner._add_record(
            self.record_class(
                method=self.command,
                path=self.path,
                headers=headers,
                body=body,
                step=step,
                attempt=attempt,
                time=time.time(),
                **extra,
            )
        )

    # -- verbs ---------------------------------------------------------------------------------

    def do_HEAD(self) -> None:
        self._record(None)
        self._send_json(200, {"ok": True}, head_only=True)

    def do_GET(self) -> None:
        self._record(None)
        payload = self._get_payload(urlsplit(self.path).path)
        if payload is None:
            self._not_found()
        else:
            self._send_json(200, payload)

    def do_POST(self) -> None:
        try:
            raw = self._read_body()
        except ValueError as exc:
            self.close_connection = True
            self._send_error_body(StepError(400, "invalid_request_error", f"mock: {exc}"))
            return
        body = self._decode(raw)
        route = urlsplit(self.path).path.rstrip("/")
        if route != self.model_path:
            self._record(body)
            self._post_other(route, raw)
            return
        if not isinstance(body, dict):
            self._record(body)
            self._send_error_body(StepError(400, "invalid_request_error", "mock: body must be a JSON object"))
            return
        requested_model = body.get("model")
        model = (
            requested_model if isinstance(requested_model, str) and requested_model else self.default_model
        )
        self._answer_turn(body, model)

    def _answer_turn(self, body: dict[str, Any], model: str) -> None:
        """Play the step a model-turn request asks for: delay, scripted error, then the reply."""
        owner = self.server.owner
        conversation = (
            owner.script.conversation_for(self._match_texts(body)) if owner.script.conversations else None
        )
        index = self._step_index(body)
        attempt = owner._next_attempt(index, conversation)
        self._record(body, step=index, attempt=attempt, conversation=conversation)
        step = owner.script.step_for(index, conversation)
        if step.delay_seconds and owner.closing.wait(step.delay_seconds):
            self.close_connection = True
            return
        if step.error is not None and (step.error.times is None or attempt < step.error.times):
            self._send_error_body(step.error)
            return
        stall = step.stall_seconds if step.stall_times is None or attempt < step.stall_times else 0.0
        self._reply(step, model, stream=body.get("stream") is True, stall=stall)

    def _reply(self, step: Step, model: str, *, stream: bool, stall: float) -> None:
        """Answer ``step`` streamed (stalling ``stall`` seconds after the first frame) or whole."""
        if not stream:
            self._send_json(200, self._complete(step, model))
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header(self.request_id_header, self._request_id())
        self.end_headers()
        first = True
        for frame in self._frames(step, model):
            self._write_chunk(frame)
            if first and stall and not self._stall(stall):
                self.close_connection = True
                return
            first = False
        self._write_chunk(b"")

    def _stall(self, seconds: float) -> bool:
        """Wait ``seconds`` mid-response; False early if the server closes or the client hangs up.

        An interrupted CLI aborts the request by closing the connection (observed.md §1.4
        "Interrupt"), which shows here as the socket turning readable at end of file.
        """
        deadline = time.monotonic() + seconds
        owner = self.server.owner
        while (remaining := deadline - time.monotonic()) > 0:
            if owner.closing.is_set():
                return False
            readable, _, _ = select.select([self.connection], [], [], min(remaining, _POLL_SECONDS))
            if readable:
                try:
                    if not self.connection.recv(1, socket.MSG_PEEK):
                        return False
                except OSError:
                    return False
                # Pipelined bytes, not a hang-up: keep stalling without spinning on select.
                owner.closing.wait(min(remaining, _POLL_SECONDS))
        return not owner.closing.is_set()


class ScriptedServer(ABC, Generic[R]):
    """Runs a scripted model server in a background thread.

    A subclass sets :attr:`handler_class`, :attr:`thread_name` and :attr:`url_path`, implements
    :meth:`_is_turn` and offers ``wait_for_requests`` over :meth:`_wait_for_requests`.

    Args:
        script: A :class:`~octipusd.testing.script.Script`, a path to a script file, or the decoded
            JSON of one (``{"steps": [...], "conversations": [...]}`` or a bare list of steps).
        host: Loopback address to bind; anything else raises ValueError.
        port: TCP port; 0 picks a free one.
        record_path: If given, every request is also appended to this file as one JSON line
            (the record's ``as_dict()``).

    Raises:
        ValueError: Malformed script, or a non-loopback ``host``.
        OSError: The script file cannot be read.
    """

    #: The request handler of the protocol.
    handler_class: ClassVar[type[ScriptedHandler]]
    #: Name of the serving thread.
    thread_name: ClassVar[str]
    #: Path appended to :attr:`root_url` to make :attr:`base_url` (``""`` or ``"/v1"``).
    url_path: ClassVar[str] = ""

    def __init__(
        self,
        script: ScriptSource,
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
        self._records: list[R] = []
        self._attempts: dict[tuple[int | None, int], int] = {}
        self._cond = threading.Condition()
        self.closing = threading.Event()
        self._httpd: ScriptedHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @abstractmethod
    def _is_turn(self, record: R) -> bool:
        """Whether ``record`` is a model-turn request (what ``message_requests`` lists)."""

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> Self:
        """Bind and start serving in a daemon thread; returns self.

        Raises:
            RuntimeError: Already started.
            OSError: The address cannot be bound.
        """
        if self._httpd is not None:
            raise RuntimeError("server already started")
        server_class: type[ScriptedHTTPServer] = ScriptedHTTPServer
        if ipaddress.ip_address(self.host).version == 6:
            server_class = type("_Server6", (ScriptedHTTPServer,), {"address_family": socket.AF_INET6})
        self._httpd = server_class((self.host, self._port), self, self.handler_class)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": _POLL_SECONDS},
            name=self.thread_name,
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

    def __enter__(self) -> Self:
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
        """``http://127.0.0.1:PORT`` (no path; an IPv6 host in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def base_url(self) -> str:
        """:attr:`root_url` followed by :attr:`url_path`: the base URL the CLI is given."""
        return f"{self.root_url}{self.url_path}"

    @property
    def open_connections(self) -> int:
        """Number of client connections currently held open (keep-alive or mid-response)."""
        httpd = self._httpd
        if httpd is None:
            return 0
        with httpd.connections_lock:
            return len(httpd.connections)

    def _next_attempt(self, index: int, conversation: int | None = None) -> int:
        """Count one more request at step ``index`` of ``conversation`` (None: the top-level
        steps); return how many came before it."""
        key = (conversation, index)
        with self._cond:
            attempt = self._attempts.get(key, 0)
            self._attempts[key] = attempt + 1
            return attempt

    # -- records -------------------------------------------------------------------------------

    def _add_record(self, record: R) -> None:
        with self._cond:
            self._records.append(record)
            if self._record_path is not None:
                with open(self._record_path, "a", encoding="utf-8") as handle:
                    handle.write(json.dumps(record.as_dict(), ensure_ascii=False) + "\n")
            self._cond.notify_all()

    @property
    def requests(self) -> list[R]:
        """A snapshot of every request received so far, in arrival order."""
        with self._cond:
            return list(self._records)

    @property
    def message_requests(self) -> list[R]:
        """A snapshot of the model-turn requests only (one per model turn), in arrival order."""
        return [record for record in self.requests if self._is_turn(record)]

    def conversation_texts(self) -> list[str]:
        """The JSON text of each model-turn request body, in arrival order (history checks)."""
        return [json.dumps(record.body) for record in self.message_requests]

    def requests_in(self, conversation: int | None) -> list[R]:
        """A snapshot of the model-turn requests that played ``conversation``, in arrival order.

        Args:
            conversation: An index into the script's ``conversations``, or None for the requests
                that played the top-level ``steps``.
        """
        return [record for record in self.message_requests if record.conversation == conversation]

    def _wait_for_requests(self, n: int, timeout: float, *, turns_only: bool) -> list[R]:
        """Block until at least ``n`` requests (model turns only if ``turns_only``) were recorded.

        Returns:
            The snapshot (of all requests, or of the model-turn requests if ``turns_only``).

        Raises:
            TimeoutError: Fewer than ``n`` requests arrived within ``timeout`` seconds.
        """

        def current() -> list[R]:
            return [r for r in self._records if self._is_turn(r)] if turns_only else list(self._records)

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


def run_cli(
    server_class: type[ScriptedServer[Any]],
    argv: Sequence[str] | None,
    *,
    prog: str,
    description: str,
) -> int:
    """The command line of a scripted server: serve until SIGTERM or SIGINT.

    It prints ``listening on <base_url>``, writes the port to ``--port-file`` once listening, and
    refuses a host that is not a loopback address.

    Args:
        server_class: The server to run.
        argv: Arguments without the program name; ``sys.argv[1:]`` when None.
        prog: Program name shown in usage.
        description: Text shown by ``--help``.

    Returns:
        Exit status: 0 after SIGTERM/SIGINT, 2 on a bad argument (non-loopback host, bad script).
    """
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--script", required=True, help="script JSON file (see octipusd.testing.script)")
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="TCP port; 0 picks a free one (default)")
    parser.add_argument("--port-file", help="write the bound port to this file once listening")
    parser.add_argument("--record", help="append every request to this file as JSON lines")
    args = parser.parse_args(argv)
    try:
        server = server_class(args.script, host=args.host, port=args.port, record_path=args.record)
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
