"""Vendor process I/O bugs found in review, with real subprocesses: a stop behind a blocked stdin
write, the output tail read by a slow consumer, a daemon child's exit code, a failed cgroup join,
the process's pipes closed at the reap."""

from __future__ import annotations

import functools
import signal
import subprocess
import time
from pathlib import Path

import anyio
import pytest

from octipusd.adapter import LaunchSpec
from octipusd.runner import process as process_module
from octipusd.runner.containment import (
    CgroupCage,
    Containment,
    ProcessContainment,
    SubreaperContainment,
    set_child_subreaper,
)
from octipusd.runner.process import DRAIN_GRACE, VendorProcess

pytestmark = pytest.mark.anyio


def _sh(script: str, cwd: Path) -> LaunchSpec:
    return LaunchSpec(argv=("/bin/sh", "-c", script), env={"PATH": "/usr/bin:/bin"}, cwd=cwd)


async def test_a_stop_behind_a_stdin_write_the_vendor_never_reads_still_ends_it(
    containment: Containment, tmp_path: Path
) -> None:
    proc = await VendorProcess.start(
        _sh("trap '' TERM; sleep 60", tmp_path), "run-deaf-stdin", containment=containment
    )
    written: list[bool] = []

    async def write() -> None:
        written.append(await proc.write_line("x" * 300_000))  # more than the pipe buffer

    async with anyio.create_task_group() as tg:
        tg.start_soon(write)
        await anyio.sleep(0.2)
        started = time.monotonic()
        with anyio.fail_after(9):
            await proc.stop("test", eof_grace=0.2, term_grace=0.2)
    assert time.monotonic() - started < 8
    assert proc.returncode == -signal.SIGKILL  # it ignored SIGTERM: only the kill ended it
    assert written == [False]  # the write failed with the vendor; stdin counts as closed
    assert not await proc.write_line("late")


async def test_a_slow_consumer_reads_the_whole_output_of_a_vendor_that_exited(
    containment: Containment, tmp_path: Path
) -> None:
    line = "y" * 1023
    script = f"i=0; while [ $i -lt 300 ]; do echo {line}; i=$((i+1)); done; echo RESULT; exit 0"
    proc = await VendorProcess.start(_sh(script, tmp_path), "run-slow-reader", containment=containment)
    got: list[bytes] = []
    with anyio.fail_after(30):
        async for out in proc.lines():
            got.append(out)
            await anyio.sleep(0.01)  # the supervisor commits each event between two reads
    assert len(got) == 301 and got[-1] == b"RESULT"
    assert not proc.output_held and await proc.wait() == 0
    await proc.reap()


async def test_a_consumer_slower_than_the_drain_limit_still_reads_what_the_leader_left(
    containment: Containment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under load the supervisor may come back to the pipe long after it saw the vendor's exit: what
    the vendor left in its pipe is read however late (issue 13: a burst of 50 runs lost events)."""
    monkeypatch.setattr(process_module, "DRAIN_LIMIT", 0.2)
    monkeypatch.setattr(process_module, "CHUNK", 1024)  # what was left takes several reads
    line = "z" * 199
    script = f"i=0; while [ $i -lt 100 ]; do echo {line}; i=$((i+1)); done; echo RESULT; exit 0"
    proc = await VendorProcess.start(_sh(script, tmp_path), "run-late-reader", containment=containment)
    await proc.wait()  # it exited with all its output unread in the pipe
    got: list[bytes] = []
    with anyio.fail_after(30):
        async for out in proc.lines():
            got.append(out)
            await anyio.sleep(0.05)  # a slow consumer: far past the drain limit in all
    assert len(got) == 101 and got[-1] == b"RESULT"
    assert not proc.output_held
    await proc.reap()


async def test_a_leftover_that_writes_forever_is_cut_after_the_limit_and_a_pipe_s_worth(
    containment: Containment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(process_module, "DRAIN_LIMIT", 0.5)
    monkeypatch.setattr(process_module, "PIPE_MAX_BYTES", 4096)
    proc = await VendorProcess.start(
        _sh("(while :; do echo spam; done) & echo started", tmp_path), "run-spam", containment=containment
    )
    with anyio.fail_after(10):
        got = [out async for out in proc.lines()]
    assert got[0] == b"started" and len(got) > 1
    assert proc.output_held
    await proc.reap()


async def test_a_leftover_that_trickles_output_is_cut_after_the_drain_limit(
    containment: Containment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A leftover printing a line every 0.1 s (never idle for the grace) does not hold the run
    until a pipe's worth came: reading ends one read after the limit."""
    monkeypatch.setattr(process_module, "DRAIN_LIMIT", 0.5)
    proc = await VendorProcess.start(
        _sh("(while :; do echo tick; sleep 0.1; done) & echo started", tmp_path),
        "run-tick",
        containment=containment,
    )
    with anyio.fail_after(10):  # a pipe's worth of ticks would take hours
        got = [out async for out in proc.lines()]
    assert got[0] == b"started" and proc.output_held
    await proc.reap()


async def test_a_leftover_that_keeps_its_output_idle_ends_the_reading_after_the_grace(
    containment: Containment, tmp_path: Path
) -> None:
    proc = await VendorProcess.start(
        _sh("sleep 30 & echo done", tmp_path), "run-idle", containment=containment
    )
    started = time.monotonic()
    with anyio.fail_after(5):
        assert [out async for out in proc.lines()] == [b"done"]
    assert proc.output_held and time.monotonic() - started < DRAIN_GRACE + 2
    await proc.reap()


async def test_a_stop_leaves_the_exit_code_of_a_daemon_child_to_its_owner(tmp_path: Path) -> None:
    containment = SubreaperContainment.create("forced by the test")
    try:
        proc = await VendorProcess.start(_sh("sleep 60", tmp_path), "run-shell", containment=containment)
        # a child the daemon started elsewhere for the same run (a shell, an MCP stdio server): its
        # own session, the run's marker, waited for by its owner only later
        other = await anyio.to_thread.run_sync(
            functools.partial(
                subprocess.Popen,
                ["/bin/sh", "-c", "sleep 60"],
                env={"PATH": "/usr/bin:/bin", "OCTIPUS_RUN_ID": "run-shell"},
                start_new_session=True,
            )
        )
        await anyio.sleep(0.1)
        await proc.stop("test", eof_grace=0.1, term_grace=1.0)
        code = await anyio.to_thread.run_sync(other.wait, 5)
        assert code < 0, f"its exit code was taken by the cage ({code})"  # killed by the stop
    finally:
        set_child_subreaper(False)


class _BrokenCgroup:
    """A cgroup containment whose run cgroup cannot be joined (its ``cgroup.procs`` is a folder)."""

    mechanism = ProcessContainment.CGROUP
    detail = "test"

    def __init__(self, root: Path) -> None:
        self.root = root

    def cage(self, run_id: str) -> CgroupCage:
        cage = CgroupCage(self.root / run_id)
        (cage.folder / "cgroup.procs").mkdir()
        return cage

    def close(self) -> None:
        """Nothing to remove."""


async def test_a_vendor_that_cannot_join_its_cgroup_never_runs(tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    with pytest.raises(PermissionError, match=r"could not join its run cgroup .*run-caged"):
        await VendorProcess.start(
            _sh(f"touch {ran}", tmp_path), "run-caged", containment=_BrokenCgroup(tmp_path)
        )
    await anyio.sleep(0.2)
    assert not ran.exists(), "the vendor ran outside its cgroup"


async def test_the_reap_closes_the_process_pipes(tmp_path: Path) -> None:
    proc = await VendorProcess.start(
        _sh("echo hi", tmp_path), "run-close", containment=SubreaperContainment("x")
    )
    assert [out async for out in proc.lines()] == [b"hi"]
    await proc.wait()
    await proc.reap()
    assert proc._process.stdout is not None and proc._process.stdin is not None
    with pytest.raises(anyio.ClosedResourceError):
        await proc._process.stdout.receive()
