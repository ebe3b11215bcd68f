"""Run work in threads released together, to probe the store's atomicity."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from octipusd.errors import OctipusError

T = TypeVar("T")


def race(count: int, work: Callable[[int], T]) -> list[T | BaseException]:
    """Run ``work(i)`` for i in range(count) in threads released together by a barrier.

    Returns:
        Each call's result, or the exception it raised, in the order of ``i``.
    """
    barrier = threading.Barrier(count)

    def start(i: int) -> T | BaseException:
        barrier.wait(timeout=10)
        try:
            return work(i)
        except OctipusError as exc:  # collected and checked by the caller; anything else fails the test
            return exc

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(start, range(count)))
