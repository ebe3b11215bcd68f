"""A fake transport that replays a recorded vendor stream, for supervisor tests without a binary.

A :class:`Recording` is the vendor's stdout as JSON lines (from a list, or a ``.jsonl`` file
such as one captured from a real run), with optional delays, stdin waits, stderr and an exit
code; :class:`ReplayLauncher` hands out one :class:`ReplayTransport` per launch and keeps what
was launched; each transport keeps what was written to its stdin.

It follows the rules of the real :class:`~octipusd.runner.process.VendorProcess`: after
``begin_stop`` the remaining lines are counted and discarded; a recording that ``ignores_stop``
keeps "printing" (into the discard counters) until :data:`STOP_KILL_AFTER` seconds of a stop;
``held_output`` makes ``lines()`` end :data:`~octipusd.runner.process.DRAIN_GRACE` seconds after
the exit with ``output_held`` set, as when a leftover holds the pipe, and ``reap()`` then
reports the leftover pids.
"""

from __future__ import annotations

import json
import signal
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from octipusd.adapter import LaunchSpec
from octipusd.runner.containment import ProcessContainment
from octipusd.runner.process import DRAIN_GRACE

__all__ = ["STOP_KILL_AFTER", "Recording", "ReplayLauncher", "ReplayTransport", "Step"]

#: Seconds a replay that ignores a stop goes on before it is "killed" (exit -SIGKILL).
STOP_KILL_AFTER = 5.0
#: Fake pids start above the kernel's largest pid_max (2**22), so none can be a real process.
FAKE_PID_BASE = 2**22 + 1


@dataclass(frozen=True)
class Step:
    """One stdout line of a recording.

    Attributes:
        line: The line (no newline); a dict or list is written as compact JSON.
        delay: Seconds before it is printed.
        after_writes: Print it only once at least this many stdin lines were written.
    """

    line: str | bytes | dict[str, Any] | list[Any]
    delay: float = 0.0
    after_writes: int = 0

    def encoded(self) -> bytes:
        """The line's bytes."""
        if isinstance(self.line, bytes):
            return self.line
        if isinstance(self.line, str):
            return self.line.encode("utf-8")
        return json.dumps(self.line, separators=(",", ":")).encode("utf-8")


@dataclass(frozen=True)
class Recording:
    """A recorded vendor run.

    Attributes:
        steps: The stdout lines in order.
        exit_code: The exit code once the lines are out (a stop that is obeyed: -SIGTERM).
        stderr: What the vendor wrote to stderr.
        exit_delay: Seconds between the last line and the exit.
        ignores_stop: Keep printing through a stop (the lines are discarded) until
            :data:`STOP_KILL_AFTER`.
        held_output: A leftover holds stdout after the exit (``lines()`` ends after the drain grace).
        leftover_pids: What ``reap()`` reports having stopped when ``held_output``.
    """

    steps: tuple[Step, ...]
    exit_code: int = 0
    stderr: str = ""
    exit_delay: float = 0.0
    ignores_stop: bool = False
    held_output: bool = False
    leftover_pids: tuple[int, ...] = ()

    @classmethod
    def of(
        cls,
        lines: Sequence[str | bytes | dict[str, Any] | list[Any]],
        delays: Sequence[float] | None = None,
        **options: Any,
    ) -> Recording:
        """A recording of ``lines``, each after its delay in ``delays`` (seconds; default none)."""
        if delays is not None and len(delays) != len(lines):
            raise ValueError(f"{len(delays)} delays for {len(lines)} lines")
        pauses = list(delays) if delays is not None else [0.0] * len(lines)
        return cls(tuple(Step(line, pause) for line, pause in zip(lines, pauses, strict=True)), **options)

    @classmethod
    def from_jsonl(cls, path: Path, **options: Any) -> Recording:
        """A recording of a captured stdout file, one line per line (blank lines kept)."""
        return cls.of(path.read_bytes().splitlines(), **options)


class ReplayTransport:
    """Replays one :class:`Recording` (a :class:`~octipusd.runner.transport.Transport`).

    Attributes:
        written: The stdin lines written, in order.
        stdin_closed: EOF was sent.
        reaped: ``reap()`` was called.
    """

    def __init__(self, recording: Recording, pid: int, run_id: str, spec: LaunchSpec | None = None) -> None:
        self.recording = recording
        self.pid = pid
        self.run_id = run_id
        self.spec = spec
        self.written: list[str] = []
        self.stdin_closed = False
        self.reaped = False
        self.stopped_reason: str | None = None
        self.discarded_lines = 0
        self.discarded_bytes = 0
        self.output_held = False
        self._returncode: int | None = None
        self._exited = anyio.Event()
        self._stop_begun = anyio.Event()
        self._wrote = anyio.Event()
        self._reading = False

    @property
    def returncode(self) -> int | None:
        """The exit code once the replay ended."""
        return self._returncode

    @property
    def accepting(self) -> bool:
        """False once a stop began."""
        return self.stopped_reason is None

    @property
    def stderr_tail(self) -> str:
        """The recording's stderr."""
        return self.recording.stderr

    def _exit(self, code: int) -> None:
        if self._returncode is None:
            self._returncode = code
            self._exited.set()

    async def _pause(self, seconds: float) -> bool:
        """Sleep; False when an obeyed stop cut it short."""
        if self.recording.ignores_stop:
            await anyio.sleep(seconds)
            return True
        with anyio.move_on_after(seconds):
            await self._stop_begun.wait()
        return not self._stop_begun.is_set()

    async def _writes(self, count: int) -> bool:
        """Wait for ``count`` stdin lines; False when an obeyed stop came first."""
        while len(self.written) < count:
            if self._stop_begun.is_set() and not self.recording.ignores_stop:
                return False
            async with anyio.create_task_group() as tg:

                async def stop_seen() -> None:
                    await self._stop_begun.wait()
                    tg.cancel_scope.cancel()

                if not self.recording.ignores_stop:
                    tg.start_soon(stop_seen)
                await self._wrote.wait()
                tg.cancel_scope.cancel()
            self._wrote = anyio.Event()
        return True

    async def lines(self) -> AsyncIterator[bytes]:
        """The recording's lines, with their delays; discarded (counted) after a stop began. A reader
        that abandons the iteration leaves the replay unread: a stop then ends it at once."""
        self._reading = True
        try:
            async for line in self._play():
                yield line
        finally:
            self._reading = False

    async def _play(self) -> AsyncIterator[bytes]:
        for step in self.recording.steps:
            if self._returncode is not None:
                return
            if not await self._pause(step.delay) or not await self._writes(step.after_writes):
                break
            line = step.encoded()
            if self.stopped_reason is None:
                yield line
            else:
                self.discarded_lines += 1
                self.discarded_bytes += len(line)
        if self._returncode is None and await self._pause(self.recording.exit_delay):
            self._exit(self.recording.exit_code)
        if self._returncode is None:
            self._exit(-signal.SIGTERM)
        if self.recording.held_output:
            await anyio.sleep(DRAIN_GRACE)
            self.output_held = True

    async def line_batches(self) -> AsyncIterator[list[bytes]]:
        """The recording's lines one by one (each step is its own read)."""
        async for line in self.lines():
            yield [line]

    async def pump_stderr(self) -> None:
        """Nothing to pump: the recording's stderr is the tail."""

    async def write_line(self, line: str) -> bool:
        """Record a stdin line; False once stdin is closed or the replay ended."""
        if self.stdin_closed or self._returncode is not None:
            return False
        self.written.append(line)
        self._wrote.set()
        return True

    async def close_stdin(self) -> None:
        """Record EOF."""
        self.stdin_closed = True

    async def wait(self) -> int:
        """Wait for the end of the replay."""
        await self._exited.wait()
        assert self._returncode is not None
        return self._returncode

    def begin_stop(self, reason: str) -> None:
        """From now on nothing is yielded (and a replay that obeys stops soon)."""
        if self.stopped_reason is None:
            self.stopped_reason = reason
        self._stop_begun.set()

    async def stop(self, reason: str) -> int | None:
        """begin_stop, then wait for the replay's end (at most :data:`STOP_KILL_AFTER` s)."""
        self.begin_stop(reason)
        self.stdin_closed = True
        with anyio.CancelScope(shield=True):
            if not self._reading:  # nobody reads it: it ends as a killed process would
                self._exit(-signal.SIGTERM)
            with anyio.move_on_after(STOP_KILL_AFTER):
                await self._exited.wait()
            self._exit(-signal.SIGKILL)
        return self._returncode

    async def reap(self) -> list[int]:
        """Record the reap; the leftover pids when the output was held."""
        self.reaped = True
        return list(self.recording.leftover_pids) if self.recording.held_output else []


@dataclass
class ReplayLauncher:
    """Hands out a :class:`ReplayTransport` per launch (a :class:`~octipusd.runner.transport.Launcher`).

    Attributes:
        recordings: One per launch, in order, or a function of (spec, run id).
        containment: What it reports as the containment mechanism.
        launches: (spec, run id) of each start.
        transports: The transports handed out.
    """

    recordings: Sequence[Recording] | Callable[[LaunchSpec, str], Recording]
    containment: ProcessContainment = ProcessContainment.CGROUP
    launches: list[tuple[LaunchSpec, str]] = field(default_factory=list)
    transports: list[ReplayTransport] = field(default_factory=list)

    async def start(self, spec: LaunchSpec, run_id: str) -> ReplayTransport:
        """The next recording's transport; its ``initial_input`` is recorded as written.

        Raises:
            FileNotFoundError: no recording is left (as for a binary that cannot be started).
        """
        if callable(self.recordings):
            recording = self.recordings(spec, run_id)
        elif len(self.transports) < len(self.recordings):
            recording = self.recordings[len(self.transports)]
        else:
            raise FileNotFoundError(f"no recording left for launch {len(self.transports) + 1}")
        transport = ReplayTransport(recording, FAKE_PID_BASE + len(self.transports), run_id, spec)
        self.launches.append((spec, run_id))
        self.transports.append(transport)
        for line in spec.initial_input:
            await transport.write_line(line)
        return transport
