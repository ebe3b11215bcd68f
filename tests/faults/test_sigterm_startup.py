"""A stop at any moment of start-up is clean (issue 12): SIGTERM just as the socket appears."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from octipusd.testing.harness import DaemonHarness

UNUSED_MODEL = "http://127.0.0.1:9"


def test_a_sigterm_just_after_the_socket_appears_stops_the_daemon_cleanly(tmp_path: Path) -> None:
    daemon = DaemonHarness(tmp_path / "octipus", UNUSED_MODEL)
    for attempt in range(5):
        log = open(daemon.log_path, "ab")  # noqa: SIM115 - the daemon writes to it until it exits
        process = subprocess.Popen([str(daemon.bindir / "octipusd")], env=daemon.env, stdout=log, stderr=log)
        log.close()
        deadline = time.monotonic() + 60
        while not daemon.socket.exists():
            assert process.poll() is None, daemon.log()
            assert time.monotonic() < deadline, daemon.log()
            time.sleep(0.001)
        os.kill(process.pid, signal.SIGTERM)  # as soon as the socket is bound: before it may serve
        assert process.wait(timeout=60) == 0, (
            f"attempt {attempt}: exit {process.returncode}\n{daemon.log()[-3000:]}"
        )
        assert not daemon.socket.exists(), f"attempt {attempt}: the socket file was left behind"
    assert "Traceback" not in daemon.log(), daemon.log()[-3000:]
    # the database lock was released every time: a normal start and stop still work
    daemon.start()
    assert daemon.stop() == 0, daemon.log()[-3000:]


def test_a_second_daemon_on_the_same_database_exits_1_with_the_reason(tmp_path: Path) -> None:
    first = DaemonHarness(tmp_path / "octipus", UNUSED_MODEL).start()
    try:
        second = subprocess.run(
            [str(first.bindir / "octipusd")], env=first.env, capture_output=True, text=True, timeout=60
        )
        assert second.returncode == 1, second
        assert second.stderr.strip().splitlines()[-1].startswith("octipusd: "), second.stderr
        assert "Traceback" not in second.stderr, second.stderr
    finally:
        assert first.stop() == 0, first.log()[-3000:]
