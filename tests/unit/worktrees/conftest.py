"""Real git repositories for the worktree tests: a project with one commit and a worktrees root."""

from __future__ import annotations

from pathlib import Path

import pytest
from octipus_worktrees import WorktreeManager
from worktree_support import git


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A repository on ``main`` with ``notes.txt`` (three lines) committed."""
    repo = tmp_path / "project"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "notes.txt").write_text("one\ntwo\nthree\n", encoding="utf-8")
    git(repo, "add", "notes.txt")
    git(repo, "commit", "-q", "-m", "initial")
    return repo.resolve()


@pytest.fixture
def manager(tmp_path: Path) -> WorktreeManager:
    return WorktreeManager(tmp_path / "worktrees")
