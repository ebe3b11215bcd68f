"""Benchmark: the API's request guard (issue 14 item 10) against a plain ``json.loads``.

Every request body passes :func:`octipusd.api.limits.check_json_body` before a route sees it
(finite numbers, 64-bit integers, nesting, NUL characters, lone surrogates, string sizes). For a
few body shapes, all under :attr:`~octipusd.api.request_limits.RequestLimits.max_body_bytes`:

* **ints**: ``[1,1,...]``, ``--ints`` integers (8M: about 15 MiB);
* **objects**: ``[{"a":1},...]``, ``--objects`` small objects;
* **string**: one string of ``--string-chars`` characters (the ``max_text_chars`` limit, 16 Mi);
* **turn**: a typical 2 KiB turn body (a prompt and a few options), timed ``--turns`` times;

it prints the median wall time (ms) of the check and of ``json.loads`` of the same bytes (the
baseline, measured in the same run, alternating), and their ratio. Then, for the ints body, the
longest the event loop went without running while :class:`~octipusd.api.limits.RequestGuard`
checked it (ms; the loop also serves every live run's bridge and watchdogs): a big body is checked
in a worker thread, so only the C JSON scanner's own parse (it holds the GIL) stalls the loop.

``--scale`` multiplies every size (e.g. 0.05 to check that the benchmark runs).

Usage::

    .venv/bin/python bench/bench_request_guard.py [--scale 1] [--repeat 5]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import anyio
from summary import record

from octipusd.api.limits import API_LIMITS, RequestGuard, check_json_body

TURN = {
    "prompt": ("Refactor the parser so that errors name the field; keep the tests green. " * 28)[:2000],
    "options": {"model": "sonnet", "max_turns": 20, "permission_mode": "workspace"},
    "session": "0123456789abcdef0123456789abcdef",
}


def _median_ms(repeat: int, call: Callable[[], Any]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def _compare(repeat: int, raw: bytes, times: int = 1) -> tuple[float, float]:
    """Median ms of ``times`` checks and of ``times`` plain parses of ``raw`` (alternating blocks)."""

    def checks() -> None:
        for _ in range(times):
            check_json_body(raw)

    def parses() -> None:
        for _ in range(times):
            json.loads(raw)

    guard: list[float] = []
    plain: list[float] = []
    for _ in range(repeat):
        guard.append(_median_ms(1, checks))
        plain.append(_median_ms(1, parses))
    return statistics.median(guard), statistics.median(plain)


async def _loop_held_ms(raw: bytes) -> float:
    """The longest gap (ms) between ticks of a 1 ms ticker while the guard checks ``raw``."""
    ticks: list[float] = []
    done = anyio.Event()

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": raw, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        pass

    async def app(scope: Any, receive: Any, send: Any) -> None:
        done.set()

    async def ticker() -> None:
        while not done.is_set():
            ticks.append(time.perf_counter())
            await anyio.sleep(0.001)

    scope = {"type": "http", "path": "/v1/bench", "query_string": b"", "headers": []}
    async with anyio.create_task_group() as group:
        group.start_soon(ticker)
        await anyio.sleep(0.01)
        await RequestGuard(app)(scope, receive, send)  # type: ignore[arg-type]
    assert done.is_set(), "the guard refused the body"
    return max(b - a for a, b in itertools.pairwise(ticks)) * 1000


def main() -> None:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies every size")
    parser.add_argument("--ints", type=int, default=8_000_000)
    parser.add_argument("--objects", type=int, default=1_500_000)
    parser.add_argument("--string-chars", type=int, default=API_LIMITS.max_text_chars)
    parser.add_argument("--turns", type=int, default=2000, help="turn bodies per timed block")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    compact = (",", ":")
    shapes = {
        "ints": json.dumps([1] * int(args.ints * args.scale), separators=compact).encode(),
        "objects": json.dumps([{"a": 1}] * int(args.objects * args.scale), separators=compact).encode(),
        "string": json.dumps({"text": "x" * int(args.string_chars * args.scale)}).encode(),
    }
    print(f"{'shape':<8} {'body':>10} {'guard ms':>10} {'loads ms':>10} {'ratio':>7}")
    for name, raw in shapes.items():
        assert len(raw) <= API_LIMITS.max_body_bytes, (name, len(raw))
        guard_ms, plain_ms = _compare(args.repeat, raw)
        size = f"{len(raw) / 2**20:.1f} MiB"
        print(f"{name:<8} {size:>10} {guard_ms:>10.1f} {plain_ms:>10.1f} {guard_ms / plain_ms:>7.2f}")
        record(f"request guard / json.loads ({name}, {size})", f"{guard_ms / plain_ms:.2f}")
    turn = json.dumps(TURN).encode()
    turns = max(1, int(args.turns * args.scale))
    guard_ms, plain_ms = _compare(args.repeat, turn, turns)
    per_turn_us = guard_ms * 1000 / turns
    print(
        f"{'turn':<8} {len(turn):>8} B {per_turn_us:>8.1f} us {plain_ms * 1000 / turns:>7.1f} us "
        f"{guard_ms / plain_ms:>7.2f}"
    )
    record(f"request guard / json.loads (turn, {len(turn)} B)", f"{guard_ms / plain_ms:.2f}")
    held = anyio.run(_loop_held_ms, shapes["ints"])
    print(f"event loop held at most {held:.1f} ms while the guard checked the ints body")
    record(f"event loop held by the guard (ints, {len(shapes['ints']) / 2**20:.1f} MiB)", f"{held:.1f} ms")


if __name__ == "__main__":
    main()
