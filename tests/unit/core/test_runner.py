"""Process I/O: line framing of any length, process-group spawn, stop escalation and the reaper."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import psutil
import pytest
from hypothesis import given, strategies as st

from octipusd.adapter import LaunchSpec, StdinMode
from octipusd.runner.process import LineFramer, VendorProcess, run_processes

pytestmark = pytest.mark.anyio


@given(st.lists(st.binary(max_size=50).filter(lambda b: b"\n" not in b), max_size=20), st.integers(1, 7))
def test_framer_reassembles_lines_split_anywhere(lines: list[bytes], cut: int) -> None:
    stream = b"".join(line + b"\n" for line in lines)
    framer = LineFramer()
    out: list[bytes] = []
    for i in range(0, len(stream), cut):
        out.extend(framer.feed(stream[i : i + cut]))
    assert out == lines and framer.flush() is None


def test_framer_keeps_a_3_mib_line_and_the_unterminated_tail() -> None:
    framer = LineFramer()
    big = b"x" * (3 * 1024 * 1024)
    out = []
    for i in range(0, len(big), 65536):
        out.extend(framer.feed(big[i : i + 65536]))
    out.extend(framer.feed(b"\ntail"))
    assert out == [big] and framer.flush() == b"tail"


async def test_stop_escalates_and_reaps_a_background_grandchild(tmp_path: Path) -> None:
    pid_file = tmp_path / "bg.pid"
    # ignores SIGTERM and stdin EOF: only SIGKILL ends it; the grandchild leaves the group with setsid
    script = (
        "import os, signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        f"p = subprocess.Popen(['setsid', 'sleep', '300'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(p.pid))\n"
        "print('ready', flush=True)\n"
        "signal.pause()\n"
    )
    spec = LaunchSpec(argv=(sys.executable, "-c", script), env={"PATH": "/usr/bin:/bin"}, cwd=tmp_path)
    proc = await VendorProcess.start(spec, "run-under-test")
    async for line in proc.lines():
        assert line == b"ready"
        break
    grandchild = int(pid_file.read_text())
    assert psutil.Process(grandchild).status() != psutil.STATUS_ZOMBIE
    with anyio.fail_after(10):  # the marker walk reads /proc, where a process that just started may lag
        while not {p.pid for p in run_processes("run-under-test")} >= {proc.pid, grandchild}:  # noqa: ASYNC110
            await anyio.sleep(0.05)
    await proc.stop("test", eof_grace=0.2, term_grace=0.5)
    assert proc.returncode is not None and proc.returncode < 0
    alive = [p for p in run_processes("run-under-test") if p.status() != psutil.STATUS_ZOMBIE]
    assert alive == []


async def test_stdin_lines_and_devnull(tmp_path: Path) -> None:
    echo = LaunchSpec(
        argv=(sys.executable, "-c", "import sys\nfor l in sys.stdin: print(l.strip().upper(), flush=True)"),
        env={"PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
        initial_input=("hello",),
    )
    proc = await VendorProcess.start(echo, "run-echo")
    lines = proc.lines()
    assert await lines.__anext__() == b"HELLO"
    assert await proc.write_line("again")
    assert await lines.__anext__() == b"AGAIN"
    await proc.close_stdin()
    assert await proc.wait() == 0
    assert not await proc.write_line("late")
    devnull = LaunchSpec(
        argv=(sys.executable, "-c", "import sys; print(repr(sys.stdin.read()))"),
        env={"PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
        stdin_mode=StdinMode.DEVNULL,
    )
    proc = await VendorProcess.start(devnull, "run-devnull")
    assert [line async for line in proc.lines()] == [b"''"]
