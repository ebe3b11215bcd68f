"""A git worktree per coding child, on the real claude binary (issue 15 items 2-4).

Seed 003 "Optional git worktree per coding child", FACTS.md §1. The root agent (real ``claude``,
scripted model) spawns coding children; each child is another real ``claude`` whose scripted
conversation is picked by a marker in its brief (``WT-...``) and edits files with Claude's own
``Bash`` tool (allowed by a rule), in the directory Octipus started it in. The session's workspace
is a real git repository; ``SWARM_WORKTREE_ISOLATION=true`` turns isolation on.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.e2e.conftest import Env

ISOLATION = {"SWARM_WORKTREE_ISOLATION": "true"}


def _tool(name: str, **arguments: Any) -> dict[str, Any]:
    return {"content": [{"type": "tool_use", "name": f"mcp__octipus__{name}", "input": arguments}]}


def _bash(command: str) -> dict[str, Any]:
    return {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": command}}]}


def _text(text: str, **extra: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], **extra}


def _conversation(match: str, *steps: dict[str, Any]) -> dict[str, Any]:
    return {"match": match, "steps": list(steps)}


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=T", "-c", "user.email=t@localhost", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def _repo(workspace: Path) -> Path:
    """Make the session workspace a git repository with one commit (``shared.txt``, ``.gitignore``)."""
    _git(workspace, "init", "-q", "-b", "main")
    (workspace / "shared.txt").write_text("base\n")
    (workspace / ".gitignore").write_text(".env\n")
    _git(workspace, "add", "-A")
    _git(workspace, "commit", "-q", "-m", "base")
    return workspace


def _start(octipus: Callable[..., Env], script: dict[str, Any], **extra: str) -> Env:
    env = octipus(script, extra_env={**ISOLATION, **extra})
    for level, rule in (
        ("allow", "spawn_child"),
        ("allow", "collect_children"),
        ("allow", "cli-native:Bash"),
    ):
        env.client.request("POST", "/rules", json={"level": level, "rule": rule})
    _repo(env.daemon.workspace)
    return env


def _children(env: Env, run_id: str) -> list[dict[str, Any]]:
    session = env.run(run_id)["session_id"]
    return [env.run(r["id"]) for r in _runs(env, session) if r["parent_run_id"] == run_id]


def _runs(env: Env, session: str) -> list[dict[str, Any]]:
    found = env.client.request("GET", "/runs", params={"session_id": session, "limit": 1000})
    return sorted(found, key=lambda r: r["turn_index"])


def _child(env: Env, session: str, marker: str) -> dict[str, Any]:
    found = [r for r in _runs(env, session) if r["parent_run_id"] and marker in r["prompt"]]
    assert len(found) == 1, found
    return env.run(found[0]["id"])


def _notices(env: Env, run_id: str) -> list[str]:
    return [e["data"]["message"] for e in env.events(run_id) if e["kind"] == "notice"]


def _tool_results(env: Env, run_id: str) -> list[dict[str, Any]]:
    return [e["data"] for e in env.events(run_id) if e["kind"] == "tool_result"]


def _summary(result: dict[str, Any]) -> dict[str, Any]:
    """The JSON body of an Octipus tool result (before the appended run context)."""
    text = result["content"]
    return dict(json.loads(text.split("\n[octipus run context]")[0]))


def test_two_coding_children_edit_one_file_in_parallel_one_merges_the_other_conflicts(
    octipus: Callable[..., Env],
) -> None:
    """Both children change ``shared.txt`` in their own worktrees at once; the first to finish is
    merged into main, the other's merge conflicts, is aborted and its branch kept, and its receipt
    and the parent's summary say so. No worktree directory is left; main is clean."""
    script = {
        "steps": [
            _tool("spawn_child", role="coding", brief="WT-A change shared.txt", detach=True),
            _tool("spawn_child", role="coding", brief="WT-B change shared.txt", detach=True),
            _tool("collect_children", timeoutSeconds=120),
            _text("root done"),
        ],
        "conversations": [
            _conversation(
                "WT-A", _bash("printf 'from A\\n' > shared.txt && pwd > where-a.txt"), _text("A done")
            ),
            _conversation(
                "WT-B",
                _bash("printf 'from B\\n' > shared.txt && pwd > where-b.txt"),
                _text("B done", delay_seconds=3),
            ),
        ],
    }
    env = _start(octipus, script)
    workspace = env.daemon.workspace
    session = env.new_session()
    root = env.post(session, "Two coding children, one file.")
    final = env.wait_final(root, timeout=150)
    assert final["status"] == "succeeded", final
    children = _children(env, root)
    assert len(children) == 2, children
    by_merge = {c["receipt"]["worktree"]["merge"]: c for c in children}
    assert set(by_merge) == {"merged", "conflict"}, [c["receipt"] for c in children]
    merged, conflicted = (
        by_merge["merged"]["receipt"]["worktree"],
        by_merge["conflict"]["receipt"]["worktree"],
    )
    # each child worked in its own worktree, not in the project
    for wt in (merged, conflicted):
        assert wt["worktreePath"].startswith(str(env.daemon.home / ".octipus" / "worktrees")), wt
        assert wt["filesChanged"] == 2 and "2 files changed" in wt["diffStat"], wt
        assert not Path(wt["worktreePath"]).exists(), wt
        assert wt["baseSha"] != wt["headSha"]
    assert merged["branchKept"] is False
    assert conflicted["branchKept"] is True and conflicted["keptRef"] == conflicted["branch"]
    assert "shared.txt" in conflicted["mergeDetail"], conflicted
    # the project holds the merged child's work, is clean and not mid-merge
    assert _git(workspace, "status", "--porcelain") == ""
    assert (workspace / "shared.txt").read_text() in ("from A\n", "from B\n")
    branches = _git(workspace, "branch", "--format=%(refname:short)").split()
    assert conflicted["branch"] in branches and merged["branch"] not in branches, branches
    # the kept branch holds the other child's work
    assert _git(workspace, "show", f"{conflicted['branch']}:shared.txt") in ("from A", "from B")
    # the parent's collected summaries carry the same receipts and name the kept branch
    collected = _summary(_tool_results(env, root)[2])["children"]
    notes = {c["worktree"]["merge"]: c.get("notes", []) for c in collected}
    assert any(f"NOT merged: its work is on {conflicted['branch']}" in n for n in notes["conflict"]), notes


def test_a_dirty_project_disables_isolation_for_that_spawn(octipus: Callable[..., Env]) -> None:
    """An uncommitted tracked change in the project: the coding child runs on the shared tree and
    its receipt says why; a non-coding child never gets a worktree either."""
    script = {
        "steps": [
            _tool("spawn_child", role="coding", brief="WT-D work on the dirty project"),
            _text("root done"),
        ],
        "conversations": [_conversation("WT-D", _bash("pwd > where.txt"), _text("D done"))],
    }
    env = _start(octipus, script)
    workspace = env.daemon.workspace
    (workspace / "shared.txt").write_text("uncommitted\n")
    session = env.new_session()
    root = env.post(session, "Spawn on a dirty tree.")
    assert env.wait_final(root, timeout=90)["status"] == "succeeded"
    (child,) = _children(env, root)
    receipt = child["receipt"]
    assert receipt["worktree"] is None, receipt
    assert "uncommitted tracked changes" in receipt["worktreeSkipped"], receipt
    assert (workspace / "where.txt").read_text().strip() == str(workspace.resolve())
    assert any("uncommitted tracked changes" in n for n in _notices(env, child["id"]))


def test_worktreeinclude_copies_env_and_a_removed_worktree_halts_its_child(
    octipus: Callable[..., Env],
) -> None:
    """``.env`` listed in ``.worktreeinclude`` is copied into the new worktree (the child reads it
    there); a worktree deleted under the live child halts it with a clear reason instead of letting
    it go on elsewhere."""
    script = {
        "steps": [
            _tool("spawn_child", role="coding", brief="WT-E read the env then wait"),
            _text("root done"),
        ],
        "conversations": [
            _conversation(
                "WT-E",
                _bash("cat .env > seen-env.txt && pwd > where.txt"),
                _text("E never finishes", stall_seconds=60),
            )
        ],
    }
    env = _start(octipus, script)
    workspace = env.daemon.workspace
    (workspace / ".worktreeinclude").write_text(".env\n")
    _git(workspace, "add", ".worktreeinclude")
    _git(workspace, "commit", "-q", "-m", "include")
    (workspace / ".env").write_text("TOKEN=local\n")
    session = env.new_session()
    root = env.post(session, "Spawn, then lose the worktree.")
    child_id = env.wait(lambda: [r for r in _runs(env, session) if r["parent_run_id"]], 30, "the child")[0][
        "id"
    ]
    where: list[Path] = []

    def seen() -> bool:
        # `cat .env > seen-env.txt && pwd > where.txt`: seen-env.txt exists (empty) before cat writes it; a
        # complete where.txt says the child's copy is finished.
        found = [
            path.with_name("seen-env.txt")
            for path in (env.daemon.home / ".octipus" / "worktrees").glob("c*/where.txt")
            if path.read_text().endswith("\n")
        ]
        where.extend(found)
        return bool(found)

    env.wait(seen, 60, "the child to read .env in its worktree")
    assert where[0].read_text() == "TOKEN=local\n"
    tree = where[0].parent
    subprocess.run(["rm", "-rf", str(tree)], check=True)
    child = env.wait_final(child_id, timeout=60)
    assert child["status"] == "failed", child
    assert f"its worktree {tree} was removed while it ran" in child["reason"], child
    assert not (workspace / "seen-env.txt").exists()
    # the receipt is stored once the child's worktree is finished, just after its run ended
    receipt = env.wait(lambda: env.run(child_id)["receipt"], 30, "the child's receipt")
    assert receipt["worktree"]["merge"] == "failed", receipt
    assert receipt["worktree"]["included"] == [".env"], receipt
    assert env.wait_final(root, timeout=60)["status"] == "succeeded"
