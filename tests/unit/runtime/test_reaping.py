"""The daemon's orphan reaper on real git: a sweep decides every worktree in worker threads, logs
each report and keeps the last sweep; ``run`` sweeps at once and then every interval."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from octipus_worktrees import ReapAction, WorktreeManager

from octipusd.runtime.reaping import OrphanReaper
from tests.unit.worktrees.worktree_support import make_project

OLD_S = 2 * 3600.0  # seconds in the past the "old" worktree's files were written


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path)


@pytest.fixture
def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.mark.anyio
async def test_a_sweep_removes_reports_logs_and_is_kept(
    project: Path, tmp_path: Path, dead_pid: int, caplog: pytest.LogCaptureFixture
) -> None:
    manager = WorktreeManager(tmp_path / "worktrees")
    gone = manager.create(project, "gone", owner_pid=dead_pid)
    then = time.time() - OLD_S
    for name in ("gone.json", "gone.pid"):
        os.utime(manager.root / name, (then, then))
    kept = manager.create(project, "kept")
    (kept.path / "notes.txt").write_text("unmerged\n", encoding="utf-8")
    manager.finish(kept, merge=False)
    live = manager.create(project, "live", owner_pid=os.getpid())
    reaper = OrphanReaper(manager, interval_s=3600.0)
    with caplog.at_level(logging.INFO, logger="octipusd.reaper"):
        sweep = await reaper.sweep()
    actions = {r.id: r.action for r in sweep.reports}
    assert actions == {"gone": ReapAction.REMOVED, "kept": ReapAction.KEPT, "live": ReapAction.SKIPPED_LIVE}
    assert sweep.error is None and reaper.last is sweep and reaper.sweeps == 1
    assert not gone.path.exists() and live.path.is_dir()
    assert "worktree reaper: kept kept" in caplog.text and "unmerged branch octipus/kept" in caplog.text


@pytest.mark.anyio
async def test_run_sweeps_at_once_and_then_every_interval(project: Path, tmp_path: Path) -> None:
    manager = WorktreeManager(tmp_path / "worktrees")
    manager.create(project, "c1", owner_pid=os.getpid())
    reaper = OrphanReaper(manager, interval_s=0.05)
    async with anyio.create_task_group() as tg:
        await tg.start(reaper.run)
        with anyio.fail_after(30):
            while reaper.sweeps < 3:  # noqa: ASYNC110 - the reaper signals no sweep; its count is read
                await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    assert reaper.last is not None and [r.id for r in reaper.last.reports] == ["c1"]
