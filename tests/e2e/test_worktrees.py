"""Child worktrees through a real octipusd and the real octipusctl (issue 15 items 3 and 6).

No vendor CLI is needed: the worktrees are made with the library on a real git repository, the
way a coding child's would be, and the child runs with their receipts are stored before the
daemon starts. ``octipusctl worktrees`` lists a kept branch, ``diff`` shows it, ``merge`` merges
it, ``discard --yes`` deletes another and ``discard`` without ``--yes`` changes nothing; ``runs
show`` renders the receipts; with ``swarm.worktreeIsolation`` on, the daemon's orphan reaper
sweeps at start-up and then periodically.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from octipus_worktrees import Worktree, WorktreeManager

from octipusd.errors import ApiError
from octipusd.store import Store
from octipusd.testing.harness import DaemonHarness
from tests.unit.worktrees.worktree_support import make_project

UNUSED_MODEL = "http://127.0.0.1:9"
#: Seconds an octipusctl command may take here.
CTL_TIMEOUT_S = 120.0
#: Seconds in the past the reaper's "old" worktrees were written (over its one-hour minimum age).
OLD_S = 2 * 3600.0
USER = ("-c", "user.name=Test User", "-c", "user.email=user@example.invalid", "-c", "commit.gpgsign=false")


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *USER, *args], cwd=cwd, capture_output=True, text=True, check=check)


def has_ref(repo: Path, ref: str) -> bool:
    return git(repo, "rev-parse", "--verify", "-q", f"refs/heads/{ref}", check=False).returncode == 0


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path)


@pytest.fixture(scope="module")
def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def kept(manager: WorktreeManager, project: Path, worktree_id: str, name: str, text: str) -> Worktree:
    """A worktree whose child wrote ``name`` and finished without a merge: its branch is kept."""
    wt = manager.create(project, worktree_id)
    (wt.path / name).write_text(text, encoding="utf-8")
    assert manager.finish(wt, merge=False).branch_kept
    return wt


def age(manager: WorktreeManager, worktree_id: str) -> None:
    """Make a worktree's record and pid file look written :data:`OLD_S` ago."""
    then = time.time() - OLD_S
    for name in (f"{worktree_id}.json", f"{worktree_id}.pid"):
        if (manager.root / name).exists():
            os.utime(manager.root / name, (then, then))


@pytest.fixture
def daemons(tmp_path: Path) -> Iterator[list[DaemonHarness]]:
    started: list[DaemonHarness] = []
    yield started
    for daemon in started:
        daemon.stop()


def start(daemons: list[DaemonHarness], root: Path, wt_root: Path, **env: str) -> DaemonHarness:
    daemon = DaemonHarness(root, UNUSED_MODEL, extra_env={"OCTIPUS_WORKTREES_DIR": str(wt_root), **env})
    daemons.append(daemon)
    return daemon.start()


def ctl(daemon: DaemonHarness, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the real octipusctl against ``daemon``."""
    return subprocess.run(
        [str(daemon.bindir / "octipusctl"), "--socket", str(daemon.socket), *args],
        env=daemon.env,
        capture_output=True,
        text=True,
        timeout=CTL_TIMEOUT_S,
    )


def listed(daemon: DaemonHarness) -> dict[str, dict[str, Any]]:
    shown = ctl(daemon, "worktrees", "--json")
    assert shown.returncode == 0, shown.stderr
    return {w["id"]: w for w in json.loads(shown.stdout)}


def test_octipusctl_reviews_merges_and_discards_kept_branches(
    tmp_path: Path, project: Path, dead_pid: int, daemons: list[DaemonHarness]
) -> None:
    wt_root = tmp_path / "worktrees"
    manager = WorktreeManager(wt_root)
    one = kept(manager, project, "c1", "notes.txt", "one\nTWO\nthree\n")
    two = kept(manager, project, "c2", "other.txt", "more work\x1b]52;c;aGk=\x07\n")  # writes a clipboard
    live = manager.create(project, "c3", owner_pid=os.getpid())
    left = manager.create(project, "c4", owner_pid=dead_pid)  # clean and merged: the reaper's
    age(manager, "c4")
    daemon = start(daemons, tmp_path / "octipus", wt_root)  # isolation off: no reaper runs

    table = ctl(daemon, "worktrees")
    assert table.returncode == 0, table.stderr
    assert "octipus/c1" in table.stdout and "unmerged branch octipus/c1 kept for review" in table.stdout
    found = listed(daemon)
    assert {i: w["state"] for i, w in found.items()} == {
        "c1": "kept",
        "c2": "kept",
        "c3": "live",
        "c4": "left",
    }
    assert found["c1"]["kept_ref"] == one.branch and not found["c1"]["exists"]
    assert found["c3"]["owner_alive"] and found["c3"]["reaper_action"] == "skipped_live"
    assert found["c4"]["reaper_action"] == "removed" and "would be removed" in found["c4"]["reaper_reason"]
    assert left.path.is_dir()  # listing only says what the reaper would do

    diff = ctl(daemon, "worktrees", "diff", "c1")
    assert diff.returncode == 0, diff.stderr
    assert "diff --git a/notes.txt b/notes.txt" in diff.stdout and "+TWO" in diff.stdout

    shown = ctl(daemon, "worktrees", "diff", "c2")  # the child's escape sequence, shown inert (piped too)
    assert shown.returncode == 0 and "+more work\\x1b]52;c;aGk=\\x07\n" in shown.stdout, shown
    assert "\x1b" not in shown.stdout and "\x07" not in shown.stdout
    exact = ctl(daemon, "worktrees", "diff", "c2", "--raw")  # for git apply: the diff unchanged
    assert exact.returncode == 0 and "+more work\x1b]52;c;aGk=\x07\n" in exact.stdout, exact

    refused = ctl(daemon, "worktrees", "discard", "c2")
    assert refused.returncode == 2 and "--yes" in refused.stderr, refused
    assert has_ref(project, two.branch) and (wt_root / "c2.json").is_file()

    merged = ctl(daemon, "worktrees", "merge", "c1")
    assert merged.returncode == 0 and "merged" in merged.stdout, merged
    assert (project / "notes.txt").read_text(encoding="utf-8") == "one\nTWO\nthree\n"
    assert not has_ref(project, one.branch)

    discarded = ctl(daemon, "worktrees", "discard", "c2", "--yes")
    assert discarded.returncode == 0 and "deleted octipus/c2" in discarded.stdout, discarded
    assert not has_ref(project, two.branch) and not (project / "other.txt").exists()
    assert set(listed(daemon)) == {"c3", "c4"}

    busy = ctl(daemon, "worktrees", "merge", "c3")
    assert busy.returncode == 1 and "live process" in busy.stderr, busy
    assert live.path.is_dir() and has_ref(project, live.branch)
    unknown = ctl(daemon, "worktrees", "diff", "c9")
    assert unknown.returncode == 2 and "no worktree 'c9'" in unknown.stderr, unknown
    bad = ctl(daemon, "worktrees", "diff", "a.b")
    assert bad.returncode == 2 and "letters, digits" in bad.stderr, bad


def test_the_api_refuses_a_discard_without_confirm_and_names_the_rule(
    tmp_path: Path, project: Path, daemons: list[DaemonHarness]
) -> None:
    wt_root = tmp_path / "worktrees"
    wt = kept(WorktreeManager(wt_root), project, "c1", "notes.txt", "changed\n")
    client = start(daemons, tmp_path / "octipus", wt_root).client()
    for body in ({}, {"confirm": False}):
        with pytest.raises(ApiError) as caught:
            client.request("POST", "/worktrees/c1/discard", json=body)
        assert caught.value.http_status == 400 and "confirm" in caught.value.message
    with pytest.raises(ApiError) as caught:
        client.request("GET", "/worktrees/a%20b/diff")
    assert caught.value.http_status == 400 and "letters, digits" in caught.value.message
    with pytest.raises(ApiError) as caught:
        client.request("POST", "/worktrees/c2/merge")
    assert caught.value.http_status == 404
    assert has_ref(project, wt.branch)
    assert client.request("GET", "/health")["worktree_reaper"] is None


RECEIPT: dict[str, Any] = {
    "worktree": {
        "id": "c9",
        "branch": "octipus/c9",
        "worktreePath": "/home/u/.octipus/worktrees/c9",
        "baseSha": "a" * 40,
        "headSha": "b" * 40,
        "diffStat": "2 files changed, 3 insertions(+), 1 deletion(-)",
        "filesChanged": 2,
        "merge": "conflict",
        "mergeDetail": "merge aborted, branch octipus/c9 kept: notes.txt",
        "branchKept": True,
        "keptRef": "octipus/c9",
        "nodeModulesLinked": True,
    },
    "worktreeSkipped": None,
    "gates": [
        {
            "name": "tests",
            "command": "pytest -q",
            "status": "failed",
            "exitCode": 1,
            "output": "1 failed",
            "required": True,
            "retryable": True,
        }
    ],
    "attempts": ["r-first", "r-retry-1"],
    "notes": ["work is on octipus/c9, NOT merged"],
}


def test_runs_show_renders_a_childs_receipt_and_lists_the_children(
    tmp_path: Path, daemons: list[DaemonHarness]
) -> None:
    url = f"sqlite:///{tmp_path / 'octipus.db'}"
    store = Store.open(url)
    try:
        session = store.create_session(workspace=str(tmp_path), adapter="claude-code")
        parent = store.create_run(session_id=session.id, prompt="split the work", owner="old")
        coder = store.create_run(
            session_id=session.id, prompt="code", owner="old", parent_run_id=parent.id, role="coding"
        )
        shared = store.create_run(
            session_id=session.id, prompt="more", owner="old", parent_run_id=parent.id, role="coding"
        )
        for run in (parent, coder, shared):
            store.finish_run(run.id, status="succeeded")
        store.set_run_receipt(coder.id, RECEIPT)
        skipped = "the project has uncommitted tracked changes (a worktree starts at HEAD without them)"
        store.set_run_receipt(shared.id, {"worktree": None, "worktreeSkipped": skipped, "gates": []})
    finally:
        store.close()
    daemon = start(daemons, tmp_path / "octipus", tmp_path / "worktrees", OCTIPUS_DATABASE_URL=url)

    shown = ctl(daemon, "runs", "show", parent.id)
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert f"child {coder.id} (coding): succeeded" in text and f"child {shared.id}" in text
    for needle in (
        "worktree: branch octipus/c9, head bbbbbbbbbbbb (base aaaaaaaaaaaa)",
        "files changed: 2; 2 files changed, 3 insertions(+), 1 deletion(-)",
        "merge: conflict (merge aborted, branch octipus/c9 kept: notes.txt)",
        "kept: octipus/c9 holds the work",
        "node_modules linked",
        "- tests: failed, exit 1 (required, retryable): pytest -q",
        "attempts: r-first, r-retry-1 (the first, then 1 contract retry",
        "note: work is on octipus/c9, NOT merged",
        f"no worktree: {skipped}",
    ):
        assert needle in text, (needle, text)
    child = ctl(daemon, "runs", "show", coder.id)
    assert child.returncode == 0 and f"coding child of run {parent.id}" in child.stdout, child
    assert "merge: conflict" in child.stdout
    as_json = [
        json.loads(line) for line in ctl(daemon, "runs", "show", parent.id, "--json").stdout.splitlines()
    ]
    assert as_json[0]["id"] == parent.id and as_json[1]["child"]["receipt"] == RECEIPT
    with pytest.raises(ApiError) as caught:
        daemon.client().request("GET", "/runs/nope/children")
    assert caught.value.http_status == 404


def test_the_reaper_sweeps_at_start_up_and_then_periodically(
    tmp_path: Path, project: Path, dead_pid: int, daemons: list[DaemonHarness]
) -> None:
    wt_root = tmp_path / "worktrees"
    manager = WorktreeManager(wt_root)
    gone = manager.create(project, "gone", owner_pid=dead_pid)  # clean and merged (no change)
    age(manager, "gone")
    young = manager.create(project, "young", owner_pid=dead_pid)
    unmerged = kept(manager, project, "unmerged", "notes.txt", "kept for review\n")
    daemon = start(
        daemons,
        tmp_path / "octipus",
        wt_root,
        SWARM_WORKTREE_ISOLATION="true",
        OCTIPUS_SWARM__ORPHANREAPERINTERVALMS="1000",
    )
    client = daemon.client()

    def reaper_after(sweeps: int) -> Any:
        status = client.request("GET", "/health")["worktree_reaper"]
        return status if status and status["sweeps"] >= sweeps else None

    first = daemon.wait_until(lambda: reaper_after(1), 60.0, "the start-up sweep")
    assert first["interval_ms"] == 1000 and first["error"] is None
    actions = {r["id"]: r["action"] for r in first["reports"]}
    assert actions == {"gone": "removed", "young": "skipped_young", "unmerged": "kept"}, first
    assert not gone.path.exists() and not has_ref(project, gone.branch)
    assert young.path.is_dir() and has_ref(project, unmerged.branch)
    assert "worktree reaper: gone removed" in daemon.log()

    later = kept(manager, project, "later", "other.txt", "merged by a person\n")
    git(project, "merge", "-q", "--no-ff", "--no-edit", later.branch)
    daemon.wait_until(  # the log line is written once the sweep dropped the record and the branch
        lambda: "worktree reaper: later dropped" in daemon.log(),
        60.0,
        "a periodic sweep to drop the merged kept branch",
    )
    assert not (wt_root / "later.json").exists() and not has_ref(project, later.branch)
    assert "merged into main" in daemon.log()
    assert has_ref(project, unmerged.branch)  # never an unmerged branch
    shown = ctl(daemon, "health")
    assert shown.returncode == 0 and "worktree reaper: every 1 s" in shown.stdout, shown
