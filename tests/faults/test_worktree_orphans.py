"""Children killed mid-run leave their worktree's work for a person, never deleted (issue 15 item 3).

Real ``claude`` parent and child against the scripted model, a real git project, a real daemon.
First the child's own vendor is SIGKILLed while the daemon lives: the child fails, its work is
committed on its branch, not merged, the branch kept and listed. Then the daemon itself is
SIGKILLed while a child works: the worktree is left with uncommitted work; the restarted daemon's
orphan reaper keeps it, reports why, and deletes nothing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from octipusd.testing.harness import DaemonHarness
from tests.e2e.conftest import Env
from tests.e2e.test_worktrees_claude import (
    ISOLATION,
    _bash,
    _children,
    _conversation,
    _git,
    _start,
    _text,
    _tool,
)

#: How long the stalled child's model call holds its turn (s): far longer than the test waits.
STALL_S = 300
#: Seconds in the past the left worktree's files are dated (over the reaper's one-hour minimum age).
OLD_S = 2 * 3600


def _script(marker: str) -> dict[str, Any]:
    return {
        "steps": [
            _tool("spawn_child", role="coding", brief=f"{marker} write then think forever"),
            _text("root done"),
        ],
        "conversations": [
            _conversation(
                marker,
                _bash("printf 'half done\\n' > work.txt"),
                _text("never", stall_seconds=STALL_S),
            )
        ],
    }


def _worktrees_root(env: Env) -> Path:
    return env.daemon.home / ".octipus" / "worktrees"


def _written(env: Env) -> Path:
    # the file exists (empty) before printf writes it: wait for its whole line, so nothing kills the child's
    # shell between the two
    found: list[Path] = []

    def written() -> bool:
        found.extend(p for p in _worktrees_root(env).glob("c*/work.txt") if p.read_text() == "half done\n")
        return bool(found)

    env.wait(written, 60, "the child's write")
    return found[0].parent


def _in_tree(tree: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cwd"]):
        with contextlib.suppress(psutil.Error):
            if proc.info["cwd"] and Path(proc.info["cwd"]).is_relative_to(tree):
                found.append(proc)
    return found


def test_a_child_whose_vendor_is_killed_keeps_its_work_on_its_branch(octipus: Callable[..., Env]) -> None:
    env = _start(octipus, _script("WT-K1"))
    session = env.new_session()
    root = env.post(session, "A child that will be killed.")
    tree = _written(env)
    env.wait(lambda: _in_tree(tree), 30, "the child's vendor in its worktree")
    for proc in _in_tree(tree):
        proc.send_signal(signal.SIGKILL)
    assert env.wait_final(root, timeout=90)["status"] == "succeeded"
    (child,) = _children(env, root)
    assert child["status"] == "failed", child
    wt = child["receipt"]["worktree"]
    assert wt["merge"] == "skipped_status" and wt["branchKept"] is True, wt
    assert not tree.exists()
    workspace = env.daemon.workspace
    assert not (workspace / "work.txt").exists()
    assert _git(workspace, "show", f"{wt['branch']}:work.txt") == "half done"
    [listed] = env.client.request("GET", "/worktrees")
    assert listed["id"] == wt["id"] and listed["state"] == "kept", listed
    assert listed["reaper_action"] == "kept" and "unmerged" in listed["reaper_reason"], listed


def test_after_a_daemon_crash_the_reaper_keeps_and_reports_the_left_worktree(
    octipus: Callable[..., Env], claude: Path, daemons: list[DaemonHarness]
) -> None:
    env = _start(octipus, _script("WT-K2"))
    session = env.new_session()
    env.post(session, "A child whose daemon dies.")
    tree = _written(env)
    worktree_id = tree.name
    env.daemon.stop(sig=signal.SIGKILL)
    for proc in _in_tree(tree):  # the killed daemon's vendors outlive it (their own sessions)
        with contextlib.suppress(psutil.Error):
            proc.kill()
    old = time.time() - OLD_S
    for name in (f"{worktree_id}.json", f"{worktree_id}.pid"):
        os.utime(_worktrees_root(env) / name, (old, old))
    again = DaemonHarness(env.daemon.root, env.model.base_url, claude, ISOLATION)
    daemons.append(again)
    again.start()
    env = Env(env.model, again)

    def swept() -> Any:
        reaper = env.client.request("GET", "/health")["worktree_reaper"]
        return reaper if reaper and reaper["sweeps"] >= 1 else None

    reaper = env.wait(swept, 60, "the start-up sweep")
    [report] = [r for r in reaper["reports"] if r["id"] == worktree_id]
    assert report["action"] == "kept" and "uncommitted changes" in report["reason"], report
    [listed] = env.client.request("GET", "/worktrees")
    assert listed["state"] == "left" and listed["reaper_action"] == "kept", listed
    # nothing was deleted: the directory, its uncommitted work and the branch are all there
    assert (tree / "work.txt").read_text() == "half done\n"
    assert _git(env.daemon.workspace, "branch", "--list", f"octipus/{worktree_id}") != ""
