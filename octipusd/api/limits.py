"""What one API request may carry, and the check every request passes before a route sees it.

Issue 14 item 10: bad input never breaks the daemon. Every bound is named once in
:class:`~octipusd.api.request_limits.RequestLimits` (:data:`API_LIMITS` is the daemon's; both
re-exported here), or here when it is a column's range, read from the column's SQL type
(:func:`~octipusd.store.int_columns.int_column_max`: an ``INTEGER`` column holds 32 bits on
PostgreSQL, issue 26 item 6); the request models and the routes' parameters take their bounds
from them, so the schema shows them, and :class:`RequestGuard` (an ASGI middleware, the one home of the body parse
hook) refuses, before any route runs:

* a body over :attr:`RequestLimits.max_body_bytes`;
* in a JSON body: a non-finite number (``NaN``, ``Infinity``, ``1e999``), an integer outside the
  64-bit range of the store's columns, nesting deeper than :attr:`RequestLimits.max_json_depth`,
  a string (or key) longer than :attr:`RequestLimits.max_text_chars`, holding a NUL character or
  a lone surrogate (neither can be stored);
* a path segment or query value longer than :attr:`RequestLimits.max_name_chars`, or holding a
  NUL character.

Each refusal is a 400 ``invalid_request`` whose message names the field
(``remember.ttl_seconds``, ``query parameter limit``...). A body that is not JSON at all passes
through, so the route answers as before (FastAPI's 422, or a 400 from a route that parses by
hand).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from typing import Annotated, Any, Final
from urllib.parse import parse_qsl

import anyio.to_thread
from fastapi import Header, Query

from octipusd.api.request_limits import API_LIMITS, RequestLimits
from octipusd.errors import InvalidRequestError
from octipusd.store.int_columns import int_column_max
from octipusd.store.models import PermissionGrantRow, RunEventRow, SessionMessageRow

__all__ = [
    "API_LIMITS",
    "MAX_EVENT_SEQ",
    "MAX_GRANT_USES",
    "MAX_MESSAGE_SEQ",
    "After",
    "LastEventId",
    "Limit",
    "MessageAfter",
    "RequestGuard",
    "RequestLimits",
    "check_json_body",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


#: The largest sequence number of a run's event (``run_events.seq``).
MAX_EVENT_SEQ: Final = int_column_max(RunEventRow.seq)
#: The largest sequence number of a session's message (``session_messages.seq``).
MAX_MESSAGE_SEQ: Final = int_column_max(SessionMessageRow.seq)
#: The largest ``max_uses`` of a grant (``permission_grants.max_uses``).
MAX_GRANT_USES: Final = int_column_max(PermissionGrantRow.max_uses)

#: A list route's ``limit`` query parameter (records).
Limit = Annotated[int, Query(ge=1, le=API_LIMITS.max_page_records)]
#: A run's events' ``after`` query parameter (an event's ``seq``; 0: from the start).
After = Annotated[int, Query(ge=0, le=MAX_EVENT_SEQ)]
#: A run's stream's ``Last-Event-ID`` header (the ``seq`` of the last event the client has; it wins
#: over ``after``).
LastEventId = Annotated[int | None, Header(ge=0, le=MAX_EVENT_SEQ)]
#: A session's messages' ``after`` query parameter (a message's ``seq``; 0: from the start).
MessageAfter = Annotated[int, Query(ge=0, le=MAX_MESSAGE_SEQ)]

#: A lone UTF-16 surrogate: valid in a JSON string escape, not encodable, so never storable.
_SURROGATE = re.compile("[\ud800-\udfff]")


class _Refused:
    """What a JSON parse hook puts in place of a value that is refused (found by the walk)."""

    __slots__ = ("problem",)

    def __init__(self, problem: str) -> None:
        self.problem = problem


def _location(path: list[str | int], shown: int = 4) -> str:
    """``a.b[0]`` for a path; a deep one shows its first ``shown`` parts then ``...``."""
    text = ""
    for part in path[:shown]:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return (text + ("..." if len(path) > shown else "")) or "body"


def _string_problem(value: str, limits: RequestLimits) -> str | None:
    if len(value) > limits.max_text_chars:
        return f"a string of {len(value)} characters is over the limit of {limits.max_text_chars}"
    if "\x00" in value:
        return "contains a NUL character, which cannot be stored"
    if not value.isascii() and _SURROGATE.search(value):
        return "contains a lone UTF-16 surrogate (not valid Unicode), which cannot be stored"
    return None


def _constant(text: str) -> _Refused:
    """The parse hook for ``NaN``, ``Infinity`` and ``-Infinity`` (only those literals reach it)."""
    return _Refused(f"{text} is not a finite number; JSON numbers must be finite")


def _parse(raw: bytes, limits: RequestLimits) -> Any:
    """``raw`` as JSON, the non-finite literals replaced by :class:`_Refused` (ValueError: not JSON).

    Numbers are parsed by the C scanner without a Python hook (the walk checks their range), except
    when an integer has more digits than Python converts (``sys.get_int_max_str_digits``): then the
    body is parsed again with an integer hook that refuses every integer longer than the range.
    """
    try:
        return json.loads(raw, parse_constant=_constant)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise
    except ValueError:  # an integer past the digit limit of int(): the slow parse, to name it
        pass
    width = len(str(limits.max_int))

    def parse_int(text: str) -> int | _Refused:
        digits = len(text.lstrip("-"))
        if digits > width:
            return _Refused(f"an integer of {digits} digits is outside the integer range (±{limits.max_int})")
        return int(text)

    return json.loads(raw, parse_int=parse_int, parse_constant=_constant)


def _number_problem(value: int | float, limits: RequestLimits) -> str | None:
    if isinstance(value, float):
        return None if math.isfinite(value) else f"a number out of the float range (it reads as {value})"
    if -limits.max_int <= value <= limits.max_int:
        return None
    shown = str(value) if value.bit_length() <= 128 else f"an integer of {len(str(abs(value)))} digits"
    return f"{shown} is outside the integer range (±{limits.max_int})"


def _keys_problem(keys: dict[str, Any], limits: RequestLimits) -> str | None:
    """What is wrong with a key of an object, if anything."""
    for key in keys:
        problem = _string_problem(key, limits)
        if problem is not None:
            return f"a key {problem}"
    return None


def _first_problem(data: Any, limits: RequestLimits) -> tuple[list[str | int], str] | None:
    """Where (the path) and what the first refused value of parsed JSON is, or None.

    One pass without recursion: a stack of the open containers' iterators, the path of keys kept
    beside it, so a value costs a type test and a comparison or two (an object's keys are joined
    and tested at once); a message is built only for a problem found.
    """
    max_int, max_text, max_depth = limits.max_int, limits.max_text_chars, limits.max_json_depth
    path: list[str | int] = []  # the keys of the open containers (the first: the root's, dropped)
    stack: list[Iterator[tuple[str | int, Any]]] = [enumerate([data])]
    while stack:
        for key, value in stack[-1]:
            kind = type(value)
            if kind is str:
                suspect = len(value) > max_text or "\x00" in value or not value.isascii()
                if suspect and (problem := _string_problem(value, limits)) is not None:
                    return [*path, key][1:], problem
            elif kind is int:
                if value > max_int or value < -max_int:
                    return [*path, key][1:], str(_number_problem(value, limits))
            elif kind is float:
                if not math.isfinite(value):
                    return [*path, key][1:], str(_number_problem(value, limits))
            elif kind is dict or kind is list:
                if len(stack) > max_depth:
                    return [*path, key][1:], f"nested deeper than {max_depth} levels"
                if not value:
                    continue
                path.append(key)
                if kind is list:
                    stack.append(enumerate(value))
                    break
                joined = "".join(value)  # the keys, tested at once
                suspect = len(joined) > max_text or "\x00" in joined or not joined.isascii()
                if suspect and (problem := _keys_problem(value, limits)) is not None:
                    return path[1:], problem
                stack.append(iter(value.items()))
                break
            elif kind is _Refused:
                return [*path, key][1:], value.problem
        else:  # this container is done
            stack.pop()
            if path:  # empty once the root is done
                path.pop()
    return None


#: The tokens that matter for nesting: strings (keys among them) and structural characters.
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},:]')


def _too_deep_at(text: str, max_depth: int) -> str:
    """Where (``a.b[0]``) a JSON text's nesting first goes past ``max_depth`` levels (no recursion)."""
    path: list[str | int] = []
    key: str | int | None = None  # the key or index of the next value in the innermost container
    kinds: list[str] = []
    for token in _TOKENS.finditer(text):
        value = token.group()
        if value in "[{":
            if len(kinds) >= max_depth:
                break
            if kinds:
                path.append(key if key is not None else 0)
            kinds.append(value)
            key = 0 if value == "[" else None
        elif value in "]}":
            kinds.pop() if kinds else None
            key = path.pop() if path else None
        elif value == "," and kinds and kinds[-1] == "[" and isinstance(key, int):
            key += 1
        elif value.startswith('"') and kinds and kinds[-1] == "{" and text[token.end() :].lstrip()[:1] == ":":
            key = json.loads(value)
    return _location(path)


def check_json_body(raw: bytes, limits: RequestLimits = API_LIMITS) -> None:
    """Refuse a JSON body that breaks a limit; a body that is not JSON is left to the route.

    CPU-bound (about twice a plain ``json.loads`` of the body, see ``bench/bench_request_guard.py``):
    :class:`RequestGuard` runs it in a worker thread for a body over
    :attr:`RequestLimits.max_inline_check_bytes`.

    Args:
        raw: The request body.
        limits: The bounds.

    Raises:
        InvalidRequestError: A non-finite number, an integer out of range, nesting deeper than
            ``max_json_depth``, or a string or key that is too long or holds a NUL character or a
            lone surrogate; the message names the field.
    """
    try:
        data = _parse(raw, limits)
    except RecursionError:  # deeper than the parser goes: find where it passed the limit
        where = _too_deep_at(raw.decode("utf-8", errors="replace"), limits.max_json_depth)
        raise InvalidRequestError(f"{where}: nested deeper than {limits.max_json_depth} levels") from None
    except ValueError:  # JSONDecodeError and UnicodeDecodeError among them
        return  # not JSON: the route's own parsing says so
    found = _first_problem(data, limits)
    if found is not None:
        path, problem = found
        raise InvalidRequestError(f"{_location(path)}: {problem}")


def _check_target(scope: Scope, limits: RequestLimits) -> None:
    """Refuse a path segment or query value that is too long or holds a NUL character."""
    for segment in str(scope.get("path", "")).split("/"):
        if "\x00" in segment:
            raise InvalidRequestError(f"path segment {segment[:40]!r}: contains a NUL character")
        if len(segment) > limits.max_name_chars:
            raise InvalidRequestError(
                f"path segment of {len(segment)} characters: over the limit of {limits.max_name_chars}"
            )
    query = bytes(scope.get("query_string", b"")).decode("utf-8", errors="replace")
    for name, value in parse_qsl(query, keep_blank_values=True):
        if "\x00" in name or "\x00" in value:
            raise InvalidRequestError(f"query parameter {name[:40]!r}: contains a NUL character")
        if len(value) > limits.max_name_chars:
            raise InvalidRequestError(
                f"query parameter {name[:40]}: {len(value)} characters, over the limit of {limits.max_name_chars}"
            )


class RequestGuard:
    """ASGI middleware: the checks of the module docstring on every HTTP request.

    The body is read whole (it is bounded), checked, and handed to the app unchanged. A body over
    :attr:`RequestLimits.max_inline_check_bytes` is checked in a worker thread: the event loop
    also serves every live run's bridge and watchdogs. (The C JSON scanner holds the GIL while it
    parses, about 40 ms per MiB; the walk after it yields to the loop.)

    Args:
        app: The application.
        limits: The bounds.
    """

    def __init__(self, app: ASGIApp, limits: RequestLimits = API_LIMITS) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            _check_target(scope, self.limits)
            body = await self._read_body(scope, receive)
            if len(body) > self.limits.max_inline_check_bytes:  # CPU-bound: not on the runs' loop
                await anyio.to_thread.run_sync(check_json_body, body, self.limits)
            elif body.strip():
                check_json_body(body, self.limits)
        except InvalidRequestError as exc:
            await _answer(send, exc.http_status, exc.code, exc.message)
            return
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: the disconnect a streaming route waits for

        await self.app(scope, replay, send)

    async def _read_body(self, scope: Scope, receive: Receive) -> bytes:
        limit = self.limits.max_body_bytes
        for name, value in scope.get("headers", ()):
            if name == b"content-length" and value.isdigit() and int(value) > limit:
                raise InvalidRequestError(
                    f"body: the request body of {int(value)} bytes is over the limit of {limit} bytes"
                )
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
            chunk = bytes(message.get("body", b""))
            size += len(chunk)
            if size > limit:
                raise InvalidRequestError(f"body: the request body is over the limit of {limit} bytes")
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)


async def _answer(send: Send, status: int, code: str, message: str) -> None:
    body = json.dumps({"code": code, "message": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
