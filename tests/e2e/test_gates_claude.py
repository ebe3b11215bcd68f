"""Command scorer gates and contract retries of a coding child, on the real claude (issue 15 item 5).

Seed 003 "Permissions and limits" (command scorers, ``swarm.contractRetries``). The root agent (real
``claude``, scripted model) spawns a coding child with ``gates``; the child (another real ``claude``)
edits files with Claude's ``Bash`` tool in its worktree. A retried child is a new child run whose
brief carries the failure: the script tells it apart by the retry note's words, listed first.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.e2e.conftest import Env
from tests.e2e.test_worktrees_claude import (
    _bash,
    _children,
    _conversation,
    _git,
    _start,
    _summary,
    _text,
    _tool,
    _tool_results,
)

RETRY_MARKER = "did not pass its gate checks"
STATE_GATE = {"name": "state", "command": "grep -q fixed state.txt"}


def _gated_start(octipus: Callable[..., Env], script: dict[str, Any], **extra: str) -> Env:
    env = _start(octipus, script, **extra)
    env.client.request("POST", "/rules", json={"level": "allow", "rule": "shell__run"})
    return env


def test_a_failing_gate_retries_the_child_in_the_same_worktree(octipus: Callable[..., Env]) -> None:
    """The first attempt leaves ``state.txt`` broken: the gate fails, the child is retried once with
    the failure in its brief, in the same worktree (its first attempt's files are still there); the
    second attempt fixes it, the gate passes and the branch is merged. The setup command ran first."""
    script = {
        "steps": [
            _tool("spawn_child", role="coding", brief="WT-G make state.txt say fixed", gates=[STATE_GATE]),
            _text("root done"),
        ],
        "conversations": [
            _conversation(
                RETRY_MARKER,
                _bash("test -f where1.txt && printf 'fixed\\n' > state.txt && pwd > where2.txt"),
                _text("G2 done"),
            ),
            _conversation(
                "WT-G",
                _bash("printf 'broken\\n' > state.txt && pwd > where1.txt && cat setup.log > seen-setup.txt"),
                _text("G1 done"),
            ),
        ],
    }
    env = _gated_start(octipus, script, OCTIPUS_SWARM__WORKTREESETUPCOMMAND="echo installed > setup.log")
    workspace = env.daemon.workspace
    (workspace / ".gitignore").write_text(".env\n*.log\n")
    _git(workspace, "commit", "-qam", "ignore logs")
    session = env.new_session()
    root = env.post(session, "One gated coding child.")
    assert env.wait_final(root, timeout=150)["status"] == "succeeded"
    first, second = _children(env, root)
    assert RETRY_MARKER in second["prompt"] and "grep -q fixed state.txt" in second["prompt"], second
    assert first["receipt"] == second["receipt"], (first["receipt"], second["receipt"])
    receipt = second["receipt"]
    assert receipt["attempts"] == [first["id"], second["id"]]
    assert [g["status"] for g in receipt["gates"]] == ["passed"], receipt["gates"]
    assert receipt["setup"]["status"] == "passed", receipt["setup"]
    wt = receipt["worktree"]
    assert wt["merge"] == "merged", wt
    # both attempts ran in the one worktree, and its work (both attempts') is now in the project
    assert (workspace / "state.txt").read_text() == "fixed\n"
    where1, where2 = (workspace / "where1.txt").read_text(), (workspace / "where2.txt").read_text()
    assert where1 == where2 and where1.strip() == wt["worktreePath"], (where1, where2, wt)
    assert (workspace / "seen-setup.txt").read_text() == "installed\n"
    summary = _summary(_tool_results(env, root)[0])
    assert summary["childRunId"] == first["id"] and summary["status"] == "succeeded", summary
    assert summary["attempts"] == [first["id"], second["id"]]


def test_a_required_non_retryable_gate_stops_retries(octipus: Callable[..., Env]) -> None:
    """A non-retryable gate fails beside a fixable one: no retry; the child's summary is failed with
    its gate results, its branch is not merged but kept, and the project is untouched."""
    gates = [{"name": "lint", "command": "false", "retryable": False}, STATE_GATE]
    script = {
        "steps": [
            _tool("spawn_child", role="coding", brief="WT-N break the state", gates=gates),
            _text("root done"),
        ],
        "conversations": [
            _conversation(RETRY_MARKER, _text("a retry must not happen")),
            _conversation("WT-N", _bash("printf 'broken\\n' > state.txt"), _text("N done")),
        ],
    }
    env = _gated_start(octipus, script)
    workspace = env.daemon.workspace
    session = env.new_session()
    root = env.post(session, "One child that cannot pass.")
    assert env.wait_final(root, timeout=120)["status"] == "succeeded"
    (child,) = _children(env, root)
    receipt = child["receipt"]
    assert [(g["name"], g["status"]) for g in receipt["gates"]] == [("lint", "failed"), ("state", "failed")]
    assert receipt["attempts"] == [child["id"]]
    wt = receipt["worktree"]
    assert wt["merge"] == "skipped_status" and wt["branchKept"] is True, wt
    assert not (workspace / "state.txt").exists()
    assert _git(workspace, "show", f"{wt['branch']}:state.txt") == "broken"
    summary = _summary(_tool_results(env, root)[0])
    assert summary["status"] == "failed" and "did not pass its gates" in summary["reason"], summary
    assert any(n.startswith("did not pass its gates") for n in summary["notes"]), summary
    assert not Path(wt["worktreePath"]).exists()
