"""The orphan reaper of child worktrees, in the daemon (seed 003 "Optional git worktree per coding
child", FACTS.md §1 "Reaper"; issue 15 item 3).

While ``swarm.worktreeIsolation`` is on, :class:`OrphanReaper` sweeps the worktrees root at
start-up and then every ``swarm.orphanReaperIntervalMs``: each recorded worktree is decided by
:func:`octipus_worktrees.reap_one` (removed only when clean, merged and ownerless; a kept branch's
record dropped only once git proves it merged or gone; every other one reported) in a worker
thread, one worktree per thread call, since git blocks; the event loop never waits on git. Each
report is logged, and the last sweep is kept for ``GET /v1/health``.
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime

import anyio
import anyio.abc
import anyio.to_thread
from octipus_worktrees import MIN_AGE_S, ReapReport, WorktreeManager, reap_one

from octipusd.errors import OctipusError, describe_error

__all__ = ["OrphanReaper", "ReaperSweep"]

log = logging.getLogger("octipusd.reaper")


@dataclass(frozen=True)
class ReaperSweep:
    """One sweep of the worktrees root.

    Attributes:
        started_at: When it started.
        ended_at: When it ended (None while it runs).
        reports: One report per worktree looked at, by id.
        error: Why the sweep stopped early (the root could not be read...), or None.
    """

    started_at: datetime
    ended_at: datetime | None
    reports: tuple[ReapReport, ...]
    error: str | None = None


class OrphanReaper:
    """Sweeps one :class:`~octipus_worktrees.WorktreeManager`'s root now and then.

    Args:
        manager: The daemon's worktree manager.
        interval_s: Seconds between the end of a sweep and the start of the next
            (``swarm.orphanReaperIntervalMs`` / 1000).
        min_age_s: Seconds a worktree must have existed before it is considered.

    Attributes:
        last: The last finished sweep, or None before the first one ends.
        sweeps: How many sweeps have finished.
    """

    def __init__(self, manager: WorktreeManager, interval_s: float, min_age_s: float = MIN_AGE_S) -> None:
        self.manager = manager
        self.interval_s = interval_s
        self.min_age_s = min_age_s
        self.last: ReaperSweep | None = None
        self.sweeps = 0

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Sweep at once, then every :attr:`interval_s`, until cancelled (a sweep in progress ends
        after the worktree it is on)."""
        log.info(
            "worktree reaper: sweeping %s at start-up and every %g s", self.manager.root, self.interval_s
        )
        task_status.started()
        while True:
            await self.sweep()
            await anyio.sleep(self.interval_s)

    async def sweep(self) -> ReaperSweep:
        """Look at every recorded worktree once (each in a worker thread), log each report and
        keep the sweep as :attr:`last`.

        A failure to read the root, or one that is not git's (a file that cannot be written),
        ends the sweep early; it is logged and kept as the sweep's ``error``, never raised.
        """
        started = datetime.now(UTC)
        reports: list[ReapReport] = []
        error: str | None = None
        try:
            infos = await anyio.to_thread.run_sync(self.manager.list)
            now = time.time()
            for info in infos:
                report = await anyio.to_thread.run_sync(
                    functools.partial(reap_one, self.manager, info, now, self.min_age_s)
                )
                if report is not None:
                    reports.append(report)
                    _log_report(report)
        except (OctipusError, OSError) as exc:
            error = describe_error(exc)
            log.error("worktree reaper: the sweep of %s stopped: %s", self.manager.root, error)
        sweep = ReaperSweep(started, datetime.now(UTC), tuple(reports), error)
        self.last = sweep
        self.sweeps += 1
        return sweep


def _log_report(report: ReapReport) -> None:
    log.info("worktree reaper: %s %s (%s): %s", report.id, report.action, report.path, report.reason)
