"""The daemon's containment is chosen once: a run cgroup where one can be made, else the subreaper."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from octipusd.errors import ConfigError
from octipusd.runner import containment as mod
from octipusd.runner.containment import CgroupContainment, ProcessContainment, choose_containment
from octipusd.settings import Settings


def _subreaper() -> bool:
    """``prctl(PR_GET_CHILD_SUBREAPER)`` of this process."""
    flag = ctypes.c_int(0)
    assert ctypes.CDLL(None).prctl(37, ctypes.byref(flag), 0, 0, 0) == 0
    return flag.value == 1


@pytest.fixture
def no_cgroup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The daemon's cgroup appears to be one that does not exist (as a non-delegated one would fail)."""
    fake = tmp_path / "cgroup"
    fake.write_text("0::/no/such/cgroup\n")
    monkeypatch.setattr(mod, "PROC_CGROUP", fake)
    yield
    mod.set_child_subreaper(False)


def test_the_setting_defaults_to_auto_and_is_checked() -> None:
    assert Settings().agent.processContainment == "auto"
    assert Settings(agent={"processContainment": "subreaper"}).agent.processContainment == "subreaper"  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Settings(agent={"processContainment": "jail"})  # type: ignore[arg-type]


def test_auto_falls_back_to_the_subreaper_and_cgroup_refuses_to(no_cgroup: None) -> None:
    chosen = choose_containment("auto")
    assert chosen.mechanism is ProcessContainment.SUBREAPER and "no cgroup" in chosen.detail
    assert _subreaper()
    with pytest.raises(ConfigError, match=r"agent\.processContainment is 'cgroup'"):
        choose_containment("cgroup")


def test_forced_subreaper_makes_this_process_adopt_orphans() -> None:
    try:
        chosen = choose_containment("subreaper")
        assert chosen.mechanism is ProcessContainment.SUBREAPER and "forced" in chosen.detail
        done = subprocess.run(
            ["/bin/sh", "-c", "(sleep 30 >/dev/null 2>&1 & echo $!)"],
            capture_output=True,
            text=True,
            check=True,
        )
        orphan = psutil.Process(int(done.stdout))
        assert orphan.ppid() == os.getpid()
        orphan.kill()
        os.waitpid(orphan.pid, 0)
    finally:
        mod.set_child_subreaper(False)
    assert not _subreaper()


def test_auto_takes_a_cgroup_here_and_cleans_up_after_a_dead_daemon() -> None:
    try:
        first = CgroupContainment.create()
    except OSError as exc:  # this machine kind has a writable cgroup v2: its absence is a failure
        pytest.fail(f"no writable cgroup v2 here ({exc}); the cgroup containment cannot be proven")
    first.close()
    # a daemon that died with a run cgroup still holding a process
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    left = first.root.parent / f"octipus-{int(dead.stdout)}"
    left.mkdir()
    cage = mod.CgroupCage(left / "run-1")
    sleeper = subprocess.Popen(cage.wrap(("sleep", "100"), {}))
    try:
        while sleeper.pid not in mod._cgroup_procs(cage.folder):
            time.sleep(0.01)
        chosen = choose_containment("auto")
        assert chosen.mechanism is ProcessContainment.CGROUP and chosen.detail == str(first.root)
        assert sleeper.wait(timeout=5) == -9 and not left.exists()
        chosen.close()
        assert not first.root.exists()
    finally:
        sleeper.kill()
        sleeper.wait()
