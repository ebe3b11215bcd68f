"""Real git repositories for the worktree tests: a project with one commit and a worktrees root."""

from __future__ import annotations

from pathlib import Path

import pytest
from octipus_worktrees import WorktreeManager
from worktree_support import make_project


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A repository on ``main`` with ``notes.txt`` (three lines) committed."""
    return make_project(tmp_path)


@pytest.fixture
def manager(tmp_path: Path) -> WorktreeManager:
    return WorktreeManager(tmp_path / "worktrees")
