"""Vendor process I/O: spawn in a new session and a cage, JSON-lines framing, stderr pump, stop, reaper.

A vendor CLI runs in its own session (``start_new_session=True``) so that its whole tree
can be signalled as a group, inside the daemon's process containment (a run cgroup, or a walk
of its descendants with the daemon as child subreaper: :mod:`octipusd.runner.containment`).
Every child also carries ``OCTIPUS_RUN_ID`` in its environment, a second way to find what
left the group.

Reading ends at EOF or, once the vendor (the leader) exited, when a read found nothing for
:data:`DRAIN_GRACE` seconds although something it left still holds its stdout or stderr, or when a
leftover keeps writing: :data:`DRAIN_LIMIT` seconds after the exit, once the reader had emptied the
pipe since (or read :data:`PIPE_MAX_BYTES` since), one last read; :meth:`VendorProcess.reap` then
stops those leftovers. A slow consumer loses nothing: the grace counts from the last read, not from
the exit, and what the leader left in a pipe (no more than a pipe holds) is read however long the
consumer takes. Once a stop began (:meth:`VendorProcess.begin_stop`) no further line is
yielded: it is counted and discarded.

Stopping follows DESIGN.md: stdin EOF, then SIGTERM to the group and the cage, then SIGKILL to
the whole cage and the group. A run cgroup holds every process of the run, so only the walking
cage of the subreaper fallback scans the processes' environments for the run's marker (in a
worker thread, as every look at the tree).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import signal
import subprocess
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from pathlib import Path

import anyio
import anyio.abc
import psutil

from octipusd.adapter import LaunchSpec, StdinMode
from octipusd.runner.containment import (
    JOINED,
    Containment,
    RunCage,
    default_containment,
    run_processes,
    wait_ended,
    walking_cage,
)
from octipusd.toolkit import RUN_MARKER  # marks every process of a run (value: the run id)

__all__ = [
    "RUN_MARKER",
    "LineFramer",
    "VendorProcess",
    "kill_run_tree",
    "run_processes",
    "write_private_file",
]

log = logging.getLogger(__name__)

#: Bytes read from the child's stdout per receive call.
CHUNK = 65536
#: Bytes of stderr kept for error reports.
STDERR_TAIL = 65536
#: Seconds a read of stdout or stderr may find nothing, once the leader exited, before reading ends
#: although a leftover process still holds the pipe (counted from the read, not from the exit).
DRAIN_GRACE = 0.5
#: Seconds after the leader's exit past which reading ends while a leftover keeps writing (once
#: :data:`PIPE_MAX_BYTES` were read after the exit too).
DRAIN_LIMIT = 10.0
#: Bytes a pipe holds at most (Linux's default ``fs.pipe-max-size``, the most an unprivileged writer
#: can ask for): what the leader left unread when it exited is no more than this, so reading it all
#: never lets a leftover write forever.
PIPE_MAX_BYTES = 1 << 20
#: Seconds one stdin line may take to be written; past it stdin counts as broken (the vendor
#: stopped reading it).
STDIN_WRITE_TIMEOUT = 10.0
#: Seconds :meth:`VendorProcess.stop` waits for a stdin write in progress before it abandons stdin.
STDIN_LOCK_WAIT = 2.0
#: Seconds the cage's wrapper may take to say it joined the run cgroup.
CAGE_JOIN_TIMEOUT = 5.0
#: Seconds between two looks at whether the leader exited while its output stays open.
EXIT_POLL_INTERVAL = 0.1
#: Seconds :meth:`VendorProcess.stop` waits after stdin EOF, then after SIGTERM.
EOF_GRACE = 2.0
TERM_GRACE = 3.0
#: Seconds to wait for the leader's exit after SIGKILL (it cannot be ignored; only a process stuck in
#: the kernel takes longer), whatever grace the caller gave the polite signals.
KILL_WAIT = 5.0


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


class _Drain:
    """When the leader was first seen exited, for one stream's reading (monotonic seconds)."""

    def __init__(self) -> None:
        self.exited_at: float | None = None
        self.read_after_exit = 0
        #: A read after the exit returned less than a full chunk: the reader had emptied the pipe.
        self.caught_up = False
        #: The drain limit passed: the next read is the last.
        self.last_read = False


def _executable(argv0: str, env: dict[str, str], cwd: Path) -> None:
    """Raise the ``OSError`` spawning ``argv0`` directly would raise (the cage's wrapper would
    otherwise start and exit 127 instead)."""
    if "/" in argv0:
        path = argv0 if os.path.isabs(argv0) else os.path.join(cwd, argv0)
        if not os.path.exists(path):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), argv0)
        if os.path.isdir(path) or not os.access(path, os.X_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), argv0)
    elif shutil.which(argv0, path=env.get("PATH", os.defpath)) is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), argv0)


class VendorProcess:
    """One running vendor CLI (the real :class:`~octipusd.runner.transport.Transport`).

    Build with :meth:`start`. Read stdout lines with :meth:`lines`; write stdin lines with
    :meth:`write_line`; end with :meth:`stop` (always safe to call, idempotent, bounded), or,
    after the vendor exited by itself, stop its leftovers with :meth:`reap`.

    Attributes:
        pid: The vendor's pid (also its process group id and session id).
        run_id: The run marker value.
        stopped_reason: The reason of the first :meth:`begin_stop` or :meth:`stop`, else None.
        discarded_lines: stdout lines read after :meth:`begin_stop` and dropped.
        discarded_bytes: Their bytes (without the newlines).
        output_held: True when reading ended after the leader's exit while stdout or stderr was
            still open (something it left held it): idle for :data:`DRAIN_GRACE`, or past
            :data:`DRAIN_LIMIT`.
    """

    def __init__(
        self,
        process: anyio.abc.Process,
        run_id: str,
        on_stderr: Callable[[bytes], None] | None,
        cage: RunCage,
    ) -> None:
        self._process = process
        self.pid = process.pid
        self.run_id = run_id
        self._on_stderr = on_stderr
        self._cage = cage
        self._stderr: deque[bytes] = deque()
        self._stderr_size = 0
        self._stdin_lock = anyio.Lock()
        self._stdin_closed = process.stdin is None
        self.stopped_reason: str | None = None
        self.discarded_lines = 0
        self.discarded_bytes = 0
        self.output_held = False
        self._stderr_head = b""
        self._released = False

    @classmethod
    async def start(
        cls,
        spec: LaunchSpec,
        run_id: str,
        on_stderr: Callable[[bytes], None] | None = None,
        containment: Containment | None = None,
    ) -> VendorProcess:
        """Write the spec's files (0600) and spawn the vendor in a new session, in its own cage.

        Args:
            spec: The adapter's launch.
            run_id: Run id, exported as ``OCTIPUS_RUN_ID`` to the whole tree.
            on_stderr: Called with each stderr chunk (bytes), from the pump task.
            containment: The daemon's containment (default: this process's ``auto`` choice).

        Returns:
            The started process; its initial input has been written.

        Raises:
            OSError: the binary cannot be executed (nothing was started).
        """
        for path, content in spec.files.items():
            write_private_file(path, content)
        env = dict(spec.env)
        env[RUN_MARKER] = run_id
        cage = _cage(containment or default_containment(), run_id)
        stdin = subprocess.PIPE if spec.stdin_mode is StdinMode.STREAM else subprocess.DEVNULL
        # Shielded: a cancellation while asyncio connects the pipes (or the leader joins its cage)
        # would otherwise leave whatever the leader already started running, with no handle to stop it.
        with anyio.CancelScope(shield=True):
            try:
                argv = cage.wrap(spec.argv, env, announce=True)
                wrapped = argv != list(spec.argv)
                if wrapped:
                    _executable(spec.argv[0], env, spec.cwd)
                process = await anyio.open_process(
                    argv,
                    stdin=stdin,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    cwd=str(spec.cwd),
                    env=env,
                    start_new_session=True,
                )
            except BaseException:
                await anyio.to_thread.run_sync(cage.release)
                raise
            cage.attach(process.pid)
            proc = cls(process, run_id, on_stderr, cage)
            if wrapped and not await proc._joined():
                await proc.stop("could not join its cage", eof_grace=0.0, term_grace=0.0)
                said = proc._stderr_head.decode("utf-8", "replace").strip()
                raise PermissionError(
                    errno.EACCES, f"the vendor could not join its run cgroup {cage.where}: {said}"
                )
        try:
            for line in spec.initial_input:
                await proc.write_line(line)
        except BaseException:  # cancelled before the caller holds the process: stop it here
            await proc.stop("cancelled while starting", eof_grace=0.0)
            raise
        return proc

    async def _joined(self) -> bool:
        """Whether the cage's wrapper said on stderr that it joined, within :data:`CAGE_JOIN_TIMEOUT`
        seconds (it says why not and exits instead). What stderr carried besides is kept in
        ``_stderr_head`` for :meth:`pump_stderr` (or the error message)."""
        stream, head = self._process.stderr, b""
        assert stream is not None
        with anyio.move_on_after(CAGE_JOIN_TIMEOUT):
            with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                while len(head) < len(JOINED) and JOINED.startswith(head):
                    head += await stream.receive(CHUNK)
        joined = head.startswith(JOINED)
        self._stderr_head = head[len(JOINED) :] if joined else head
        return joined

    @property
    def returncode(self) -> int | None:
        """Exit code once the process ended (negative: killed by that signal)."""
        return self._process.returncode

    @property
    def accepting(self) -> bool:
        """False once a stop began: :meth:`lines` yields nothing more."""
        return self.stopped_reason is None

    def begin_stop(self, reason: str) -> None:
        """Mark the start of a stop: from now on every stdout line is counted and discarded.

        Idempotent; the first reason is kept in :attr:`stopped_reason`. Does not signal anything
        (:meth:`stop` does, and calls this first).
        """
        if self.stopped_reason is None:
            self.stopped_reason = reason

    async def _next_chunk(self, stream: anyio.abc.ByteReceiveStream, drain: _Drain) -> bytes | None:
        """The next chunk, or None at EOF; once the leader exited, also None (and
        :attr:`output_held`) when a read found nothing for :data:`DRAIN_GRACE` seconds, or after one
        last read once :data:`DRAIN_LIMIT` seconds passed since the exit and either the reader had
        caught up with the pipe since (a read returned less than a full chunk: what came later is a
        leftover's) or :data:`PIPE_MAX_BYTES` were read since the exit."""
        while True:
            now = anyio.current_time()
            if drain.exited_at is None and self._process.returncode is not None:
                drain.exited_at = now
            if drain.exited_at is None:
                wait = EXIT_POLL_INTERVAL
            else:
                if drain.last_read:
                    self.output_held = True
                    return None
                left = drain.exited_at + DRAIN_LIMIT - now
                if left <= 0 and (drain.caught_up or drain.read_after_exit >= PIPE_MAX_BYTES):
                    drain.last_read = True
                wait = DRAIN_GRACE if left <= 0 else min(DRAIN_GRACE, left)
            with anyio.move_on_after(wait) as idle:
                try:
                    chunk = await stream.receive(CHUNK)
                except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return None
            if not idle.cancelled_caught:
                if drain.exited_at is not None:
                    drain.read_after_exit += len(chunk)
                    drain.caught_up = drain.caught_up or len(chunk) < CHUNK
                return chunk
            if drain.exited_at is not None and wait >= DRAIN_GRACE:
                self.output_held = True
                return None

    def _accept(self, line: bytes) -> bool:
        if self.stopped_reason is None:
            return True
        self.discarded_lines += 1
        self.discarded_bytes += len(line)
        return False

    async def lines(self) -> AsyncIterator[bytes]:
        """Yield stdout lines (without newline, any length) until EOF, or until the leader exited
        and a read stayed idle for :data:`DRAIN_GRACE` (see the module docstring); after
        :meth:`begin_stop`, lines are discarded, not yielded."""
        async for batch in self._read_batches():
            for line in batch:
                if self._accept(line):
                    yield line

    async def line_batches(self) -> AsyncIterator[list[bytes]]:
        """Like :meth:`lines`, but the complete lines of each read together (never an empty list);
        a line is accepted or discarded when its read returns."""
        async for batch in self._read_batches():
            accepted = [line for line in batch if self._accept(line)]
            if accepted:
                yield accepted

    async def chunks(self) -> AsyncGenerator[bytes]:
        """Yield stdout as it is read, unframed (a background command's output), ending as
        :meth:`lines` does; nothing is discarded after :meth:`begin_stop`."""
        assert self._process.stdout is not None
        drain = _Drain()
        while (chunk := await self._next_chunk(self._process.stdout, drain)) is not None:
            yield chunk

    async def _read_batches(self) -> AsyncIterator[list[bytes]]:
        assert self._process.stdout is not None
        framer = LineFramer()
        drain = _Drain()
        while (chunk := await self._next_chunk(self._process.stdout, drain)) is not None:
            batch = framer.feed(chunk)
            if batch:
                yield batch
        tail = framer.flush()
        if tail:
            yield [tail]

    async def pump_stderr(self) -> None:
        """Read stderr until EOF (or the leader's exit and an idle :data:`DRAIN_GRACE`), keeping the tail
        and calling ``on_stderr``."""
        stream = self._process.stderr
        if stream is None:
            return
        drain = _Drain()
        head, self._stderr_head = self._stderr_head, b""
        while (chunk := head or await self._next_chunk(stream, drain)) is not None:
            head = b""
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
        """Write one line (a newline is added) to stdin, within :data:`STDIN_WRITE_TIMEOUT` seconds.

        Returns:
            False when stdin is already closed, the pipe broke (the vendor exited), or the write
            timed out (the vendor stopped reading stdin: stdin then counts as closed).
        """
        async with self._stdin_lock:
            if self._stdin_closed or self._process.stdin is None:
                return False
            try:
                with anyio.fail_after(STDIN_WRITE_TIMEOUT):
                    await self._process.stdin.send(line.encode("utf-8") + b"\n")
                return True
            except TimeoutError:
                log.warning(
                    "run %s: the vendor read none of a stdin line for %ss", self.run_id, STDIN_WRITE_TIMEOUT
                )
                self._stdin_closed = True
                return False
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                self._stdin_closed = True
                return False

    async def close_stdin(self) -> None:
        """Send EOF on stdin (idempotent), after the write in progress, if any."""
        async with self._stdin_lock:
            await self._eof()

    async def _eof(self) -> None:
        """Close stdin (never blocks: the stream's close does not wait for the pipe to drain)."""
        self._stdin_closed = True
        if self._process.stdin is not None:
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                await self._process.stdin.aclose()

    async def _close_stdin_for_stop(self) -> None:
        """Send EOF, waiting at most :data:`STDIN_LOCK_WAIT` seconds for a write in progress; past it,
        close stdin without the lock (the stuck write then fails, or ends with the vendor)."""
        with anyio.move_on_after(STDIN_LOCK_WAIT):
            await self.close_stdin()
            return
        log.warning("run %s: a stdin write was still blocked at the stop; stdin abandoned", self.run_id)
        await self._eof()

    async def wait(self) -> int:
        """Wait for the vendor's exit and return its exit code."""
        return await self._process.wait()

    async def stop(
        self, reason: str, eof_grace: float = EOF_GRACE, term_grace: float = TERM_GRACE
    ) -> int | None:
        """Stop the vendor and everything it started; bounded and shielded.

        :meth:`begin_stop`; stdin EOF (after a write in progress, for at most
        :data:`STDIN_LOCK_WAIT` seconds), wait ``eof_grace`` seconds; SIGTERM to the group and the
        cage, wait ``term_grace`` seconds; then :meth:`reap`.

        Args:
            reason: Why (kept in :attr:`stopped_reason`).
            eof_grace: Seconds to wait after stdin EOF.
            term_grace: Seconds to wait after SIGTERM.

        Returns:
            The exit code, or None if the process could not be reaped.
        """
        self.begin_stop(reason)
        with anyio.CancelScope(shield=True):
            if self._process.returncode is None:
                await self._close_stdin_for_stop()
                with anyio.move_on_after(eof_grace):
                    await self._process.wait()
            if self._process.returncode is None:
                await anyio.to_thread.run_sync(self._signal_tree, signal.SIGTERM)
                with anyio.move_on_after(term_grace):
                    await self._process.wait()
            await self.reap(grace=term_grace)
        return self._process.returncode

    def _others(self) -> list[psutil.Process]:
        """Live processes of the run but the leader, as its cage knows them (a cgroup holds every one;
        a walking cage also scans for the run's marker)."""
        found = {p.pid: p for p in self._cage.members()}
        found.pop(self.pid, None)
        found.pop(os.getpid(), None)
        return list(found.values())

    def _signal_group(self, sig: int) -> None:
        if self._process.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, sig)

    def _signal_tree(self, sig: int) -> None:
        self._signal_group(sig)
        for p in self._others():
            with contextlib.suppress(psutil.Error):
                p.send_signal(sig)

    def _kill_tree(self) -> None:
        self._cage.kill()  # every member the cage knows, at once
        self._signal_group(signal.SIGKILL)

    def _terminate_leftovers(self, grace: float) -> list[psutil.Process]:
        """SIGTERM the leftovers the cage knows and wait up to ``grace`` seconds for them (a worker
        thread); the ones signalled."""
        survivors = self._others()
        for p in survivors:
            with contextlib.suppress(psutil.Error):
                p.terminate()
        if survivors:
            wait_ended(survivors, grace)
        return survivors

    def _end_leftovers(self, grace: float) -> tuple[list[psutil.Process], bool]:
        """Once the leader ended: :meth:`_terminate_leftovers`, SIGKILL the cage, release it (a worker
        thread); the ones signalled and whether the cage was freed."""
        survivors = self._terminate_leftovers(grace)
        self._kill_tree()
        return survivors, self._cage.release()

    async def reap(self, grace: float = TERM_GRACE) -> list[int]:
        """Terminate whatever of the run is still alive: the cage and the group.

        SIGTERM to each leftover the cage knows (a walking cage: with the processes carrying the
        run's marker), up to ``grace`` seconds for them to end, then SIGKILL to the whole cage
        (``cgroup.kill``) and the group; the leader is awaited (up to
        :data:`KILL_WAIT` seconds), the cage released (the cgroup removed, re-parented zombies reaped)
        and the process's pipes closed once it ended. Shielded from cancellation; safe to call again
        (at once once a reap ended the leader and freed the cage: nothing of the run is left).

        Returns:
            Pids of the leftovers that had to be signalled (the leader not included).
        """
        if self._released:  # an earlier reap ended everything and freed the cage
            return []
        with anyio.CancelScope(shield=True):
            if self._process.returncode is not None:  # the usual end: the whole reap in one worker call
                survivors, released = await anyio.to_thread.run_sync(self._end_leftovers, grace)
            else:
                survivors = await anyio.to_thread.run_sync(self._terminate_leftovers, grace)
                await anyio.to_thread.run_sync(self._kill_tree)
                with anyio.move_on_after(max(grace, KILL_WAIT)):
                    await self._process.wait()
                released = await anyio.to_thread.run_sync(self._cage.release)
            if not released:
                log.warning("run %s: processes of pid %d's cage outlived SIGKILL", self.run_id, self.pid)
            if self._process.returncode is not None:  # its pipes closed; the wait returns at once
                await self._process.aclose()
                self._released = released
        return sorted(p.pid for p in survivors)


def _cage(containment: Containment, run_id: str) -> RunCage:
    """The run's cage; a walking cage (descendants and marker) when the containment fails."""
    try:
        return containment.cage(run_id)
    except OSError as exc:
        log.warning("run %s: no %s cage (%s); its processes are walked", run_id, containment.mechanism, exc)
        return walking_cage(run_id)


def write_private_file(path: Path, content: str) -> None:
    """Write ``content`` to ``path`` with mode 0600, creating 0700 parents."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(content)
