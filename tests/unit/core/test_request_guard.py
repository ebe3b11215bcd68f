"""The request guard's JSON check (issue 14 item 10) at its boundaries, and where it runs.

The e2e sweep (``tests/e2e/test_bad_input.py``) sends every class of bad input to every route;
these pin the limits exactly (the last value allowed, the first refused), the messages naming
the field, and that a big body is checked off the event loop (which serves every live run).
"""

from __future__ import annotations

import json
import time
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from octipusd.api.limits import API_LIMITS, RequestGuard, RequestLimits, check_json_body
from octipusd.errors import InvalidRequestError


def refusal(raw: str | bytes, limits: RequestLimits = API_LIMITS) -> str:
    with pytest.raises(InvalidRequestError) as refused:
        check_json_body(raw.encode() if isinstance(raw, str) else raw, limits)
    return refused.value.message


def nested(levels: int) -> str:
    return '{"a": ' * (levels - 1) + "[]" + "}" * (levels - 1)


def test_the_boundaries_of_each_limit() -> None:
    top = API_LIMITS.max_int
    check_json_body(json.dumps({"n": [top, -top, 1.7e308, True, None]}).encode())
    assert (
        refusal(json.dumps({"n": [0, top + 1]})) == f"n[1]: {top + 1} is outside the integer range (±{top})"
    )
    assert refusal(json.dumps({"n": -top - 1})).startswith("n: -9223372036854775808 is outside")
    check_json_body(nested(API_LIMITS.max_json_depth).encode())
    assert refusal(nested(API_LIMITS.max_json_depth + 1)).endswith(": nested deeper than 64 levels")
    small = RequestLimits(max_text_chars=3)
    check_json_body(b'{"abc": "xyz"}', small)
    assert refusal('{"t": ["abc", "abcd"]}', small).startswith("t[1]: a string of 4 characters is over")
    assert refusal('{"ok": 1, "abcd": 1}', small).startswith("body: a key a string of 4 characters")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ('{"a": {"b": [1, NaN]}}', "a.b[1]: NaN is not a finite number"),
        ('{"a": -Infinity}', "a: -Infinity is not a finite number"),
        ('{"ttl_seconds": 1e999}', "ttl_seconds: a number out of the float range (it reads as inf)"),
        ('{"x": [-1e999]}', "x[0]: a number out of the float range (it reads as -inf)"),
        ('{"max_uses": ' + "9" * 5000 + "}", "max_uses: an integer of 5000 digits is outside"),
        ('{"name": "a\\u0000b"}', "name: contains a NUL character"),
        ('{"s": ["ok", "\\ud800"]}', "s[1]: contains a lone UTF-16 surrogate"),
        ('{"arguments": {"k\\u0000": 1}}', "arguments: a key contains a NUL character"),
        ('{"arguments": {"\\udfff": 1}}', "arguments: a key contains a lone UTF-16 surrogate"),
        ("NaN", "body: NaN is not a finite number"),
        ('"\\u0000"', "body: contains a NUL character"),
        ('{"arguments": ' + "[" * 100_000 + "]" * 100_000 + "}", "arguments[0][0][0]...: nested deeper"),
    ],
)
def test_a_refusal_names_the_field(raw: str, message: str) -> None:
    assert refusal(raw).startswith(message), refusal(raw)


@pytest.mark.parametrize(
    "raw",
    [b"not json", b"\xff\xfe", b'{"a": 1', b'{"n": ' + b"9" * 5000 + b", oops}", b"[]", b"{}"],
)
def test_what_is_not_json_or_is_fine_passes(raw: bytes) -> None:
    check_json_body(raw)


def test_valid_text_passes() -> None:
    check_json_body(json.dumps({"t": "é \U0001f600 \u2028", "k\u00e9": [{"": ""}]}).encode())
    check_json_body(json.dumps({"t": "é \U0001f600"}, ensure_ascii=False).encode())


async def _through_guard(body: bytes, limits: RequestLimits) -> tuple[list[dict[str, Any]], int]:
    """Send ``body`` through a guard while the loop ticks; return what was sent and the ticks seen
    between the body's delivery and the app's call (0 when the check held the loop)."""
    sent: list[dict[str, Any]] = []
    marks: dict[str, float] = {}
    ticks: list[float] = []

    async def receive() -> dict[str, Any]:
        marks["delivered"] = time.perf_counter()
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(dict(message))

    async def app(scope: Any, receive: Any, send: Any) -> None:
        marks["checked"] = time.perf_counter()
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def ticker() -> None:
        while True:
            ticks.append(time.perf_counter())
            await anyio.sleep(0.001)

    scope = {"type": "http", "path": "/v1/x", "query_string": b"", "headers": []}
    async with anyio.create_task_group() as group:
        group.start_soon(ticker)
        await anyio.lowlevel.checkpoint()
        await RequestGuard(app, limits)(scope, receive, send)  # type: ignore[arg-type]
        group.cancel_scope.cancel()
    end = marks.get("checked", time.perf_counter())
    return sent, sum(1 for t in ticks if marks["delivered"] < t < end)


@pytest.mark.anyio
async def test_a_big_body_is_checked_off_the_event_loop() -> None:
    body = json.dumps([{}] * 500_000 + [{"ok": 1}]).encode()  # about 3 MiB: a walk of some 0.1 s
    assert len(body) > API_LIMITS.max_inline_check_bytes
    sent, ticks = await _through_guard(body, API_LIMITS)
    assert sent[0]["status"] == 204 and ticks > 0, ticks
    inline = RequestLimits(max_inline_check_bytes=len(body))
    sent, ticks = await _through_guard(body, inline)
    assert sent[0]["status"] == 204 and ticks == 0, ticks  # the same body inline holds the loop


@pytest.mark.anyio
async def test_a_big_bad_body_is_refused_from_the_worker_thread() -> None:
    body = json.dumps({"pad": "x" * API_LIMITS.max_inline_check_bytes, "n": float("nan")}).encode()
    sent, _ = await _through_guard(body, API_LIMITS)
    assert sent[0]["status"] == 400, sent
    assert json.loads(sent[1]["body"]) == {
        "code": "invalid_request",
        "message": "n: NaN is not a finite number; JSON numbers must be finite",
    }
