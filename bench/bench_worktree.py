"""Benchmark: a coding child's worktree lifecycle (issue 15) against plain ``git worktree``.

For a repository of ``--files`` files (10,000 by default, in 100 folders), each round times:

* **octipus**: :class:`octipus_worktrees.WorktreeManager` ``create`` (eligibility, pid and record
  files, ``git worktree add`` on a new branch), one changed file, ``finish`` without a merge (its
  uncommitted work committed with hooks off, diff stat, files changed) and the removal that keeps
  the branch reachable;
* **git**: the same by hand with plain ``git worktree add -b``, ``git add -A``, ``git commit`` and
  ``git worktree remove`` (the baseline, measured in the same run, alternating with the other).

It prints the median wall time of each (ms) and their ratio. Usage::

    .venv/bin/python bench/bench_worktree.py [--files 10000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from octipus_worktrees import WorktreeManager
from summary import record

GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@localhost",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@localhost",
}


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True)


def _repository(root: Path, files: int) -> Path:
    """A repository of ``files`` small files in 100 folders, one commit on ``main``."""
    repo = root / "project"
    for n in range(files):
        folder = repo / f"d{n % 100:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{n}.txt").write_text(f"file {n}\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "initial")
    return repo


def _octipus_round(manager: WorktreeManager, repo: Path, n: int) -> float:
    start = time.perf_counter()
    worktree = manager.create(repo, f"b{n:04d}")
    (worktree.path / "d00" / "f0.txt").write_text(f"changed in round {n}\n")
    report = manager.finish(worktree, merge=False)
    elapsed = time.perf_counter() - start
    assert report.files_changed == 1, report
    return elapsed


def _git_round(root: Path, repo: Path, n: int) -> float:
    path = root / "plain" / f"g{n:04d}"
    start = time.perf_counter()
    _git(repo, "worktree", "add", "-q", "-b", f"plain/g{n:04d}", str(path))
    (path / "d00" / "f0.txt").write_text(f"changed in round {n}\n")
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "--no-verify", "-m", "work")
    _git(repo, "worktree", "remove", str(path))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, default=10_000, help="files in the repository")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of each (alternating)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-worktree-") as tmp:
        root = Path(tmp)
        repo = _repository(root, args.files)
        manager = WorktreeManager(root / "worktrees")
        octipus, plain = [], []
        for n in range(args.rounds):
            octipus.append(_octipus_round(manager, repo, n))
            plain.append(_git_round(root, repo, n))
        ours, theirs = statistics.median(octipus) * 1000, statistics.median(plain) * 1000
    print(f"files {args.files}: octipus {ours:.0f} ms, plain git {theirs:.0f} ms, ratio {ours / theirs:.2f}")
    record(f"worktree create+commit+remove, {args.files} files: octipus / plain git", f"{ours / theirs:.2f}")
    record(f"worktree create+commit+remove, {args.files} files (octipus)", f"{ours:.0f} ms")


if __name__ == "__main__":
    main()
