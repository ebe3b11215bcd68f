"""A run's background shell commands (``shell__run_background``): :class:`RunJobs`, :func:`open_jobs`.

A job is started like a vendor CLI (:class:`~octipusd.runner.process.VendorProcess`): in its own
session, in its own cage of the daemon's process containment (a run cgroup, or the subreaper's walk
of its tree), with the run's marker in its environment. Its stdout and stderr are read as they come
into one output, masked (the vault values its ``env`` carries) and kept up to
:attr:`BackgroundLimits.output_kept_chars` (the oldest characters are dropped and counted).

A job ends when its shell exits (what it left running then is stopped with it: a job's processes
never outlive it), when ``shell__stop_background`` stops it, when its lifetime passes, or when the
run ends: leaving the run's :func:`open_jobs` block stops every job still running (SIGTERM to its
group and cage, SIGKILL after :attr:`BackgroundLimits.stop_grace_seconds`, the cage released),
shielded and bounded, before the run's status is final. A daemon killed meanwhile leaves them to
the recovery's reaper, which finds the run's marker; a sandboxed job also dies with its runner,
which dies with the daemon (``--die-with-parent``).
"""

from __future__ import annotations

import codecs
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel

from octipusd.adapter import LaunchSpec, StdinMode
from octipusd.errors import ConflictError, InvalidRequestError
from octipusd.runner.containment import Containment
from octipusd.runner.process import VendorProcess
from octipusd.toolkit import BackgroundStart
from octipusd.toolkit.secrets import Masker

__all__ = ["BackgroundLimits", "RunJobs", "open_jobs"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BackgroundLimits:
    """Bounds of one run's background commands.

    Attributes:
        max_running: Background commands of one run running at once; a start past it is refused.
        max_kept: Jobs one run remembers (running or ended); past it the oldest ended one is forgotten.
        output_kept_chars: Characters of output kept per job (the newest; older ones are dropped).
        read_max_chars: Characters of output one read returns at most.
        stop_grace_seconds: Seconds between SIGTERM and SIGKILL to a job's group and cage.
        stop_wait_seconds: Bound of waiting for one stopped job to be gone (seconds).
        close_timeout_seconds: Bound of stopping every job when the run ends (seconds, shielded).
    """

    max_running: int = 4
    max_kept: int = 16
    output_kept_chars: int = 256 * 1024
    read_max_chars: int = 64 * 1024
    stop_grace_seconds: float = 2.0
    stop_wait_seconds: float = 30.0
    close_timeout_seconds: float = 30.0


class _Output:
    """A job's output: stdout and stderr as they come, decoded, masked, the newest characters kept."""

    def __init__(self, masker: Masker, limit: int) -> None:
        self._masker = masker
        self._limit = limit
        self._decoders = {name: codecs.getincrementaldecoder("utf-8")("replace") for name in ("out", "err")}
        self._held = ""  # what may still be the beginning of a vault value
        self.text = ""
        self.start = 0  # the offset of ``text[0]`` in the whole output
        self.changed = anyio.Event()

    @property
    def end(self) -> int:
        return self.start + len(self.text)

    def add(self, stream: str, chunk: bytes) -> None:
        settled, self._held = self._masker.mask_settled(self._held + self._decoders[stream].decode(chunk))
        self._keep(settled)

    def flush(self) -> None:
        tail = "".join(decoder.decode(b"", final=True) for decoder in self._decoders.values())
        self._keep(self._masker.mask(self._held + tail))
        self._held = ""
        self.changed.set()

    def _keep(self, text: str) -> None:
        if not text:
            return
        self.text += text
        over = len(self.text) - self._limit
        if over > 0:
            self.text = self.text[over:]
            self.start += over
        self.changed.set()
        self.changed = anyio.Event()


@dataclass(eq=False)
class _Job:
    """One background command of the run."""

    id: str
    command: str
    process: VendorProcess
    output: _Output
    lifetime: float
    started: float = field(default_factory=time.monotonic)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    ended: anyio.Event = field(default_factory=anyio.Event)
    ended_at: float | None = None
    #: Why it ended when Octipus ended it (stopped, its lifetime, the run's end); None: it exited.
    ended_by: str | None = None

    @property
    def running(self) -> bool:
        return not self.ended.is_set()

    def state(self) -> dict[str, Any]:
        """``{"id", "command", "running", "exit_code", "ended_by", "duration_seconds"}``."""
        end = self.ended_at if self.ended_at is not None else time.monotonic()
        return {
            "id": self.id,
            "command": self.command,
            "running": self.running,
            "exit_code": None if self.running else self.process.returncode,
            "ended_by": self.ended_by,
            "duration_seconds": round(end - self.started, 3),
        }


class RunJobs:
    """The background commands of one run (:class:`~octipusd.toolkit.BackgroundJobs`); made by
    :func:`open_jobs`, which ends them all with the run."""

    def __init__(
        self, run_id: str, containment: Containment, tg: anyio.abc.TaskGroup, limits: BackgroundLimits
    ) -> None:
        self._run_id = run_id
        self._containment = containment
        self._tg = tg
        self.limits = limits
        self._jobs: dict[str, _Job] = {}
        self._count = 0
        self._closed: str | None = None

    async def start(self, job: BackgroundStart) -> dict[str, Any]:
        """Spawn ``job`` in its own session and cage; ``{"id", "command", "running", ...}``.

        Raises:
            ConflictError: :attr:`BackgroundLimits.max_running` jobs run already, or the run is ending.
            OSError: the command could not be started (nothing ran).
        """
        self._refuse_start()
        spec = LaunchSpec(argv=job.argv, env=job.env, cwd=job.cwd, stdin_mode=StdinMode.DEVNULL)
        output = _Output(job.masker, self.limits.output_kept_chars)
        process = await VendorProcess.start(
            spec,
            self._run_id,
            on_stderr=lambda chunk: output.add("err", chunk),
            containment=self._containment,
        )
        self._count += 1
        started = _Job(f"bg-{self._count}", job.command, process, output, job.lifetime_seconds)
        if self._closed is not None:  # the run ended while it was being spawned
            await process.stop(self._closed, eof_grace=0.0, term_grace=self.limits.stop_grace_seconds)
            raise ConflictError(f"the run is ending ({self._closed}); the background command was stopped")
        self._forget_oldest()
        self._jobs[started.id] = started
        self._tg.start_soon(self._live, started)
        return started.state()

    def _refuse_start(self) -> None:
        if self._closed is not None:
            raise ConflictError(f"the run is ending ({self._closed}); no background command starts")
        running = [job.id for job in self._jobs.values() if job.running]
        if len(running) >= self.limits.max_running:
            raise ConflictError(
                f"this run already has {len(running)} background commands running ({', '.join(running)}), "
                f"its limit; stop one with shell__stop_background first"
            )

    def _forget_oldest(self) -> None:
        ended = [job.id for job in self._jobs.values() if not job.running]
        while ended and len(self._jobs) >= self.limits.max_kept:
            del self._jobs[ended.pop(0)]

    async def _live(self, job: _Job) -> None:
        """Read the job's output until it exits (or Octipus ends it), then stop what it left."""
        try:
            with job.scope, anyio.move_on_after(job.lifetime) as expiry:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(job.process.pump_stderr)
                    async with contextlib.aclosing(job.process.chunks()) as chunks:
                        async for chunk in chunks:
                            job.output.add("out", chunk)
                    await job.process.wait()
            if expiry.cancelled_caught:
                job.ended_by = f"its lifetime of {job.lifetime:g} s passed"
        finally:
            with anyio.CancelScope(shield=True):
                reason = job.ended_by or "exited"
                await job.process.stop(reason, eof_grace=0.0, term_grace=self.limits.stop_grace_seconds)
                job.ended_at = time.monotonic()
                job.output.flush()
                job.ended.set()

    def _job(self, job_id: str) -> _Job:
        job = self._jobs.get(job_id)
        if job is None:
            known = ", ".join(self._jobs) or "none"
            raise InvalidRequestError(f"id: no background command {job_id!r} in this run (its jobs: {known})")
        return job

    async def read(self, job_id: str, since: int | None, wait_seconds: float) -> dict[str, Any]:
        """The job's state and its output from ``since`` (see :class:`~octipusd.toolkit.BackgroundJobs`).

        Raises:
            InvalidRequestError: no job of this run has that id.
        """
        job = self._job(job_id)
        output = job.output
        if wait_seconds > 0 and job.running and (output.start if since is None else since) >= output.end:
            with anyio.move_on_after(wait_seconds):
                await output.changed.wait()
        else:
            await anyio.lowlevel.checkpoint()  # a caller polling without a wait lets the job run
        first = output.start if since is None else min(max(since, output.start), output.end)
        text = output.text[first - output.start :][: self.limits.read_max_chars]
        after = first + len(text)
        return {
            **job.state(),
            "output": text,
            "offset": first,
            "next": after,
            "dropped_chars": max(first - since, 0) if since is not None else output.start,
            "more": after < output.end,
        }

    async def stop(self, job_id: str) -> dict[str, Any]:
        """Stop the job and everything it started; its final state.

        Raises:
            InvalidRequestError: no job of this run has that id.
        """
        job = self._job(job_id)
        if job.running:
            job.ended_by = job.ended_by or "stopped by shell__stop_background"
            job.scope.cancel()
            with anyio.move_on_after(self.limits.stop_wait_seconds):
                await job.ended.wait()
        return job.state()

    async def close(self, reason: str) -> None:
        """Stop every running job (the run ends: ``reason`` is their ``ended_by``); no job starts
        afterwards. Shielded and bounded."""
        self._closed = reason
        with anyio.CancelScope(shield=True), anyio.move_on_after(self.limits.close_timeout_seconds):
            for job in self._jobs.values():
                if job.running:
                    job.ended_by = job.ended_by or reason
                    job.scope.cancel()
            for job in list(self._jobs.values()):
                await job.ended.wait()
        left = [job.id for job in self._jobs.values() if job.running]
        if left:
            log.warning("run %s: background commands %s were not gone in time", self._run_id, left)


@contextlib.asynccontextmanager
async def open_jobs(
    run_id: str, containment: Containment, limits: BackgroundLimits | None = None
) -> AsyncIterator[RunJobs]:
    """The background commands of run ``run_id`` for the duration of the block.

    Leaving the block, however (normally, with an error, cancelled), stops every job still running
    (:meth:`RunJobs.close`) before it returns. An exception of the block propagates unchanged.
    """
    error: BaseException | None = None
    try:
        async with anyio.create_task_group() as tg:
            jobs = RunJobs(run_id, containment, tg, limits or BackgroundLimits())
            try:
                yield jobs
            finally:
                await jobs.close("the run ended")
                tg.cancel_scope.cancel()
    except BaseExceptionGroup as group:  # the lives raise nothing: the group carries the block's error
        if len(group.exceptions) != 1:
            raise
        error = group.exceptions[0]
    if error is not None:
        raise error
