"""Running git as the project's owner would in the worktree tests (their hooks included)."""

from __future__ import annotations

import subprocess
from pathlib import Path

#: The test's own commits (the project's owner, not Octipus).
USER = ("-c", "user.name=Test User", "-c", "user.email=user@example.invalid", "-c", "commit.gpgsign=false")


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run git as the project's owner would (their hooks included)."""
    return subprocess.run(["git", *USER, *args], cwd=cwd, capture_output=True, text=True, check=check)


def out(cwd: Path, *args: str) -> str:
    return git(cwd, *args).stdout.strip()


def make_project(tmp_path: Path) -> Path:
    """A repository ``<tmp_path>/project`` on ``main`` with ``notes.txt`` (three lines) committed;
    its real path."""
    repo = tmp_path / "project"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "notes.txt").write_text("one\ntwo\nthree\n", encoding="utf-8")
    git(repo, "add", "notes.txt")
    git(repo, "commit", "-q", "-m", "initial")
    return repo.resolve()
