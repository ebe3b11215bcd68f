"""Per-worker serialization of bridge calls.

Seed 003 ("Plans, feedback and delegation"): "Bridge calls are serialized per worker so the
native executor sees one call at a time. get_cli_run_context and get_work_plan bypass that
queue, so a CLI can still read guidance while an awaited delegation holds it."

A worker can own several bridges at once (e.g. a follow-up invocation while the previous
one is still closing), so the lock lives in a registry keyed by ``worker_id`` and shared by
every bridge of that worker. Entries are reference counted: the lock exists while at least
one bridge of the worker holds a lease, and is dropped with the last one.

Locks are :class:`anyio.Lock` (FIFO), so queued calls run in arrival order. Waiting in the
queue has no deadline of its own (an awaited delegation may hold it for long): a queued call
leaves the queue without running when it is cancelled -- its caller cancelled the request, or
the run ended and its bridge closed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import anyio


@dataclass
class _Entry:
    lock: anyio.Lock
    leases: int


class WorkerQueues:
    """Registry of per-worker call locks shared by all bridges of a worker.

    Not thread-safe: use it from one event loop (the daemon's).
    """

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}

    @contextmanager
    def lease(self, worker_id: str) -> Iterator[anyio.Lock]:
        """Hold the worker's lock entry for the lifetime of a bridge.

        Args:
            worker_id: The worker whose calls are serialized.

        Yields:
            The worker's lock; every concurrent lease of the same worker yields the same object.
        """
        entry = self._entries.get(worker_id)
        if entry is None:
            entry = _Entry(lock=anyio.Lock(), leases=0)
            self._entries[worker_id] = entry
        entry.leases += 1
        try:
            yield entry.lock
        finally:
            entry.leases -= 1
            if entry.leases == 0 and self._entries.get(worker_id) is entry:
                del self._entries[worker_id]

    def lock_for(self, worker_id: str) -> anyio.Lock | None:
        """Return the worker's current lock, or None when no bridge of that worker is open."""
        entry = self._entries.get(worker_id)
        return entry.lock if entry is not None else None

    def active_workers(self) -> frozenset[str]:
        """Return the workers that currently have at least one open bridge."""
        return frozenset(self._entries)


#: The process-wide registry used by :func:`octipusd.bridge.server.open_bridge` by default.
DEFAULT_WORKER_QUEUES = WorkerQueues()
