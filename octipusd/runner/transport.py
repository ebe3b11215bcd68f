"""The transport protocol: what the run supervisor uses of a vendor process, and who starts one.

:class:`~octipusd.runner.process.VendorProcess` (started by :class:`VendorLauncher`) is the real
transport; :class:`octipusd.testing.replay.ReplayTransport` replays a recorded stream, so the
supervisor's logic can be tested without a binary.

How a supervisor drives a transport:

1. ``transport = await launcher.start(spec, run_id)``;
2. run ``pump_stderr()`` in its task group and iterate ``lines()``: the iteration ends at EOF, or
   shortly after the vendor exited even if a leftover holds its output (``output_held``); the
   supervisor may also abandon it (a vendor that outlived its turn's final result), then stops it;
3. at a stop (user, timeout, shutdown) call ``stop(reason)`` — or ``begin_stop(reason)`` first
   when the stop itself comes later: from then on ``lines()`` yields nothing (``accepting`` is
   False) and counts what it drops in ``discarded_lines`` / ``discarded_bytes``;
4. after ``lines()`` ended, ``wait()`` (bounded) and always ``reap()``: it stops whatever the
   vendor left running and releases its cage.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from octipusd.adapter import LaunchSpec
from octipusd.runner.containment import Containment, ProcessContainment, default_containment
from octipusd.runner.process import VendorProcess

__all__ = ["Launcher", "Transport", "VendorLauncher"]


class Transport(Protocol):
    """One running vendor, seen as a line stream in and out.

    Attributes:
        pid: The vendor's pid.
        stopped_reason: The first stop's reason, or None.
        discarded_lines: stdout lines dropped because a stop had begun.
        discarded_bytes: Their bytes (without newlines).
        output_held: Reading ended after the vendor's exit while a leftover still held its output.
    """

    pid: int
    stopped_reason: str | None
    discarded_lines: int
    discarded_bytes: int
    output_held: bool

    @property
    def returncode(self) -> int | None:
        """The exit code once the vendor ended (negative: killed by that signal)."""
        ...

    @property
    def accepting(self) -> bool:
        """False once a stop began."""
        ...

    @property
    def stderr_tail(self) -> str:
        """The last stderr bytes, decoded."""
        ...

    def lines(self) -> AsyncIterator[bytes]:
        """stdout lines until EOF or shortly after the vendor's exit; none after a stop began."""
        ...

    def line_batches(self) -> AsyncIterator[list[bytes]]:
        """The same lines, those that arrived together in one list (never an empty one): a consumer
        can store the events of one read in one commit."""
        ...

    async def pump_stderr(self) -> None:
        """Read stderr to its end (same ending rule as :meth:`lines`)."""
        ...

    async def write_line(self, line: str) -> bool:
        """Write one stdin line; False when stdin is closed."""
        ...

    async def close_stdin(self) -> None:
        """EOF on stdin (idempotent)."""
        ...

    async def wait(self) -> int:
        """Wait for the vendor's exit code."""
        ...

    def begin_stop(self, reason: str) -> None:
        """Accept nothing more from the vendor (idempotent; signals nothing)."""
        ...

    async def stop(self, reason: str) -> int | None:
        """begin_stop, then end the vendor and all it started (bounded, shielded)."""
        ...

    async def reap(self) -> list[int]:
        """Stop whatever of the run is still alive; the pids of the leftovers signalled."""
        ...


class Launcher(Protocol):
    """Starts transports."""

    @property
    def containment(self) -> ProcessContainment:
        """The containment mechanism of the processes it starts."""
        ...

    async def start(self, spec: LaunchSpec, run_id: str) -> Transport:
        """Start the vendor of ``spec`` for ``run_id``.

        Raises:
            OSError: the binary cannot be executed (nothing was started).
        """
        ...


class VendorLauncher:
    """Starts real vendor processes inside the daemon's containment."""

    def __init__(self, containment: Containment | None = None) -> None:
        self._containment = containment or default_containment()

    @property
    def containment(self) -> ProcessContainment:
        """The mechanism in force."""
        return self._containment.mechanism

    @property
    def containment_detail(self) -> str:
        """Where (the cgroup folder) or why (the reason no cgroup is used)."""
        return self._containment.detail

    async def start(self, spec: LaunchSpec, run_id: str) -> VendorProcess:
        """Spawn the vendor (see :meth:`VendorProcess.start`)."""
        return await VendorProcess.start(spec, run_id, containment=self._containment)
