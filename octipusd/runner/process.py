"""Vendor process I/O: spawn in a new session, JSON-lines framing, stderr pump, stop escalation, reaper.

A vendor CLI runs in its own session (``start_new_session=True``) so that its whole tree
can be signalled as a group. Every child also carries ``OCTIPUS_RUN_ID`` in its
environment: the reaper uses it (through psutil) to find descendants that left the group
(``setsid``) or were re-parented to init, so that nothing of a run outlives it.

Stopping follows DESIGN.md: stdin EOF, then SIGTERM to the group, then SIGKILL to the group
and to every process still carrying the run's marker.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections import deque
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import anyio
import anyio.abc
import psutil

from octipusd.adapter import LaunchSpec, StdinMode
from octipusd.toolkit import RUN_MARKER  # marks every process of a run (value: the run id)

#: Bytes read from the child's stdout per receive call.
CHUNK = 65536
#: Bytes of stderr kept for error reports.
STDERR_TAIL = 65536


class LineFramer:
    """Splits a byte stream into lines of any length (no maximum; a 3 MiB line is one line).

    ``feed(chunk)`` returns the complete lines (without ``\\n``, a trailing ``\\r`` kept);
    ``flush()`` returns the unterminated tail at EOF, if any.
    """

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def feed(self, chunk: bytes) -> list[bytes]:
        """Add bytes; return the lines they complete."""
        lines: list[bytes] = []
        start = 0
        while True:
            idx = chunk.find(b"\n", start)
            if idx < 0:
                break
            piece = chunk[start:idx]
            if self._parts:
                self._parts.append(piece)
                piece = b"".join(self._parts)
                self._parts = []
            lines.append(piece)
            start = idx + 1
        if start < len(chunk):
            self._parts.append(chunk[start:])
        return lines

    def flush(self) -> bytes | None:
        """Return the unterminated tail (or None) and reset."""
        if not self._parts:
            return None
        tail = b"".join(self._parts)
        self._parts = []
        return tail


def run_processes(run_id: str) -> list[psutil.Process]:
    """Return every live process whose environment carries ``OCTIPUS_RUN_ID=<run_id>``.

    Processes whose environment cannot be read (other users, races) are skipped. An empty
    ``run_id`` matches nothing (it would otherwise match every unmarked process).
    """
    found: list[psutil.Process] = []
    if not run_id:
        return found
    me = os.getpid()
    for proc in psutil.process_iter(["pid"]):
        if proc.pid == me:
            continue
        try:
            if proc.environ().get(RUN_MARKER) == run_id:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def _alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.Error:
            continue
    return out


def kill_run_tree(run_id: str, pgid: int | None, sig: int = signal.SIGKILL) -> list[int]:
    """Signal the run's process group and every process carrying its marker.

    Args:
        run_id: The run whose processes to signal.
        pgid: The vendor's process group (its pid), or None.
        sig: Signal number.

    Returns:
        Pids that were signalled (best effort; vanished processes are ignored).
    """
    pids: set[int] = set()
    if pgid is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
            pids.add(pgid)
    for proc in run_processes(run_id):
        with contextlib.suppress(psutil.Error):
            proc.send_signal(sig)
            pids.add(proc.pid)
    return sorted(pids)


class VendorProcess:
    """One running vendor CLI.

    Build with :meth:`start`. Read stdout lines with :meth:`lines`; write stdin lines with
    :meth:`write_line`; end with :meth:`stop` (always safe to call, idempotent, bounded).

    Attributes:
        pid: The vendor's pid (also its process group id and session id).
        run_id: The run marker value.
        stderr_tail: The last :data:`STDERR_TAIL` bytes of stderr.
    """

    def __init__(
        self, process: anyio.abc.Process, run_id: str, on_stderr: Callable[[bytes], None] | None
    ) -> None:
        self._process = process
        self.pid = process.pid
        self.run_id = run_id
        self._on_stderr = on_stderr
        self._stderr: deque[bytes] = deque()
        self._stderr_size = 0
        self._stdin_lock = anyio.Lock()
        self._stdin_closed = process.stdin is None
        self.stopped_reason: str | None = None

    @classmethod
    async def start(
        cls,
        spec: LaunchSpec,
        run_id: str,
        on_stderr: Callable[[bytes], None] | None = None,
    ) -> VendorProcess:
        """Write the spec's files (0600) and spawn the vendor in a new session.

        Args:
            spec: The adapter's launch.
            run_id: Run id, exported as ``OCTIPUS_RUN_ID`` to the whole tree.
            on_stderr: Called with each stderr chunk (bytes), from the pump task.

        Returns:
            The started process; its initial input has been written.

        Raises:
            OSError: the binary cannot be executed (nothing was started).
        """
        for path, content in spec.files.items():
            write_private_file(path, content)
        env = dict(spec.env)
        env[RUN_MARKER] = run_id
        stdin = subprocess.PIPE if spec.stdin_mode is StdinMode.STREAM else subprocess.DEVNULL
        # Shielded: a cancellation while asyncio connects the pipes would otherwise kill only the
        # leader and leave whatever it already started running, with no handle to stop it.
        with anyio.CancelScope(shield=True):
            process = await anyio.open_process(
                list(spec.argv),
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=str(spec.cwd),
                env=env,
                start_new_session=True,
            )
        proc = cls(process, run_id, on_stderr)
        try:
            for line in spec.initial_input:
                await proc.write_line(line)
        except BaseException:  # cancelled before the caller holds the process: stop it here
            await proc.stop("cancelled while starting", eof_grace=0.0)
            raise
        return proc

    @property
    def returncode(self) -> int | None:
        """Exit code once the process ended (negative: killed by that signal)."""
        return self._process.returncode

    async def lines(self) -> AsyncIterator[bytes]:
        """Yield stdout lines (without newline) until EOF, any length."""
        assert self._process.stdout is not None
        framer = LineFramer()
        while True:
            try:
                chunk = await self._process.stdout.receive(CHUNK)
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                break
            for line in framer.feed(chunk):
                yield line
        tail = framer.flush()
        if tail:
            yield tail

    async def pump_stderr(self) -> None:
        """Read stderr until EOF, keeping the tail and calling ``on_stderr``."""
        stream = self._process.stderr
        if stream is None:
            return
        while True:
            try:
                chunk = await stream.receive(CHUNK)
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                return
            self._stderr.append(chunk)
            self._stderr_size += len(chunk)
            while self._stderr_size > STDERR_TAIL and len(self._stderr) > 1:
                self._stderr_size -= len(self._stderr.popleft())
            if self._on_stderr is not None:
                self._on_stderr(chunk)

    @property
    def stderr_tail(self) -> str:
        """The kept stderr tail, decoded with replacement."""
        return b"".join(self._stderr).decode("utf-8", "replace")[-STDERR_TAIL:]

    async def write_line(self, line: str) -> bool:
        """Write one line (a newline is added) to stdin.

        Returns:
            False when stdin is already closed or the pipe broke (the vendor exited).
        """
        async with self._stdin_lock:
            if self._stdin_closed or self._process.stdin is None:
                return False
            try:
                await self._process.stdin.send(line.encode("utf-8") + b"\n")
                return True
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                self._stdin_closed = True
                return False

    async def close_stdin(self) -> None:
        """Send EOF on stdin (idempotent)."""
        async with self._stdin_lock:
            if self._stdin_closed or self._process.stdin is None:
                self._stdin_closed = True
                return
            self._stdin_closed = True
            with contextlib.suppress(Exception):
                await self._process.stdin.aclose()

    async def wait(self) -> int:
        """Wait for the vendor's exit and return its exit code."""
        return await self._process.wait()

    async def stop(self, reason: str, eof_grace: float = 2.0, term_grace: float = 3.0) -> int | None:
        """Stop the vendor and everything it started; bounded and shielded.

        stdin EOF, wait ``eof_grace`` seconds; SIGTERM to the group, wait ``term_grace``
        seconds; SIGKILL to the group and every process carrying the run marker; psutil
        confirms none is left.

        Args:
            reason: Why (kept in :attr:`stopped_reason`).
            eof_grace: Seconds to wait after stdin EOF.
            term_grace: Seconds to wait after SIGTERM.

        Returns:
            The exit code, or None if the process could not be reaped.
        """
        if self.stopped_reason is None:
            self.stopped_reason = reason
        with anyio.CancelScope(shield=True):
            if self._process.returncode is None:
                await self.close_stdin()
                with anyio.move_on_after(eof_grace):
                    await self._process.wait()
            if self._process.returncode is None:
                kill_run_tree(self.run_id, self.pid, signal.SIGTERM)
                with anyio.move_on_after(term_grace):
                    await self._process.wait()
            await self.reap(grace=term_grace)
        return self._process.returncode

    async def reap(self, grace: float = 3.0) -> list[int]:
        """Terminate whatever of the run is still alive (group and marked processes).

        Sends SIGTERM, waits up to ``grace`` seconds, then SIGKILL; returns the pids that
        had to be signalled. Shielded from cancellation.
        """
        signalled: list[int] = []
        with anyio.CancelScope(shield=True):
            survivors = _alive(run_processes(self.run_id))
            signalled = [p.pid for p in survivors]
            if survivors:
                for p in survivors:
                    with contextlib.suppress(psutil.Error):
                        p.terminate()
                await anyio.to_thread.run_sync(lambda: psutil.wait_procs(survivors, timeout=grace))
                for p in _alive(survivors):
                    with contextlib.suppress(psutil.Error):
                        p.kill()
                await anyio.to_thread.run_sync(lambda: psutil.wait_procs(survivors, timeout=grace))
            if self._process.returncode is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.pid, signal.SIGKILL)
                with anyio.move_on_after(grace):
                    await self._process.wait()
        return signalled


def write_private_file(path: Path, content: str) -> None:
    """Write ``content`` to ``path`` with mode 0600, creating 0700 parents."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(content)
