"""What one API request may carry, and the check every request passes before a route sees it.

Issue 14 item 10: bad input never breaks the daemon. Every bound is named once in
:class:`RequestLimits` (:data:`API_LIMITS` is the daemon's); the request models take their field
bounds from it, and :class:`RequestGuard` (an ASGI middleware, the one home of the body parse
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
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import parse_qsl

from fastapi import Query

from octipusd.errors import InvalidRequestError

__all__ = ["API_LIMITS", "After", "Limit", "RequestGuard", "RequestLimits", "check_json_body"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass(frozen=True)
class RequestLimits:
    """Bounds of one API request (sizes in bytes or characters, as named).

    Attributes:
        max_body_bytes: Largest request body (bytes); a prompt sent from a file is the big one.
        max_text_chars: Longest string anywhere in a JSON body: prompts, guidance, notes, tool
            arguments (characters).
        max_name_chars: Longest name or id: a body's names, ids, tool ids and users, every path
            segment and every query value (characters; four bytes each at most stays under
            PostgreSQL's index row size).
        max_path_chars: Longest file-system path in a body (``workspace``; characters, Linux's
            ``PATH_MAX``).
        max_json_depth: Deepest nesting of objects and arrays in a JSON body (levels).
        max_int: Largest integer magnitude in a JSON body (the 64-bit range of the store's
            ``BIGINT`` columns).
        max_page_records: Largest ``limit`` of a list route (records).
        max_seq: Largest sequence number an ``after`` parameter may name (a ``BIGINT`` column).
        max_grant_uses: Largest ``max_uses`` of a grant (the column is a 32-bit ``INTEGER``).
        max_ttl_seconds: Longest ``ttl_seconds`` of a grant (ten years, in seconds).
    """

    max_body_bytes: int = 32 * 1024 * 1024
    max_text_chars: int = 16 * 1024 * 1024
    max_name_chars: int = 256
    max_path_chars: int = 4096
    max_json_depth: int = 64
    max_int: int = 2**63 - 1
    max_page_records: int = 100_000
    max_seq: int = 2**63 - 1
    max_grant_uses: int = 2**31 - 1
    max_ttl_seconds: float = 10 * 365 * 86400.0


#: The daemon's request limits.
API_LIMITS = RequestLimits()

#: A list route's ``limit`` query parameter (records).
Limit = Annotated[int, Query(ge=1, le=API_LIMITS.max_page_records)]
#: An ``after`` query parameter (a sequence number; 0: from the start).
After = Annotated[int, Query(ge=0, le=API_LIMITS.max_seq)]

#: A lone UTF-16 surrogate: valid in a JSON string escape, not encodable, so never storable.
_SURROGATE = re.compile("[\ud800-\udfff]")


class _Refused:
    """What the JSON parse hooks put in place of a number that is refused (found by the walk)."""

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
    if _SURROGATE.search(value):
        return "contains a lone UTF-16 surrogate (not valid Unicode), which cannot be stored"
    return None


def _parse(raw: bytes, limits: RequestLimits) -> Any:
    """``raw`` as JSON with refused numbers replaced by :class:`_Refused` (ValueError: not JSON)."""

    def parse_float(text: str) -> float | _Refused:
        value = float(text)
        return value if math.isfinite(value) else _Refused(f"{text} is not a finite number")

    def parse_int(text: str) -> int | _Refused:
        digits = len(text.lstrip("-"))
        if digits > len(str(limits.max_int)) or abs(value := int(text)) > limits.max_int:
            shown = text if len(text) <= 40 else f"an integer of {digits} digits"
            return _Refused(f"{shown} is outside the integer range (±{limits.max_int})")
        return value

    def parse_constant(text: str) -> _Refused:
        return _Refused(f"{text} is not a finite number; JSON numbers must be finite")

    return json.loads(raw, parse_float=parse_float, parse_int=parse_int, parse_constant=parse_constant)


#: The tokens that matter for nesting: strings (keys among them) and structural characters.
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{},:]')


def _too_deep_at(text: str, max_depth: int) -> str:
    """Where (``a.b[0]``) a JSON text's nesting first goes past ``max_depth`` levels."""
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
    except (ValueError, UnicodeDecodeError):
        return  # not JSON: the route's own parsing says so
    stack: list[tuple[Any, list[str | int]]] = [(data, [])]
    while stack:
        value, path = stack.pop()
        problem: str | None = None
        if isinstance(value, _Refused):
            problem = value.problem
        elif isinstance(value, str):
            problem = _string_problem(value, limits)
        elif isinstance(value, dict | list):
            if len(path) >= limits.max_json_depth:
                problem = f"nested deeper than {limits.max_json_depth} levels"
            elif isinstance(value, dict):
                for key, item in value.items():
                    key_problem = _string_problem(key, limits)
                    if key_problem is not None:
                        raise InvalidRequestError(f"{_location(path)}: a key {key_problem}")
                    stack.append((item, [*path, key]))
            else:
                stack.extend((item, [*path, index]) for index, item in enumerate(value))
        if problem is not None:
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

    The body is read whole (it is bounded), checked, and handed to the app unchanged.

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
            if body.strip():
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
