"""What the review page tests share: a store seeded with everything the review pages show (a
pending approval, an uncertain action, a kept child worktree on a real git repository with the
child run whose receipt names it, runs with usage), and an HTTP client on the daemon's socket.

Agent and vendor text in the seed carries HTML (``HOSTILE``) so the tests see it escaped.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import httpx
from octipus_worktrees import WorktreeManager

from octipusd.store import Store
from tests.unit.store.test_usage_by import Seeded, seed_usage
from tests.unit.worktrees.worktree_support import make_project

#: Text written where an agent or vendor writes: it must reach the page escaped, never as markup.
HOSTILE = '<img src=x id="pwned">'
#: The kept child worktree's id.
WORKTREE_ID = "c1"
#: The file the child changed, its old and new content (line 2 replaced, line 4 added).
CHANGED_FILE = "notes.txt"
OLD_TEXT = "one\ntwo\nthree\n"
NEW_TEXT = "one\nTWO <b>bold</b>\nthree\nfour\n"


@dataclass(frozen=True)
class ReviewSeed:
    """Ids of what :func:`seed_review` wrote."""

    url: str
    project: Path
    worktrees: Path
    usage: Seeded
    approval_id: str
    action_id: str
    parent_run_id: str
    child_run_id: str


def seed_review(tmp_path: Path, workspace: Path) -> ReviewSeed:
    """Write the review pages' material into a new SQLite database and a real git repository.

    The project's ``notes.txt`` holds :data:`OLD_TEXT`; the child worktree ``c1`` (root
    ``tmp_path/worktrees``) changed it to :data:`NEW_TEXT` and finished without a merge, so its
    branch ``octipus/c1`` is kept. Session ``usage.with_row`` (workspace: the project) has a
    finished parent run and its finished child run, whose receipt names ``c1``; its workspace is
    ``workspace`` (the daemon's, so a test can start a turn in it).
    """
    project = make_project(tmp_path)  # notes.txt: OLD_TEXT, committed
    manager = WorktreeManager(tmp_path / "worktrees")
    wt = manager.create(project, WORKTREE_ID)
    (wt.path / CHANGED_FILE).write_text(NEW_TEXT, encoding="utf-8")
    assert manager.finish(wt, merge=False).branch_kept
    url = f"sqlite:///{tmp_path / 'octipus.db'}"
    with Store.open(url) as store:
        usage = seed_usage(store, title=f"refactor {HOSTILE}", workspace=str(workspace))
        session_id = usage.with_row
        parent = store.create_run(session_id=session_id, prompt="split the work", owner="old")
        child = store.create_run(
            session_id=session_id, prompt="code", owner="old", parent_run_id=parent.id, role="coding"
        )
        for run in (parent, child):
            store.finish_run(run.id, status="succeeded")
        store.set_run_receipt(
            child.id,
            {
                "worktree": {
                    "id": WORKTREE_ID,
                    "branch": wt.branch,
                    "diffStat": "1 file changed",
                    "merge": "skipped",
                },
                "gates": [],
                "notes": [f"kept for review {HOSTILE}"],
            },
        )
        approval = store.create_approval(
            run_id=None,
            session_id=session_id,
            tool_id="cli-native:Bash",
            subject=f"rm -rf build {HOSTILE}",
            reason="Bash is ASK in this workspace",
            input={"command": "rm -rf build"},
            explanation=None,
            vendor_request_id=None,
            expires_at=None,
        )
        action = store.start_action(
            user="someone",
            session_id=session_id,
            run_id=None,
            agent=None,
            origin="manual",
            tool="deploy.push",
            args_hash="0" * 64,
            risk_class="compensatable",
            owner="old",
            deadline_seconds=3600.0,
        )
        store.finish_action(action.id, outcome="uncertain", detail=f"the connection dropped {HOSTILE}")
    return ReviewSeed(
        url=url,
        project=project,
        worktrees=tmp_path / "worktrees",
        usage=usage,
        approval_id=approval.id,
        action_id=action.id,
        parent_run_id=parent.id,
        child_run_id=child.id,
    )


def socket_client(socket: Path) -> httpx.Client:
    """An HTTP client on the daemon's Unix socket (no access checks there)."""
    return httpx.Client(
        transport=httpx.HTTPTransport(uds=str(socket)), base_url="http://octipusd", timeout=30.0
    )
