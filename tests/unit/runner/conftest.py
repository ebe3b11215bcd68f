"""Both containment mechanisms, for tests that start real vendor processes."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from octipusd.adapter import LaunchSpec
from octipusd.runner.containment import (
    CgroupContainment,
    Containment,
    SubreaperContainment,
    set_child_subreaper,
)

UNRULY = Path(__file__).resolve().parents[3] / "octipusd" / "testing" / "stub_unruly.py"


@pytest.fixture(params=["cgroup", "subreaper"])
def containment(request: pytest.FixtureRequest) -> Iterator[Containment]:
    """A run cgroup containment, then the subreaper fallback (this test process as the subreaper)."""
    if request.param == "cgroup":
        try:
            made: Containment = CgroupContainment.create()
        except OSError as exc:  # this machine kind has a writable cgroup v2: its absence is a failure
            pytest.fail(f"no writable cgroup v2 here ({exc}); the cgroup containment cannot be proven")
        yield made
        made.close()
        return
    made = SubreaperContainment.create("forced by the test")
    try:
        yield made
    finally:
        set_child_subreaper(False)


def unruly(mode: str, pid_file: Path, cwd: Path) -> LaunchSpec:
    """The launch of :mod:`octipusd.testing.stub_unruly` in ``mode``."""
    return LaunchSpec(
        argv=(sys.executable, str(UNRULY), mode, str(pid_file)), env={"PATH": "/usr/bin:/bin"}, cwd=cwd
    )


def gone(pid: int) -> bool:
    """The process ended (it no longer exists, or it is a zombie its parent has yet to wait for)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def reaped(pid: int) -> bool:
    """The process no longer exists at all (its zombie was waited for)."""
    return not psutil.pid_exists(pid)
