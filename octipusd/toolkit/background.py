"""A run's background shell commands (seed 003 "Host services for gate commands": ``shell__run_background``).

The tools (:mod:`octipusd.tools.shell_background`) validate a call and confine its command as
``shell__run`` does, then hand a :class:`BackgroundStart` to the run's :class:`BackgroundJobs`
(:meth:`~octipusd.toolkit.ToolHost.background_jobs`); the runtime keeps the processes, their output
and their limits, and ends every one of them with the run. Plain data and a protocol: the processes
are the runtime's (:mod:`octipusd.runtime.background`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from octipusd.toolkit.secrets import Masker

__all__ = ["BackgroundJobs", "BackgroundStart"]


@dataclass(frozen=True)
class BackgroundStart:
    """One validated, confined background command, ready to spawn.

    Attributes:
        command: The command line (as the call gave it; shown in the job's listing).
        argv: The whole argv: the sandbox runner's (empty when unconfined), then ``/bin/sh -c command``.
        cwd: Its working directory, inside the run's workspace.
        env: Its complete environment (vault values substituted, the run's marker set).
        lifetime_seconds: How long it may run before it is stopped (seconds).
        masker: The vault values its ``env`` carries: masked in every output read later.
    """

    command: str
    argv: tuple[str, ...]
    cwd: Path
    env: Mapping[str, str]
    lifetime_seconds: float
    masker: Masker


class BackgroundJobs(Protocol):
    """The background commands of one run; all of them end when the run ends.

    Results are JSON objects for the agent; a job id names a job of this run only.
    """

    async def start(self, job: BackgroundStart) -> dict[str, Any]:
        """Spawn ``job`` and return ``{"id", "command", "running": true, ...}``.

        Raises:
            ConflictError: the run already has its limit of running jobs, or it is ending.
            OSError: the command could not be started (nothing ran).
        """
        ...

    async def read(self, job_id: str, since: int | None, wait_seconds: float) -> dict[str, Any]:
        """The job's output from character ``since`` (None: from the oldest kept), its state and
        exit code; waits up to ``wait_seconds`` for new output or the job's end.

        Raises:
            InvalidRequestError: no job of this run has that id.
        """
        ...

    async def stop(self, job_id: str) -> dict[str, Any]:
        """Stop the job and everything it started (SIGTERM, then SIGKILL); its final state.

        Raises:
            InvalidRequestError: no job of this run has that id.
        """
        ...
