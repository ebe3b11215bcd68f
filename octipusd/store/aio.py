"""Calling the synchronous :class:`~octipusd.store.repository.Store` from async code.

The store is synchronous (SQLAlchemy sessions); the daemon runs its calls in anyio's worker
threads so the event loop never blocks on the database.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import anyio.to_thread

P = ParamSpec("P")
T = TypeVar("T")


async def in_thread(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run ``fn(*args, **kwargs)`` in a worker thread and return its result (errors propagate)."""
    return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))
