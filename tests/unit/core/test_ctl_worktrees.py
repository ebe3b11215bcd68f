"""``octipusctl worktrees`` and ``runs show`` without a daemon: the refusal of ``discard`` without
``--yes`` (exit 2, nothing asked), the daemon missing (exit 3), and a child's receipt as text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from octipusd.ctl import main as ctl
from octipusd.ctl.worktree_cmds import receipt_lines


@pytest.fixture
def runner(tmp_path: Path) -> CliRunner:
    return CliRunner(env={"OCTIPUS_DAEMON__SOCKET": str(tmp_path / "nobody.sock")})


def invoke(runner: CliRunner, *args: str) -> Any:
    return runner.invoke(ctl.app, list(args))


def test_discard_without_yes_exits_2_and_says_to_pass_it(runner: CliRunner) -> None:
    result = invoke(runner, "worktrees", "discard", "c1")
    assert result.exit_code == 2, result.output
    assert "add --yes" in result.output and "git branch -D" in result.output
    assert "not running" not in result.output


@pytest.mark.parametrize(
    "args",
    [
        ["worktrees"],
        ["worktrees", "list", "--json"],
        ["worktrees", "diff", "c1"],
        ["worktrees", "merge", "c1"],
        ["worktrees", "discard", "c1", "--yes"],
        ["runs", "show", "r1"],
    ],
)
def test_no_daemon_exits_3(runner: CliRunner, args: list[str]) -> None:
    result = invoke(runner, *args)
    assert result.exit_code == 3, result.output
    assert "octipusd is not running" in result.output


def test_a_full_receipt_names_branch_head_stat_merge_kept_ref_and_gates() -> None:
    lines = receipt_lines(
        {
            "worktree": {
                "id": "c1",
                "branch": "octipus/c1",
                "worktreePath": "/w/c1",
                "baseSha": "0123456789abcdef0123",
                "headSha": "fedcba9876543210fedc",
                "diffStat": "1 file changed, 1 insertion(+)",
                "filesChanged": 1,
                "merge": "skipped_moved",
                "mergeDetail": "the base 0123456789ab is no longer an ancestor of HEAD",
                "branchKept": True,
                "keptRef": "octipus/c1-detached",
                "project": "/src/p",
                "included": [".env"],
                "leftInPlace": True,
            },
            "setup": {"command": "npm ci", "exitCode": 1, "output": "npm ERR! missing lockfile\n"},
            "gates": [{"name": "lint", "status": "passed", "exitCode": 0, "required": False}],
            "attempts": ["r1", "r2"],
            "notes": ["NOT merged: octipus/c1-detached holds the work"],
            "future": {"x": 1},
        }
    )
    assert lines == [
        "worktree: branch octipus/c1, head fedcba987654 (base 0123456789ab)",
        "  files changed: 1; 1 file changed, 1 insertion(+)",
        "  merge: skipped_moved (the base 0123456789ab is no longer an ancestor of HEAD)",
        "  kept: octipus/c1-detached holds the work (octipusctl worktrees diff|merge|discard c1)",
        "  path: /w/c1 (project /src/p)",
        "  left in place: its directory is still there (octipusctl worktrees shows why)",
        "  included .env",
        "setup: npm ci exited 1",
        "  npm ERR! missing lockfile",
        "gates:",
        "  - lint: passed, exit 0",
        "attempts: r1, r2 (the first, then 1 contract retry; each attempt's run shows this final receipt)",
        "note: NOT merged: octipus/c1-detached holds the work",
        'future: {"x": 1}',
    ]


def test_a_receipt_without_a_worktree_says_why() -> None:
    lines = receipt_lines({"worktree": None, "worktreeSkipped": "its role is not coding", "gates": []})
    assert lines == ["no worktree: its role is not coding"]
    assert receipt_lines({}) == []
